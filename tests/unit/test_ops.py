"""Operators: `bcast.ops`.

Expected values come from NumPy expressions written here (or from plain Python integers
where NumPy's own integer semantics differ from ONNX), never from bcast. The dtypes each
operator must accept come from the installed ONNX schemas, not from bcast's table.
"""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.helper
import pytest

import bcast
from bcast import BroadcastError, ops
from bcast.ops import MemoryLimitError
from bcast.ops._dtypes import SIGNATURES

# -- the dtype table against the ONNX schemas -----------------------------------------------

ONNX_TO_NAME = {
    "float": "float32",
    "double": "float64",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "bool": "bool",
    "string": "string",
    "complex64": "complex64",
    "complex128": "complex128",
    **{f"int{n}": f"int{n}" for n in (8, 16, 32, 64)},
    **{f"uint{n}": f"uint{n}" for n in (8, 16, 32, 64)},
}

DESIGN_OPERATORS = [
    "add", "sub", "mul", "div", "pow", "equal", "greater", "less", "and_", "or_", "xor",
    "max", "min", "mean", "sum", "where", "gemm", "prelu", "expand", "broadcast",
    "mod", "bit_shift", "bitwise_and", "bitwise_or", "bitwise_xor", "greater_or_equal",
    "less_or_equal", "not_equal", "squared_difference", "select", "fake_quantize",
    "quantize_linear", "dequantize_linear",
]  # fmt: skip

ONNX_NAME = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "equal": "Equal",
    "greater": "Greater", "less": "Less", "and_": "And", "or_": "Or", "xor": "Xor",
    "max": "Max", "min": "Min", "mean": "Mean", "sum": "Sum", "where": "Where",
    "gemm": "Gemm", "prelu": "PRelu", "expand": "Expand", "mod": "Mod", "bit_shift": "BitShift",
    "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr", "bitwise_xor": "BitwiseXor",
    "greater_or_equal": "GreaterOrEqual", "less_or_equal": "LessOrEqual",
}  # fmt: skip


def schema_types(op: str) -> dict[str, set[str]]:
    """Allowed dtype names per type parameter, from the installed ONNX schema."""
    schema = onnx.defs.get_schema(ONNX_NAME[op])
    out: dict[str, set[str]] = {}
    for constraint in schema.type_constraints:
        names = set()
        for t in constraint.allowed_type_strs:
            inner = t[len("tensor(") : -1]
            if inner in ONNX_TO_NAME:
                names.add(ONNX_TO_NAME[inner])
            else:  # float8, int4, ...: no array library holds them
                assert inner.startswith(("float8", "int4", "uint4", "float4")), inner
        out[constraint.type_param_str] = names
    return out


def schema_numpy_dtypes(op: str, param: str = "T") -> list[np.dtype[Any]]:
    schema = onnx.defs.get_schema(ONNX_NAME[op])
    (constraint,) = [c for c in schema.type_constraints if c.type_param_str == param]
    dtypes = []
    for t in sorted(constraint.allowed_type_strs):
        inner = t[len("tensor(") : -1]
        if inner not in ONNX_TO_NAME:
            continue
        proto = getattr(onnx.TensorProto, inner.upper() if inner != "float" else "FLOAT")
        dtypes.append(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(proto)))
    return dtypes


def test_every_design_operator_has_a_function_and_a_table_entry() -> None:
    for name in DESIGN_OPERATORS:
        assert callable(getattr(ops, name)), name
        assert name in SIGNATURES, name
        assert name in ops.__all__
    assert set(SIGNATURES) == set(DESIGN_OPERATORS)


@pytest.mark.parametrize("op", sorted(ONNX_NAME))
def test_dtype_table_is_the_onnx_schema(op: str) -> None:
    schema = onnx.defs.get_schema(ONNX_NAME[op])
    sig = SIGNATURES[op]
    assert sig.onnx == schema.name
    expected = schema_types(op)
    assert {k: set(v) for k, v in sig.allowed.items()} == expected
    formal = [i.type_str for i in schema.inputs if i.type_str in expected]
    assert list(sig.inputs) == (formal[:1] if sig.variadic else formal)
    assert sig.output == schema.outputs[0].type_str


# -- values, for every dtype the schemas allow ------------------------------------------------


def sample(dtype: np.dtype[Any], shape: tuple[int, ...], *, seed: int, nonzero: bool = False):
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype.kind == "O":
        return np.array([f"s{v}" for v in rng.integers(0, 3, n)], dtype=object).reshape(shape)
    if dtype.kind == "u":
        low = 1 if nonzero else 0
        return rng.integers(low, 6, n).astype(dtype).reshape(shape)
    if dtype.kind == "i":
        values = rng.integers(-5, 6, n)
        if nonzero:
            values[values == 0] = 3
        return values.astype(dtype).reshape(shape)
    values = rng.integers(-8, 9, n) / 2.0
    if nonzero:
        values[values == 0] = 1.5
    if dtype.kind == "c":
        values = values + 1j * rng.integers(-3, 4, n)
    return values.astype(dtype).reshape(shape)


def as_float64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


A_SHAPE, B_SHAPE, OUT_SHAPE = (2, 1, 3), (4, 1), (2, 4, 3)

ARITHMETIC = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
}


def _params(op: str, param: str = "T") -> list[Any]:
    return [pytest.param(op, d, id=f"{op}-{d}") for d in schema_numpy_dtypes(op, param)]


@pytest.mark.parametrize(("op", "dtype"), [p for op in ("add", "sub", "mul") for p in _params(op)])
def test_arithmetic_every_dtype(op: str, dtype: np.dtype[Any]) -> None:
    a = sample(dtype, A_SHAPE, seed=1)
    b = sample(dtype, B_SHAPE, seed=2)
    got = getattr(ops, op)(a, b)
    with np.errstate(all="ignore"):
        expected = ARITHMETIC[op](a, b)  # same dtypes: NumPy keeps the dtype
    assert got.dtype == dtype
    assert got.shape == OUT_SHAPE
    np.testing.assert_array_equal(got, expected)


def trunc_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


