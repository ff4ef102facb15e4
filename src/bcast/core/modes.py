"""`Mode`: the rule sets of the specifications, parsed once at the public boundary."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from bcast.core.errors import BroadcastError

__all__ = ["BinaryModeName", "BroadcastModeName", "Mode", "ModeName"]

ModeName = Literal[
    "numpy",
    "multidirectional",
    "none",
    "pdpd",
    "unidirectional",
    "bidirectional",
    "explicit",
    "NUMPY",
    "MULTIDIRECTIONAL",
    "NONE",
    "PDPD",
    "UNIDIRECTIONAL",
    "BIDIRECTIONAL",
    "EXPLICIT",
]
"""The mode names a type checker accepts (`Mode.parse` takes any capitalisation)."""

BinaryModeName = Literal["numpy", "none", "pdpd", "NUMPY", "NONE", "PDPD"]
"""The ``broadcast=`` names of the element-wise operators (OpenVINO's auto_broadcast)."""

BroadcastModeName = Literal[
    "numpy", "explicit", "bidirectional", "pdpd", "NUMPY", "EXPLICIT", "BIDIRECTIONAL", "PDPD"
]
"""The ``mode=`` names of `bcast.ops.broadcast` (OpenVINO Broadcast-3)."""


class Mode(str, Enum):
    """A broadcasting rule set.

    ===================  ===============================================================
    ``numpy``            NumPy / ONNX multidirectional (alias ``multidirectional``), n-ary
    ``none``             OpenVINO auto_broadcast none: identical shapes only
    ``pdpd``             OpenVINO PDPD: B onto A starting at ``axis``
    ``unidirectional``   ONNX unidirectional: B broadcasts to A, the result is A
    ``bidirectional``    OpenVINO Broadcast-3 bidirectional = ONNX Expand
    ``explicit``         OpenVINO Broadcast explicit mode with ``axes_mapping``
    ===================  ===============================================================

    Examples
    --------
    >>> import bcast
    >>> bcast.Mode.parse("multidirectional") is bcast.Mode.NUMPY
    True
    >>> bcast.Mode.parse("NUMPY") is bcast.Mode.NUMPY  # OpenVINO's spelling: any case
    True
    >>> bcast.Mode.parse("nmupy")
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: unknown mode 'nmupy'; expected one of numpy, none, pdpd, ...
    """

    NUMPY = "numpy"
    NONE = "none"
    PDPD = "pdpd"
    UNIDIRECTIONAL = "unidirectional"
    BIDIRECTIONAL = "bidirectional"
    EXPLICIT = "explicit"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: str | Mode) -> Mode:
        """Return the mode named ``value`` (a `Mode`, a name or an alias, in any case)."""
        if isinstance(value, Mode):
            return value
        if not isinstance(value, str):
            raise TypeError(f"mode must be a str; got {type(value).__name__} {value!r}")
        found = _BY_NAME.get(value)
        if found is None:
            found = _BY_NAME.get(value.lower())
        if found is None:
            names = ", ".join(m.value for m in cls)
            raise BroadcastError(
                f"unknown mode {value!r}; expected one of {names} "
                f"(or the alias {', '.join(ALIASES)})",
                kind="parameter",
            )
        return found


ALIASES: dict[str, Mode] = {"multidirectional": Mode.NUMPY}
_BY_NAME: dict[str, Mode] = {m.value: m for m in Mode} | ALIASES
