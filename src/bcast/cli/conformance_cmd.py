"""The ``bcast conformance`` command: grade ONNX runtimes against bcast.

`bcast.onnx.conformance` generates, runs and judges the cases; this module parses the
options, shows progress on stderr and renders the report (text, markdown, html or JSON).
It contains no rule.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

import click
from rich.console import Console
from rich.text import Text

from bcast.core.text import safe_text
from bcast.onnx.conformance.catalog import op_names
from bcast.onnx.conformance.kit import Kit, UnknownRuntimeError, run_kit
from bcast.onnx.conformance.report import (
    Cluster,
    cards,
    clusters,
    kit_json,
    write_repro,
    write_suite,
)
from bcast.onnx.conformance.spec import UNDEFINED
from bcast.onnx.conformance.verdicts import VERDICTS
from bcast.onnx.conformance.workers import DEFAULT_TIMEOUT

from ._output import (
    ExitCode,
    emit_json,
    exit_with,
    export_recording,
    fail_usage,
    output_format,
    recording_console,
    stdout_console,
)

__all__ = ["FORMATS", "conformance", "conformance_skeleton"]

FORMATS: Final = ("text", "markdown", "html")
"""--format's choices (DESIGN §1); JSON is --json."""
_SHORT: Final = {
    "agree": "agree",
    "wrong_value": "value",
    "wrong_shape": "shape",
    "accepts_invalid": "acc-inv",
    "refuses_valid": "ref-val",
    "crash": "crash",
    "spec_undefined": "undef",
}
_WIDTH: Final = 80


def conformance_skeleton() -> dict[str, Any]:
    """Return conformance's JSON with every member empty."""
    return {
        "seed": 0,
        "runtimes": [],
        "findings": [],
        "cards": {},
        "summary": {
            "cases": 0,
            "dropped": 0,
            "runs": 0,
            "verdicts": {v: 0 for v in VERDICTS},
            "clusters": 0,
            "defects": 0,
            "seconds": 0.0,
        },
        "error": None,
    }


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


@click.command(
    "conformance",
    epilog="""\b
Examples:
  bcast conformance
  bcast conformance --runtime onnxruntime,reference --ops Add,Where --out report/
  bcast conformance --runtime openvino --json > openvino.json""",
)
@click.option(
    "--runtime",
    "runtimes",
    default=None,
    help="Comma-separated runtimes (default: onnxruntime, openvino, reference, tract and "
    "every plug-in registered under the entry point group bcast.conformance_runtimes). "
    "One that is not installed is named and skipped.",
)
@click.option("--ops", default=None, help="Comma-separated ONNX operators (default: all).")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Write a one-node repro per cluster (DIR/repros/) and the whole suite as ONNX "
    "backend test data (DIR/suite/, DIR/suite-must-refuse/).",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="At most this many cases per operator (default: all).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Worker processes at a time.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds one case may take in a runtime before it counts as a crash.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS, case_sensitive=False),
    default=None,
    help="Report format (default text); --json for JSON.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def conformance(
    runtimes: str | None,
    ops: str | None,
    out: str | None,
    seed: int,
    limit: int | None,
    jobs: int,
    timeout: float,
    fmt: str | None,
    as_json: bool,
) -> None:
    """Grade ONNX runtimes against bcast on every broadcasting operator.

    Generates single-node models of every broadcasting operator (Add ... Where, Expand,
    PRelu, Mod, BitShift, the Bitwise ops, QuantizeLinear and DequantizeLinear) for every
    element type its schema allows, on edge shapes (0-d, zero-size, size-1 axes, high
    rank, pairs that must be refused), with operands static, symbolic (decided at run
    time) or initializers, and on edge values; runs each in every configuration of every
    runtime in isolated worker processes; compares with bcast's answer. Verdicts: agree,
    wrong_value, wrong_shape, accepts_invalid, refuses_valid, crash, spec_undefined (the
    operator text gives no value: cited, not a defect). docs/conformance.md explains the
    card, the tolerance table and how to add a runtime.

    Exit status: 0 no defect found, 1 defects found, 2 bad usage (an unknown runtime
    name or operator).
    """
    fmt = output_format(
        fmt, as_json, command_path="bcast conformance", skeleton=conformance_skeleton
    )
    wanted_ops = _split(ops)
    known_ops = op_names()
    if wanted_ops is not None:
        unknown = [o for o in wanted_ops if o not in known_ops]
        if unknown or not wanted_ops:
            _usage(f"--ops takes {', '.join(known_ops)}; got {ops!r}", fmt)
    wanted = _split(runtimes)
    if wanted is not None and not wanted:
        _usage(f"--runtime takes a comma-separated list; got {runtimes!r}", fmt)
    if out is not None:  # before the run, which may take minutes
        problem = _unwritable(out)
        if problem:
            _usage(f"--out {safe_text(out)}: {problem}", fmt)
    progress = _progress(show=fmt != "json")
    try:
        kit = run_kit(
            wanted, ops=wanted_ops, seed=seed, limit=limit, jobs=jobs, timeout=timeout,
            progress=progress,
        )  # fmt: skip
    except UnknownRuntimeError as err:
        _usage(f"--runtime: {err}", fmt)
    found = clusters(kit)
    if out is not None:
        try:
            _write(out, kit, found)
        except OSError as err:  # the folder went away or filled up during the run
            _usage(f"--out {safe_text(out)}: {err.strerror or err}", fmt)
    if fmt == "json":
        emit_json(kit_json(kit, found, dropped=len(kit.dropped)))
    elif fmt == "markdown":
        click.echo(_markdown(kit, found))
    elif fmt == "html":
        console = recording_console()
        _render_text(console, kit, found)
        click.echo(export_recording(console, "html", "bcast conformance"))
    else:
        _render_text(stdout_console(), kit, found)
    exit_with(ExitCode.FINDINGS if any(c.defect for c in found) else ExitCode.OK)


