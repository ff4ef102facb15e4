"""`bcast.ops` against the ONNX reference (`onnx.reference.ReferenceEvaluator`).

The expected values are what the reference computes, for every dtype NumPy holds. Where the
reference departs from the ONNX text (PRelu's channel fallback, Mean's in-place
accumulation, integer Div by zero, integer Pow with negative exponents, types the schemas
forbid), a named test shows the reference's answer and pins bcast's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx_nodes import (
    assert_same,
    broadcastable_operands,
    elements,
    run_reference,
    unidirectional_pair,
)

from bcast import BroadcastError, ops

EXAMPLES = settings(max_examples=25, deadline=None)

ONNX_OP = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "equal": "Equal",
    "greater": "Greater", "less": "Less", "and_": "And", "or_": "Or", "xor": "Xor",
    "max": "Max", "min": "Min", "mean": "Mean", "sum": "Sum",
}  # fmt: skip

INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, np.float32, np.float64]
NUMERIC = INTEGERS + FLOATS


def _name(d: Any) -> str:
    return np.dtype(d).name


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=_name)
@EXAMPLES
@given(data=st.data())
def test_arithmetic_matches_the_reference(op: str, dtype: Any, data: Any) -> None:
    nonzero = op == "div" and np.dtype(dtype).kind in "iu"
    a, b = data.draw(
        broadcastable_operands(
            [dtype, dtype], elements_for=[elements(dtype), elements(dtype, nonzero=nonzero)]
        )
    )
    with np.errstate(all="ignore"):
        expected = run_reference(ONNX_OP[op], [a, b], dtype)
    assert_same(getattr(ops, op)(a, b), expected)


@pytest.mark.parametrize("op", ["equal", "greater", "less"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=_name)
@EXAMPLES
@given(data=st.data())
def test_comparisons_match_the_reference(op: str, dtype: Any, data: Any) -> None:
    small = st.integers(0, 2)
    a, b = data.draw(broadcastable_operands([dtype, dtype], elements_for=[small, small]))
    assert_same(getattr(ops, op)(a, b), run_reference(ONNX_OP[op], [a, b], bool))


@pytest.mark.parametrize("op", ["and_", "or_", "xor"])
@EXAMPLES
@given(data=st.data())
def test_logical_ops_match_the_reference(op: str, data: Any) -> None:
    a, b = data.draw(broadcastable_operands([bool, bool]))
    assert_same(getattr(ops, op)(a, b), run_reference(ONNX_OP[op], [a, b], bool))


@pytest.mark.parametrize(
    ("base", "exponent"),
    [(b, e) for b in [np.float32, np.float64, np.int32, np.int64] for e in NUMERIC],
    ids=_name,
)
@EXAMPLES
@given(data=st.data())
def test_pow_matches_the_reference(base: Any, exponent: Any, data: Any) -> None:
    base_values = (
        st.integers(-6, 6) if np.dtype(base).kind == "i" else st.floats(0.25, 6.0, width=16)
    )
    # non-negative exponents for integers: the reference raises on negative ones (R7)
    exp_values = (
        st.integers(0, 5) if np.dtype(exponent).kind in "iu" else st.floats(-2, 3, width=16)
    )
    a, b = data.draw(
        broadcastable_operands([base, exponent], elements_for=[base_values, exp_values])
    )
    with np.errstate(all="ignore"):
        expected = run_reference("Pow", [a, b], base)
    assert_same(ops.pow(a, b), expected, rtol=1e-6)


@pytest.mark.parametrize(
    ("op", "dtype"),
    [("max", d) for d in NUMERIC] + [("min", d) for d in NUMERIC] + [("sum", d) for d in FLOATS],
    ids=str,
)
@pytest.mark.parametrize("count", [1, 2, 3])
@EXAMPLES
@given(data=st.data())
def test_max_min_sum_match_the_reference(op: str, dtype: Any, count: int, data: Any) -> None:
    nan = np.dtype(dtype).kind == "f"
    xs = data.draw(
        broadcastable_operands([dtype] * count, elements_for=[elements(dtype, nan=nan)] * count)
    )
    assert_same(getattr(ops, op)(*xs), _reference_rounded_once(ONNX_OP[op], xs, dtype))


def _reference_rounded_once(op: str, xs: list[np.ndarray], dtype: Any) -> np.ndarray:
    """The reference's answer; for float16 Sum and Mean, its float32 answer rounded once.

    bcast adds float16 in float32 and rounds once, as onnxruntime does; the reference
    rounds after each addition (docs/peer-differences.md).
    """
    if np.dtype(dtype) != np.float16 or op not in ("Sum", "Mean"):
        return run_reference(op, xs, dtype)
    wide = run_reference(op, [x.astype(np.float32) for x in xs], np.float32)
    return wide.astype(np.float16)


@st.composite
def first_input_full(draw: Any, dtype: Any, count: int) -> list[np.ndarray]:
    """Operands whose first one already has the broadcast shape (the reference's Mean needs it)."""
    full = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    shapes = [full] + [
        draw(hnp.broadcastable_shapes(full, min_dims=0, max_dims=len(full), min_side=0))
        for _ in range(count - 1)
    ]
    return [draw(hnp.arrays(np.dtype(dtype), s, elements=elements(dtype))) for s in shapes]


@pytest.mark.parametrize("dtype", FLOATS, ids=_name)
@pytest.mark.parametrize("count", [1, 2, 3])
@EXAMPLES
@given(data=st.data())
def test_mean_matches_the_reference_when_input0_is_full(dtype: Any, count: int, data: Any) -> None:
    xs = data.draw(first_input_full(dtype, count))
    try:
        expected = _reference_rounded_once("Mean", xs, dtype)
    except ValueError:
        # hypothesis's broadcastable_shapes may still grow a 1 of input 0 (e.g. 1 vs 0)
        return
    assert_same(ops.mean(*xs), expected)


@pytest.mark.parametrize(
    "dtype", [np.float16, np.int8, np.uint64, bool, object], ids=lambda d: np.dtype(d).name
)
@EXAMPLES
@given(data=st.data())
def test_where_matches_the_reference(dtype: Any, data: Any) -> None:
    strings = st.sampled_from(["a", "bb", ""])
    values = strings if dtype is object else elements(dtype)
    c, x, y = data.draw(
        broadcastable_operands([bool, dtype, dtype], elements_for=[st.booleans(), values, values])
    )
    ours, theirs = ops.where(c, x, y), run_reference("Where", [c, x, y], dtype)
    assert ours.shape == theirs.shape
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


@st.composite
def gemm_case(draw: Any, dtype: Any) -> tuple[Any, ...]:
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
    small = st.integers(-5, 5) if np.dtype(dtype).kind in "iu" else st.floats(-4, 4, width=32)
    if np.dtype(dtype).kind == "u":
        small = st.integers(0, 5)
    a = draw(hnp.arrays(dtype, (k, m) if trans_a else (m, k), elements=small))
    b = draw(hnp.arrays(dtype, (n, k) if trans_b else (k, n), elements=small))
    c_shape = draw(st.sampled_from([None, (), (1,), (n,), (1, n), (m, 1), (m, n)]))
    c = None if c_shape is None else draw(hnp.arrays(dtype, c_shape, elements=small))
    alpha = draw(st.sampled_from([1.0, 2.0, 0.5]))
    beta = draw(st.sampled_from([1.0, 0.0, 3.0, 0.25]))
    return a, b, c, alpha, beta, trans_a, trans_b


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64], ids=_name
)
@EXAMPLES
@given(data=st.data())
def test_gemm_matches_the_reference(dtype: Any, data: Any) -> None:
    a, b, c, alpha, beta, trans_a, trans_b = data.draw(gemm_case(dtype))
    inputs = [a, b] if c is None else [a, b, c]
    expected = run_reference(
        "Gemm", inputs, dtype, alpha=alpha, beta=beta, transA=int(trans_a), transB=int(trans_b)
    )
    ours = ops.gemm(*inputs, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)
    assert ours.dtype == expected.dtype
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64], ids=_name)
@EXAMPLES
@given(data=st.data())
def test_prelu_matches_the_reference_when_the_slope_is_unidirectional(
    dtype: Any, data: Any
) -> None:
    x, slope = data.draw(unidirectional_pair(dtype, dtype))
    assert_same(ops.prelu(x, slope), run_reference("PRelu", [x, slope], dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, bool, object], ids=_name)
