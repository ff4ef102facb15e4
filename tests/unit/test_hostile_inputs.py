"""Hostile and broken model files: one clear line and exit 2, never a traceback.

Nothing outside the model may be read: no XML entities or DTDs, no ONNX external data, no
network. The last tests run the real command in a subprocess with an audit hook that
records every file the process opens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result
from onnx import TensorProto, helper, numpy_helper

from bcast.cli import main

F = TensorProto.FLOAT
ENV = {"COLUMNS": "100", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=ENV, catch_exceptions=False)


def _model(nodes, inputs, inits=()) -> onnx.ModelProto:
    outputs = [helper.make_tensor_value_info(nodes[-1].output[0], F, None)]
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _add_model() -> onnx.ModelProto:
    node = helper.make_node("Add", ["x", "y"], ["z"], name="add")
    x = helper.make_tensor_value_info("x", F, [3])
    y = helper.make_tensor_value_info("y", F, [3])
    return _model([node], [x, y])


def assert_unreadable(path: Path | str, fragment: str) -> None:
    result = run("check", str(path))
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert lines[0].startswith("bcast: ")
    assert fragment in lines[0]
    json_result = run("check", "--json", str(path))
    assert json_result.exit_code == 2
    assert fragment in json.loads(json_result.stdout)["models"][0]["error"]["message"]


# -- ONNX --------------------------------------------------------------------------------------


def test_truncated_onnx(tmp_path):
    data = _add_model().SerializeToString()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    assert_unreadable(path, "not an ONNX model")


def test_random_bytes(tmp_path):
    path = tmp_path / "random.onnx"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    assert_unreadable(path, "not an ONNX model")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    assert_unreadable(path, "not an ONNX model")


def test_xml_with_an_onnx_extension(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_text('<?xml version="1.0"?><net name="m" version="11"><layers/></net>')
    assert_unreadable(path, "not an ONNX model")


def test_onnx_with_an_xml_extension(tmp_path):
    path = tmp_path / "model.xml"
    path.write_bytes(_add_model().SerializeToString())
    assert_unreadable(path, "not an OpenVINO IR")


def test_missing_file_and_directory(tmp_path):
    assert_unreadable(tmp_path / "nope.onnx", "no such file")
    assert_unreadable(tmp_path, "is a directory")


def test_graph_cycle(tmp_path):
    nodes = [
        helper.make_node("Relu", ["b"], ["a"], name="r1"),
        helper.make_node("Relu", ["a"], ["b"], name="r2"),
    ]
    path = tmp_path / "cycle.onnx"
    onnx.save(_model(nodes, []), path)
    assert_unreadable(path, "cycle through node")


def _onnxruntime_refuses(path: Path) -> bool:
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception:
        return True
    return False


def test_truncated_onnx_that_still_parses_without_its_opset_import(tmp_path):
    model = _add_model()
    data = model.SerializeToString()
    # opset_import (field 8) is written last: cutting it off leaves a file that parses.
    cut = len(model.opset_import[0].SerializeToString()) + 2
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:-cut])
    parsed = onnx.ModelProto()
    parsed.ParseFromString(path.read_bytes())
    assert parsed.HasField("graph")
    assert len(parsed.opset_import) == 0
    assert _onnxruntime_refuses(path)
    assert_unreadable(path, "no opset_import")


def _with_initializer(tmp_path: Path, tensor: onnx.TensorProto) -> Path:
    node = helper.make_node("Add", ["x", tensor.name], ["z"], name="add")
    path = tmp_path / "init.onnx"
    x = helper.make_tensor_value_info("x", tensor.data_type, [1])
    z = helper.make_tensor_value_info("z", tensor.data_type, None)
    graph = helper.make_graph([node], "g", [x], [z], [tensor])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def _float(dims: list[int], *, raw: bytes | None = None, values=()) -> onnx.TensorProto:
    """A float tensor as a broken writer leaves it (onnx.helper refuses to build one)."""
    tensor = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims)
    if raw is not None:
        tensor.raw_data = raw
    tensor.float_data.extend(values)
    return tensor


@pytest.mark.parametrize(
    ("tensor", "fragment"),
    [
        pytest.param(_float([2**31], raw=b""), "holds 0 bytes", id="2**31-dims-no-data"),
        pytest.param(
            _float([2, 3], raw=b"\x00" * 20),
            "(24 bytes of FLOAT) but holds 20 bytes",
            id="raw-too-short",
        ),
        pytest.param(
            _float([4], values=[1.0, 2.0, 3.0]),
            "(4 values of FLOAT) but holds 3 values",
            id="typed-too-short",
        ),
    ],
)
def test_an_initializer_whose_data_does_not_match_its_dims(tmp_path, tensor, fragment):
    path = _with_initializer(tmp_path, tensor)
    assert _onnxruntime_refuses(path)
    assert_unreadable(path, "initializer 'w'")
    assert_unreadable(path, fragment)


@pytest.mark.parametrize(
    "tensor",
    [
        pytest.param(numpy_helper.from_array(np.ones(1, np.float32), "w"), id="raw"),
        pytest.param(helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0]), id="typed"),
        pytest.param(helper.make_tensor("w", TensorProto.FLOAT16, [1], [1.0]), id="float16"),
    ],
)
def test_an_initializer_whose_data_matches_its_dims_is_read(tmp_path, tensor):
    path = _with_initializer(tmp_path, tensor)
    assert not _onnxruntime_refuses(path)
    assert run("check", str(path)).exit_code == 0


@pytest.mark.parametrize("dim", [2**31, 2**40, 2**62])
def test_a_huge_dim_is_a_size_finding_not_a_crash(tmp_path, dim):
    node = helper.make_node("Add", ["x", "y"], ["z"], name="wide_add")
    x = helper.make_tensor_value_info("x", F, [dim, 1])
    y = helper.make_tensor_value_info("y", F, [1, 4])
    path = tmp_path / "huge.onnx"
    onnx.save(_model([node], [x, y]), path)
    result = run("check", "--json", str(path))
    assert result.exit_code == 1
    (finding,) = json.loads(result.stdout)["models"][0]["findings"]
    assert (finding["kind"], finding["node"]) == ("size", "wide_add")
    assert f"[{dim},4]" in finding["reason"]


def test_a_huge_expand_target_is_a_size_finding(tmp_path):
    node = helper.make_node("Expand", ["x", "shape"], ["z"], name="expand")
    target = numpy_helper.from_array(np.array([2**31, 2**31], np.int64), "shape")
    path = tmp_path / "expand.onnx"
    onnx.save(_model([node], [helper.make_tensor_value_info("x", F, [1])], [target]), path)
    result = run("check", "--json", str(path))
    assert result.exit_code == 1
    assert json.loads(result.stdout)["models"][0]["findings"][0]["kind"] == "size"


def test_a_negative_dim_value_is_read_as_unknown(tmp_path):
    model = _add_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -5
    path = tmp_path / "negative.onnx"
    onnx.save(model, path)
    assert run("check", str(path)).exit_code == 0


# -- OpenVINO IR -------------------------------------------------------------------------------

IR = """<?xml version="1.0"?>
{doctype}<net name="m" version="11">
  <layers>
    <layer id="0" name="{name}" type="Parameter" version="opset1">
      <data shape="3" element_type="f32"/>
      <output><port id="0" precision="FP32"><dim>3</dim></port></output>
    </layer>
  </layers>
  <edges/>
