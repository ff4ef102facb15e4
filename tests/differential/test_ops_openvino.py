"""`bcast.ops` against OpenVINO's CPU plugin: the expected values are what OpenVINO computes.

One-node models: the element-wise ops with ``auto_broadcast`` none / numpy / pdpd (the PDPD
axis is set explicitly: OpenVINO's Python API and IR reader default it to 0, not -1, see
SEMANTICS §0.4), Select, and Broadcast-3 in its four modes with a constant target.
Where OpenVINO departs from bcast's decisions (Broadcast-3 pdpd, PDPD trailing ones, PDPD
B=1 against A=0), a named test shows OpenVINO's answer and pins bcast's.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx_nodes import assert_same, elements

from bcast import BroadcastError, ops

ov = pytest.importorskip("openvino")
from openvino.utils.node_factory import NodeFactory  # noqa: E402

EXAMPLES = settings(max_examples=20, deadline=None)
CORE = ov.Core()

OV_OP = {
    "add": "Add", "sub": "Subtract", "mul": "Multiply", "div": "Divide", "pow": "Power",
    "equal": "Equal", "greater": "Greater", "less": "Less",
    "and_": "LogicalAnd", "or_": "LogicalOr", "xor": "LogicalXor",
}  # fmt: skip


def _attrs(mode: str, axis: int | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"auto_broadcast": mode}
    if mode == "pdpd":
        attrs["auto_broadcast.auto_broadcast_axis"] = axis
    return attrs


@functools.lru_cache(maxsize=512)
def _compiled(
    op: str, dtypes: tuple[str, ...], ranks: tuple[int, ...], attrs: tuple[tuple[str, Any], ...]
) -> Any:
    # dims dynamic, ranks fixed: the CPU plugin rejects dynamic ranks; one compile per ranks
    params = [
        ov.opset13.parameter(ov.PartialShape([-1] * r), np.dtype(d))
        for d, r in zip(dtypes, ranks, strict=True)
    ]
    node = NodeFactory("opset13").create(op, [p.output(0) for p in params], dict(attrs))
    return CORE.compile_model(ov.Model([node], params), "CPU")


def run_eltwise(
    op: str, inputs: list[np.ndarray], mode: str, axis: int | None = None, **extra: Any
) -> np.ndarray:
    attrs = tuple(sorted((_attrs(mode, axis) | extra).items()))
    compiled = _compiled(
        op, tuple(x.dtype.str for x in inputs), tuple(x.ndim for x in inputs), attrs
    )
    return np.asarray(compiled(inputs)[0])


def run_broadcast(
    data: np.ndarray,
    target: tuple[int, ...],
    axes_mapping: list[int] | None = None,
    *,
    mode: str,
    axis: int | None = None,
) -> np.ndarray:
    param = ov.opset13.parameter(ov.PartialShape([-1] * data.ndim), data.dtype)
    args = [param.output(0), ov.opset13.constant(np.array(target, np.int64)).output(0)]
    if axes_mapping is not None:
        args.append(ov.opset13.constant(np.array(axes_mapping, np.int64)).output(0))
    attrs: dict[str, Any] = {"mode": mode}
    if mode == "pdpd":
        attrs["mode.mode.axis"] = axis
    node = NodeFactory("opset3").create("Broadcast", args, attrs)
    compiled = CORE.compile_model(ov.Model([node], [param]), "CPU")
    return np.asarray(compiled([data])[0])


# -- strategies: shapes for each auto_broadcast mode ----------------------------------------


@st.composite
def pdpd_shapes(
    draw: Any, *, right_aligned: bool = False
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """A, B and axis where B fits A from axis, each B dim A's or 1 (no dims of 0)."""
    a = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
    axis = draw(st.integers(0, len(a)))
    length = len(a) - axis if right_aligned else draw(st.integers(0, len(a) - axis))
    b = tuple(draw(st.sampled_from([d, 1])) for d in a[axis : axis + length])
    return a, b, axis


@st.composite
def eltwise_case(
    draw: Any, mode: str, *, right_aligned: bool = False
) -> tuple[tuple[int, ...], tuple[int, ...], int | None]:
    if mode == "numpy":
        shapes = draw(
            hnp.mutually_broadcastable_shapes(
                num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=4
            )
        )
        return shapes.input_shapes[0], shapes.input_shapes[1], None
    if mode == "none":
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
        return shape, shape, None
    a, b, axis = draw(pdpd_shapes(right_aligned=right_aligned))
    return a, b, axis


