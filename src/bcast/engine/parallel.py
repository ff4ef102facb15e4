"""The engine's thread pool: how many threads a large operation gets, and running its blocks.

One pool per process, created on first use and recreated in a forked child. How many threads
large work gets is a setting, resolved in this order (`threads`):

1. ``bcast.engine.settings(threads=n)``, for a ``with`` block (`bcast.engine.executor`);
2. the environment variable ``BCAST_NUM_THREADS``, a positive integer;
3. otherwise the cores this process may use (`cores`: its CPU affinity, and a CPU quota of
   its cgroup where one is set), at most ``OMP_NUM_THREADS`` where that is set, as the
   OpenMP libraries next to bcast (PyTorch, numexpr, onnxruntime) read it.

It never depends on what other processes do on the machine at that moment, so a program runs
with the same threads every time. NumPy releases the GIL inside ufunc loops and copies, so
threads that each call a ufunc on their own block of the output run in parallel.

Blocks are handed out dynamically (the caller's thread works too), so a thread that the
machine slows down takes fewer blocks; which thread computes a block never changes its
values.
"""

from __future__ import annotations

import functools
import glob
import itertools
import math
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

__all__ = ["cache_bytes", "cgroup_cpus", "cores", "run_blocks", "threads"]

CGROUP_ROOT: Final = Path("/sys/fs/cgroup")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_warned: set[str] = set()


def cgroup_cpus(root: Path = CGROUP_ROOT, own: str | None = None) -> float | None:
    """Return the CPU quota of this process's cgroup in cores, or None where none is set.

    cgroup v2: ``cpu.max`` (``"200000 100000"``: 2 cores; ``"max 100000"``: no quota) in
    the process's own group (``own``: its path as ``/proc/self/cgroup`` names it) or the
    root. cgroup v1: ``cpu/cpu.cfs_quota_us`` over ``cpu/cpu.cfs_period_us`` (-1: none).

    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = (Path(folder) / "cpu.max").write_text("150000 100000")
    ...     cgroup_cpus(Path(folder), own="/")
    1.5
    """
    if own is None:
        own = _own_cgroup()
    for group in dict.fromkeys([root / own.lstrip("/"), root]):
        try:
            quota, period = (group / "cpu.max").read_text().split()[:2]
        except (OSError, ValueError):
            continue
        return None if quota == "max" else _quota(quota, period)
    try:
        quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
        period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return _quota(quota, period)


def _quota(quota: str, period: str) -> float | None:
    try:
        share = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None
    return share if share > 0 else None


def _own_cgroup() -> str:
    try:
        with open("/proc/self/cgroup", encoding="ascii") as groups:
            for line in groups:
                if line.startswith("0::"):  # the cgroup v2 hierarchy
                    return line[3:].strip()
    except OSError:
        pass
    return "/"


@functools.cache
def cores() -> int:
    """Return the number of cores this process may use: its affinity, within its cgroup quota.

    >>> cores() >= 1
    True
    """
    try:
        found = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        found = os.cpu_count() or 1
    quota = cgroup_cpus()
    if quota is not None:
        found = min(found, math.ceil(quota))
    return max(1, found)


def _positive(name: str) -> int | None:
    """Read a positive integer from environment variable ``name`` (of a list: the first)."""
    text = os.environ.get(name, "").split(",")[0].strip()
    if not text:
        return None
    if text.isdigit() and int(text) > 0:
        return int(text)
    if name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"bcast: {name}={os.environ[name]!r} is not a positive integer; ignored",
            RuntimeWarning,
            stacklevel=3,
        )
    return None


def threads() -> int:
    """Return how many threads large work gets when ``bcast.engine.settings`` does not say.

    ``BCAST_NUM_THREADS`` if set; otherwise `cores`, at most ``OMP_NUM_THREADS`` if set.
    A value that is not a positive integer is ignored, with a warning the first time.

    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"BCAST_NUM_THREADS": "3"}):
    ...     threads()
    3
    """
    chosen = _positive("BCAST_NUM_THREADS")
    if chosen is not None:
        return chosen
    cap = _positive("OMP_NUM_THREADS")
    return cores() if cap is None else min(cores(), cap)


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
