"""bcast: the reference implementation of tensor broadcasting as ONNX and OpenVINO define it.

Shape rules for every rule set of the specifications (NumPy/ONNX multidirectional, ONNX
unidirectional, OpenVINO none / numpy / pdpd, bidirectional, explicit) on static and partial
shapes, with errors that explain themselves.

>>> import bcast
>>> str(bcast.broadcast_shapes("[N,1]", "[1,4]"))
'[N,4]'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bcast.arrays import broadcast_arrays, broadcast_to
from bcast.core import BroadcastError, Dim, Mode, Plan, Shape, broadcast_shapes, plan

if TYPE_CHECKING:  # loaded on first use (see __getattr__): `import bcast` stays light
    from bcast import ops as ops
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


def _set_module(*objects: object) -> None:
    """Show exported classes by their public path (``bcast.Dim``), as reprs and tracebacks do."""
    for obj in objects:
        obj.__module__ = "bcast"


_set_module(Dim, Shape, Mode, Plan, BroadcastError)


def __getattr__(name: str) -> object:
    # `bcast.ops` loads NumPy and `bcast.check` the model layer: both on first use.
    import importlib

    if name == "ops":
        return importlib.import_module("bcast.ops")
    if name == "check":
        return importlib.import_module("bcast.loading").check
    raise AttributeError(f"module 'bcast' has no attribute {name!r}")
