"""The ``bcast`` command line: presentation only, every answer comes from the library.

Commands are registered explicitly below, one line each; there is no discovery. Each
command's module is imported when that command runs (or when ``--help`` lists them), so
``bcast check`` does not pay for the operators, the engine or the verifier.

Exit status of every command: 0 clean, 1 findings (incompatible shapes, model findings,
runtime disagreements), 2 bad usage, unreadable input or an internal error, 130 interrupted.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

import click

import bcast
from bcast.loading import prestart_for

from ._output import BcastGroup

__all__ = ["main"]

# Commands, registered explicitly, one line each: name -> (module, command, JSON skeleton).
_COMMANDS: Final[dict[str, tuple[str, str, str | None]]] = {
    "shape": (".shapes", "shape", "shape_skeleton"),
    "explain": (".shapes", "explain", "explain_skeleton"),
    "check": (".check_cmd", "check", "check_skeleton"),
    "verify": (".verify_cmd", "verify", "verify_skeleton"),
    "domain": (".domain_cmd", "domain", None),
    "conformance": (".conformance_cmd", "conformance", "conformance_skeleton"),
}


def _attribute(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module, __name__), name)


class _Commands(BcastGroup):
    """The ``bcast`` group: a command's module is imported when the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and name not in _COMMANDS and not name.startswith("-"):
            import difflib  # only for a misspelt command: 8 ms on every command's path

            close = difflib.get_close_matches(name, list(_COMMANDS), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        prestart_for(args)  # where `bcast.__main__` has not: click's test runner
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = _COMMANDS.get(cmd_name)
        if found is None:
            return None
        command: click.Command = _attribute(found[0], found[1])
        return command


for _name, (_module, _, _skeleton) in _COMMANDS.items():
    if _skeleton is not None:
        BcastGroup.json_skeletons[_name] = (
            lambda m=_module, s=_skeleton: _attribute(m, s)()  # type: ignore[misc]
        )


@click.group(
    "bcast",
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  bcast shape "[2,1,5]" "[4,1]"
  bcast explain "[2,3,4,5]" "[3,1]" --mode pdpd --axis 1
  bcast shape "[N,1,8]" "[1,4,?]" --json""",
)
@click.version_option(bcast.__version__, "--version", prog_name="bcast")
def main() -> None:
    """Tensor broadcasting as the ONNX and OpenVINO specifications define it.

    Shapes are written in bcast's text form: [2,3,4,5]; ? an unknown dim; 1..10 an interval
    (1.. without upper bound); N a symbol (an ONNX dim_param); [] a scalar; [...] unknown
    rank. The brackets are optional (2,3,?); quote shapes in the shell, since [ ] and ? are
    glob characters.

    Every command takes --json: one JSON object on stdout (with a schema_version; the JSON
    Schemas ship in the package), shapes in the text form, and a failure described under
    "error". check also writes --format sarif, github or html. Exit status: 0 clean, 1
    findings (such as incompatible shapes), 2 bad usage, unreadable input or an internal
    error, 130 interrupted.

    Shell completion: eval "$(_BCAST_COMPLETE=bash_source bcast)" (zsh_source, fish_source).
    """
