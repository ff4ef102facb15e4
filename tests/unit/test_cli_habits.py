"""The command line as scripts, CI systems and terminals use it.

Exit codes, a closed pipe, an ASCII-only stdout, narrow terminals, options checked by the
parser, one JSON contract validated by the schemas shipped in the package, and the report
formats CI systems read (SARIF 2.1.0, GitHub Actions workflow commands, HTML).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner, Result
from onnx import TensorProto, helper

import bcast.cli.shapes
from bcast.cli import main
from bcast.cli._output import load_schema

ENV: dict[str, str | None] = {"COLUMNS": "80", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}


def run(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={**ENV, **(env or {})})


def bcast_process(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bcast", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80", **env},
        timeout=120,
    )


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An Add of [batch,seq,64] and [seq,32]: a definite error at axis 2."""
    f = TensorProto.FLOAT
    node = helper.make_node("Add", ["x", "y"], ["z"], name="residual_add")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", f, ["batch", "seq", 64]),
            helper.make_tensor_value_info("y", f, ["seq", 32]),
        ],
        [helper.make_tensor_value_info("z", f, [None, None, None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("models") / "broken add.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path)


# -- usage and exit codes ------------------------------------------------------------------


def test_bcast_alone_prints_the_help() -> None:
    result = run()
    assert "Usage: bcast" in result.output and "Commands:" in result.output
    assert "Error:" not in result.output
    assert result.exit_code == 2  # click's code for "no command", as documented


def test_suggestions_have_no_doubled_punctuation() -> None:
    result = run("chek", "x.onnx")
    assert result.exit_code == 2
    assert "Did you mean 'check'?" in result.stderr
    assert "?." not in result.stderr and ".." not in result.stderr


@pytest.mark.parametrize("text", ["0 1", "0,1", "[0, 1]", " 0  1 "])
def test_axes_mapping_takes_spaces_or_commas(text: str) -> None:
    result = run("shape", "[2,3]", "[2,3,4]", "--mode", "explicit", "--axes-mapping", text)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "[2,3,4]"


def test_mode_is_case_insensitive_on_the_command_line() -> None:
    result = run("shape", "[2,1]", "[3]", "--mode", "NUMPY", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["mode"] == "numpy"


def test_negative_seed_is_a_usage_error() -> None:
    result = run("verify", "model.onnx", "--seed", "-1")
    assert result.exit_code == 2
    assert "--seed" in result.stderr and "model" not in result.stderr.split("--seed")[0][7:]


def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bcast.cli.shapes.Request, "apply", interrupted)
    result = run("shape", "[2]", "[2]")
    assert result.exit_code == 130
    assert "Traceback" not in result.stderr


def test_a_crash_is_never_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_rule(self: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(bcast.cli.shapes.Request, "apply", broken_rule)
    result = run("shape", "[2]", "[2]")
    assert result.exit_code == 2
    assert "internal error: RuntimeError: a bug" in result.stderr


def test_ascii_stdout_gets_ascii_stand_ins(broken: str) -> None:
    explained = bcast_process("explain", "[2,3]", "[4]", PYTHONIOENCODING="ascii")
    assert explained.returncode == 1, explained.stderr  # incompatible shapes, not a crash
    assert "->  x" in explained.stdout and "Traceback" not in explained.stderr
    fine = bcast_process("explain", "[2,1]", "[4]", PYTHONIOENCODING="ascii")
    assert fine.returncode == 0 and "->  [2,4]" in fine.stdout
    checked = bcast_process("check", broken, PYTHONIOENCODING="ascii")
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    assert checked.stdout.isascii()


def test_a_closed_pipe_is_quiet(broken: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "bcast", "check", *[broken] * 300],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(10)
    process.stdout.close()  # the reader goes away, as `| head -1` does
    stderr = process.stderr.read().decode()
    process.wait(120)
    assert stderr == ""
    assert process.returncode in (0, 1, 141)  # never a crash (2, 120) with a traceback


def test_shell_completion_script_and_file_completion_for_model(tmp_path: Path) -> None:
    script = bcast_process(_BCAST_COMPLETE="bash_source")
    assert script.returncode == 0 and "_bcast_completion" in script.stdout
    completed = subprocess.run(
        [sys.executable, "-m", "bcast"],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "_BCAST_COMPLETE": "bash_complete",
            "COMP_WORDS": "bcast check mod",
            "COMP_CWORD": "2",
        },
        cwd=tmp_path,
        timeout=60,
    )
    assert completed.stdout.split() == ["file,mod"]  # click asks bash for file names


# -- terminals -----------------------------------------------------------------------------


@pytest.mark.parametrize("width", [60, 80])
def test_check_text_fits_the_width_and_never_splits_a_token(broken: str, width: int) -> None:
    result = run("check", broken, env={"COLUMNS": str(width)})
    assert result.exit_code == 1
    out = result.stdout.splitlines()
    for line in out:
        assert line == line.rstrip(), f"trailing spaces: {line!r}"
    prose = [line for line in out if not line.startswith("      ")]  # pictures print whole
    assert all(len(line) <= width for line in prose if broken not in line)
    for token in ("[batch,seq,64]", "[seq,32]", "residual_add", "error[incompatible]"):
        assert any(token in line for line in out), token


@pytest.fixture(scope="module")
def gpt2_verified() -> tuple[str, dict[str, Any]]:
    path = str(Path(__file__).resolve().parents[1] / "fixtures" / "real" / "gpt2_torchscript.onnx")
    result = run("verify", path, "--dim", "batch=2", "--dim", "seq=8", "--json")
    assert result.exit_code == 0, result.output
    return path, json.loads(result.stdout)


@pytest.mark.parametrize("width", [60, 80, 100])
def test_verify_text_fits_the_width_and_never_splits_a_name_or_a_shape(
    gpt2_verified: tuple[str, dict[str, Any]], width: int
) -> None:
    # gpt2's table needs about 150 columns; narrower, it would fold names and shapes
    # ("[1,1,64,6" / "4]"), so each node gets a block of lines instead
    path, report = gpt2_verified
    result = run("verify", path, "--dim", "batch=2", "--dim", "seq=8", env={"COLUMNS": str(width)})
    assert result.exit_code == 0
    out = result.stdout.splitlines()
    items = [f"{i['name']} {i['shape']}" for node in report["nodes"] for i in node["inputs"]]
    for item in items:  # every input name with its shape, whole on one line
        assert any(item in line for line in out), item
    for node in report["nodes"]:
        result_text = f"{node['results']['bcast']['shape']} {node['results']['bcast']['dtype']}"
        assert any(line.startswith(f"{node['node']} ({node['op']})") for line in out)
        assert any(result_text in line for line in out), result_text
    for line in out:
        assert line == line.rstrip(), f"trailing spaces: {line!r}"
        assert len(line) <= width or any(len(i) > width - 14 and i in line for i in items), line
    assert out[-1] == "every runtime agrees with bcast"


def test_verify_text_is_a_table_where_it_fits(gpt2_verified: tuple[str, dict[str, Any]]) -> None:
    path, report = gpt2_verified
    result = run("verify", path, "--dim", "batch=2", "--dim", "seq=8", env={"COLUMNS": "240"})
    out = result.stdout.splitlines()
    header = next(line for line in out if line.startswith("node "))
    assert header.split() == ["node", "op", "inputs", "bcast", "onnxruntime", "openvino"]
    assert len(out) < 3 * len(report["nodes"])  # a row per node (two lines: two inputs)


@pytest.mark.parametrize("width", [60, 80])
def test_domain_text_fits_the_width_and_a_pipe_gets_one_line_per_part(width: int) -> None:
    path = str(Path(__file__).resolve().parents[1] / "fixtures" / "real" / "vit_hw_dynamo.onnx")
    result = run("domain", path, env={"COLUMNS": str(width)})
    assert result.exit_code == 0
    head = result.stdout.split("\ntorch.export:")[0].splitlines()[1:]  # code lines print whole
    assert head and all(len(line) <= width and line == line.rstrip() for line in head)
    assert any(line.strip().startswith("<- node_conv2d (Conv, axis 2)") for line in head)
    piped = run("domain", path, env={"COLUMNS": None}).stdout.splitlines()
    s100 = next(line for line in piped if line.startswith("  s100 "))
    assert "8..23, 32..39, 64..71, 128..135    <- node_conv2d (Conv, axis 2)" in s100
    # the verdict at a point too: it fits, and a pipe keeps it on one line
    verdict = run("domain", path, "--dim", "s100=7", env={"COLUMNS": str(width)}).stdout
    tail = verdict.split("\n\n")[-1].splitlines()
    assert tail[0].startswith("at s100=7: fails first at") and len(tail) > 1
    assert all(len(line) <= width for line in tail)
    piped_verdict = run("domain", path, "--dim", "s100=7", env={"COLUMNS": None}).stdout
    assert piped_verdict.splitlines()[-1].startswith("at s100=7: fails first at node_conv2d")


def test_check_text_shows_an_exporters_expression_dims_as_written() -> None:
    # torch's dynamo exporter writes dim_param "Min(64, s41)"; bcast's symbol for it is a
    # cleaned name, but the user reads the expression, in the inputs line and the picture.
    path = str(Path(__file__).resolve().parents[1] / "fixtures" / "real" / "bert_dynamo.onnx")
    result = run("check", path, env={"COLUMNS": "120"})
    assert "embedding_2 [1,Min(64, s41),32]" in result.stdout
    assert "Min_64__s41_" not in result.stdout


def test_explain_table_rows_have_no_trailing_padding() -> None:
    result = run("explain", "[2,1]", "[4]")
    assert result.exit_code == 0
    assert all(line == line.rstrip() for line in result.stdout.splitlines())


# -- one JSON contract ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "args", "code"),
    [
        ("shape", ["[2,3]", "[4]"], 1),
        ("shape", ["[2]", "--mode", "bogus"], 2),
        ("explain", ["[2]", "--axis", "x"], 2),
        ("check", ["no-such-model.onnx"], 2),
        ("check", ["x.onnx", "--max-elements", "0"], 2),
        ("verify", ["no-such-model.onnx"], 2),
        ("verify", ["x.onnx", "--seed", "-1"], 2),
    ],
)
def test_every_outcome_has_the_command_shape_and_one_error_type(
    command: str, args: list[str], code: int
) -> None:
    result = run(command, *args, "--json")
    assert result.exit_code == code
    obj = json.loads(result.stdout)
    jsonschema.validate(obj, load_schema(command))
    assert obj["schema_version"] == 1
    assert isinstance(obj["error"] or obj["models"][0]["error"], dict)
    error = obj["error"] or obj["models"][0]["error"]
    assert set(error) >= {"message", "axis"}


def test_schemas_ship_in_the_package() -> None:
    folder = Path(bcast.cli.__file__).parent / "schemas"
    assert sorted(p.name for p in folder.glob("*.json")) == [
        "baseline.json",
        "check.json",
        "conformance.json",
        "domain.json",
        "explain.json",
        "shape.json",
        "usage.json",
        "verify.json",
    ]
    for path in folder.glob("*.json"):
        jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))