@pytest.mark.parametrize(("op", "dtype"), _params("div"))
def test_div_every_dtype(op: str, dtype: np.dtype[Any]) -> None:
    a = sample(dtype, A_SHAPE, seed=3)
    b = sample(dtype, B_SHAPE, seed=4, nonzero=True)
    got = ops.div(a, b)
    assert got.dtype == dtype
    assert got.shape == OUT_SHAPE
    if dtype.kind in "iu":
        aa, bb = np.broadcast_arrays(a, b)
        expected = np.array(
            [trunc_div(int(x), int(y)) for x, y in zip(aa.ravel(), bb.ravel(), strict=True)]
        ).reshape(OUT_SHAPE)
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_array_equal(got, (a / b).astype(dtype))


def test_div_integer_truncates_toward_zero_r1() -> None:
    a = np.array([-7, 7, -7, 7, -1, 1], np.int32)
    b = np.array([2, -2, -2, 2, 2, -2], np.int32)
    np.testing.assert_array_equal(ops.div(a, b), [-3, -3, 3, 3, 0, 0])


def test_div_integer_extremes() -> None:
    big = np.iinfo(np.int64).max
    a = np.array([big, -big, big - 1], np.int64)
    b = np.array([2, 3, -7], np.int64)
    expected = [trunc_div(int(x), int(y)) for x, y in zip(a, b, strict=True)]
    np.testing.assert_array_equal(ops.div(a, b), expected)


def test_div_float_follows_ieee_r4() -> None:
    got = ops.div(np.array([-7.0, 1.0, 0.0], np.float32), np.array([2.0, 0.0, 0.0], np.float32))
    np.testing.assert_array_equal(got, np.array([-3.5, np.inf, np.nan], np.float32))


def test_div_integer_by_zero_raises_zero_division_error() -> None:
    with pytest.raises(ZeroDivisionError, match="div: integer division by zero"):
        ops.div(np.array([1, 2], np.int32), np.array([1, 0], np.int32))


def test_div_integer_by_zero_into_an_empty_result_computes_nothing() -> None:
    got = ops.div(np.ones((0, 2), np.int32), np.array([0, 1], np.int32))
    assert got.shape == (0, 2)


def pow_expected(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """Pow-15 from its text and the peers' agreed cases (R5, R6, R8), element by element."""
    bb, ee = np.broadcast_arrays(base, exponent)
    out = []
    for x, y in zip(bb.ravel(), ee.ravel(), strict=True):
        if base.dtype.kind == "f" or base.dtype == np.dtype("bfloat16"):
            out.append(float(x) ** float(y) if not (float(x) < 0 and not float(y).is_integer())
                       else math.nan)  # fmt: skip
        elif exponent.dtype.kind in "iu":
            xi, yi = int(x), int(y)
            out.append(xi**yi if yi >= 0 else math.trunc(xi**yi))
        else:
            value = float(x) ** float(y)
            out.append(math.trunc(value))
    return np.array(out, dtype=np.float64).reshape(bb.shape)


@pytest.mark.parametrize("base", schema_numpy_dtypes("pow", "T"), ids=str)
@pytest.mark.parametrize("exponent", schema_numpy_dtypes("pow", "T1"), ids=str)
def test_pow_every_dtype_pair(base: np.dtype[Any], exponent: np.dtype[Any]) -> None:
    a = np.array([[1], [2], [3], [-2]], dtype=base)
    if exponent.kind == "u":
        b = np.array([0, 1, 2, 3], dtype=exponent)
    elif exponent.kind == "i":
        b = np.array([0, 1, 2, -1], dtype=exponent)
    else:
        b = np.array([0.0, 1.0, 2.0, -1.0], dtype=exponent)
    got = ops.pow(a, b)
    assert got.dtype == base
    assert got.shape == (4, 4)
    expected = pow_expected(a, b)
    if base.kind == "f" or base == np.dtype("bfloat16"):
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=1e-2)
    else:
        np.testing.assert_array_equal(got, expected.astype(base))


def test_pow_int_base_float_exponent_truncates_r6() -> None:
    got = ops.pow(np.array([2, 3, 4], np.int32), np.array([0.5, 2.0, -1.0], np.float32))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [1, 9, 0])


def test_pow_float_base_int_exponent_r5() -> None:
    got = ops.pow(np.array([2.0, 2.0, -8.0], np.float32), np.array([3, -1, 2], np.int64))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [8.0, 0.5, 64.0])


def test_pow_int_negative_exponent_is_the_truncated_power_r7() -> None:
    # ORT's answer (2 ** -1 -> 0); NumPy and the ONNX reference raise.
    base = np.array([2, -2, 1, -1, -1, 5], np.int32)
    exponent = np.array([-1, -1, -3, -3, -2, -2], np.int32)
    np.testing.assert_array_equal(ops.pow(base, exponent), [0, 0, 1, -1, 1, 0])


def test_pow_zero_to_a_negative_integer_power_raises() -> None:
    with pytest.raises(ZeroDivisionError, match="negative integer power"):
        ops.pow(np.array([0, 2], np.int64), np.array([-1], np.int64))


def _wrapped(value: int, bits: int) -> int:
    """``value`` modulo 2**bits, as a two's complement integer of that width."""
    value %= 1 << bits
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


