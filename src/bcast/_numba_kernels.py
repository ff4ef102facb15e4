"""The numba code of `bcast._compiled`: one row walker, specialised per operation.

Imported only by `bcast._compiled`, only when numba is installed, and only on the first
large call. The operation is a literal integer (an index into `SCALARS`): numba compiles
the walker once per operation and dtypes, and caches the machine code on disk
(``cache=True``), so later processes load it instead of compiling it again.
"""

from __future__ import annotations

import functools
import math
import threading
import warnings
from typing import Any, Final

import llvmlite.ir as ir
import numpy as np
from numba import literally, njit, typeof, types
from numba.core import cgutils
from numba.core.errors import NumbaError
from numba.extending import intrinsic, overload

__all__ = ["SCALARS", "walk", "walker"]

ALIGN: Final = 64
"""Streaming stores start at an address aligned to this (a cache line; an AVX-512 vector)."""


def _copy(x: Any, y: Any, z: Any) -> Any:
    return x


def _select(x: Any, y: Any, z: Any) -> Any:
    return z ^ ((y ^ z) & x)  # x: all ones where the condition holds, else 0


def _add(x: Any, y: Any, z: Any) -> Any:
    return x + y


def _sub(x: Any, y: Any, z: Any) -> Any:
    return x - y


def _mul(x: Any, y: Any, z: Any) -> Any:
    return x * y


def _div(x: Any, y: Any, z: Any) -> Any:
    return x / y


def _equal(x: Any, y: Any, z: Any) -> Any:
    return x == y


def _greater(x: Any, y: Any, z: Any) -> Any:
    return x > y


def _less(x: Any, y: Any, z: Any) -> Any:
    return x < y


def _and(x: Any, y: Any, z: Any) -> Any:
    return x & y


def _or(x: Any, y: Any, z: Any) -> Any:
    return x | y


def _xor(x: Any, y: Any, z: Any) -> Any:
    return x ^ y


# -- float32 Pow: 2 ** (y * log2 x) in float64, rounded once ---------------------------------
# glibc's powf (NumPy's) is a scalar call per element. Here the logarithm and the exponential
# are polynomials in float64 (relative error about 1e-15, far below float32's 6e-8), with the
# exponent and mantissa taken from the bits: plain arithmetic, which LLVM vectorises. Only
# positive normal finite bases with finite exponents take it; `_pow_special` finds the rest
# (zeros, negatives, subnormals, inf, NaN), which `_fix` recomputes with powf itself.

# Series coefficients, lowest power first. Truncation errors: log 2e-14 (|s| < 0.172), exp
# 7e-15 (|f| < 0.347); float32 keeps 6e-8.
# padded with zeros to the 16 that `_estrin` takes.
_LOG_TERMS: Final = tuple(1.0 / (2 * k + 1) if k < 9 else 0.0 for k in range(16))  # atanh, s**2
_EXP_TERMS: Final = tuple(1.0 / math.factorial(k) if k < 13 else 0.0 for k in range(16))  # exp
_LN2: Final = math.log(2.0)
_ROUND: Final = 1.5 * 2.0**52  # t + _ROUND: t rounded to an integer, in the low bits
_ROUND_BITS: Final = 0x4338000000000000  # the bits of _ROUND
_SQRT2_MANTISSA: Final = 0x3504F3  # mantissa bits above which 1.m exceeds sqrt(2)


@intrinsic
def _float32_bits(typingctx: Any, value: Any) -> Any:
    """Return the bits of a float32, as an int32."""
    if value != types.float32:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(value), codegen


@intrinsic
def _float64_bits(typingctx: Any, value: Any) -> Any:
    """Return the bits of a float64, as an int64."""
    if value != types.float64:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(value), codegen


@intrinsic
def _float64_of_bits(typingctx: Any, value: Any) -> Any:
    """Return the float64 whose bits are the int64 ``value``."""
    if value != types.int64:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(value), codegen


@njit(inline="always")
def _pow_special(x: Any, y: Any) -> Any:
    """Tell whether ``x ** y`` needs powf: x not positive, normal and finite, or y not finite."""
    bits = _float32_bits(x)
    return (bits <= 0x007FFFFF) | (bits >= 0x7F800000) | (not abs(y) < math.inf)


@njit(inline="always")
def _estrin(x: Any, c: Any) -> Any:
    """Return the polynomial with the 16 coefficients ``c`` (lowest first) at ``x``.

    Estrin's scheme: pairs, then pairs of pairs, so the chain of dependent multiply-adds
    is 4 long instead of ``len(c)`` (Horner's); the vectorised loop runs at throughput.
    """
    x2 = x * x
    x4 = x2 * x2
    x8 = x4 * x4
    p0 = (c[0] + c[1] * x) + (c[2] + c[3] * x) * x2
    p1 = (c[4] + c[5] * x) + (c[6] + c[7] * x) * x2
    p2 = (c[8] + c[9] * x) + (c[10] + c[11] * x) * x2
    p3 = (c[12] + c[13] * x) + (c[14] + c[15] * x) * x2
    return (p0 + p1 * x4) + (p2 + p3 * x4) * x8


