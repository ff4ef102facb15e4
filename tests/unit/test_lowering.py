"""Lowering: the NumPy program and the ONNX nodes of every Plan compute the broadcast.

Expected values never come from the lowering itself: NumPy's own broadcasting for ``numpy``
and ``unidirectional`` (``np.broadcast_to`` is one-directional), ``data * ones(target)`` for
``bidirectional`` (its definition in DESIGN §1), and an index-by-index reading of the OpenVINO
spec for ``explicit`` and ``pdpd``. `bcast.broadcast_to` is checked against the same oracle,
and the lowered ONNX model is run by onnxruntime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import bcast
import bcast.onnx
from bcast.core.lowering import apply_numpy, broadcast_operands, lower

Shape = tuple[int, ...]
SIDE = {"min_side": 0, "max_side": 4}

# -- oracles (from the spec texts, not from bcast) -----------------------------------------


def gather_oracle(data: np.ndarray, out_shape: Shape, mapping: Sequence[int]) -> np.ndarray:
    """OpenVINO explicit broadcast, element by element.

    ``out[i_0, ..., i_n] = data[j_0, ...]`` with ``j_k = i_{mapping[k]}``, or 0 where data's
    dim is 1 (the only dim that may differ from the target's).
    """
    index = np.indices(out_shape, dtype=np.intp) if out_shape else np.zeros((0,), np.intp)
    picks = tuple(
        np.zeros(out_shape, np.intp) if size == 1 else index[axis]
        for size, axis in zip(data.shape, mapping, strict=True)
    )
    if not picks:
        return np.full(out_shape, data.reshape(()), dtype=data.dtype)
    return data[picks]


def pdpd_oracle(a_shape: Shape, b: np.ndarray, axis: int) -> np.ndarray:
    """PDPD: B's trailing ones are ignored, then B is laid onto A from ``axis``."""
    start = len(a_shape) - b.ndim if axis == -1 else axis
    trimmed = list(b.shape)
    while trimmed and trimmed[-1] == 1:
        trimmed.pop()
    core = b.reshape(trimmed)
    return gather_oracle(core, a_shape, range(start, start + len(trimmed)))


def values(shape: Shape, offset: int = 0) -> np.ndarray:
    """Distinct values, so that a wrong alignment shows."""
    size = int(np.prod(shape, dtype=np.int64))
    return (np.arange(size, dtype=np.float32) + 1 + 100 * offset).reshape(shape)


def run_onnx(low: bcast.onnx.OnnxLowering, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    model = low.to_model()
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    used = {name: feeds[name] for name in low.inputs}
    return list(session.run(list(low.outputs), used))


def check_plan(
    the_plan: bcast.Plan,
    arrays: dict[int, np.ndarray],
    expected: dict[int, np.ndarray],
    feeds: dict[str, np.ndarray] | None = None,
) -> None:
    """The NumPy program and the lowered ONNX model both give ``expected`` per operand."""
    lowering = lower(the_plan)
    assert tuple(s.operand for s in lowering.operands) == tuple(expected)
    for step in lowering.operands:
        got = apply_numpy(step, arrays[step.operand])
        np.testing.assert_array_equal(got, expected[step.operand], strict=True)
    names = [f"in{k}" for k in range(len(the_plan.shapes))]
    outs = [f"out{k}" for k in expected]
    low = bcast.onnx.lower(the_plan, input_names=names, output_name=outs)
    all_feeds = {names[k]: v for k, v in arrays.items()} | (feeds or {})
    for k, got in zip(expected, run_onnx(low, all_feeds), strict=True):
        np.testing.assert_array_equal(got, expected[k], strict=True)


# -- strategies: static shapes each mode accepts ---------------------------------------------

shapes = array_shapes(min_dims=0, max_dims=4, **SIDE)


@st.composite
def unidirectional_cases(draw: st.DrawFn) -> tuple[Shape, Shape]:
    a = draw(shapes)
    rank = draw(st.integers(0, len(a)))
    tail = a[len(a) - rank :]
    b = tuple(draw(st.sampled_from([d, 1])) for d in tail)
    return a, b


@st.composite
def pdpd_cases(draw: st.DrawFn) -> tuple[Shape, Shape, int]:
    """A, B and axis; B may end in ones that stick out past A's last axis."""
    a = draw(array_shapes(min_dims=0, max_dims=5, **SIDE))
    core = draw(st.integers(0, len(a)))
    start = draw(st.integers(0, len(a) - core))
    ones = draw(st.integers(0, len(a) - core))
    b = tuple(draw(st.sampled_from([d, 1])) for d in a[start : start + core]) + (1,) * ones
    axis = -1 if start == len(a) - len(b) and draw(st.booleans()) else start
    return a, b, axis


@st.composite
def explicit_cases(draw: st.DrawFn) -> tuple[Shape, Shape, tuple[int, ...]]:
    target = draw(shapes)
    keep = draw(st.lists(st.booleans(), min_size=len(target), max_size=len(target)))
    mapping = tuple(i for i, k in enumerate(keep) if k)
    data = tuple(draw(st.sampled_from([target[m], 1])) for m in mapping)
    return data, target, mapping


# -- one property per mode -------------------------------------------------------------------


@given(
    st.integers(1, 4).flatmap(
        lambda n: mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=4, **SIDE)
    )
)
def test_numpy_lowering_matches_numpy_broadcasting(case: Any) -> None:
    inputs = case.input_shapes
    arrays = {k: values(s, k) for k, s in enumerate(inputs)}
    expected = dict(enumerate(np.broadcast_arrays(*arrays.values())))
    the_plan = bcast.plan(*inputs)
    for k, x in arrays.items():
        view = bcast.broadcast_to(x, the_plan.output)
        np.testing.assert_array_equal(view, expected[k], strict=True)
    check_plan(the_plan, arrays, expected)


@given(shapes, st.integers(1, 3))
def test_none_lowering_is_the_identity(shape: Shape, count: int) -> None:
    arrays = {k: values(shape, k) for k in range(count)}
    check_plan(bcast.plan(*([shape] * count), mode="none"), arrays, arrays)


@given(unidirectional_cases())
def test_unidirectional_lowering_matches_numpy_broadcast_to(case: tuple[Shape, Shape]) -> None:
    a, b = case
    x = values(b)
    expected = np.broadcast_to(x, a)
    np.testing.assert_array_equal(
        bcast.broadcast_to(x, a, mode="unidirectional"), expected, strict=True
    )
    check_plan(bcast.plan(a, b, mode="unidirectional"), {1: x}, {1: expected})


@given(pdpd_cases())
def test_pdpd_lowering_matches_the_spec(case: tuple[Shape, Shape, int]) -> None:
    a, b, axis = case
    x = values(b)
    expected = pdpd_oracle(a, x, axis)
    np.testing.assert_array_equal(
        bcast.broadcast_to(x, a, mode="pdpd", axis=axis), expected, strict=True
    )
    check_plan(bcast.plan(a, b, mode="pdpd", axis=axis), {1: x}, {1: expected})


@given(mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, **SIDE))
def test_bidirectional_lowering_matches_data_times_ones(case: Any) -> None:
    data, target = case.input_shapes
    x = values(data)
    expected = x * np.ones(target, np.float32)
    np.testing.assert_array_equal(
        bcast.broadcast_to(x, target, mode="bidirectional"), expected, strict=True
    )
    check_plan(bcast.plan(data, target, mode="bidirectional"), {0: x}, {0: expected})


