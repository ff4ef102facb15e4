"""The operators of issue 38 against OpenVINO's CPU plugin (one-node models, opset13).

FloorMod, Mod, NotEqual, GreaterEqual, LessEqual, SquaredDifference, Select and FakeQuantize,
each under ``auto_broadcast`` numpy (shapes drawn by hypothesis) and pdpd (the axis given, as
OpenVINO's Python API defaults it to 0, not -1: SEMANTICS §0.4). Expected values are what
OpenVINO computes.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx_nodes import assert_same, broadcastable_operands
from test_ops_openvino import eltwise_case

from bcast import ops

ov = pytest.importorskip("openvino")
from openvino.utils.node_factory import NodeFactory  # noqa: E402

EXAMPLES = settings(max_examples=20, deadline=None)
CORE = ov.Core()


@functools.lru_cache(maxsize=256)
def _compiled(
    op: str, dtypes: tuple[str, ...], ranks: tuple[int, ...], attrs: tuple[tuple[str, Any], ...]
) -> Any:
    params = [
        ov.opset13.parameter(ov.PartialShape([-1] * r), np.dtype(d))
        for d, r in zip(dtypes, ranks, strict=True)
    ]
    node = NodeFactory("opset13").create(op, [p.output(0) for p in params], dict(attrs))
    return CORE.compile_model(ov.Model([node], params), "CPU")


def run_ov(op: str, inputs: list[np.ndarray], **attrs: Any) -> np.ndarray:
    compiled = _compiled(
        op,
        tuple(x.dtype.str for x in inputs),
        tuple(x.ndim for x in inputs),
        tuple(sorted(attrs.items())),
    )
    return np.asarray(compiled(inputs)[0])


BINARY = {
    "FloorMod": lambda a, b, **k: ops.mod(a, b, **k),
    "Mod": lambda a, b, **k: ops.mod(a, b, fmod=1, **k),
    "NotEqual": ops.not_equal,
    "GreaterEqual": ops.greater_or_equal,
    "LessEqual": ops.less_or_equal,
    "SquaredDifference": ops.squared_difference,
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
@EXAMPLES
@given(data=st.data())
def test_binary_ops_match_openvino_numpy_broadcast(op: str, dtype: Any, data: Any) -> None:
    nonzero = op in ("FloorMod", "Mod")
    small = st.integers(-6, 6)
    values = small.map(float) if np.dtype(dtype).kind == "f" else small
    divisor = values.filter(lambda v: v != 0) if nonzero else values
    a, b = data.draw(broadcastable_operands([dtype, dtype], elements_for=[values, divisor]))
    assert_same(BINARY[op](a, b), run_ov(op, [a, b], auto_broadcast="numpy"))


RIGHT_ALIGNED_ONLY = {"GreaterEqual", "LessEqual", "NotEqual"}  # the CPU plugin loses the axis


@pytest.mark.parametrize("mode", ["none", "pdpd"])
@pytest.mark.parametrize("op", sorted(set(BINARY) - {"Mod"}))  # no pdpd Mod in the plugin
@EXAMPLES
@given(data=st.data())
def test_binary_ops_match_openvino_none_and_pdpd(op: str, mode: str, data: Any) -> None:
    a_shape, b_shape, axis = data.draw(eltwise_case(mode, right_aligned=op in RIGHT_ALIGNED_ONLY))
    small = st.integers(-5, 5).map(float)
    divisor = small.filter(lambda v: v != 0) if op == "FloorMod" else small
    a = data.draw(hnp.arrays(np.float32, a_shape, elements=small))
    b = data.draw(hnp.arrays(np.float32, b_shape, elements=divisor))
    attrs: dict[str, Any] = {"auto_broadcast": mode}
    kw: dict[str, Any] = {"broadcast": mode}
    if mode == "pdpd":
        attrs["auto_broadcast.auto_broadcast_axis"] = axis
        kw["axis"] = axis
    assert_same(BINARY[op](a, b, **kw), run_ov(op, [a, b], **attrs))


PDPD = {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": 0}


@pytest.mark.parametrize("op", ["FloorMod", "SquaredDifference"])
def test_binary_ops_match_openvino_pdpd_axis_0(op: str) -> None:
    a = np.arange(-6, 18, dtype=np.float32).reshape(2, 3, 4)
    b = np.array([[3.0], [-2.0]], np.float32)  # [2,1] onto A from axis 0
    assert_same(BINARY[op](a, b, broadcast="pdpd", axis=0), run_ov(op, [a, b], **PDPD))


@pytest.mark.parametrize("op", ["GreaterEqual", "LessEqual", "NotEqual", "Mod"])
def test_pdpd_axis_0_fails_in_the_cpu_plugin_for_comparisons_and_mod(op: str) -> None:
    # B [2,1] at A's axis 0 is valid PDPD (OpenVINO's own shape inference agrees); the CPU
    # plugin right-aligns it for the comparisons ("Eltwise shape infer input shapes dim
    # index: 0 mismatch") and has no pdpd Mod at all (docs/peer-differences.md).
    a = np.arange(-6, 18, dtype=np.float32).reshape(2, 3, 4)
    b = np.array([[3.0], [-2.0]], np.float32)
    with pytest.raises(RuntimeError, match=r"mismatch|Doesn't support broadcast type: pdpd"):
        run_ov(op, [a, b], **PDPD)
    expected = BINARY[op](a, b.reshape(2, 1, 1))  # B placed from axis 0, by NumPy
    assert_same(BINARY[op](a, b, broadcast="pdpd", axis=0), expected)


@EXAMPLES
@given(data=st.data())
def test_select_matches_openvino_numpy_broadcast(data: Any) -> None:
    cond, a, b = data.draw(broadcastable_operands([bool, np.float32, np.float32]))
    assert_same(ops.select(cond, a, b), run_ov("Select", [cond, a, b], auto_broadcast="numpy"))


SELECT_PDPD = {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": -1}


def test_select_matches_openvino_pdpd() -> None:
    then = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    other = np.array([-1, -2, -3, -4], np.int32)
    cond = np.arange(24).reshape(2, 3, 4) % 3 == 0
    expected = run_ov("Select", [cond, then, other], **SELECT_PDPD)
    assert_same(ops.select(cond, then, other, broadcast="pdpd"), expected)


def test_select_pdpd_condition_with_a_trailing_one_is_misplaced_by_openvino() -> None:
    # cond [3,1] onto then [2,3,4], axis -1: rank 3 - 2 = axis 1, the trailing 1 ignored
    # (seed PDPD rules 4 and 5), so cond selects along then's axis 1. OpenVINO's CPU plugin
    # answers another mask (docs/peer-differences.md).
    then = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    other = np.array([-1, -2, -3, -4], np.int32)
    cond = np.array([[True], [False], [True]])
    theirs = run_ov("Select", [cond, then, other], **SELECT_PDPD)
    ours = ops.select(cond, then, other, broadcast="pdpd")
    assert_same(ours, np.where(cond.reshape(1, 3, 1), then, other))
    assert not np.array_equal(ours, theirs)


@st.composite
def limits_onto_x(draw: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x of rank 1..4 (no zero-size dim) and input limits that broadcast onto it one way.

    The usual FakeQuantize: per tensor or per channel limits. OpenVINO's CPU plugin fails
    ("getShape().getRank() == dims.size()") when a limit has a higher rank than x, and
    answers a shape of rank 0 for some zero-size x; those cases are not drawn here.
    """
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    rank = draw(st.integers(0, len(shape)))
    tail = shape[len(shape) - rank :]
    low_shape = tuple(draw(st.sampled_from([d, 1])) for d in tail)
    x = draw(hnp.arrays(np.float32, shape, elements=st.floats(-4, 4, width=32)))
    low = draw(hnp.arrays(np.float32, low_shape, elements=st.floats(-2, -0.5, width=32)))
    high = draw(hnp.arrays(np.float32, low_shape, elements=st.floats(0.5, 2, width=32)))
    return x, low, high