@pytest.mark.parametrize("base", [np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_pow_int_base_uint64_exponent_is_exact(base: Any) -> None:
    # NumPy computes int ** uint64 in float64 (3 ** 39 -> ...256); the exact power wraps.
    bits = np.dtype(base).itemsize * 8
    bases = [3, -3, 2, -1, 0, 1, 7]
    exponents = [39, 40, 63, 64, 2**53 + 1, 2**63, 2**63 + 1, 2**64 - 1]
    got = ops.pow(np.array(bases, base).reshape(-1, 1), np.array(exponents, np.uint64))
    assert got.dtype == base
    expected = [[_wrapped(pow(x, e, 1 << 64), bits) for e in exponents] for x in bases]
    assert got.tolist() == expected
    assert ops.pow(np.array([3], np.int64), np.array([39], np.uint64))[0] == 3**39


def test_pow_nan_into_int64_is_int64_min_r8() -> None:
    got = ops.pow(np.array([-8], np.int64), np.array([1 / 3], np.float32))
    with np.errstate(invalid="ignore"):
        platform = np.array([np.nan]).astype(np.int64)[0]
    if platform != np.iinfo(np.int64).min:
        pytest.skip("this platform's C cast does not give INT64_MIN for NaN")
    assert got[0] == np.iinfo(np.int64).min


COMPARISONS = {
    "equal": lambda a, b: a == b,
    "greater": lambda a, b: a > b,
    "less": lambda a, b: a < b,
}


@pytest.mark.parametrize(
    ("op", "dtype"), [p for op in ("equal", "greater", "less") for p in _params(op)]
)
def test_comparisons_every_dtype_give_bool(op: str, dtype: np.dtype[Any]) -> None:
    a = sample(dtype, A_SHAPE, seed=5)
    b = sample(dtype, B_SHAPE, seed=6)
    got = getattr(ops, op)(a, b)
    assert got.dtype == np.bool_
    assert got.shape == OUT_SHAPE
    np.testing.assert_array_equal(got, COMPARISONS[op](a, b).astype(bool))


def test_equal_on_numpy_unicode_strings() -> None:
    got = ops.equal(np.array([["a"], ["bc"]]), np.array(["bc", "a", "x"]))
    np.testing.assert_array_equal(got, [[False, True, False], [True, False, False]])


@pytest.mark.parametrize(
    ("op", "expr"),
    [("and_", np.logical_and), ("or_", np.logical_or), ("xor", np.logical_xor)],
)
def test_logical_ops_on_bool(op: str, expr: Any) -> None:
    a = np.array([[True], [False]])
    b = np.array([True, False, True])
    got = getattr(ops, op)(a, b)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, expr(a, b))


@pytest.mark.parametrize("op", ["and_", "or_", "xor"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float32])
def test_logical_ops_reject_non_bool_r22_r24(op: str, dtype: Any) -> None:
    with pytest.raises(TypeError, match=r"has dtype .*expected one of bool"):
        getattr(ops, op)(np.array([1, 0], dtype), np.array([1, 1], dtype))


VARIADIC_SHAPES = [(2, 1, 3), (4, 1), (3,)]


@pytest.mark.parametrize(
    ("op", "dtype"), [p for op in ("max", "min", "sum", "mean") for p in _params(op)]
)
def test_variadic_every_dtype_broadcasts_all_inputs(op: str, dtype: np.dtype[Any]) -> None:
    xs = [sample(dtype, s, seed=10 + i) for i, s in enumerate(VARIADIC_SHAPES)]
    got = getattr(ops, op)(*xs)
    assert got.dtype == dtype
    assert got.shape == (2, 4, 3)
    wide = [as_float64(x) for x in np.broadcast_arrays(*xs)]
    expected = {
        "max": lambda: np.maximum(np.maximum(wide[0], wide[1]), wide[2]),
        "min": lambda: np.minimum(np.minimum(wide[0], wide[1]), wide[2]),
        "sum": lambda: wide[0] + wide[1] + wide[2],
        "mean": lambda: (wide[0] + wide[1] + wide[2]) / 3,
    }[op]()
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=1e-2)


@pytest.mark.parametrize("op", ["max", "min", "sum", "mean"])
def test_variadic_single_input_is_a_new_copy(op: str) -> None:
    x = np.array([1.0, 2.0], np.float32)
    got = getattr(ops, op)(x)
    np.testing.assert_array_equal(got, x)
    assert not np.shares_memory(got, x)


@pytest.mark.parametrize("op", ["max", "min", "sum", "mean"])
def test_variadic_of_nothing_is_a_type_error(op: str) -> None:
    with pytest.raises(TypeError, match="at least one input"):
        getattr(ops, op)()


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_sum_and_mean_reject_integers_by_schema_r12_r14(op: str, dtype: Any) -> None:
    with pytest.raises(TypeError, match=rf"{op}: inputs\[0\] has dtype"):
        getattr(ops, op)(np.array([1, 2], dtype), np.array([2, 2], dtype))


def test_mean_broadcasts_whichever_input_is_largest_r10_r11() -> None:
    xs = [
        np.array([1.0, 2.0], np.float32),
        np.array([4.0], np.float32),
        np.array([[10.0], [20.0]], np.float32),
    ]
    expected = np.array([[5.0, 16 / 3], [25 / 3, 26 / 3]])
    np.testing.assert_allclose(ops.mean(*xs), expected, rtol=1e-6)
    np.testing.assert_allclose(ops.mean(*xs[::-1]), expected, rtol=1e-6)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_propagate_nan_r16_r18(op: str) -> None:
    a = np.array([np.nan, 1.0, np.nan], np.float32)
    b = np.array([1.0, np.nan, np.nan], np.float32)
    c = np.array([0.0, 0.0, 0.0], np.float32)
    assert np.isnan(getattr(ops, op)(a, b)).all()
    assert np.isnan(getattr(ops, op)(b, a)).all()
    assert np.isnan(getattr(ops, op)(c, a, b)).all()


@pytest.mark.parametrize(("op", "dtype"), _params("where"))
def test_where_every_dtype(op: str, dtype: np.dtype[Any]) -> None:
    condition = np.array([[True], [False]])
    x = sample(dtype, (3,), seed=20)
    y = sample(dtype, (), seed=21)
    got = ops.where(condition, x, y)
    assert got.dtype == dtype
    assert got.shape == (2, 3)
    np.testing.assert_array_equal(got, np.where(condition, x, y))


def test_where_cond_must_be_bool_and_x_y_one_dtype_r27() -> None:
    with pytest.raises(TypeError, match="condition has dtype int64"):
        ops.where(np.array([1, 0]), np.ones(2), np.zeros(2))
    with pytest.raises(TypeError, match="x and y must have the same dtype"):
        ops.where(np.array([True]), np.ones(2, np.int32), np.zeros(2, np.float32))


def test_where_incompatible_shapes_r26() -> None:
    with pytest.raises(BroadcastError) as info:
        ops.where(np.ones(2, bool), np.ones(3), np.array(0.0))
    assert info.value.axis == 0