@given(explicit_cases())
def test_explicit_lowering_matches_the_spec(case: tuple[Shape, Shape, tuple[int, ...]]) -> None:
    data, target, mapping = case
    x = values(data)
    expected = gather_oracle(x, target, mapping)
    got = bcast.broadcast_to(x, target, mode="explicit", axes_mapping=mapping)
    np.testing.assert_array_equal(got, expected, strict=True)
    check_plan(
        bcast.plan(data, target, mode="explicit", axes_mapping=mapping), {0: x}, {0: expected}
    )


# -- named cases -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "axis", "squeeze", "unsqueeze"),
    [
        pytest.param((2, 3, 4), (3, 4, 1), 1, (2,), (0,), id="one-trailing-one-sticks-out"),
        pytest.param((2, 3, 4), (4, 1, 1), 2, (1, 2), (0, 1), id="two-stick-out"),
        pytest.param((2, 3), (1, 1), 1, (1,), (0,), id="ones-only"),
        pytest.param((2, 3, 4, 5), (3, 1), 1, (), (0, 3), id="trailing-one-inside-a"),
        pytest.param((2, 3), (), -1, (), (0, 1), id="scalar-b"),
        pytest.param((), (), -1, (), (), id="scalars"),
    ],
)
def test_pdpd_trailing_ones(
    a: Shape, b: Shape, axis: int, squeeze: Shape, unsqueeze: Shape
) -> None:
    the_plan = bcast.plan(a, b, mode="pdpd", axis=axis)
    (step,) = lower(the_plan).operands
    assert (step.squeeze_axes, step.unsqueeze_axes) == (squeeze, unsqueeze)
    x = values(b)
    check_plan(the_plan, {1: x}, {1: pdpd_oracle(a, x, axis)})