@EXAMPLES
@given(data=st.data())
def test_expand_matches_the_reference(dtype: Any, data: Any) -> None:
    values = st.sampled_from(["x", "yy"]) if dtype is object else elements(dtype)
    x, target = data.draw(
        broadcastable_operands([dtype, np.int8], elements_for=[values, st.just(0)])
    )
    shape = np.array(target.shape, np.int64)
    ours, theirs = ops.expand(x, shape), run_reference("Expand", [x, shape], dtype)
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


# -- where the reference departs from the ONNX text -----------------------------------------


def test_prelu_reference_channel_fallback_is_not_followed_r38() -> None:
    x = np.arange(-12.0, 12.0, dtype=np.float32).reshape(2, 3, 4)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    theirs = run_reference("PRelu", [x, slope], np.float32)
    assert theirs.shape == (2, 3, 4)  # slope [3] applied along axis 1: not numpy broadcasting
    with pytest.raises(BroadcastError) as info:
        ops.prelu(x, slope)
    assert info.value.axis == 2


def test_prelu_reference_broadcasts_the_slope_both_ways_r40() -> None:
    x = np.array([-1.0, -2.0, 1.0], np.float32)
    slope = np.full((2, 3), 0.5, np.float32)
    assert run_reference("PRelu", [x, slope], np.float32).shape == (2, 3)
    with pytest.raises(BroadcastError):
        ops.prelu(x, slope)


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param([[1.0, 2.0], [4.0], [[10.0], [20.0]]], id="r10-first-not-largest"),
        pytest.param([[[10.0], [20.0]], [1.0, 2.0], [4.0]], id="r11-first-largest-rank"),
    ],
)
def test_mean_broadcasts_where_the_reference_fails_r10_r11(inputs) -> None:
    xs = [np.array(v, np.float32) for v in inputs]
    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        run_reference("Mean", xs, np.float32)
    expected = sum(np.broadcast_arrays(*[x.astype(np.float64) for x in xs])) / len(xs)
    np.testing.assert_allclose(ops.mean(*xs), expected, rtol=1e-6)