def test_where_numpy_strings_widen() -> None:
    got = ops.where(np.array([True, False]), np.array(["a", "b"]), np.array(["long"]))
    assert list(got) == ["a", "long"]


# -- gemm ----------------------------------------------------------------------------------


def gemm_expected(a, b, c, alpha=1.0, beta=1.0, trans_a=False, trans_b=False):
    aa = as_float64(a.T if trans_a else a)
    bb = as_float64(b.T if trans_b else b)
    y = alpha * (aa @ bb)
    if c is not None and beta != 0:
        y = y + beta * as_float64(c)
    return y


@pytest.mark.parametrize(("op", "dtype"), _params("gemm"))
@pytest.mark.parametrize(
    "c_shape",
    [None, (), (1,), (4,), (1, 4), (2, 1), (2, 4)],
    ids=lambda s: "no-c" if s is None else str(list(s)),
)
def test_gemm_every_dtype_and_every_c_shape(op, dtype, c_shape) -> None:
    a = sample(dtype, (2, 3), seed=30)
    b = sample(dtype, (3, 4), seed=31)
    c = None if c_shape is None else sample(dtype, c_shape, seed=32)
    got = ops.gemm(a, b) if c is None else ops.gemm(a, b, c)
    assert got.dtype == dtype
    assert got.shape == (2, 4)
    expected = gemm_expected(a, b, c)
    if dtype.kind in "iu":
        np.testing.assert_array_equal(got, expected.astype(dtype))
    else:
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=2e-2, atol=1e-2)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_transposes_and_scales_r35(trans_a: bool, trans_b: bool) -> None:
    a = sample(np.dtype(np.float64), (3, 2) if trans_a else (2, 3), seed=33)
    b = sample(np.dtype(np.float64), (4, 3) if trans_b else (3, 4), seed=34)
    c = sample(np.dtype(np.float64), (2, 1), seed=35)
    got = ops.gemm(a, b, c, alpha=0.5, beta=2.0, trans_a=trans_a, trans_b=trans_b)
    expected = gemm_expected(a, b, c, 0.5, 2.0, trans_a, trans_b)
    np.testing.assert_allclose(got, expected)


def test_gemm_integer_with_fractional_alpha_truncates() -> None:
    a = np.array([[1, 2]], np.int32)
    b = np.array([[3], [4]], np.int32)
    c = np.array([[1]], np.int32)
    got = ops.gemm(a, b, c, alpha=0.5, beta=1.5)  # 0.5 * 11 + 1.5 = 7.0
    np.testing.assert_array_equal(got, [[7]])
    got = ops.gemm(a, b, c, alpha=0.3)  # 3.3 + 1 = 4.3 -> 4
    np.testing.assert_array_equal(got, [[4]])


def test_gemm_unsigned_with_negative_scalars_goes_through_float64() -> None:
    a = np.array([[2]], np.uint32)
    b = np.array([[3]], np.uint32)
    c = np.array([[10]], np.uint32)
    got = ops.gemm(a, b, c, alpha=-1.0, beta=1.0)  # -6 + 10 = 4
    np.testing.assert_array_equal(got, np.array([[4]], np.uint32))


def test_gemm_beta_zero_ignores_c_values_but_checks_its_shape_r36() -> None:
    a, b = np.ones((2, 3)), np.ones((3, 4))
    got = ops.gemm(a, b, np.full((4,), np.nan), beta=0.0)
    np.testing.assert_array_equal(got, np.full((2, 4), 3.0))
    with pytest.raises(BroadcastError):
        ops.gemm(a, b, np.ones(3), beta=0.0)


@pytest.mark.parametrize(
    "c_shape",
    [
        pytest.param((3,), id="r32-wrong-n"),
        pytest.param((2, 4, 1), id="r33-rank-3"),
    ],
)
def test_gemm_c_must_broadcast_unidirectionally(c_shape) -> None:
    with pytest.raises(BroadcastError):
        ops.gemm(np.ones((2, 3)), np.ones((3, 4)), np.ones(c_shape))


def test_gemm_c_larger_than_the_product_is_rejected_r34() -> None:
    with pytest.raises(BroadcastError) as info:
        ops.gemm(np.ones((1, 3)), np.ones((3, 4)), np.ones((2, 4)))
    assert info.value.axis == 0


def test_gemm_rank_and_inner_dimension_errors() -> None:
    with pytest.raises(ValueError, match="a must be rank 2"):
        ops.gemm(np.ones(3), np.ones((3, 4)))
    with pytest.raises(ValueError, match="inner dimensions"):
        ops.gemm(np.ones((2, 3)), np.ones((4, 4)))
    with pytest.raises(TypeError, match="trans_a must be a bool"):
        ops.gemm(np.ones((2, 3)), np.ones((3, 4)), trans_a=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="alpha must be a float"):
        ops.gemm(np.ones((2, 3)), np.ones((3, 4)), alpha="2")  # type: ignore[arg-type]


def test_gemm_zero_size() -> None:
    got = ops.gemm(np.ones((2, 0)), np.ones((0, 4)), np.ones(4))
    np.testing.assert_array_equal(got, np.ones((2, 4)))


# -- prelu ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("op", "dtype"), _params("prelu"))
@pytest.mark.parametrize("slope_shape", [(), (1,), (4,), (3, 1), (2, 3, 4), (1, 3, 1)], ids=str)
def test_prelu_every_dtype_and_slope_shape(op, dtype, slope_shape) -> None:
    x = sample(dtype, (2, 3, 4), seed=40)
    slope = sample(dtype, slope_shape, seed=41)
    got = ops.prelu(x, slope)
    assert got.dtype == dtype
    assert got.shape == (2, 3, 4)
    with np.errstate(all="ignore"):
        expected = np.where(x < 0, x * slope, x)
    np.testing.assert_array_equal(got, expected)


def test_prelu_slope_larger_than_x_is_rejected_unlike_onnxruntime_r40() -> None:
    with pytest.raises(BroadcastError):
        ops.prelu(np.ones(3, np.float32), np.ones((2, 3), np.float32))


def test_prelu_channel_slope_is_rejected_unlike_the_reference_r38() -> None:
    with pytest.raises(BroadcastError) as info:
        ops.prelu(np.ones((2, 3, 4), np.float32), np.ones(3, np.float32))
    assert info.value.axis == 2


