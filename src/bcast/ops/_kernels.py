"""The kernels: what each operator computes, for NumPy (``out=``) and for any array API.

A kernel never broadcasts by itself: the engine hands it operands already at the output's
rank (the plan's aligned shapes), so the library's own broadcasting is exactly the plan.
NumPy kernels of the plain element-wise operators are one ufunc call writing into ``out``;
the others (integer Div, integer Pow, Where, PRelu, Gemm) are a few calls, noted on each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import numpy as np

from bcast.arrays.dtypes import dtype_name
from bcast.engine import Kernel

__all__ = [
    "BINARY",
    "COPY",
    "FLOAT_DIV",
    "FLOAT_POW",
    "INT_DIV",
    "INT_FLOAT_POW",
    "INT_POW",
    "PRELU",
    "WHERE",
    "gemm_kernel",
    "readable",
    "ufunc_kernel",
    "variadic_kernel",
]


def ufunc_kernel(numpy_name: str, array_api_name: str, compiled: str | None = None) -> Kernel:
    """Return the kernel that is one ufunc of two operands (NumPy name, array-API name)."""
    ufunc = getattr(np, numpy_name)

    def run_numpy(out: Any, a: Any, b: Any) -> None:
        ufunc(a, b, out=out)

    def run_generic(xp: Any, a: Any, b: Any) -> Any:
        return getattr(xp, array_api_name)(a, b)

    return Kernel(run_numpy, run_generic, single_pass=True, ufunc=ufunc, compiled=compiled)


BINARY: Final[dict[str, Kernel]] = {
    "add": ufunc_kernel("add", "add", "add"),
    "sub": ufunc_kernel("subtract", "subtract", "sub"),
    "mul": ufunc_kernel("multiply", "multiply", "mul"),
    "equal": ufunc_kernel("equal", "equal", "equal"),
    "greater": ufunc_kernel("greater", "greater", "greater"),
    "less": ufunc_kernel("less", "less", "less"),
    "and_": ufunc_kernel("logical_and", "logical_and", "and_"),
    "or_": ufunc_kernel("logical_or", "logical_or", "or_"),
    "xor": ufunc_kernel("logical_xor", "logical_xor", "xor"),
    "max": ufunc_kernel("maximum", "maximum"),
    "min": ufunc_kernel("minimum", "minimum"),
}
"""The operators that are one ufunc of two operands with the output dtype of the table."""

FLOAT_DIV: Final = ufunc_kernel("divide", "divide", "div")


# -- integer Div: truncation toward zero (ONNX Div: "truncating division") --------------------


def readable(x: Any) -> bool:
    """Tell whether ``x``'s values can be read now, to check them before computing.

    Not for Dask arrays (reading computes the graph; bcast.arrays.dask checks each block as it is
    computed) nor for JAX tracers (inside ``jax.jit``, ``vmap``, ``grad``: no values exist
    yet, so the checks cannot run there). array-api-compat's ``is_lazy_array`` is True for
    every JAX array, concrete ones too, which would skip the checks on all of JAX.
    """
    from array_api_compat import is_jax_array, is_lazy_array

    if is_jax_array(x):
        import jax

        return not isinstance(x, jax.core.Tracer)
    return not is_lazy_array(x)


def _zero_divisor(op: str) -> ZeroDivisionError:
    return ZeroDivisionError(f"{op}: integer division by zero")


def _int_div_numpy(out: Any, a: Any, b: Any) -> None:
    # floor division, then +1 where the exact quotient is negative and not whole: three
    # passes and a boolean mask of the output's size.
    if out.size and not np.all(b):
        raise _zero_divisor("div")
    np.floor_divide(a, b, out=out)
    if out.dtype.kind == "i":
        fix = np.remainder(a, b) != 0
        fix &= (a < 0) != (b < 0)
        np.add(out, 1, out=out, where=fix)


def _int_div_generic(xp: Any, a: Any, b: Any) -> Any:
    # No check under jax.jit (see `readable`): there a zero divisor gives what JAX's
    # floor_divide gives, corrected toward zero.
    if readable(b) and bool(xp.any(b == 0)):
        raise _zero_divisor("div")
    quotient = xp.floor_divide(a, b)
    fix = (xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return xp.where(fix, quotient + 1, quotient)


def _int_div_precheck(out: Any, a: Any, b: Any) -> None:
    if out.size and not np.all(b):
        raise _zero_divisor("div")


INT_DIV: Final = Kernel(
    _int_div_numpy, _int_div_generic, precheck=_int_div_precheck, cost=4.0, passes=4
)


# -- Pow: output dtype = the base's (Pow-15) -------------------------------------------------


def _float_pow_numpy(out: Any, a: Any, b: Any) -> None:
    # NumPy picks the loop from both dtypes (float32 ** int64 runs in float64, like the C++
    # std::pow overloads onnxruntime calls) and rounds into the base's dtype.
    np.power(a, b, out=out, casting="same_kind")


def _float_pow_generic(xp: Any, a: Any, b: Any) -> Any:
    if a.dtype == b.dtype:
        return xp.pow(a, b)
    wide = xp.pow(xp.astype(a, xp.float64), xp.astype(b, xp.float64))
    return xp.astype(wide, a.dtype)


FLOAT_POW: Final = Kernel(
    _float_pow_numpy,
    _float_pow_generic,
    single_pass=True,
    ufunc=np.power,
    cost=16.0,
    compiled="pow",  # float32 ** float32 only, within one unit in the last place of powf
)
"""``ufunc`` serves operands of one dtype only, which is all the tiny path takes."""


def _int_float_pow_numpy(out: Any, a: Any, b: Any) -> None:
    # Computed in float64, then converted to the integer base dtype by truncation (as the
    # ONNX reference and onnxruntime do: 2 ** 0.5 -> 1, 4 ** -1.0 -> 0). NaN and values out
    # of range convert as C does on the platform (INT_MIN on x86-64, like both peers).
    np.power(a, b, out=out, dtype=np.float64, casting="unsafe")


def _int_float_pow_generic(xp: Any, a: Any, b: Any) -> Any:
    wide = xp.pow(xp.astype(a, xp.float64), xp.astype(b, xp.float64))
    return xp.astype(wide, a.dtype)


INT_FLOAT_POW: Final = Kernel(
    _int_float_pow_numpy, _int_float_pow_generic, single_pass=True, cost=16.0
)


def _zero_to_negative(op: str) -> ZeroDivisionError:
    return ZeroDivisionError(f"{op}: 0 cannot be raised to a negative integer power")


def _negative_powers(xp: Any, a: Any, b: Any) -> Any:
    """Truncate ``a ** b`` for negative ``b``: 1 for a base of 1, +-1 for -1, 0 otherwise."""
    one = xp.ones_like(a)
    odd = (b % 2) != 0
    minus = xp.where(odd, -one, one)
    return xp.where(a == 1, one, xp.where(a == -1, minus, xp.zeros_like(a)))


def _uint64_exponent(xp: Any, exponent: Any) -> Any:
    """Fold a uint64 exponent, already cast to int64, back to one with the same powers.

    NumPy computes int64 ** uint64 in float64 (inexact past 2**53), and the cast to int64
    turns the exponents from 2**63 up negative. An int64 power wraps modulo 2**64, where
    ``a ** e`` depends only on ``e`` modulo 2**62 once ``e >= 64`` (odd bases: the units
    modulo 2**64 have exponent 2**62; even bases: 0). So those exponents become
    ``e % 2**62 + 2**62``: the same wrapped power, with the same parity for the base -1.

    >>> import numpy as np
    >>> (np.array([3], np.int64) ** np.array([39], np.uint64)).dtype  # NumPy's float path
    dtype('float64')
    >>> e = _uint64_exponent(np, np.array([39, 2**63 + 3], np.uint64).astype(np.int64))
    >>> e.tolist()
    [39, 4611686018427387907]
    >>> pow(3, 2**63 + 3, 2**64) == pow(3, e.tolist()[1], 2**64)
    True
    """
    return xp.where(exponent < 0, (exponent & (2**62 - 1)) | 2**62, exponent)


def _int_pow_numpy(out: Any, a: Any, b: Any) -> None:
    # Exact integer powers (NumPy's, wrapping on overflow) for exponents >= 0; a negative
    # exponent gives the truncated real power, as onnxruntime (NumPy and the ONNX reference
    # raise instead). The negative case costs masks of the output's size. A uint64 exponent
    # is taken to int64 first, or NumPy would compute int ** uint64 in float64.
    if b.dtype == np.uint64:
        b = _uint64_exponent(np, b.astype(np.int64))
    negative = b < 0 if b.dtype.kind == "i" else None
    if negative is None or not negative.any():
        np.power(a, b, out=out, casting="unsafe")
        return
    if out.size and np.any((a == 0) & negative):
        raise _zero_to_negative("pow")
    np.power(a, np.where(negative, 0, b), out=out, casting="unsafe")
    np.copyto(out, _negative_powers(np, a, b), where=negative, casting="unsafe")


def _int_pow_generic(xp: Any, a: Any, b: Any) -> Any:
    # No check under jax.jit (see `readable`): there 0 to a negative power gives 0.
    # Operands of one dtype stay in it (a power wraps the same in any width at least the
    # base's; and JAX without x64 has no int64); mixed ones meet in int64.
    if a.dtype == b.dtype:
        wide, exponent = a, b
    else:
        wide, exponent = xp.astype(a, xp.int64), xp.astype(b, xp.int64)
    if b.dtype == xp.uint64:
        exponent = _uint64_exponent(xp, exponent)
    negative = exponent < 0
    if readable(a) and readable(b) and bool(xp.any((wide == 0) & negative)):
        raise _zero_to_negative("pow")
    zero = xp.zeros_like(exponent)
    result = xp.pow(wide, xp.where(negative, zero, exponent))
    result = xp.where(negative, _negative_powers(xp, wide, exponent), result)
    return xp.astype(result, a.dtype)


def _int_pow_precheck(out: Any, a: Any, b: Any) -> None:
    # Only an exponent array with negative entries needs the full check.
    if out.size and b.dtype.kind == "i" and np.any(b < 0) and np.any((a == 0) & (b < 0)):
        raise _zero_to_negative("pow")


INT_POW: Final = Kernel(
    _int_pow_numpy, _int_pow_generic, precheck=_int_pow_precheck, cost=8.0, passes=4
)


# -- variadic, Where, PRelu, Gemm, copies ----------------------------------------------------


HALF_FLOATS: Final = frozenset({"float16", "bfloat16"})
"""Floats that Sum and Mean add in float32 and round once (one policy for both)."""


def variadic_kernel(op: str, count: int) -> Kernel:
    """Fold ``count`` operands with Max, Min or Sum into ``out``; Mean divides the sum.

    NumPy: one ufunc call per operand after the first, each writing into ``out``. A Sum or
    Mean of several half-precision operands (float16, bfloat16: `HALF_FLOATS`) adds (and
    divides) in float32 and is rounded once, as onnxruntime does for float16; the ONNX
    reference rounds after each addition (docs/peer-differences.md).
    """
    name = {"max": "maximum", "min": "minimum"}.get(op, "add")
    ufunc: Any = getattr(np, name)
    divide = op == "mean"
    widen = name == "add" and count > 1

    def run_numpy(out: Any, *operands: Any) -> None:
        if widen and out.dtype.name in HALF_FLOATS:
            wide = np.empty(out.shape, np.float32)
            np.add(operands[0], operands[1], out=wide, dtype=np.float32)
            for x in operands[2:]:
                np.add(wide, x, out=wide)
            if divide:
                np.divide(wide, count, out=wide)
            np.copyto(out, wide, casting="unsafe")  # float32 to bfloat16 is "unsafe" to NumPy
            return
        if count == 1:
            np.copyto(out, operands[0])
        else:
            ufunc(operands[0], operands[1], out=out)
            for x in operands[2:]:
                ufunc(out, x, out=out)
        if divide:
            np.divide(out, count, out=out)

    def run_generic(xp: Any, *operands: Any) -> Any:
        if widen and dtype_name(operands[0].dtype, xp) in HALF_FLOATS:
            wide = xp.astype(operands[0], xp.float32)
            for x in operands[1:]:
                wide = wide + xp.astype(x, xp.float32)
            return xp.astype(wide / count if divide else wide, operands[0].dtype)
        result = operands[0]
        for x in operands[1:]:
            result = getattr(xp, name)(result, x)
        if divide:
            result = result / count
        if count == 1:
            result = xp.asarray(result, copy=True)
        return result

    return Kernel(run_numpy, run_generic, passes=count + divide)


def _where_numpy(out: Any, condition: Any, x: Any, y: Any) -> None:
    # Two copies into out, no temporaries.
    np.copyto(out, y)
    np.copyto(out, x, where=condition)


def _where_generic(xp: Any, condition: Any, x: Any, y: Any) -> Any:
    return xp.where(condition, x, y)


_BITS: Final = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _where_bits(out: Any, mask: Any, x: Any, y: Any) -> None:
    # Branch-free select on the bits: y ^ ((x ^ y) & mask), mask all ones where the condition
    # holds. A random condition makes NumPy's own select (np.where, copyto where=) branch
    # and mispredict on every other element; this runs at the speed of three ufunc passes
    # over a cache-sized block. Pure bit copies: the result is Where's, bit for bit.
    unsigned = mask.dtype
    bits = out.view(unsigned)
    np.bitwise_xor(x.view(unsigned), y.view(unsigned), out=bits)
    np.bitwise_and(bits, mask, out=bits)
    np.bitwise_xor(bits, y.view(unsigned), out=bits)


def _where_prepare(dtype: Any, operands: list[Any]) -> tuple[Any, list[Any]]:
    """Turn the condition into a mask of x's width, once, at the condition's own size."""
    condition, x, y = operands
    unsigned = _BITS.get(dtype.itemsize)
    if unsigned is None or dtype.hasobject or not x.dtype == y.dtype == dtype:
        return _where_numpy, operands  # copies that convert (string widths, byte orders)
    # Only the condition's distinct elements: a broadcast (stride 0) axis stays broadcast.
    own = condition[tuple(slice(0, 1) if s == 0 else slice(None) for s in condition.strides)]
    mask = np.zeros(own.shape, unsigned)
    np.subtract(mask, own, out=mask, casting="unsafe")  # True -> all ones
    return _where_bits, [np.broadcast_to(mask, condition.shape), x, y]


WHERE: Final = Kernel(
    _where_numpy, _where_generic, prepare=_where_prepare, passes=3, compiled="where"
)


def _prelu_numpy(out: Any, x: Any, slope: Any) -> None:
    # ONNX PRelu: slope * x for x < 0, x for x >= 0 (NaN stays NaN).
    np.copyto(out, x)
    np.multiply(x, slope, out=out, where=x < 0)


def _prelu_generic(xp: Any, x: Any, slope: Any) -> Any:
    return xp.where(x < 0, x * slope, x)


PRELU: Final = Kernel(_prelu_numpy, _prelu_generic, passes=2)


def _copy_numpy(out: Any, x: Any) -> None:
    np.copyto(out, x)


def _copy_generic(xp: Any, x: Any) -> Any:
    # The operand itself, below the output's shape: the engine allocates the new array of
    # the output's shape and assigns it once (`bcast.engine._materialise`). Copying here
    # would only add a copy.
    return x


COPY: Final = Kernel(_copy_numpy, _copy_generic, single_pass=True, compiled="copy")
"""Materialise one operand at the output's shape (Expand, Broadcast): always a new array."""


