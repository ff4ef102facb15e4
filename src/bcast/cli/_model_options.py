"""What ``bcast check`` and ``bcast verify`` share: the --dim option, one-line messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

__all__ = ["dim_option", "dims_of_bindings", "one_line", "plural", "warn_unused"]


def one_line(text: str) -> str:
    """Fold a message onto one line of at most 300 characters."""
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


dim_option = click.option(
    "--dim",
    "bindings",
    multiple=True,
    type=_DimBinding(),
    help="Give a symbolic dim a value, e.g. --dim batch=4 (repeatable).",
)


def dims_of_bindings(bindings: Sequence[tuple[str, int]]) -> dict[str, int]:
    """Turn the --dim bindings into a mapping of names to values."""
    return dict(bindings)


def warn_unused(unused: Sequence[str], dims: dict[str, int]) -> None:
    """Warn on stderr about ``--dim`` bindings whose name no dim of the model has."""
    for name in unused:
        click.echo(
            f"bcast: warning: --dim {name}={dims[name]}: no input of the model has a dim "
            f"named {name!r}; ignored",
            err=True,
        )


def plural(count: int, word: str) -> str:
    """Write ``count word`` with an ``s`` when the count is not one."""
    return f"{count} {word}{'' if count == 1 else 's'}"