def test_prelu_keeps_nan() -> None:
    got = ops.prelu(np.array([np.nan, -2.0]), np.array([0.5]))
    assert np.isnan(got[0])
    assert got[1] == -1.0


# -- expand and broadcast ------------------------------------------------------------------


@pytest.mark.parametrize(("op", "dtype"), _params("expand"))
def test_expand_every_dtype(op: str, dtype: np.dtype[Any]) -> None:
    x = sample(dtype, (3, 1), seed=50)
    got = ops.expand(x, np.array([2, 1, 6], np.int64))
    assert got.dtype == dtype
    assert got.shape == (2, 3, 6)
    np.testing.assert_array_equal(got, np.broadcast_to(x, (2, 3, 6)))
    assert got.flags.writeable
    assert not np.shares_memory(got, x)


@pytest.mark.parametrize(
    ("x_shape", "shape", "out_shape"),
    [
        pytest.param((3,), (2, 1), (2, 3), id="r47"),
        pytest.param((3,), (1,), (3,), id="r48-target-one"),
        pytest.param((3, 1), (2, 1, 6), (2, 3, 6), id="r49"),
        pytest.param((1,), (0,), (0,), id="r51-zero"),
        pytest.param((3,), (), (3,), id="r52-empty-shape"),
        pytest.param((3,), (0, 3), (0, 3), id="r54"),
        pytest.param((), (2, 2), (2, 2), id="scalar"),
    ],
)
def test_expand_is_bidirectional(x_shape, shape, out_shape) -> None:
    x = np.arange(math.prod(x_shape), dtype=np.float32).reshape(x_shape)
    got = ops.expand(x, shape)
    expected = x * np.ones(shape, dtype=np.float32)  # the ONNX reference's definition
    assert got.shape == out_shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    ("shape", "axis"),
    [pytest.param((2,), 0, id="r50-mismatch"), pytest.param((-1,), None, id="r53-negative")],
)
def test_expand_errors(shape, axis) -> None:
    with pytest.raises(BroadcastError) as info:
        ops.expand(np.ones(3), shape)
    assert info.value.axis == axis


@pytest.mark.parametrize(
    ("data_shape", "target", "mode", "kw", "aligned"),
    [
        pytest.param((3,), (2, 3), "numpy", {}, (1, 3), id="numpy"),
        pytest.param((2, 1), (2, 4), "numpy", {}, (2, 1), id="numpy-column"),
        pytest.param((1,), (0,), "numpy", {}, (1,), id="numpy-one-to-zero"),
        pytest.param(
            (16,), (1, 16, 5, 5), "explicit", {"axes_mapping": [1]}, (1, 16, 1, 1), id="explicit"
        ),
        pytest.param(
            (2, 3), (2, 4, 3), "explicit", {"axes_mapping": [0, 2]}, (2, 1, 3), id="explicit-gap"
        ),
        pytest.param((3, 1), (2, 1, 6), "bidirectional", {}, (1, 3, 1), id="bidirectional"),
        pytest.param((3, 1), (2, 3, 4), "pdpd", {"axis": 1}, (1, 3, 1), id="pdpd"),
        pytest.param((3, 4, 1), (2, 3, 4), "pdpd", {"axis": 1}, (1, 3, 4), id="pdpd-trim"),
        pytest.param((4,), (2, 3, 4), "pdpd", {}, (1, 1, 4), id="pdpd-default-axis"),
    ],
)
def test_broadcast_modes(data_shape, target, mode, kw, aligned) -> None:
    data = np.arange(math.prod(data_shape), dtype=np.int64).reshape(data_shape)
    got = ops.broadcast(data, target, kw.pop("axes_mapping", None), mode=mode, **kw)
    out_shape = np.broadcast_shapes(aligned, target)
    expected = np.broadcast_to(data.reshape(aligned), out_shape)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    assert not np.shares_memory(got, data)


def test_broadcast_numpy_mode_is_one_directional() -> None:
    with pytest.raises(BroadcastError):
        ops.broadcast(np.ones(2), [2, 1])  # the target's 1 does not stretch
    assert ops.broadcast(np.ones(2), [2, 1], mode="bidirectional").shape == (2, 2)


def test_broadcast_pdpd_is_the_elementwise_rule_not_openvinos_broadcast_pdpd() -> None:
    # OpenVINO's Broadcast-3 pdpd gives [2,3] for data [2,3], target [2,1], axis 0 (O194)
    # and ignores extra data dims (O197); ours is the element-wise PDPD rule: B fits A.
    with pytest.raises(BroadcastError):
        ops.broadcast(np.ones((2, 3)), [2, 1], mode="pdpd", axis=0)
    with pytest.raises(BroadcastError):
        ops.broadcast(np.ones((2, 3, 4)), [2, 3], mode="pdpd", axis=0)


@pytest.mark.parametrize("mode", ["none", "unidirectional"])
def test_broadcast_rejects_modes_broadcast3_does_not_have(mode: str) -> None:
    with pytest.raises(BroadcastError, match="mode must be one of"):
        ops.broadcast(np.ones(2), [2, 2], mode=mode)


def test_broadcast_explicit_rejects_duplicate_axes() -> None:
    with pytest.raises(BroadcastError, match="strictly increasing"):
        ops.broadcast(np.ones((2, 2)), [2, 2, 3], [1, 1], mode="explicit")


# -- broadcasting modes of the binary operators --------------------------------------------


def test_binary_pdpd_puts_b_onto_a_from_axis() -> None:
    a = np.arange(24.0).reshape(2, 3, 4)
    b = np.array([[10.0], [20.0], [30.0]])
    got = ops.add(a, b, broadcast="pdpd", axis=1)
    np.testing.assert_array_equal(got, a + b.reshape(1, 3, 1))


def test_binary_pdpd_default_axis_right_aligns() -> None:
    a = np.ones((2, 3, 4), np.int32)
    b = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(ops.mul(a, b, broadcast="pdpd"), a * b)