def _exact_integers(alpha: float, beta: float, *, unsigned: bool) -> bool:
    """Tell whether integer Gemm can scale exactly: whole, modest scalars, >= 0 if unsigned."""
    return all(
        float(v).is_integer() and abs(v) < 2**31 and not (unsigned and v < 0) for v in (alpha, beta)
    )


def gemm_kernel(a: Any, b: Any, alpha: float, beta: float, *, has_c: bool) -> Kernel:
    """Y = alpha * A' @ B' + beta * C, with A' and B' already transposed (views).

    Floats compute in the operands' dtype, but float16, which computes in float32 and is
    rounded once at the end, as onnxruntime and OpenVINO do (the ONNX reference rounds the
    product, then adds C in float16: docs/peer-differences.md). Integers compute exactly when
    alpha and beta are whole numbers (non-negative for unsigned dtypes), else in float64 and
    convert into the dtype (the ONNX reference's ``astype``). With ``beta == 0`` C's values
    are not read (NaN in C stays out), as both peers do; its shape is still checked by the
    plan.
    """
    use_c = has_c and beta != 0

    def run_numpy(out: Any, *c: Any) -> None:
        kind = out.dtype.kind
        if out.dtype == np.float16:
            wide = np.matmul(a, b, dtype=np.float32)
            if alpha != 1:
                wide *= np.float32(alpha)
            if use_c:
                wide += c[0].astype(np.float32) * np.float32(beta)
            np.copyto(out, wide, casting="same_kind")
            return
        exact = kind == "f" or _exact_integers(alpha, beta, unsigned=kind == "u")
        if exact:
            np.matmul(a, b, out=out)
            if alpha != 1:
                scale = alpha if out.dtype.kind == "f" else int(alpha)
                np.multiply(out, scale, out=out, casting="unsafe")
            if use_c:
                if beta == 1:
                    np.add(out, c[0], out=out)
                else:
                    weight = beta if out.dtype.kind == "f" else int(beta)
                    np.add(out, np.multiply(c[0], weight, casting="unsafe"), out=out)
            return
        wide = np.matmul(a, b).astype(np.float64) * alpha
        if use_c:
            wide += c[0] * beta
        np.copyto(out, wide, casting="unsafe")

    def run_generic(xp: Any, *c: Any) -> Any:
        if dtype_name(a.dtype, xp) == "float16":  # torch.float16; dask's too
            wide = xp.matmul(xp.astype(a, xp.float32), xp.astype(b, xp.float32)) * alpha
            if use_c:
                wide = wide + xp.astype(c[0], xp.float32) * beta
            return xp.astype(wide, a.dtype)
        product = xp.matmul(a, b)
        kind_float = xp.isdtype(product.dtype, "real floating")
        unsigned = xp.isdtype(product.dtype, "unsigned integer")
        if not kind_float and not _exact_integers(alpha, beta, unsigned=unsigned):
            wide = xp.astype(product, xp.float64) * alpha
            if use_c:
                wide = wide + xp.astype(c[0], xp.float64) * beta
            return xp.astype(wide, product.dtype)
        scale: float | int = alpha if kind_float else int(alpha)
        weight: float | int = beta if kind_float else int(beta)
        result = product * scale if alpha != 1 else product
        if use_c:
            result = result + (c[0] * weight if beta != 1 else c[0])
        return result

    return Kernel(run_numpy, run_generic, blockwise=False)


KernelFn = Callable[..., None]
