"""The ``bcast verify`` command: run each broadcasting node in the runtimes and in bcast.

The verifier for the file type (`bcast.loading.verifier_for`: `bcast.onnx.verify` or
`bcast.openvino.verify`) runs the nodes; this module renders where they disagree. It
contains no rule.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from bcast.core.text import safe_text
from bcast.loading import verifier_for
from bcast.models import ModelError, Severity
from bcast.models.baseline import fails
from bcast.models.isolation import prestart
from bcast.models.verification import observe

from ._model_options import (
    dim_option,
    dim_text,
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
    print_trimmed,
    stderr_console,
    stdout_console,
)
from ._policy import configured, fail_on_option

if TYPE_CHECKING:
    from bcast.models.verification import NodeRun, Verification

__all__ = ["RUNTIMES", "verify", "verify_skeleton"]


RUNTIMES = ("onnxruntime", "openvino")


@click.command(
    "verify",
    epilog="""\b
Examples:
  bcast verify model.onnx
  bcast verify model.onnx --runtime onnxruntime --dim batch=3 --seed 7 --json
  bcast verify model.onnx --dim seq=1..512    (runs at seq=512)
  bcast verify model.xml""",
)
@click.argument("model", metavar="MODEL", type=click.Path(dir_okay=True))
@click.option(
    "--runtime",
    "runtimes",
    default=",".join(RUNTIMES),
    show_default=True,
    help="Comma-separated runtimes to compare with bcast (those installed are used).",
)
@dim_option
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the random inputs (0 or more).",
)
@limit_options
@fail_on_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def verify(
    model: str,
    runtimes: str,
    bindings: tuple[tuple[str, int], ...],
    seed: int,
    timeout: float,
    max_memory: int | None,
    fail_on: str | None,
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

    ONNX LayerNormalization and RMSNormalization, which bcast.ops lacks, run with bcast's
    broadcasting and NumPy's arithmetic. A broadcasting node that cannot be run is skipped
    with a note: the legacy `broadcast` attribute of opset 6, no concrete shapes (an input
    of unknown rank, a computed target of unknown length), or inputs and outputs larger
    than half of --max-memory (checked before any input is drawn). Reading the model and
    the runtimes run in a separate process, limited by --timeout and --max-memory: a
    crash, a timeout or memory exhausted ends the run with one line (exit 2). ONNX
    external data is read only from files inside the model's folder. A --dim whose name
    no dim of the model has is reported with a warning.

    A node that fails in bcast and in every runtime at the sizes run is a finding too:
    they agree, but the model does not run there. A --dim range (seq=1..512) runs at its
    largest size (at LO for LO..); bcast check proves every size of it. The dims of a
    [tool.bcast] table in the nearest pyproject.toml apply too (a --dim wins).

    Exit status: 0 every runtime agrees with bcast on the nodes run (or the model has no
    broadcasting node), 1 disagreements found, a node that fails everywhere, or a harness
    error (bcast could not make a well-formed request of a runtime: its own bug, never
    reported as the runtime's; each is an error for --fail-on, so never keeps the status
    0), 2 unusable input: unreadable, or broadcasting nodes of which none could be run and
    compared (nothing verified; the report still says why for each node).
    """
    wanted = [r.strip() for r in runtimes.split(",") if r.strip()]
    unknown = [r for r in wanted if r not in RUNTIMES]
    if unknown or not wanted:
        fail_usage(
            f"--runtime takes {', '.join(RUNTIMES)}; got {runtimes!r}",
            command_path="bcast verify",
            as_json=as_json,
            payload={**verify_skeleton(), "model": model, "seed": seed},
        )
    verifier: Callable[..., Verification]
    request = (model, wanted, seed)
    try:
        verifier = verifier_for(model)
    except ModelError as err:
        _unusable(request, one_line(str(err)), as_json)
    try:
        wanted_dims, fail_on = configured(dims_of_bindings(bindings), fail_on)
        dims, ran_at = _sizes(wanted_dims)
    except ValueError as err:
        fail_usage(
            one_line(str(err)),
            command_path="bcast verify",
            as_json=as_json,
            payload={**verify_skeleton(), "model": model, "seed": seed},
        )
    try:
        with (
            model_limits(timeout, max_memory),
            _progress(model, show=not as_json and sys.stderr.isatty()),
        ):
            prestart()  # the worker's interpreter starts while the model is parsed
            outcome = verifier(model, runtimes=wanted, dims=dims, seed=seed)
    except ModelError as err:
        _unusable(request, one_line(str(err)), as_json)
    except Exception as err:  # a peer library failing on hostile input: still one line
        message = f"{model}: cannot use the model ({type(err).__name__}: {err})"
        _unusable(request, one_line(message), as_json)
    warn_unused(outcome.unused_dims, dims)
    outcome.notes[:0] = ran_at
    nothing = None
    if outcome.nothing_verified and not outcome.disagreements:
        reason = "no broadcasting node could be run and compared with a runtime"
        nothing = f"{model}: nothing verified: {reason}"
    if as_json:
        failure = None if nothing is None else error_json("nothing-verified", nothing)
        emit_json({**outcome.to_json(), "error": failure})
    else:
        _render_verify(stdout_console(), outcome)
    found = outcome.disagreements or outcome.harness_errors or outcome.failing
    if found and fails(Severity.ERROR, fail_on):  # each of them is an error
        exit_with(ExitCode.FINDINGS)
    if nothing is not None:
        click.echo(f"bcast: {nothing}", err=True)
        exit_with(ExitCode.USAGE)
    exit_with(ExitCode.OK)


