"""A compiled walk planned once and run on the arrays of each call (`Walk`, `Runner`).

`bcast.engine.compiled` plans a walk per operation and layout (`Walk`: the walker's stride
tables, its tiles' recipes) and hands it, with the walker and the entry it resolved, to a
`Runner`. What a call of the same layout still has to do is what only its arrays know: their
addresses, whether they are aligned and overlap, and the values of the tiles. The compiled
entry (`bcast.engine.numba_entry.enter`) does that in one call; while it compiles in the
background, the runner does it in Python.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from bcast.engine import layout as _layout

__all__ = ["HEAD", "MAX_RANK", "READY", "WALKED", "Runner", "Walk"]

MAX_RANK: Final = 8
"""Arranged outputs of higher rank (after merging) stay on NumPy's path."""

READY: Final = 0
"""The compiled entry filled the addresses and tiles: the walker may run."""
WALKED: Final = 3
"""The entry filled the addresses and tiles and ran the walk on its thread: the output is done.

(The entry's other answers, `bcast.engine.numba_entry.UNALIGNED` and the rest, mean that
NumPy's path computes.)"""

HEAD: Final = (
    "walker", "where", "parts", "layout", "chunk", "stream", "tiles", "tile_rows", "tile_width",
    "busy",
)  # fmt: skip
"""The fields of the entry's ``head`` (int64), in order: the walker's machine code address
(0: the caller walks), the address of the walker's ``where`` and its number of ``parts``, the
address of its ``layout``, its ``chunk`` and ``stream``, then the address of the table of
tiles, its rows and its width, and a count the entry holds the tiles by while it walks
(`bcast.engine.numba_entry.enter`)."""
_NATIVE: Final = HEAD.index("walker")
_STREAM: Final = HEAD.index("stream")

TRIAL_CALLS: Final = 8
"""Calls of each kind of store a runner that measures makes (`Runner`), the first half of
each not counted: they find the caches as the other kind left them. On the 2-core Xeon VM,
plain stores of a 64 MiB outer add took 4.1, 3.9, 2.7, 1.8 ms after streaming ones, then
1.25-1.35 ms (streaming: 1.40-1.45)."""
_clock = time.perf_counter


@dataclass(frozen=True, slots=True)
class Walk:
    """What a walk over arrays of one layout needs, but their addresses and tiles' values."""

    tiles: tuple[_layout.Tile, ...]
    dtypes: tuple[np.dtype[Any], ...]  # as the walker reads them, four
    # (5, MAX_RANK): the four arrays' strides in elements, then the output's shape; the
    # walker only reads it
    layout: np.ndarray[Any, Any]
    rows: int
    row_bytes: int


Kinds = tuple[tuple[int, int], ...]
"""The itemsize and number of dimensions of the output and each operand (an entry's types)."""

