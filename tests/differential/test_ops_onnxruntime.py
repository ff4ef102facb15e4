"""`bcast.ops` against onnxruntime (CPU): the expected values are what onnxruntime computes.

Shapes and values are drawn by hypothesis (zero-size dims and rank 0 included); every model
is one ONNX node. Where onnxruntime departs from the ONNX text, a named test pins bcast's
answer and shows the peer's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx_nodes import (
    assert_same,
    broadcastable_operands,
    elements,
    run_ort,
    run_reference,
    unidirectional_pair,
)
from onnxruntime.capi.onnxruntime_pybind11_state import (
    Fail,
    InvalidArgument,
    InvalidGraph,
)

from bcast import BroadcastError, ops

EXAMPLES = settings(max_examples=40, deadline=None)

ONNX_OP = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "equal": "Equal",
    "greater": "Greater", "less": "Less", "and_": "And", "or_": "Or", "xor": "Xor",
    "max": "Max", "min": "Min", "mean": "Mean", "sum": "Sum",
}  # fmt: skip

ARITHMETIC_DTYPES = [np.float32, np.float64, np.int32, np.int64]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("dtype", ARITHMETIC_DTYPES, ids=lambda d: np.dtype(d).name)
@EXAMPLES
@given(data=st.data())
def test_arithmetic_matches_onnxruntime(op: str, dtype: Any, data: Any) -> None:
    nonzero = op == "div" and np.dtype(dtype).kind == "i"
    a, b = data.draw(
        broadcastable_operands(
            [dtype, dtype], elements_for=[elements(dtype), elements(dtype, nonzero=nonzero)]
        )
    )
    expected = run_ort(ONNX_OP[op], [a, b], dtype)
    assert_same(getattr(ops, op)(a, b), expected)


@pytest.mark.parametrize("op", ["equal", "greater", "less"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
@EXAMPLES
@given(data=st.data())
def test_comparisons_match_onnxruntime(op: str, dtype: Any, data: Any) -> None:
    small = st.integers(-2, 2).map(float) if np.dtype(dtype).kind == "f" else st.integers(-2, 2)
    a, b = data.draw(broadcastable_operands([dtype, dtype], elements_for=[small, small]))
    assert_same(getattr(ops, op)(a, b), run_ort(ONNX_OP[op], [a, b], bool))


@pytest.mark.parametrize("op", ["and_", "or_", "xor", "equal"])
@EXAMPLES
@given(data=st.data())
def test_logical_ops_match_onnxruntime(op: str, data: Any) -> None:
    a, b = data.draw(broadcastable_operands([bool, bool]))
    assert_same(getattr(ops, op)(a, b), run_ort(ONNX_OP[op], [a, b], bool))


POW_PAIRS = [
    (np.float32, np.float32),
    (np.float32, np.int64),
    (np.float64, np.int32),
    (np.int32, np.float32),
    (np.int64, np.int64),
    (np.int32, np.int32),
]


@pytest.mark.parametrize(
    ("base", "exponent"),
    POW_PAIRS,
    ids=lambda d: np.dtype(d).name,
)
@EXAMPLES
@given(data=st.data())
def test_pow_matches_onnxruntime(base: Any, exponent: Any, data: Any) -> None:
    base_values = (
        st.integers(-6, 6) if np.dtype(base).kind == "i" else st.floats(0.25, 6.0, width=32)
    )
    exp_values = (
        st.integers(0, 6)
        if np.dtype(exponent).kind == "i"
        else st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, -1.0, -0.5])
    )
    a, b = data.draw(
        broadcastable_operands([base, exponent], elements_for=[base_values, exp_values])
    )
    assert_same(ops.pow(a, b), run_ort("Pow", [a, b], base), rtol=1e-5)


def test_pow_integer_negative_exponent_agrees_with_onnxruntime_r7() -> None:
    a = np.array([2, 2, -2, 1, -1, -1, 3], np.int32)
    b = np.array([-1, 3, -2, -5, -3, -4, -2], np.int32)
    assert_same(ops.pow(a, b), run_ort("Pow", [a, b], np.int32))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("count", [1, 2, 3])
@EXAMPLES
@given(data=st.data())
def test_max_min_match_onnxruntime(op: str, dtype: Any, count: int, data: Any) -> None:
    nan = np.dtype(dtype).kind == "f"
    xs = data.draw(
        broadcastable_operands([dtype] * count, elements_for=[elements(dtype, nan=nan)] * count)
    )
    assert_same(getattr(ops, op)(*xs), run_ort(ONNX_OP[op], xs, dtype))


@pytest.mark.parametrize(
    ("op", "dtype"),
    [
        ("sum", np.float32),
        ("sum", np.float64),
        ("mean", np.float32),
        # onnxruntime 1.31 has no float64 Mean kernel (NOT_IMPLEMENTED): nothing to compare
    ],
    ids=str,
)
@pytest.mark.parametrize("count", [1, 2, 3])
@EXAMPLES
@given(data=st.data())
def test_sum_mean_match_onnxruntime(op: str, dtype: Any, count: int, data: Any) -> None:
    xs = data.draw(broadcastable_operands([dtype] * count))
    assert_same(getattr(ops, op)(*xs), run_ort(ONNX_OP[op], xs, dtype), rtol=1e-5)


# onnxruntime 1.31 has no bool Where kernel (NOT_IMPLEMENTED); the reference covers it.
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8], ids=lambda d: np.dtype(d).name)
@EXAMPLES
@given(data=st.data())
def test_where_matches_onnxruntime(dtype: Any, data: Any) -> None:
    c, x, y = data.draw(broadcastable_operands([bool, dtype, dtype]))
    assert_same(ops.where(c, x, y), run_ort("Where", [c, x, y], dtype))


@st.composite
def gemm_case(draw: Any) -> tuple[Any, ...]:
    # K >= 1: onnxruntime drops beta when K == 0 (test_gemm_empty_product_keeps_beta_...)
    m, k, n = draw(st.integers(0, 4)), draw(st.integers(1, 4)), draw(st.integers(0, 4))
    trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
    floats = elements(np.float32)
    a = draw(hnp.arrays(np.float32, (k, m) if trans_a else (m, k), elements=floats))
    b = draw(hnp.arrays(np.float32, (n, k) if trans_b else (k, n), elements=floats))
    c_shape = draw(st.sampled_from([None, (), (1,), (n,), (1, n), (m, 1), (m, n), (1, 1)]))
    c = None if c_shape is None else draw(hnp.arrays(np.float32, c_shape, elements=floats))
    alpha = draw(st.sampled_from([1.0, 0.5, -2.0]))
    beta = draw(st.sampled_from([1.0, 0.0, 3.0]))
    return a, b, c, alpha, beta, trans_a, trans_b


@EXAMPLES
@given(case=gemm_case())
def test_gemm_matches_onnxruntime(case: tuple[Any, ...]) -> None:
    a, b, c, alpha, beta, trans_a, trans_b = case
    inputs = [a, b] if c is None else [a, b, c]
    expected = run_ort(
        "Gemm",
        inputs,
        np.float32,
        alpha=alpha,
        beta=beta,
        transA=int(trans_a),
        transB=int(trans_b),
    )
    ours = ops.gemm(*inputs, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("op", ["Sum", "Mean"])
@pytest.mark.parametrize(
    "shapes", [[(64, 64)] * 3, [(64, 64), (1, 64), (64, 1)], [(64, 64)] * 2, [(8, 8)]]
)
def test_float16_sum_and_mean_round_once_as_onnxruntime_does(
    op: str, shapes: list[tuple[int, ...]]
) -> None:
    # onnxruntime adds (and divides) float16 in float32 and rounds once; rounding after each
    # addition (the ONNX reference, and bcast before) left about a fifth (Sum) and a third
    # (Mean) of three such inputs' elements 1-2 units in the last place away
    rng = np.random.default_rng(len(shapes))
    scales = [1.0, 100.0, 0.01]
    xs = [(rng.standard_normal(s) * scales[i]).astype(np.float16) for i, s in enumerate(shapes)]
    theirs = run_ort(op, xs, np.float16)
    ours = getattr(ops, op.lower())(*xs)
    assert ours.dtype == theirs.dtype == np.float16
    np.testing.assert_array_equal(ours, theirs)


def _signaling(x: np.ndarray) -> np.ndarray:
    bits = x.view(np.uint16)
    return ((bits & 0x7E00) == 0x7C00) & ((bits & 0x01FF) != 0)


def test_float16_pow_agrees_with_onnxruntime_on_every_base() -> None:
    # every float16 bit pattern (NaNs, subnormals, infinities, both zeros) as the base, and
    # as the exponent of a few bases: bcast's compiled float16 Pow where the CPU converts
    # halves (waited for), NumPy's loop elsewhere; bit for bit, NaN where onnxruntime has
    # one. Signaling NaNs apart: see the next test.
    from bcast import engine

    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    exponents = np.array([2, 3, 0.5, -1, 1.7, -0.3333, 0, np.inf, np.nan], np.float16)
    bases = np.array([1, 2, 0.5, 0, -0.0, -2, np.inf, np.nan], np.float16)
    for a, b in ((every.reshape(-1, 1), exponents), (bases.reshape(-1, 1), every)):
        theirs = run_ort("Pow", [a, b], np.float16)
        with engine.settings(compiled_wait=True), np.errstate(all="ignore"):
            ours = ops.pow(a, b)
        assert ours.dtype == theirs.dtype == np.float16
        quiet = ~(_signaling(a) | _signaling(b))
        assert quiet.sum() > 0.98 * quiet.size
        np.testing.assert_array_equal(ours[quiet], theirs[quiet])


@pytest.mark.parametrize("n", [4, 64, 6000])  # bcast: the tiny path, NumPy's, the compiled
def test_float16_pow_of_a_signaling_nan_is_nan_where_onnxruntime_varies_by_length(
    n: int,
) -> None:
    # sNaN ** 0 and 1 ** sNaN: NaN in NumPy's float16 power and the ONNX reference (both
    # widen in software, keeping the NaN signaling, and powf answers NaN). onnxruntime's
    # answer depends on the length: NaN for 4 elements, 1 for 64 (its vector loop widens
    # with F16C, which quiets the NaN, and powf(qNaN, 0) is 1). bcast answers NaN at every
    # length, on every path.
    from bcast import engine

    snan = np.resize(np.array([0x7C01, 0xFD00, 0x7D55], np.uint16).view(np.float16), n)
    zero, one = np.zeros(n, np.float16), np.ones(n, np.float16)
    with engine.settings(compiled_wait=True), np.errstate(invalid="ignore"):
        assert np.isnan(ops.pow(snan, zero)).all() and np.isnan(ops.pow(one, snan)).all()
    assert np.isnan(run_reference("Pow", [snan, zero], np.float16)).all()
    assert np.isnan(run_reference("Pow", [one, snan], np.float16)).all()
    theirs = run_ort("Pow", [snan, zero], np.float16)
    assert np.isnan(theirs).all() if n == 4 else (theirs == 1).all(), theirs[:4]


@pytest.mark.parametrize(
    ("m", "k", "n", "alpha", "beta", "c_shape"),
    [
        (512, 32, 96, 1.0, 1.0, (96,)),  # gpt2's c_attn, batch 8 x seq 64
        (64, 100, 33, 0.37, -1.5, (64, 1)),
        (128, 300, 17, -2.5, 0.25, (128, 17)),
        (8, 64, 10, 1.0, 0.0, (10,)),
    ],
)
def test_float16_gemm_rounds_once_as_onnxruntime_does(
    m: int, k: int, n: int, alpha: float, beta: float, c_shape: tuple[int, ...]
) -> None:
    # onnxruntime computes a float16 Gemm in float32 and rounds the result once; rounding
    # the product to float16 and adding C in float16 (the ONNX reference, and bcast before)
    # left a third of these elements 1-4 units in the last place away
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = (rng.standard_normal((k, n)) * 0.2).astype(np.float16)
    c = rng.standard_normal(c_shape).astype(np.float16)
    theirs = run_ort("Gemm", [a, b, c], np.float16, alpha=alpha, beta=beta)
    ours = ops.gemm(a, b, c, alpha=alpha, beta=beta)
    assert ours.dtype == theirs.dtype == np.float16
    apart = np.abs(ours.astype(np.float32) - theirs.astype(np.float32))
    spacing = np.spacing(np.abs(theirs)).astype(np.float32)
    assert np.all(apart <= spacing)  # at most 1 unit in the last place
    # and the same bits but where onnxruntime's float32 sums, in another order, round apart
    assert np.count_nonzero(ours != theirs) <= ours.size // 1000


@pytest.mark.parametrize(
    "c_shape",
    [pytest.param((3,), id="r32"), pytest.param((2, 4, 1), id="r33")],
)
def test_gemm_bad_bias_fails_in_both_r32_r33(c_shape) -> None:
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    c = np.ones(c_shape, np.float32)
    with pytest.raises(InvalidArgument, match="Invalid bias shape"):
        run_ort("Gemm", [a, b, c], np.float32)
    with pytest.raises(BroadcastError):
        ops.gemm(a, b, c)


@EXAMPLES
@given(pair=unidirectional_pair(np.float32, np.float32))
def test_prelu_matches_onnxruntime_when_the_slope_is_unidirectional(pair) -> None:
    x, slope = pair
    assert_same(ops.prelu(x, slope), run_ort("PRelu", [x, slope], np.float32))


def test_prelu_onnxruntime_broadcasts_both_ways_bcast_does_not_r40() -> None:
    x = np.array([-1.0, -2.0, 1.0], np.float32)
    slope = np.array([[0.1, 0.1, 0.1], [1.0, 1.0, 1.0]], np.float32)
    theirs = run_ort("PRelu", [x, slope], np.float32)
    assert theirs.shape == (2, 3)  # onnxruntime grows the result past X: not the ONNX text
    with pytest.raises(BroadcastError):
        ops.prelu(x, slope)  # PRelu-16: slope is unidirectional broadcastable to X


def test_prelu_channel_slope_fails_in_both_r38() -> None:
    x = np.ones((2, 3, 4), np.float32)
    slope = np.ones(3, np.float32)
    with pytest.raises(Fail, match="Attempting to broadcast an axis"):
        run_ort("PRelu", [x, slope], np.float32)
    with pytest.raises(BroadcastError):
        ops.prelu(x, slope)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, bool], ids=lambda d: np.dtype(d).name)
@EXAMPLES
@given(data=st.data())
def test_expand_matches_onnxruntime(dtype: Any, data: Any) -> None:
    x, target = data.draw(broadcastable_operands([dtype, np.int8]))
    shape = np.array(target.shape, np.int64)
    assert_same(ops.expand(x, shape), run_ort("Expand", [x, shape], dtype))


def test_expand_incompatible_fails_in_both_r50() -> None:
    x, shape = np.ones(3, np.float32), np.array([2], np.int64)
    with pytest.raises(InvalidArgument, match="invalid expand shape"):
        run_ort("Expand", [x, shape], np.float32)
    with pytest.raises(BroadcastError):
        ops.expand(x, shape)


def test_integer_division_by_zero_fails_in_both() -> None:
    a, b = np.array([1, 2], np.int32), np.array([1, 0], np.int32)
    with pytest.raises(Exception, match="Integer division by zero"):
        run_ort("Div", [a, b], np.int32)
    with pytest.raises(ZeroDivisionError):
        ops.div(a, b)


@pytest.mark.parametrize(
    ("op", "onnx_op"),
    [("sum", "Sum"), ("mean", "Mean"), ("and_", "And"), ("or_", "Or")],
)
def test_schema_rejections_match_onnxruntime_r12_r14_r22_r24(op: str, onnx_op: str) -> None:
    a = np.array([1, 0], np.int32)
    with pytest.raises(InvalidGraph, match="Type Error"):
        run_ort(onnx_op, [a, a], np.int32 if op in ("sum", "mean") else bool)
    with pytest.raises(TypeError):
        getattr(ops, op)(a, a)


def test_integer_zero_to_a_negative_power_onnxruntime_gives_int_min_bcast_raises() -> None:
    a, b = np.array([0, 0], np.int32), np.array([-1, -2], np.int32)
    theirs = run_ort("Pow", [a, b], np.int32)  # the C cast of inf: INT_MIN on x86-64
    assert theirs.dtype == np.int32
    with pytest.raises(ZeroDivisionError, match="negative integer power"):
        ops.pow(a, b)


def test_gemm_bad_bias_with_beta_zero_fails_in_both() -> None:
    a, b, c = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), np.ones(3, np.float32)
    with pytest.raises(InvalidArgument, match="Invalid bias shape"):
        run_ort("Gemm", [a, b, c], np.float32, beta=0.0)
    with pytest.raises(BroadcastError):
        ops.gemm(a, b, c, beta=0.0)


def test_gemm_empty_product_keeps_beta_where_onnxruntime_before_1_32_drops_it() -> None:
    # K = 0: A' @ B' is a zero matrix, so Y = beta * C. onnxruntime before 1.32 returned C
    # unscaled; 1.32 returns beta * C, as the reference and bcast do.
    a, b = np.ones((2, 0), np.float32), np.ones((0, 3), np.float32)
    c = np.array([[1.0], [2.0]], np.float32)
    spec = np.broadcast_to(3 * c, (2, 3))
    np.testing.assert_array_equal(run_reference("Gemm", [a, b, c], np.float32, beta=3.0), spec)
    np.testing.assert_array_equal(ops.gemm(a, b, c, beta=3.0), spec)
    theirs = run_ort("Gemm", [a, b, c], np.float32, beta=3.0)
    fixed = _version(onnxruntime.__version__) >= (1, 32)
    np.testing.assert_array_equal(theirs, spec if fixed else np.broadcast_to(c, (2, 3)))


def _version(text: str) -> tuple[int, ...]:
    """``"1.32.0"`` -> ``(1, 32, 0)`` (a suffix such as ``.dev1`` ends the numbers)."""
    numbers = []
    for part in text.split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)
