"""Exports where bcast once said "runs" and onnxruntime failed (tests/fixtures/sweep/).

Made by ``tools/real_models/sweep.py`` (the TorchScript exporter, dynamic H and W). The
expected sizes are onnxruntime's: each model is run just inside and just outside every
range ``bcast domain`` prints, and ``check --dim`` must say the same as the run.

- conv_tail: the last Conv is the graph output, its dims the exporter's names
  (``Conv13_dim_2``); they are not the dims (bcast once left that window unchecked).
- convnext: three stages each need a round of ONNX's inference fed with bcast's shapes.
- swin: a reshape target bcast does not evaluate: said, and its export lines say so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"


def _bcast(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bcast", *args], capture_output=True, text=True, timeout=300
    )


def _runs(model: str, h: int, w: int) -> bool:
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(str(SWEEP / model), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((1, 3, h, w), dtype=np.float32)
    try:
        session.run(None, {"x": x})
    except Exception:  # onnxruntime's own failure at that size
        return False
    return True


@pytest.mark.parametrize("model", ["conv_tail.onnx", "convnext.onnx"])
def test_the_domain_is_the_sizes_onnxruntime_runs(model: str) -> None:
    done = _bcast("domain", str(SWEEP / model), "--json")
    assert done.returncode == 0, done.stderr
    dims = {d["name"]: d for d in json.loads(done.stdout)["domain"]["dims"]}
    assert dims["H"]["intervals"] == [[16, None]] and dims["W"]["intervals"] == [[16, None]]
    assert not json.loads(done.stdout)["domain"].get("undecided")
    assert "/Conv" in dims["H"]["imposed_by"][-1]["node"]
    for h, w in [(15, 64), (64, 15), (8, 64)]:  # just outside: onnxruntime fails
        assert not _runs(model, h, w), (h, w)
        checked = _bcast("check", str(SWEEP / model), "--dim", f"H={h}", "--dim", f"W={w}")
        assert checked.returncode == 1 and "Conv" in checked.stdout, checked.stdout
    for h, w in [(16, 16), (16, 64), (17, 23)]:  # just inside
        assert _runs(model, h, w), (h, w)
        checked = _bcast("check", str(SWEEP / model), "--dim", f"H={h}", "--dim", f"W={w}")
        assert checked.returncode == 0, checked.stdout


def test_what_is_not_decided_is_said_and_the_export_lines_say_they_are_partial() -> None:
    done = _bcast("domain", str(SWEEP / "swin.onnx"))
    assert done.returncode == 0, done.stderr
    assert "not decided beyond node /Reshape (Reshape)" in done.stdout
    assert "torch.export (only what was decided: not decided beyond" in done.stdout
    assert "OpenVINO (only what was decided" in done.stdout
    # H from 4 is all that was decided; the window partition (H//4 a multiple of 4) is not:
    assert _runs("swin.onnx", 16, 16) and not _runs("swin.onnx", 20, 16)
    inside = _bcast("domain", str(SWEEP / "swin.onnx"), "--dim", "H=20", "--dim", "W=16")
    assert "not decided" in inside.stdout, inside.stdout  # never a bare "inside the domain"


def test_a_graph_output_that_only_has_the_declaration_s_names_is_not_decided() -> None:
    """Where bcast cannot compute a declared output, its names do not pass for dims."""
    from bcast import Shape
    from bcast.models import Graph, Node
    from bcast.models.lost_dims import mark_lost

    g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[N,8]")})
    stft = Node("stft", "STFT", ("x",), ("y",), output_shapes=(Shape.parse("[N,STFT_dim_1]"),))
    g.nodes.append(stft)
    mark_lost(g)  # an intermediate value's names: kept as the file says
    assert not g.nodes[0].unmodelled
    mark_lost(g, claimed={"y"})  # the graph's output: a claim, not computed
    assert g.nodes[0].unmodelled.startswith("output dim not computed")