@pytest.mark.parametrize(
    ("data", "target", "mapping", "unsqueeze"),
    [
        pytest.param((16,), (1, 16, 50, 5), (1,), (0, 2, 3), id="one-axis-in-the-middle"),
        pytest.param((2, 5), (2, 3, 4, 5), (0, 3), (1, 2), id="gap"),
        pytest.param((1, 4), (3, 2, 4), (0, 2), (1,), id="gap-and-stretched-one"),
        pytest.param((), (2, 3), (), (0, 1), id="scalar-data"),
        pytest.param((0,), (0, 3), (0,), (1,), id="zero-size"),
    ],
)
def test_explicit_with_gaps(data: Shape, target: Shape, mapping: Shape, unsqueeze: Shape) -> None:
    the_plan = bcast.plan(data, target, mode="explicit", axes_mapping=mapping)
    assert lower(the_plan).operands[0].unsqueeze_axes == unsqueeze
    x = values(data)
    check_plan(the_plan, {0: x}, {0: gather_oracle(x, target, mapping)})


@pytest.mark.parametrize(
    ("data", "target", "out"),
    [
        pytest.param((3, 1), (2, 1, 6), (2, 3, 6), id="output-exceeds-target"),
        pytest.param((5,), (1,), (5,), id="target-one"),
        pytest.param((3, 4), (), (3, 4), id="empty-target"),
        pytest.param((1,), (0,), (0,), id="zero-size"),
        pytest.param((), (2,), (2,), id="scalar-data"),
    ],
)
def test_bidirectional_output_can_exceed_the_target(data: Shape, target: Shape, out: Shape) -> None:
    the_plan = bcast.plan(data, target, mode="bidirectional")
    assert the_plan.output == out
    x = values(data)
    check_plan(the_plan, {0: x}, {0: x * np.ones(target, np.float32)})


def test_operands_by_role() -> None:
    assert broadcast_operands(bcast.Mode.UNIDIRECTIONAL, 2) == (1,)
    assert broadcast_operands(bcast.Mode.EXPLICIT, 2) == (0,)
    assert broadcast_operands(bcast.Mode.NONE, 3) == (0, 1, 2)


def test_numpy_program_needs_a_static_output() -> None:
    (step,) = lower(bcast.plan("[N,3]", "[3]", mode="unidirectional")).operands
    with pytest.raises(ValueError, match="static output"):
        apply_numpy(step, np.zeros(3))


def test_unknown_rank_cannot_be_lowered() -> None:
    with pytest.raises(ValueError, match="unknown rank"):
        lower(bcast.plan("[...]", "[3]"))


def test_lower_rejects_wrong_name_counts() -> None:
    with pytest.raises(ValueError, match="input_names"):
        bcast.onnx.lower((2, 3), (3,), input_names=["a"], output_name=["y", "z"])
    with pytest.raises(ValueError, match="output_name"):
        bcast.onnx.lower((2, 3), (3,), input_names=["a", "b"], output_name="y")


def test_lower_rejects_a_plan_with_mode() -> None:
    with pytest.raises(TypeError, match="either a Plan"):
        bcast.onnx.lower(bcast.plan((3,)), input_names=["a"], output_name="y", mode="none")


# -- partial shapes: the same nodes, shapes known only at run time ---------------------------