def _pow(x: Any, y: Any, z: Any) -> Any:
    # No conversion between floats and 64-bit integers (AVX2 has none): the exponent goes
    # through int32, and 2 ** round(t) is built from the bits of t + 1.5 * 2**52.
    bits = _float32_bits(x)
    mantissa_bits = bits & 0x007FFFFF
    high = mantissa_bits > _SQRT2_MANTISSA  # fold 1.m into [sqrt(1/2), sqrt(2))
    exponent = np.float64(np.int32((bits >> 23) - 127 + high))
    mantissa = np.float64(np.int32(mantissa_bits)) * 2.0**-23 + 1.0
    mantissa = mantissa * 0.5 if high else mantissa
    s = (mantissa - 1.0) / (mantissa + 1.0)  # log(m) = 2 atanh(s)
    s2 = s * s
    series = _estrin(s2, _LOG_TERMS)
    t = np.float64(y) * (exponent + (2.0 / _LN2) * s * series)  # y * log2(x)
    t = min(max(t, -200.0), 200.0)  # beyond: 0 or inf in float32 all the same
    shifted = t + _ROUND
    f = (t - (shifted - _ROUND)) * _LN2  # |f| <= ln(2) / 2
    power = _estrin(f, _EXP_TERMS)
    scale = _float64_of_bits((_float64_bits(shifted) - _ROUND_BITS + 1023) << 52)
    return np.float32(power * scale)


def _fix(op: Any, o: Any, x: Any, y: Any, n: int) -> None:
    raise NotImplementedError  # compiled code only: see the overload below


@overload(_fix, inline="always")
def _fix_overload(op: Any, o: Any, x: Any, y: Any, n: Any) -> Any:
    """After a row: Pow recomputes its special elements with powf; other operations: nothing."""
    if not isinstance(op, types.IntegerLiteral):
        return None
    if list(SCALARS)[op.literal_value] != "pow":

        def nothing(op: Any, o: Any, x: Any, y: Any, n: Any) -> None:
            pass

        return nothing

    def recompute(op: Any, o: Any, x: Any, y: Any, n: Any) -> None:
        special = False
        for c in range(n):  # a reduction: vectorised
            special |= _pow_special(x[c], y[c])
        if special:
            for c in range(n):
                if _pow_special(x[c], y[c]):
                    o[c] = x[c] ** y[c]  # powf, as NumPy's float32 power

    return recompute


SCALARS: Final = {
    "copy": _copy,
    "where": _select,
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "equal": _equal,
    "greater": _greater,
    "less": _less,
    "and_": _and,
    "or_": _or,
    "xor": _xor,
}
"""Each operation's scalar function of three operands (unused ones are never loaded)."""

_CODES: Final = tuple(njit(inline="always")(f) for f in SCALARS.values())
_entries: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()


def _scalar(op: Any, x: Any, y: Any, z: Any) -> Any:
    raise NotImplementedError  # compiled code only: see the overload below


@overload(_scalar, inline="always")
def _scalar_overload(op: Any, x: Any, y: Any, z: Any) -> Any:
    if not isinstance(op, types.IntegerLiteral):
        return None
    function = _CODES[op.literal_value]

    def impl(op: Any, x: Any, y: Any, z: Any) -> Any:
        return function(x, y, z)

    return impl


@intrinsic
def _stream(typingctx: Any, array: Any, index: Any, value: Any) -> Any:
    """``array[index] = value`` as a non-temporal store, in a run that starts ALIGN-aligned."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type, _, value_type = signature.args
        target, position, item = args
        view = context.make_array(array_type)(context, builder, target)
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, view, [position], wraparound=False
        )
        item = context.cast(builder, item, value_type, array_type.dtype)
        stored = context.data_model_manager[array_type.dtype].as_data(builder, item)
        store = builder.store(stored, pointer, align=ALIGN)  # a bool is a byte in memory
        store.set_metadata(
            "nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        )
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


@intrinsic
def _fence(typingctx: Any) -> Any:
    """Order every store before it: streaming stores are weakly ordered."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


_ROW_FLAGS: Final = {"contract"}
"""Multiply-adds may fuse (Pow's polynomials); every other operation is one IEEE operation."""


@njit(nogil=True, error_model="numpy", fastmath=_ROW_FLAGS, cache=True)
def _row(op: Any, o: Any, x: Any, y: Any, z: Any, n: int) -> None:
    literally(op)
    for c in range(n):
        o[c] = _scalar(op, x[c], y[c], z[c])
    _fix(op, o, x, y, n)


