"""Exports where bcast once said "runs" and onnxruntime failed (tests/fixtures/sweep/).

Made by ``tools/real_models/sweep.py`` (the TorchScript exporter, dynamic H and W). The
expected sizes are onnxruntime's: each model is run just inside and just outside every
range ``bcast domain`` prints, and ``check --dim`` must say the same as the run.

- conv_tail: the last Conv is the graph output, its dims the exporter's names
  (``Conv13_dim_2``); they are not the dims (bcast once left that window unchecked).
- convnext: three stages each need a round of ONNX's inference fed with bcast's shapes.
- swin: a window partition's Reshape, its target computed by Shape, Gather and Div.
- swin_padded: Hugging Face Swin's pad to a multiple of the window first, the pads computed
  from the shape (Mod, Sub, and F.pad's Reshape, Slice, Transpose); its mutant pads to a
  multiple of 3 and cuts 4x4 windows.
- classifier: flatten then Linear: the Gemm's inner dim ties H and W to the weight.
- crossattn_dynamo (torch.export): value_info claims a batch of 1 that the inputs do not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bcast

ort = pytest.importorskip("onnxruntime")

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"


def _bcast(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # a pipe: a line per part
    return subprocess.run(
        [sys.executable, "-m", "bcast", *args], capture_output=True, text=True, timeout=300, env=env
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


def _sizes(model: str) -> dict[str, dict[str, object]]:
    done = _bcast("domain", str(SWEEP / model), "--json")
    assert done.returncode == 0, done.stderr
    domain = json.loads(done.stdout)["domain"]
    assert not domain.get("undecided"), domain.get("undecided")
    return {d["name"]: d for d in domain["dims"]} | {"relations": domain.get("relations", [])}


def test_a_window_partition_is_a_relation_decided_at_each_size_as_onnxruntime_runs() -> None:
    """Swin's Reshape to ``H//4 // 4`` windows: its target is computed from Shape and Div."""
    dims = _sizes("swin.onnx")
    # 16*a*b elements into 256*(a//4)*(b//4), a = (H - 4)//4 + 1: a and b multiples of 4
    assert dims["H"]["condition"] == "H >= 16 and H % 16 ∈ {0, 1, 2, 3}", dims["H"]
    assert "/Reshape" in [i["node"] for i in dims["W"]["imposed_by"]]
    assert not dims["relations"]  # each dim's sizes say it all
    report = bcast.check(SWEEP / "swin.onnx")
    for h in (15, 16, 19, 20, 28, 31, 32, 35, 36):
        runs = _runs("swin.onnx", h, 16)
        assert runs is (h % 16 <= 3 and h >= 16), h
        failed = report.domain.first_failure({"N": 1, "H": h, "W": 16})
        assert (failed is None) is runs and (runs or failed.node == "/Reshape"), (h, failed)
    for h, verdict in ((19, "inside the domain"), (20, "fails first at /Reshape (Reshape)")):
        said = _bcast("domain", str(SWEEP / "swin.onnx"), "--dim", "N=1", "--dim", f"H={h}",
                      "--dim", "W=16")  # fmt: skip
        assert verdict in said.stdout.strip().splitlines()[-1], said.stdout