def _usage(message: str, fmt: str) -> NoReturn:
    fail_usage(
        message,
        command_path="bcast conformance",
        as_json=fmt == "json",
        payload=conformance_skeleton(),
    )


def _progress(*, show: bool) -> Callable[[str, int, int], None]:
    """Return a counter that writes ``ran n of N`` to stderr every tenth of the way."""
    step = [0]

    def tell(stage: str, done: int, total: int) -> None:
        if not show or total == 0:
            return
        tenth = done * 10 // total
        if tenth > step[0] or done == total:
            step[0] = tenth
            click.echo(f"bcast conformance: ran {done} of {total} case runs", err=True)

    return tell


def _unwritable(out: str) -> str:
    """Say why ``out`` cannot take the report's files ("" where it can; it is made)."""
    if os.path.lexists(out) and not os.path.isdir(out):
        return "not a folder"
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as err:
        return err.strerror or str(err)
    return "" if os.access(out, os.W_OK | os.X_OK) else "not writable"


def _write(out: str, kit: Kit, found: Sequence[Cluster]) -> None:
    for k, cluster in enumerate(found):
        name = f"{k:03d}-{cluster.label}-{cluster.op}-{cluster.verdict}"
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)
        cluster.repro = write_repro(os.path.join(out, "repros", safe), cluster)
    write_suite(out, kit.cases)


# -- text ----------------------------------------------------------------------------------


def _say(console: Console, text: str, style: str = "", indent: str = "") -> None:
    for line in textwrap.wrap(
        safe_text(text),
        _WIDTH - len(indent),
        break_long_words=True,
        break_on_hyphens=False,
        subsequent_indent="  ",
    ):
        console.print(Text(indent + line, style=style), soft_wrap=True)


def _table_lines(rows: dict[str, dict[str, int]], first: str) -> list[str]:
    head = f"{first:<18}" + "".join(f"{_SHORT[v]:>8}" for v in VERDICTS)
    lines = [head]
    for key in rows:
        counts = rows[key]
        cells = "".join(f"{counts.get(v, 0) or '.':>8}" for v in VERDICTS)
        lines.append(f"{safe_text(key)[:17]:<18}{cells}")
    return lines


