"""Compiled entries only where a test asks for them: the walkers run either way.

Each itemsize and rank of each array is a compiled entry of its own
(`bcast.engine.numba_entry`, 1 to 2.5 s to compile on the 2-core Xeon): tests that try many
layouts compile minutes of them on a machine's first run. Without its entry a runner does
the entry's work in Python (`bcast.engine.runner.Runner`) and runs the same walker.
"""

from __future__ import annotations

import contextlib
from typing import Any
from unittest import mock

from bcast.engine import compiled

__all__ = ["entries"]


def entries(wanted: bool) -> Any:
    """Return a context in which runners get their compiled entry (``wanted``) or none."""
    if wanted:
        return contextlib.nullcontext()
    return mock.patch.object(compiled, "_entry", lambda kinds, wait: None)
