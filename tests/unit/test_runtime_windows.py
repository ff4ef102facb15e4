"""Windows where onnxruntime and OpenVINO depart from the ONNX text, held against both.

``bcast check --target onnxruntime`` warns where onnxruntime 1.32 (CPU) refuses a Conv whose
``auto_pad`` is SAME_UPPER or SAME_LOWER with a dilation other than 1 (PyTorch's
``padding="same"`` with a dilation exports exactly that), and where it sizes the pools of
such windows smaller than the ONNX text's ``ceil(input / stride)``. The other tests pin
bcast's choice where the runtimes disagree on a window larger than its input, a window that
leaves nothing, and a skip the OpenVINO CPU plugin fuses (docs/peer-differences.md). Each
case is run in the runtimes here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import bcast

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
helper, TensorProto, numpy_helper = onnx.helper, onnx.TensorProto, onnx.numpy_helper
ort.set_default_logger_severity(4)


def _model(node: object, opset: int) -> object:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    graph = helper.make_graph([node], "g", [x], [y], [w] if node.op_type == "Conv" else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _rows(model: object, h: int) -> int | None:
    """The rows onnxruntime gives for an ``h`` x ``h`` input; None where it refuses."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        return int(session.run(None, {"x": np.ones((1, 1, h, h), np.float32)})[0].shape[2])
    except Exception:  # onnxruntime's refusal
        return None


def _warned(model: object, target: str | None = "onnxruntime") -> list[str]:
    found = bcast.check(model, target=target).findings
    return [f.node for f in found if f.kind == "runtime-deviation"]


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("dilations", [[2, 2], [1, 2], [3, 1]])
def test_a_dilated_same_conv_is_refused_by_onnxruntime_and_told(auto_pad, dilations) -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c", auto_pad=auto_pad,
                            dilations=dilations)  # fmt: skip
    model = _model(node, 17)
    assert all(_rows(model, h) is None for h in (5, 8, 9))
    assert _warned(model) == ["c"] and _warned(model, None) == []


@pytest.mark.parametrize(
    ("attrs"),
    [
        {"auto_pad": "SAME_UPPER", "dilations": [1, 1]},
        {"auto_pad": "VALID", "dilations": [2, 2]},
        {"pads": [2, 2, 2, 2], "dilations": [2, 2]},  # what padding="same" means, written out
    ],
)
def test_a_conv_onnxruntime_runs_is_not_told(attrs) -> None:
    model = _model(helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs), 17)
    assert all(_rows(model, h) is not None for h in (5, 8, 9))
    assert _warned(model) == []


@pytest.mark.parametrize(("op", "opset"), [("MaxPool", 17), ("AveragePool", 19), ("LpPool", 18)])
@pytest.mark.parametrize(("kernel", "dilation", "stride"), [(3, 2, 1), (3, 2, 2), (2, 3, 1)])
def test_a_dilated_same_pool_is_sized_smaller_by_onnxruntime_and_told(
    op, opset, kernel, dilation, stride
) -> None:
    node = helper.make_node(op, ["x"], ["y"], name="p", auto_pad="SAME_UPPER",
                            kernel_shape=[kernel] * 2, dilations=[dilation] * 2,
                            strides=[stride] * 2)  # fmt: skip
    model = _model(node, opset)
    for h in (5, 8, 9, 12):  # the ONNX text: ceil(h / stride); onnxruntime gives fewer
        rows = _rows(model, h)
        assert rows is not None and rows < math.ceil(h / stride), (h, rows)
    assert _warned(model) == ["p"]
    plain = helper.make_node(op, ["x"], ["y"], name="p", auto_pad="SAME_UPPER",
                             kernel_shape=[kernel] * 2, strides=[stride] * 2)  # fmt: skip
    undilated = _model(plain, opset)
    assert all(_rows(undilated, h) == math.ceil(h / stride) for h in (5, 8, 9, 12))
    assert _warned(undilated) == []


