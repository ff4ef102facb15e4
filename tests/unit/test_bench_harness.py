"""The benchmark harness logic that needs no clock: medians, ratios, bandwidth shares, the
correctness gate and the Markdown rendering. No assertion here depends on a measured time."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str, filename: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


X = "\u00d7"  # multiplication sign
H = _load("bcast_bench_harness", "_harness.py")
R = _load("bcast_bench_render", "render.py")


def _case(bandwidth_bound: bool = True):
    case = H.CaseResult(
        name="add_fake",
        title="add (8,4)+(4,)",
        op="add",
        input_shapes=[[8, 4], [4]],
        output_shape=[8, 4],
        dtype="float32",
        bytes_moved=1_000_000_000,
        bandwidth_bound=bandwidth_bound,
    )
    case.peers = [
        H.PeerResult("fast", "NumPy", samples_s=[0.5, 0.1, 0.2]),
        H.PeerResult("slow", "PyTorch", samples_s=[0.4, 0.8, 0.4, 0.6]),
        H.PeerResult("broken", "numexpr", status="wrong", note="3 of 32 elements differ"),
        H.PeerResult("absent", "bcast", status="skipped", note="not installed"),
    ]
    return case


def test_median() -> None:
    assert H.median([3.0, 1.0, 2.0]) == 2.0
    assert H.median([4.0, 1.0, 2.0, 3.0]) == 2.5
    with pytest.raises(ValueError):
        H.median([])


def test_summarize_ratios_and_stream_fraction() -> None:
    case = H.summarize(_case(), stream_gbps=10.0)
    fast, slow, broken, absent = case.peers
    assert fast.median_s == pytest.approx(0.2)
    assert fast.min_s == pytest.approx(0.1)
    assert slow.median_s == pytest.approx(0.5)
    assert fast.ratio_to_fastest == pytest.approx(1.0)
    assert slow.ratio_to_fastest == pytest.approx(2.5)
    assert fast.gbps == pytest.approx(5.0)  # 1 GB in 0.2 s
    assert fast.fraction_of_stream == pytest.approx(0.5)
    assert slow.fraction_of_stream == pytest.approx(0.2)
    for p in (broken, absent):
        assert p.median_s is None and p.ratio_to_fastest is None and p.gbps is None


def test_summarize_per_call_case_has_no_bandwidth() -> None:
    case = H.summarize(_case(bandwidth_bound=False), stream_gbps=10.0)
    assert case.peers[1].ratio_to_fastest == pytest.approx(2.5)
    assert case.peers[0].gbps is None and case.peers[0].fraction_of_stream is None


def test_bytes_moved_counts_broadcast_operands_once() -> None:
    a = np.zeros((64, 1024), np.float32)
    b = np.zeros((1024,), np.float32)
    assert H.bytes_moved([a, b], (64, 1024), 4) == a.nbytes + b.nbytes + 64 * 1024 * 4


def test_correctness_gate_catches_wrong_peers() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones(4, np.float32)
    expected = a + b

    def boom() -> np.ndarray:
        raise RuntimeError("kernel exploded")

    wrong_value = expected.copy()
    wrong_value[1, 2] += 1
    peers = [
        H.Peer("right", "NumPy", lambda: np.add(a, b)),
        H.Peer("off by one", "X", lambda: wrong_value),
        H.Peer("float64", "X", lambda: (a + b).astype(np.float64)),
        H.Peer("no broadcast", "X", lambda: a),
        H.Peer("transposed", "X", lambda: expected.T),
        H.Peer("raises", "X", boom),
        H.Peer("missing", "X", None, skip="library not installed"),
        H.Peer("within tolerance", "X", lambda: expected * np.float32(1 + 1e-7)),
    ]
    res = {r.name: r for r in H.check_peers(peers, expected, rtol=1e-6)}
    assert res["right"].status == "ok"
    assert res["within tolerance"].status == "ok"
    assert res["off by one"].status == "wrong" and "1 of 12" in res["off by one"].note
    assert res["float64"].status == "wrong" and "dtype" in res["float64"].note
    assert res["transposed"].status == "wrong" and "shape" in res["transposed"].note
    assert res["no broadcast"].status == "wrong"
    assert res["raises"].status == "error" and "kernel exploded" in res["raises"].note
    assert res["missing"].status == "skipped" and res["missing"].note == "library not installed"


def test_interleaving_visits_every_peer_every_round() -> None:
    calls: list[str] = []
    fns = {n: (lambda n=n: calls.append(n)) for n in ["a", "b", "c"]}
    probes: list[int] = []
    samples, numbers = H.time_interleaved(
        fns, samples=4, min_sample_s=0.0, probe=lambda: probes.append(1)
    )
    assert {k: len(v) for k, v in samples.items()} == {"a": 4, "b": 4, "c": 4}
    assert numbers == {"a": 1, "b": 1, "c": 1}
    assert len(probes) == 4
    timed = calls[-12:]  # after calibration: 4 rounds of 3, each round a permutation
    for r in range(4):
        assert sorted(timed[3 * r : 3 * r + 3]) == ["a", "b", "c"]


def test_background_cores() -> None:
    # 2 CPUs, 200 jiffies elapsed in all, 150 busy, 100 of them ours -> 0.5 busy cores elsewhere
    assert H.background_cores(150, 200, 100, ncpu_total=2) == pytest.approx(0.5)
    assert H.background_cores(10, 200, 50, ncpu_total=2) == 0.0
    assert H.background_cores(1, 0, 0, ncpu_total=2) is None


def test_markdown_rendering_of_a_fake_result() -> None:
    case = H.summarize(_case(), stream_gbps=10.0)
    case.stream = {"gbps": 10.0, "copy_gbps": 9.0, "add_gbps": 10.0, "samples": 3}
    case.load = {"background_cores_before": 0.1, "background_cores_during": 0.2, "quiet": True}
    tiny = H.summarize(_case(bandwidth_bound=False), None)
    tiny.name = "tiny_fake"
    data = {
        "generated": "2026-01-01T00:00:00+00:00",
        "quick": True,
        "threads": 2,
        "machine": {"cpu": "Fake CPU", "cpus": 2, "memory_gib": 8, "versions": {"numpy": "2"}},
        "cases": [case.to_json(), tiny.to_json()],
    }
    md = R.render_markdown(data, {"cases": [{"case": "rank 4", "median_s": 2e-6}]}, "b.png")
    assert "| peer | `add_fake` | `tiny_fake` |" in md
    assert "| fast | **1.00X** · 50% | **1.00X** · 200.00 ms |".replace("X", X) in md
    assert "| slow | 2.50X · 20% | 2.50X · 500.00 ms |".replace("X", X) in md
    assert "| broken | **wrong** | **wrong** |" in md
    assert "| absent | skipped | skipped |" in md
    assert "| *STREAM, GB/s* | 10.0 | — |" in md
    assert "![Share of STREAM bandwidth per peer and case](b.png)" in md
    assert "3 of 32 elements differ" in md
    assert "## Shape inference" in md and "| rank 4 | 2.0 µs |" in md
    assert "(`--quick`)" in md


def test_a_run_names_the_commit_it_measured() -> None:
    data = {
        "generated": "2026-01-01T00:00:00+00:00",
        "threads": 2,
        "machine": {"cpu": "Fake CPU", "versions": {"bcast": "0.1.0", "numpy": "2"}},
        "cases": [H.summarize(_case(), stream_gbps=10.0).to_json()],
    }
    assert "bcast 0.1.0, numpy 2." in R.render_markdown(data, None, None)
    data["machine"]["commit"] = "abc1234+changes"
    assert "bcast 0.1.0 (commit abc1234+changes), numpy 2." in R.render_markdown(data, None, None)


def test_the_source_commit_is_git_head_with_a_mark_for_changes() -> None:
    found = H.source_commit()
    if not (BENCH.parent / ".git").exists():  # an unpacked sdist: nothing to name
        assert found is None
        return
    head = subprocess.run(
        ["git", "-C", str(BENCH.parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found in (head, head + "+changes")


def test_shapes_records_get_ratio_to_fastest_within_case() -> None:
    data = {
        "schema": "bcast-bench-shapes/1",
        "records": [
            {"case": "static", "peer": "bcast", "status": "ok", "us_per_call": 2.0},
            {"case": "static", "peer": "numpy", "status": "ok", "us_per_call": 1.0},
            {"case": "partial", "peer": "bcast (text)", "status": "ok", "us_per_call": 8.0},
            {"case": "static", "peer": "ONNX", "status": "skipped", "us_per_call": None},
        ],
    }
    ratios = [r["ratio_to_fastest"] for r in R.shapes_records(data)]
    assert ratios == [pytest.approx(2.0), pytest.approx(1.0), pytest.approx(1.0), None]
    md = "\n".join(R.shapes_markdown(data))
    assert "| `static` | bcast | 2.0 µs |  | 2.00X |".replace("X", X) in md
    assert "| `static` | ONNX | skipped |" in md


def test_the_size_sweep_heads_its_columns_with_plain_sizes() -> None:
    # the outer add's sizes are squares, a little under the nominal ones: no exponents
    peer = {"name": "bcast", "family": "bcast", "status": "ok", "ratio_to_fastest": 1.0}
    sweep = [
        {"family": "outer", "dtype": "float64", "output_bytes": size, "peers": [peer]}
        for size in (90 * 90 * 8, 362 * 362 * 8, 11585 * 11585 * 8)
    ]
    text = R.render_markdown(None, None, None, {"sweep": sweep}, None)
    assert "| peer | 63.3 KiB | 1024 KiB | 1024 MiB |" in text


def test_the_size_sweep_renders_ratios_by_size_and_the_first_call() -> None:
    sizes = {
        "quick": True,
        "families": {"bias2d": "(n,64)+(64,)"},
        "sweep": [
            {"family": "bias2d", "dtype": "float32", "output_bytes": 65536, "peers": [
                {"name": "bcast out=", "family": "bcast", "status": "ok", "ratio_to_fastest": 1.0},
                {"name": "torch out=", "family": "PyTorch", "status": "ok", "ratio_to_fastest": 2.5},  # noqa: E501
            ]},
            {"family": "bias2d", "dtype": "float32", "output_bytes": 1 << 30, "skipped": "memory"},
        ],
        "first_call": [
            {"op": "add", "mode": "background", "cache": "empty", "first_s": 0.03,
             "numpy_first_s": 0.02, "ratio_to_numpy": 1.5, "second_s": 0.02,
             "ready_after_s": 3.2, "runs": 1},
        ],
    }  # fmt: skip
    text = R.render_markdown(None, None, None, sizes, "sizes.png")
    assert (
        "`--quick`" in text and "![Time over the fastest peer's, by output size](sizes.png)" in text
    )
    assert f"| bcast out= | **1.00{X}** | skipped (memory) |" in text
    assert f"| torch out= | 2.50{X} | skipped (memory) |" in text
    assert (
        f"| add | background | empty | 30.0 ms | 20.0 ms | 1.50{X} | 20.0 ms | 3.20 s | 1 |" in text
    )


def test_check_models_bench_times_both_processes_and_writes_its_summary(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    model = Path(__file__).parents[1] / "fixtures" / "real" / "sklearn_mlp_skl2onnx.onnx"
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_check_models.py"), str(model), "--repeat", "1",
         "--json", str(out)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    (row,) = result["rows"]
    assert row["peer"] == "onnxruntime session" and row["exit"] == {"bcast": 0, "peer": 0}
    assert row["bcast_s"] > 0 and row["peer_s"] > 0
    assert abs(result["summary"]["median_ratio"] - row["bcast_s"] / row["peer_s"]) < 0.01
    assert "| bcast / peer |" in done.stdout


def test_the_check_section_says_whether_the_targets_are_met() -> None:
    rows = [
        {"model": "a.onnx", "peer": "onnxruntime session", "bcast_s": 0.3, "peer_s": 0.1,
         "ratio": 3.0},
        {"model": "b.xml", "peer": "openvino compile", "bcast_s": 0.2, "peer_s": 0.4,
         "ratio": 0.5},
    ]  # fmt: skip
    summary = {"models": 2, "repeat": 3, "median_ratio": 1.75, "worst_ratio": 3.0,
               "worst_model": "a.onnx"}  # fmt: skip
    large = {"nodes": 30000, "repeat": 3, "rows": [{"name": "bcast.check", "seconds": 1.5}]}
    text = R.render_markdown(None, None, None, check={"models": {"rows": rows, "summary": summary},
                                                      "large": large})  # fmt: skip
    assert "median ratio 1.75, worst 3.00" in text and "**not met**" in text
    assert "| `b.xml` | openvino compile | 0.200 s | 0.400 s | 0.50 |" in text
    assert "30,000-node" in text and "under 2 s, **met**" in text


T = _load("bcast_bench_render_targets", "render_targets.py")


def test_the_targets_say_which_peer_was_faster() -> None:
    def peer(name: str, family: str, seconds: float) -> dict[str, object]:
        return {"name": name, "family": family, "status": "ok", "median_s": seconds}

    sizes = {"sweep": [
        {"family": "bias2d", "dtype": "float32", "output_bytes": 64 << 10, "peers": [
            peer("bcast", "bcast", 1e-6), peer("bcast out=", "bcast", 2e-6),
            peer("torch out=", "PyTorch", 2.5e-6), peer("numpy", "NumPy", 9e-6)]},
        {"family": "bias2d", "dtype": "float64", "output_bytes": 1 << 20, "peers": [
            peer("bcast out=", "bcast", 4e-6), peer("openvino", "OpenVINO", 3e-6)]},
        {"family": "outer", "dtype": "float32", "output_bytes": 1 << 20, "peers": [
            peer("bcast out=", "bcast", 4e-6), peer("torch", "PyTorch", 1e-6)]},
    ]}  # fmt: skip
    ops = {"cases": [{"name": "tiny", "peers": [peer("bcast", "bcast", 2e-7),
                                                peer("numpy", "NumPy", 5e-7)]}]}  # fmt: skip
    shapes = {"records": [
        {"case": "static", "peer": "bcast", "status": "ok", "us_per_call": 0.5},
        {"case": "static", "peer": "numpy", "status": "ok", "us_per_call": 1.25},
    ]}  # fmt: skip
    rows = list(T.rows(ops, sizes, shapes))
    assert [(r[1], round(r[2], 3), r[4]) for r in rows] == [
        ("torch out=", 1.25, True),  # bcast itself (1 us) is not a peer
        ("openvino", 0.75, False),
        ("numpy", 0.4, True),
        ("numpy", 2.5, False),  # broadcast_shapes: 2.5x NumPy, the target is 3
    ]  # the outer add is not a target row
    text = "\n".join(T.markdown(ops, sizes, shapes))
    assert "**2 of 4 met**" in text and "float64, 1 MiB (0.75)" in text
    assert T.markdown(None, None, None) == []
