"""Rendering and exit helpers shared by every ``bcast`` command.

The conventions of the command line live here, once, so that each command only computes a
result and hands it over:

- stdout carries the command's product: the rich rendering, or exactly one JSON object under
  ``--json`` (built as a dict and dumped once by `emit_json`);
- stderr carries diagnostics; a usage error is one line, never a traceback;
- no colour when the stream is not a terminal (rich's own detection) or with ``--json``
  (nothing but the JSON is written to stdout then);
- exit codes are `ExitCode`: 0 clean, 1 findings (incompatible shapes, model findings,
  disagreements), 2 bad usage or unreadable input. A domain outcome never uses 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from enum import IntEnum
from typing import Any, NoReturn

import click
from rich.console import Console, RenderableType
from rich.measure import Measurement

from bcast.core.errors import BroadcastError

__all__ = [
    "BcastGroup",
    "ExitCode",
    "broadcast_error_json",
    "emit_json",
    "exit_with",
    "fail_usage",
    "print_unclipped",
    "stderr_console",
    "stdout_console",
]

_JSON_EMITTED = "bcast.json_emitted"


class ExitCode(IntEnum):
    """Exit statuses of every ``bcast`` command."""

    OK = 0
    """Clean: the shapes broadcast, the model has no findings, the runtimes agree."""
    FINDINGS = 1
    """A domain outcome: incompatible shapes, model findings, runtime disagreements."""
    USAGE = 2
    """Bad usage or unreadable input (click's own code for usage errors)."""


# -- consoles ------------------------------------------------------------------------------


def _console(stream: Any) -> Console:
    # Created per call, not at import: click's test runner swaps sys.stdout per invocation.
    # markup=False: shape text such as "[n,3]" must never be read as rich markup;
    # highlight=False: no guessed colouring of numbers. Rich turns colour off by itself when
    # the stream is not a terminal (and honours NO_COLOR); COLUMNS sets the width there.
    return Console(file=stream, markup=False, highlight=False, emoji=False)


def stdout_console() -> Console:
    """Return a rich console on stdout, for a command's human-readable product."""
    return _console(sys.stdout)


def stderr_console() -> Console:
    """Return a rich console on stderr, for diagnostics."""
    return _console(sys.stderr)


def print_unclipped(console: Console, renderable: RenderableType) -> None:
    """Print ``renderable`` whole: wider than the console rather than truncated.

    Rich shrinks a table that is wider than the console and truncates its cells (``1..…``);
    a report must never lose a dim, so a table that does not fit is printed at its natural
    width (the terminal wraps the long lines) by a console that differs only in width.
    """
    natural = Measurement.get(console, console.options.update_width(10_000), renderable)
    if natural.maximum > console.width:
        console = Console(
            file=console.file,
            width=natural.maximum,
            markup=False,
            highlight=False,
            emoji=False,
            force_terminal=console.is_terminal,
            color_system=console.color_system,  # type: ignore[arg-type]
            no_color=console.no_color,
        )
    console.print(renderable)


# -- JSON ----------------------------------------------------------------------------------


def emit_json(obj: Mapping[str, Any]) -> None:
    """Write ``obj`` to stdout as one JSON object, dumped in one go.

    A command calls this exactly once per invocation (checked when a click context is
    active), so that stdout under ``--json`` always parses as a single object.

    Examples
    --------
    >>> emit_json({"mode": "numpy", "shapes": ["[2,1]", "[3]"], "result": "[2,3]"})
    {
      "mode": "numpy",
      "shapes": [
        "[2,1]",
        "[3]"
      ],
      "result": "[2,3]"
    }
    """
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        root = ctx.find_root()
        assert not root.meta.get(_JSON_EMITTED), "a command emitted two JSON objects"
        root.meta[_JSON_EMITTED] = True
    click.echo(json.dumps(dict(obj), indent=2, ensure_ascii=False))


def broadcast_error_json(err: BroadcastError, *, kind: str) -> dict[str, Any]:
    """Return the ``"error"`` member for a `BroadcastError`.

    Parameters
    ----------
    err : BroadcastError
        The error; its fields are copied, its message (with the aligned picture) is kept
        whole in ``"message"``.
    kind : str
        ``"incompatible"`` (exit 1) or ``"usage"`` (exit 2).

    Returns
    -------
    dict
        ``{"kind", "message", "summary", "reason", "axis", "operand"}``; ``axis`` is the
        failing output axis (non-negative) or None, ``operand`` the index of the operand to
        blame or None.
    """
    return {
        "kind": kind,
        "message": str(err),
        "summary": err.summary,
        "reason": err.reason,
        "axis": err.axis,
        "operand": err.operand,
    }


def _usage_error_json(message: str) -> dict[str, Any]:
    return {
        "kind": "usage",
        "message": message,
        "summary": message,
        "reason": message,
        "axis": None,
        "operand": None,
    }


# -- exits ---------------------------------------------------------------------------------


def exit_with(code: ExitCode) -> NoReturn:
    """Leave the command with ``code`` (through click, so tests and the runner see it)."""
    raise click.exceptions.Exit(int(code))


def fail_usage(
    message: str,
    *,
    command_path: str | None,
    as_json: bool,
    payload: Mapping[str, Any] | None = None,
) -> NoReturn:
    """Report a usage error on one line of stderr and exit 2.

    Under ``--json`` stdout also gets the one JSON object: ``payload`` (what the command
    knows so far, e.g. its mode and shapes) with an ``"error"`` member of kind ``usage``.
    """
    _report_usage(message, command_path=command_path, as_json=as_json, payload=payload)
    exit_with(ExitCode.USAGE)


def _report_usage(
    message: str,
    *,
    command_path: str | None,
    as_json: bool,
    payload: Mapping[str, Any] | None = None,
) -> None:
    hint = f" Try '{command_path} -h' for help." if command_path else ""
    line = f"Error: {message.rstrip('.')}.{hint}"
    click.echo(" ".join(line.split()), err=True)  # one line, whatever the message held
    if as_json:
        emit_json({**(payload or {}), "error": _usage_error_json(message)})


class BcastGroup(click.Group):
    """A click group whose usage errors are one line on stderr (and JSON under ``--json``).

    Click prints a usage error as the usage line, a hint and the message over four lines,
    and nothing on stdout. bcast promises one clear line, and one JSON object on stdout
    whenever ``--json`` is given, even when the arguments did not parse. Everything else
    (exit codes, ``--help``, ``--version``) is click's.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; exit with `ExitCode` semantics (see the class note)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        # Taken from sys.argv here, so that click does not glob-expand "[2,3]" on Windows.
        argv = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as err:
            path = err.ctx.command_path if err.ctx is not None else prog_name
            _report_usage(err.format_message(), command_path=path, as_json="--json" in argv)
            sys.exit(ExitCode.USAGE)
        except click.ClickException as err:
            err.show()
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(ExitCode.FINDINGS)
        # Non-standalone click returns the callback's value (None) or an Exit's code.
        sys.exit(code if isinstance(code, int) else ExitCode.OK)
