"""The ``bcast domain`` command: the input sizes for which a model runs.

It checks the model (`bcast.loading.check`) and renders the report's `Domain`: each input
dim's sizes with the node that cuts them, the relations between dims, the torch.export
``Dim`` lines and the OpenVINO ``model.reshape`` partial shapes. It contains no rule.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NoReturn

import click

from bcast.core.text import safe_text
from bcast.loading import check as check_model
from bcast.loading import is_ir
from bcast.models import ModelError, Severity
from bcast.models.baseline import fails
from bcast.models.domain import Domain, Imposed
from bcast.models.ranges import decide, split_dims

from ._model_options import (
    dim_option,
    dim_text,
    dims_of_bindings,
    limit_options,
    model_limits,
    one_line,
)
from ._output import ExitCode, emit_json, error_json, exit_with, fail_usage
from ._policy import configured, fail_on_option

__all__ = ["domain"]


@click.command(
    "domain",
    epilog="""\b
Examples:
  bcast domain model.onnx
  bcast domain model.onnx --dim seq=65
  bcast domain model.onnx --dim seq=1..512    (inside for every seq from 1 to 512?)
  bcast domain model.xml --json""",
)
@click.argument("model", metavar="MODEL")
@dim_option
@limit_options
@click.option(
    "--write-metadata",
    "metadata_path",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help=(
        "Write a copy of the ONNX model whose metadata_props carry the domain "
        "(bcast.domain: the JSON; bcast.dim.NAME: the sizes of each input dim)."
    ),
)
@fail_on_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def domain(
    model: str,
    bindings: tuple[tuple[str, int], ...],
    timeout: float,
    max_memory: int | None,
    metadata_path: str | None,
    fail_on: str | None,
    as_json: bool,
) -> None:
    """Say for which sizes of its input dims a model runs, and which node imposes each part.

    Every condition that shape propagation finds (broadcasts of every mode, MatMul and Gemm
    inner dims, MatMul batch dims, Concat's other axes, Reshape element counts against
    constant targets) is solved into sizes per input dim and relations between dims. Also
    printed: the torch.export Dim lines and the OpenVINO model.reshape partial shapes that
    say it.

    With --dim values, says whether that point is inside the domain and, when it is not,
    the first node that fails there. --dim NAME=LO..HI (or LO..) asks the same of every
    size in the range, and names the first size where a node fails. The dims of a
    [tool.bcast] table in the nearest pyproject.toml apply too (a --dim wins).

    Exit status: 0 the model runs (at the --dim point), 1 it runs for no sizes (or not at
    the --dim point; an error for --fail-on: never keeps the status 0), 2 unreadable input.
    """
    try:
        dims, fail_on = configured(dims_of_bindings(bindings), fail_on)
    except ValueError as err:
        payload = {"path": model, "domain": None, "point": None}
        fail_usage(
            one_line(str(err)), command_path="bcast domain", as_json=as_json, payload=payload
        )
    try:
        with model_limits(timeout, max_memory):  # the peers read the model in the worker
            report = check_model(model)
    except ModelError as err:
        _fail(model, one_line(str(err)), as_json)
    except Exception as err:  # a reader library failing on hostile input: still one line
        _fail(
            model,
            one_line(f"{model}: cannot read the model ({type(err).__name__}: {err})"),
            as_json,
        )
    found = report.domain
    if metadata_path is not None:
        if is_ir(model):
            _fail(model, f"{model}: --write-metadata writes ONNX models, not OpenVINO IR", as_json)
        from bcast.onnx.metadata import write_domain_metadata  # onnx: only to write

        try:
            write_domain_metadata(model, metadata_path, found)
        except (ModelError, OSError) as err:
            _fail(model, one_line(f"{model}: cannot write {metadata_path}: {err}"), as_json)
    failure = _failure(found, dims)
    unknown = [n for n in dims if found.dim(n) is None]
    if as_json:
        emit_json(
            {
                "path": model,
                "domain": found.to_json(),
                "point": {
                    "dims": {k: v if isinstance(v, int) else dim_text(v) for k, v in dims.items()},
                    "inside": failure is None,
                    "fails_at": None if failure is None else failure.to_json(),
                    "unknown_dims": unknown,
                    "undecided": len(found.undecided),
                }
                if dims
                else None,
                "error": None,
            }
        )
    else:
        _render(model, found.lines(), found.torch_lines(), found.openvino_shapes(), found)
        for name in unknown:
            click.echo(
                f"bcast: warning: --dim {name}: the model has no input dim {name!r}", err=True
            )
        if dims:
            point = safe_text(", ".join(f"{k}={dim_text(v)}" for k, v in dims.items()))
            if failure is None and found.undecided:  # as far as bcast modelled the model
                past = f"{len(found.undecided)} node{'s' * (len(found.undecided) != 1)}"
                verdict = f"at {point}: inside the domain, but not decided past {past}"
            elif failure is None:
                verdict = f"at {point}: inside the domain"
            else:
                where = safe_text(f"{failure}: {failure.reason}")
                verdict = f"at {point}: fails first at {where}"
            width = _width()
            click.echo("")
            for line in [verdict] if width is None else _fit(verdict, width):
                click.echo(line)
    if (found.is_empty or failure is not None) and fails(Severity.ERROR, fail_on):
        exit_with(ExitCode.FINDINGS)
    exit_with(ExitCode.OK)


def _failure(found: Domain, dims: Mapping[str, int | tuple[int, int | None]]) -> Imposed | None:
    """Return where the model fails at the --dim sizes, or anywhere in the --dim ranges."""
    points, ranges = split_dims(dims)
    failure = found.first_failure(points) if points else None
    if failure is not None or not ranges:
        return failure
    failing = decide(found, ranges, points).failing
    if not failing:
        return None
    imposed, at = next(iter(failing.values()))
    where = ", ".join(f"{k}={v}" for k, v in at.items())
    return replace(imposed, reason=f"fails at {where}: {imposed.reason}")


def _fail(model: str, message: str, as_json: bool) -> NoReturn:
    if as_json:
        error = error_json("unreadable", message)
        emit_json({"path": model, "domain": None, "point": None, "error": error})
    else:
        click.echo(f"bcast: {safe_text(message)}", err=True)
    exit_with(ExitCode.USAGE)


def _fit(text: str, width: int) -> list[str]:
    """Wrap ``text`` to ``width``, the lines after the first indented; no token is split.

    >>> _fit("at H=15: fails first at /4/Conv (Conv, axis 2): output size H//4", 30)
    ['at H=15: fails first at', '  /4/Conv (Conv, axis 2):', '  output size H//4']
    """
    return _wrapper(width, "  ").wrap(text) or [text]


def _wrapper(width: int, indent: str) -> textwrap.TextWrapper:
    """Return a wrapper to ``width`` that indents the lines after the first, splits no token."""
    return textwrap.TextWrapper(
        width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def _width() -> int | None:
    """Return the width to wrap at: a terminal's, or ``COLUMNS``; None when piped."""
    if "COLUMNS" in os.environ or sys.stdout.isatty():
        return max(shutil.get_terminal_size((100, 24)).columns, 40)
    return None  # a pipe or a file: one line per part, for grep


