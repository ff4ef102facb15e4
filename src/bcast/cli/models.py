"""The ``bcast check`` and ``bcast verify`` commands: models in, findings out.

``check`` reads each model with its own library (`bcast.onnx.reader`,
`bcast.openvino.reader`), runs `bcast.check.check_graph` and renders the findings.
``verify`` runs every broadcasting node of an ONNX model (`bcast.onnx.verify`) or an
OpenVINO IR (`bcast.openvino.verify`) in the installed runtimes and in bcast, and reports
where they disagree. Both contain no rule.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from bcast.check import (
    DEFAULT_MAX_ELEMENTS,
    Finding,
    Graph,
    ModelError,
    Report,
    Severity,
    check_graph,
)

if TYPE_CHECKING:
    from bcast._verify_common import Verification

from ._output import ExitCode, emit_json, exit_with, fail_usage, stderr_console, stdout_console

__all__ = ["check", "load_graph", "verify"]

PROGRESS_NODES = 200
"""Models with more nodes than this get a progress bar on stderr (a terminal, no --json)."""

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def load_graph(path: str) -> Graph:
    """Read a model file: OpenVINO IR for ``.xml``, ONNX otherwise.

    Raises
    ------
    ModelError
        With a one-line message, for anything that is not a readable model.
    """
    if os.path.isdir(path):
        raise ModelError(f"{path}: is a directory, not a model file")
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such file")
    if path.lower().endswith(".xml"):
        try:
            from bcast.openvino.reader import read_ir
        except ImportError as err:
            raise ModelError(f"{path}: reading OpenVINO IR needs openvino ({err})") from None
        return read_ir(path)
    try:
        from bcast.onnx.reader import read_onnx
    except ImportError as err:
        raise ModelError(f"{path}: reading ONNX needs the onnx package ({err})") from None
    return read_onnx(path)


def _safe_load(path: str) -> Graph | str:
    """Return the graph, or the one-line reason it cannot be read (never a traceback)."""
    try:
        return load_graph(path)
    except ModelError as err:
        return _one_line(str(err))
    except Exception as err:  # a reader library failing on hostile input: still one line
        return _one_line(f"{path}: cannot read the model ({type(err).__name__}: {err})")


def _one_line(text: str) -> str:
    first = " ".join(text.split())
    return first if len(first) <= 300 else first[:297] + "..."


if TYPE_CHECKING:  # click 8.5 makes ParamType generic; older clicks cannot subscript it
    _BindingParam = click.ParamType[tuple[str, int]]
else:
    _BindingParam = click.ParamType


class _DimBinding(_BindingParam):
    """``NAME=VALUE``: a value for a symbolic dim."""

    name = "NAME=VALUE"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, int]:
        if isinstance(value, tuple):
            return (str(value[0]), int(value[1]))
        text = str(value)
        name, sep, number = text.partition("=")
        if not sep or not name.strip() or not number.strip().isdigit():
            self.fail(f"expected NAME=VALUE with a non-negative integer VALUE; got {text!r}")
        return name.strip(), int(number)


_dim_option = click.option(
    "--dim",
    "bindings",
    multiple=True,
    type=_DimBinding(),
    help="Give a symbolic dim a value, e.g. --dim batch=4 (repeatable).",
)


def _dims(bindings: Sequence[tuple[str, int]]) -> dict[str, int]:
    return dict(bindings)


def _warn_unused(unused: Sequence[str], dims: dict[str, int]) -> None:
    """Warn on stderr about ``--dim`` bindings whose name no dim of the model has."""
    for name in unused:
        click.echo(
            f"bcast: warning: --dim {name}={dims[name]}: no input of the model has a dim "
            f"named {name!r}; ignored",
            err=True,
        )


def _ticks(progress: Progress, task: Any) -> Iterator[None]:
    while True:
        progress.advance(task)
        yield None


def _run_check(
    graph: Graph, dims: dict[str, int], max_elements: int, show_progress: bool
) -> Report:
    if not show_progress or len(graph.nodes) <= PROGRESS_NODES:
        return check_graph(graph, dims=dims, max_elements=max_elements)
    columns = (
        TextColumn("checking {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
    )
    with Progress(*columns, console=stderr_console(), transient=True) as progress:
        task = progress.add_task(os.path.basename(graph.path), total=len(graph.nodes))
        return check_graph(
            graph, dims=dims, max_elements=max_elements, progress=_ticks(progress, task)
        )


# -- bcast check ---------------------------------------------------------------------------


@click.command(
    "check",
    epilog="""\b
