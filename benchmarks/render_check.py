"""Render the ``bcast check`` benchmarks: each model against the runtime's own start.

Called by ``render.py`` (``render(..., check=...)``) with ``run_all.py``'s ``check`` part:
``models`` is ``bench_check_models.py``'s JSON, ``large`` is ``bench_check.py``'s.
"""

from __future__ import annotations

from typing import Any

TARGET_MEDIAN = 1.0  # issue 37 item 6: check costs no more than the runtime's session
TARGET_WORST = 2.0
TARGET_LARGE_S = 2.0  # bench_check.py's 30,000 nodes


def markdown(check: dict[str, Any]) -> list[str]:
    """Return the section's Markdown lines."""
    lines = ["## `bcast check` against the runtimes' own start", ""]
    models = check.get("models")
    if models:
        s = models["summary"]
        met = s["median_ratio"] <= TARGET_MEDIAN and s["worst_ratio"] <= TARGET_WORST
        lines += [
            f"Run {models.get('generated', '?')}, bcast commit {models.get('commit', '?')}, "
            f"{models.get('versions', '')}. `python benchmarks/bench_check_models.py`: "
            "each valid fixture of `tests/fixtures/real/` and `tests/fixtures/deployed/`, "
            "`bcast check MODEL --json` against `onnxruntime.InferenceSession(MODEL)` "
            "(OpenVINO's `compile_model` for IR), each its own process (interpreter start "
            f"and imports included), interleaved, median of {s['repeat']} runs.",
            "",
            f"**{s['models']} models: median ratio {s['median_ratio']:.2f}, worst "
            f"{s['worst_ratio']:.2f}** ({s['worst_model']}); the target is a median of at "
            f"most {TARGET_MEDIAN:.1f} and a worst of at most {TARGET_WORST:.1f}: "
            f"**{'met' if met else 'not met'}**.",
            "",
        ]
        if models.get("floor"):
            lines += [models["floor"], ""]
        lines += [
            "Where the time goes: `bcast check` starts its worker first (`bcast._spawn`, "
            "before the rest of bcast loads); the worker loads onnx's protobuf classes and "
            "its C++ shape inference without the rest of onnx and without NumPy "
            "(`bcast._spawn.lean_onnx`), parses the file, runs ONNX's shape inference and bcast's "
            "reader (rounds of inference fed with what bcast knows), and sends the graph "
            "back; this process checks it and solves the domain (isl loaded meanwhile). Two "
            "interpreters start where the peer starts one, and bcast's reader is Python: "
            "its rounds are most of what is left on transformers.",
            "",
        ]
        lines += [
            "| model | peer | bcast check | peer | bcast / peer |",
            "|:---|:---|---:|---:|---:|",
        ]
        for r in models["rows"]:
            lines.append(
                f"| `{r['model']}` | {r['peer']} | {r['bcast_s']:.3f} s | {r['peer_s']:.3f} s "
                f"| {r['ratio']:.2f} |"
            )
        lines.append("")
    large = check.get("large")
    if large:
        first = large["rows"][0]
        met = first["seconds"] < TARGET_LARGE_S
        lines += [
            f"`python benchmarks/bench_check.py`: a {large['nodes']:,}-node transformer-like "
            f"graph, median of {large['repeat']} runs in one process (target: under "
            f"{TARGET_LARGE_S:.0f} s, **{'met' if met else 'not met'}**):",
            "",
            "| what | seconds |",
            "|:---|---:|",
            *(f"| {r['name']} | {r['seconds']:.3f} |" for r in large["rows"]),
            "",
        ]
    return lines
