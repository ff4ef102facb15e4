"""The engine's thread pool: how many threads a large operation gets, and running its blocks.

One pool of persistent worker threads per process, started on first use and started again in
a forked child. A worker sleeps on a lock between jobs and is woken by releasing it. Once
numba is loaded, a worker that finished a compiled walk first waits `spin_us` microseconds
(``BCAST_SPIN_US``; 200 by default, 0: never) for the next in compiled code, with the GIL
released, and the caller's walk hands it over and joins it with a few atomic stores and loads
(`run_team`, `bcast.engine.numba_team`): waking a sleeping thread costs tens of microseconds
on a virtual machine, as much as a whole 1 MiB add. How many threads large work gets is a
setting, resolved in this order (`threads`):

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

import contextlib
import functools
import glob
import itertools
import math
import os
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

__all__ = [
    "MAX_TEAM",
    "cache_bytes",
    "cgroup_cpus",
    "cores",
    "pool_size",
    "run_blocks",
    "run_team",
    "spin_us",
    "threads",
    "use_team",
]

CGROUP_ROOT: Final = Path("/sys/fs/cgroup")

_lock = threading.Lock()
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


SPIN_US: Final = 200
"""Microseconds a worker waits for the next compiled walk before it sleeps (`spin_us`)."""


def spin_us() -> int:
    """Return how long a worker waits, spinning, for the next compiled walk (microseconds).

    ``BCAST_SPIN_US`` if set (0: a worker sleeps as soon as its walk is done), otherwise
    `SPIN_US`. A value that is not a whole number is ignored, with a warning the first time.

    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"BCAST_SPIN_US": "0"}):
    ...     spin_us()
    0
    """
    text = os.environ.get("BCAST_SPIN_US", "").strip()
    if text.isdigit():
        return int(text)
    if text and "BCAST_SPIN_US" not in _warned:
        _warned.add("BCAST_SPIN_US")
        warnings.warn(
            f"bcast: BCAST_SPIN_US={text!r} is not a whole number of microseconds; ignored",
            RuntimeWarning,
            stacklevel=2,
        )
    return SPIN_US


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


MAX_TEAM: Final = 255
"""Workers a compiled walk can share its rows with (more threads: the caller does the rest)."""


class _Team:
    """The workers' board for compiled walks (`bcast.engine.numba_team`), once numba is loaded.

    ``serve`` is the compiled wait; ``task`` the walk posted now (one at a time: ``lock``);
    ``spins`` how many reads a worker waits; ``ns_per_spin`` what one read takes here.
    """

    __slots__ = (
        "address",
        "asleep",
        "board",
        "line",
        "lock",
        "ns_per_spin",
        "poke",
        "serve",
        "spins",
        "task",
    )

    def __init__(self, serve: Any, line: int, asleep: int, poke: int) -> None:
        import numpy as np

        self.serve, self.line, self.asleep, self.poke = serve, line, asleep, poke
        self.board = np.zeros(line * (MAX_TEAM + 2), np.int64)
        self.board[asleep::line] = 1  # every worker sleeps on its bell at first
        self.address: int = self.board.__array_interface__["data"][0]  # as walkers take it
        self.lock = threading.Lock()
        self.task: Callable[[int, int, int], None] | None = None
        self.spins = 0
        reserved = MAX_TEAM + 1  # a line no worker has: the reads never find a walk
        serve(self.board, reserved, 0, 100)
        start = time.perf_counter_ns()
        serve(self.board, reserved, 0, 20_000)
        self.ns_per_spin = max(1.0, (time.perf_counter_ns() - start) / 20_000)

    def reset(self) -> None:
        """Start a new board (a forked child: no worker of the old one exists)."""
        self.board[:] = 0
        self.board[self.asleep :: self.line] = 1
        self.lock = threading.Lock()
        self.task = None


_team: _Team | None = None


def use_team(serve: Any, line: int, asleep: int, poke: int) -> None:
    """Let the workers wait for compiled walks in ``serve`` (`bcast.engine.numba_team`).

    Called once, when numba's kernels load; ``line``, ``asleep`` and ``poke`` give the
    board's layout. Until then (and without numba) workers only sleep on their bells.
    """
    global _team
    if _team is None:
        _team = _Team(serve, line, asleep, poke)


def run_team(go: Callable[[int, int, int], None], threads: int, spin: float) -> None:
    """Run a compiled walk on ``threads`` threads: ``go(home, board, helpers)``.

    ``board`` is the address of the team's board (0: none). The caller's thread runs
    ``go(0, board, threads - 1)``, which posts the walk to the workers and joins them in
    compiled code; each worker that takes it runs ``go(w, 0, 0)``. Workers that sleep are
    woken first. Where the team is busy (a walk of another thread) or not there, the
    caller's walk does every part alone. After the walk each worker waits ``spin``
    microseconds for the next before it sleeps (not at all where ``threads`` exceeds the
    cores this process may use).
    """
    team = _team
    helpers = min(threads, MAX_TEAM + 1) - 1
    if team is None or helpers <= 0 or not team.lock.acquire(False):
        go(0, 0, 0)
        return
    try:
        workers = _get_workers(helpers)
        # More threads than cores: a spinning worker would take a core from the one whose
        # part the caller waits for, so the workers sleep as soon as their walk is done.
        team.spins = int(spin * 1000 / team.ns_per_spin) if threads <= cores() else 0
        team.task = go
        board, line, asleep = team.board, team.line, team.asleep
        for worker in workers:
            at = line * worker.index + asleep
            if board[at]:
                board[at] = 0
                worker.wake()
        go(0, team.address, helpers)
    finally:
        team.task = None
        team.lock.release()


class _Job:
    """One share of a `run_blocks` call handed to a worker; ``done`` is released when it ends."""

    __slots__ = ("done", "work")

    def __init__(self, work: Callable[[], None]) -> None:
        self.work = work
        self.done = threading.Lock()
        self.done.acquire()


class _Worker:
    """A thread that sleeps on its bell (a locked Lock) and runs the jobs rung in.

    Handing over a job is a list append and a lock release (no futures, no executor): the
    release wakes the thread where it sleeps in ``acquire``. A ring while the bell is already
    unlocked is a no-op (the thread is awake and finds the job in its list).
    """

    __slots__ = ("bell", "index", "jobs", "thread")

    def __init__(self, name: str, index: int) -> None:
        self.index = index  # its line on the team's board: 1, 2, ...
        self.bell = threading.Lock()
        self.bell.acquire()
        self.jobs: list[_Job] = []
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        bell, jobs, index = self.bell, self.jobs, self.index
        done = 0  # the last team walk this worker finished
        while True:
            team = _team
            if team is not None:
                got = team.serve(team.board, index, done, team.spins)  # GIL released
                if got > 0:
                    task = team.task
                    if task is not None:
                        with contextlib.suppress(BaseException):
                            # a walk does not raise; rows it never claimed the caller's walk does
                            task(index, 0, 0)
                    done = got
                    continue
            bell.acquire()  # sleeps until rung (at once when poked: the ring released it)
            while jobs:
                try:
                    job = jobs.pop()
                except IndexError:  # the caller took it back
                    break
                try:
                    job.work()
                finally:
                    job.done.release()
                    del job  # nothing of the call stays alive in the sleeping thread

    def ring(self, job: _Job) -> None:
        self.jobs.append(job)
        self.wake()
        team = _team
        if team is not None:  # spinning in the team's wait: look at the jobs now
            team.board[team.line * self.index + team.poke] = 1

    def wake(self) -> None:
        """Release the bell the thread sleeps on (nothing if it is released already)."""
        try:  # noqa: SIM105 (contextlib.suppress costs more than the hand-off itself)
            self.bell.release()
        except RuntimeError:  # rung already: the thread is awake and will find the job
            pass

    def take_back(self, job: _Job) -> bool:
        """Withdraw ``job`` if the thread has not started it; tell whether it was withdrawn."""
        try:
            self.jobs.remove(job)
        except ValueError:
            return False
        return True


_workers: list[_Worker] = []


def _get_workers(count: int) -> list[_Worker]:
    """Return ``count`` persistent workers, starting the missing ones (once per process)."""
    if len(_workers) < count:
        with _lock:
            while len(_workers) < count:
                _workers.append(_Worker(f"bcast-{len(_workers)}", len(_workers) + 1))
    return _workers[:count]


def pool_size() -> int:
    """Return how many worker threads this process has started (they persist; 0 at first).

    >>> pool_size() >= 0
    True
    """
    return len(_workers)


def _forget_pool() -> None:
    # In a forked child the workers' threads do not exist: start new ones when needed.
    global _lock
    _workers.clear()
    _lock = threading.Lock()
    if _team is not None:
        _team.reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def run_blocks(
    task: Callable[[int], None], count: int, threads: int, worker_setup: Callable[[], Any]
) -> None:
    """Run ``task(i)`` for every ``i < count`` on ``threads`` threads, the caller's included.

    ``worker_setup()`` returns a context manager entered by each thread around its share
    (NumPy's error state does not cross threads). The first exception raised by a task is
    re-raised here, after every thread has stopped writing. The other threads are the
    process's persistent workers (`pool_size`), woken by a lock release; a share no worker
    has started by the time the caller's own share is done is taken back, not waited for.

    >>> import contextlib
    >>> seen = []
    >>> run_blocks(seen.append, 5, 2, contextlib.nullcontext)
    >>> sorted(seen)
    [0, 1, 2, 3, 4]
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

    workers = _get_workers(threads - 1)
    jobs = [_Job(work) for _ in workers]
    for worker, job in zip(workers, jobs, strict=True):
        worker.ring(job)
    try:
        work()
    finally:
        for worker, job in zip(workers, jobs, strict=True):
            # Every block is taken once the caller's share returns: a worker that has not
            # started yet (a sleeping core wakes in tens of microseconds) is not waited for.
            if not worker.take_back(job):
                job.done.acquire()
    if failed:
        raise failed[0]
