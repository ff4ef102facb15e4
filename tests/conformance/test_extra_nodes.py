"""Node tests that ONNX's suite lacks, run through `bcast.onnx.backend`.

The shipped node tests never broadcast with Sum, Mean, Max, Min or Where, have no zero-size
broadcast, and hardly any rank 0 (SEMANTICS.md §8.2). Each case here is a one-node model;
its expected value is written with NumPy from the operator's definition, and the same model
is run by onnxruntime as the peer (except where onnxruntime departs from the spec, which is
pinned separately).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import bcast
import bcast.onnx
from bcast.onnx.backend import UnsupportedOperatorError

OPSET = 21
f32 = np.float32


def arange(*shape: int, dtype: Any = f32, start: int = 1) -> np.ndarray:
    size = int(np.prod(shape, dtype=np.int64))
    return (np.arange(size) + start).astype(dtype).reshape(shape)


def node_model(
    op: str,
    inputs: list[np.ndarray],
    out: np.ndarray,
    *,
    opset: int = OPSET,
    **attrs: Any,
) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        f"{op.lower()}_extra",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
            for n, x in zip(names, inputs, strict=True)
        ],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(out.dtype), out.shape)],
    )
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(
        graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets)
    )


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


a23, a3, a21 = arange(2, 3), arange(3, start=10), arange(2, 1, start=20)
nan_row = np.array([np.nan, 1, 5], f32)

# (op, inputs, attributes, expected from the operator's definition)
CASES = [
    # Variadic operators with broadcasting: the ONNX suite has none.
    pytest.param("Sum", [a21, a3, f32(100)], {}, a21 + a3 + f32(100), id="sum-three-ranks"),
    pytest.param("Sum", [a3, a23], {}, a3 + a23, id="sum-first-input-smaller"),
    pytest.param("Mean", [a3, a21], {}, (a3 + a21) / f32(2), id="mean-first-input-smaller"),
    pytest.param(
        "Mean", [a21, a3, arange(1, 1)], {}, (a21 + a3 + f32(1)) / f32(3), id="mean-three"
    ),
    pytest.param("Max", [a21, a3], {}, np.maximum(a21, a3), id="max-2x1-3"),
    pytest.param("Min", [a3, a21, f32(11)], {}, np.minimum(np.minimum(a3, a21), 11), id="min-3"),
    pytest.param("Max", [nan_row, a21], {}, np.maximum(nan_row, a21), id="max-nan-broadcast"),
    pytest.param("Min", [a21, nan_row], {}, np.minimum(a21, nan_row), id="min-nan-broadcast"),
    pytest.param(
        "Max",
        [arange(3, dtype=np.int32), arange(2, 1, dtype=np.int32)],
        {},
        np.maximum(arange(3, dtype=np.int32), arange(2, 1, dtype=np.int32)),
        id="max-int32",
    ),
    pytest.param(
        "Where",
        [np.array([[True], [False]]), a3, f32(-1)],
        {},
        np.where(np.array([[True], [False]]), a3, f32(-1)),
        id="where-2x1-3-scalar",
    ),
    pytest.param(
        "Where",
        [np.array([True, False, True]), arange(2, 1, dtype=np.int64), np.int64(0)],
        {},
        np.where([True, False, True], arange(2, 1, dtype=np.int64), 0),
        id="where-int64",
    ),
    # Zero-size dims: 0 broadcasts with 1 and 0 only.
    pytest.param("Add", [arange(0, 3), a3], {}, arange(0, 3) + a3, id="add-0x3-3"),
    pytest.param("Mul", [arange(2, 0, 3), arange(1, 3)], {}, arange(2, 0, 3), id="mul-2x0x3"),
    pytest.param("Sum", [arange(0), arange(1), f32(1)], {}, arange(0), id="sum-zero-size"),
    pytest.param(
        "Where",
        [np.zeros((0, 1), bool), a3, f32(0)],
        {},
        np.zeros((0, 3), f32),
        id="where-zero-size",
    ),
    pytest.param(
        "And",
        [np.zeros((0, 1), bool), np.array([True, False])],
        {},
        np.zeros((0, 2), bool),
        id="and-zero-size",
    ),
    pytest.param(
        "Expand", [arange(1), np.array([0], np.int64)], {}, arange(0), id="expand-to-zero"
    ),
    pytest.param(
        "Expand", [a3, np.array([0, 3], np.int64)], {}, np.zeros((0, 3), f32), id="expand-0x3"
    ),
    # Rank 0.
    pytest.param("Add", [f32(2), f32(3)], {}, np.array(5, f32), id="add-scalars"),
    pytest.param("Sub", [f32(1), a23], {}, f32(1) - a23, id="sub-scalar-matrix"),
    pytest.param("Pow", [a3, np.int64(2)], {}, a3**2, id="pow-int-scalar-exponent"),
    pytest.param(
        "Greater",
        [np.int32(2), arange(3, dtype=np.int32)],
        {},
        arange(3, dtype=np.int32) < 2,
        id="greater-scalar",
    ),
    pytest.param(
        "Where", [np.bool_(True), f32(1), f32(2)], {}, np.array(1, f32), id="where-scalars"
    ),
    pytest.param("Mean", [f32(1), f32(4)], {}, np.array(2.5, f32), id="mean-scalars"),
    pytest.param(
        "Expand",
        [f32(7), np.array([2, 2], np.int64)],
        {},
        np.full((2, 2), f32(7)),
        id="expand-scalar",
    ),
    pytest.param("Expand", [a3, np.array([], np.int64)], {}, a3, id="expand-empty-shape"),
    pytest.param("PRelu", [f32(-2), f32(0.5)], {}, np.array(-1, f32), id="prelu-scalars"),
    # Integer semantics under broadcasting (SEMANTICS §7).
    pytest.param(
        "Div",
        [np.array([-7, 7], np.int32), np.array([[2], [-2]], np.int32)],
        {},
        np.array([[-3, 3], [3, -3]], np.int32),
        id="div-int-truncates",
    ),
    pytest.param(
        "Pow",
        [arange(2, 3), np.array([2, -1, 0], np.int64)],
        {},
        arange(2, 3) ** np.array([2, -1, 0], f32),
        id="pow-float-int-broadcast",
    ),
    pytest.param(
        "Xor",
        [np.array([[True], [False]]), np.array([True, False, True])],
        {},
        np.logical_xor([[True], [False]], [True, False, True]),
        id="xor-2x1-3",
    ),
    pytest.param(
        "Equal",
        [arange(2, 1, dtype=np.int64), arange(3, dtype=np.int64)],
        {},
        arange(2, 1, dtype=np.int64) == arange(3, dtype=np.int64),
        id="equal-2x1-3",
    ),
    # The issue-38 operators: the shipped tests have one broadcast case each at most, no
    # rank 0, no zero-size dim, and no per-axis scale on an axis other than 1.
    pytest.param(
        "Mod",
        [np.array([[-7], [7]], np.int32), np.array([2, -3, 5], np.int32)],
        {},
        np.array([[1, -1, 3], [1, -2, 2]], np.int32),  # the divisor's sign (fmod=0)
        id="mod-int-2x1-3",
    ),
    pytest.param(
        "Mod",
        [np.array([[-7], [7]], np.int32), np.int32(-3)],
        {"fmod": 1},
        np.array([[-1], [1]], np.int32),  # the dividend's sign (C fmod)
        id="mod-fmod-scalar",
    ),
    pytest.param(
        "BitShift",
        [np.array([[1], [128]], np.uint8), np.array([0, 1, 7], np.uint8)],
        {"direction": "LEFT"},
        np.array([[1, 2, 128], [128, 0, 0]], np.uint8),
        id="bitshift-2x1-3",
    ),
    pytest.param(
        "BitwiseXor",
        [np.zeros((0, 1), np.int16), np.array([1, 2], np.int16)],
        {},
        np.zeros((0, 2), np.int16),
        id="bitwisexor-zero-size",
    ),
    pytest.param(
        "GreaterOrEqual",
        [f32(2), nan_row],
        {},
        np.array([False, True, False]),
        id="greaterorequal-scalar-nan",
    ),
    pytest.param(
        "LessOrEqual",
        [arange(2, 1, dtype=np.uint16), arange(3, dtype=np.uint16)],
        {},
        arange(2, 1, dtype=np.uint16) <= arange(3, dtype=np.uint16),
        id="lessorequal-2x1-3",
    ),
    pytest.param(
        "QuantizeLinear",
        [arange(2, 3, 2), np.array([1, 2, 4], f32), np.array([0, 1, 2], np.uint8)],
        {"axis": -2},
        np.array([[[1, 2], [3, 3], [3, 4]], [[7, 8], [5, 6], [5, 5]]], np.uint8),  # half even
        id="quantizelinear-axis-minus-2",
    ),
    pytest.param(
        "DequantizeLinear",
        [np.zeros((2, 0), np.int8), np.array([0.5, 2], f32), np.array([1, 2], np.int8)],
        {"axis": 0},
        np.zeros((2, 0), f32),
        id="dequantizelinear-zero-size",
    ),
    # Unidirectional: PRelu slope and Gemm C in the shapes the shipped tests skip.
    pytest.param(
        "PRelu",
        [arange(2, 3, 2, start=-6), np.array([[0.5], [2], [-1]], f32)],
        {},
        np.where(
            arange(2, 3, 2, start=-6) < 0,
            arange(2, 3, 2, start=-6) * np.array([[0.5], [2], [-1]], f32),
            arange(2, 3, 2, start=-6),
        ),
        id="prelu-channel-slope",
    ),
    pytest.param(
        "Gemm",
        [arange(2, 3), arange(3, 4), np.array([[1], [2]], f32)],
        {"alpha": 0.5, "beta": 2.0},
        f32(0.5) * (arange(2, 3) @ arange(3, 4)) + f32(2) * np.array([[1], [2]], f32),
        id="gemm-c-column",
    ),
    pytest.param(
        "Gemm",
        [arange(3, 2), arange(4, 3), f32(1)],
        {"transA": 1, "transB": 1},
        arange(3, 2).T @ arange(4, 3).T + f32(1),
        id="gemm-transposed-scalar-c",
    ),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "expected"), CASES)
def test_bcast_backend_matches_the_definition(
    op: str, inputs: list[Any], attrs: dict[str, Any], expected: Any
) -> None:
    arrays = [np.asarray(x) for x in inputs]
    want = np.asarray(expected)
    model = node_model(op, arrays, want, **attrs)
    (got,) = bcast.onnx.backend.prepare(model).run(arrays)
    assert_same(got, want)


@pytest.mark.parametrize(("op", "inputs", "attrs", "expected"), CASES)
def test_onnxruntime_agrees(
    op: str, inputs: list[Any], attrs: dict[str, Any], expected: Any
) -> None:
    arrays = [np.asarray(x) for x in inputs]
    want = np.asarray(expected)
    model = node_model(op, arrays, want, **attrs)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (peer,) = session.run(None, {f"x{i}": x for i, x in enumerate(arrays)})
    (got,) = bcast.onnx.backend.prepare(model).run(arrays)
    assert_same(got, peer)


def test_run_node_broadcasts_like_the_model() -> None:
    node = helper.make_node("Where", ["c", "x", "y"], ["z"])
    cond = np.array([[True], [False]])
    (got,) = bcast.onnx.backend.run_node(node, [cond, a3, f32(0)])
    assert_same(got, np.where(cond, a3, f32(0)))


def test_gemm_without_c_in_run_node() -> None:
    node = helper.make_node("Gemm", ["a", "b", ""], ["y"], alpha=2.0)
    (got,) = bcast.onnx.backend.run_node(node, [a23, arange(3, 2)])
    assert_same(got, f32(2) * (a23 @ arange(3, 2)))


def test_sequential_graph_with_initializer() -> None:
    """Add then Expand then Mul, with a constant read from the initializers."""
    bias = onnx.numpy_helper.from_array(a3, "bias")
    shape = onnx.numpy_helper.from_array(np.array([2, 1, 3], np.int64), "shape")
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["t"]),
        helper.make_node("Expand", ["t", "shape"], ["u"]),
        helper.make_node("Mul", ["u", "x"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 1, 3])],
        initializer=[bias, shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    x = arange(1, 3, start=-1)
    rep = bcast.onnx.backend.prepare(model)
    assert rep.input_names == ("x",)
    (by_position,) = rep.run([x])
    (by_name,) = rep.run({"x": x})
    want = np.broadcast_to(x + a3, (2, 1, 3)) * x
    assert_same(by_position, want)
    assert_same(by_name, want)


def test_legacy_broadcast_attribute_is_pdpd() -> None:
    """Opset 6 Add with broadcast=1, axis=1: B laid onto A from axis 1 (PDPD)."""
    a, b = arange(2, 3, 4, 5), arange(3, 4, start=100)
    model = node_model("Add", [a, b], a, opset=6, broadcast=1, axis=1)
    (got,) = bcast.onnx.backend.prepare(model).run([a, b])
    assert_same(got, a + b.reshape(1, 3, 4, 1))


def test_legacy_operator_without_broadcast_needs_identical_shapes() -> None:
    a, b = arange(2, 3), arange(3)
    model = node_model("Add", [a, b], a, opset=6)
    with pytest.raises(bcast.BroadcastError):
        bcast.onnx.backend.prepare(model).run([a, b])


def test_incompatible_shapes_raise_broadcast_error() -> None:
    a, b = arange(2, 3), arange(4)
    model = node_model("Add", [a, b], a)
    with pytest.raises(bcast.BroadcastError) as excinfo:
        bcast.onnx.backend.prepare(model).run([a, b])
    assert excinfo.value.axis == 1


def test_prelu_slope_is_unidirectional() -> None:
    """The spec says unidirectional; onnxruntime broadcasts both ways (SEMANTICS §7.8)."""
    x, slope = arange(3, start=-1), arange(2, 3)
    model = node_model("PRelu", [x, slope], slope)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x0": x, "x1": slope})[0].shape == (2, 3)
    with pytest.raises(bcast.BroadcastError):
        bcast.onnx.backend.prepare(model).run([x, slope])


def test_unsupported_operator_is_named() -> None:
    model = node_model("Relu", [a3], a3)
    assert not bcast.onnx.backend.is_compatible(model)
    with pytest.raises(UnsupportedOperatorError, match="'Relu'") as excinfo:
        bcast.onnx.backend.prepare(model)
    assert isinstance(excinfo.value, NotImplementedError)
    assert excinfo.value.op_type == "Relu"


def test_only_the_cpu_is_supported() -> None:
    model = node_model("Add", [a3, a3], a3)
    assert bcast.onnx.backend.supports_device("CPU")
    assert not bcast.onnx.backend.supports_device("CUDA")
    assert bcast.onnx.backend.is_compatible(model)
    assert not bcast.onnx.backend.is_compatible(model, device="CUDA")
    with pytest.raises(ValueError, match="CPU only"):
        bcast.onnx.backend.prepare(model, device="CUDA")


def test_input_dtype_must_match_the_declaration() -> None:
    model = node_model("Add", [a3, a3], a3)
    rep = bcast.onnx.backend.prepare(model)
    with pytest.raises(TypeError, match="float32"):
        rep.run([a3.astype(np.float64), a3])
    (got,) = rep.run([[1, 2, 3], a3])  # a list is converted to the declared type
    assert_same(got, np.array([1, 2, 3], f32) + a3)
    with pytest.raises(ValueError, match="takes 2 inputs"):
        rep.run([a3])