@pytest.mark.parametrize("levels", [2, 3, 16, 255, 256])
@EXAMPLES
@given(case=limits_onto_x())
def test_fake_quantize_matches_openvino(levels: int, case: Any) -> None:
    x, low, high = case
    inputs = [x, low, high, np.array(-1.0, np.float32), np.array(3.0, np.float32)]
    expected = run_ov("FakeQuantize", inputs, levels=levels, auto_broadcast="numpy")
    ours = ops.fake_quantize(*inputs, levels=levels)
    assert ours.shape == expected.shape and ours.dtype == expected.dtype
    # float32 arithmetic in another order: a quotient on a rounding boundary may land one
    # level apart, (3 - -1) / (levels - 1) away; everything else within float32 rounding
    close = np.isclose(ours, expected, rtol=1e-5, atol=1e-5)
    assert close.mean() >= 0.99 or (ours.size < 100 and (~close).sum() <= 1), (ours, expected)


def test_fake_quantize_rounds_half_to_even_as_openvino() -> None:
    x = np.array([0.25, 0.75, 1.25, 1.75], np.float32)  # (x - 0) / 2 * 4 = 0.5, 1.5, 2.5, 3.5
    inputs = [x, np.array(0.0, np.float32), np.array(2.0, np.float32)]
    inputs += [np.array(0.0, np.float32), np.array(4.0, np.float32)]
    expected = run_ov("FakeQuantize", inputs, levels=5, auto_broadcast="numpy")
    assert_same(ops.fake_quantize(*inputs, levels=5), expected)
