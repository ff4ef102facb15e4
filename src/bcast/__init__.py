"""bcast: the reference implementation of tensor broadcasting as ONNX and OpenVINO define it.

Shape rules for every rule set of the specifications (NumPy/ONNX multidirectional, ONNX
unidirectional, OpenVINO none / numpy / pdpd, bidirectional, explicit) on static and partial
shapes, with errors that explain themselves.

>>> import bcast
>>> str(bcast.broadcast_shapes("[N,1]", "[1,4]"))
'[N,4]'
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # as typing's: `typing` itself takes 8 ms to import, before the worker starts

if TYPE_CHECKING:  # loaded on first use (see __getattr__): `import bcast` loads nothing
    from bcast import ops as ops
    from bcast.arrays import broadcast_arrays, broadcast_to
    from bcast.core import BroadcastError, Dim, Mode, Plan, Shape, broadcast_shapes, plan
    from bcast.loading import check as check

__version__ = "0.1.0"

__all__ = [
    # values
    "Dim",
    "Shape",
    # rules
    "Mode",
    "Plan",
    "broadcast_shapes",
    "plan",
    # arrays (views); the operators are the subpackage bcast.ops
    "broadcast_to",
    "broadcast_arrays",
    # models
    "check",
    # errors
    "BroadcastError",
]

_HOMES = {
    **dict.fromkeys(
        ("Dim", "Shape", "Mode", "Plan", "BroadcastError", "broadcast_shapes", "plan"),
        "bcast.core",
    ),
    **dict.fromkeys(("broadcast_to", "broadcast_arrays"), "bcast.arrays"),
    "check": "bcast.loading",
}


def __getattr__(name: str) -> object:
    """Load what ``bcast.X`` names on first use: `import bcast` itself loads nothing.

    So ``python -m bcast`` can start its worker process before any of bcast loads
    (`bcast._spawn`); `bcast.ops` loads NumPy, `bcast.check` the model layer.
    """
    if name == "ops":
        return importlib.import_module("bcast.ops")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'bcast' has no attribute {name!r}")
    found = getattr(importlib.import_module(home), name)
    globals()[name] = found  # looked up once
    return found


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "ops"})