@njit(nogil=True, error_model="numpy", fastmath=_ROW_FLAGS, cache=True)
def _streamed_row(op: Any, o: Any, x: Any, y: Any, z: Any, n: int) -> None:
    # Plain stores up to the first aligned address, streaming stores over whole ALIGN-byte
    # runs, plain stores for the rest. Every loop starts at index 0: LLVM vectorises only
    # loops whose indices it knows are not negative (numba wraps negative indices).
    literally(op)
    size = o.itemsize
    head = min(((-o.ctypes.data) % ALIGN) // size, n)
    body = head + (n - head) // (ALIGN // size) * (ALIGN // size)
    _row(op, o, x, y, z, head)
    ob, xb, yb, zb = o[head:body], x[head:body], y[head:body], z[head:body]
    for c in range(body - head):
        _stream(ob, c, _scalar(op, xb[c], yb[c], zb[c]))
    _fix(op, ob, xb, yb, body - head)
    _row(op, o[body:], x[body:], y[body:], z[body:], n - body)


@njit(nogil=True, cache=True)
def _operand_row(base: Any, offset: int, step: int, n: int, buf: Any, last: Any) -> Any:
    """One operand's row as a contiguous run: a slice of it, or ``buf`` filled from it."""
    if step == 1:
        return base[offset : offset + n]
    if step == 0:
        if last[0] != offset:  # a stretched operand: refill only when its value moves
            buf[:n] = base[offset]
            last[0] = offset
        return buf
    for c in range(n):
        buf[c] = base[offset + c * step]
    return buf


@njit(nogil=True, error_model="numpy", cache=True)
def walk(
    op: Any,
    o: Any,
    x: Any,
    y: Any,
    z: Any,
    strides: Any,
    shape: Any,
    start: int,
    stop: int,
    stream: bool,
) -> None:
    """Compute rows ``start`` to ``stop`` of ``o`` (all arrays 1-D runs of memory).

    ``shape`` is the output's (the last axis: one row); ``strides[k]`` are, in elements, the
    output's (k = 0) and the operands' strides on each axis, 0 where stretched.
    """
    literally(op)
    rank = shape.size
    n = shape[rank - 1]
    index = np.zeros(rank - 1, np.int64)
    rest = start
    for d in range(rank - 2, -1, -1):
        index[d] = rest % shape[d]
        rest //= shape[d]
    offsets = np.zeros(4, np.int64)
    for k in range(4):
        for d in range(rank - 1):
            offsets[k] += index[d] * strides[k, d]
    inner = strides[:, rank - 1]
    bx = np.empty(n if inner[1] != 1 else 0, x.dtype)
    by = np.empty(n if inner[2] != 1 else 0, y.dtype)
    bz = np.empty(n if inner[3] != 1 else 0, z.dtype)
    last = np.full(3, -1, np.int64)
    for _ in range(start, stop):
        ro = o[offsets[0] : offsets[0] + n]
        rx = _operand_row(x, offsets[1], inner[1], n, bx, last[0:1])
        ry = _operand_row(y, offsets[2], inner[2], n, by, last[1:2])
        rz = _operand_row(z, offsets[3], inner[3], n, bz, last[2:3])
        if stream:
            _streamed_row(op, ro, rx, ry, rz, n)
        else:
            _row(op, ro, rx, ry, rz, n)
        d = rank - 2  # the next row: an odometer over the outer axes
        while d >= 0:
            index[d] += 1
            for k in range(4):
                offsets[k] += strides[k, d]
            if index[d] < shape[d]:
                break
            for k in range(4):
                offsets[k] -= shape[d] * strides[k, d]
            index[d] = 0
            d -= 1
    if stream:
        _fence()


def walker(name: str, arrays: list[np.ndarray[Any, Any]]) -> Any:
    """Return `walk` compiled for operation ``name`` and these arrays, its first argument bound.

    Resolved once per operation and array types, then called directly: a call through
    the dispatcher would make numba re-derive the literal operation on every call
    (milliseconds). ``compile`` reads numba's disk cache before compiling. None, with a
    warning the first time, where numba cannot compile it: the engine then uses NumPy.
    """
    key = (name, *(typeof(a) for a in arrays))
    entry = _entries.get(key, False)
    if entry is False:
        with _lock:
            entry = _entries.get(key, False)
            if entry is False:
                entry = _entries[key] = _compile(name, key[1:])
    return entry


def _compile(name: str, array_types: tuple[Any, ...]) -> Any:
    code = list(SCALARS).index(name)
    signature = (
        types.literal(code),
        *array_types,
        typeof(np.zeros((1, 1), np.int64)),
        typeof(np.zeros(1, np.int64)),
        types.int64,
        types.int64,
        types.boolean,
    )
    try:
        compiled = walk.compile(signature)
    except NumbaError as exc:
        kinds = ", ".join(str(t.dtype) for t in array_types)
        warnings.warn(
            f"bcast: numba could not compile {name} for {kinds}; NumPy computes it "
            f"instead ({type(exc).__name__}: {str(exc).splitlines()[0]})",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return functools.partial(compiled, code)
