"""Quantization as broadcasting: scales, zero points and biases (issue 37, item 4).

Each case is a valid model and a one-bug mutant built with onnx.helper. The expected verdict
is the ONNX operator definition's, confirmed by onnxruntime on the same model: the valid one
runs, the mutant fails to load or to run. bcast reports the mutant at its node, without
running it, and says nothing about the valid one.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from bcast.models import Rule, Severity, check_graph
from bcast.onnx.reader import read_onnx

F, U8, I8 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8


def _model(nodes, inputs, inits, opset=13, out=F):
    outputs = [helper.make_tensor_value_info(nodes[-1].output[0], out, None)]
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset < 21 else 10
    return model


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _ort_runs(model, feeds) -> bool:
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        session.run(None, feeds)
    except Exception:  # onnxruntime's load or run failure: the verdict we compare with
        return False
    return True


def _errors(model):
    report = check_graph(read_onnx(model))
    return [f for f in report.findings if f.severity is Severity.ERROR]


def _dequantize(channels, *, axis=1, block=0, opset=13):
    x = helper.make_tensor_value_info("x", I8, [2, 16, 4])
    scale = np.ones((2, channels, 4), np.float32) if block else np.ones(channels, np.float32)
    attrs = {"axis": axis, **({"block_size": block} if block else {})}
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="dq", **attrs)
    return _model([node], [x], [_init("s", scale)], opset)


def _x_int8():
    return {"x": np.ones((2, 16, 4), np.int8)}


@pytest.mark.parametrize(
    ("valid", "mutant"),
    [
        (_dequantize(16), _dequantize(15)),  # per axis: one scale per x.shape[1]
        (_dequantize(4, axis=2), _dequantize(3, axis=2)),
        (_dequantize(2, block=8, opset=21), _dequantize(3, block=8, opset=21)),  # 16/8 = 2
    ],
    ids=["per-axis", "per-axis-last", "blocked"],
)
def test_a_dequantize_scale_one_channel_short_is_reported_at_its_node(valid, mutant):
    assert _ort_runs(valid, _x_int8())
    assert not _ort_runs(mutant, _x_int8())
    assert _errors(valid) == []
    found = _errors(mutant)
    assert [f.node for f in found] == ["dq"]
    assert "scale" in found[0].reason


def _quantize(channels, zero_channels):
    x = helper.make_tensor_value_info("x", F, [2, 16, 4])
    inits = [
        _init("s", np.ones(channels, np.float32)),
        _init("z", np.zeros(zero_channels, np.uint8)),
    ]
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q", axis=1)
    return _model([node], [x], inits, out=U8)


def test_a_quantize_zero_point_of_another_shape_than_its_scale_is_reported():
    feeds = {"x": np.ones((2, 16, 4), np.float32)}
    assert _ort_runs(_quantize(16, 16), feeds)
    assert not _ort_runs(_quantize(16, 15), feeds)
    assert _errors(_quantize(16, 16)) == []
    assert [f.node for f in _errors(_quantize(16, 15))] == ["q"]


def _qlinear_conv(w_scales, bias):
    x = helper.make_tensor_value_info("x", U8, [1, 3, 8, 8])
    inits = [
        _init("xs", np.float32(0.1)), _init("xz", np.uint8(0)),
        _init("w", np.ones((8, 3, 3, 3), np.int8)),
        _init("ws", np.full(w_scales, 0.1, np.float32)), _init("wz", np.zeros(w_scales, np.int8)),
        _init("ys", np.float32(0.2)), _init("yz", np.uint8(0)),
        _init("b", np.zeros(bias, np.int32)),
    ]  # fmt: skip
    node = helper.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], name="qconv"
    )
    return _model([node], [x], inits, out=U8)


@pytest.mark.parametrize(("w_scales", "bias"), [(7, 8), (8, 7)], ids=["w_scale", "bias"])
def test_a_qlinearconv_per_channel_scale_or_bias_one_short_is_reported(w_scales, bias):
    feeds = {"x": np.ones((1, 3, 8, 8), np.uint8)}
    assert _ort_runs(_qlinear_conv(8, 8), feeds)
    assert _ort_runs(_qlinear_conv(1, 8), feeds)  # one scale for every channel
    assert not _ort_runs(_qlinear_conv(w_scales, bias), feeds)
    assert _errors(_qlinear_conv(8, 8)) == [] and _errors(_qlinear_conv(1, 8)) == []
    assert {f.node for f in _errors(_qlinear_conv(w_scales, bias))} == {"qconv"}


def _qlinear_matmul(b_scales):
    a = helper.make_tensor_value_info("a", U8, [4, 6])
    inits = [
        _init("as", np.float32(0.1)), _init("az", np.uint8(0)),
        _init("b", np.ones((6, 5), np.uint8)),
        _init("bs", np.full(b_scales, 0.1, np.float32)), _init("bz", np.zeros(b_scales, np.uint8)),
        _init("ys", np.float32(0.2)), _init("yz", np.uint8(0)),
    ]  # fmt: skip
    node = helper.make_node(
        "QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], name="qmm"
    )
    return _model([node], [a], inits, out=U8)


def test_a_qlinearmatmul_per_column_scale_one_short_is_reported():
    feeds = {"a": np.ones((4, 6), np.uint8)}
    assert _ort_runs(_qlinear_matmul(5), feeds)
    assert not _ort_runs(_qlinear_matmul(4), feeds)
    assert _errors(_qlinear_matmul(5)) == []
    assert {f.node for f in _errors(_qlinear_matmul(4))} == {"qmm"}


def _conv(op, bias, group=1):
    x = helper.make_tensor_value_info("x", F, [1, 4, 8, 8])
    shape = (6, 4 // group, 3, 3) if op == "Conv" else (4, 3, 3, 3)  # M = 6 either way
    inits = [_init("w", np.ones(shape, np.float32)), _init("b", np.zeros(bias, np.float32))]
    node = helper.make_node(op, ["x", "w", "b"], ["y"], name="conv", group=group)
    return _model([node], [x], inits)


@pytest.mark.parametrize(
    ("op", "group"), [("Conv", 1), ("Conv", 2), ("ConvTranspose", 1), ("ConvTranspose", 2)]
)
def test_a_conv_bias_one_short_is_reported(op, group):
    # ConvTranspose: M = group * W.shape[1] = 6 only for group 2; group 1 gives 3
    channels = 6 if op == "Conv" or group == 2 else 3
    feeds = {"x": np.ones((1, 4, 8, 8), np.float32)}
    assert _ort_runs(_conv(op, channels, group), feeds)
    assert not _ort_runs(_conv(op, channels - 1, group), feeds)
    assert _errors(_conv(op, channels, group)) == []
    assert [f.node for f in _errors(_conv(op, channels - 1, group))] == ["conv"]


def test_a_symbolic_channel_count_gives_the_condition_on_it():
    x = helper.make_tensor_value_info("x", I8, ["n", "c", 4])
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="dq", axis=1)
    model = _model([node], [x], [_init("s", np.ones(16, np.float32))])
    report = check_graph(read_onnx(model))
    (finding,) = report.findings
    assert finding.node == "dq" and finding.severity is Severity.WARNING
    assert "c" in finding.reason and "16" in finding.reason
    assert report.domain.dim("c").text == "16"


def test_quantization_nodes_take_the_operator_rule():
    graph = read_onnx(_dequantize(16))
    assert graph.nodes[0].rule is Rule.OPERATOR


def test_an_openvino_fake_quantize_limit_one_channel_short_is_reported(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset13 as ops

    x = ops.parameter([1, 4, 8, 8], np.float32, name="x")
    limits = [ops.constant(np.full((1, 4, 1, 1), v, np.float32)) for v in (0.0, 1.0, 0.0, 1.0)]
    fq = ops.fake_quantize(x, *limits, 256, name="fq")
    model = ov.Model([fq.output(0)], [x], "m")
    path = tmp_path / "fq.xml"
    ov.save_model(model, path, compress_to_fp16=False)
    valid = check_graph(_read_ir(path))
    assert [f for f in valid.findings if f.severity is Severity.ERROR] == []
    # The mutant: input_low of 3 channels for X's 4 (its data and port cut to 3 floats).
    text = path.read_text()
    first = text.index('<data element_type="f32" shape="1, 4, 1, 1" offset="0" size="16" />')
    head, tail = text[:first], text[first:]
    tail = tail.replace(
        'shape="1, 4, 1, 1" offset="0" size="16"', 'shape="1, 3, 1, 1" offset="0" size="12"', 1
    )
    tail = tail.replace("<dim>4</dim>", "<dim>3</dim>", 1)
    path.write_text(head + tail)
    with pytest.raises(Exception):  # noqa: B017 (OpenVINO's own refusal, any type)
        ov.Core().read_model(path)
    found = [f for f in check_graph(_read_ir(path)).findings if f.severity is Severity.ERROR]
    # bcast's own finding at the axis, not only OpenVINO's refusal ("peer-rejects")
    assert ("fq", "incompatible", 1) in [(f.node, f.kind, f.axis) for f in found]


def _read_ir(path):
    from bcast.openvino.reader import read_ir

    return read_ir(str(path))


def _quantized_resnet(tmp_path, fmt):
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Images(CalibrationDataReader):
        def __init__(self):
            self.left = 2

        def get_next(self):
            self.left -= 1
            rng = np.random.default_rng(max(self.left, 0))
            return (
                {"pixel_values": rng.random((1, 3, 32, 32), np.float32)} if self.left >= 0 else None
            )

    path = tmp_path / f"resnet_{fmt}.onnx"
    formats = {"qdq": QuantFormat.QDQ, "qoperator": QuantFormat.QOperator}
    quantize_static(
        "tests/fixtures/real/resnet_torchscript.onnx", str(path), Images(),
        quant_format=formats[fmt], per_channel=True, weight_type=QuantType.QInt8,
    )  # fmt: skip
    return onnx.load(path)


@pytest.mark.parametrize(
    ("fmt", "op", "scale_input"), [("qdq", "DequantizeLinear", 1), ("qoperator", "QLinearConv", 4)]
)
def test_onnxruntime_static_quantization_is_modelled_and_a_channel_short_scale_found(
    tmp_path, fmt, op, scale_input
):
    # onnxruntime's own quantizer, per channel, on the ResNet fixture: every node modelled
    # (QOperator: QLinearConv, QLinearAdd, QLinearGlobalAveragePool, QGemm), no finding, the
    # float model's domain; a weight's per-channel scale cut by one is found at its node and
    # onnxruntime refuses the model. (A bias's DequantizeLinear cut so is refused only with
    # onnxruntime's graph optimizations off: its optimizer folds the node away and runs.)
    model = _quantized_resnet(tmp_path, fmt)
    original = check_graph(read_onnx(onnx.load("tests/fixtures/real/resnet_torchscript.onnx")))
    report = check_graph(read_onnx(model))
    assert report.unmodelled == () and report.findings == ()
    assert [(d.name, d.text) for d in report.domain.dims] == [
        (d.name, d.text) for d in original.domain.dims
    ]
    inits = {t.name: t for t in model.graph.initializer}
    weight = 3 if op == "QLinearConv" else 0
    node = next(
        n for n in model.graph.node
        if n.op_type == op and n.input[scale_input] in inits and n.input[weight] in inits
        and len(inits[n.input[weight]].dims) == 4  # a Conv weight
        and len(inits[n.input[scale_input]].dims) == 1 and inits[n.input[scale_input]].dims[0] > 1
    )  # fmt: skip
    for index in (scale_input, scale_input + 1):  # the scale and its zero point
        tensor = inits[node.input[index]]
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor)[:-1], tensor.name))
    feeds = {"pixel_values": np.ones((1, 3, 32, 32), np.float32)}
    assert not _ort_runs(model, feeds)
    assert {f.node for f in _errors(model)} == {node.name}


def test_a_bias_dequantize_cut_by_one_is_an_error_that_onnxruntimes_optimizer_folds_away(tmp_path):
    model = _quantized_resnet(tmp_path, "qdq")
    inits = {t.name: t for t in model.graph.initializer}
    node = next(n for n in model.graph.node if n.name == "fc.bias_DequantizeLinear")
    for index in (1, 2):
        tensor = inits[node.input[index]]
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor)[:-1], tensor.name))
    feeds = {"pixel_values": np.ones((1, 3, 32, 32), np.float32)}
    assert _ort_runs(model, feeds)  # its optimizer folds the node away and runs
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    with pytest.raises(Exception, match="scale must be 1D tensor with size 10"):
        session.run(None, feeds)
    assert {f.node for f in _errors(model)} == {"fc.bias_DequantizeLinear"}
