"""bcast: the reference implementation of tensor broadcasting as ONNX and OpenVINO define it.

Shape rules for every rule set of the specifications (NumPy/ONNX multidirectional, ONNX
unidirectional, OpenVINO none / numpy / pdpd, bidirectional, explicit) on static and partial
shapes, with errors that explain themselves.

>>> import bcast
>>> str(bcast.broadcast_shapes("[N,1]", "[1,4]"))
'[N,4]'
"""

from __future__ import annotations

from bcast.arrays import broadcast_arrays, broadcast_to
from bcast.dim import Dim
from bcast.errors import BroadcastError
from bcast.modes import Mode
from bcast.plans import Plan
from bcast.rules import broadcast_shapes, plan
from bcast.shape import Shape

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
    # errors
    "BroadcastError",
]


def __getattr__(name: str) -> object:
    # `bcast.ops` loads NumPy; import it on first use so that `import bcast` stays light.
    if name == "ops":
        import importlib

        return importlib.import_module("bcast.ops")
    raise AttributeError(f"module 'bcast' has no attribute {name!r}")
