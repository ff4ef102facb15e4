"""The limits of the peer work on one model: time for all of it, memory for the process tree.

`limits` sets them for a ``with`` block (one model's work); the time limit is a deadline that
every isolated call inside the block shares (`time_left`). `bcast.models.isolation` enforces
them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_DEFAULT_MEMORY",
    "MIN_MEMORY",
    "Limits",
    "current_limits",
    "default_max_memory",
    "limits",
    "time_left",
]

DEFAULT_TIMEOUT: Final = 120.0
"""Seconds a model's peer work may take (``--timeout``)."""
MIN_MEMORY: Final = 2**30
"""The default memory limit is never below this (OpenVINO alone maps about 0.6 GiB)."""
MAX_DEFAULT_MEMORY: Final = 4 * 2**30
_MAX_RLIMIT: Final = 2**63 - 1


def default_max_memory() -> int:
    """Return the default memory limit (``--max-memory``): a quarter of the available memory.

    Never below 1 GiB nor above 4 GiB.

    The available memory respects the cgroup limit of a container
    (`bcast.engine.guard.available_memory`).

    >>> 2**30 <= default_max_memory() <= 4 * 2**30
    True
    """
    from bcast.engine.guard import available_memory  # the engine: only when asked

    free = available_memory()
    if free is None:
        return MAX_DEFAULT_MEMORY
    return max(MIN_MEMORY, min(MAX_DEFAULT_MEMORY, free // 4))


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits of the peer work on one model.

    Attributes
    ----------
    timeout : float or None
        Seconds for every isolated call on the model together (None: no time limit).
    max_memory : int or None
        Bytes of address space of the worker (None: the default, `default_max_memory`;
        0: no limit).
    """

    timeout: float | None = DEFAULT_TIMEOUT
    max_memory: int | None = None

    def __post_init__(self) -> None:
        if self.timeout is not None and not 0 < self.timeout < math.inf:  # NaN fails too
            raise ValueError(
                f"timeout must be a finite number of seconds above 0; got {self.timeout}"
            )
        if self.max_memory is not None and not 0 <= self.max_memory <= _MAX_RLIMIT:
            raise ValueError(
                f"max_memory must be 0 (no limit) or at most 2**63-1 bytes; got {self.max_memory}"
            )

    def memory(self) -> int | None:
        """Return the worker's memory cap in bytes (None: uncapped)."""
        if self.max_memory is None:
            return default_max_memory()
        return self.max_memory or None


_current: ContextVar[tuple[Limits, float | None] | None] = ContextVar(
    "bcast_isolation_limits", default=None
)


@contextmanager
def limits(
    timeout: float | None = DEFAULT_TIMEOUT, max_memory: int | None = None
) -> Iterator[Limits]:
    """Set the limits of the isolated calls in a ``with`` block (one model's work).

    >>> with limits(timeout=5.0, max_memory=2**31) as chosen:
    ...     current_limits() == chosen
    True
    """
    chosen = Limits(timeout, max_memory)
    deadline = None if timeout is None else time.monotonic() + timeout
    token = _current.set((chosen, deadline))
    try:
        yield chosen
    finally:
        _current.reset(token)


def current_limits() -> Limits:
    """Return the limits in force (the defaults outside a `limits` block)."""
    found = _current.get()
    return found[0] if found is not None else Limits()


def time_left() -> float | None:
    """Return the seconds left before the deadline of the block in force (None: no limit).

    Outside a `limits` block, a whole `DEFAULT_TIMEOUT`.

    >>> time_left() == DEFAULT_TIMEOUT
    True
    """
    found = _current.get()
    if found is None:
        return DEFAULT_TIMEOUT
    chosen, deadline = found
    if deadline is None:
        return None
    return max(deadline - time.monotonic(), 0.0) if chosen.timeout is not None else None