def test_the_export_lines_say_they_hold_only_what_was_decided(tmp_path: Path) -> None:
    """Past a NonZero nothing is decided: the torch.export and OpenVINO lines say so."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("NonZero", ["x"], ["i"]),
        helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["f", "y"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "m"]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "nonzero.onnx"
    path.write_bytes(model.SerializeToString())
    done = _bcast("domain", str(path))
    assert "not decided beyond node NonZero_0 (NonZero)" in done.stdout, done.stdout
    assert "torch.export (only what was decided: not decided beyond 2 nodes, above):" in (
        done.stdout
    )
    assert "OpenVINO (only what was decided: not decided beyond 2 nodes, above):" in done.stdout


def test_a_graph_output_that_only_has_the_declaration_s_names_is_not_decided() -> None:
    """Where bcast cannot compute a declared output, its names do not pass for dims."""
    from bcast import Shape
    from bcast.models import Graph, Node
    from bcast.models.lost_dims import mark_lost

    g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[N,8,H]"), "w": Shape((8, 8, 3))})
    g.initializers.add("w")
    conv = Node("c", "Conv", ("x", "w"), ("y",), output_shapes=(Shape.parse("[N,8,Conv_dim_2]"),))
    mean = Node("m", "ReduceMean", ("x",), ("z",), output_shapes=(Shape.parse("[N,red_dim_1]"),))
    g.nodes += [conv, mean]
    mark_lost(g)  # an intermediate value's names: kept as the file says
    assert not g.nodes[0].unmodelled
    mark_lost(g, claimed={"y", "z"})  # graph outputs: claims, not computed
    assert g.nodes[0].unmodelled.startswith("output dim not computed")  # its window: unsure
    assert not g.nodes[1].unmodelled  # nothing is read off a ReduceMean's output


def test_a_window_partition_padded_first_runs_for_every_size_as_onnxruntime_does() -> None:
    """The pads, ``(4 - h % 4) % 4``, are computed from the shape: the Pad is sized."""
    dims = _sizes("swin_padded.onnx")
    assert dims["H"]["intervals"] == [[4, None]] and dims["W"]["intervals"] == [[4, None]]
    assert not dims["relations"] and dims["H"].get("congruence") is None
    for h, w in [(3, 16), (16, 3)]:  # just outside: the patch Conv's window
        assert not _runs("swin_padded.onnx", h, w), (h, w)
    for h, w in [(4, 4), (5, 23), (20, 16), (37, 65), (65, 4)]:  # inside, any residue
        assert _runs("swin_padded.onnx", h, w), (h, w)
        checked = _bcast("check", str(SWEEP / "swin_padded.onnx"), "--dim", f"H={h}",
                         "--dim", f"W={w}", "--dim", "N=1")  # fmt: skip
        assert checked.returncode == 0, checked.stdout


def test_the_padded_mutant_runs_where_isl_says_as_onnxruntime_does() -> None:
    """Padded to a multiple of 3, cut in 4x4 windows: ``(H//4) % 12`` in {0, 10, 11}."""
    dims = _sizes("swin_padded_mutant.onnx")
    assert dims["H"]["condition"] == (
        "H >= 40 and H % 48 ∈ {0, 1, 2, 3, 40, 41, 42, 43, 44, 45, 46, 47}"
    ), dims["H"]
    report = bcast.check(SWEEP / "swin_padded_mutant.onnx")
    for h in (39, 40, 47, 48, 51, 52, 87, 88, 95, 96, 99, 100):  # each edge, inside and out
        runs = _runs("swin_padded_mutant.onnx", h, 40)
        assert runs is (h >= 40 and (h % 48 <= 3 or h % 48 >= 40)), h
        failed = report.domain.first_failure({"N": 1, "H": h, "W": 40})
        assert (failed is None) is runs, (h, failed)
    # a range: the first size it fails at, with the node
    checked = _bcast("check", str(SWEEP / "swin_padded_mutant.onnx"), "--dim", "H=40..",
                     "--dim", "W=40", "--dim", "N=1")  # fmt: skip
    assert checked.returncode == 1 and "fails at H=52" in checked.stdout, checked.stdout
    assert "/Reshape_2 (Reshape)" in checked.stdout
    # without sizes, a range: the first size it fails at, with the node
    checked = _bcast("check", str(SWEEP / "swin_padded_mutant.onnx"), "--dim", "H=40..",
                     "--dim", "W=40", "--dim", "N=1")  # fmt: skip
    assert checked.returncode == 1 and "fails at H=52" in checked.stdout, checked.stdout
    assert "/Reshape_2 (Reshape)" in checked.stdout


def test_a_classifier_s_gemm_ties_h_and_w_to_its_weight_as_onnxruntime_runs() -> None:
    """Flatten then Linear: the Gemm's K, 4*h*w of the pooled map, must be the weight's 256."""
    done = _bcast("domain", str(SWEEP / "classifier.onnx"), "--json")
    assert done.returncode == 0, done.stderr
    domain = json.loads(done.stdout)["domain"]
    assert not domain.get("undecided")
    (tie,) = domain["relations"]
    assert tie["imposed_by"][0]["node"] == "/fc/Gemm" and tie["decided_as_set"]
    boxes = [((h0, h1), (w0, w1)) for (h0, h1), ((w0, w1),) in tie["boxes"]]
    assert ((31, 34), (31, 34)) in boxes and len(boxes) == 7

    def inside(h: int, w: int) -> bool:
        return any(a <= h <= b and c <= w <= d for (a, b), (c, d) in boxes)

    report = bcast.check(SWEEP / "classifier.onnx")
    for (h0, h1), (w0, w1) in boxes:  # each corner, and one past it on each side
        for h, w in [(h0, w0), (h1, w1), (h0 - 1, w0), (h1 + 1, w1), (h0, w0 - 1), (h1, w1 + 1)]:
            if h < 3 or w < 3:  # a pool window past its input: onnxruntime runs it (see
                continue  # docs/peer-differences.md), OpenVINO and the ONNX text do not
            runs = _runs("classifier.onnx", h, w)
            assert runs is inside(h, w), (h, w)
            assert (report.domain.first_failure({"N": 1, "H": h, "W": w}) is None) is runs, (h, w)


def test_a_dynamo_export_s_claimed_batch_of_1_gives_way_to_what_the_inputs_give() -> None:
    """nn.MultiheadAttention by torch.export: its value_info claims a batch of 1 inside."""
    import onnx

    model = onnx.load(str(SWEEP / "crossattn_dynamo.onnx"))
    claimed = {v.name: v for v in model.graph.value_info}["view_1"]
    assert [d.dim_value for d in claimed.type.tensor_type.shape.dim][1:] == [1, 2, 16]
    report = bcast.check(SWEEP / "crossattn_dynamo.onnx")
    assert not report.findings and not report.domain.undecided
    batch, h, w = (d.name for d in report.domain.dims)
    assert report.domain.dim(batch).text == "any"
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(
        str(SWEEP / "crossattn_dynamo.onnx"), options, providers=["CPUExecutionProvider"]
    )
    for n, rows, cols in [(1, 16, 16), (2, 16, 16), (3, 13, 21), (2, 4, 4), (2, 3, 16)]:
        x = np.random.default_rng(0).random((n, 3, rows, cols), dtype=np.float32)
        try:
            session.run(None, {"x": x})
            runs = True
        except Exception:  # onnxruntime's own failure at that size
            runs = False
        assert runs is (rows >= 4), (n, rows, cols)
        failed = report.domain.first_failure({batch: n, h: rows, w: cols})
        assert (failed is None) is runs, (n, rows, cols, failed)