def test_binary_pdpd_is_one_directional() -> None:
    with pytest.raises(BroadcastError):
        ops.add(np.ones((2, 1, 4)), np.ones(3), broadcast="pdpd", axis=1)  # O72
    with pytest.raises(BroadcastError):
        ops.add(np.ones(3), np.ones((2, 3)), broadcast="pdpd")


def test_binary_none_needs_identical_shapes() -> None:
    a = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(ops.sub(a, a, broadcast="none"), np.zeros((2, 3)))
    with pytest.raises(BroadcastError):
        ops.sub(a, np.ones(3, np.float32), broadcast="none")


def test_binary_rejects_other_broadcast_modes() -> None:
    with pytest.raises(BroadcastError, match="broadcast must be one of numpy, none, pdpd"):
        ops.add(np.ones(2), np.ones(2), broadcast="bidirectional")
    with pytest.raises(BroadcastError, match="unknown mode"):
        ops.add(np.ones(2), np.ones(2), broadcast="nmupy")
    with pytest.raises(BroadcastError, match="axis is only used"):
        ops.add(np.ones(2), np.ones(2), axis=0)


def test_binary_incompatible_shapes_r45() -> None:
    with pytest.raises(BroadcastError) as info:
        ops.add(np.ones(3, np.float32), np.ones(2, np.float32))
    assert info.value.axis == 0


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "out_shape"),
    [
        pytest.param((0,), (1,), (0,), id="r42"),
        pytest.param((2, 0), (2, 1), (2, 0), id="r44"),
        pytest.param((), (), (), id="scalars"),
        pytest.param((), (0, 3), (0, 3), id="scalar-and-empty"),
    ],
)
@pytest.mark.parametrize("op", ["add", "div", "equal", "pow"])
def test_zero_size_and_rank_zero(op, a_shape, b_shape, out_shape) -> None:
    a = np.full(a_shape, 3.0, np.float32)
    b = np.full(b_shape, 2.0, np.float32)
    got = getattr(ops, op)(a, b)
    assert got.shape == out_shape
    assert isinstance(got, np.ndarray)
    expected = {"add": a + b, "div": a / b, "equal": a == b, "pow": a**b}[op]
    np.testing.assert_array_equal(got, expected)


def test_zero_size_where_and_variadic() -> None:
    assert ops.where(np.ones((0, 1), bool), np.ones(3), np.zeros(1)).shape == (0, 3)
    assert ops.sum(np.ones((0, 1)), np.ones(3), np.ones(())).shape == (0, 3)
    assert ops.max(np.ones(()), np.ones(())).shape == ()


def test_results_are_new_writeable_arrays() -> None:
    a = np.ones(3, np.float32)
    for got in (ops.add(a, a), ops.max(a), ops.expand(a, [3]), ops.broadcast(a, [3])):
        assert got.flags.writeable
        assert not np.shares_memory(got, a)


# -- dtype errors ----------------------------------------------------------------------------


def test_binary_dtype_mismatch_names_both_r46() -> None:
    with pytest.raises(TypeError, match="got int32 and float32"):
        ops.add(np.ones(2, np.int32), np.ones(2, np.float32))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "greater", "less"])
def test_bool_is_not_arithmetic(op: str) -> None:
    with pytest.raises(TypeError, match="has dtype bool"):
        getattr(ops, op)(np.ones(2, bool), np.ones(2, bool))


def test_pow_base_must_be_float_or_int32_int64() -> None:
    with pytest.raises(TypeError, match="a has dtype int8"):
        ops.pow(np.ones(2, np.int8), np.ones(2, np.int8))


def test_non_arrays_are_type_errors() -> None:
    with pytest.raises(TypeError, match="expected an array"):
        ops.add(np.ones(2), "1.0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected an array"):
        ops.sum([1.0, 2.0])  # type: ignore[arg-type]


# -- out= ----------------------------------------------------------------------------------


def test_out_is_written_and_returned() -> None:
    a = np.ones((2, 1), np.float32)
    b = np.arange(3, dtype=np.float32)
    out = np.empty((2, 3), np.float32)
    assert ops.add(a, b, out=out) is out
    np.testing.assert_array_equal(out, a + b)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda o: ops.div(np.full((2, 3), -7), np.array([2, -2, 3]), out=o), id="div"),
        pytest.param(lambda o: ops.max(np.ones((2, 1)), np.arange(3.0), out=o), id="max"),
        pytest.param(lambda o: ops.mean(np.ones((2, 1)), np.arange(3.0), out=o), id="mean"),
        pytest.param(
            lambda o: ops.where(np.array([True, False, True]), np.ones((2, 3)), np.zeros(1), out=o),
            id="where",
        ),
        pytest.param(
            lambda o: ops.gemm(np.ones((2, 2)), np.ones((2, 3)), np.ones(3), out=o), id="gemm"
        ),
        pytest.param(lambda o: ops.prelu(-np.ones((2, 3)), np.array([0.5]), out=o), id="prelu"),
        pytest.param(lambda o: ops.expand(np.arange(3.0), [2, 1], out=o), id="expand"),
        pytest.param(lambda o: ops.broadcast(np.arange(3.0), [2, 3], out=o), id="broadcast"),
    ],
)
def test_every_operator_takes_out(call) -> None:
    expected = call(None)
    out = np.full(expected.shape, 99, expected.dtype)
    assert call(out) is out
    np.testing.assert_array_equal(out, expected)


def test_out_wrong_shape_dtype_or_kind() -> None:
    a = np.ones(3, np.float32)
    with pytest.raises(ValueError, match=r"out has shape \[2\]; the result's is \[3\]"):
        ops.add(a, a, out=np.empty(2, np.float32))
    with pytest.raises(TypeError, match="out has dtype float64"):
        ops.add(a, a, out=np.empty(3, np.float64))
    with pytest.raises(TypeError, match="out has dtype float32"):
        ops.equal(a, a, out=np.empty(3, np.float32))
    with pytest.raises(ValueError, match="read-only"):
        ops.add(a, a, out=np.broadcast_to(np.empty(3, np.float32), (3,)))
    with pytest.raises(TypeError, match="NumPy array"):
        ops.add(a, a, out=[0.0, 0.0, 0.0])