# -- report formats ------------------------------------------------------------------------


def test_check_format_sarif(broken: str, tmp_path: Path) -> None:
    result = run("check", broken, str(tmp_path / "missing.onnx"), "--format", "sarif")
    assert result.exit_code == 2  # one model unreadable
    log = json.loads(result.stdout)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (run_,) = log["runs"]
    assert run_["tool"]["driver"]["name"] == "bcast"
    rule_ids = [r["id"] for r in run_["tool"]["driver"]["rules"]]
    first, second = run_["results"]
    assert (first["ruleId"], first["level"]) == ("incompatible", "error")
    assert rule_ids[first["ruleIndex"]] == "incompatible"
    location = first["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"].endswith("broken%20add.onnx")
    assert location["logicalLocations"][0]["name"] == "residual_add"
    assert "64 vs 32" in first["message"]["text"]
    assert second["ruleId"] == "unreadable"


def test_check_format_github(broken: str) -> None:
    result = run("check", broken, "--format", "github")
    assert result.exit_code == 1
    (line,) = result.stdout.splitlines()
    assert re.fullmatch(r"::error file=[^,]+,title=[^:]+::.+", line)
    assert "file=" + broken.replace(",", "%2C").replace(":", "%3A") in line
    assert "title=bcast incompatible%3A residual_add (Add)" in line
    assert "%0A" in line  # the picture, on the lines after the reason