_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class Runner:
    """One operation's walk over arrays of one layout, ready for the arrays of each call.

    ``runner(out, operands) -> bool`` computes ``out`` from arrays of the layout, dtypes and
    ranks it was prepared for (`bcast.engine.compiled.prepare`; the compiled entry reads the
    arrays as those types, so it must be given exactly those), and tells whether it did. It
    does not (False, nothing written) when the walker does not take the layout (``walk`` is
    None: a negative or uneven stride, an output not contiguous in its inner axis, too many
    axes), an array is off its natural alignment, the output overlaps an operand other than
    element for element, the walker is still compiling in the background (or numba could
    not compile it), or another thread is running this runner: the caller then uses NumPy.

    ``find_walker()`` and ``find_entry()`` return the compiled walker (its operation bound)
    and entry, or None while they compile. ``run_team(go, threads)`` runs the walk on that
    many threads (`bcast.engine.parallel.run_team`); each part of the rows has its own
    counter, from which the walkers claim ``chunk`` rows at a time.

    ``lane(out, *operands)``, once the entry and a one-thread walker are compiled (None
    before, and always with more threads), is the compiled entry itself: it checks the
    arrays and walks on the caller's thread, with no Python in between and no Python lock
    (it keeps a call's addresses on its own stack, and holds the tiles, if any, while it
    walks), and returns `WALKED` having written ``out``. Like the runner, it must be given
    arrays of exactly the prepared types, and ``out`` writable (it does not look).

    ``stream``: the walk writes with streaming stores. With ``measure``, that is the first
    guess: the compiled walks of the first calls write with each kind of store in turn
    (`TRIAL_CALLS` calls each), timed, and the runner keeps the kind whose quickest counted
    call was the quicker (``stream`` then says which; ``measuring`` is False). Either kind
    writes the same values; only the time differs, and near the last-level cache's size it
    depends on the machine more than any rule by size can tell.

    ``swap``: the walk was planned with the two operands the other way round (an operation
    computed by another's kernel, `bcast.engine.operations.SWAPPED`); the runner and its
    lane are still called with them in the operation's order.
    """

    __slots__ = (
        "_at_head",
        "_buffers",
        "_busy",
        "_chunk",
        "_claimed",
        "_enter",
        "_find_entry",
        "_find_walker",
        "_go",
        "_head",
        "_held",
        "_run_team",
        "_swap",
        "_tiles",
        "_trial",
        "_where",
        "lane",
        "name",
        "stream",
        "threads",
        "walk",
    )

    def __init__(
        self,
        name: str,
        walk: Walk | None,
        kinds: Kinds,
        *,
        threads: int,
        stream: bool,
        measure: bool = False,
        chunk: int,
        run_team: Callable[[Callable[[int, int, int], None], int], None],
        find_walker: Callable[[], Any],
        find_entry: Callable[[], Any],
        swap: bool = False,
    ) -> None:
        self.name = name
        self._swap = swap
        self.walk = walk
        self.threads = threads if walk is None else max(1, min(threads, walk.rows))
        self.stream = stream
        self._chunk = chunk
        self._run_team = run_team
        self._find_walker = find_walker
        self._find_entry = find_entry
        self._busy = threading.Lock()
        # The addresses of the output and three operands, then the rows handed out so far
        # of each thread's part (the walkers share the counters; the entry zeroes them).
        self._where = np.zeros(4 + self.threads, np.int64)
        self._claimed = self._where[4:]
        self._held: list[Any] = []  # this call's tiles, on the Python path
        # The entry fills tiles it owns: buffers that live as long as the runner.
        self._tiles, self._buffers = _tile_table(walk, kinds)
        # What the entry reads (`HEAD`); the walker's address is filled in once it is
        # compiled, where the walk has one thread (the entry then walks).
        self._head = np.zeros(len(HEAD), np.int64)
        self._at_head = _address(self._head)  # the entry reads it there
        if walk is not None:
            fields = {
                "walker": 0,
                "where": _address(self._where),
                "parts": self.threads,
                "layout": _address(walk.layout),
                "chunk": chunk,
                "stream": stream,
                "tiles": _address(self._tiles),
                "tile_rows": self._tiles.shape[0],
                "tile_width": self._tiles.shape[1],
                "busy": 0,
            }
            self._head[:] = [fields[field] for field in HEAD]
        self._go: Callable[[int, int, int], None] | None = None
        self._enter: Any = None
        self.lane: Callable[..., int] | None = None
        # each trial call's seconds while measuring (no lane meanwhile: it has no clock)
        self._trial: list[float] | None = [] if measure and walk is not None else None
        if walk is not None:  # both asked for (queued for the background) now
            self._enter = find_entry()
            self._resolve()

    def _resolve(self) -> bool:
        """Find the walker and the entry (queueing each for the background); tell if ready."""
        walk = self.walk
        if walk is None:
            return False
        if self._go is None:
            walker = self._find_walker()
            if walker is None:
                return False
            if self.threads == 1:  # first: an entry called once _go is set walks itself
                self._head[_NATIVE] = getattr(walker, "native", 0)
            self._go = _bind(walker, self._where, walk, self._chunk, self.stream)
        if self._enter is None:
            self._enter = self._find_entry()
        if self._enter is not None and self._head[_NATIVE] != 0 and self._trial is None:
            # the entry walks on the caller's thread (holding the tiles, if any, itself)
            enter = functools.partial(self._enter, self._at_head)
            self.lane = _swapping(enter) if self._swap else enter
        return True

    @property
    def measuring(self) -> bool:
        """Whether the runner is still timing both kinds of store (``measure``)."""
        return self._trial is not None

    def _timed(self, seconds: float) -> None:
        """Count a compiled walk of the trial; switch the kind of store, or keep the quicker."""
        trial = self._trial
        assert trial is not None and self.walk is not None
        trial.append(seconds)
        if len(trial) % TRIAL_CALLS:
            return
        if len(trial) == TRIAL_CALLS:
            self._set_stream(not self.stream)
            return
        half = TRIAL_CALLS // 2
        first, second = min(trial[half:TRIAL_CALLS]), min(trial[TRIAL_CALLS + half :])
        if first <= second:
            self._set_stream(not self.stream)
        self._trial = None
        self._resolve()  # the lane, now that no call is timed

    def _set_stream(self, stream: bool) -> None:
        self.stream = stream
        self._head[_STREAM] = stream
        walker = self._find_walker()
        if walker is not None and self.walk is not None:
            self._go = _bind(walker, self._where, self.walk, self._chunk, stream)

    def _run(self, out: np.ndarray[Any, Any], operands: Sequence[Any]) -> bool:
        """Compute ``out`` from ``operands`` if the walk can; tell whether it did."""
        lane = self.lane
        if lane is not None:
            return bool(lane(out, *operands) == WALKED)
        go, enter = self._go, self._enter
        if go is None or enter is None:
            return self._call_in_python(out, operands)
        if not self._busy.acquire(False):
            return False
        try:
            started = _clock() if self._trial is not None else 0.0
            ready = enter(self._at_head, out, *(operands[::-1] if self._swap else operands))
            if ready == READY:
                if self.threads == 1:
                    go(0, 0, 0)
                else:
                    self._run_team(go, self.threads)
            elif ready != WALKED:
                return False
            if self._trial is not None:
                self._timed(_clock() - started)
        finally:
            self._busy.release()
        return True

    __call__ = _run

    def _call_in_python(self, out: np.ndarray[Any, Any], operands: Sequence[Any]) -> bool:
        """Run while the walker or the entry compiles (or where numba cannot compile it)."""
        if not self._resolve():
            return False
        if self._enter is not None:
            return self._run(out, operands)
        go = self._go
        if go is None or not self._busy.acquire(False):
            return False
        try:
            if not self._enter_in_python(out, operands[::-1] if self._swap else operands):
                return False
            self._claimed[:] = 0
            if self.threads == 1:
                go(0, 0, 0)
            else:
                self._run_team(go, self.threads)
        finally:
            self._held = []
            self._busy.release()
        return True

    def _enter_in_python(self, out: np.ndarray[Any, Any], operands: Sequence[Any]) -> bool:
        """Do what the compiled entry does, while it compiles: checks, tiles, addresses."""
        assert self.walk is not None
        bases = [out, *operands]
        if not all(a.flags.aligned for a in bases):
            return False  # numba's loads and stores assume naturally aligned elements
        for x in operands:
            if np.may_share_memory(out, x) and not _layout.same_elements(out, x):
                return False
        for tile in self.walk.tiles:  # the layout is known; the tiles' values are this call's
            bases[tile[0]] = _layout.make_tile(bases[tile[0]], tile)
        self._held = bases  # alive until the walk is done
        addresses = [a.__array_interface__["data"][0] for a in bases]
        self._where[:4] = addresses + addresses[1:2] * (4 - len(addresses))
        return True