def test_a_pool_window_larger_than_its_input_is_outside_the_domain_as_openvino_says(
    tmp_path,
) -> None:
    # The ONNX text floors (1 - 2)/2 + 1 to 0 rows; onnxruntime truncates toward 0 and runs
    # with 1 row; OpenVINO refuses. bcast keeps the text's window: H from 2 (pinned, and
    # recorded in docs/peer-differences.md).
    ov = pytest.importorskip("openvino")
    node = helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2], strides=[2, 2])
    model = _model(node, 17)
    assert _rows(model, 1) == 1 and _rows(model, 2) == 1
    path = tmp_path / "pool.onnx"
    path.write_bytes(model.SerializeToString())
    compiled = ov.Core().compile_model(str(path), "CPU")
    with pytest.raises(RuntimeError):
        compiled(np.ones((1, 1, 1, 8), np.float32))
    assert compiled(np.ones((1, 1, 2, 8), np.float32))[0].shape == (1, 1, 1, 4)
    domain = bcast.check(model).domain
    assert domain.dim("H").sizes == ((2, None),)
    assert domain.first_failure({"H": 1, "W": 8}).node == "p"


def test_a_conv_window_that_leaves_nothing_runs_empty_in_openvino_only(tmp_path) -> None:
    # kernel 3 over 2 values: onnxruntime fails, OpenVINO runs with an empty output, and
    # fails over 1 value. bcast keeps the window (T from 3) for both: an empty tensor is
    # outside the domain's scope (docs/domain.md), recorded in docs/peer-differences.md.
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as ops

    weight = numpy_helper.from_array(np.ones((8, 4, 3), np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, "T"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="c")
    model = helper.make_model(helper.make_graph([conv], "g", [x], [y], [weight]))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="Invalid input shape"):
        session.run(None, {"x": np.ones((1, 4, 2), np.float32)})
    assert bcast.check(model).domain.dim("T").sizes == ((3, None),)
    param = ops.parameter([1, 4, -1], np.float32, name="x")
    node = ops.convolution(param, ops.constant(np.ones((8, 4, 3), np.float32)), [1], [0], [0], [1])
    path = str(tmp_path / "conv.xml")
    ov.save_model(ov.Model([node], [param], "conv"), path)
    compiled = ov.Core().compile_model(path, "CPU")
    assert compiled(np.ones((1, 4, 2), np.float32))[0].shape == (1, 8, 0)
    with pytest.raises(RuntimeError):
        ov.Core().compile_model(path, "CPU")(np.ones((1, 4, 1), np.float32))
    (t,) = [d for d in bcast.check(path).domain.dims if d.sizes != ()]
    assert t.sizes == ((3, None),)


def test_a_convolution_output_that_broadcasts_in_an_add_fails_in_openvino(tmp_path) -> None:
    # A U-Net skip: conv 1x1 of x, added to the 2x upsampled stride-2 conv of x. At H = 1
    # the skip has 1 row against 2: NumPy's rule broadcasts it, and bcast says the model
    # runs there; OpenVINO's CPU plugin fuses the Add into the Convolution and fails.
    ov = pytest.importorskip("openvino")
    import openvino.opset11 as o11

    x = o11.parameter([1, 3, -1, -1], np.float32, name="x")
    skip = o11.convolution(x, o11.constant(np.ones((8, 3, 1, 1), np.float32)), [1, 1], [0, 0],
                           [0, 0], [1, 1])  # fmt: skip
    down = o11.convolution(x, o11.constant(np.ones((8, 3, 3, 3), np.float32)), [2, 2], [1, 1],
                           [1, 1], [1, 1])  # fmt: skip
    scales = o11.constant(np.array([2.0, 2.0], np.float32))
    axes = o11.constant(np.array([2, 3], np.int64))
    up = o11.interpolate(down, scales, "nearest", "scales", axes=axes)
    path = str(tmp_path / "skip.xml")
    ov.save_model(ov.Model([o11.add(up, skip)], [x], "m"), path)
    np.broadcast_shapes((1, 8, 2, 4), (1, 8, 1, 4))  # the spec's rule: it broadcasts

    def runs(h: int) -> bool:
        try:
            ov.Core().compile_model(path, "CPU")(np.ones((1, 3, h, 4), np.float32))
        except RuntimeError:
            return False
        return True

    assert not runs(1) and runs(2) and not runs(3)
    domain = bcast.check(path).domain
    assert domain.first_failure({"x.2": 1, "x.3": 4}) is None  # the spec's answer
    assert domain.first_failure({"x.2": 3, "x.3": 4}) is not None
