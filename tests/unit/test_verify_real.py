"""``bcast verify`` on the real-model fixtures (tests/fixtures/real, docs/real-models.md).

What is expected comes from the manifest's measured peer verdicts, never from bcast:

- every valid ONNX model that onnxruntime runs (``ort.run`` pass) verifies with exit 0,
  no disagreement and no harness error (a request bcast itself got wrong);
- every mutant whose broadcasting node a runtime rejects by name (the ``ort.session``,
  ``ort.run`` or OpenVINO message names the manifest's node) is run by verify at that
  node, where the runtimes reject it and bcast rejects it too: it is not passed over.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bcast.cli import main

pytest.importorskip("onnxruntime")

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
MANIFEST: dict[str, Any] = json.loads((REAL / "manifest.json").read_text())["files"]
RUNTIME_PEERS = ("ort.session", "ort.run", "ov.read_model", "ov.compile_model", "ov.infer")


def _verdict(entry: dict[str, Any], peer: str) -> str:
    return str(entry["peers"].get(peer, {}).get("verdict", "n/a"))


def _names_the_node(entry: dict[str, Any]) -> bool:
    node = entry["expected"]["node"]
    return any(
        _verdict(entry, p) == "fail" and node in entry["peers"][p].get("message", "")
        for p in RUNTIME_PEERS
    )


VALID_ONNX = sorted(
    name
    for name, e in MANIFEST.items()
    if e["kind"] == "valid" and e["format"] == "onnx" and _verdict(e, "ort.run") == "pass"
)
REJECTED_MUTANTS = sorted(
    name
    for name, e in MANIFEST.items()
    if e["kind"] == "mutant" and e["format"] == "onnx" and _names_the_node(e)
)


def _verify(name: str, *runtimes: str) -> tuple[int, dict[str, Any]]:
    args = ["verify", "--json", str(REAL / name)]
    if runtimes:
        args += ["--runtime", ",".join(runtimes)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def _runtimes(entry: dict[str, Any]) -> tuple[str, ...]:
    """onnxruntime, and openvino where it reads the file (sklearn's ai.onnx.ml: it does not)."""
    if _verdict(entry, "ov.infer") == "pass":
        return ("onnxruntime", "openvino")
    return ("onnxruntime",)


def test_the_manifest_gives_both_groups() -> None:
    assert len(VALID_ONNX) == 20
    assert len(REJECTED_MUTANTS) == 8


@pytest.mark.parametrize("name", VALID_ONNX)
def test_a_valid_model_onnxruntime_runs_verifies_clean(name: str) -> None:
    code, data = _verify(name, *_runtimes(MANIFEST[name]))
    harness = [
        (n["node"], runtime, c["detail"])
        for n in data["nodes"]
        for runtime, c in n["comparisons"].items()
        if c["harness"]
    ]
    assert harness == []
    disagreeing = [
        (n["node"], runtime, c["detail"])
        for n in data["nodes"]
        for runtime, c in n["comparisons"].items()
        if not c["agree"]
    ]
    assert disagreeing == []
    assert code == 0, data["notes"]
    # No runtime rejects a node of a model it runs whole.
    for node in data["nodes"]:
        for runtime in data["runtimes"]:
            assert node["results"][runtime]["error"] is None, (node["node"], runtime)


@pytest.mark.parametrize(
    "name",
    REJECTED_MUTANTS,
)
def test_a_mutant_node_the_runtimes_reject_is_rejected_there_by_every_side(name: str) -> None:
    entry = MANIFEST[name]
    expected = entry["expected"]["node"]
    code, data = _verify(name, *_runtimes(entry))
    (node,) = [n for n in data["nodes"] if n["node"] == expected]
    assert node["results"]["bcast"]["error"] is not None
    for runtime in data["runtimes"]:
        result = node["results"][runtime]
        assert result["error"] is not None, (runtime, result)
        assert result["harness"] is False, (runtime, result["error"])
        assert node["comparisons"][runtime]["agree"] is True  # both reject
    assert data["summary"]["harness_errors"] == 0
    # Every side agrees, and the node fails there: a finding of its own (issue 40).
    assert node["fails_everywhere"] is True
    assert code == 1


def test_bcast_names_gemm_c_and_openvino_keeps_the_shapes() -> None:
    # resnet_torchscript__gemm_c_9: C [9] for (M,N) [batch,10] (manifest: axis 1).
    _, data = _verify("resnet_torchscript__gemm_c_9.onnx")
    (node,) = [n for n in data["nodes"] if n["node"] == "/fc/Gemm"]
    assert "9 vs 10 (C must equal (M,N) or be 1)" in node["results"]["bcast"]["error"]
    openvino = node["results"]["openvino"]["error"]
    assert "Conversion is failed" not in openvino
    assert "f32[9]" in openvino and "Argument shapes are inconsistent" in openvino


HALF = Path(__file__).resolve().parents[1] / "fixtures" / "real_fp16"
HALF_MANIFEST: dict[str, Any] = json.loads((HALF / "manifest.json").read_text())["files"]


@pytest.mark.parametrize("name", sorted(HALF_MANIFEST))
def test_float16_copies_verify_on_the_compiled_float16_kernels(
    name: str, compiled_runs: list[tuple[str, bool]]
) -> None:
    # The float32 TorchScript exports converted to float16 as practitioners do
    # (onnxconverter-common, tools/real_models/half.py). At batch 8 and sequence 64 their
    # element-wise nodes have 16,384 elements or more, which bcast computes with its
    # compiled float16 kernels (waited for, not left to NumPy while they compile). Before,
    # verify reported 2-23 disagreements a model: float16 Gemm rounded twice, and results
    # 1 unit in the last place apart (OpenVINO's Div, both runtimes' LayerNormalization).
    import hashlib

    from bcast import engine
    from bcast.engine import compiled

    path = HALF / name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == HALF_MANIFEST[name]["sha256"]
    dims = ["--dim", "batch=8"] + ([] if name.startswith("resnet") else ["--dim", "seq=64"])
    with engine.settings(compiled_wait=True):
        result = CliRunner().invoke(
            main, ["verify", "--json", str(path), *dims], catch_exceptions=False
        )
    report = json.loads(result.stdout)
    summary = report["summary"]
    assert result.exit_code == 0, summary
    assert summary["disagreements"] == summary["harness_errors"] == summary["skipped"] == 0
    assert summary["compared"] == summary["nodes"]
    halves = [n for n in report["nodes"] if n["results"]["bcast"]["dtype"] == "float16"]
    assert len(halves) >= 5
    if compiled.float16_kernel("add"):  # a CPU with half conversions (F16C, AArch64)
        assert ("add", True) in compiled_runs