@pytest.mark.parametrize(
    ("shapes_", "kwargs", "concrete", "expected_ops"),
    [
        pytest.param(
            ("[N,1]", "[1,M]", "[M]"),
            {},
            [(2, 1), (1, 3), (3,)],
            {"Shape", "Where"},
            id="numpy-symbols",
        ),
        pytest.param(("[N,1]", "[1,M]"), {}, [(0, 1), (1, 4)], {"Where"}, id="numpy-zero-size"),
        pytest.param(
            ("[N,?,4]", "[?,4,1]"),
            {"mode": "pdpd", "axis": 1},
            [(2, 3, 4), (3, 4, 1)],
            {"Shape", "Squeeze", "Unsqueeze"},
            id="pdpd-shape-of-a",
        ),
        pytest.param(
            ("[N,3]", "[3]"),
            {"mode": "unidirectional"},
            [(5, 3), (3,)],
            {"Shape"},
            id="unidirectional-shape-of-a",
        ),
    ],
)
def test_partial_shapes_lower_to_runtime_shapes(
    shapes_: tuple[str, ...],
    kwargs: dict[str, Any],
    concrete: list[Shape],
    expected_ops: set[str],
) -> None:
    the_plan = bcast.plan(*shapes_, **kwargs)
    names = [f"in{k}" for k in range(len(shapes_))]
    operands = broadcast_operands(the_plan.mode, len(shapes_))
    low = bcast.onnx.lower(the_plan, input_names=names, output_name=[f"o{k}" for k in operands])
    assert expected_ops <= {n.op_type for n in low.nodes}
    arrays = [values(s, k) for k, s in enumerate(concrete)]
    got = run_onnx(low, dict(zip(names, arrays, strict=True)))
    if the_plan.mode is bcast.Mode.PDPD:
        want = [pdpd_oracle(concrete[0], arrays[1], kwargs["axis"])]
    elif the_plan.mode is bcast.Mode.UNIDIRECTIONAL:
        want = [np.broadcast_to(arrays[1], concrete[0])]
    else:
        want = list(np.broadcast_arrays(*arrays))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w, strict=True)


@pytest.mark.parametrize(
    ("data", "target", "kwargs", "concrete", "target_value"),
    [
        pytest.param("[N]", "[2,N,?]", {"axes_mapping": [1]}, (3,), (2, 3, 4), id="explicit"),
        pytest.param("[N,1]", "[?,?,?]", {}, (3, 1), (2, 1, 6), id="bidirectional"),
    ],
)
def test_target_shape_input_drives_expand(
    data: str, target: str, kwargs: dict[str, Any], concrete: Shape, target_value: Shape
) -> None:
    mode = "explicit" if "axes_mapping" in kwargs else "bidirectional"
    the_plan = bcast.plan(data, target, mode=mode, **kwargs)
    low = bcast.onnx.lower(the_plan, input_names=["x", "shape"], output_name="y")
    assert low.inputs == ("x", "shape")
    x = values(concrete)
    (got,) = run_onnx(low, {"x": x, "shape": np.array(target_value, np.int64)})
    if mode == "explicit":
        want = gather_oracle(x, target_value, kwargs["axes_mapping"])
    else:
        want = x * np.ones(target_value, np.float32)
    np.testing.assert_array_equal(got, want, strict=True)


def test_runtime_squeeze_rejects_a_trailing_dim_that_is_not_one() -> None:
    low = bcast.onnx.lower(
        "[2,3,4]", "[3,4,?]", mode="pdpd", axis=1, input_names=["a", "b"], output_name="y"
    )
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match="Squeeze"):
        run_onnx(low, {"b": values((3, 4, 2))})


def test_static_target_with_partial_data_needs_no_shape_input() -> None:
    the_plan = bcast.plan("[N,1]", (3,), mode="bidirectional")
    assert str(the_plan.output) == "[N,3]"
    low = bcast.onnx.lower(the_plan, input_names=["x", "shape"], output_name="y")
    assert low.inputs == ("x",)
    x = values((4, 1))
    (got,) = run_onnx(low, {"x": x})
    np.testing.assert_array_equal(got, x * np.ones(3, np.float32), strict=True)