ELTWISE = [
    ("add", np.float32),
    ("add", np.int32),
    ("sub", np.int64),
    ("mul", np.float32),
    ("div", np.float32),
    ("div", np.int32),
    ("pow", np.float32),
    ("equal", np.int32),
    ("greater", np.float32),
    ("less", np.int64),
    ("and_", bool),
    ("or_", bool),
    ("xor", bool),
]


PDPD_AXIS_LOST = {"sub", "div", "equal", "greater", "less", "and_", "or_", "xor"}


@pytest.mark.parametrize("mode", ["numpy", "none", "pdpd"])
@pytest.mark.parametrize(("op", "dtype"), ELTWISE, ids=lambda v: getattr(v, "__name__", v))
@EXAMPLES
@given(data=st.data())
def test_eltwise_matches_openvino(op: str, dtype: Any, mode: str, data: Any) -> None:
    # The CPU plugin loses a PDPD axis that does not right-align B for these ops
    # (test_pdpd_axis_is_lost_by_the_cpu_plugin_for_some_ops): compare right-aligned B only.
    right_aligned = op in PDPD_AXIS_LOST
    a_shape, b_shape, axis = data.draw(eltwise_case(mode, right_aligned=right_aligned))
    dt = np.dtype(dtype)
    if op == "pow":
        a_values, b_values = st.floats(0.5, 4.0, width=32), st.sampled_from([0.0, 1.0, 2.0, 0.5])
    elif op == "div" and dt.kind == "i":
        a_values, b_values = elements(dt), elements(dt, nonzero=True)
    elif dt.kind in "if":
        a_values = b_values = st.integers(-3, 3)  # small values: comparisons see equal ones
    else:
        a_values = b_values = elements(dt)
    a = data.draw(hnp.arrays(dt, a_shape, elements=a_values))
    b = data.draw(hnp.arrays(dt, b_shape, elements=b_values))
    # Divide: m_pythondiv=False asks for truncation, ONNX Div's rule (see the D17 tests)
    extra = {"m_pythondiv": False} if op == "div" else {}
    theirs = run_eltwise(OV_OP[op], [a, b], mode, axis, **extra)
    kw: dict[str, Any] = {"broadcast": mode}
    if mode == "pdpd":
        kw["axis"] = axis
    assert_same(getattr(ops, op)(a, b, **kw), theirs, rtol=1e-6)


@EXAMPLES
@given(data=st.data())
def test_select_matches_openvino(data: Any) -> None:
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=3)
    )
    c_shape, x_shape, y_shape = shapes.input_shapes
    c = data.draw(hnp.arrays(bool, c_shape))
    x = data.draw(hnp.arrays(np.float32, x_shape, elements=elements(np.float32)))
    y = data.draw(hnp.arrays(np.float32, y_shape, elements=elements(np.float32)))
    assert_same(ops.where(c, x, y), run_eltwise("Select", [c, x, y], "numpy"))


@pytest.mark.parametrize("op", ["max", "min"])
@EXAMPLES
@given(data=st.data())
def test_maximum_minimum_match_openvino(op: str, data: Any) -> None:
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, min_side=0))
    a = data.draw(hnp.arrays(np.int32, shapes.input_shapes[0], elements=elements(np.int32)))
    b = data.draw(hnp.arrays(np.int32, shapes.input_shapes[1], elements=elements(np.int32)))
    theirs = run_eltwise("Maximum" if op == "max" else "Minimum", [a, b], "numpy")
    assert_same(getattr(ops, op)(a, b), theirs)


def test_integer_divide_truncates_on_the_cpu_plugin_d17() -> None:
    a = np.array([-7, 7, -7, 7], np.int32)
    b = np.array([2, -2, -2, 2], np.int32)
    theirs = run_eltwise("Divide", [a, b], "numpy")  # default m_pythondiv=True, yet trunc
    np.testing.assert_array_equal(theirs, [-3, -3, 3, 3])
    np.testing.assert_array_equal(ops.div(a, b), theirs)