def test_integer_div_by_zero_reference_gives_zero_bcast_raises() -> None:
    a, b = np.array([7, -7], np.int32), np.array([0, 0], np.int32)
    with np.errstate(all="ignore"):
        theirs = run_reference("Div", [a, b], np.int32)
    np.testing.assert_array_equal(theirs, [0, 0])
    with pytest.raises(ZeroDivisionError):
        ops.div(a, b)


def test_integer_pow_negative_exponent_reference_raises_bcast_truncates_r7() -> None:
    a, b = np.array([2, 2], np.int32), np.array([-1, 3], np.int32)
    with pytest.raises(ValueError, match="negative integer powers"):
        run_reference("Pow", [a, b], np.int32)
    np.testing.assert_array_equal(ops.pow(a, b), [0, 8])  # onnxruntime's answer


@pytest.mark.parametrize(
    ("op", "onnx_op", "dtype", "out"),
    [
        pytest.param("sum", "Sum", np.int32, np.int32, id="r14-sum-int"),
        pytest.param("mean", "Mean", np.int32, np.int32, id="r12-mean-int"),
        pytest.param("and_", "And", np.int32, bool, id="r22-and-int"),
        pytest.param("or_", "Or", np.uint8, bool, id="r24-or-uint8"),
    ],
)
def test_reference_computes_what_the_schema_forbids(op, onnx_op, dtype, out) -> None:
    a = np.array([1, 2], dtype)
    b = np.array([2, 0], dtype)
    run_reference(onnx_op, [a, b], out)  # computes something
    with pytest.raises(TypeError, match="does not allow"):
        getattr(ops, op)(a, b)


def test_gemm_bad_bias_with_beta_zero_reference_accepts_bcast_rejects() -> None:
    # The reference skips C entirely when beta == 0 (`if c is not None and beta != 0`);
    # onnxruntime and bcast still require C to broadcast unidirectionally to (M, N).
    a, b, c = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), np.ones(3, np.float32)
    assert run_reference("Gemm", [a, b, c], np.float32, beta=0.0).shape == (2, 4)
    with pytest.raises(BroadcastError):
        ops.gemm(a, b, c, beta=0.0)
