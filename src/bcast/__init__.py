"""bcast: the reference implementation of tensor broadcasting as ONNX and OpenVINO define it.

Shape rules for every rule set of the specifications (NumPy/ONNX multidirectional, ONNX
unidirectional, OpenVINO none / numpy / pdpd, bidirectional, explicit) on static and partial
shapes, with errors that explain themselves.

>>> import bcast
>>> str(bcast.broadcast_shapes("[N,1]", "[1,4]"))
'[N,4]'
"""

from __future__ import annotations

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
    # errors
    "BroadcastError",
]
