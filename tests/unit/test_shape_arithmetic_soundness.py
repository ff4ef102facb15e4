"""A dim bcast cannot compute is named, never passed silently (issue 37 item 1, item 3's part).

A node whose inputs have exact dims but whose output holds a ``?`` is listed in the coverage
("output dim not computed", or "decided at run time" where the data decides it), and a
broadcast that compares such a dim says it is not decided beyond that node. Whether the
model runs there is decided by the data: onnxruntime runs it for one value and fails for
another, which is why bcast must not say "runs".
"""

from __future__ import annotations

import numpy as np
import pytest

import bcast
from bcast.models import Severity

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
helper, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto
ort.set_default_logger_severity(3)


def _runs(model: object, feeds: dict[str, np.ndarray]) -> bool:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        session.run(None, feeds)
    except Exception:  # onnxruntime's refusal
        return False
    return True


def _resize_by_input_scales() -> object:
    nodes = [
        helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest", name="up"),
        helper.make_node("Add", ["y", "x"], ["out"], name="skip"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "H"]),
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_resize_by_scales_computed_at_run_time_is_listed_and_the_add_is_not_decided() -> None:
    model = _resize_by_input_scales()
    x = np.ones((1, 1, 5), np.float32)
    one, two = (np.array([1, 1, s], np.float32) for s in (1.0, 2.0))
    assert _runs(model, {"x": x, "scales": one}) and not _runs(model, {"x": x, "scales": two})
    report = bcast.check(model, dims={"H": 5})
    (lost,) = report.unmodelled
    assert (lost.node, lost.op) == ("up", "Resize")
    assert lost.reason.startswith("output dim not computed")
    (finding,) = report.findings
    assert (finding.severity, finding.kind, finding.node) == (Severity.INFO, "undecided", "skip")
    assert "not decided beyond node up (Resize" in finding.reason
    assert {i.node for i in report.domain.undecided} == {"up", "skip"}
    coverage = report.to_json()["coverage"]
    assert [u["node"] for u in coverage["unmodelled"]] == ["up"]  # type: ignore[index]


def test_nonzero_is_decided_at_run_time() -> None:
    nodes = [
        helper.make_node("NonZero", ["x"], ["i"], name="nz"),
        helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["f", "z"], ["out"], name="add"),
    ]
    z = numpy_helper.from_array(np.ones((2, 3), np.float32), "z")
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "H"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [z],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    three = np.array([[1, 0, 1], [0, 1, 0]], np.float32)  # 3 nonzero: [2,3] runs
    four = np.array([[1, 1, 1], [0, 1, 0]], np.float32)  # 4 nonzero: [2,4] against [2,3]
    assert _runs(model, {"x": three}) and not _runs(model, {"x": four})
    report = bcast.check(model, dims={"H": 3})
    (lost,) = report.unmodelled
    assert lost.node == "nz" and lost.reason.startswith("decided at run time")
    assert [(f.kind, f.node) for f in report.findings] == [("undecided", "add")]
    assert report.ok  # info: what bcast does not know fails nothing by itself


def test_a_model_whose_dims_are_all_computed_lists_nothing() -> None:
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["y"]),
        helper.make_node("Add", ["y", "y"], ["out"]),
    ]
    pads = numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 1], np.int64), "pads")
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "H"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [pads],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    report = bcast.check(model)
    assert report.unmodelled == () and report.findings == ()


def test_an_old_dropouts_mask_has_its_datas_shape_and_is_not_listed() -> None:
    # ONNX's inference leaves Dropout-9's mask unknown (onnx's own light_vgg19 and
    # light_squeezenet hold such nodes); onnxruntime gives it the data's shape.
    nodes = [
        helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop", ratio=0.5),
        helper.make_node("Add", ["y", "b"], ["out"], name="bias"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [
            helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, None),  # T before 12
        ],
        [numpy_helper.from_array(np.ones(8, np.float32), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    _, mask = session.run(None, {"x": np.ones((1, 8), np.float32)})
    assert mask.shape == (1, 8)
    report = bcast.check(model)
    assert report.unmodelled == () and report.findings == ()