def test_check_format_html_is_one_self_contained_page(broken: str) -> None:
    result = run("check", broken, broken, "--format", "html")
    assert result.exit_code == 1
    page = result.stdout
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<section>") == 2
    assert '<table class="summary">' in page and '<th class="failing">2 ✗</th>' in page
    assert "src=" not in page and "<link" not in page  # nothing loaded from elsewhere


def test_json_alias_and_format_must_agree(broken: str) -> None:
    assert run("check", broken, "--json").stdout == run("check", broken, "--format", "json").stdout
    result = run("check", broken, "--json", "--format", "sarif")
    assert result.exit_code == 2


@pytest.mark.parametrize(("fmt", "start"), [("svg", "<svg"), ("html", "<!DOCTYPE html>")])
def test_explain_exports_the_table_as_a_picture(fmt: str, start: str) -> None:
    result = run("explain", "[2,3]", "[4]", "--format", fmt)
    assert result.exit_code == 1
    assert result.stdout.lstrip().startswith(start)
    assert "3 vs 4" in result.stdout.replace("&#160;", " ")


def test_completion_is_documented_in_the_readme() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "_BCAST_COMPLETE=bash_source bcast" in readme


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["tests/fixtures/real/bert_dynamo.onnx"], id="domain"),
        pytest.param(["tests/fixtures/real/bert_dynamo.onnx", "--dim", "s41=65"], id="outside"),
        pytest.param(["no-such-model.onnx"], id="unreadable"),
        pytest.param(["tests/fixtures/real/vit_hw_torchscript.onnx"], id="boxes"),
        pytest.param(["tests/fixtures/real/gpt2_dynamo.onnx"], id="relations"),
    ],
)
def test_domain_json_follows_its_shipped_schema(args: list[str]) -> None:
    root = Path(__file__).parents[2]
    schema = json.loads((Path(bcast.cli.__file__).parent / "schemas" / "domain.json").read_text())
    result = run("domain", "--json", *[str(root / a) if a.endswith(".onnx") else a for a in args])
    obj = json.loads(result.stdout)
    jsonschema.validate(obj, schema)
    assert result.exit_code in (0, 1, 2)
    if "vit_hw" in args[0]:
        (tied,) = [r for r in obj["domain"]["relations"] if "boxes" in r]
        assert tied["decided_as_set"] and [[32, 39], [[32, 39]]] in tied["boxes"]
