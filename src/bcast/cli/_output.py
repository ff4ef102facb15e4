"""Rendering and exit helpers shared by every ``bcast`` command.

The conventions of the command line live here, once, so that each command only computes a
result and hands it over:

- stdout carries the command's product: the rich rendering, or exactly one JSON object under
  ``--json`` (built as a dict and dumped once by `emit_json`);
- stderr carries diagnostics; a usage error is one line, never a traceback;
- no colour when the stream is not a terminal (rich's own detection) or with ``--json``
  (nothing but the JSON is written to stdout then);
- exit codes are `ExitCode`: 0 clean, 1 findings (incompatible shapes, model findings,
  disagreements), 2 bad usage, unreadable input or an internal error, 130 interrupted. A
  domain outcome never uses 2, and a crash never uses 1;
- every JSON object carries ``schema_version`` and has one shape per command whatever the
  outcome (the JSON Schemas in ``bcast/cli/schemas/``); ``error`` is null or the one error
  object of `error_json`;
- a stream that cannot encode a symbol gets an ASCII stand-in (``->`` for ``→``), never a
  UnicodeEncodeError; a closed pipe (``| head -1``) ends the command quietly.
"""

from __future__ import annotations

import codecs
import html
import io
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import Any, ClassVar, Final, NoReturn

import click
from rich.console import Console, RenderableType
from rich.measure import Measurement

from bcast.core.errors import BroadcastError

from ._safe_output import guarded_streams, safe_json

__all__ = [
    "SCHEMA_VERSION",
    "BcastGroup",
    "ExitCode",
    "broadcast_error_json",
    "emit_json",
    "error_json",
    "exit_with",
    "export_recording",
    "fail_usage",
    "load_schema",
    "pack",
    "print_trimmed",
    "print_unclipped",
    "recording_console",
    "stderr_console",
    "stdout_console",
]

_JSON_EMITTED = "bcast.json_emitted"

SCHEMA_VERSION: Final = 1
"""The version of every command's JSON (``schema_version``); raised on incompatible change."""

# What a stream that cannot encode bcast's symbols shows instead (see `_ascii_fallback`).
_ASCII: Final = {
    "→": "->",
    "←": "<-",
    "✗": "x",
    "·": ".",
    "─": "-",
    "━": "-",
    "∈": "in",
    "≠": "!=",
    "…": "...",
    "≤": "<=",
    "≥": ">=",
    "—": "--",
}


class ExitCode(IntEnum):
    """Exit statuses of every ``bcast`` command."""

    OK = 0
    """Clean: the shapes broadcast, the model has no findings, the runtimes agree."""
    FINDINGS = 1
    """A domain outcome: incompatible shapes, model findings, runtime disagreements."""
    USAGE = 2
    """Bad usage, unreadable input, or an internal error (click's code for usage errors)."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT, as shells report it)."""


# -- consoles ------------------------------------------------------------------------------


def _console(stream: Any) -> Console:
    # Created per call, not at import: click's test runner swaps sys.stdout per invocation.
    # markup=False: shape text such as "[n,3]" must never be read as rich markup;
    # highlight=False: no guessed colouring of numbers. Rich turns colour off by itself when
    # the stream is not a terminal (and honours NO_COLOR); COLUMNS sets the width there.
    console = Console(file=stream, markup=False, highlight=False, emoji=False)
    console.on_broken_pipe = _quiet_broken_pipe  # type: ignore[method-assign]
    return console


def stdout_console() -> Console:
    """Return a rich console on stdout, for a command's human-readable product."""
    return _console(sys.stdout)


def stderr_console() -> Console:
    """Return a rich console on stderr, for diagnostics."""
    return _console(sys.stderr)


def recording_console() -> Console:
    """Return a console that records what it renders, for `export_recording`."""
    return Console(
        file=io.StringIO(),
        record=True,
        width=100,
        markup=False,
        highlight=False,
        emoji=False,
        force_terminal=True,
        color_system="truecolor",
    )


def export_recording(console: Console, fmt: str, title: str) -> str:
    """Return what a `recording_console` rendered as a self-contained SVG or HTML page."""
    if fmt == "svg":  # rich's page would fetch its font from a CDN when opened: local only
        return _WEB_FONT.sub("", console.export_svg(title=title))
    page = console.export_html(inline_styles=True)
    return page.replace("<head>", f"<head>\n<title>{html.escape(title)}</title>", 1)


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
    print_trimmed(console, renderable)


