"""Render benchmark JSON as Markdown (``docs/benchmarks.md``) and a PNG chart (matplotlib).

Usage::

    python benchmarks/render.py --ops ops.json [--shapes shapes.json] [--sizes sizes.json]
                                [--markdown docs/benchmarks.md] [--png docs/benchmarks.png]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import render_check
import render_sizes
import render_targets

COMBINED_SCHEMA = "bcast-bench/1"  # run_all.py: {"ops": ..., "shapes": ...}
TIMES = render_sizes.TIMES  # the multiplication sign of "2.50x"
FAMILY_COLORS = render_sizes.FAMILY_COLORS


# --------------------------------------------------------------------------------------------
# Formatting helpers


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.2f}{TIMES}"


def fmt_pct(f: float | None) -> str:
    return "—" if f is None else f"{100 * f:.0f}%"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    seps = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(seps[a] for a in align) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return lines


def summary_cell(case: dict[str, Any], peer: dict[str, Any] | None) -> str:
    """One cell of the summary matrix: ratio to the fastest and share of STREAM (or, for cases
    that are not bandwidth-bound, the time per call)."""
    if peer is None:
        return ""
    status = peer["status"]
    if status == "skipped":
        return "skipped"
    if status == "wrong":
        return "**wrong**"
    if status != "ok":
        return status
    ratio = fmt_ratio(peer.get("ratio_to_fastest"))
    if peer.get("ratio_to_fastest") is not None and peer["ratio_to_fastest"] <= 1.0 + 1e-12:
        ratio = f"**{ratio}**"
    if case.get("bandwidth_bound"):
        return f"{ratio} · {fmt_pct(peer.get('fraction_of_stream'))}"
    return f"{ratio} · {fmt_time(peer.get('median_s'))}"


# --------------------------------------------------------------------------------------------
# Markdown


def _simd(machine: dict[str, Any]) -> str:
    """`` (AVX2, FMA3; no AVX-512)``: what NumPy's kernels could use; "" when not recorded."""
    found = machine.get("simd")
    if found is None:
        return ""
    avx512 = any(name.startswith("AVX512") for name in found)
    x86 = any(name.startswith("AVX") for name in found)
    missing = "; no AVX-512" if x86 and not avx512 else ""
    return f" ({', '.join(found) or 'no SIMD found'}{missing})"