def test_integer_divide_floors_under_pdpd_with_openvinos_default_pythondiv() -> None:
    # Divide-1 defaults to m_pythondiv=True (floor); the CPU plugin honours it under
    # auto_broadcast=pdpd but truncates under numpy/none. bcast.ops.div is ONNX Div: trunc.
    a = np.array([-7, 7, -7, 7], np.int32)
    b = np.array([2, -2, -2, 2], np.int32)
    theirs = run_eltwise("Divide", [a, b], "pdpd", 0)
    np.testing.assert_array_equal(theirs, [-4, -4, 3, 3])
    np.testing.assert_array_equal(ops.div(a, b, broadcast="pdpd", axis=0), [-3, -3, 3, 3])


# -- Broadcast-3 ----------------------------------------------------------------------------


@st.composite
def unidirectional_target(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    target = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    rank = draw(st.integers(0, len(target)))
    data = tuple(draw(st.sampled_from([d, 1])) for d in target[len(target) - rank :])
    return data, target


@EXAMPLES
@given(case=unidirectional_target(), seed=st.integers(0, 2**16))
def test_broadcast_numpy_matches_openvino(case, seed: int) -> None:
    data_shape, target = case
    assume(data_shape or target)  # OpenVINO's CPU plugin crashes on a scalar to a scalar
    data = np.random.default_rng(seed).integers(-9, 9, data_shape).astype(np.float32)
    assert_same(ops.broadcast(data, target), run_broadcast(data, target, mode="numpy"))


@EXAMPLES
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, min_side=0),
    seed=st.integers(0, 2**16),
)
def test_broadcast_bidirectional_matches_openvino(shapes, seed: int) -> None:
    data_shape, target = shapes.input_shapes
    assume(data_shape or target)  # OpenVINO's CPU plugin crashes on a scalar to a scalar
    data = np.random.default_rng(seed).integers(-9, 9, data_shape).astype(np.int32)
    theirs = run_broadcast(data, target, mode="bidirectional")
    assert_same(ops.broadcast(data, target, mode="bidirectional"), theirs)
    assert_same(ops.expand(data, target), theirs)


@st.composite
def explicit_case(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...], list[int]]:
    target = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    axes = sorted(draw(st.sets(st.integers(0, len(target) - 1), min_size=1)))
    data = tuple(draw(st.sampled_from([target[a], 1])) for a in axes)
    return data, target, axes


@EXAMPLES
@given(case=explicit_case(), seed=st.integers(0, 2**16))
def test_broadcast_explicit_matches_openvino(case, seed: int) -> None:
    data_shape, target, axes = case
    data = np.random.default_rng(seed).integers(-9, 9, data_shape).astype(np.float32)
    theirs = run_broadcast(data, target, axes, mode="explicit")
    assert_same(ops.broadcast(data, target, axes, mode="explicit"), theirs)