def _wrapped(line: str, width: int | None) -> list[str]:
    """Fit a part to ``width``: its sizes first, then each node that imposes it, indented.

    >>> _wrapped("seq  1..64    <- add (Add, axis 1): s <= 64; mul (Mul): t", 30)
    ['seq  1..64', '    <- add (Add, axis 1): s <=', '       64', '    <- mul (Mul): t']
    >>> _wrapped("h  8..    <- /model/a_long_node/Conv (Conv): fits", 20)[1]
    '    <- /model/a_long_node/Conv'
    """
    if width is None or len(line) <= width:
        return [line]
    head, sep, by = line.partition("    <- ")
    fit = _wrapper(width, "    ")
    out = fit.wrap(head) or [head]
    fit.initial_indent, fit.subsequent_indent = "    <- ", "       "
    for part in by.split("; ") if sep else ():
        out += fit.wrap(part)  # the arrow is the indent: a long node name stays beside it
    return out


def _render(
    model: str, lines: list[str], torch: list[str], shapes: dict[str, str], found: Any
) -> None:
    width = _width()
    click.echo(f"{safe_text(model)}: the model runs for")
    for line in lines or ["(no symbolic input dims)"]:
        for part in _wrapped(safe_text(line), None if width is None else width - 2):
            click.echo(f"  {part}")
    if found.is_empty:
        return
    # Where nodes were not decided, the lines below hold only what was: say so at each
    partial = (
        f" (only what was decided: not decided beyond {len(found.undecided)} node"
        f"{'s' if len(found.undecided) != 1 else ''}, above)"
        if found.undecided
        else ""
    )
    click.echo(f"\ntorch.export{partial}:")
    for line in torch:
        click.echo(f"  {safe_text(line)}")
    if shapes:
        click.echo(f"\nOpenVINO{partial}:")
        click.echo(f"  model.reshape({safe_text(json.dumps(shapes))})")
    text = "not collected: " + "; ".join(found.not_collected)
    click.echo("")
    for part in [text] if width is None else textwrap.wrap(text, width, subsequent_indent="  "):
        click.echo(part)
