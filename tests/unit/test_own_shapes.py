"""bcast's own shape functions against onnxruntime's real output shapes.

Conv and pooling windows, Concat sums and Flatten/Reshape products are written as dim
expressions of the input's symbols (`bcast.onnx.own_shapes`); each is evaluated at many
sizes and held against the shape onnxruntime produces when it runs the model there.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from bcast.loading import load_graph  # noqa: E402

F = TensorProto.FLOAT


def _model(node: onnx.NodeProto, inits: list[TensorProto]) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", F, ["n", 3, "h", "w"])
    y = helper.make_tensor_value_info("y", F, None)
    graph = helper.make_graph([node], "m", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


WINDOWS = [
    ("Conv", dict(kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3])),
    ("Conv", dict(kernel_shape=[3, 5], strides=[2, 3], pads=[0, 1, 2, 1], dilations=[2, 1])),
    ("Conv", dict(kernel_shape=[8, 8], strides=[8, 8])),
    ("Conv", dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    ("Conv", dict(kernel_shape=[3, 3], auto_pad="VALID")),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_LOWER")),
]


@pytest.mark.parametrize(("op", "attrs"), WINDOWS, ids=lambda v: str(v))
def test_window_output_dims_are_onnxruntimes_at_every_size(op: str, attrs: dict) -> None:
    inits = []
    inputs = ["x"]
    if op == "Conv":
        k = attrs["kernel_shape"]
        w = np.random.default_rng(0).standard_normal((4, 3, *k)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, "w"))
        inputs.append("w")
    model = _model(helper.make_node(op, inputs, ["y"], **attrs), inits)
    graph = load_graph(model)
    (node,) = graph.nodes
    out = node.output_shapes[0]
    exprs = [graph.expressions[d.name] for d in out.dims[2:]]
    assert [str(d) for d in out.dims[:2]] == ["n", "4" if op == "Conv" else "3"]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    checked = 0
    for h, w in [(9, 9), (10, 13), (16, 16), (17, 31), (32, 40), (33, 8), (64, 65)]:
        try:
            (y,) = session.run(None, {"x": np.zeros((1, 3, h, w), np.float32)})
        except Exception:  # the window does not fit: bcast's size is below 1 there
            assert min(e.evaluate({"h": h, "w": w}) for e in exprs) < 1
            continue
        assert [e.evaluate({"h": h, "w": w}) for e in exprs] == list(y.shape[2:])
        checked += 1
    assert checked >= 5


def test_concat_sum_and_reshape_product_carry_the_symbols() -> None:
    # [n,4,h',w'] -> Reshape [n,4,-1] -> Transpose -> Concat with a [n,1,4] class token.
    x = helper.make_tensor_value_info("x", F, ["n", 3, "h", "w"])
    cls = helper.make_tensor_value_info("cls", F, ["n", 1, 4])
    y = helper.make_tensor_value_info("y", F, None)
    w = np.ones((4, 3, 8, 8), np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[8, 8], strides=[8, 8]),
        helper.make_node("Shape", ["c"], ["s"], end=2),
        helper.make_node("Concat", ["s", "minus1"], ["t"], axis=0),
        helper.make_node("Reshape", ["c", "t"], ["r"]),
        helper.make_node("Transpose", ["r"], ["p"], perm=[0, 2, 1]),
        helper.make_node("Concat", ["cls", "p"], ["y"], axis=1),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([-1]), "minus1")]
    graph_proto = helper.make_graph(nodes, "m", [x, cls], [y], inits)
    model = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    graph = load_graph(model)
    out = graph.nodes[-1].output_shapes[0]
    tokens = graph.expressions[out.dims[1].name]
    assert str(tokens) == "((h - 8)//8 + 1)*((w - 8)//8 + 1) + 1"
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for h, w_ in [(8, 8), (16, 40), (39, 17)]:
        feeds = {"x": np.zeros((2, 3, h, w_), np.float32), "cls": np.zeros((2, 1, 4), np.float32)}
        (result,) = session.run(None, feeds)
        assert result.shape[1] == tokens.evaluate({"h": h, "w": w_})
