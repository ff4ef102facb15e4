"""What fails a run: ``--fail-on``, ``--baseline``, ``--write-baseline`` and ``[tool.bcast]``.

The settings come from the command line first, then from the ``[tool.bcast]`` table of the
nearest ``pyproject.toml`` that has one, looked up from the current directory upward:

.. code-block:: toml

    [tool.bcast]
    fail-on = "error"                    # error | warning (the default) | info | never
    baseline = "bcast-baseline.json"     # relative to the pyproject.toml
    dims = { seq = "1..512", batch = 4 } # as --dim; a --dim of the same name wins

A malformed table is a usage error (exit 2), naming the file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import click

from bcast.models.baseline import FAIL_ON, Baseline, read_baseline
from bcast.models.deviations import TARGETS

from ._model_options import DimBinding, parse_binding

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = ["Policy", "configured", "find_settings", "policy_options", "resolve_policy"]

_KEYS: Final = ("fail-on", "baseline", "dims", "target")


@dataclass(slots=True)
class Policy:
    """The settings of one run, resolved: threshold, baseline, where to write one, dims."""

    fail_on: str = "warning"
    baseline: Baseline | None = None
    write_baseline: str | None = None
    dims: dict[str, int | tuple[int, int | None]] = field(default_factory=dict)
    target: str | None = None
    source: str | None = None
    """The pyproject.toml read, if one was."""


def find_settings(start: str | os.PathLike[str] | None = None) -> tuple[str | None, dict[str, Any]]:
    """Return the nearest ``pyproject.toml`` with a ``[tool.bcast]`` table, and the table.

    Looked up from ``start`` (the current directory) upward; ``(None, {})`` when none has one.

    Raises
    ------
    ValueError
        If a ``pyproject.toml`` on the way is not valid TOML (naming it).
    """
    folder = Path(start if start is not None else os.getcwd()).resolve()
    for place in (folder, *folder.parents):
        candidate = place / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            with candidate.open("rb") as source:
                doc = tomllib.load(source)
        except (OSError, tomllib.TOMLDecodeError) as err:
            raise ValueError(f"{candidate}: cannot read it ({err})") from None
        table = doc.get("tool", {}).get("bcast") if isinstance(doc.get("tool"), dict) else None
        if isinstance(table, dict):
            return str(candidate), table
    return None, {}


def _config_dims(source: str, value: object) -> dict[str, int | tuple[int, int | None]]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{source}: [tool.bcast] dims must be a table of NAME = VALUE")
    out: dict[str, int | tuple[int, int | None]] = {}
    for name, given in value.items():
        if isinstance(given, bool) or not isinstance(given, (int, str)):
            raise ValueError(f"{source}: [tool.bcast] dims.{name} must be a size or 'LO..HI'")
        try:
            binding: DimBinding = parse_binding(f"{name}={given}")
        except ValueError as err:
            raise ValueError(f"{source}: [tool.bcast] dims: {err}") from None
        out[binding[0]] = binding[1]
    return out


def _table_fail_on(source: str, table: Mapping[str, Any]) -> str:
    """Return the table's ``fail-on`` (warning when it has none); ValueError naming the file."""
    said = table.get("fail-on", "warning")
    if said not in FAIL_ON:
        raise ValueError(
            f"{source}: [tool.bcast] fail-on takes {', '.join(FAIL_ON)}; got {said!r:.40}"
        )
    return str(said)


def resolve_policy(
    fail_on: str | None,
    baseline: str | None,
    write_baseline: str | None,
    dims: Mapping[str, int | tuple[int, int | None]],
    *,
    target: str | None = None,
    start: str | os.PathLike[str] | None = None,
) -> Policy:
    """Merge the command line with ``[tool.bcast]`` (the command line wins) and read the baseline.

    Raises
    ------
    ValueError
        For a malformed ``[tool.bcast]`` table (naming the file).
    bcast.models.ModelError
        For a baseline that cannot be read.
    """
    source, table = find_settings(start)
    if source is not None:
        unknown = sorted(set(table) - set(_KEYS))
        if unknown:
            raise ValueError(
                f"{source}: [tool.bcast] has no setting {unknown[0]!r:.40} "
                f"(it takes {', '.join(_KEYS)})"
            )
        said = _table_fail_on(source, table)  # checked even where --fail-on wins
        fail_on = fail_on or said
        if baseline is None and "baseline" in table:
            if not isinstance(table["baseline"], str):
                raise ValueError(f"{source}: [tool.bcast] baseline must be a path")
            baseline = str(Path(source).parent / table["baseline"])
        dims = {**_config_dims(source, table.get("dims", {})), **dims}
        said_target = table.get("target")
        if said_target is not None and said_target not in TARGETS:
            raise ValueError(
                f"{source}: [tool.bcast] target takes {', '.join(TARGETS)}; got {said_target!r:.40}"
            )
        target = target or said_target
    return Policy(
        fail_on=fail_on or "warning",
        baseline=read_baseline(baseline) if baseline is not None else None,
        write_baseline=write_baseline,
        dims=dict(dims),
        target=target,
        source=source,
    )


def configured(
    dims: Mapping[str, int | tuple[int, int | None]],
    fail_on: str | None,
    *,
    start: str | os.PathLike[str] | None = None,
) -> tuple[dict[str, int | tuple[int, int | None]], str]:
    """Return the dims and the ``--fail-on`` of a run, reading ``pyproject.toml`` once.

    The dims are ``[tool.bcast]``'s with ``dims`` (the command line's) over them; the
    threshold is ``fail_on`` (lower case), else ``[tool.bcast]``'s ``fail-on``, else
    warning. ``bcast domain`` and ``bcast verify`` read only these; ``check`` every setting.

    Raises
    ------
    ValueError
        For a malformed ``dims`` or ``fail-on``, or ``pyproject.toml`` (naming the file).
    """
    source, table = find_settings(start)
    if source is None:
        return dict(dims), fail_on.lower() if fail_on else "warning"
    merged = {**_config_dims(source, table.get("dims", {})), **dims}
    return merged, fail_on.lower() if fail_on else _table_fail_on(source, table)


def fail_on_option(function: Any) -> Any:
    """Add ``--fail-on`` (what makes the exit status 1)."""
    return click.option(
        "--fail-on",
        type=click.Choice(FAIL_ON, case_sensitive=False),
        default=None,
        help="The least severity that makes the exit status 1: error, warning (the "
        "default), info, or never.",
    )(function)


def policy_options(function: Any) -> Any:
    """Add ``--fail-on``, ``--baseline`` and ``--write-baseline``."""
    function = click.option(
        "--write-baseline",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write every finding to this file as the baseline (then exit as --baseline "
        "with it would: 0 unless a model is unreadable).",
    )(function)
    function = click.option(
        "--baseline",
        type=click.Path(dir_okay=False),
        default=None,
        help="Leave out the findings this baseline holds (written by --write-baseline): "
        "only new findings fail.",
    )(function)
    return fail_on_option(function)
