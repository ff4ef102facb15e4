"""The report's verdict on the speed targets: where a peer was faster than bcast, in this run.

Reads the results ``run_all.py`` gathered (the operators', the size sweep's, the shape
inference's) and writes one table: each target row, the ratio measured in this run, the
target and whether it was met. The ratios compare peers measured side by side in the same
process, so they hold on whatever machine ran them.

- the size sweep's add ``(n,64)+(64,)`` into ``out=``: the fastest *other* library's median
  over bcast ``out=``'s (at least 1.0: no peer faster), float32 and float64, 64 KiB up;
- the tiny add ``(4,)+(1,)``: bcast's median over NumPy's (at most 1.0);
- ``broadcast_shapes`` of two static rank-4 shapes: NumPy's median over bcast's (at least 3.0).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import render_sizes


def _median(peers: list[dict[str, Any]], name: str) -> float | None:
    for p in peers:
        if p.get("name") == name and p.get("status", "ok") == "ok":
            value = p.get("median_s")
            return float(value) if value else None
    return None


def _fastest_other(peers: list[dict[str, Any]]) -> tuple[str, float] | None:
    """The quickest peer of another library than bcast: (name, median seconds)."""
    found = [
        (float(p["median_s"]), p["name"])
        for p in peers
        if p.get("family") != "bcast" and p.get("status", "ok") == "ok" and p.get("median_s")
    ]
    if not found:
        return None
    seconds, name = min(found)
    return name, seconds


def rows(
    ops: dict[str, Any] | None, sizes: dict[str, Any] | None, shapes: dict[str, Any] | None
) -> Iterator[tuple[str, str, float, str, bool]]:
    """Each target: (what, against whom, ratio, target text, met)."""
    for record in (sizes or {}).get("sweep", []):
        if record.get("family") != "bias2d" or "peers" not in record:
            continue
        peers = record["peers"]
        ours, other = _median(peers, "bcast out="), _fastest_other(peers)
        if ours is None or other is None:
            continue
        size = render_sizes.size_label(record["output_bytes"])
        what = f"add (n,64)+(64,) `out=`, {record['dtype']}, {size}"
        ratio = other[1] / ours
        yield what, other[0], ratio, "≥ 1.0", ratio >= 1.0
    for case in (ops or {}).get("cases", []):
        if case.get("name") == "tiny":
            ours, numpy = _median(case["peers"], "bcast"), _median(case["peers"], "numpy")
            if ours is not None and numpy is not None:
                ratio = ours / numpy
                what = "tiny add (4,)+(1,), bcast / NumPy time"
                yield what, "numpy", ratio, "≤ 1.0", ratio <= 1.0
    medians = {
        r["peer"]: r["us_per_call"]
        for r in (shapes or {}).get("records", [])
        if r.get("case") == "static" and r.get("status") == "ok" and r.get("us_per_call")
    }
    if "bcast" in medians and "numpy" in medians:
        ratio = medians["numpy"] / medians["bcast"]
        yield "`broadcast_shapes`, static rank 4", "numpy", ratio, "≥ 3.0", ratio >= 3.0


def markdown(
    ops: dict[str, Any] | None, sizes: dict[str, Any] | None, shapes: dict[str, Any] | None
) -> list[str]:
    """The section: one row per target, and how many were met."""
    found = list(rows(ops, sizes, shapes))
    if not found:
        return []
    missed = [r for r in found if not r[4]]
    lines = [
        "## Targets: where a peer is faster",
        "",
        "Each row is a ratio of medians measured side by side in this run (the sections below "
        "hold the numbers). For the size sweep: the fastest other library's time over bcast "
        "`out=`'s, so at least 1.0 means no peer was faster. "
        + (
            f"**All {len(found)} met.**"
            if not missed
            else f"**{len(found) - len(missed)} of {len(found)} met**; missed: "
            + "; ".join(f"{r[0]} ({r[2]:.2f})" for r in missed)
            + "."
        ),
        "",
        "| target | peer | ratio | target | met |",
        "|:---|:---|---:|:---|:---|",
    ]
    lines += [
        f"| {what} | {peer} | {ratio:.2f} | {goal} | {'yes' if met else '**no**'} |"
        for what, peer, ratio, goal, met in found
    ]
    return [*lines, ""]