def test_out_may_alias_an_operand() -> None:
    a = np.arange(6.0).reshape(2, 3)
    b = np.array([1.0, 2.0, 3.0])
    expected = a + b
    assert ops.add(a, b, out=a) is a
    np.testing.assert_array_equal(a, expected)
    # multi-pass kernels read their operands after writing: the engine must not let that show
    x = np.array([-7, 7, -7], np.int64)
    y = np.array([2, 2, -2], np.int64)
    ops.div(x, y, out=y)
    np.testing.assert_array_equal(y, [-3, 3, 3])
    p, q, r = np.array([1.0, 5.0]), np.array([4.0, 2.0]), np.array([3.0, 3.0])
    ops.max(p, q, r, out=r)
    np.testing.assert_array_equal(r, [4.0, 5.0])
    cond, xs, ys = np.array([True, False]), np.array([1.0, 2.0]), np.array([8.0, 9.0])
    ops.where(cond, xs, ys, out=xs)
    np.testing.assert_array_equal(xs, [1.0, 9.0])


# -- the memory guard ----------------------------------------------------------------------


def meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def test_default_limit_is_the_available_memory() -> None:
    expected = meminfo_available()
    if expected is None:
        pytest.skip("no /proc/meminfo")
    assert abs(ops.get_memory_limit() - expected) < 512 * 2**20  # type: ignore[operator]


def test_a_result_larger_than_memory_is_refused_before_allocating() -> None:
    a = np.ones((10**6, 1))
    b = np.ones(10**6)
    tracemalloc.start()
    try:
        with pytest.raises(MemoryLimitError) as info:
            ops.add(a, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    err = info.value
    assert isinstance(err, MemoryError)
    assert err.shape == (10**6, 10**6)
    assert err.dtype == "float64"
    assert err.nbytes == 8 * 10**12
    assert err.op == "add"
    assert "[1000000,1000000] float64 needs 8000000000000 bytes" in str(err)
    assert peak < 1 << 20


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: ops.add(np.ones((100, 1)), np.ones(100)), id="add"),
        pytest.param(
            lambda: ops.where(np.ones((100, 1), bool), np.ones(100), np.ones(1)), id="where"
        ),
        pytest.param(lambda: ops.sum(np.ones((100, 1)), np.ones(100)), id="sum"),
        pytest.param(lambda: ops.gemm(np.ones((100, 1)), np.ones((1, 100))), id="gemm"),
        pytest.param(lambda: ops.prelu(np.ones((100, 100)), np.ones(1)), id="prelu"),
        pytest.param(lambda: ops.expand(np.ones(1), [100, 100]), id="expand"),
        pytest.param(lambda: ops.broadcast(np.ones(1), [100, 100]), id="broadcast"),
    ],
)
def test_every_operator_is_guarded(call) -> None:
    with ops.memory_limit(79_999):
        with pytest.raises(MemoryLimitError) as info:
            call()
        assert info.value.limit == 79_999
    with ops.memory_limit(80_000):
        assert call().nbytes == 80_000


def test_out_needs_no_allocation_and_passes_the_guard() -> None:
    out = np.empty((100, 100))
    with ops.memory_limit(0):
        assert ops.add(np.ones((100, 1)), np.ones(100), out=out) is out


def test_set_memory_limit_and_restore() -> None:
    try:
        ops.set_memory_limit(1234)
        assert ops.get_memory_limit() == 1234
        with ops.memory_limit(None):
            assert ops.get_memory_limit() != 1234
        assert ops.get_memory_limit() == 1234
    finally:
        ops.set_memory_limit(None)
    with pytest.raises(ValueError, match="0 or more"):
        ops.set_memory_limit(-1)
    with pytest.raises(TypeError):
        ops.set_memory_limit(1.5)  # type: ignore[arg-type]


def test_memory_limit_error_pickles() -> None:
    import pickle

    err = MemoryLimitError("add", (2, 3), "float32", 24, 10)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err)
    assert again.shape == (2, 3)


# -- other array libraries -----------------------------------------------------------------


