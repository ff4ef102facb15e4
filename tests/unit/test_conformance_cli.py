"""The ``bcast conformance`` command: JSON against its schema, formats, exit codes, --out.

The runtimes are the deliberately wrong plug-ins of `conformance_fakes` and, for one real
run, onnxruntime with the ONNX reference evaluator on a subset where they agree.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result

from bcast.cli import main
from bcast.cli._output import load_schema

sys.path.insert(0, str(Path(__file__).parent))
import conformance_fakes

plugins = conformance_fakes.plugins  # the fixtures, shared with the other conformance tests
registered = conformance_fakes.registered


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["conformance", *args], env={"COLUMNS": "80"})


def test_json_is_one_object_of_the_schema_and_defects_exit_1(registered: Path) -> None:
    result = run("--runtime", "swapper,ghost", "--ops", "Sub", "--limit", "12", "--json")
    assert result.exit_code == 1
    obj = json.loads(result.stdout)
    jsonschema.validate(obj, load_schema("conformance"))
    assert obj["schema_version"] == 1 and obj["error"] is None
    ghost = next(r for r in obj["runtimes"] if r["name"] == "ghost")
    assert ghost["available"] is False and ghost["reason"]
    finding = next(f for f in obj["findings"] if f["verdict"] == "wrong_value")
    assert finding["runtime"] == "swapper" and finding["op"] == "Sub" and finding["defect"]
    assert finding["dtypes"] and finding["shapes"] and finding["repro"] is None
    assert "bcast conformance" not in result.stderr  # --json: no progress


def test_no_defect_exits_0_and_spec_undefined_does_not_count(registered: Path) -> None:
    result = run("--runtime", "honest", "--ops", "Div", "--json")
    obj = json.loads(result.stdout)
    jsonschema.validate(obj, load_schema("conformance"))
    assert obj["summary"]["verdicts"]["spec_undefined"] > 0
    assert {f["verdict"] for f in obj["findings"]} == {"spec_undefined"}
    assert all(f["spec"] and not f["defect"] for f in obj["findings"])
    assert result.exit_code == 0


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--runtime", "no-such-runtime"], id="unknown-runtime"),
        pytest.param(["--ops", "Conv"], id="unknown-op"),
        pytest.param(["--runtime", ","], id="empty-runtime-list"),
        pytest.param(["--format", "text", "--json"], id="json-and-text"),
        pytest.param(["--format", "json"], id="json-is-not-a-format"),  # DESIGN: --json
    ],
)
def test_bad_usage_exits_2_with_one_line_and_the_json_error(args: list[str]) -> None:
    result = run(*args, "--json")
    assert result.exit_code == 2
    obj = json.loads(result.stdout)
    jsonschema.validate(obj, load_schema("conformance"))
    assert obj["error"]["kind"] == "usage"
    assert len(result.stderr.strip().splitlines()) == 1


def test_text_card_fits_80_columns_and_out_writes_repros_and_suite(
    registered: Path, tmp_path: Path
) -> None:
    result = run("--runtime", "shaper", "--ops", "Sub", "--limit", "10", "--out", str(tmp_path))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "card: shaper" in result.stdout and "wrong_shape (defect)" in result.stdout
    assert "bcast conformance: ran" in result.stderr  # progress
    repros = sorted((tmp_path / "repros").iterdir())
    assert repros and (repros[0] / "model.onnx").exists()
    assert (repros[0] / "test_data_set_0" / "output_0.pb").exists()
    assert json.loads((repros[0] / "repro.json").read_text())["verdict"] == "wrong_shape"
    assert f"repro: {repros[0]}" in result.stdout.replace("\n      ", "")
    assert any((tmp_path / "suite").iterdir()) and any((tmp_path / "suite-must-refuse").iterdir())


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_markdown_and_html_reports(registered: Path, fmt: str) -> None:
    result = run("--runtime", "lenient", "--ops", "Sub", "--limit", "10", "--format", fmt)
    assert result.exit_code == 1
    if fmt == "markdown":
        assert "| op | agree | wrong_value |" in result.stdout
        assert "| lenient | Sub | accepts_invalid |" in result.stdout
    else:
        assert result.stdout.lstrip().startswith("<!DOCTYPE html>")
        assert "accepts_invalid" in result.stdout


def test_onnxruntime_and_the_reference_agree_with_bcast_on_a_small_real_run() -> None:
    # operators both runtimes implement for every type the schemas allow
    result = run(
        "--runtime", "onnxruntime,reference", "--ops", "BitShift,BitwiseAnd,And,Xor",
        "--limit", "25", "--json",
    )  # fmt: skip
    obj = json.loads(result.stdout)
    assert [r["name"] for r in obj["runtimes"]] == ["onnxruntime", "reference"]
    assert all(r["version"] for r in obj["runtimes"])
    verdicts = obj["summary"]["verdicts"]
    assert verdicts["agree"] > 100
    assert obj["findings"] == [], obj["findings"]
    assert result.exit_code == 0


def test_an_interrupt_ends_the_run_and_its_workers_at_once(registered: Path) -> None:
    import signal
    import subprocess
    import time

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(registered), *sys.path])}
    command = [sys.executable, "-m", "bcast", "conformance", "--runtime", "sleeper"]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        time.sleep(6)  # the workers are running their first, minute-long case
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert time.monotonic() - start < 10  # not after the batches' minutes


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_out_that_cannot_take_the_files_is_refused_before_the_run(
    registered: Path, tmp_path: Path, where: str
) -> None:
    target = tmp_path / "report"
    if where == "a file":
        target.write_text("x")
    else:
        (tmp_path / "f").write_text("x")
        target = tmp_path / "f" / "report"
    result = run("--runtime", "shaper", "--ops", "Sub", "--limit", "10", "--out", str(target),
                 "--json")  # fmt: skip
    assert result.exit_code == 2
    assert "ran" not in result.stderr  # refused before any case ran
    assert len(result.stderr.strip().splitlines()) == 1 and "--out" in result.stderr
    assert json.loads(result.stdout)["error"]["kind"] == "usage"