def _swapping(enter: Callable[..., int]) -> Callable[..., int]:
    """Return the lane of a runner prepared with its two operands swapped (`swap`)."""

    def lane(out: np.ndarray[Any, Any], x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> int:
        return enter(out, y, x)

    return lane


def _bind(
    walker: Any, where: np.ndarray[Any, Any], walk: Walk, chunk: int, stream: bool
) -> Callable[[int, int, int], None]:
    """Return ``go(home, board, helpers)``: the walker on these arrays (no Python frame).

    It walks part ``home`` of the rows first; ``helpers`` > 0 (the caller's thread) posts
    the walk to that many workers on the board at address ``board``
    (`bcast.engine.parallel.run_team`). ``where`` and the walk's layout outlive it.
    """
    parts = where.size - 4
    layout = _address(walk.layout)
    return functools.partial(walker, _address(where), parts, *walk.dtypes, layout, chunk, stream)


def _address(array: np.ndarray[Any, Any]) -> int:
    address: int = array.__array_interface__["data"][0]
    return address


def _tile_table(
    walk: Walk | None, kinds: Kinds
) -> tuple[np.ndarray[Any, Any], list[np.ndarray[Any, Any]]]:
    """Return the entry's table of tiles (`bcast.engine.numba_entry.enter`) and their buffers.

    A row: the operand, the rank of the part a tile copies, the tile's address, that part's
    shape (the axes a tile does not stretch over kept at length 1) and its strides in bytes.
    """
    recipes = () if walk is None else walk.tiles
    width = max([len(recipe[1]) for recipe in recipes], default=0)
    table = np.zeros((len(recipes), 3 + 2 * width), np.int64)
    buffers = []
    for row, (j, shape, strides, keep, _) in zip(table, recipes, strict=True):
        rank = len(shape)
        kept = [1 if i < len(keep) and keep[i].stop == 1 else n for i, n in enumerate(shape)]
        buffer = np.empty(math.prod(kept), _WORDS[kinds[j][0]])  # bits: the walker's dtype
        buffers.append(buffer)
        row[:3] = (j, rank, buffer.__array_interface__["data"][0])
        row[3 : 3 + rank] = kept
        row[3 + rank : 3 + 2 * rank] = strides
    return table, buffers