def verify_skeleton() -> dict[str, Any]:
    """Return verify's JSON with every member empty (filled in by what is known)."""
    return {
        "model": "",
        "runtimes": [],
        "seed": None,
        "nodes": [],
        "skipped": [],
        "notes": [],
        "unused_dims": [],
        "summary": {
            "nodes": 0,
            "compared": 0,
            "skipped": 0,
            "disagreements": 0,
            "harness_errors": 0,
            "failing": 0,
        },
        "error": None,
    }


def _sizes(dims: Mapping[str, int | tuple[int, int | None]]) -> tuple[dict[str, int], list[str]]:
    """Run a --dim range at one size: its largest (its smallest when it has no upper bound).

    Returns the sizes and the notes that say so.
    """
    sizes: dict[str, int] = {}
    notes = []
    for name, value in dims.items():
        if isinstance(value, int):
            sizes[name] = value
            continue
        lo, hi = value
        sizes[name] = lo if hi is None else hi
        notes.append(
            f"--dim {name}={dim_text(value)}: run at {name}={sizes[name]} (the range's "
            f"{'smallest' if hi is None else 'largest'} size); bcast check --dim "
            f"{name}={dim_text(value)} proves every size of it"
        )
    return sizes, notes


def _unusable(request: tuple[str, list[str], int], message: str, as_json: bool) -> NoReturn:
    model, runtimes, seed = request
    click.echo(f"bcast: {message}", err=True)
    if as_json:
        emit_json(
            {
                **verify_skeleton(),
                "model": model,
                "runtimes": runtimes,
                "seed": seed,
                "error": error_json("unreadable", message),
            }
        )
    exit_with(ExitCode.USAGE)


@contextmanager
def _progress(model: str, *, show: bool) -> Iterator[None]:
    """Show, on a terminal's stderr, each node as the verifier finishes it."""
    if not show:
        yield
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=stderr_console(), transient=True) as bar:
        name = os.path.basename(model)
        task = bar.add_task(f"verifying {name}", total=None)
        done = [0]

        def seen(node: str, op: str) -> None:
            done[0] += 1
            text = f"verifying {name}: {plural(done[0], 'node')} done, last {node} ({op})"
            bar.update(task, description=text)

        with observe(seen):
            yield


def _render_verify(console: Console, outcome: Verification) -> None:
    status = (
        f"({plural(len(outcome.nodes), 'broadcasting node')} run in "
        f"{', '.join(outcome.runtimes) or 'no runtime'}; seed {outcome.seed})"
    )
    path = safe_text(outcome.path)
    if len(path) + 2 + len(status) <= console.width:
        console.print(Text.assemble((path, "bold"), "  ", status), soft_wrap=True)
    else:  # the path alone, then the status wrapped between words
        console.print(Text(path, style="bold"), soft_wrap=True)
        for line in textwrap.wrap(status, max(console.width, 40) - 2, break_long_words=False):
            console.print(Text("  " + line), soft_wrap=True)
    for note in outcome.notes:
        console.print(Text(f"  note: {safe_text(note)}", style="cyan"))
    table = _table(outcome)
    unbounded = console.options.update_width(1 << 20)  # its natural width, not the console's
    if outcome.nodes and Measurement.get(console, unbounded, table).maximum <= console.width:
        print_trimmed(console, table)
    else:  # the table would fold names and shapes: a block per node instead
        for node in outcome.nodes:
            _render_block(console, node, outcome.runtimes)
    _render_outcome(console, outcome)


