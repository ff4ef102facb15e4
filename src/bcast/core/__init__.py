"""Values and rules: pure, no NumPy, no I/O.

Dims and shapes (`Dim`, `Shape`), the modes (`Mode`), the rules (one function per mode),
their `Plan`, the errors and the alignment picture, the "fails unless" conditions, and the
lowering of a Plan to plain reshape-and-broadcast steps. Every other layer builds on these.

>>> from bcast.core import broadcast_shapes
>>> str(broadcast_shapes("[N,1]", "[3]"))
'[N,3]'
"""

from __future__ import annotations

from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.planning import broadcast_shapes, plan
from bcast.core.plans import Plan
from bcast.core.shape import Shape, ShapeLike

__all__ = [
    "BroadcastError",
    "Dim",
    "Mode",
    "Plan",
    "Shape",
    "ShapeLike",
    "broadcast_shapes",
    "plan",
]

for _exported in (Dim, Shape, Mode, Plan, BroadcastError):  # shown by their public path,
    _exported.__module__ = "bcast"  # bcast.Dim, in reprs and tracebacks
