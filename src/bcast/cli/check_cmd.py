"""The ``bcast check`` command: models in, findings out.

It reads each model with the reader its file type needs (`bcast.loading.load_graph`), runs
`bcast.models.check_graph` and renders the findings. It contains no rule.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.text import Text

from bcast.core.conditions import readable
from bcast.core.expressions import Expr
from bcast.core.text import safe_text
from bcast.loading import is_ir, load_graph
from bcast.models import (
    DEFAULT_MAX_ELEMENTS,
    Finding,
    Graph,
    ModelError,
    Report,
    Severity,
    check_graph,
)
from bcast.models.baseline import fails, fingerprint, write_baseline
from bcast.models.deviations import TARGETS
from bcast.models.dim_names import unused_dims
from bcast.models.isolation import prestart
from bcast.models.ranges import DimValue

from ._ci_formats import FORMATS, github_annotations, html_report, sarif_log
from ._hook import not_ir
from ._model_options import (
    DimBinding,
    dim_option,
    dims_of_bindings,
    limit_options,
    model_limits,
    one_line,
    plural,
    warn_unused,
)
from ._output import (
    ExitCode,
    emit_json,
    error_json,
    exit_with,
    fail_usage,
    pack,
    stderr_console,
    stdout_console,
)
from ._output import output_format as resolve_format
from ._policy import Policy, policy_options, resolve_policy
from ._safe_output import write_commands

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = ["check", "check_skeleton"]

PROGRESS_NODES = 200
"""Models with more nodes than this get a progress bar on stderr (a terminal, no --json)."""

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _safe_load(path: str) -> Graph | str:
    """Return the graph, or the one-line reason it cannot be read (never a traceback)."""
    try:
        return load_graph(path)
    except ModelError as err:
        return one_line(str(err))
    except Exception as err:  # a reader library failing on hostile input: still one line
        return one_line(f"{path}: cannot read the model ({type(err).__name__}: {err})")


def _ticks(progress: Progress, task: Any) -> Iterator[None]:
    while True:
        progress.advance(task)
        yield None


def _run_check(
    graph: Graph,
    dims: Mapping[str, DimValue],
    max_elements: int,
    show_progress: bool,
    target: str | None = None,
) -> Report:
    if not show_progress or len(graph.nodes) <= PROGRESS_NODES:
        return check_graph(graph, dims=dims, max_elements=max_elements, target=target)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # 9 ms

    columns = (
        TextColumn("checking {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
    )
    with Progress(*columns, console=stderr_console(), transient=True) as progress:
        task = progress.add_task(os.path.basename(graph.path), total=len(graph.nodes))
        ticks = _ticks(progress, task)
        return check_graph(
            graph, dims=dims, max_elements=max_elements, progress=ticks, target=target
        )


# -- bcast check ---------------------------------------------------------------------------


@click.command(
    "check",
    epilog="""\b