def _table(outcome: Verification) -> Table:
    """Lay the nodes out as a table: a row per node, a column per runtime."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("node", overflow="fold")
    table.add_column("op", no_wrap=True)
    table.add_column("inputs", overflow="fold")
    table.add_column("bcast", overflow="fold")
    for name in outcome.runtimes:
        table.add_column(name, overflow="fold")
    for node in outcome.nodes:
        inputs = "\n".join(safe_text(f"{n} {s}") for n, s in node.inputs)
        op = safe_text(node.op) + (f"\n{safe_text(node.attributes())}" if node.mode else "")
        bcast_text = safe_text(node.results["bcast"].text())
        cells: list[str | Text] = [safe_text(node.node), op, inputs, bcast_text]
        for name in outcome.runtimes:
            result = node.results.get(name)
            comparison = node.comparisons.get(name)
            text = Text(safe_text(result.text()) if result else "-")
            detail = safe_text(comparison.detail) if comparison is not None else ""
            if comparison is not None and comparison.harness:
                text = Text(f"{text.plain}\n! {detail}", style="bold magenta")
            elif comparison is not None and not comparison.agree:
                text = Text(f"{text.plain}\n≠ {detail}", style="bold red")
            cells.append(text)
        table.add_row(*cells)
    return table


def _render_block(console: Console, node: NodeRun, runtimes: Sequence[str]) -> None:
    """One node in lines of at most the console's width, a name or a shape never split."""
    width = max(console.width, 40)
    head = [safe_text(f"{node.node} ({node.op})")] + ([node.attributes()] if node.mode else [])
    for k, line in enumerate(pack(head, width, first="", sep=", ", indent="  ")):
        console.print(Text(line.lstrip() if k == 0 else line, style="bold"), soft_wrap=True)
    items = [safe_text(f"{name} {shape}") for name, shape in node.inputs]
    for line in pack(items, width - 4, first="inputs: ", sep="; "):
        console.print(Text("    " + line), soft_wrap=True)
    texts = {"bcast": node.results["bcast"].text()}
    texts.update({name: r.text() for name in runtimes if (r := node.results.get(name))})
    if len(set(texts.values())) == 1:  # the usual case: one result, every runtime's
        _say(console, f"results: {texts['bcast']} ({', '.join(texts)})", width, subsequent="  ")
    else:
        for name, text in texts.items():
            _say(console, f"{name}: {text}", width)
    for name in runtimes:
        comparison = node.comparisons.get(name)
        if comparison is None or (comparison.agree and not comparison.harness):
            continue
        mark, style = ("!", "bold magenta") if comparison.harness else ("≠", "bold red")
        _say(console, f"{mark} {name}: {comparison.detail}", width, style=style)


def _say(console: Console, text: str, width: int, style: str = "", subsequent: str = "") -> None:
    """Print ``text`` indented by 4, wrapped between words within ``width``."""
    lines = textwrap.wrap(
        safe_text(text),
        width - 4,
        break_long_words=False,
        break_on_hyphens=False,
        subsequent_indent="  " + subsequent,
    )
    for line in lines:
        console.print(Text("    " + line, style=style), soft_wrap=True)


def _render_outcome(console: Console, outcome: Verification) -> None:
    """Print the closing lines: disagreements, harness errors, or that all runtimes agree.

    Then the nodes that fail in bcast and in every runtime (they agree; the model fails).
    """
    skipped = (  # never "every runtime agrees" without what was not compared
        f"; {plural(len(outcome.skipped), 'broadcasting node')} not compared (see the notes)"
        if outcome.skipped
        else ""
    )
    if outcome.harness_errors:
        line = (
            f"{plural(outcome.harness_errors, 'harness error')}: bcast could not run a node "
            "in a runtime (bcast's own error, not the runtime's)"
        )
        console.print(Text(line, style="bold magenta"))
    if outcome.disagreements:
        line = plural(outcome.disagreements, "disagreement") + " found" + skipped
        console.print(Text(line, style="bold red"))
    elif outcome.harness_errors:
        console.print(Text("no disagreement found" + skipped, style="bold magenta"))
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
    if outcome.failing:
        named = ", ".join(safe_text(f"{n.node} ({n.op})") for n in outcome.failing[:3])
        more = f" and {len(outcome.failing) - 3} more" if len(outcome.failing) > 3 else ""
        path = safe_text(outcome.path)
        line = (
            f"{plural(len(outcome.failing), 'node')} "
            f"{'fails' if len(outcome.failing) == 1 else 'fail'} in bcast and in every runtime at "
            f"these sizes: {named}{more}. The model does not run there; bcast domain "
            f"{path} says for which sizes it does, and bcast check {path} "
            "--dim NAME=LO..HI proves a range"
        )
        width = max(console.width, 40)
        for part in textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False):
            console.print(Text(part, style="bold red"), soft_wrap=True)