Examples:
  bcast check model.onnx
  bcast check model.onnx --dim batch=4 --dim seq=128
  bcast check model.xml --json""",
)
@click.argument("models", nargs=-1, required=True, metavar="MODEL...")
@_dim_option
@click.option(
    "--max-elements",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_ELEMENTS,
    show_default=True,
    help="Report broadcast outputs with more elements than this.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def check(
    models: tuple[str, ...],
    bindings: tuple[tuple[str, int], ...],
    max_elements: int,
    as_json: bool,
) -> None:
    """Check the broadcasting nodes of ONNX models and OpenVINO IR (.xml) files.

    Shapes are propagated through the whole graph: bcast's rules for every broadcasting
    node, the model's own shape inference for the rest. Findings are definite errors,
    conditions under which a node fails (symbols, intervals), unidirectional violations
    that ONNX shape inference does not check (PRelu slope, Gemm C), oversized Expand and
    Broadcast outputs, and OpenVINO attribute pitfalls (a pdpd node without an axis).

    A --dim whose name no dim of any model has is reported with a warning (and under
    "unused_dims" in the JSON).

    Exit status: 0 clean (info notes only), 1 findings, 2 unreadable input.
    """
    from bcast._verify_common import unused_dims

    dims = _dims(bindings)
    console = stdout_console()
    show_progress = not as_json and sys.stderr.isatty()
    results: list[tuple[str, Report | str]] = []
    graphs: list[Graph] = []
    for path in _without_weights(models):
        loaded = _safe_load(path)
        if isinstance(loaded, str):
            results.append((path, loaded))
            click.echo(f"bcast: {loaded}", err=True)
            continue
        graphs.append(loaded)
        try:
            report = _run_check(loaded, dims, max_elements, show_progress)
        except ModelError as err:
            results.append((path, _one_line(str(err))))
            click.echo(f"bcast: {_one_line(str(err))}", err=True)
            continue
        results.append((path, report))
        if not as_json:
            _render_report(console, loaded, report)
    unused = unused_dims(graphs, dims) if graphs else []
    _warn_unused(unused, dims)
    summary = _summary(results)
    if as_json:
        emit_json(
            {
                "models": [_model_json(p, r) for p, r in results],
                "unused_dims": unused,
                "summary": summary,
            }
        )
    elif len(results) > 1 or any(isinstance(r, Report) for _, r in results):
        _render_summary(console, summary)
    if summary["unreadable"]:
        exit_with(ExitCode.USAGE)
    if any(isinstance(r, Report) and r.failed for _, r in results):
        exit_with(ExitCode.FINDINGS)
    exit_with(ExitCode.OK)


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
        return {"path": path, "nodes": 0, "findings": [], "error": result}
    return {
        "path": path,
        "nodes": result.nodes,
        "findings": [f.to_json() for f in result.findings],
        "error": None,
    }


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _render_report(console: Console, graph: Graph, report: Report) -> None:
    counts = _counts(report.findings)
    status = Text(f"({graph.format}, {_plural(report.nodes, 'node')})  ")
    if not report.findings:
        status.append("no findings", style="green")
    parts = [
        (text, style)
        for count, text, style in (
            (counts["error"], _plural(counts["error"], "error"), _STYLE[Severity.ERROR]),
            (counts["warning"], _plural(counts["warning"], "warning"), _STYLE[Severity.WARNING]),
            (counts["info"], f"{counts['info']} info", _STYLE[Severity.INFO]),
        )
        if count
    ]
    for i, (text, style) in enumerate(parts):
        status.append(("" if i == 0 else ", ") + text, style=style)
    path = Text(graph.path, style="bold")
    if len(graph.path) + 2 + len(status) <= console.width:
        console.print(Text.assemble(path, "  ", status))
    else:  # a long path: the status goes on its own line rather than wrapping mid-phrase
        console.print(path, overflow="fold")
        console.print(Text.assemble("  ", status))
    if not report.findings:
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("node", overflow="fold")
    table.add_column("op", no_wrap=True)
    table.add_column("inputs", overflow="fold")
    table.add_column("reason", ratio=1, overflow="fold")
    for index, finding in enumerate(report.findings, 1):
        inputs = "\n".join(f"{n or '-'} {s}" for n, s in finding.inputs)
        table.add_row(
            str(index),
            Text(finding.severity.value, style=_STYLE[finding.severity]),
            finding.node or "-",
            finding.op or "-",
            inputs or "-",
            finding.reason,
        )
    console.print(table)
    for index, finding in enumerate(report.findings, 1):
        if not finding.picture:
            continue
        title = Text(f"  #{index} ", style="bold")
        title.append(f"{finding.node} ({finding.op})")
        if finding.mode:
            title.append(f", {finding.mode}")
        if finding.axis is not None:
            title.append(f", axis {finding.axis}")
        console.print(title)
        for row in finding.picture:
            console.print(Text("      " + row), soft_wrap=True)
    console.print()


def _render_summary(console: Console, summary: dict[str, int]) -> None:
    line = Text(
        f"{_plural(summary['models'], 'model')}, {_plural(summary['nodes'], 'node')}: ",
        style="bold",
    )
    line.append(_plural(summary["errors"], "error"), style=_STYLE[Severity.ERROR])
    line.append(", ")
    line.append(_plural(summary["warnings"], "warning"), style=_STYLE[Severity.WARNING])
    line.append(f", {summary['info']} info", style=_STYLE[Severity.INFO])
    if summary["unreadable"]:
        line.append(f", {summary['unreadable']} unreadable", style="bold red")
    console.print(line)


# -- bcast verify --------------------------------------------------------------------------

RUNTIMES = ("onnxruntime", "openvino")


@click.command(
    "verify",
    epilog="""\b
