"""The CI recipes run as written (issue 40): the pre-commit hook and the Actions workflows.

The hook's entry from ``.pre-commit-hooks.yaml`` runs as pre-commit runs it (a process, the
files of a commit appended) on real models and on an XML file that is not an IR. The
workflows are read from ``docs/ci.md``: each ``bcast`` command they run is run here on a
folder of real models, and its output is what the next step reads.
"""

from __future__ import annotations

import glob
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bcast.cli import main

yaml = pytest.importorskip("yaml")
pytest.importorskip("onnx")
pytest.importorskip("openvino")

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real"
POM = '<?xml version="1.0" encoding="UTF-8"?>\n<!-- a Maven build -->\n<project></project>\n'


def _hook() -> dict[str, Any]:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "bcast-check"]
    return hook


def _run_entry(entry: str, files: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = shlex.split(entry)
    assert command[0] == "bcast"  # the console script; run it with this interpreter
    return subprocess.run(
        [sys.executable, "-m", "bcast", *command[1:], *files],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def test_the_hook_checks_models_and_skips_an_xml_that_is_not_an_ir(tmp_path: Path) -> None:
    hook = _hook()
    files = re.compile(hook["files"])
    assert files.search("models/bert.onnx") and files.search("models/bert.xml")
    assert not files.search("models/bert.bin") and not files.search("model.onnx.json")
    (tmp_path / "pom.xml").write_text(POM)
    for name in ("resnet_openvino.xml", "resnet_openvino.bin", "resnet_torchscript.onnx"):
        shutil.copy(REAL / name, tmp_path / name)
    # pre-commit passes the staged files that match: the IR's .xml, the ONNX model, the pom.
    given = ["resnet_openvino.xml", "resnet_torchscript.onnx", "pom.xml"]
    assert all(files.search(f) for f in given)
    done = _run_entry(hook["entry"], given, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "pom.xml: skipped: its root element is <project>" in done.stderr
    assert "2 models" in done.stdout and "unreadable" not in done.stdout
    alone = _run_entry(hook["entry"], ["pom.xml"], tmp_path)
    assert alone.returncode == 0 and "skipped" in alone.stderr
    # Without the hook's option, the same pom is an unreadable model (exit 2).
    plain = _run_entry("bcast check", ["pom.xml"], tmp_path)
    assert plain.returncode == 2
    # The configuration the docs show for it names this hook.
    text = (ROOT / "docs" / "ci.md").read_text()
    configs = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)]
    (config,) = [c for c in configs if isinstance(c, dict) and "repos" in c]
    assert [h["id"] for h in config["repos"][0]["hooks"]] == [hook["id"]]


def test_the_hook_fails_a_commit_with_a_broken_model(tmp_path: Path) -> None:
    broken = "bert_torchscript__dense_bias_31.onnx"  # an injected bug: a bias of 31, not 32
    shutil.copy(REAL / broken, tmp_path / broken)
    (tmp_path / "pom.xml").write_text(POM)
    done = _run_entry(_hook()["entry"], [broken, "pom.xml"], tmp_path)
    assert done.returncode == 1
    assert "error[incompatible]" in done.stdout


def _workflows() -> list[dict[str, Any]]:
    text = (ROOT / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
    docs = [yaml.safe_load(b) for b in blocks]
    return [d for d in docs if isinstance(d, dict) and "jobs" in d]


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    (job,) = workflow["jobs"].values()
    return list(job["steps"])


def _run_step(command: str, models: Path) -> tuple[Any, str | None]:
    """Run a workflow's ``bcast`` command as the shell would: globs, then ``> FILE``."""
    line, _, target = command.partition(">")
    words = shlex.split(line)
    assert words[0] == "bcast"
    args: list[str] = []
    for word in words[1:]:
        args.extend(sorted(glob.glob(str(models.parent / word))) if "*" in word else [word])
    result = CliRunner().invoke(main, args)
    return result, target.strip() or None


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("resnet_torchscript.onnx", "bert_torchscript__dense_bias_31.onnx"):
        shutil.copy(REAL / name, folder / name)
    return folder


def test_the_sarif_workflow_in_the_docs_uploads_what_bcast_writes(models: Path) -> None:
    sarif, _ = _workflows()
    assert sarif["permissions"]["security-events"] == "write"
    steps = _steps(sarif)
    (check,) = [s for s in steps if "bcast check" in s.get("run", "")]
    (upload,) = [
        s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif")
    ]
    assert upload["if"] == "always()" and check["continue-on-error"] is True
    result, target = _run_step(check["run"], models)
    assert result.exit_code == 1  # the broken model: the last step fails the job
    assert target == upload["with"]["sarif_file"]
    log = json.loads(result.stdout)
    assert log["version"] == "2.1.0"
    results = log["runs"][0]["results"]
    assert results and all("partialFingerprints" in r for r in results)
    (last,) = [s for s in steps if s.get("if") == f"steps.{check['id']}.outcome == 'failure'"]
    assert last["run"] == "exit 1"


def test_the_annotations_workflow_in_the_docs_prints_workflow_commands(models: Path) -> None:
    _, annotations = _workflows()
    (step,) = [s for s in _steps(annotations) if "bcast check" in s.get("run", "")]
    result, target = _run_step(step["run"], models)
    assert target is None and result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("::") for line in lines)
    assert any(line.startswith("::error file=") for line in lines)
