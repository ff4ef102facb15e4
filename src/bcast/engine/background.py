"""Work done once, in the background: a queue of keys and one thread that resolves them.

`bcast.engine.compiled` keeps its numba kernels here: a kernel that is not ready is queued,
one daemon thread compiles the queued kernels (or loads them from numba's disk cache) one
after the other and then ends, and meanwhile the caller goes on without it (NumPy's path).
The thread never keeps a program alive, and never runs under a finalising interpreter: at
exit nothing new starts and the job under way is waited for. A child forked while a job runs
resolves nothing more (locks the job held may stay held there).
"""

from __future__ import annotations

import atexit
import collections
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Final

__all__ = ["PENDING", "Resolver", "stop_all"]

PENDING: Final = object()
"""What `Resolver.get` returns for a key that is not resolved yet."""

_resolvers: weakref.WeakSet[Resolver] = weakref.WeakSet()


class Resolver:
    """Resolve keys to values with ``resolve(key)``, once each, on a background thread.

    >>> import threading
    >>> go = threading.Event()
    >>> squares = Resolver(lambda n: go.wait() and n * n, name="squares")
    >>> squares.get(7) is PENDING  # queued; the caller does not wait
    True
    >>> _ = go.set()
    >>> squares.wait(timeout=10), squares.get(7), squares.get(8, wait=True)
    (True, 49, 64)
    """

    def __init__(self, resolve: Callable[[Any], Any], *, name: str) -> None:
        self._resolve = resolve
        self._name = name
        self._done: dict[Hashable, Any] = {}
        self._jobs = threading.Condition()
        self._queue: collections.deque[Hashable] = collections.deque()
        self._queued: set[Hashable] = set()  # queued or being resolved
        self._running = False  # the thread exists
        self._stopping = False  # at exit: nothing new
        self._forked = False  # a child forked during a job: nothing more
        _resolvers.add(self)

    def peek(self, key: Hashable) -> Any:
        """Return the value of ``key`` if it is resolved, else `PENDING` (queueing nothing)."""
        return self._done.get(key, PENDING)

    def get(self, key: Hashable, *, wait: bool = False) -> Any:
        """Return the value of ``key``; if it is not resolved, queue it and return `PENDING`.

        ``wait``: resolve it now, in the caller's thread, instead.
        """
        value = self._done.get(key, PENDING)
        if value is not PENDING:
            return value
        if wait:
            value = self._done[key] = self._resolve(key)
            return value
        with self._jobs:
            if key in self._queued or self._stopping or self._forked:
                return PENDING
            self._queued.add(key)
            self._queue.append(key)
            if not self._running:
                self._running = True
                thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                thread.start()
        return PENDING

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued or being resolved; tell whether that is so."""
        with self._jobs:
            return self._jobs.wait_for(lambda: not self._queued, timeout)

    def forget(self) -> None:
        """Forget every value resolved (for tests); queued keys stay queued."""
        self._done.clear()

    def _work(self) -> None:
        while True:
            with self._jobs:
                if self._stopping or not self._queue:
                    self._running = False
                    self._queued.clear()
                    self._jobs.notify_all()
                    return
                key = self._queue.popleft()
            try:
                value = self._resolve(key)
            except Exception as exc:  # reported, and never retried: the caller's fallback
                warnings.warn(
                    f"bcast: {self._name} failed for {key!r} ({type(exc).__name__}: {exc})",
                    RuntimeWarning,
                    stacklevel=1,
                )
                value = None
            self._done[key] = value
            with self._jobs:
                self._queued.discard(key)
                self._jobs.notify_all()

    def stop(self) -> None:
        """Start nothing more, and wait for the job under way (at exit)."""
        with self._jobs:
            self._stopping = True
            self._queue.clear()
            self._jobs.wait_for(lambda: not self._running)

    def _after_fork(self) -> None:
        self._forked = self._forked or self._running
        self._running = False
        self._queue.clear()
        self._queued.clear()
        self._jobs = threading.Condition()


def stop_all() -> None:
    """Start no new job, and wait for those under way: at exit, before the interpreter ends.

    Also registered again by whoever loads a library whose own exit handlers must not run
    under a job (numba's, registered on its import, would otherwise run before this one).
    """
    for resolver in list(_resolvers):
        resolver.stop()


def _after_fork() -> None:
    for resolver in list(_resolvers):
        resolver._after_fork()


atexit.register(stop_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