def ops_markdown(data: dict[str, Any], png_name: str | None = None) -> list[str]:
    cases = data.get("cases", [])
    lines = ["## Operators", ""]
    m = data.get("machine", {})
    commit = f" (commit {m['commit']})" if m.get("commit") else ""
    vers = ", ".join(
        f"{k} {v}{commit if k == 'bcast' else ''}" for k, v in m.get("versions", {}).items() if v
    )
    lines += [
        f"Run {data.get('generated', '?')}{' (`--quick`)' if data.get('quick') else ''} on "
        f"{m.get('cpu', '?')}{_simd(m)}, {m.get('cpus', '?')} CPUs, "
        f"{m.get('memory_gib', '?')} GiB; "
        f"{data.get('threads', '?')} threads for every library that has a thread knob "
        f"(NumPy is single-threaded; bcast's engine ran with "
        f"{data.get('bcast_threads', '?')}). {vers}.",
        "",
        f"Each cell: time relative to the fastest peer of the case (**1.00{TIMES}** = "
        "fastest) · the peer's effective bandwidth (bytes an ideal kernel moves: inputs "
        "once, output once, divided by the median time) as a share of the 2-thread STREAM "
        "bandwidth measured during the same case. For the per-call case the second figure "
        "is the time per call.",
        "",
    ]
    for note in data.get("notes", []):
        lines += [f"> {note}", ""]
    if not cases:
        return [*lines, "No cases were run.", ""]

    peer_names: list[str] = []
    for c in cases:
        for p in c["peers"]:
            if p["name"] not in peer_names:
                peer_names.append(p["name"])
    header = ["peer", *[f"`{c['name']}`" for c in cases]]
    rows = []
    for name in peer_names:
        row = [name]
        for c in cases:
            peer = next((p for p in c["peers"] if p["name"] == name), None)
            row.append(summary_cell(c, peer))
        rows.append(row)
    rows.append(
        [
            "*STREAM, GB/s*",
            *[f"{c['stream']['gbps']:.1f}" if c["stream"].get("gbps") else "—" for c in cases],
        ]
    )
    rows.append(
        [
            "*background load, cores*",
            *[_load_cell(c.get("load", {})) for c in cases],
        ]
    )
    lines += _table(header, rows)
    lines += [""]
    if png_name:
        lines += [f"![Share of STREAM bandwidth per peer and case]({png_name})", ""]

    lines += ["### Cases", ""]
    for c in cases:
        s = c.get("stream", {})
        load = c.get("load", {})
        lines += [
            f"#### `{c['name']}`: {c['title']}",
            "",
            f"Inputs {', '.join(str(tuple(x)) for x in c['input_shapes'])} → "
            f"{tuple(c['output_shape'])} {c['dtype']}; {c['bytes_moved'] / 1e6:.1f} MB moved. "
            + (
                f"STREAM {s['gbps']:.1f} GB/s (Copy {s['copy_gbps']:.1f}, Add "
                f"{s['add_gbps']:.1f}; {s['samples']} probes). "
                if s.get("gbps")
                else ""
            )
            + f"Background load {load.get('background_cores_before', '?')} cores before, "
            f"{load.get('background_cores_during', '?')} during (waited "
            f"{load.get('waited_s', '?')} s).",
            "",
        ]
        rows = []
        for p in c["peers"]:
            ok = p["status"] == "ok"
            rows.append(
                [
                    p["name"],
                    fmt_time(p.get("median_s")) if ok else p["status"],
                    fmt_time(p.get("min_s")) if ok else "",
                    fmt_ratio(p.get("ratio_to_fastest")) if ok else "",
                    f"{p['gbps']:.1f}" if ok and p.get("gbps") is not None else "",
                    fmt_pct(p.get("fraction_of_stream")) if ok and c["bandwidth_bound"] else "",
                    p.get("note", ""),
                ]
            )
        lines += _table(
            ["peer", "median", "min", f"{TIMES} fastest", "GB/s", "of STREAM", "note"],
            rows,
            "lrrrrrl",
        )
        for note in c.get("notes", []):
            lines += ["", f"> {note}"]
        lines += [""]
    return lines