_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")
_WEB_FONT = re.compile(r',\s*url\("(?:https?:)?//[^"]*"\)\s*format\("[^"]*"\)')


def print_trimmed(console: Console, renderable: RenderableType) -> None:
    """Print ``renderable`` without the spaces rich pads table rows with at their end."""
    if console.record:  # exported as a picture: what was drawn is kept as drawn
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    text = "".join(_TRAILING.sub(r"\1", line) + "\n" for line in captured.get().splitlines())
    console.file.write(text)


def pack(
    items: Sequence[str], width: int, *, first: str, sep: str, indent: str | None = None
) -> list[str]:
    """Lay ``items`` out in lines of at most ``width``, never splitting one.

    Lines after the first start with ``indent`` (default: as wide as ``first``).

    >>> pack(["X [2,3]", "slope [3,1]"], 20, first="inputs: ", sep="; ")
    ['inputs: X [2,3];', '        slope [3,1]']
    """
    lines: list[str] = []
    current = first
    indent = " " * len(first) if indent is None else indent
    for k, item in enumerate(items):
        piece = item + (sep.rstrip() if k < len(items) - 1 else "")
        if k and len(current) + 1 + len(piece) > width:  # a line holds one item at least
            lines.append(current)
            current = indent + piece
        else:
            current += ("" if current.endswith(" ") else " ") + piece
    lines.append(current)
    return lines


# -- JSON ----------------------------------------------------------------------------------


