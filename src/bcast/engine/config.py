"""The engine's settings: the knobs of `Settings`, changed for a ``with`` block by `settings`.

How many threads work of a given size gets is decided here (`threads_for`,
`compiled_threads_for`), from the settings, else `bcast.engine.parallel.threads`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Final

from bcast.engine import parallel as _parallel

__all__ = [
    "Settings",
    "compiled_threads_for",
    "get_settings",
    "route",
    "settings",
    "stores",
    "stream_min_bytes",
    "threads_for",
    "watch",
]


@dataclass(frozen=True, slots=True)
class Settings:
    """The engine's knobs (see `settings`).

    Attributes
    ----------
    threads : int or None
        Threads for large work; None: `bcast.engine.parallel.threads` (``BCAST_NUM_THREADS``,
        else the cores this process may use, at most ``OMP_NUM_THREADS``).
    parallel_min : int
        Work (output elements times the kernel's cost) below which NumPy's path makes one
        call in the caller's thread (and more threads start).
    compiled_min : int
        Work from which kernels with a compiled form run on the compiled path (below it,
        one NumPy call costs less than starting a walker).
    block_bytes : int
        Output bytes per block for kernels that pass over their output several times.
    blocks_per_thread : int
        Blocks per thread for one-pass kernels (more balance the load on a busy machine).
    max_tile_bytes : int
        Bytes that tiles of small operands may take, per call (and at most 1/32 of the
        output's).
    compiled_tile_bytes : int
        ``max_tile_bytes`` for the compiled path, whose rows need not be as long as NumPy's
        inner loops: tiles that stay in the core's own cache are faster there (the benchmark
        ``add_midrank`` measures it). Its tiles aim at rows of 16 KiB
        (`bcast.engine.compiled.ROW_BYTES`); only those that rows need longer take more.
    compiled_thread_work : int
        Work each thread of the compiled path must have, in output bytes times the
        kernel's cost (the walk's time follows the bytes it moves); less work takes fewer
        threads. Even a hand-off to a spinning worker costs a
        few microseconds, more than a second core gains on small work (``float32`` bias adds
        on the 2-core Xeon: two threads win from 512 KiB of output, lose below it).
    compiled : bool
        Run the kernels that have a compiled form (`bcast.engine.compiled`) with it when numba is
        installed (``BCAST_COMPILED=0`` turns it off as well).
    compiled_wait : bool
        Wait for a kernel to compile (or load from numba's cache) on its first use, as
        ``BCAST_COMPILED=wait`` does; False: NumPy computes until the background has it.
    stream_min_bytes : int or None
        Work whose output and operands together take at least this many bytes writes its
        output with streaming stores on the compiled path (the data cannot all stay in the
        cache anyway); None: the size of the last-level cache, at most `STREAM_CAP`
        (`stream_min_bytes`), and work within `MEASURED_SPAN` of it tries both kinds of
        store on its first calls and keeps the quicker (`stores`).
    spin_us : int or None
        Microseconds a worker waits, spinning with the GIL released, for the next compiled
        walk before it sleeps (0: at once); None: ``BCAST_SPIN_US``, else 200
        (`bcast.engine.parallel.spin_us`).
    """

    threads: int | None = None
    parallel_min: int = 1 << 18
    compiled_min: int = 1 << 12
    block_bytes: int = 1 << 20
    blocks_per_thread: int = 4
    max_tile_bytes: int = 1 << 22
    compiled_tile_bytes: int = 1 << 18
    compiled_thread_work: int = 1 << 19
    compiled: bool = True
    compiled_wait: bool = False
    stream_min_bytes: int | None = None
    spin_us: int | None = None


_settings = Settings()

STREAM_CAP: Final = 64 << 20
"""The default streaming size at most. A virtual machine reports its host's shared cache: the
2-core Xeon VM, 260 MiB. There, plain stores of a 128 MiB output ran at half the speed of
streaming ones (float32 bias and outer adds, 1.5-2.3x), while up to 64 MiB either kind was
within 20% of the other. A real 32 MiB cache is below the cap and decides alone."""


def stream_min_bytes(settings: Settings) -> int:
    """Return the bytes of work (output and operands) from which compiled walks stream.

    The setting, else the last-level cache's size (`bcast.engine.parallel.cache_bytes`),
    at most `STREAM_CAP`.

    >>> stream_min_bytes(replace(get_settings(), stream_min_bytes=4096))
    4096
    >>> stream_min_bytes(replace(get_settings(), stream_min_bytes=None)) <= STREAM_CAP
    True
    """
    if settings.stream_min_bytes is not None:
        return settings.stream_min_bytes
    return min(_parallel.cache_bytes(), STREAM_CAP)


MEASURED_SPAN: Final = 2
"""Work within this factor of the default streaming size (`stream_min_bytes`, the setting
unset) is walked with both kinds of store on its first calls, and the quicker kept
(`stores`)."""


def stores(settings: Settings, work_bytes: int, itemsize: int = 4) -> tuple[bool, bool]:
    """Return whether a compiled walk over ``work_bytes`` streams, and whether it measures.

    It streams from `stream_min_bytes` on, except an output of one-byte elements (bool,
    int8, uint8) under the default setting: LLVM writes those one at a time with streaming
    stores, and a (64,1024,1024) comparison of float32 with (1024,) into a bool ``out`` took
    133 ms streamed, 23 ms with plain stores (NumPy: 30 ms), a uint8 add 35 ms and 11 ms
    (2-core Xeon VM; ``stream_min_bytes`` set explicitly still streams them).

    Where that size is the default (the cache, at most `STREAM_CAP`) and the work is within
    `MEASURED_SPAN` of it, that is a guess, which the walk's runner checks by timing both
    kinds of store: a virtual machine's share of its host's cache, and what stays there
    between calls, decide which is quicker. On the 2-core
    Xeon VM, plain stores wrote a 64 MiB outer add in 1.25-1.35 ms a call, streaming ones in
    1.40-1.45; a 64 MiB bias add (128 MiB of work) took 3.6-3.8 ms with plain stores, 2.5
    with streaming ones.

    >>> stores(replace(get_settings(), stream_min_bytes=4096), 4096)
    (True, False)
    >>> stores(replace(get_settings(), stream_min_bytes=None), 1 << 10)
    (False, False)
    >>> stores(replace(get_settings(), stream_min_bytes=None), 1 << 40, itemsize=1)
    (False, False)
    """
    if itemsize == 1 and settings.stream_min_bytes is None:
        return False, False
    limit = stream_min_bytes(settings)
    measure = settings.stream_min_bytes is None and (
        limit // MEASURED_SPAN <= work_bytes <= limit * MEASURED_SPAN
    )
    return work_bytes >= limit, measure


def get_settings() -> Settings:
    """Return the settings in force."""
    return _settings


@contextmanager
def settings(**changes: Any) -> Iterator[Settings]:
    """Change the engine's `Settings` for a ``with`` block (process-wide), then restore them.

    >>> import bcast.engine
    >>> with bcast.engine.settings(threads=1) as s:
    ...     s.threads
    1
    """
    global _settings
    saved = _settings
    _settings = replace(saved, **changes)
    _changed()
    try:
        yield _settings
    finally:
        _settings = saved
        _changed()


_watchers: list[Callable[[], None]] = []


def watch(callback: Callable[[], None]) -> None:
    """Call ``callback()`` whenever the settings change (entering or leaving `settings`).

    What was decided under the old settings (the engine's call plans) is forgotten so.
    """
    _watchers.append(callback)


def _changed() -> None:
    for callback in _watchers:
        callback()


def route(blockwise: bool, size: int, work: float, settings: Settings) -> tuple[bool, bool]:
    """Return whether work of this size tries the compiled walk, and whether it is split.

    Only a kernel that can be split into blocks (``blockwise``) and a non-empty result go
    either way: from ``compiled_min`` the compiled walk is tried, from ``parallel_min``
    NumPy's path splits the work into blocks on threads. The plain call and the planned
    call (`bcast.engine.calls`) decide by this alone.

    >>> route(True, 10, 10.0, Settings(compiled_min=8, parallel_min=100))
    (True, False)
    >>> route(False, 10**6, 1e6, Settings())
    (False, False)
    """
    if not blockwise or size == 0:
        return False, False
    return work >= settings.compiled_min, work >= settings.parallel_min


def threads_for(work: float) -> int:
    """Return the threads NumPy's path gives work of this size (output elements times cost).

    >>> with settings(threads=4, parallel_min=100):
    ...     threads_for(50), threads_for(250), threads_for(10**6)
    (1, 2, 4)
    """
    return _share(work, _settings.parallel_min)


def compiled_threads_for(work: float) -> int:
    """Return how many threads the compiled path gives work of this size (bytes times cost).

    One per ``compiled_thread_work`` of work, at most the threads of `threads_for`'s
    setting (``threads``, else `bcast.engine.parallel.threads`).

    >>> with settings(compiled_thread_work=1000, threads=8):
    ...     compiled_threads_for(999), compiled_threads_for(5000), compiled_threads_for(10**6)
    (1, 5, 8)
    """
    return _share(work, _settings.compiled_thread_work)


def _share(work: float, each: int) -> int:
    """One thread per ``each`` of work, at least one, at most the threads set."""
    chosen = _settings.threads
    if chosen is None:
        chosen = _parallel.threads()
    return max(1, min(chosen, int(work // max(1, each))))