Examples:
  bcast check model.onnx
  bcast check model.onnx --dim batch=4 --dim seq=128
  bcast check model.onnx --dim seq=1..512    (prove every seq from 1 to 512)
  bcast check models/*.onnx --fail-on error --baseline bcast-baseline.json
  bcast check model.xml --json
  bcast check models/*.onnx --format sarif > bcast.sarif
  bcast check model.onnx --format github    (annotations in a GitHub Actions log)
  bcast check model.xml --target openvino   (warn where OpenVINO departs from the spec)""",
)
@click.argument(
    "models", nargs=-1, required=True, metavar="MODEL...", type=click.Path(dir_okay=True)
)
@dim_option
@click.option(
    "--max-elements",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_ELEMENTS,
    show_default=True,
    help="Report broadcast outputs with more elements than this.",
)
@limit_options
@policy_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS, case_sensitive=False),
    default=None,
    help=(
        "text (the default), json (one object, as --json), sarif (SARIF 2.1.0 for code "
        "scanning), github (GitHub Actions annotations) or html (a self-contained page)."
    ),
)
@click.option(
    "--target",
    type=click.Choice(TARGETS, case_sensitive=False),
    default=None,
    help="Also warn where this runtime is known to depart from the specification "
    "(runtime-deviation, with its entry in docs/peer-differences.md).",
)
@click.option(
    "--skip-non-ir",
    is_flag=True,
    help="Skip, with a note, .xml files that are not OpenVINO IR (the pre-commit hook "
    "passes every .xml of a commit).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def check(
    models: tuple[str, ...],
    bindings: tuple[tuple[str, int], ...],
    max_elements: int,
    timeout: float,
    max_memory: int | None,
    fail_on: str | None,
    baseline: str | None,
    write_baseline: str | None,
    output_format: str | None,
    target: str | None,
    skip_non_ir: bool,
    as_json: bool,
) -> None:
    """Check the broadcasting nodes of ONNX models and OpenVINO IR (.xml) files.

    Shapes are propagated through the whole graph: bcast's rules for every broadcasting
    node, the model's own shape inference for the rest. Findings are definite errors,
    conditions under which a node fails (symbols, intervals), unidirectional violations
    that ONNX shape inference does not check (PRelu slope, Gemm C), oversized Expand and
    Broadcast outputs, and OpenVINO attribute pitfalls (a pdpd node without an axis).

    A --dim whose name no dim of any model has is reported with a warning (and under
    "unused_dims" in the JSON). --dim NAME=LO..HI (or LO..) proves the model for every
    size in the range: a condition met at no size of it is no finding, one met inside it
    is an error (fails-in-range) at the first size where it fails.

    --fail-on, --baseline, --dim and --target may also be set in a [tool.bcast] table of the
    nearest pyproject.toml (from the current directory upward); the command line wins.
    --target onnxruntime|openvino|tract also warns at nodes where that runtime is known to
    depart from the specification (runtime-deviation).

    ONNX shape inference and OpenVINO read each model in a separate process, limited by
    --timeout and --max-memory: a crash, a timeout or memory exhausted makes that model
    unreadable (one line), and the next model is checked.

    Exit status: 0 clean (no finding at or above --fail-on, default warning, that the
    baseline does not hold), 1 findings, 2 unreadable input (or baseline).
    """
    fmt = resolve_format(
        output_format, as_json, command_path="bcast check", skeleton=check_skeleton
    )
    as_json = fmt == "json"
    policy = _policy(fail_on, baseline, write_baseline, bindings, as_json, target)
    dims, target = policy.dims, policy.target
    console = stdout_console()
    show_progress = fmt == "text" and sys.stderr.isatty()
    results: list[tuple[str, Report | str]] = []
    graphs: list[Graph] = []
    found: list[tuple[str, Report]] = []  # before the baseline: what --write-baseline writes
    baselined = 0
    with model_limits(timeout, max_memory):
        prestart()  # the worker's interpreter starts while the first model is parsed
    for path in _without_weights(models):
        skipped = not_ir(path) if skip_non_ir and is_ir(path) else None
        if skipped is not None:  # a pom.xml handed to the pre-commit hook: not a model
            click.echo(f"bcast: note: {safe_text(path)}: skipped: {skipped}", err=True)
            continue
        with model_limits(timeout, max_memory):
            loaded = _safe_load(path)
        if isinstance(loaded, str):
            results.append((path, loaded))
            click.echo(f"bcast: {loaded}", err=True)
            continue
        graphs.append(loaded)
        try:
            report = _run_check(loaded, dims, max_elements, show_progress, target)
        except ModelError as err:
            results.append((path, one_line(str(err))))
            click.echo(f"bcast: {one_line(str(err))}", err=True)
            continue
        results.append((path, report))
        found.append((path, report))
        if policy.baseline is not None:
            report, known = policy.baseline.apply(path, report)
            results[-1] = (path, report)
            baselined += known
        if fmt == "text":
            _render_report(console, loaded, report)
    unused = unused_dims(graphs, dims) if graphs else []
    warn_unused(unused, dims)
    summary = {**_summary(results), "baselined": baselined}
    if policy.write_baseline is not None:
        _write_baseline(policy.write_baseline, found, as_json)
    if as_json:
        emit_json(
            {
                "models": [_model_json(p, r) for p, r in results],
                "unused_dims": unused,
                "summary": summary,
                "error": None,
            }
        )
    elif fmt == "sarif":
        click.echo(sarif_log(results))
    elif fmt == "github":
        write_commands(github_annotations(results))
    elif fmt == "html":
        click.echo(html_report(results, summary))
    elif len(results) > 1 or any(isinstance(r, Report) for _, r in results):
        _render_summary(console, summary)
    if summary["unreadable"]:
        exit_with(ExitCode.USAGE)
    if policy.write_baseline is None and any(
        fails(f.severity, policy.fail_on)
        for _, r in results
        if isinstance(r, Report)
        for f in r.findings
    ):
        exit_with(ExitCode.FINDINGS)
    exit_with(ExitCode.OK)


def _policy(
    fail_on: str | None,
    baseline: str | None,
    write: str | None,
    bindings: Sequence[DimBinding],
    as_json: bool,
    target: str | None = None,
) -> Policy:
    """Resolve the settings (command line, then [tool.bcast]); a usage error if they are bad."""
    try:
        return resolve_policy(
            fail_on.lower() if fail_on else None,
            baseline,
            write,
            dims_of_bindings(bindings),
            target=target,
        )
    except (ValueError, ModelError) as err:
        fail_usage(
            one_line(str(err)),
            command_path="bcast check",
            as_json=as_json,
            payload=check_skeleton(),
        )


def _write_baseline(path: str, found: Sequence[tuple[str, Report]], as_json: bool) -> None:
    try:
        count = write_baseline(path, found)
    except ModelError as err:
        fail_usage(str(err), command_path="bcast check", as_json=as_json, payload=None)
    click.echo(f"bcast: wrote the baseline {path} ({plural(count, 'finding')})", err=True)


def check_skeleton() -> dict[str, Any]:
    """Return check's JSON with every member empty (what a usage error fills in)."""
    summary = {**_summary([]), "baselined": 0}
    return {"models": [], "unused_dims": [], "summary": summary, "error": None}


def _without_weights(paths: Sequence[str]) -> list[str]:
    """Drop the ``.bin`` of an IR whose ``.xml`` is also named (``bcast check models/*``)."""
    named = {os.path.normcase(os.path.abspath(p)) for p in paths}
    kept = []
    for path in paths:
        stem, ext = os.path.splitext(path)
        xml = os.path.normcase(os.path.abspath(stem + ".xml"))
        if ext.lower() == ".bin" and xml in named:
            continue
        kept.append(path)
    return kept


def _counts(findings: Sequence[Finding]) -> dict[str, int]:
    return {s.value: sum(1 for f in findings if f.severity is s) for s in Severity}


def _summary(results: Sequence[tuple[str, Report | str]]) -> dict[str, int]:
    reports = [r for _, r in results if isinstance(r, Report)]
    findings = [f for r in reports for f in r.findings]
    counts = _counts(findings)
    return {
        "models": len(results),
        "nodes": sum(r.nodes for r in reports),
        "errors": counts["error"],
        "warnings": counts["warning"],
        "info": counts["info"],
        "unreadable": len(results) - len(reports),
    }


def _model_json(path: str, result: Report | str) -> dict[str, Any]:
    if isinstance(result, str):
        failure = error_json("unreadable", result)
        coverage = {"broadcasting_nodes": 0, "unchecked": [], "unmodelled": []}
        return {
            "path": path,
            "nodes": 0,
            "findings": [],
            "coverage": coverage,
            "domain": None,
            "error": failure,
        }
    out: dict[str, Any] = {**result.to_json(), "path": path}
    listed: list[dict[str, Any]] = out["findings"]
    for data, finding in zip(listed, result.findings, strict=True):
        data["fingerprint"] = fingerprint(finding)  # the baseline's and SARIF's key
    return out


def _render_report(console: Console, graph: Graph, report: Report) -> None:
    """One header line per model, then one block per finding (ruff-style), at any width.

    Text is wrapped between words only, so a shape or a name is never split, and lines
    carry no trailing padding; pictures are printed whole (the terminal folds them).
    """
    counts = _counts(report.findings)
    status = Text(f"({graph.format}, {plural(report.nodes, 'node')})  ")
    if not report.findings:
        status.append("no findings", style="green")
    parts = [
        (text, style)
        for count, text, style in (
            (counts["error"], plural(counts["error"], "error"), _STYLE[Severity.ERROR]),
            (counts["warning"], plural(counts["warning"], "warning"), _STYLE[Severity.WARNING]),
            (counts["info"], f"{counts['info']} info", _STYLE[Severity.INFO]),
        )
        if count
    ]
    for i, (text, style) in enumerate(parts):
        status.append(("" if i == 0 else ", ") + text, style=style)
    shown = safe_text(graph.path)
    path = Text(shown, style="bold")
    if len(shown) + 2 + len(status) <= console.width:
        _say(console, Text.assemble(path, "  ", status))
    else:  # a long path: the status goes on its own line rather than wrapping mid-phrase
        _say(console, path)
        _say(console, Text.assemble("  ", status))
    coverage = report.coverage()
    if coverage is not None:  # wrapped at spaces only: a node name is never split
        lines = textwrap.wrap(
            safe_text(coverage),
            width=max(console.width, 40) - 2,
            break_long_words=False,
            break_on_hyphens=False,
            subsequent_indent="  ",
        )
        for line in lines:
            _say(console, Text("  " + line, style=_STYLE[Severity.INFO]))
    for finding in report.findings:
        _render_finding(console, finding, graph.expressions)
    console.print()


def _say(console: Console, text: Text) -> None:
    console.print(text, soft_wrap=True)  # never re-wrapped or padded by rich


def _render_finding(
    console: Console, finding: Finding, expressions: Mapping[str, Expr] | None = None
) -> None:
    width = max(console.width, 40)
    label = f"{finding.severity.value}[{finding.kind}]"
    where = [safe_text(f"{finding.node or '-'} ({finding.op or '-'})")]
    if finding.mode:
        where.append(finding.mode)
    if finding.axis is not None:
        where.append(f"axis {finding.axis}")
    for k, line in enumerate(pack(where, width - 2, first=label + " ", sep=", ", indent="  ")):
        text = Text("  " if k == 0 else "    ")
        if k == 0:
            text.append(label, style=_STYLE[finding.severity])
            line = line[len(label) :]
        else:
            line = line.lstrip()
        text.append(line, style="bold")
        _say(console, text)
    if finding.inputs:
        # Dims standing for an exporter's expression are shown as it (Min(64, s41)).
        items = [
            safe_text(readable(f"{name or '-'} {shape}", expressions or {}))
            for name, shape in finding.inputs
        ]
        for line in pack(items, width - 4, first="inputs: ", sep="; "):
            _say(console, Text("    " + line))
    for line in textwrap.wrap(
        safe_text(finding.reason), width - 4, break_long_words=False, break_on_hyphens=False
    ):
        _say(console, Text("    " + line))
    for row in finding.picture:
        _say(console, Text(("      " + safe_text(row)).rstrip(), style="dim"))


def _render_summary(console: Console, summary: dict[str, int]) -> None:
    head = f"{plural(summary['models'], 'model')}, {plural(summary['nodes'], 'node')}:"
    parts = [
        (plural(summary["errors"], "error"), _STYLE[Severity.ERROR]),
        (plural(summary["warnings"], "warning"), _STYLE[Severity.WARNING]),
        (f"{summary['info']} info", _STYLE[Severity.INFO]),
    ]
    if summary["unreadable"]:
        parts.append((f"{summary['unreadable']} unreadable", "bold red"))
    if summary.get("baselined"):
        parts.append((f"{summary['baselined']} in the baseline", "dim"))
    lines = pack(
        [t for t, _ in parts], max(console.width, 40), first=head + " ", sep=", ", indent="  "
    )
    for k, line in enumerate(lines):
        text = Text(line)
        if k == 0:
            text.stylize("bold", 0, len(head))
        for word, style in parts:
            text.highlight_words([word], style)
        _say(console, text)