def load_schema(command: str) -> dict[str, Any]:
    """Return the JSON Schema of a command's ``--json`` output (shipped in the package).

    >>> load_schema("shape")["properties"]["schema_version"]
    {'const': 1}
    """
    from importlib import resources  # pathlib, tempfile...: only when a schema is read

    folder = resources.files("bcast.cli").joinpath("schemas")
    text = folder.joinpath(f"{command}.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def emit_json(obj: Mapping[str, Any]) -> None:
    """Write ``obj`` to stdout as one JSON object, dumped in one go, with ``schema_version``.

    A command calls this exactly once per invocation (checked when a click context is
    active), so that stdout under ``--json`` always parses as a single object.

    Examples
    --------
    >>> emit_json({"mode": "numpy", "shapes": ["[2,1]", "[3]"], "result": "[2,3]"})
    {
      "schema_version": 1,
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
    body = {"schema_version": SCHEMA_VERSION, **obj}
    click.echo(safe_json(body))  # JSON's escapes for what a terminal or CI would act on


def error_json(
    kind: str,
    message: str,
    *,
    summary: str | None = None,
    reason: str | None = None,
    axis: int | None = None,
    operand: int | None = None,
) -> dict[str, Any]:
    """Return the one ``"error"`` object of every command's JSON.

    Parameters
    ----------
    kind : {"incompatible", "usage", "unreadable", "nothing-verified"}
        What failed: shapes that do not broadcast (exit 1), bad usage, a model that cannot
        be read or used, a verify that could compare nothing (all exit 2).
    message : str
        The whole message, as the text output prints it.
    summary, reason : str, optional
        Its first line, and the reason alone (default: the message).
    axis, operand : int, optional
        The failing output axis and the operand to blame, where there is one.

    Examples
    --------
    >>> error_json("unreadable", "m.onnx: no such file")["axis"] is None
    True
    """
    return {
        "kind": kind,
        "message": message,
        "summary": summary if summary is not None else message,
        "reason": reason if reason is not None else message,
        "axis": axis,
        "operand": operand,
    }


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
    return error_json(
        kind,
        str(err),
        summary=err.summary,
        reason=err.reason,
        axis=err.axis,
        operand=err.operand,
    )


# -- exits ---------------------------------------------------------------------------------


def exit_with(code: ExitCode) -> NoReturn:
    """Leave the command with ``code`` (through click, so tests and the runner see it)."""
    raise click.exceptions.Exit(int(code))


def output_format(
    chosen: str | None,
    as_json: bool,
    *,
    command_path: str,
    skeleton: Callable[[], Mapping[str, Any]],
) -> str:
    """Resolve ``--format`` and its alias ``--json`` (both given must agree); lower case.

    ``skeleton`` gives the command's JSON with every member empty, for the usage error.
    """
    fmt = (chosen or ("json" if as_json else "text")).lower()
    if as_json and fmt != "json":
        fail_usage(
            f"--json is --format json; got both --json and --format {chosen}",
            command_path=command_path,
            as_json=True,
            payload=skeleton(),
        )
    return fmt


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
    text = message.rstrip()
    end = "" if text.endswith((".", "?", "!")) else "."  # never "?." or ".."
    line = f"Error: {text}{end}{hint}"
    click.echo(" ".join(line.split()), err=True)  # one line, whatever the message held
    if as_json:
        emit_json({**(payload or {}), "error": error_json("usage", message)})


def _ascii_fallback(error: UnicodeError) -> tuple[str, int]:
    """Encode-error handler: bcast's symbols as ASCII, anything else as ``?``."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    char = error.object[error.start]
    return _ASCII.get(char, "?"), error.start + 1


codecs.register_error("bcast-ascii", _ascii_fallback)


def _tolerant_streams() -> None:
    """Let stdout and stderr write what their encoding lacks as ASCII stand-ins."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            reconfigure(errors="bcast-ascii")


def _quiet_broken_pipe() -> NoReturn:
    """Stop without a word: the reader went away (``bcast check ... | head -1``)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the flush at exit must not fail again
    except (OSError, ValueError, AttributeError):  # pragma: no cover - no real stdout
        pass
    sys.exit(128 + 13)  # as a process ended by SIGPIPE


class BcastGroup(click.Group):
    """A click group whose usage errors are one line on stderr (and JSON under ``--json``).

    Click prints a usage error as the usage line, a hint and the message over four lines,
    and nothing on stdout. bcast promises one clear line, and one JSON object on stdout
    whenever ``--json`` is given (of the command's own shape: ``json_skeletons``), even
    when the arguments did not parse. ``bcast`` alone prints the help. Ctrl-C exits 130, a
    closed pipe ends quietly, and an internal error exits 2 with its traceback.
    """

    json_skeletons: ClassVar[dict[str, Callable[[], dict[str, Any]]]] = {}
    """Per command, its JSON with every member empty: what a usage error fills in."""

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
        _tolerant_streams()
        with guarded_streams():  # no line a terminal or a CI log would act on
            self._run(argv, prog_name, complete_var, **extra)

    def _run(
        self, argv: list[str], prog_name: str | None, complete_var: str | None, **extra: Any
    ) -> NoReturn:
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            sys.stdout.flush()
        except click.exceptions.NoArgsIsHelpError as err:
            err.show()  # the help, whole, as click shows it
            sys.exit(ExitCode.USAGE)
        except click.UsageError as err:
            self._usage(err, argv, prog_name)
        except click.ClickException as err:
            err.show()
            sys.exit(err.exit_code)
        except (click.Abort, KeyboardInterrupt):
            click.echo("bcast: interrupted", err=True)
            sys.exit(ExitCode.INTERRUPTED)
        except BrokenPipeError:
            _quiet_broken_pipe()
        except Exception as err:  # a bug in bcast or a peer: exit 2, never the 1 of findings
            traceback.print_exc()
            click.echo(f"bcast: internal error: {type(err).__name__}: {err}", err=True)
            sys.exit(ExitCode.USAGE)
        # Non-standalone click returns the callback's value (None) or an Exit's code.
        sys.exit(code if isinstance(code, int) else ExitCode.OK)

    def _usage(self, err: click.UsageError, argv: list[str], prog_name: str | None) -> NoReturn:
        ctx = err.ctx
        path = ctx.command_path if ctx is not None else prog_name
        as_json = (
            "--json" in argv
            or any(a == "json" and argv[i - 1] == "--format" for i, a in enumerate(argv) if i)
            or "--format=json" in argv
        )
        name = ctx.command.name if ctx is not None and ctx.command is not self else None
        skeleton = self.json_skeletons.get(name or "", dict)()
        _report_usage(err.format_message(), command_path=path, as_json=as_json, payload=skeleton)
        sys.exit(ExitCode.USAGE)
