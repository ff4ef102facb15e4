"""The engine's thread pool: how many threads a large operation gets, and running its blocks.

One pool per process, created on first use and recreated in a forked child. Its size is the
number of cores this process may run on (``os.sched_getaffinity``) less the cores other
processes keep busy, measured from ``/proc/stat`` at most once a second; the environment
variable ``BCAST_NUM_THREADS`` (or `bcast.engine.settings`) overrides it. NumPy releases the
GIL inside ufunc loops and copies, so threads that each call a ufunc on their own block of the
output run in parallel.

Blocks are handed out dynamically (the caller's thread works too), so a thread that the
machine slows down takes fewer blocks; which thread computes a block never changes its
values.
"""

from __future__ import annotations

import functools
import glob
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

__all__ = ["cache_bytes", "cores", "free_cores", "run_blocks"]

_REFRESH_S: Final = 1.0

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
# (time, busy jiffies of all CPUs, total jiffies, this process's jiffies) at the last sample
_last: tuple[float, int, int, int] | None = None
_background = 0.0


def cores() -> int:
    """Return the number of cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _cpu_ticks() -> tuple[int, int] | None:
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()[1:9]
        values = [int(v) for v in fields]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values)
    return total - idle, total


def _own_ticks() -> int | None:
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            rest = stat.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12])
    except (OSError, ValueError, IndexError):
        return None


def free_cores() -> int:
    """Return the cores not kept busy by other processes (at least 1).

    The background load is the busy time of all CPUs less this process's own, between two
    samples at least a second apart; until two samples exist every core counts as free.
    """
    global _last, _background
    total_cores = cores()
    now = time.monotonic()
    if _last is None or now - _last[0] >= _REFRESH_S:
        ticks, own = _cpu_ticks(), _own_ticks()
        if ticks is not None and own is not None:
            if _last is not None and ticks[1] > _last[2]:
                busy = ticks[0] - _last[1] - (own - _last[3])
                share = max(0.0, busy / (ticks[1] - _last[2]))
                _background = share * (os.cpu_count() or total_cores)
            _last = (now, ticks[0], ticks[1], own)
    return max(1, min(total_cores, round(total_cores - _background)))


@functools.cache
def cache_bytes() -> int:
    """Return the size of the largest CPU cache (Linux sysfs), or 32 MiB where it is unknown."""
    found = 0
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(index, encoding="ascii") as text:
                value = text.read().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(value[-1:].upper(), 1)
        digits = value.rstrip("KMGkmg")
        if digits.isdigit():
            found = max(found, int(digits) * scale)
    return found or 32 << 20


def _get_pool(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < workers:
            old = _pool
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bcast")
            _pool_size = workers
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def _forget_pool() -> None:
    # In a forked child the pool's threads do not exist: start a new pool when needed.
    global _pool, _pool_size, _lock
    _pool, _pool_size, _lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def run_blocks(
    task: Callable[[int], None], count: int, threads: int, worker_setup: Callable[[], Any]
) -> None:
    """Run ``task(i)`` for every ``i < count`` on ``threads`` threads, the caller's included.

    ``worker_setup()`` returns a context manager entered by each thread around its share
    (NumPy's error state does not cross threads). The first exception raised by a task is
    re-raised here, after every thread has stopped writing.
    """
    threads = min(threads, count)
    if threads <= 1:
        with worker_setup():
            for i in range(count):
                task(i)
        return
    counter = itertools.count()
    failed: list[BaseException] = []

    def work() -> None:
        with worker_setup():
            while not failed:
                i = next(counter)  # itertools.count is atomic under the GIL
                if i >= count:
                    return
                try:
                    task(i)
                except BaseException as exc:
                    failed.append(exc)
                    return

    pool = _get_pool(threads - 1)
    futures: Sequence[Future[None]] = [pool.submit(work) for _ in range(threads - 1)]
    try:
        work()
    finally:
        for future in futures:
            # Every block is taken once the caller's share returns: a thread that has not
            # started yet (a sleeping core wakes in tens of microseconds) is not waited for.
            if not future.cancel():
                future.result()
    if failed:
        raise failed[0]
