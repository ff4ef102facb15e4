"""Render ``bench_sizes.py``'s JSON: the size-sweep tables and plot, and the first-call table.

Called by ``render.py`` (``render(..., sizes=...)``); the plot is a PNG next to the main one
(``benchmarks_sizes.png`` beside ``benchmarks.png``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

TIMES = "\u00d7"
FAMILY_COLORS = {
    "bcast": "#d62728",
    "NumPy": "#1f77b4",
    "numexpr": "#9467bd",
    "onnxruntime": "#2ca02c",
    "OpenVINO": "#17becf",
    "PyTorch": "#ff7f0e",
    "GPU": "#8c564b",
}


def size_label(n: int) -> str:
    """A byte count as the report writes it: ``64 KiB``, ``1024 KiB``, ``1 GiB``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:  # three digits, four below the next unit (1024 KiB, not 1.02e+03)
            return f"{n / scale:.3g} {unit}" if n < 1000 * scale else f"{n / scale:.0f} {unit}"
    return f"{n} B"


def _ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _groups(sweep: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for record in sweep:
        groups.setdefault((record["family"], record["dtype"]), []).append(record)
    return groups


def _commit(machine: dict[str, Any]) -> str:
    return f" of bcast commit {machine['commit']}" if machine.get("commit") else ""


def markdown(data: dict[str, Any], png_name: str | None) -> list[str]:
    quick = " (`--quick`: three sizes, few short samples; noisy)" if data.get("quick") else ""
    m = data.get("machine", {})
    lines = [
        "## Add at every size",
        "",
        f"Run {data.get('generated', '?')}{quick}{_commit(m)} on {m.get('cpu', '?')}, "
        f"{m.get('cpus', '?')} CPUs; {data.get('threads', '?')} threads for every library "
        f"that has a knob, bcast's engine {data.get('bcast_threads', '?')}. Each cell: the "
        f"peer's median time over the fastest peer's at that size (**1.00{TIMES}** = fastest). "
        "`benchmarks/bench_sizes.py` says how.",
        "",
    ]
    if png_name:
        lines += [f"![Time over the fastest peer's, by output size]({png_name})", ""]
    families = data.get("families", {})
    for (family, dtype), records in _groups(data.get("sweep", [])).items():
        lines += [f"### `{families.get(family, family)}`, {dtype}", ""]
        names: list[str] = []
        for r in records:
            for p in r.get("peers", []):
                if p["name"] not in names:
                    names.append(p["name"])
        header = ["peer", *[size_label(r["output_bytes"]) for r in records]]
        rows = []
        for name in names:
            row = [name]
            for r in records:
                p = next((p for p in r.get("peers", []) if p["name"] == name), None)
                row.append(_cell(r, p))
            rows.append(row)
        lines += ["| " + " | ".join(header) + " |", "|:---|" + "---:|" * len(records)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines += [""]
    first = data.get("first_call", [])
    if first:
        lines += [
            "## The first call",
            "",
            "Fresh processes: the first call of the operator on float32 `(4096,4096)` data "
            "against the first NumPy call in the same process; *empty*: numba's cache folder "
            "new, *filled*: a second process on the same folder. *background* is bcast's "
            "default (NumPy's path computes while the kernel compiles); *wait* is "
            "`BCAST_COMPILED=wait`, the first call compiling, as every first call did before.",
            "",
            "| op | mode | cache | first call | NumPy's first | ratio | second call "
            "| compiled ready after | runs |",
            "|:---|:---|:---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in first:
            if "error" in row:
                lines.append(f"| {row['op']} | {row['mode']} | {row['cache']} | error: "
                             f"{row['error']} | | | | | |")  # fmt: skip
                continue
            lines.append(
                f"| {row['op']} | {row['mode']} | {row['cache']} | {_ms(row['first_s'])} | "
                f"{_ms(row['numpy_first_s'])} | {row['ratio_to_numpy']:.2f}{TIMES} | "
                f"{_ms(row['second_s'])} | {_ms(row['ready_after_s'])} | {row['runs']} |"
            )
        lines += [""]
    return lines


def _cell(record: dict[str, Any], peer: dict[str, Any] | None) -> str:
    if "skipped" in record:
        return "skipped (memory)"
    if peer is None:
        return ""
    if peer["status"] != "ok":
        return "**wrong**" if peer["status"] == "wrong" else peer["status"]
    ratio = peer.get("ratio_to_fastest")
    if ratio is None:
        return "—"
    text = f"{ratio:.2f}{TIMES}"
    return f"**{text}**" if ratio <= 1.0 + 1e-12 else text


def chart(data: dict[str, Any], path: Path) -> None:
    """One panel per shape and dtype: each peer's time over the fastest's, by output size."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _groups([r for r in data.get("sweep", []) if "peers" in r])
    if not groups:
        return
    families = data.get("families", {})
    fig, axes = plt.subplots(
        len(groups) // 2 + len(groups) % 2, 2, figsize=(12, 3.6 * -(-len(groups) // 2)),
        squeeze=False,
    )  # fmt: skip
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax, ((family, dtype), records) in zip(axes.flat, groups.items(), strict=False):
        names = list(dict.fromkeys(p["name"] for r in records for p in r["peers"]))
        for name in names:
            points = [
                (r["output_bytes"], p["ratio_to_fastest"], p["family"])
                for r in records
                for p in r["peers"]
                if p["name"] == name and p["status"] == "ok" and p.get("ratio_to_fastest")
            ]
            if not points:
                continue
            xs, ys, fams = zip(*points, strict=True)
            color = FAMILY_COLORS.get(fams[0], "#7f7f7f")
            style = "-" if "out=" in name else "--"
            width = 2 if fams[0] == "bcast" else 1
            ax.plot(xs, ys, marker="o", ms=3, label=name, color=color, ls=style, lw=width)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axhline(1.0, color="k", lw=0.6)
        ax.set_title(f"add {families.get(family, family)}, {dtype}", fontsize=9)
        ax.set_xlabel("output size (bytes)", fontsize=8)
        ax.set_ylabel(f"time {TIMES} fastest (lower is better)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, ncol=2)
    quick = " (quick)" if data.get("quick") else ""
    fig.suptitle(f"bcast add by size{quick}: {data.get('machine', {}).get('cpu', '')}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
