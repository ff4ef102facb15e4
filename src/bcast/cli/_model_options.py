"""What ``bcast check`` and ``bcast verify`` share: the --dim option, one-line messages."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import click

from bcast.core.dim import MAX_DIM
from bcast.core.text import safe_text
from bcast.models.isolation import DEFAULT_TIMEOUT, limits

__all__ = [
    "DimBinding",
    "dim_option",
    "dim_text",
    "dims_of_bindings",
    "limit_options",
    "model_limits",
    "one_line",
    "parse_binding",
    "parse_bytes",
    "plural",
    "warn_unused",
]


def one_line(text: str) -> str:
    """Fold a message onto one line of at most 300 characters, made safe by `safe_text`."""
    first = safe_text(" ".join(text.split()))
    return first if len(first) <= 300 else first[:297] + "..."


DimBinding = tuple[str, int | tuple[int, int | None]]
"""A ``--dim``: a name and a size, or a range of sizes ``(lo, hi)`` (``hi`` None: no bound)."""

if TYPE_CHECKING:  # click 8.5 makes ParamType generic; older clicks cannot subscript it
    _BindingParam = click.ParamType[DimBinding]
else:
    _BindingParam = click.ParamType


def _size(name: str, digits: str, what: str) -> int:
    if len(digits.lstrip("0")) > len(str(MAX_DIM)) or int(digits) > MAX_DIM:
        raise ValueError(f"--dim {name!r:.40}: {what} must be at most 2**63-1 (int64)")
    return int(digits)


def parse_binding(text: str) -> DimBinding:
    """Read ``NAME=VALUE``, ``NAME=LO..HI`` or ``NAME=LO..``; ValueError with the reason.

    >>> parse_binding("batch=4"), parse_binding("seq=1..512"), parse_binding("seq=8..")
    (('batch', 4), ('seq', (1, 512)), ('seq', (8, None)))
    >>> parse_binding("seq=3..3")
    ('seq', 3)
    """
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip()
    lo, dots, hi = value.partition("..")
    if not (sep and name and _digits(lo) and (not hi or _digits(hi))):
        raise ValueError(
            "expected NAME=VALUE with a non-negative integer VALUE, or a range NAME=LO..HI "
            f"or NAME=LO.. of sizes from 1; got {text!r:.80}"
        )
    low = _size(name, lo, "VALUE" if not dots else "LO")
    if not dots:
        return name, low
    high = _size(name, hi, "HI") if hi else None
    if low < 1 or (high is not None and high < low):
        raise ValueError(f"--dim {name!r:.40}: a range LO..HI takes sizes from 1, with LO <= HI")
    return (name, low) if high == low else (name, (low, high))


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


class _DimBinding(_BindingParam):
    """``NAME=VALUE`` (a value for a symbolic dim) or ``NAME=LO..HI`` / ``NAME=LO..``."""

    name = "NAME=VALUE|LO..HI"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> DimBinding:
        if isinstance(value, tuple):
            return value  # already converted (a default)
        try:
            return parse_binding(str(value))
        except ValueError as err:
            self.fail(str(err))


dim_option = click.option(
    "--dim",
    "bindings",
    multiple=True,
    type=_DimBinding(),
    help="Give a symbolic dim a value, e.g. --dim batch=4, or a range of sizes to prove "
    "the model for, e.g. --dim seq=1..512 or --dim seq=1.. (repeatable).",
)


def dims_of_bindings(bindings: Sequence[DimBinding]) -> dict[str, int | tuple[int, int | None]]:
    """Turn the --dim bindings into a mapping of names to values or ranges."""
    return dict(bindings)


def dim_text(value: int | tuple[int, int | None]) -> str:
    """Write a ``--dim`` value back as it is typed (``4``, ``1..512``, ``8..``).

    >>> dim_text(4), dim_text((1, 512)), dim_text((8, None))
    ('4', '1..512', '8..')
    """
    if isinstance(value, int):
        return str(value)
    return f"{value[0]}..{'' if value[1] is None else value[1]}"


def warn_unused(unused: Sequence[str], dims: Mapping[str, int | tuple[int, int | None]]) -> None:
    """Warn on stderr about ``--dim`` bindings whose name no dim of the model has."""
    for name in unused:
        click.echo(
            f"bcast: warning: --dim {name}={dim_text(dims[name])}: no input of the model has a dim "
            f"named {name!r}; ignored",
            err=True,
        )


def plural(count: int, word: str) -> str:
    """Write ``count word`` with an ``s`` when the count is not one."""
    return f"{count} {word}{'' if count == 1 else 's'}"


_UNITS: Final = {
    "": 1, "b": 1, "k": 2**10, "kb": 10**3, "kib": 2**10, "m": 2**20, "mb": 10**6,
    "mib": 2**20, "g": 2**30, "gb": 10**9, "gib": 2**30, "t": 2**40, "tb": 10**12, "tib": 2**40,
}  # fmt: skip
_SIZE: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")


def parse_bytes(text: str) -> int:
    """Read a size: ``4GiB``, ``512M``, ``1.5G``, ``1000000`` (bytes); ValueError otherwise.

    >>> parse_bytes("4GiB"), parse_bytes("512M"), parse_bytes("0")
    (4294967296, 536870912, 0)
    """
    found = _SIZE.fullmatch(text)
    unit = _UNITS.get(found.group(2).lower()) if found else None
    if found is None or unit is None or len(found.group(1)) > 30:
        raise ValueError(
            f"expected a size such as 4GiB, 512MiB or a number of bytes; got {text!r:.40}"
        )
    return (
        int(float(found.group(1)) * unit) if "." in found.group(1) else int(found.group(1)) * unit
    )


if TYPE_CHECKING:
    _BytesParam = click.ParamType[int]
else:
    _BytesParam = click.ParamType


class _Bytes(_BytesParam):
    """A size in bytes, with an optional unit."""

    name = "SIZE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            size = value if isinstance(value, int) else parse_bytes(str(value))
        except ValueError as err:
            self.fail(str(err))
        if size != 0 and not MIN_MAX_MEMORY <= size <= MAX_DIM:  # RLIMIT_AS takes an int64
            self.fail(
                f"expected 0 (no limit) or a size from 64MiB to 2**63-1 bytes; got {value!s:.40}"
            )
        return size


if TYPE_CHECKING:
    _SecondsParam = click.ParamType[float]
else:
    _SecondsParam = click.ParamType


class _Seconds(_SecondsParam):
    """A number of seconds: finite, above 0, at most `MAX_TIMEOUT` (NaN and inf refused)."""

    name = "SECONDS"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError, OverflowError):
            seconds = math.nan
        if not 0 < seconds <= MAX_TIMEOUT:  # False for NaN too
            self.fail(
                f"expected a number of seconds above 0 and at most {MAX_TIMEOUT:g}; "
                f"got {value!s:.40}"
            )
        return seconds


MIN_MAX_MEMORY: Final = 64 * 2**20
"""The smallest ``--max-memory`` but 0: below it no worker interpreter starts at all."""
MAX_TIMEOUT: Final = 1e6
"""The largest ``--timeout``, in seconds (about 11 days)."""


def limit_options(function: Any) -> Any:
    """Add ``--timeout`` and ``--max-memory`` (the limits of the peer libraries' work)."""
    function = click.option(
        "--max-memory",
        type=_Bytes(),
        default=None,
        help="Memory for the work on one model (4GiB, 512MiB...; 0: no limit). Default: a "
        "quarter of the available memory (within a container's limit), 1 to 4 GiB.",
    )(function)
    return click.option(
        "--timeout",
        type=_Seconds(),
        default=DEFAULT_TIMEOUT,
        show_default=True,
        help="Seconds the peer libraries (ONNX shape inference, OpenVINO, the runtimes) may "
        "spend on one model.",
    )(function)


def model_limits(timeout: float, max_memory: int | None) -> Any:
    """Return the ``with`` block that applies the limits to one model's work."""
    return limits(timeout=timeout, max_memory=max_memory)