def test_torch_operands_give_torch_results() -> None:
    torch = pytest.importorskip("torch")
    a = torch.tensor([[-7], [7]], dtype=torch.int32)
    b = torch.tensor([2, -2, 3], dtype=torch.int32)
    got = ops.div(a, b)
    assert isinstance(got, torch.Tensor)
    assert got.dtype == torch.int32
    np.testing.assert_array_equal(got.numpy(), [[-3, 3, -2], [3, -3, 2]])
    assert ops.equal(a, b).dtype == torch.bool
    with pytest.raises(TypeError, match="got int32 and float32"):
        ops.add(a, torch.ones(3))
    with pytest.raises(ZeroDivisionError):
        ops.div(a, torch.zeros(3, dtype=torch.int32))
    pw = ops.pow(torch.tensor([2, -1, 3], dtype=torch.int64), torch.tensor([-1, -1, 2]))
    np.testing.assert_array_equal(pw.numpy(), [0, -1, 9])
    out = torch.empty(2, 3, dtype=torch.int32)
    assert ops.add(a, b, out=out) is out
    np.testing.assert_array_equal(out.numpy(), (a + b).numpy())
    with pytest.raises(TypeError, match="library"):
        ops.add(a, b, out=np.empty((2, 3), np.int32))
    g = ops.gemm(torch.ones(2, 3), torch.ones(4, 3), torch.ones(4), trans_b=True, alpha=2.0)
    np.testing.assert_array_equal(g.numpy(), np.full((2, 4), 7.0))
    e = ops.expand(torch.arange(3.0), [2, 1])
    assert tuple(e.shape) == (2, 3)
    assert e.stride() == (3, 1) and e.is_contiguous()
    e[0, 0] = 5.0  # a new, writable tensor: row 1 is its own memory
    assert e[1, 0] == 0.0
    e.add_(1)  # in place: refused on a stride-0 view
    np.testing.assert_array_equal(e.numpy(), [[6.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    with ops.memory_limit(10), pytest.raises(MemoryLimitError):
        ops.add(torch.ones(2, 1), torch.ones(3))


def _torch_library() -> tuple[Any, Any, Any]:
    torch = pytest.importorskip("torch")

    def contiguous(r: Any) -> bool:
        return bool(r.stride() == torch.empty(r.shape).stride())

    return torch.asarray, lambda r: r.numpy(), contiguous


def _strict_library() -> tuple[Any, Any, Any]:
    xps = pytest.importorskip("array_api_strict")

    def contiguous(r: Any) -> bool:
        view = np.from_dlpack(r)  # shares r's memory
        return bool(view.flags.c_contiguous and view.flags.writeable)

    return xps.asarray, np.asarray, contiguous


def _numpy_library() -> tuple[Any, Any, Any]:
    return np.asarray, np.asarray, lambda r: bool(r.flags.c_contiguous and r.flags.writeable)


_SOURCE = np.array([1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    "library", [_numpy_library, _torch_library, _strict_library], ids=["numpy", "torch", "strict"]
)
@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param(
            lambda x: ops.expand(x, [2, 1]), np.broadcast_to(_SOURCE, (2, 3)), id="expand-grows"
        ),
        pytest.param(lambda x: ops.expand(x, [1]), _SOURCE, id="expand-same-shape"),
        pytest.param(
            lambda x: ops.broadcast(x, [2, 3]), np.broadcast_to(_SOURCE, (2, 3)), id="broadcast"
        ),
        pytest.param(lambda x: ops.broadcast(x, [3]), _SOURCE, id="broadcast-same-shape"),
        pytest.param(
            lambda x: ops.broadcast(x, [3, 2], [0], mode="explicit"),
            np.broadcast_to(_SOURCE[:, None], (3, 2)),
            id="broadcast-explicit",
        ),
    ],
)
def test_materialising_ops_return_new_contiguous_writable_arrays(library, call, expected) -> None:
    make, to_numpy, contiguous = library()
    x = make(_SOURCE.copy())
    got = call(x)
    np.testing.assert_array_equal(to_numpy(got), expected)
    assert contiguous(got)
    got[(0,) * got.ndim] = 99.0  # one element changes: no other, and not x
    changed = expected.copy()
    changed[(0,) * got.ndim] = 99.0
    np.testing.assert_array_equal(to_numpy(got), changed)
    np.testing.assert_array_equal(to_numpy(x), _SOURCE)


@pytest.mark.parametrize(
    "library", [_numpy_library, _torch_library, _strict_library], ids=["numpy", "torch", "strict"]
)
@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda x, o: ops.expand(x, [2, 1], out=o), id="expand"),
        pytest.param(lambda x, o: ops.broadcast(x, [2, 3], out=o), id="broadcast"),
    ],
)
def test_materialising_ops_write_into_out(library, call) -> None:
    make, to_numpy, _ = library()
    out = make(np.zeros((2, 3)))
    assert call(make(_SOURCE.copy()), out) is out
    np.testing.assert_array_equal(to_numpy(out), np.broadcast_to(_SOURCE, (2, 3)))


def test_array_api_strict_expand_is_a_new_writable_array() -> None:
    xps = pytest.importorskip("array_api_strict")
    x = xps.asarray([0.0, 1.0, 2.0])
    e = ops.expand(x, [2, 1])
    assert type(e) is type(x) and e.shape == (2, 3)
    e[0, 0] = 5.0  # array-api-strict refuses to write into a read-only (view) array
    np.testing.assert_array_equal(np.asarray(e), [[5.0, 1.0, 2.0], [0.0, 1.0, 2.0]])
    b = ops.broadcast(x, [2, 3])
    b[0, :] = xps.asarray(7.0)
    np.testing.assert_array_equal(np.asarray(b), [[7.0, 7.0, 7.0], [0.0, 1.0, 2.0]])
    np.testing.assert_array_equal(np.asarray(x), [0.0, 1.0, 2.0])


def test_array_api_strict_operands() -> None:
    xps = pytest.importorskip("array_api_strict")
    a = xps.asarray([[1.0], [np.nan]])
    b = xps.asarray([0.0, 2.0])
    got = ops.max(a, b)
    assert type(got) is type(a)
    np.testing.assert_array_equal(np.asarray(got), [[1.0, 2.0], [np.nan, np.nan]])
    w = ops.where(xps.asarray([True, False]), b, xps.asarray(9.0))
    np.testing.assert_array_equal(np.asarray(w), [0.0, 9.0])
    p = ops.prelu(xps.asarray([-2.0, 3.0]), xps.asarray([0.5]))
    np.testing.assert_array_equal(np.asarray(p), [-1.0, 3.0])
    with pytest.raises(TypeError):
        ops.and_(xps.asarray([1, 0]), xps.asarray([1, 1]))


def test_dask_operands_stay_lazy() -> None:
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    calls = []

    @dask.delayed
    def make() -> np.ndarray:
        calls.append(1)
        return np.array([[-7], [7]], np.int64)

    a = da.from_delayed(make(), shape=(2, 1), dtype=np.int64)
    b = da.from_array(np.array([2, -2, 3], np.int64))
    got = ops.div(a, b)
    assert isinstance(got, da.Array)
    assert calls == []
    np.testing.assert_array_equal(got.compute(), [[-3, 3, -2], [3, -3, 2]])
    # lazy: no memory guard at build time, whatever the size
    big = ops.add(da.ones((10**6, 1), chunks=(10**6, 1)), da.ones(10**6, chunks=10**6))
    assert big.shape == (10**6, 10**6)


def test_bcast_ops_is_reachable_from_bcast() -> None:
    assert bcast.ops is ops


def test_unidirectional_errors_name_the_operator_roles() -> None:
    """Gemm's C and PRelu's slope are named by their roles, not as A/B (issue 14)."""
    a, b = np.ones((2, 3), np.float32), np.ones((3, 10), np.float32)
    with pytest.raises(BroadcastError, match=r"9 vs 10 \(C must equal \(M,N\) or be 1\)"):
        bcast.ops.gemm(a, b, np.ones((9,), np.float32))
    with pytest.raises(BroadcastError, match=r"slope \[2,2,2\] has rank 3, more than X"):
        bcast.ops.prelu(np.ones((2, 2)), np.ones((2, 2, 2)))