@st.composite
def broadcast_pdpd_agreeing(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Cases where OpenVINO's per-dim Broadcast pdpd rule and the element-wise rule agree.

    The data covers the target exactly from ``axis`` to its end, each dim the target's or 1,
    and the target has no 1 against a data dim greater than 1.
    """
    target = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    axis = draw(st.integers(0, len(target) - 1))
    data = tuple(draw(st.sampled_from([d, 1])) for d in target[axis:])
    return data, target, axis


@EXAMPLES
@given(case=broadcast_pdpd_agreeing(), seed=st.integers(0, 2**16))
def test_broadcast_pdpd_matches_openvino_where_the_rules_agree(case, seed: int) -> None:
    data_shape, target, axis = case
    data = np.random.default_rng(seed).integers(-9, 9, data_shape).astype(np.float32)
    theirs = run_broadcast(data, target, mode="pdpd", axis=axis)
    assert_same(ops.broadcast(data, target, mode="pdpd", axis=axis), theirs)


# -- where OpenVINO departs from bcast --------------------------------------------------------


def test_broadcast_pdpd_openvino_grows_the_target_bcast_does_not_o194() -> None:
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    theirs = run_broadcast(data, (2, 1), mode="pdpd", axis=0)
    assert theirs.shape == (2, 3)  # OpenVINO: per dim, a target 1 takes the data's dim
    with pytest.raises(BroadcastError):
        ops.broadcast(data, (2, 1), mode="pdpd", axis=0)  # element-wise PDPD: B fits A


def test_broadcast_pdpd_openvino_ignores_extra_data_dims_bcast_does_not_o197() -> None:
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    param = ov.opset13.parameter(ov.PartialShape([2, 3, 4]), np.float32)
    target = ov.opset13.constant(np.array([2, 3], np.int64))
    node = NodeFactory("opset3").create(
        "Broadcast", [param.output(0), target.output(0)], {"mode": "pdpd", "mode.mode.axis": 0}
    )
    assert str(node.get_output_partial_shape(0)) == "[2,3]"  # shape inference drops the 4
    with pytest.raises(RuntimeError, match="Tile"):  # and the CPU kernel then fails
        run_broadcast(data, (2, 3), mode="pdpd", axis=0)
    with pytest.raises(BroadcastError):
        ops.broadcast(data, (2, 3), mode="pdpd", axis=0)


def test_broadcast_pdpd_short_data_fails_in_openvino_fits_in_bcast_o195() -> None:
    data = np.arange(3, dtype=np.float32)
    with pytest.raises(RuntimeError, match="out-of-range"):
        run_broadcast(data, (2, 3, 1), mode="pdpd", axis=1)
    got = ops.broadcast(data, (2, 3, 1), mode="pdpd", axis=1)
    np.testing.assert_array_equal(got, np.broadcast_to(data.reshape(1, 3, 1), (2, 3, 1)))


def test_eltwise_pdpd_trailing_ones_of_b_are_ignored_by_bcast_not_by_openvino_d10() -> None:
    a = np.zeros((2, 3, 4), np.float32)
    b = np.arange(12, dtype=np.float32).reshape(3, 4, 1)
    with pytest.raises(RuntimeError, match="Argument shapes are inconsistent"):
        run_eltwise("Add", [a, b], "pdpd", 1)
    got = ops.add(a, b, broadcast="pdpd", axis=1)
    np.testing.assert_array_equal(got, a + b.reshape(1, 3, 4))


def test_eltwise_pdpd_one_against_zero_is_fine_in_bcast_d8() -> None:
    # OpenVINO's static pre-check rejects B=1 > A=0 (O77/O228); DESIGN: B=1 broadcasts to 0.
    got = ops.add(np.zeros((0, 3), np.float32), np.ones((1, 3), np.float32), broadcast="pdpd")
    assert got.shape == (0, 3)


def test_explicit_duplicate_axes_are_rejected_d13() -> None:
    # OpenVINO accepts axes_mapping [1, 1] and returns uninitialised memory (D13).
    with pytest.raises(BroadcastError, match="strictly increasing"):
        ops.broadcast(np.ones((2, 2), np.float32), (2, 2, 3), [1, 1], mode="explicit")


NUMPY_UFUNC = {
    "sub": np.subtract, "div": np.divide, "equal": np.equal, "greater": np.greater,
    "less": np.less, "and_": np.logical_and, "or_": np.logical_or, "xor": np.logical_xor,
}  # fmt: skip


@pytest.mark.parametrize("op", sorted(PDPD_AXIS_LOST))
def test_pdpd_axis_is_lost_by_the_cpu_plugin_for_some_ops(op: str) -> None:
    # A [2,1] op B [2] with axis 0: B covers A's axis 0 and the result has A's shape [2,1]
    # (OpenVINO's own shape inference says so). The CPU plugin's rewrites of these ops
    # (Subtract -> Add/Multiply, Divide -> Multiply/Power, comparisons, logicals)
    # right-align B instead and give [2,2].
    dtype = bool if op in ("and_", "or_", "xor") else np.float32
    a = np.array([[True], [False]] if dtype is bool else [[6.0], [3.0]], dtype)
    b = np.array([True, True] if dtype is bool else [1.0, 3.0], dtype)
    theirs = run_eltwise(OV_OP[op], [a, b], "pdpd", 0)
    assert theirs.shape == (2, 2)
    ours = getattr(ops, op)(a, b, broadcast="pdpd", axis=0)
    np.testing.assert_array_equal(ours, NUMPY_UFUNC[op](a, b.reshape(2, 1)))