def _load_cell(load: dict[str, Any]) -> str:
    during = load.get("background_cores_during")
    if during is None:
        return "—"
    flag = "" if load.get("quiet", True) else " (not quiet)"
    return f"{during:.2f}{flag}"


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _fmt_scalar(key: str, v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if key.endswith("_s") or key in {"median", "seconds", "time"}:
            return fmt_time(v)
        if key.startswith("ratio") or key.endswith("ratio"):
            return fmt_ratio(v)
        return f"{v:.3g}"
    return str(v)


def _records(obj: Any) -> list[dict[str, Any]]:
    """The first list of records (dicts) found in ``obj``, depth first."""
    if isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
        return obj
    if isinstance(obj, dict):
        for key in ("cases", "results", "records", "rows", "benchmarks"):
            if key in obj:
                found = _records(obj[key])
                if found:
                    return found
        for v in obj.values():
            found = _records(v)
            if found:
                return found
    return []


SHAPES_SCHEMA = "bcast-bench-shapes/1"


def shapes_records(data: dict[str, Any]) -> list[dict[str, Any]]:
    """``bench_shapes.py``'s records with ``ratio_to_fastest`` (within each case) added."""
    if data.get("schema") != SHAPES_SCHEMA:
        return []
    records = [dict(r) for r in data.get("records", [])]
    fastest: dict[str, float] = {}
    for r in records:
        us = r.get("us_per_call")
        if r.get("status") == "ok" and us:
            fastest[r["case"]] = min(us, fastest.get(r["case"], math.inf))
    for r in records:
        us, best = r.get("us_per_call"), fastest.get(r["case"])
        r["ratio_to_fastest"] = us / best if r.get("status") == "ok" and us and best else None
    return records


def shapes_markdown(data: dict[str, Any]) -> list[str]:
    """``broadcast_shapes`` against NumPy, ONNX and OpenVINO shape inference.

    Renders ``bench_shapes.py``'s records (schema ``bcast-bench-shapes/1``); for any other
    layout it falls back to the Markdown table the script ships in its JSON, else to a generic
    table of the first list of flat records found, so the two scripts stay decoupled.
    """
    lines = ["## Shape inference: `broadcast_shapes`", ""]
    records = shapes_records(data)
    if records:
        lines += [
            "Time per call of answering *what shape do these broadcast to?* (see "
            f"`benchmarks/bench_shapes.py` for the cases). *{TIMES} fastest* is within the "
            f"case; *{TIMES} NumPy* is to `numpy.broadcast_shapes` (the `static` case's NumPy "
            "for cases without a NumPy peer).",
            "",
        ]
        rows = []
        for r in records:
            ok = r.get("status") == "ok"
            us = r.get("us_per_call")
            rows.append(
                [
                    f"`{r['case']}`",
                    r["peer"],
                    fmt_time(us * 1e-6) if ok and us is not None else r.get("status", "?"),
                    fmt_time(r["min_us"] * 1e-6) if ok and r.get("min_us") is not None else "",
                    fmt_ratio(r.get("ratio_to_fastest")) if ok else "",
                    fmt_ratio(r.get("ratio_to_numpy")) if ok else "",
                    r.get("note", ""),
                ]
            )
        header = ["case", "peer", "median", "min", f"{TIMES} fastest", f"{TIMES} NumPy", "note"]
        lines += _table(header, rows, "llrrrrl")
        return [*lines, ""]
    if isinstance(data.get("markdown"), str):
        return [*lines, data["markdown"].rstrip(), ""]
    generic = _records(data)
    if not generic:
        return [*lines, "No shape-inference results were found.", ""]
    keys: list[str] = []
    for r in generic:
        for k, v in r.items():
            if k not in keys and _scalar(v):
                keys.append(k)
    rows = [[_fmt_scalar(k, r.get(k)) for k in keys] for r in generic]
    lines += _table(keys, rows, "l" * len(keys))
    return [*lines, ""]


def render_markdown(
    ops: dict[str, Any] | None,
    shapes: dict[str, Any] | None,
    png_name: str | None,
    sizes: dict[str, Any] | None = None,
    sizes_png_name: str | None = None,
    check: dict[str, Any] | None = None,
) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Generated by `python benchmarks/run_all.py` (see `benchmarks/README.md` for what is "
        "measured and how). Numbers from a shared 2-core machine: read the ratios and the "
        "STREAM shares, not the absolute times.",
        "",
    ]
    lines += render_targets.markdown(ops, sizes, shapes)
    if ops is not None:
        lines += ops_markdown(ops, png_name)
    if sizes is not None:
        lines += render_sizes.markdown(sizes, sizes_png_name)
    if shapes is not None:
        lines += shapes_markdown(shapes)
    if check:
        lines += render_check.markdown(check)
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# PNG


@dataclass
class _Panel:
    title: str
    names: list[str]
    values: list[float]
    colors: list[str]
    labels: list[str]
    xlabel: str
    log: bool = False
    refline: float | None = None


def _ops_panels(ops: dict[str, Any]) -> list[_Panel]:
    panels = []
    for c in ops.get("cases", []):
        peers = [p for p in c["peers"] if p["status"] == "ok"]
        bw = c.get("stream", {}).get("gbps")
        panel = _Panel(
            title=f"{c['name']}" + (f"\nSTREAM {bw:.0f} GB/s" if bw else ""),
            names=[p["name"] for p in peers],
            values=[],
            colors=[FAMILY_COLORS.get(p["family"], "#7f7f7f") for p in peers],
            labels=[fmt_ratio(p.get("ratio_to_fastest")) for p in peers],
            xlabel="",
        )
        if c["bandwidth_bound"]:
            panel.values = [100 * (p.get("fraction_of_stream") or 0.0) for p in peers]
            panel.xlabel = "% of 2-thread STREAM (higher is better)"
            panel.refline = 100.0
        else:
            panel.values = [1e6 * (p.get("median_s") or 0.0) for p in peers]
            panel.xlabel = "µs per call (lower is better)"
            panel.log = True
        panels.append(panel)
    return panels


def _shapes_panel(shapes: dict[str, Any] | None) -> list[_Panel]:
    records = [r for r in shapes_records(shapes or {}) if r.get("status") == "ok"]
    if not records:
        return []

    def family(peer: str) -> str:
        low = peer.lower()
        for fam in FAMILY_COLORS:
            if low.startswith(fam.lower()) or low.startswith(fam.lower()[:4]):
                return fam
        return ""

    return [
        _Panel(
            title="broadcast_shapes",
            names=[f"{r['case']}: {r['peer']}" for r in records],
            values=[float(r["us_per_call"]) for r in records],
            colors=[FAMILY_COLORS.get(family(r["peer"]), "#7f7f7f") for r in records],
            labels=[fmt_ratio(r.get("ratio_to_fastest")) for r in records],
            xlabel="µs per call (lower is better)",
            log=True,
        )
    ]


def chart(ops: dict[str, Any] | None, path: Path, shapes: dict[str, Any] | None = None) -> None:
    """One panel per operator case (share of STREAM per peer; per-call time for cases that are
    not bandwidth-bound) and one for ``broadcast_shapes``; bars are labelled with the ratio to
    the fastest."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    panels = _ops_panels(ops or {}) + _shapes_panel(shapes)
    if not panels:
        return
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    tallest = max(len(p.names) for p in panels)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(5.2 * ncols, (0.3 * tallest + 1.4) * nrows + 0.6), squeeze=False
    )
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        y = list(range(len(panel.names)))
        ax.barh(y, panel.values, color=panel.colors)
        ax.set_yticks(y, panel.names, fontsize=8)
        ax.invert_yaxis()
        if panel.log:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        if panel.refline is not None:
            ax.axvline(panel.refline, color="k", lw=0.8, ls="--")
        for yi, v, label in zip(y, panel.values, panel.labels, strict=True):
            ax.annotate(
                label, (v, yi), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7
            )
        ax.set_title(panel.title, fontsize=9)
        ax.set_xlabel(panel.xlabel, fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        ax.margins(x=0.3 if panel.log else 0.2)
    meta = ops or {}
    fig.suptitle(
        f"bcast benchmarks: {meta.get('machine', {}).get('cpu', '')}, "
        f"{meta.get('threads', '?')} threads{' (quick)' if meta.get('quick') else ''}; "
        f"bar labels: {TIMES} fastest",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------


def render(
    *,
    ops: dict[str, Any] | None,
    shapes: dict[str, Any] | None,
    markdown: Path | None,
    png: Path | None,
    sizes: dict[str, Any] | None = None,
    check: dict[str, Any] | None = None,
) -> None:
    """Write the Markdown report and the charts (the size sweep's: ``<png>_sizes.png``)."""
    if png is not None and (ops is not None or shapes is not None):
        chart(ops, png, shapes)
    sizes_png = None
    if png is not None and sizes is not None and sizes.get("sweep"):
        sizes_png = png.with_name(f"{png.stem}_sizes{png.suffix}")
        render_sizes.chart(sizes, sizes_png)
    if markdown is not None:
        png_name = sizes_name = None
        if png is not None and (ops is not None or shapes is not None):
            png_name = os.path.relpath(png, markdown.parent).replace(os.sep, "/")
        if sizes_png is not None:
            sizes_name = os.path.relpath(sizes_png, markdown.parent).replace(os.sep, "/")
        markdown.parent.mkdir(parents=True, exist_ok=True)
        text = render_markdown(ops, shapes, png_name, sizes, sizes_name, check)
        markdown.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=Path, help="JSON of bench_ops.py (or run_all.py's, both parts)")
    ap.add_argument("--shapes", type=Path, help="JSON written by bench_shapes.py")
    ap.add_argument("--sizes", type=Path, help="JSON written by bench_sizes.py")
    ap.add_argument("--check", type=Path, help="run_all.py's check part (JSON)")
    ap.add_argument("--markdown", type=Path, default=Path("docs/benchmarks.md"))
    ap.add_argument("--png", type=Path, default=Path("docs/benchmarks.png"))
    args = ap.parse_args(argv)
    ops = json.loads(args.ops.read_text()) if args.ops else None
    shapes = json.loads(args.shapes.read_text()) if args.shapes else None
    sizes = json.loads(args.sizes.read_text()) if args.sizes else None
    check = json.loads(args.check.read_text()) if args.check else None
    if ops is not None and ops.get("schema") == COMBINED_SCHEMA:  # run_all.py's benchmarks.json
        combined = ops
        ops, shapes = combined.get("ops"), shapes if shapes is not None else combined.get("shapes")
        sizes = sizes if sizes is not None else combined.get("sizes")
        check = check if check is not None else combined.get("check")
    render(ops=ops, shapes=shapes, markdown=args.markdown, png=args.png, sizes=sizes, check=check)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
