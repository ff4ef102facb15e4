"""Compiled kernels for the engine's large NumPy work (optional: needs ``numba``).

NumPy's ufunc loops are fast, but a broadcast operand costs them: an inner loop runs only as
long as the output's contiguous run, Where is several passes, and every store into a fresh
cache line first reads that line (read-for-ownership). This module compiles, with numba, one
*row walker* per operation: it walks the output as `bcast.engine.layout.walk_axes` arranges it
(memory order, merged axes, small operands tiled) row by row, from the arrays' addresses and
strides (no views: each would cost microseconds per call), takes each operand's row as a
contiguous run (at an offset into the operand, or a small buffer filled from a stretched or
strided one), and runs one vectorised inner loop. Outputs larger than the caches are written with
non-temporal (streaming) stores, which skip the read-for-ownership. The walker releases the
GIL, so the engine's threads (`bcast.engine.parallel`) run one walker each; the walkers claim rows
from a shared counter as they go.

Every operation here but one is exactly NumPy's, bit for bit: IEEE addition, subtraction,
multiplication and division in the operands' own dtype (``error_model="numpy"``: 1/0 is inf;
float16 as NumPy computes it, in float32 rounded back once), integers wrapping, comparisons,
logical operators on booleans, and pure bit copies (Copy; Where's select in bit arithmetic on
same-width unsigned views). float32 Pow is a vectorised polynomial within one unit in the last
place of NumPy's ``powf``, which computes its special operands itself; where NumPy has a vector
loop of its own for float32 power on this CPU (`operations.numpy_power_vectorised`: AVX-512),
that loop on the engine's threads is faster, and Pow stays on NumPy's path, NumPy's results bit
for bit. The engine uses this path only for operands it accepts (`accepts`) and layouts it
takes (naturally aligned elements, strides that are not negative) and falls back to NumPy
otherwise, and entirely when numba is missing or ``BCAST_COMPILED=0``.

numba is imported on the first large call, not with ``bcast``
(`bcast.engine.numba_kernels` holds the numba code). Each operation and dtype is compiled on its
first use on a machine (a few seconds) and cached on disk by numba for later processes.
Nobody waits for that: a kernel that is not ready is queued for one background thread, which
imports numba and compiles it (or loads it from numba's cache), and until it is ready the
engine computes on NumPy's path, with the same results. ``BCAST_COMPILED=wait`` (or the
engine's setting ``compiled_wait``) waits instead; ``python -m bcast.engine.warm`` compiles
every kernel ahead of time, once per machine.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Final

import numpy as np

from bcast.engine import background as _background
from bcast.engine import layout as _layout
from bcast.engine import parallel as _parallel
from bcast.engine.operations import (
    BITS,
    BY_WIDTH,
    HALF,
    HALF_RULES,
    NUMERIC,
    OPERATIONS,
    SWAPPED,
    accepts,
)
from bcast.engine.runner import MAX_RANK, Runner, Walk

__all__ = [
    "OPERATIONS",
    "accepts",
    "available",
    "enabled",
    "float16_kernel",
    "prepare",
    "signatures",
    "wait_for_kernels",
    "warm",
]

CHUNK_BYTES: Final = 1 << 16
"""Output bytes a thread claims at a time (whole rows, at least one)."""

ROW_BYTES: Final = 1 << 14
"""The output bytes a row aims at where tiles lengthen short rows (a bias's: `bcast.engine.
layout.walk_axes`). A row this long costs its walk's overhead once per 16 KiB, and its tile
stays in the core's first-level cache: on the 2-core Xeon, tiles of up to 256 KiB (the
budget, ``compiled_tile_bytes``) made (n,64)+(64,) adds of 1-16 MiB 10-20 % slower (float32
1 MiB: 31 against 25 us; float64 16 MiB: 740 against 645 us), at 64 MiB 5 % slower. Tiles
that rows need longer (a mid-rank add's) still take up to the budget."""

_lock = threading.Lock()
_state: dict[str, Any] = {}  # "kernels": bcast.engine.numba_kernels, or None without numba


def available() -> bool:
    """Tell whether the compiled path can run (numba imports; ``BCAST_COMPILED`` is not 0).

    numba present but failing to load our kernels (a folder numba cannot cache in, a numba
    that does not fit this NumPy) turns the path off with one RuntimeWarning.
    """
    if os.environ.get("BCAST_COMPILED", "").strip() == "0":
        return False
    if "kernels" not in _state:
        with _lock:
            if "kernels" not in _state:
                try:
                    from bcast.engine import numba_kernels as _numba_kernels
                except ImportError:  # the optional extra is not installed: NumPy's path
                    _state["kernels"] = None
                except Exception as exc:  # numba there but unusable (no cache folder...)
                    warnings.warn(
                        f"bcast: the compiled path is off, NumPy computes everything "
                        f"({type(exc).__name__}: {exc})",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                    _state["kernels"] = None
                else:
                    from bcast.engine import numba_team as _team

                    _parallel.use_team(_team.serve, _team.LINE, _team.ASLEEP, _team.POKE)
                    _state["kernels"] = _numba_kernels
    return _state["kernels"] is not None


def enabled() -> bool:
    """Tell, without importing numba, whether the compiled path may run.

    False where ``BCAST_COMPILED=0``, numba is not installed, or loading it failed (see
    `available`); True otherwise, also before numba is loaded: a `Runner` has it loaded in the
    background.

    >>> isinstance(enabled(), bool)
    True
    """
    if os.environ.get("BCAST_COMPILED", "").strip() == "0":
        return False
    kernels = _state.get("kernels", _UNKNOWN)
    if kernels is not _UNKNOWN:
        return kernels is not None
    if "installed" not in _state:
        try:
            _state["installed"] = importlib.util.find_spec("numba") is not None
        except (ImportError, ValueError):
            _state["installed"] = False
    return bool(_state["installed"])


def float16_kernel(name: str | None) -> bool:
    """Tell whether operation ``name`` has a float16 kernel here (the compiled path on).

    NumPy's ufuncs widen and round each float16 element in software; these kernels run as
    fast as float32's, so the tiny fast path of `bcast.ops` leaves float16 to them. Where
    numba's CPU turns out to have no half conversions, its float16 stays on NumPy's path.

    >>> float16_kernel("add") == enabled(), float16_kernel("where"), float16_kernel(None)
    (True, False, False)
    """
    name = SWAPPED.get(name, name) if name is not None else None
    if name is None or OPERATIONS.get(name) not in HALF_RULES:  # copy, Where: bits, not slow
        return False
    half = np.zeros(1, np.float16)
    out = half.astype(bool) if OPERATIONS[name] in ("compare", "order") else half
    return accepts(name, out, [half, half]) and enabled()


def prepare(
    name: str,
    out: np.ndarray[Any, Any],
    views: list[np.ndarray[Any, Any]],
    *,
    operands: list[np.ndarray[Any, Any]] | None = None,
    max_tile_bytes: int,
    threads: int,
    blocks_per_thread: int,
    stream: bool,
    measure_stores: bool = False,
    run_team: Callable[[Callable[[int, int, int], None], int], None],
    wait: bool = False,
) -> Runner:
    """Plan operation ``name`` on these arrays once; return the `Runner` that computes it.

    ``views`` are the operands aligned to the output's rank, which the walk is planned on
    (as `bcast.engine.layout.walk_axes` arranges them; tiles of small operands take at most
    ``max_tile_bytes``). ``operands`` are the arrays the runner will be called with
    (default: the views): the same addresses, maybe with fewer axes. ``run_team(go,
    threads)`` runs the walk on that many threads (`bcast.engine.parallel.run_team`): each
    claims rows `CHUNK_BYTES` at a time until none are left. ``stream``: streaming stores;
    ``measure_stores``: only the first guess, the runner times both kinds on its first calls
    and keeps the quicker (`bcast.engine.runner.Runner`). The walker
    and the entry (`bcast.engine.numba_entry`) are queued for the background here
    (``wait``: compiled now, or waited for).
    """
    operation, name = name, SWAPPED.get(name, name)
    swap = name != operation  # computed by another operation's kernel, operands swapped
    if swap:
        views = views[::-1]
        operands = None if operands is None else operands[::-1]
    key = (name, max_tile_bytes, threads * blocks_per_thread, out.shape, out.strides, out.dtype)
    key += tuple((x.shape, x.strides, x.dtype) for x in views)
    found = _walks.get(key, _UNKNOWN)
    if found is _UNKNOWN:
        found = _plan_walk(name, out, views, max_tile_bytes, threads * blocks_per_thread)
        if len(_walks) >= _WALKS_KEPT:
            _walks.clear()
        _walks[key] = found
    passed = views if operands is None else operands
    kinds = tuple((x.itemsize, x.ndim) for x in [out, *passed])
    walk = found if isinstance(found, Walk) else None
    dtypes = walk.dtypes if walk is not None else ()
    return Runner(
        operation,
        walk,
        kinds,
        threads=threads,
        stream=stream,
        measure=measure_stores,
        chunk=max(1, CHUNK_BYTES // walk.row_bytes) if walk is not None else 1,
        run_team=run_team,
        find_walker=functools.partial(_walker, name, dtypes, wait),
        find_entry=functools.partial(_entry, kinds, wait),
        swap=swap,
    )


_UNKNOWN: Final = object()
_WALKS_KEPT: Final = 256
_walks: dict[tuple[Any, ...], object] = {}
"""Walks by operation and layout (None: the walker does not take it). Planning one is
Python work (arranging the axes, tiling, the stride tables); a repeated call replays only
its tiles."""


def _plan_walk(
    name: str,
    out: np.ndarray[Any, Any],
    operands: list[np.ndarray[Any, Any]],
    max_tile_bytes: int,
    parts: int,
) -> Walk | None:
    tiles: list[_layout.Tile] = []
    found = _layout.walk_axes(
        out,
        operands,
        max_tile_bytes=max_tile_bytes,
        tiles=tiles,
        inner_target=ROW_BYTES // out.itemsize,
    )
    if found is None:
        return None
    bases, axes = found
    axes = _split_inner(axes or [(1, [out.itemsize] * len(bases))], parts)
    rank = len(axes)
    if rank > MAX_RANK or axes[-1][1][0] != out.itemsize:
        return None
    dtypes = [a.dtype for a in bases]
    if OPERATIONS[name] == "bits":  # moved as unsigned integers of the output's width
        width = np.dtype(BITS[out.itemsize])
        dtypes = [d if d == np.bool_ else width for d in dtypes]
    elif name in BY_WIDTH:  # integers as the unsigned ones of their width: one kernel
        dtypes = [np.dtype(BITS[d.itemsize]) if d.kind in "iu" else d for d in dtypes]
    strides = [[0] * MAX_RANK for _ in range(4)]
    for k, a in enumerate(bases):
        row = strides[k]
        for d, (_, axis_strides) in enumerate(axes, MAX_RANK - rank):
            step, rest = divmod(axis_strides[k], a.itemsize)
            if step < 0 or rest:
                return None
            row[d] = step
    for k in range(len(bases), 4):  # unused operands: the first again (loads optimised away)
        dtypes.append(dtypes[1])
        strides[k] = strides[1]
    shape = [1] * (MAX_RANK - rank) + [n for n, _ in axes]
    return Walk(
        tuple(tiles),
        tuple(dtypes),
        np.array([*strides, shape], np.int64),
        math.prod(shape[:-1]),
        shape[-1] * out.itemsize,
    )


def _split_inner(axes: list[_layout.Axis], parts: int) -> list[_layout.Axis]:
    """Cut a long inner axis into rows when there are too few rows to share among threads."""
    n, inner = axes[-1]
    if math.prod(m for m, _ in axes[:-1]) >= parts or n < 2 * parts * 4096:
        return axes
    folds = _layout._folds_cached(n, parts * 4)  # divisors of n up to 4 rows a block
    if not folds:
        return axes
    fold = folds[0]
    return [*axes[:-1], (fold, [s * (n // fold) for s in inner]), (n // fold, inner)]


# -- compiling: in the background, or ahead of time ----------------------------------------


def _loaded() -> bool:
    """Load numba and the kernels' module (once); tell whether the compiled path can run."""
    if "kernels" not in _state and available():
        atexit.register(_background.stop_all)  # runs before numba's exit handlers, now there
    return available()


def _compile(key: tuple[Any, ...]) -> Any:
    """Compile the walker of ``key`` now (or load it from numba's cache); None if numba cannot.

    Queues the entries asked for meanwhile (`_entry`), so that waiting for the kernels
    (`wait_for_kernels`) waits for them too.
    """
    if not _loaded():
        return None
    _queue_wanted()
    return _or_warn(
        lambda: _state["kernels"].walker(key[0], list(key[1:])),
        f"bcast: numba could not compile {key[0]}; NumPy computes it",
    )


_kernels: Final = _background.Resolver(_compile, name="bcast-compile")


def _walker(name: str, dtypes: tuple[np.dtype[Any], ...], wait: bool) -> Any:
    """Return the walker of ``name`` for these dtypes; None while the background compiles it.

    ``wait`` (or ``BCAST_COMPILED=wait``): compile it now, or wait for the background.
    """
    key = (name, *dtypes)
    walk = _kernels.peek(key)
    if walk is _background.PENDING:
        wait = wait or os.environ.get("BCAST_COMPILED", "").strip() == "wait"
        walk = _kernels.get(key, wait=wait)
    return None if walk is _background.PENDING else walk


def _compile_entry(kinds: tuple[tuple[int, int], ...]) -> Any:
    """Compile the entry for arrays of these kinds (or load it); None if numba cannot."""
    if not _loaded():
        return None
    return _or_warn(  # the walker's Python front computes what the entry would
        lambda: _state["kernels"].compile_entry(kinds),
        f"bcast: numba could not compile the entry for {kinds}; Python prepares each walk instead",
    )


def _or_warn(compile_it: Callable[[], Any], message: str) -> Any:
    """Return what ``compile_it`` makes, or None with a warning where numba fails.

    numba can fail beyond what it reports (an LLVM error, a cache it cannot read): the
    caller then takes its slower path, which gives the same results.
    """
    try:
        return compile_it()
    except Exception as exc:
        warnings.warn(f"{message} ({type(exc).__name__}: {exc})", RuntimeWarning, stacklevel=1)
        return None


_entries: Final = _background.Resolver(_compile_entry, name="bcast-compile-entry")


_wanted: set[tuple[tuple[int, int], ...]] = set()
"""Entries asked for before numba was loaded: queued by the walker's compile, which loads
it (with the exit handlers that keep a compile from outliving the interpreter)."""


def _entry(kinds: tuple[tuple[int, int], ...], wait: bool) -> Any:
    """Return the entry for arrays of these kinds; None while the background compiles it."""
    found = _entries.peek(kinds)
    if found is _background.PENDING:
        wait = wait or os.environ.get("BCAST_COMPILED", "").strip() == "wait"
        if not wait and _state.get("kernels") is None:
            _wanted.add(kinds)  # numba not loaded (yet): the walker's compile queues it
            return None
        found = _entries.get(kinds, wait=wait)
    return None if found is _background.PENDING else found


def _queue_wanted() -> None:
    while _wanted:
        _entries.get(_wanted.pop())


def wait_for_kernels(timeout: float | None = None) -> bool:
    """Wait until the kernels queued for the background are ready; tell whether they are.

    For benchmarks and tests, which time or check the compiled path itself.

    >>> wait_for_kernels(timeout=60)
    True
    """
    return _kernels.wait(timeout) and _entries.wait(timeout)


def signatures(names: Iterable[str] | None = None) -> list[tuple[str, tuple[np.dtype[Any], ...]]]:
    """List the kernels of these operations (default: all): each name and the dtypes it reads.

    >>> ("add", (np.dtype("float32"),) * 4) in signatures(["add"])
    True
    >>> len(signatures(["xor"]))
    1
    """
    found: dict[tuple[str, tuple[np.dtype[Any], ...]], None] = {}
    for name in OPERATIONS if names is None else names:
        for char in sorted(NUMERIC | {HALF}):
            x = np.zeros(2, char)
            if name == "where":
                examples = [(x, [np.zeros(2, bool), x, x])]
            elif name == "copy":
                examples = [(x, [x])]
            else:
                examples = [(x, [x, x]), (np.zeros(2, bool), [x, x])]
            for out, operands in examples:
                walk = _plan_walk(name, out, operands, 0, 1)
                if accepts(name, out, operands) and walk is not None:
                    found[(name, walk.dtypes)] = None
    return [k for k in found if np.float16 not in k[1] or _half_kernels()]


def _half_kernels() -> bool:
    """Tell whether float16 kernels compile here (numba loaded, its CPU converts halves)."""
    return available() and bool(_state["kernels"].HALF)


def warm(
    names: Iterable[str] | None = None, report: Callable[[str, bool, float], None] | None = None
) -> int:
    """Compile every kernel of these operations now (or load it from numba's cache).

    Returns how many are ready. ``report(kernel, ready, seconds)`` is called after each.
    Nothing is compiled, and 0 returned, where the compiled path is off (`available`).

    >>> warm(names=[])
    0
    """
    ready = 0
    notices = _state["kernels"].NOTICES if _loaded() else {}
    notices["compiling"] = False  # `report` says what is compiled: no notice on stderr
    try:
        for name, dtypes in signatures(names):
            if not available():
                return 0
            start = time.perf_counter()
            walk = _kernels.get((name, *dtypes), wait=True)
            ready += walk is not None
            if report is not None:
                kinds = ",".join(str(d) for d in dtypes)
                report(f"{name}({kinds})", walk is not None, time.perf_counter() - start)
    finally:
        notices["compiling"] = True
    return ready
