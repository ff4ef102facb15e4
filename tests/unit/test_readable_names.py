"""One rendering of dims everywhere, and the tensor a finding's failing dim comes from.

torch's dynamo exporter writes dims as expressions (``Min(16, seq)``); bcast's symbol for
one is a cleaned name (``Min_16__seq_``) that no output may show: not the text, JSON, SARIF,
GitHub or HTML reports, ``print(report)``, the notebook HTML, nor ``Finding.inputs``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper, save

import bcast
from bcast.cli import main

F = TensorProto.FLOAT


def _position_table_model(path: Path) -> Path:
    """relu(x [seq,8]) + pos[:seq] where pos is a [16,8] table: runs for seq <= 16 only."""
    pos = numpy_helper.from_array(np.zeros((16, 8), np.float32), "pos")
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"], name="shape", start=0, end=1),
        helper.make_node("Slice", ["pos", "zero", "x_shape", "zero"], ["p"], name="cut"),
        helper.make_node("Relu", ["x"], ["h"], name="relu"),
        helper.make_node("Add", ["h", "p"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, ["seq", 8])],
        [helper.make_tensor_value_info("y", F, None)],
        [pos, zero],
        value_info=[helper.make_tensor_value_info("p", F, ["Min(16, seq)", 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, path)
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _position_table_model(tmp_path_factory.mktemp("readable") / "pos.onnx")


def test_the_model_fails_past_the_table_in_onnxruntime(model: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.ones((16, 8), np.float32)})  # 16 rows: runs
    with pytest.raises(Exception, match=r"(?i)broadcast|dimension"):
        session.run(None, {"x": np.ones((17, 8), np.float32)})


def test_report_shows_the_expression_not_the_internal_symbol(model: Path) -> None:
    report = bcast.check(str(model))
    (finding,) = report.findings
    assert finding.kind == "conditional" and "seq > 16" in finding.reason
    outputs = {
        "json": json.dumps(report.to_json()),
        "str": str(report),
        "html": report._repr_html_(),
        "inputs": repr(finding.inputs),
    }
    for where, text in outputs.items():
        assert "Min_16" not in text, where
        assert "Min(16, seq)" in text, where
    assert dict(finding.inputs)["p"] == bcast.Shape.parse("[Min_16__seq_,8]")  # same dims
    assert str(dict(finding.inputs)["p"]) == "[Min(16, seq),8]"
    assert bcast.Shape.parse(str(dict(finding.inputs)["p"])) == dict(finding.inputs)["p"]


@pytest.mark.parametrize("form", ["text", "json", "sarif", "github", "html"])
def test_every_check_format_shows_the_expression(model: Path, form: str) -> None:
    result = CliRunner().invoke(main, ["check", str(model), "--format", form])
    assert result.exit_code == 1, result.output
    assert "Min_16" not in result.stdout
    assert "Min(16, seq)" in result.stdout or "Min(16, seq)" in json.dumps(result.stdout)


def test_a_finding_names_the_initializer_and_the_slice_that_decide_it(model: Path) -> None:
    (finding,) = bcast.check(str(model)).findings
    assert "Min(16, seq) is from initializer pos [16,8], sliced by seq (node cut, Slice)" in (
        finding.reason
    )
    assert finding.reason.endswith("; seq is axis 0 of input x")  # h is relu(x)


def test_an_input_that_is_an_operand_is_not_named_again(tmp_path: Path) -> None:
    pair = numpy_helper.from_array(np.zeros((2, 4), np.float32), "pair")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "pair"], ["y"], name="add")],
        "g",
        [helper.make_tensor_value_info("x", F, ["batch", 4])],
        [helper.make_tensor_value_info("y", F, None)],
        [pair],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, tmp_path / "m.onnx")
    (finding,) = bcast.check(str(tmp_path / "m.onnx")).findings
    assert finding.reason == "fails unless batch ∈ {1, 2} (axis 0 of x)"


def test_a_static_size_is_not_traced_to_a_guessed_tensor(tmp_path: Path) -> None:
    # 32 vs 31: many tensors are 32 wide; naming the first one found would mislead.
    w = numpy_helper.from_array(np.zeros((31,), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        "g",
        [helper.make_tensor_value_info("x", F, [2, 32])],
        [helper.make_tensor_value_info("y", F, None)],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, tmp_path / "m.onnx")
    (finding,) = bcast.check(str(tmp_path / "m.onnx")).findings
    assert finding.kind == "incompatible" and " is from " not in finding.reason
