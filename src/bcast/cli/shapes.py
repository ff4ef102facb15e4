"""The ``bcast shape`` and ``bcast explain`` commands: one rule call, then rendering.

Both commands parse their arguments, call `bcast.plan` once (through `Request.apply`) and
render the `Plan` or the `BroadcastError` it gives; they contain no rule. ``shape`` prints
the output shape, or the error whose picture is `bcast.core.errors.format_alignment`;
``explain`` hands over to `bcast.cli._explain`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from bcast.core.dim import MAX_DIM
from bcast.core.errors import BroadcastError, show_text
from bcast.core.modes import ALIASES, Mode
from bcast.core.shape import Shape

from ._explain import Request, explain_error_json, explain_json, render_error, render_plan
from ._output import (
    ExitCode,
    broadcast_error_json,
    emit_json,
    exit_with,
    export_recording,
    fail_usage,
    recording_console,
)
from ._output import output_format as resolve_format
from ._output import stdout_console as _stdout_console

__all__ = ["explain", "explain_skeleton", "shape", "shape_skeleton"]

_F = TypeVar("_F", bound=Callable[..., Any])

MODE_NAMES: tuple[str, ...] = (*(m.value for m in Mode), *ALIASES)
"""What ``--mode`` accepts: every `Mode` and its aliases, read from the enum (any case)."""

EXPLAIN_FORMATS: tuple[str, ...] = ("text", "json", "svg", "html")
"""What ``bcast explain --format`` takes."""


# -- arguments -----------------------------------------------------------------------------

if TYPE_CHECKING:  # click 8.5 makes ParamType generic; older clicks cannot subscript it
    _ShapeParam = click.ParamType[Shape]
    _AxesParam = click.ParamType[tuple[int, ...]]
    _IntParam = click.ParamType[int]
else:
    _ShapeParam = _AxesParam = _IntParam = click.ParamType


class ShapeText(_ShapeParam):
    """A SHAPE argument in bcast's text form, brackets optional (``[2,3,?]`` or ``2,3,?``)."""

    name = "shape"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Shape:
        """Parse the text form with `Shape.parse`; malformed text is a usage error."""
        if isinstance(value, Shape):
            return value
        try:
            return Shape.parse(value)
        except BroadcastError as err:
            self.fail(err.reason, param, ctx)


class AxesMappingText(_AxesParam):
    """An ``--axes-mapping`` value: integers separated by commas or spaces, brackets optional.

    Only the syntax is checked here; whether the mapping suits the shapes (length, strictly
    increasing, in range) is the explicit rule's to say.
    """

    name = "axes"
    _INT = re.compile(r"-?[0-9]+")

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, ...]:
        """Parse ``1,2`` / ``1 2`` / ``[1, 2]`` / ``[]``; anything else is a usage error."""
        if isinstance(value, tuple):
            return value
        body = str(value).strip()
        if body.startswith("[") and body.endswith("]"):
            body = body[1:-1].strip()
        parts = re.split(r"\s*,\s*|\s+", body) if body else []
        if not all(self._INT.fullmatch(p) for p in parts):
            self.fail(
                f"expected integers separated by commas or spaces, such as 1,2 (or [] for "
                "scalar data); "
                f"got {show_text(str(value))}",
                param,
                ctx,
            )
        return tuple(_checked_int(self, p, param, ctx) for p in parts)


