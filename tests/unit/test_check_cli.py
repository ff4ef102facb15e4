"""``bcast check``: terminal output, JSON (validated by a schema), exit codes, options.

The models are generated here with onnx.helper; expected verdicts follow the ONNX and
OpenVINO specifications (see tests/unit/test_check.py for the rule-by-rule checks).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result
from onnx import TensorProto, helper, numpy_helper

from bcast.cli import main
from bcast.cli._output import load_schema

F = TensorProto.FLOAT
WIDTH = 100
ENV: dict[str, str | None] = {
    "COLUMNS": str(WIDTH),
    "LINES": "25",
    "FORCE_COLOR": None,
    "NO_COLOR": None,
    "TTY_COMPATIBLE": None,
    "TTY_INTERACTIVE": None,
    "TERM": "xterm-256color",
}
ANSI = re.compile(r"\x1b\[")

CHECK_SCHEMA = load_schema("check")  # the schema shipped in the package


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=ENV, catch_exceptions=False)


def check_json(*args: str) -> tuple[int, dict]:
    result = run("check", "--json", *args)
    data = json.loads(result.stdout)
    jsonschema.validate(data, CHECK_SCHEMA)
    return result.exit_code, data


def _vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _save(path: Path, nodes, inputs, inits=()) -> str:
    outputs = [_vi(nodes[-1].output[0], None)]
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


@pytest.fixture
def models(tmp_path: Path) -> dict[str, str]:
    add = helper.make_node("Add", ["x", "y"], ["z"], name="residual_add")
    cond = helper.make_node("Add", ["x", "pair"], ["z"], name="pair_add")
    relu = helper.make_node("Relu", ["x"], ["z"], name="relu")
    expand = helper.make_node("Expand", ["x", "shape"], ["z"], name="expand_huge")
    big = [numpy_helper.from_array(np.array([65536, 65536, 64], np.int64), "shape")]
    return {
        "clean": _save(tmp_path / "clean.onnx", [relu], [_vi("x", ["batch", 3])]),
        "broken": _save(
            tmp_path / "broken.onnx", [add], [_vi("x", ["batch", "seq", 64]), _vi("y", ["seq", 32])]
        ),
        "conditional": _save(
            tmp_path / "conditional.onnx", [cond], [_vi("x", ["batch", 4]), _vi("pair", [2, 4])]
        ),
        "huge": _save(tmp_path / "huge.onnx", [expand], [_vi("x", [1, 64])], big),
    }


# -- terminal ----------------------------------------------------------------------------------


def test_clean_model_exits_0_and_says_so(models):
    result = run("check", models["clean"])
    assert result.exit_code == 0
    assert "no findings" in result.stdout


def test_findings_exit_1_with_node_reason_and_picture(models):
    result = run("check", models["broken"])
    assert result.exit_code == 1
    out = result.stdout
    assert "residual_add" in out
    assert "64 vs 32" in out
    assert "^ axis 2" in out
    assert "1 error" in out


def test_terminal_output_fits_the_width_and_has_no_ansi_codes_off_a_terminal(models):
    result = run("check", *models.values())
    assert not ANSI.search(result.stdout + result.stderr)
    assert all(len(line) <= WIDTH for line in result.stdout.splitlines())
    assert "4 models" in result.stdout


def test_real_process_under_columns_100_writes_plain_text(models):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env["COLUMNS"] = str(WIDTH)
    proc = subprocess.run(
        [sys.executable, "-m", "bcast", "check", models["conditional"]],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert not ANSI.search(proc.stdout + proc.stderr)
    assert proc.stderr == ""
    assert "fails unless batch ∈ {1, 2}" in proc.stdout
    assert all(len(line) <= WIDTH for line in proc.stdout.splitlines())


# -- JSON ------------------------------------------------------------------------------------


def test_json_is_one_object_that_matches_the_schema(models):
    code, data = check_json(models["broken"], models["clean"])
    assert code == 1
    broken, clean = data["models"]
    assert clean["findings"] == [] and clean["nodes"] == 1
    (finding,) = broken["findings"]
    assert finding["node"] == "residual_add" and finding["op"] == "Add"
    assert finding["axis"] == 2 and finding["mode"] == "numpy"
    assert finding["inputs"] == [
        {"name": "x", "shape": "[batch,seq,64]"},
        {"name": "y", "shape": "[seq,32]"},
    ]
    assert "^ axis 2" in finding["picture"]
    assert data["summary"] == {
        "models": 2,
        "nodes": 2,
        "errors": 1,
        "warnings": 0,
        "info": 0,
        "unreadable": 0,
        "baselined": 0,
    }


def test_json_reports_an_unreadable_model_and_exits_2(models, tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01 not a model")
    code, data = check_json(models["broken"], str(junk))
    assert code == 2
    error = data["models"][1]["error"]
    assert error["kind"] == "unreadable" and error["axis"] is None
    assert error["message"].startswith(str(junk))
    assert data["summary"]["unreadable"] == 1


# -- options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("binding", "code", "kinds"),
    [
        pytest.param(None, 1, ["conditional"], id="unbound"),
        pytest.param("batch=2", 0, [], id="batch-2"),
        pytest.param("batch=1", 0, [], id="batch-1"),
        pytest.param("batch=3", 1, ["incompatible"], id="batch-3"),
    ],
)
def test_dim_binds_symbols(models, binding, code, kinds):
    args = [models["conditional"]] + (["--dim", binding] if binding else [])
    got, data = check_json(*args)
    assert got == code
    assert [f["kind"] for f in data["models"][0]["findings"]] == kinds


def test_a_dim_that_no_input_has_is_warned_about(models):
    args = ["--dim", "nosuch=3", "--dim", "batch=2"]
    result = run("check", models["conditional"], *args)
    assert result.exit_code == 0  # batch=2 still binds: the node is valid
    (line,) = result.stderr.strip().splitlines()
    assert "warning" in line
    assert "nosuch=3" in line
    assert "batch" not in line
    code, data = check_json(models["conditional"], *args)
    assert code == 0
    assert data["unused_dims"] == ["nosuch"]
    # A name that one of the models has is used: only "nosuch" is unused across both.
    assert check_json(models["clean"], models["conditional"], *args)[1]["unused_dims"] == ["nosuch"]
    assert check_json(models["conditional"], "--dim", "batch=2")[1]["unused_dims"] == []


def test_max_elements_sets_the_size_limit(models):
    assert check_json(models["huge"])[0] == 1
    assert check_json(models["huge"], "--max-elements", str(2**40))[0] == 0


@pytest.mark.parametrize("bad", ["batch", "batch=x", "=3", "batch=-1"])
def test_a_malformed_dim_is_a_usage_error(models, bad):
    result = run("check", models["clean"], "--dim", bad)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_weights_of_an_ir_named_beside_its_xml_are_not_read_as_a_model(tmp_path):
    pytest.importorskip("openvino")
    import openvino as ov

    a = ov.opset13.parameter([2, 3], np.float32, name="a")
    b = ov.opset13.constant(np.ones((3,), np.float32), name="b")
    add = ov.opset13.add(a, b, name="add")
    ov.save_model(ov.Model([add], [a], "m"), tmp_path / "m.xml")
    code, data = check_json(str(tmp_path / "m.xml"), str(tmp_path / "m.bin"))
    assert code == 0
    assert [m["path"] for m in data["models"]] == [str(tmp_path / "m.xml")]


def test_no_progress_bar_off_a_terminal_even_for_many_nodes(tmp_path):
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"r{i}") for i in range(250)]
    path = _save(tmp_path / "chain.onnx", nodes, [_vi("v0", ["batch", 8])])
    result = run("check", path)
    assert result.exit_code == 0
    assert "250 nodes" in result.stdout
    assert result.stderr == ""


def test_help_shows_examples():
    result = run("check", "--help")
    assert result.exit_code == 0
    assert "--max-elements" in result.stdout and "bcast check model.onnx" in result.stdout


def _on_a_terminal(args: list[str]) -> str:
    """Run ``bcast`` with stdout and stderr on a pseudo-terminal; return what it wrote."""
    pty = pytest.importorskip("pty")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real command line on a terminal
        os.execv(sys.executable, [sys.executable, "-m", "bcast", *args])
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_progress_bar_on_a_terminal_for_many_nodes_but_not_with_json(tmp_path):
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"r{i}") for i in range(250)]
    path = _save(tmp_path / "chain.onnx", nodes, [_vi("v0", ["batch", 8])])
    assert "250/250" in _on_a_terminal(["check", path])
    assert "250/250" not in _on_a_terminal(["check", "--json", path])
    small = _save(tmp_path / "small.onnx", nodes[:3], [_vi("v0", ["batch", 8])])
    assert "3/3" not in _on_a_terminal(["check", small])


def test_a_part_not_checked_is_an_info_finding_in_json_and_exits_0(tmp_path):
    # A model-local function called with an input of unknown shape: reported, not failed.
    body = [helper.make_node("Add", ["p", "q"], ["r"], name="add")]
    function = helper.make_function(
        "local", "F", ["p", "q"], ["r"], body, [helper.make_opsetid("", 17)]
    )
    call = helper.make_node("F", ["a", "b"], ["y"], name="call", domain="local")
    graph = helper.make_graph(
        [call],
        "g",
        [helper.make_tensor_value_info("a", F, None), _vi("b", [4])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
        functions=[function],
    )
    model.ir_version = 8
    path = tmp_path / "function.onnx"
    onnx.save(model, path)
    code, data = check_json(str(path))
    assert code == 0
    (finding,) = data["models"][0]["findings"]
    assert (finding["kind"], finding["severity"], finding["node"]) == (
        "not-checked",
        "info",
        "call",
    )
