"""Call plans: a NumPy call of one operator on arrays of one layout, planned once, replayed.

Everything an operator decides before its kernel runs depends only on the operands' shapes,
strides and dtypes and on ``out=``'s (the library, the dtype rules, the broadcasting plan,
the kernel, the output's shape, how the work is split, how many threads it gets, the
compiled walk and its tiles). `prepare` makes those decisions once and returns a `Call`;
an operator keeps it in a `CallCache` under the key of its call site and replays it, so a
repeated call does only what its arrays decide: the memory guard for a new result, a
read-only or overlapping ``out=``, the addresses, and the kernel itself.

A cache forgets its calls when the engine's settings change (`bcast.engine.settings`).
``BCAST_NUM_THREADS`` and ``BCAST_COMPILED`` are read when a call is planned: a program that
changes them later starts from `clear_call_caches`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import numpy as np

from bcast.arrays.targets import check_result_shape
from bcast.arrays.views import aligned_view, output_shape
from bcast.core.plans import Plan
from bcast.engine import config, guard
from bcast.engine.kernel import Kernel
from bcast.engine.numpy_path import (
    allocate,
    compiled_runner,
    compute,
    numpy_work,
    quietly,
    run_numpy,
)
from bcast.engine.runner import WALKED, Runner

__all__ = ["Call", "CallCache", "CacheInfo", "call_cache_info", "clear_call_caches", "prepare"]

_ONE: Final = 0  # one kernel call in the caller's thread
_COMPILED: Final = 1  # the compiled runner (NumPy's path where it declines a call)
_BLOCKS: Final = 2  # NumPy's path: blocks on threads


class Call:
    """One operator's call on NumPy arrays of one layout, ready to run again.

    ``call(operands, out=None)`` computes the operator on arrays of exactly the shapes,
    strides and dtypes it was prepared for (and an ``out=`` likewise, or none) and returns
    ``out`` or the new result, with the results and errors of `bcast.engine.execute`.

    ``ufunc``, when not None, computes the whole call: NumPy's ufunc on the operands as
    they are (``ufunc(*operands)``, or into ``out=`` as its last argument), with NumPy's
    floating-point warnings off. That is the call's own path for a kernel that is one ufunc
    on operands of one dtype, which NumPy aligns itself, computed in one call on this
    thread. A caller that takes it adds one to ``calls`` itself; a new result of it needs
    ``small`` (no look at the memory limit: `bcast.engine.guard.small_fits`).

    ``runner`` is the compiled walk it runs (`bcast.engine.runner.Runner`), None where it
    runs NumPy's kernels. Its ``lane``, when not None, is the quickest way to replay the
    call into a writable ``out=`` of exactly the prepared type (see the runner); a caller
    that takes it adds one to ``calls`` itself and, where it declines, calls ``numpy``.
    """

    __slots__ = (
        "_aligned",
        "_how",
        "_kernel",
        "_op",
        "_plan",
        "_slots",
        "calls",
        "dtype",
        "runner",
        "shape",
        "small",
        "ufunc",
    )

    def __init__(
        self,
        op: str,
        plan: Plan,
        kernel: Kernel,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        how: int,
        runner: Any,
        aligned: bool,
        slots: Sequence[int] | None = None,
        ufunc: Any = None,
    ) -> None:
        self._op = op
        self._plan = plan
        self._kernel = kernel
        self.shape = shape
        self.dtype = dtype
        self._how = how
        self.runner: Runner | None = runner if how == _COMPILED else None
        self._aligned = aligned  # the operands are passed as they are (NumPy aligns them)
        self._slots = slots  # the plan operand of each operand (None: the same index)
        self.calls = 0  # how many times it ran
        # a new result this small needs no look at the memory limit (`guard.small_fits`)
        self.small = dtype.itemsize * math.prod(shape) <= guard.SMALL_BYTES
        self.ufunc = ufunc if how == _ONE and aligned else None

    def __call__(self, operands: Sequence[Any], out: Any = None) -> Any:
        """Compute the call on ``operands`` (into ``out``); return ``out`` or the result."""
        self.calls += 1
        if out is None:
            if self.small and guard.small_fits:
                result = np.empty(self.shape, self.dtype)
            else:
                result = allocate(self._op, self.shape, self.dtype)
        elif not out.flags.writeable:
            return self.numpy(operands, out)  # raises the engine's error
        else:
            result = out
        how = self._how
        if how == _COMPILED:
            runner = self.runner
            lane = None if runner is None else runner.lane
            if lane is not None:  # the compiled entry, walking on this thread: called here,
                # not through the runner (`Runner._run` does the same), a frame less: a
                # 64 KiB add making a new result took 4.1 us a call, 4.3 through the runner
                if lane(result, *operands) == WALKED:
                    return result
            elif runner is not None and runner(result, operands):
                return result
        elif how == _ONE and (
            out is None or self._kernel.single_pass or not _overlaps(out, operands)
        ):
            if self._aligned:
                quietly(self._kernel.numpy, result, *operands)
            else:
                quietly(self._kernel.numpy, result, *self._views(operands))
            return result
        return self.numpy(operands, out) if out is not None else self._fresh(operands, result)

    def _views(self, operands: Sequence[Any]) -> list[Any]:
        return _views_of(self._plan, operands, self._slots)

    def numpy(self, operands: Sequence[Any], out: Any) -> Any:
        """Compute on NumPy's path (no compiled walker), with every check, into ``out``.

        What the call does where its runner's ``lane`` declines (an array off its alignment,
        an ``out=`` overlapping an operand) or ``out`` is read-only (it raises).
        """
        return run_numpy(
            self._op,
            self.shape,
            self._kernel,
            self._views(operands),
            self.dtype,
            out,
            compiled=False,
        )

    def _fresh(self, operands: Sequence[Any], result: Any) -> Any:
        compute(self._kernel, result, self._views(operands), compiled=False)
        return result


def _overlaps(out: Any, operands: Sequence[Any]) -> bool:
    return any(np.may_share_memory(out, x) for x in operands)


def _views_of(plan: Plan, operands: Sequence[Any], slots: Sequence[int] | None) -> list[Any]:
    indices = range(len(operands)) if slots is None else slots
    return [
        aligned_view(x, plan, k, broadcast=False, xp=None)
        for x, k in zip(operands, indices, strict=True)
    ]


def prepare(
    op: str,
    plan: Plan,
    kernel: Kernel,
    operands: Sequence[Any],
    *,
    dtype: Any,
    out: Any,
    slots: Sequence[int] | None = None,
) -> Call | None:
    """Plan a call of ``kernel`` on NumPy arrays once; return it, or None to use `execute`.

    None where the call is not of the kind a `Call` replays: operands or an ``out=`` that
    are not NumPy arrays of native byte order, an ``out=`` that `execute` would refuse (it
    then raises). Raises what `execute` raises for the result's size. ``slots``: the plan
    operand of each operand, as `execute` takes it.

    >>> import numpy as np
    >>> import bcast
    >>> from bcast.engine import Kernel
    >>> add = Kernel(lambda out, a, b: np.add(a, b, out=out), lambda xp, a, b: a + b)
    >>> a, b = np.ones((2, 3)), np.arange(3.0)
    >>> call = prepare("add", bcast.plan(a.shape, b.shape), add, (a, b), dtype=a.dtype, out=None)
    >>> call((a, b))
    array([[1., 2., 3.],
           [1., 2., 3.]])
    """
    if not all(type(x) is np.ndarray and x.dtype.isnative for x in operands):
        return None
    dtype = np.dtype(dtype)
    shape = output_shape(plan)
    check_result_shape(op, shape, dtype.itemsize)
    if out is not None and not (
        type(out) is np.ndarray
        and out.shape == shape
        and out.dtype == dtype
        and out.flags.writeable
    ):
        return None
    views = _views_of(plan, operands, slots)
    # NumPy aligns shapes at the right: an operand whose view only prepends ones to its
    # shape (any rule that aligns at the right, as NumPy does) is passed as it is.
    pairs = zip(views, operands, strict=True)
    aligned = all(v.shape == (1,) * (v.ndim - x.ndim) + x.shape for v, x in pairs)
    target = out if out is not None else allocate(op, shape, dtype)
    work = target.size * kernel.cost
    costed = numpy_work(kernel, target, operands)
    try_compiled, split = config.route(kernel.blockwise, target.size, costed, config.get_settings())
    runner = None
    if try_compiled:
        runner = compiled_runner(kernel, target, views, work, operands if aligned else views)
    if runner is not None and runner.walk is not None and aligned:
        how = _COMPILED
    else:
        how = _BLOCKS if split else _ONE
    # A kernel's ufunc computes operands of one dtype (`bcast.engine.Kernel`).
    ufunc = kernel.ufunc if len({x.dtype for x in operands}) == 1 else None
    return Call(op, plan, kernel, shape, dtype, how, runner, aligned, slots, ufunc)


class CacheInfo(NamedTuple):
    """What the call caches hold: replayed calls, calls planned, calls kept, at most kept."""

    hits: int
    misses: int
    size: int
    limit: int


class CallCache:
    """Calls by the key of their call site, at most ``limit`` (the oldest forgotten first).

    ``lookup(key)`` returns the call kept under ``key`` or None (a dict's ``get``: the
    operators' fast path calls it). A call kept counts one miss (it was planned) and one
    hit per run after its first. Forgets every call when the engine's settings change.

    >>> cache = CallCache(limit=2)
    >>> cache.lookup("k") is None, cache.info()
    (True, CacheInfo(hits=0, misses=0, size=0, limit=2))
    """

    __slots__ = ("_calls", "_lock", "_retired", "limit", "lookup", "misses")

    def __init__(self, limit: int = 256) -> None:
        self._calls: dict[Any, Call] = {}
        self._lock = threading.Lock()
        self._retired = 0  # the hits of calls no longer kept
        self.lookup = self._calls.get
        self.misses = 0
        self.limit = limit
        _caches.append(self)

    def put(self, key: Any, call: Call) -> None:
        """Keep ``call`` under ``key`` (a call planned: one miss)."""
        with self._lock:
            self.misses += 1
            calls = self._calls
            while len(calls) >= self.limit > 0:
                self._retire(calls.pop(next(iter(calls))))
            if self.limit > 0:
                calls[key] = call

    def _retire(self, call: Call) -> None:
        self._retired += max(0, call.calls - 1)

    def clear(self) -> None:
        """Forget every call (the counters stay)."""
        with self._lock:
            for call in self._calls.values():
                self._retire(call)
            self._calls.clear()

    def info(self) -> CacheInfo:
        """Return the counters and sizes."""
        kept = list(self._calls.values())
        hits = self._retired + sum(max(0, call.calls - 1) for call in kept)
        return CacheInfo(hits, self.misses, len(kept), self.limit)


_caches: list[CallCache] = []


def call_cache_info() -> CacheInfo:
    """Return the call caches' counters, summed: how many calls were replayed, how many planned.

    >>> import numpy as np
    >>> import bcast, bcast.engine
    >>> a, b, out = np.ones((512, 128)), np.ones(128), np.empty((512, 128))
    >>> before = bcast.engine.call_cache_info()
    >>> for _ in range(3):
    ...     _ = bcast.ops.add(a, b, out=out)
    >>> after = bcast.engine.call_cache_info()
    >>> after.misses - before.misses, after.hits - before.hits
    (1, 2)
    """
    infos = [cache.info() for cache in _caches]
    return (
        CacheInfo(*(sum(column) for column in zip(*infos, strict=True)))
        if infos
        else CacheInfo(0, 0, 0, 0)
    )


def clear_call_caches() -> None:
    """Forget every planned call (for a program that changed ``BCAST_*`` variables)."""
    for cache in _caches:
        cache.clear()


config.watch(clear_call_caches)