class AxisInt(_IntParam):
    """An ``--axis`` value: an integer; a malformed one is quoted shortened in the error."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """Parse a decimal integer (``-1`` included)."""
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = str(value).strip()
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            self.fail(f"{show_text(text, 40)} is not a valid integer", param, ctx)
        return _checked_int(self, text, param, ctx)


_MAX_DIGITS = len(str(MAX_DIM))


def _checked_int(
    kind: click.ParamType[Any], text: str, param: click.Parameter | None, ctx: click.Context | None
) -> int:
    """Return ``int(text)`` for digits with a sign; past int64 is a usage error.

    Checked before ``int()``, which refuses more than 4300 digits with a ValueError.
    """
    if len(text.lstrip("+-").lstrip("0")) > _MAX_DIGITS:
        kind.fail(f"{show_text(text, 40)} is out of range (at most 2**63-1)", param, ctx)
    return int(text)


def _rule_options(command: _F) -> _F:
    """Add the options ``shape`` and ``explain`` share (one definition for both)."""
    options = [
        click.option(
            "--mode",
            type=click.Choice(MODE_NAMES, case_sensitive=False),
            default=Mode.NUMPY.value,
            show_default=True,
            help=(
                "The rule set, in any case (NUMPY as OpenVINO writes it). numpy (alias "
                "multidirectional) and none take any number of shapes; pdpd and "
                "unidirectional take A B (B broadcasts onto A); bidirectional and explicit "
                "take DATA TARGET."
            ),
        ),
        click.option(
            "--axis",
            type=AxisInt(),
            default=-1,
            show_default=True,
            metavar="K",
            help="pdpd only: the axis of A where B starts; -1 means rank(A) - rank(B).",
        ),
        click.option(
            "--axes-mapping",
            "axes_mapping",
            type=AxesMappingText(),
            default=None,
            metavar="I,J,...",
            help=(
                "explicit only: the target axis of each data axis, strictly increasing and "
                'separated by commas or spaces, e.g. 1,2 or "1 2" (brackets optional; [] for '
                "scalar data)."
            ),
        ),
        click.option(
            "--json",
            "as_json",
            is_flag=True,
            help=(
                "Print one JSON object on stdout instead of text; shapes in it are in the "
                'text form and a failure is described under "error".'
            ),
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


# -- one rule call -------------------------------------------------------------------------


def _is_usage(err: BroadcastError) -> bool:
    """Tell a parameter or input error (exit 2) from incompatible shapes (exit 1).

    The rules say which it is in `BroadcastError.kind`: ``"shapes"`` when the operands cannot
    broadcast, ``"parameter"`` for a bad operand count, ``--axis`` or ``--axes-mapping``.
    """
    return err.kind != "shapes"


def _request(
    shapes: tuple[Shape, ...], mode: str, axis: int, axes_mapping: tuple[int, ...] | None
) -> Request:
    return Request(shapes, Mode.parse(mode), axis, axes_mapping)


def shape_skeleton() -> dict[str, Any]:
    """Return shape's JSON with every member empty (what a usage error fills in)."""
    return {
        "mode": None,
        "shapes": [],
        "axis": None,
        "axes_mapping": None,
        "result": None,
        "error": None,
    }


def explain_skeleton() -> dict[str, Any]:
    """Return explain's JSON with every member empty (what a usage error fills in)."""
    return {
        **shape_skeleton(),
        "labels": [],
        "start_axis": None,
        "axes": [],
        "dropped": [],
        "notes": [],
    }


def _fail_usage(err: BroadcastError, request: Request, as_json: bool) -> None:
    if _is_usage(err):
        ctx = click.get_current_context()
        skeleton = explain_skeleton() if ctx.command.name == "explain" else shape_skeleton()
        fail_usage(
            err.summary,
            command_path=ctx.command_path,
            as_json=as_json,
            payload={**skeleton, **request.payload()},
        )


# -- bcast shape ---------------------------------------------------------------------------

_EXIT_HELP = (
    "Exit status: 0 the shapes broadcast; 1 they do not (dims that differ and are not 1, or "
    "an operand that does not fit: rank(B) > rank(A), B running past the end of A); 2 bad "
    "usage: an unknown option or mode, malformed SHAPE or --axes-mapping text, the wrong "
    "number of shapes for the mode, or a parameter the mode rejects whatever the dims "
    "(--axis with a mode other than pdpd, below -1 or beyond A's rank; --axes-mapping without "
    "explicit, not "
    "strictly increasing, of the wrong length or beyond the target's rank)."
)

_SHAPE_HELP = (
    "Each SHAPE is in bcast's text form: [2,3,4,5]; ? an unknown dim; 1..10 an interval (1.. "
    "without upper bound); N a symbol (an ONNX dim_param); [] a scalar; [...] unknown rank. "
    "The brackets are optional (2,3,?). Quote shapes in the shell: [ ] and ? are glob "
    "characters."
)


_SHAPE_COMMAND_HELP = f"""Print the shape that SHAPE... broadcast to under --mode.

{_SHAPE_HELP} With no SHAPE, numpy mode gives the scalar shape [].

The result is printed on stdout in the same text form, e.g. [N,4,8]. If the shapes cannot
broadcast, the explanation goes to stderr: the failing axis and why, and the shapes drawn as
the mode aligns them, with a caret under that axis.

{_EXIT_HELP}
"""