def _render_text(console: Console, kit: Kit, found: Sequence[Cluster]) -> None:
    configs = sum(i.available for i in kit.runtimes)
    _say(
        console,
        f"bcast conformance: {len(kit.cases)} cases x {configs} runtime configurations, "
        f"seed {kit.seed}, {kit.seconds:.0f} s",
        "bold",
    )
    for info in kit.runtimes:
        if info.available:
            config = ", ".join(f"{k}={v}" for k, v in info.config.items())
            _say(console, f"{info.label} {info.version}: {config}", indent="  ")
        else:
            _say(console, f"{info.name}: skipped (not installed: {info.reason})", "yellow", "  ")
    if kit.dropped:
        _say(console, f"{len(kit.dropped)} cases dropped: bcast has no answer for them")
    legend = ", ".join(f"{s} = {v}" for v, s in _SHORT.items() if s != v)
    for label, card in cards(kit).items():
        console.print()
        _say(console, f"card: {label}", "bold")
        for line in _table_lines(card["by_op"], "op"):
            console.print(Text(line), soft_wrap=True)
        console.print()
        for line in _table_lines(card["by_dtype"], "element type"):
            console.print(Text(line), soft_wrap=True)
    console.print()
    _say(console, f"verdicts: {legend}")
    for cluster in found:
        _render_cluster(console, cluster)
    defects = [c for c in found if c.defect]
    console.print()
    if defects:
        cases = sum(len(c.records) for c in defects)
        _say(console, f"{len(defects)} defect clusters ({cases} case runs) found", "bold red")
    else:
        _say(console, "no defect found", "green")


def _render_cluster(console: Console, cluster: Cluster) -> None:
    record = cluster.first
    case = record.case
    mark = "defect" if cluster.defect else "not a defect"
    console.print()
    _say(
        console,
        f"{cluster.label} {cluster.op}: {cluster.verdict} ({mark}), {cluster.pattern}, "
        f"{len(cluster.records)} cases",
        "bold red" if cluster.defect else "cyan",
    )
    types = sorted({"/".join(dict.fromkeys(r.case.dtypes)) for r in cluster.records})
    _say(console, f"types: {', '.join(types)}", indent="    ")
    _say(console, f"e.g. {case.id}: inputs {' '.join(case.shapes)}", indent="    ")
    if record.verdict.got:
        _say(console, f"runtime: {record.verdict.got}", indent="    ")
    if record.verdict.detail:
        _say(console, f"why: {record.verdict.detail}", indent="    ")
    if cluster.repro:
        _say(console, f"repro: {cluster.repro}", indent="    ")


# -- markdown ------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return safe_text(text).replace("|", "\\|")


def _markdown(kit: Kit, found: Sequence[Cluster]) -> str:
    lines = ["# bcast conformance", ""]
    lines.append(f"{len(kit.cases)} cases, seed {kit.seed}, {kit.seconds:.0f} s.")
    lines += ["", "| runtime | version | configuration |", "|---|---|---|"]
    for info in kit.runtimes:
        config = ", ".join(f"{k}={v}" for k, v in info.config.items())
        shown = config if info.available else f"skipped: {info.reason}"
        lines.append(f"| {_cell(info.label)} | {_cell(info.version)} | {_cell(shown)} |")
    header = "| op | " + " | ".join(VERDICTS) + " |"
    rule = "|---|" + "---:|" * len(VERDICTS)
    for label, card in cards(kit).items():
        lines += ["", f"## {_cell(label)}", "", header, rule]
        for op, counts in card["by_op"].items():
            lines.append(f"| {op} | " + " | ".join(str(counts.get(v, 0)) for v in VERDICTS) + " |")
    lines += ["", "## Clusters", ""]
    lines += ["| runtime | op | verdict | pattern | cases | example | detail | repro |"]
    lines += ["|---|---|---|---|---:|---|---|---|"]
    for c in found:
        lines.append(
            f"| {_cell(c.label)} | {c.op} | {c.verdict} | {c.pattern} | {len(c.records)} | "
            f"{_cell(c.first.case.id)} | {_cell(c.first.verdict.detail)} | "
            f"{_cell(c.repro or '')} |"
        )
    lines += ["", "## Spec table", ""]
    lines += [f"- `{row.key}`: {row.citation}" for row in UNDEFINED]
    return "\n".join(lines)