</net>
"""


def test_external_entity_is_refused_without_reading_it(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    doctype = f'<!DOCTYPE net [<!ENTITY x SYSTEM "file://{secret}">]>\n'
    path = tmp_path / "xxe.xml"
    path.write_text(IR.format(doctype=doctype, name="&x;"))
    assert_unreadable(path, "refusing unsafe XML")


def test_network_entity_is_refused(tmp_path):
    doctype = '<!DOCTYPE net [<!ENTITY x SYSTEM "http://127.0.0.1:9/x">]>\n'
    path = tmp_path / "net.xml"
    path.write_text(IR.format(doctype=doctype, name="&x;"))
    assert_unreadable(path, "refusing unsafe XML")


def test_billion_laughs_is_refused(tmp_path):
    entities = ['<!ENTITY a0 "lol">'] + [
        f'<!ENTITY a{i} "{("&a" + str(i - 1) + ";") * 10}">' for i in range(1, 10)
    ]
    doctype = f"<!DOCTYPE net [{''.join(entities)}]>\n"
    path = tmp_path / "lol.xml"
    path.write_text(IR.format(doctype=doctype, name="&a9;"))
    assert_unreadable(path, "refusing unsafe XML")


def test_ir_with_missing_bin(tmp_path):
    ov = pytest.importorskip("openvino")
    a = ov.opset13.parameter([2, 3], np.float32, name="a")
    b = ov.opset13.constant(np.ones((3,), np.float32), name="b")
    model = ov.Model([ov.opset13.add(a, b)], [a], "m")
    ov.save_model(model, tmp_path / "m.xml")
    (tmp_path / "m.bin").unlink()
    assert_unreadable(tmp_path / "m.xml", "bin file")


def test_ir_that_is_not_a_net(tmp_path):
    path = tmp_path / "other.xml"
    path.write_text("<html><body/></html>")
    assert_unreadable(path, "not an OpenVINO IR")


def test_ir_with_a_malformed_dim(tmp_path):
    pytest.importorskip("openvino")
    path = tmp_path / "dims.xml"
    path.write_text(IR.format(doctype="", name="x").replace("<dim>3</dim>", "<dim>abc</dim>"))
    result = run("check", str(path))
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


# -- nothing outside the model is opened ---------------------------------------------------------

AUDIT = textwrap.dedent(
    """
    import sys
    opened = []
    def hook(event, args):
        if event == "open" and isinstance(args[0], str):
            opened.append(args[0])
    sys.addaudithook(hook)
    from bcast.cli import main
    try:
        main(sys.argv[1:])
    except SystemExit as exit:
        code = exit.code
    sys.stdout.flush()
    print("OPENED:" + repr([p for p in opened if {forbidden!r} in p]), file=sys.stderr)
    sys.exit(code)
    """
)


def _audited(args: list[str], forbidden: str) -> subprocess.CompletedProcess[str]:
    script = AUDIT.format(forbidden=forbidden)
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=False
    )


def test_onnx_external_data_is_never_loaded(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "weights.bin").write_bytes(b"\x00" * 64)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    node = helper.make_node("Add", ["x", "w"], ["z"], name="add")
    weights = numpy_helper.from_array(np.zeros(16, np.float32), "w")
    weights.ClearField("raw_data")
    weights.data_location = TensorProto.EXTERNAL
    for key, value in {"location": "../outside/weights.bin", "offset": "0", "length": "64"}.items():
        entry = weights.external_data.add()
        entry.key, entry.value = key, value
    x = helper.make_tensor_value_info("x", F, [16])
    path = model_dir / "m.onnx"
    path.write_bytes(_model([node], [x], [weights]).SerializeToString())
    proc = _audited(["check", str(path)], "outside")
    assert proc.returncode == 0, proc.stderr
    assert "OPENED:[]" in proc.stderr


def test_xml_entities_do_not_open_the_target(tmp_path):
    secret = tmp_path / "secret_target.txt"
    secret.write_text("secret")
    doctype = f'<!DOCTYPE net [<!ENTITY x SYSTEM "file://{secret}">]>\n'
    path = tmp_path / "xxe.xml"
    path.write_text(IR.format(doctype=doctype, name="&x;"))
    proc = _audited(["check", str(path)], "secret_target")
    assert proc.returncode == 2
    assert "OPENED:[]" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ir_with_a_cycle(tmp_path):
    pytest.importorskip("openvino")
    layer = (
        '<layer id="{i}" name="{n}" type="Relu" version="opset1">'
        '<input><port id="0" precision="FP32"><dim>3</dim></port></input>'
        '<output><port id="1" precision="FP32"><dim>3</dim></port></output></layer>'
    )
    edges = (
        '<edge from-layer="0" from-port="1" to-layer="1" to-port="0"/>'
        '<edge from-layer="1" from-port="1" to-layer="0" to-port="0"/>'
    )
    path = tmp_path / "cycle.xml"
    path.write_text(
        f'<?xml version="1.0"?><net name="m" version="11"><layers>{layer.format(i=0, n="a")}'
        f"{layer.format(i=1, n='b')}</layers><edges>{edges}</edges></net>"
    )
    assert_unreadable(path, "cycle through node")