Examples:
  bcast verify model.onnx
  bcast verify model.onnx --runtime onnxruntime --dim batch=3 --seed 7 --json
  bcast verify model.xml""",
)
@click.argument("model", metavar="MODEL")
@click.option(
    "--runtime",
    "runtimes",
    default=",".join(RUNTIMES),
    show_default=True,
    help="Comma-separated runtimes to compare with bcast (those installed are used).",
)
@_dim_option
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the inputs.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def verify(
    model: str,
    runtimes: str,
    bindings: tuple[tuple[str, int], ...],
    seed: int,
    as_json: bool,
) -> None:
    """Run each broadcasting node of a model in the runtimes and in bcast; compare.

    Every broadcasting node (ONNX: Add ... Where, Gemm, PRelu, Expand; OpenVINO IR (.xml):
    the element-wise ops with auto_broadcast, Select, Broadcast) is run on its own, on
    random inputs of concrete shapes: symbols take their --dim value, or the value that
    makes the node valid (2 when nothing decides). Results are compared with bcast.ops;
    every disagreement is reported with the node, the shapes and the largest absolute
    difference, or which side raised an error. An IR runs in openvino only, with its
    attributes as written (a pdpd node without an axis: OpenVINO reads 0, bcast -1).

    A broadcasting node that cannot be run is skipped with a note: an operator bcast does
    not implement (ONNX Mod, BitShift, the Bitwise ops, GreaterOrEqual, LessOrEqual,
    LayerNormalization, RMSNormalization), the legacy `broadcast` attribute of opset 6, no
    concrete shapes, or inputs and outputs larger than the memory limit (the available
    memory; checked before any input is drawn). ONNX external data is read only from
    files inside the model's folder. A --dim whose name no dim of the model has is
    reported with a warning.

    Exit status: 0 every runtime agrees with bcast on the nodes run (or the model has no
    broadcasting node), 1 disagreements found, 2 unusable input: unreadable, or
    broadcasting nodes of which none could be run and compared (nothing verified; the
    report still says why for each node).
    """
    wanted = [r.strip() for r in runtimes.split(",") if r.strip()]
    unknown = [r for r in wanted if r not in RUNTIMES]
    if unknown or not wanted:
        fail_usage(
            f"--runtime takes {', '.join(RUNTIMES)}; got {runtimes!r}",
            command_path="bcast verify",
            as_json=as_json,
        )
    verifier: Callable[..., Verification]
    if model.lower().endswith(".xml"):
        from bcast.openvino.verify import verify_ir

        verifier = verify_ir
    else:
        try:
            from bcast.onnx.verify import verify_model
        except ImportError as err:
            _unusable(model, f"verify needs onnx ({err})", as_json)
        verifier = verify_model
    dims = _dims(bindings)
    try:
        outcome = verifier(model, runtimes=wanted, dims=dims, seed=seed)
    except ModelError as err:
        _unusable(model, _one_line(str(err)), as_json)
    except Exception as err:  # a peer library failing on hostile input: still one line
        message = f"{model}: cannot use the model ({type(err).__name__}: {err})"
        _unusable(model, _one_line(message), as_json)
    _warn_unused(outcome.unused_dims, dims)
    if as_json:
        emit_json(outcome.to_json())
    else:
        _render_verify(stdout_console(), outcome)
    if outcome.disagreements:
        exit_with(ExitCode.FINDINGS)
    if outcome.nothing_verified:
        reason = "no broadcasting node could be run and compared with a runtime"
        click.echo(f"bcast: {model}: nothing verified: {reason}", err=True)
        exit_with(ExitCode.USAGE)
    exit_with(ExitCode.OK)


def _unusable(model: str, message: str, as_json: bool) -> NoReturn:
    click.echo(f"bcast: {message}", err=True)
    if as_json:
        emit_json({"model": model, "error": message})
    exit_with(ExitCode.USAGE)


def _render_verify(console: Console, outcome: Verification) -> None:
    head = Text()
    head.append(outcome.path, style="bold")
    head.append(
        f"  ({_plural(len(outcome.nodes), 'broadcasting node')} run in "
        f"{', '.join(outcome.runtimes) or 'no runtime'}; seed {outcome.seed})"
    )
    console.print(head)
    for note in outcome.notes:
        console.print(Text(f"  note: {note}", style="cyan"))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("node", overflow="fold")
    table.add_column("op", no_wrap=True)
    table.add_column("inputs", overflow="fold")
    table.add_column("bcast", overflow="fold")
    for name in outcome.runtimes:
        table.add_column(name, overflow="fold")
    for node in outcome.nodes:
        inputs = "\n".join(f"{n} {s}" for n, s in node.inputs)
        op = f"{node.op}\n{node.attributes()}" if node.mode else node.op
        cells: list[str | Text] = [node.node, op, inputs, node.results["bcast"].text()]
        for name in outcome.runtimes:
            result = node.results.get(name)
            comparison = node.comparisons.get(name)
            text = Text(result.text() if result else "-")
            if comparison is not None and not comparison.agree:
                text = Text(f"{text.plain}\n≠ {comparison.detail}", style="bold red")
            cells.append(text)
        table.add_row(*cells)
    if outcome.nodes:
        console.print(table)
    skipped = f"; {len(outcome.skipped)} skipped (see the notes)" if outcome.skipped else ""
    if outcome.disagreements:
        line = _plural(outcome.disagreements, "disagreement") + " found" + skipped
        console.print(Text(line, style="bold red"))
    elif outcome.nothing_verified:
        line = (
            "nothing verified: no broadcasting node could be run and compared with a runtime"
            + skipped
        )
        console.print(Text(line, style="bold yellow"))
    elif not outcome.nodes:
        console.print(Text("no broadcasting node to verify", style="green"))
    else:
        console.print(Text("every runtime agrees with bcast" + skipped, style="green"))