_EXPLAIN_COMMAND_HELP = f"""Show how SHAPE... broadcast under --mode, axis by axis.

Prints a table with one column per output axis and one row per operand (named by role: A
and B, data and target, or #0, #1, ...), the result row, and for each axis a sentence on
which operand is stretched there and why. If the shapes cannot broadcast, the table marks
the failing axis and the reason follows; that is the command's output, so it goes to stdout,
and the exit status is 1.

{_SHAPE_HELP}

{_EXIT_HELP}
"""


@click.command(
    "shape",
    help=_SHAPE_COMMAND_HELP,
    epilog="""\b
Examples:
  bcast shape "[2,1,5]" "[4,1]"                  prints [2,4,5]
  bcast shape "[N,1,8]" "1,4,?"                  prints [N,4,8]
  bcast shape "[2,3,4,5]" "[3,1]" --mode pdpd --axis 1
  bcast shape "[16]" "[1,16,50,50]" --mode explicit --axes-mapping 1
  bcast shape "[2,3]" "[4]" --json               exit 1, the error as JSON""",
)
@click.argument("shapes", metavar="SHAPE...", nargs=-1, type=ShapeText())
@_rule_options
def shape(
    shapes: tuple[Shape, ...],
    mode: str,
    axis: int,
    axes_mapping: tuple[int, ...] | None,
    as_json: bool,
) -> None:
    """Print the shape that SHAPE... broadcast to (the help text is `_SHAPE_COMMAND_HELP`)."""
    request = _request(shapes, mode, axis, axes_mapping)
    outcome = request.apply()
    if isinstance(outcome, BroadcastError):
        _fail_usage(outcome, request, as_json)
        if as_json:
            emit_json(
                {
                    **request.payload(),
                    "result": None,
                    "error": broadcast_error_json(outcome, kind="incompatible"),
                }
            )
        else:
            click.echo(str(outcome), err=True)
        exit_with(ExitCode.FINDINGS)
    if as_json:
        emit_json({**request.payload(), "result": str(outcome.output), "error": None})
    else:
        click.echo(str(outcome.output))


@click.command(
    "explain",
    help=_EXPLAIN_COMMAND_HELP,
    epilog="""\b
Examples:
  bcast explain "[2,3,4,5]" "[3,1]" --mode pdpd --axis 1
  bcast explain "[2,1,5]" "[4,1]"
  bcast explain "[16]" "[1,16,50,50]" --mode explicit --axes-mapping 1
  bcast explain "[2,3]" "[4]"                    exit 1, axis 1 marked
  bcast explain "[N,1]" "[1,4]" --json
  bcast explain "[2,1,5]" "[4,1]" --format svg > broadcast.svg""",
)
@click.argument("shapes", metavar="SHAPE...", nargs=-1, type=ShapeText())
@_rule_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(EXPLAIN_FORMATS, case_sensitive=False),
    default=None,
    help="text (the default), json (as --json), or the table drawn as an svg or html page.",
)
def explain(
    shapes: tuple[Shape, ...],
    mode: str,
    axis: int,
    axes_mapping: tuple[int, ...] | None,
    as_json: bool,
    output_format: str | None,
) -> None:
    """Show how SHAPE... broadcast, axis by axis (the help text is `_EXPLAIN_COMMAND_HELP`)."""
    fmt = resolve_format(
        output_format, as_json, command_path="bcast explain", skeleton=explain_skeleton
    )
    as_json = fmt == "json"
    request = _request(shapes, mode, axis, axes_mapping)
    outcome = request.apply()
    console = recording_console() if fmt in ("svg", "html") else _stdout_console()
    if isinstance(outcome, BroadcastError):
        _fail_usage(outcome, request, as_json)
        if as_json:
            emit_json(explain_error_json(request, outcome))
        else:
            render_error(console, request, outcome)
    elif as_json:
        emit_json(explain_json(request, outcome))
    else:
        render_plan(console, request, outcome)
    if fmt in ("svg", "html"):
        click.echo(export_recording(console, fmt, "bcast explain " + request.title()))
    if isinstance(outcome, BroadcastError):
        exit_with(ExitCode.FINDINGS)
