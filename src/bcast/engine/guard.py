"""The memory guard: refuse, before allocating anything, a result that would not fit.

A broadcast output can be astronomically larger than its inputs (two vectors of 10**6
elements make a 10**12-element sum). Every operator asks `check` before it allocates its
result; over the limit it raises `MemoryLimitError` with the shape, the dtype and the
bytes, instead of letting the allocator fail (or the machine swap) later.

The limit is the machine's available memory (``MemAvailable`` in ``/proc/meminfo`` on
Linux, within a container's cgroup limit; the physical memory from ``os.sysconf``
elsewhere; no limit where neither is known), or what `set_memory_limit` / `memory_limit`
set. The limit set is a context variable, as NumPy's ``errstate``: it holds in the thread
(or asyncio task) that set it, and a new thread starts with the default.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from bcast.core.errors import show_bytes

__all__ = [
    "MemoryLimitError",
    "available_memory",
    "cgroup_room",
    "check",
    "get_memory_limit",
    "memory_limit",
    "set_memory_limit",
    "small_fits_here",
]

# Results this small never read /proc/meminfo (a machine that cannot hold 16 MiB has other
# problems); a limit set explicitly is always applied.
_ALWAYS_FITS: Final = 16 * 2**20
# The limit set in this context: (nbytes, explicit); (None, False) is the default.
_LIMIT: ContextVar[tuple[int | None, bool]] = ContextVar(
    "bcast_memory_limit", default=(None, False)
)
# Results of at most this many bytes skip the guard on the operators' tiny fast path...
SMALL_BYTES: Final = 1 << 20
# ...while this is True: no context of the process has ever set a limit below SMALL_BYTES.
# Once one has, the fast path asks `small_fits_here` (the context variable) instead.
small_fits = True


class MemoryLimitError(MemoryError):
    """An operator's result would exceed the memory limit; nothing was allocated.

    Attributes
    ----------
    op : str
        The operator.
    shape : tuple of int
        The result's shape.
    dtype : str
        The result's dtype.
    nbytes : int
        The bytes the result needs.
    limit : int
        The limit in force.

    Examples
    --------
    >>> import bcast.ops
    >>> err = MemoryLimitError("add", (10**6, 10**6), "float64", 8 * 10**12, 2**30)
    >>> print(err)
    add: the result [1000000,1000000] float64 needs 8000000000000 bytes (7.3 TiB), more than ...
    """

    def __init__(self, op: str, shape: Sequence[int], dtype: str, nbytes: int, limit: int):
        self.op = op
        self.shape = tuple(shape)
        self.dtype = dtype
        self.nbytes = nbytes
        self.limit = limit
        super().__init__(str(self))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.op, self.shape, self.dtype, self.nbytes, self.limit))

    def __str__(self) -> str:
        shown = "[" + ",".join(str(d) for d in self.shape) + "]"
        return (
            f"{self.op}: the result {shown} {self.dtype} needs {self.nbytes} bytes "
            f"({show_bytes(self.nbytes)}), more than the memory limit of {self.limit} bytes "
            f"({show_bytes(self.limit)}); see bcast.ops.set_memory_limit"
        )


def available_memory() -> int | None:
    """Bytes the machine can still give, within the process's cgroup (container) limit.

    MemAvailable on Linux, else physical memory, else None; never more than the room left
    under a cgroup memory limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``).
    """
    found = _meminfo_available()
    room = cgroup_room()
    if room is not None and (found is None or room < found):
        return room
    return found


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


_CGROUP_FILES: Final = (
    ("", "memory.max", "memory.current"),  # cgroup v2
    ("memory", "memory.limit_in_bytes", "memory.usage_in_bytes"),  # cgroup v1
)


def cgroup_room() -> int | None:
    """Return the bytes left under this process's cgroup memory limit (None: no limit).

    Both cgroup versions are read, at the process's own cgroup and at the mount's root
    (where a container sees its own limit).
    """
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            entries = [line.rstrip("\n").split(":", 2) for line in handle]
    except OSError:
        return None
    rooms = []
    for controller, limit_file, usage_file in _CGROUP_FILES:
        for entry in entries:
            if len(entry) != 3 or controller not in entry[1].split(","):
                continue
            if controller == "" and entry[0] != "0":
                continue
            base = os.path.join("/sys/fs/cgroup", controller)
            for folder in {os.path.join(base, entry[2].lstrip("/")), base}:
                limit = _read_int(os.path.join(folder, limit_file))
                if limit is not None and limit < 2**60:
                    usage = _read_int(os.path.join(folder, usage_file)) or 0
                    rooms.append(max(limit - usage, 0))
    return min(rooms) if rooms else None


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def set_memory_limit(nbytes: int | None) -> None:
    """Set the largest result, in bytes, an operator may allocate; None restores the default.

    The default is the machine's available memory, read when a result of more than 16 MiB
    is about to be allocated. The limit is a context variable: it holds in the calling
    thread (or asyncio task) and the code it runs; other threads keep their own.

    Parameters
    ----------
    nbytes : int or None
        The limit in bytes (0 or more), or None for the default.

    Raises
    ------
    TypeError
        If ``nbytes`` is not an int or None.
    ValueError
        If ``nbytes`` is negative.

    Examples
    --------
    >>> import bcast.ops
    >>> import numpy as np
    >>> bcast.ops.set_memory_limit(1000)
    >>> bcast.ops.add(np.ones((1000, 1)), np.ones(1000))
    Traceback (most recent call last):
    ...
    bcast.ops.MemoryLimitError: add: the result [1000,1000] float64 needs 8000000 bytes ...
    >>> bcast.ops.set_memory_limit(None)
    """
    if nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, int)):
        raise TypeError(f"the memory limit must be an int or None; got {nbytes!r}")
    if nbytes is not None and nbytes < 0:
        raise ValueError(f"the memory limit must be 0 or more bytes; got {nbytes}")
    _restore((nbytes, nbytes is not None))


def get_memory_limit() -> int | None:
    """Return the limit in force: the one set, else the available memory (None: unknown).

    >>> import bcast.ops
    >>> with bcast.ops.memory_limit(2**20):
    ...     bcast.ops.get_memory_limit()
    1048576
    """
    limit, explicit = _LIMIT.get()
    return limit if explicit else available_memory()


@contextmanager
def memory_limit(nbytes: int | None) -> Iterator[None]:
    """Set the memory limit for a ``with`` block (see `set_memory_limit`), then restore it.

    The limit holds in this context only (this thread, this asyncio task), as NumPy's
    ``errstate``: other threads keep theirs.
    """
    saved = _LIMIT.get()
    set_memory_limit(nbytes)
    try:
        yield
    finally:
        _restore(saved)


def _restore(saved: tuple[int | None, bool]) -> None:
    global small_fits
    _LIMIT.set(saved)
    limit, explicit = saved
    if explicit and (limit is None or limit < SMALL_BYTES):
        small_fits = False


def small_fits_here() -> bool:
    """Tell whether a result of `SMALL_BYTES` fits under the limit of this context."""
    limit, explicit = _LIMIT.get()
    return not explicit or (limit is not None and limit >= SMALL_BYTES)


def check(op: str, shape: Sequence[int], dtype: object, itemsize: int) -> None:
    """Raise `MemoryLimitError` if a result of ``shape`` and ``itemsize`` would not fit.

    ``dtype`` is only turned into text for the message.
    """
    nbytes = math.prod(shape) * itemsize
    limit, explicit = _LIMIT.get()
    if not explicit:
        if nbytes <= _ALWAYS_FITS:
            return
        limit = available_memory()
    if limit is not None and nbytes > limit:
        raise MemoryLimitError(op, shape, str(dtype), nbytes, limit)
