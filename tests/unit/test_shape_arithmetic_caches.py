"""KV caches, 4-D attention inputs and NNCF group scales, held against the runtimes (issue 37).

``com.microsoft`` Attention's ``present`` is ``past + seq`` long; a cache of another length
read against it is a finding exactly where onnxruntime fails. MultiHeadAttention with a
BNSH key and value (a decoder's cached cross attention) is sized, not left unknown. An NNCF
int4/int8 weight decompression (weights ``[out, groups, group_size]`` minus a zero point and
times a scale of ``[out, groups, 1]``) is checked against the group scale's shape: a scale one
group short is reported at its Multiply, and OpenVINO refuses that IR.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import bcast
from bcast.models import Severity

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
helper, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto
ort.set_default_logger_severity(3)
MS = "com.microsoft"


def _ort_runs(model: object, feeds: dict[str, np.ndarray]) -> bool:
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        session.run(None, feeds)
    except Exception:  # onnxruntime refuses the model or the run
        return False
    return True


def _errors(model: object, dims: dict[str, int] | None = None) -> set[str]:
    report = bcast.check(model, dims=dims)
    assert report.unmodelled == () and report.unchecked == ()
    return {f.node for f in report.findings if f.severity is Severity.ERROR}


def _attention_with_cache() -> object:
    w = numpy_helper.from_array(np.random.default_rng(0).random((32, 96), np.float32), "w")
    b = numpy_helper.from_array(np.zeros(96, np.float32), "b")
    attention = helper.make_node(
        "Attention", ["x", "w", "b", "", "past"], ["y", "present"], domain=MS, num_heads=4,
        unidirectional=1, name="attn",
    )  # fmt: skip
    add = helper.make_node("Add", ["present", "cache"], ["out"], name="cache_add")
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 32]),
        helper.make_tensor_value_info("past", TensorProto.FLOAT, [2, "B", 4, "P", 8]),
        helper.make_tensor_value_info("cache", TensorProto.FLOAT, [2, "B", 4, "T", 8]),
    ]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("out", "y")]
    graph = helper.make_graph([attention, add], "g", inputs, outputs, [w, b])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets)


@pytest.mark.parametrize("total", [7, 8, 9])
def test_attention_present_is_past_plus_seq_as_onnxruntime_computes(total: int) -> None:
    model = _attention_with_cache()
    feeds = {
        "x": np.ones((1, 3, 32), np.float32),
        "past": np.ones((2, 1, 4, 5, 8), np.float32),
        "cache": np.ones((2, 1, 4, total, 8), np.float32),
    }
    runs = _ort_runs(model, feeds)
    assert runs == (total == 8)  # onnxruntime: present holds 5 + 3 positions
    assert _errors(model, {"P": 5, "S": 3, "T": total, "B": 1}) == (
        set() if runs else {"cache_add"}
    )


def test_attention_present_against_a_cache_of_its_own_length_is_a_condition() -> None:
    report = bcast.check(_attention_with_cache())
    (finding,) = report.findings
    assert (finding.node, finding.axis) == ("cache_add", 3)
    assert "P + S" in finding.reason


def _multi_head(key_heads: int, bias: int) -> object:
    mha = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["o"], domain=MS, num_heads=4)
    add = helper.make_node("Add", ["o", "bias"], ["out"], name="after")
    inputs = [
        helper.make_tensor_value_info("q", TensorProto.FLOAT, ["B", "S", 32]),
        helper.make_tensor_value_info("k", TensorProto.FLOAT, ["B", key_heads, "L", 8]),
        helper.make_tensor_value_info("v", TensorProto.FLOAT, ["B", key_heads, "L", 8]),
    ]
    graph = helper.make_graph(
        [mha, add],
        "g",
        inputs,
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones(bias, np.float32), "bias")],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets)


@pytest.mark.parametrize(
    ("key_heads", "bias", "reported"),
    [
        pytest.param(4, 32, set(), id="valid"),
        pytest.param(3, 32, {"MultiHeadAttention_0"}, id="key-heads-3"),
        pytest.param(4, 31, {"after"}, id="bias-31"),
    ],
)
def test_multi_head_attention_with_bnsh_key_and_value_is_sized(
    key_heads: int, bias: int, reported: set[str]
) -> None:
    model = _multi_head(key_heads, bias)
    kv = np.ones((2, key_heads, 5, 8), np.float32)
    runs = _ort_runs(model, {"q": np.ones((2, 3, 32), np.float32), "k": kv, "v": kv})
    assert runs == (not reported)
    assert _errors(model) == reported


# -- NNCF weight decompression in OpenVINO IR ----------------------------------------------------


def _nncf_ir(path: Path, kind: str) -> str:
    ov = pytest.importorskip("openvino")
    o = pytest.importorskip("openvino.opset13")
    out, groups, size = 8, 4, 16
    wtype = {"u8": ov.Type.u8, "u4": ov.Type.u4, "i4": ov.Type.i4}[kind]
    rng = np.random.default_rng(0)
    x = o.parameter(ov.PartialShape([-1, groups * size]), np.float32, name="x")
    w = o.constant(rng.integers(0, 7, (out, groups, size)).astype(np.uint8), dtype=wtype)
    zero = o.constant(np.full((out, groups, 1), 3, np.uint8), dtype=wtype)
    scale = o.constant(rng.random((out, groups, 1)).astype(np.float16), name="scale")
    sub = o.subtract(o.convert(w, ov.Type.f16), o.convert(zero, ov.Type.f16), name="sub_zp")
    mul = o.multiply(sub, scale, name="mul_scale")
    target = o.constant(np.array([out, groups * size], np.int64))
    weights = o.convert(o.reshape(mul, target, False), ov.Type.f32)
    model = ov.Model([o.matmul(x, weights, False, True)], [x], "nncf")
    ov.save_model(model, str(path), compress_to_fp16=False)
    return str(path)


def _one_group_short(path: str) -> str:
    """Rewrite the IR with a scale of ``[8, 3, 1]``: its Const and the Multiply's port."""
    xml = Path(path).read_text()
    scale = re.search(r'<layer id="\d+" name="scale".*?</layer>', xml, re.S)
    mul = re.search(r'<layer id="\d+" name="mul_scale".*?</layer>', xml, re.S)
    assert scale is not None and mul is not None
    short = (
        scale.group(0)
        .replace('shape="8, 4, 1"', 'shape="8, 3, 1"')
        .replace("<dim>4</dim>", "<dim>3</dim>")
    )
    short = re.sub(r'size="\d+"', 'size="48"', short)
    port = re.search(r'<port id="1".*?</port>', mul.group(0), re.S)
    assert port is not None
    muls = mul.group(0).replace(
        port.group(0), port.group(0).replace("<dim>4</dim>", "<dim>3</dim>")
    )
    mutant = xml.replace(scale.group(0), short).replace(mul.group(0), muls)
    out = path.replace(".xml", "_short.xml")
    Path(out).write_text(mutant)
    Path(out.replace(".xml", ".bin")).write_bytes(Path(path.replace(".xml", ".bin")).read_bytes())
    return out


@pytest.mark.parametrize("kind", ["u8", "u4", "i4"])
def test_nncf_group_scales_are_checked_and_a_scale_one_group_short_is_reported(
    tmp_path: Path, kind: str
) -> None:
    ov = pytest.importorskip("openvino")
    path = _nncf_ir(tmp_path / f"nncf_{kind}.xml", kind)
    valid = bcast.check(path)
    assert valid.findings == () and valid.broadcasting == 2  # Subtract and Multiply, checked
    mutant = _one_group_short(path)
    with pytest.raises(Exception, match=r"mul_scale|Multiply|broadcast"):
        ov.Core().read_model(mutant)  # OpenVINO refuses the IR
    report = bcast.check(mutant)
    (finding,) = [f for f in report.findings if f.severity is Severity.ERROR]
    assert (finding.node, finding.axis) == ("mul_scale", 1)
