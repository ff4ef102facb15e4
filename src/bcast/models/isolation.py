"""Work by peer libraries on untrusted files, run in a worker process with limits.

OpenVINO reading and compiling a model, ONNX shape inference and the runtimes of ``verify``
run C++ code on whatever the file holds: it can crash the process, run for minutes or take
all the memory. `run_isolated` runs such a call in a worker process (a fresh interpreter,
reused from call to call while it stays healthy) whose address space is capped with
``RLIMIT_AS`` and whose answer is awaited no longer than the time left. A crash, a memory
exhaustion or a timeout becomes `IsolationError`, a `ModelError` of one line; the worker is
then replaced for the next call. The limits of a run (`Limits`, from `bcast.models.limits`)
are set for a ``with`` block (`limits`): the time limit is a deadline shared by every call
inside the block (one model).
The memory limit bounds the whole process tree, not the worker alone: while a call runs, the
resident memory of this process and the worker together (`tree_resident`) is read every
`WATCH_SECONDS`, and a worker that takes the tree past the limit is stopped as if it had run
out of memory; the callers estimate their own allocations against what the tree has left.
Inside the worker, `run_isolated` calls the function at once: work sent there whole (reading
a model) runs its own isolated steps (ONNX shape inference) in place. This module knows no
model format.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import pickle
import select
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Final, TypeVar

from bcast._spawn import PRELOADS, Spawned, preload_of, spawn
from bcast.core.errors import show_bytes
from bcast.models.graph import ModelError
from bcast.models.limits import (
    DEFAULT_TIMEOUT,
    Limits,
    current_limits,
    default_max_memory,
    limits,
    time_left,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "PRELOADS",
    "WATCH_SECONDS",
    "IsolationError",
    "Limits",
    "adopt",
    "current_limits",
    "default_max_memory",
    "in_worker",
    "limits",
    "prestart",
    "run_isolated",
    "shutdown",
    "tree_resident",
]

T = TypeVar("T")

_HEADER: Final = struct.Struct("!Q")
_SIGNALS: Final = {signal.SIGSEGV: "signal 11", signal.SIGKILL: "killed"}
WATCH_SECONDS: Final = 0.02
"""How often the process tree's resident memory is read while the worker works."""
_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _resident(pid: int | str) -> int | None:
    """Return the resident bytes of process ``pid`` (``"self"``), or None where unknown."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def tree_resident() -> int | None:
    """Return the resident bytes of this process and its worker together (None: unknown).

    Read from ``/proc`` (Linux); None elsewhere, where only the worker's own cap holds.

    >>> used = tree_resident()
    >>> used is None or used > 0
    True
    """
    return _with_worker(_worker.process.pid if _worker is not None and _worker.alive() else None)


def _with_worker(pid: int | None) -> int | None:
    """Return the resident bytes of this process and process ``pid`` (None: no /proc)."""
    own = _resident("self")
    if own is None:
        return None
    return own + ((_resident(pid) or 0) if pid is not None else 0)


_WATCHED: Final = _resident("self") is not None  # /proc tells resident memory here


class IsolationError(ModelError):
    """A peer library crashed, ran out of memory or time in the worker (one-line message)."""


class _Worker:
    """One worker process: pickled calls in on one pipe, pickled answers out on another."""

    def __init__(
        self,
        asked: int | None,
        memory: int | None,
        preload: str = "",
        spawned: Spawned | None = None,
    ) -> None:
        self.asked = asked  # the limit asked for (None: the default), to tell when it changes
        self.memory = memory
        self.preload = preload  # the modules it imported before its first call
        self.overrun = False  # the tree passed `memory` during a call: the worker was stopped
        self.process, self.to_child, self.from_child = spawned or spawn(preload)
        with suppress(OSError):  # its cap comes first; one that died says so at the call
            _write_all(self.to_child, _HEADER.pack(memory or 0))

    def call(self, payload: bytes, timeout: float | None) -> tuple[str, Any]:
        try:
            os.write(self.to_child, _HEADER.pack(len(payload)))
            _write_all(self.to_child, payload)
            header = self._read(_HEADER.size, timeout)
            if header is None:
                return self._died(timeout)
            body = self._read(_HEADER.unpack(header)[0], timeout)
        except (BrokenPipeError, OSError):
            return self._died(timeout)
        if body is None:
            return self._died(timeout)
        if self.overrun:  # the answer came in the last slice: the tree was over all the same
            self.close()
            return "memory", None
        try:
            with _no_collections():  # a 30,000-node graph unpickles in 0.10 s, not 0.13
                kind, value = pickle.loads(body)
        except Exception as err:  # an exception that does not unpickle: say what it was
            return "raise", RuntimeError(f"{type(err).__name__}: {err}")
        return str(kind), value

    def _read(self, size: int, timeout: float | None) -> bytes | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        watched = self.memory is not None and _WATCHED
        chunks: list[bytes] = []
        while size:
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            step = (
                wait if not watched else WATCH_SECONDS if wait is None else min(wait, WATCH_SECONDS)
            )
            ready, _, _ = select.select([self.from_child], [], [], step)
            if watched and self._over():
                self.overrun = True
                self.process.kill()
                return None
            if not ready:
                if step == wait:  # the deadline, not a watch slice
                    return None
                continue
            chunk = os.read(self.from_child, min(size, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def _over(self) -> bool:
        """Tell whether this process and the worker together hold more than the limit."""
        used = _with_worker(self.process.pid)
        return self.memory is not None and used is not None and used > self.memory

    def _died(self, timeout: float | None) -> tuple[str, Any]:
        if self.overrun:
            self.close()
            return "memory", None
        code = self.process.wait(timeout=0.5)
        self.close()
        if code is None:
            return "timeout", timeout
        return "died", code

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for fd in (self.to_child, self.from_child):
            with suppress(OSError):
                os.close(fd)


_worker: _Worker | None = None
_serving: int | None = None  # in the worker: its memory cap in bytes (0: none)


def prestart(kinds: tuple[str, ...] = ()) -> None:
    """Start the worker process now, under the limits in force, if none runs.

    Its interpreter then starts while the caller reads the model: the first isolated call
    does not wait for it. ``kinds`` (keys of `PRELOADS`: ``"onnx"``, ``"openvino"``) name
    the peer libraries the worker imports at once, before any model reaches it, so their
    import overlaps the caller's work too. A worker that runs under other limits (a
    command's ``--max-memory``) is replaced by one that imports what it imported.
    """
    global _worker
    chosen = current_limits()
    preload = preload_of(kinds)
    if _worker is not None and _worker.alive() and _worker.asked != chosen.max_memory:
        preload = preload or _worker.preload
        shutdown()
    if _worker is None or not _worker.alive():
        shutdown()
        with suppress(OSError):  # no process to spare: the first call says so
            _worker = _Worker(chosen.max_memory, chosen.memory(), preload)


def adopt(spawned: Spawned, preload: str) -> None:
    """Take over a worker `bcast._spawn.spawn` started (``python -m bcast``), if none runs.

    It runs under the limits in force (their memory cap is sent to it now); a worker that
    runs already is kept, and the one given is stopped.
    """
    global _worker
    if _worker is not None and _worker.alive():
        spawned[0].kill()
        spawned[0].wait()
        for fd in spawned[1:]:
            os.close(fd)
        return
    chosen = current_limits()
    _worker = _Worker(chosen.max_memory, chosen.memory(), preload, spawned)


def shutdown() -> None:
    """Stop the worker process, if one runs (it is started again on the next call)."""
    global _worker
    if _worker is not None:
        _worker.close()
        _worker = None


atexit.register(shutdown)


def run_isolated(
    peer: str, doing: str, function: Callable[..., T], *args: Any, where: str = ""
) -> T:
    """Call ``function(*args)`` in the worker process, under the limits in force.

    ``function`` and ``args`` must pickle (a module-level function); so must its value.
    An exception it raises is raised here again, as it was (``where`` is not added to it).
    Called in the worker itself, it calls ``function`` there.

    Parameters
    ----------
    peer : str
        The library doing the work, for messages (``"OpenVINO"``).
    doing : str
        What it does, for messages (``"reading the model"``).
    where : str, optional
        What the message starts with (the model's path).
    function : callable
        A module-level function.
    *args
        Its arguments.

    Returns
    -------
    Any
        What ``function`` returned.

    Raises
    ------
    IsolationError
        If the worker crashed, ran past the memory limit or past the time limit.

    Examples
    --------
    >>> run_isolated("Python", "adding", max, 2, 3)
    3
    """
    if _serving is not None:  # this is the worker: the call is isolated already
        return _run_here(peer, doing, function, args, _serving)
    try:
        kind, value = _run(peer, doing, function, args)
    except IsolationError as err:
        raise IsolationError(f"{where}: {err}" if where else str(err)) from None
    if kind == "raise":  # what the function raised, as it said it
        raise value
    return value  # type: ignore[no-any-return]


def in_worker() -> bool:
    """Tell whether this process is the worker (where `run_isolated` calls directly).

    >>> in_worker()
    False
    """
    return _serving is not None


def _run_here(
    peer: str, doing: str, function: Callable[..., T], args: tuple[Any, ...], memory: int
) -> T:
    """Call ``function`` in this process, the worker, as the worker answers a call.

    Running out of memory is an `IsolationError`, as it is where the parent asks, so that
    a caller that takes other failures as "no answer" does not take this one so.
    """
    try:
        return function(*args)
    except MemoryError:
        raise IsolationError(_memory_message(peer, doing, memory or None)) from None
    except RuntimeError as err:  # C++ allocation failures arrive so
        if "bad_alloc" in str(err):
            raise IsolationError(_memory_message(peer, doing, memory or None)) from None
        raise


def _run(
    peer: str, doing: str, function: Callable[..., Any], args: tuple[Any, ...]
) -> tuple[str, Any]:
    global _worker
    chosen = current_limits()
    left = time_left()
    if left is not None and left <= 0:
        raise IsolationError(_timeout_message(peer, doing, chosen.timeout))
    if _worker is not None and (_worker.asked != chosen.max_memory or not _worker.alive()):
        shutdown()
    if _worker is None:
        try:
            _worker = _Worker(chosen.max_memory, chosen.memory())
        except OSError as err:  # out of processes or file descriptors
            raise IsolationError(
                f"{peer} could not start its worker process ({err.strerror or err})"
            ) from None
    memory = _worker.memory
    payload = pickle.dumps((function, args), protocol=pickle.HIGHEST_PROTOCOL)
    kind, value = _worker.call(payload, left)
    if kind in ("ok", "raise"):
        return kind, value
    shutdown()
    if kind == "timeout":
        raise IsolationError(_timeout_message(peer, doing, chosen.timeout))
    if kind == "memory":
        raise IsolationError(_memory_message(peer, doing, memory))
    code = value if isinstance(value, int) else 0
    if code < 0:
        try:
            name = _SIGNALS.get(signal.Signals(-code), f"signal {-code}")
        except ValueError:
            name = f"signal {-code}"
        if -code == signal.SIGKILL and memory is not None:
            raise IsolationError(_memory_message(peer, doing, memory))
        raise IsolationError(f"{peer} crashed {doing} ({name})")
    raise IsolationError(f"{peer} stopped {doing} (its process exited with status {code})")


def _timeout_message(peer: str, doing: str, timeout: float | None) -> str:
    return f"{peer} took longer than {timeout:g} s {doing}; stopped (see --timeout)"


def _memory_message(peer: str, doing: str, memory: int | None) -> str:
    shown = "its memory limit" if memory is None else f"the memory limit of {show_bytes(memory)}"
    return f"{peer} ran out of {shown} {doing}; stopped (see --max-memory)"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


@contextmanager
def _no_collections() -> Iterator[None]:
    """Leave the cyclic collector off while a graph of many objects is built, then on again.

    Reading or unpickling a model's graph makes hundreds of thousands of objects, and the
    collector would pass over them again and again (a quarter of a large graph's unpickling);
    they hold few cycles, and what they hold is collected once it is back on.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _close_others(*kept: int) -> None:  # pragma: no cover - runs in the worker process
    """Close every file this process was given but stdin, stdout, stderr and ``kept``.

    A worker is started with ``os.posix_spawn`` (`bcast._spawn.spawn`), which passes on
    every file its caller left inheritable; ``subprocess`` would have closed them. A pipe
    kept open here would keep its reader waiting for an end of file.
    """
    folder = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    try:
        open_fds = [int(name) for name in os.listdir(folder)]
    except (OSError, ValueError):
        open_fds = list(range(3, 256))
    for fd in open_fds:
        if fd > 2 and fd not in kept:
            with suppress(OSError):
                os.close(fd)


def serve() -> None:  # pragma: no cover - runs in the worker process
    """Serve calls in the worker process: ``python -c 'from ...isolation import serve; serve()'``.

    Arguments (``sys.argv``): the fd to read calls from, the fd to write answers to and
    the modules to import before the first call (comma separated, `PRELOADS`' values:
    trusted code, loaded while the caller is still starting; ``module:function`` calls the
    function too). The first message is the
    memory cap in bytes (0: none), set before any call is read. OpenVINO's telemetry is
    turned off before anything loads.
    """
    global _serving
    sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]
    inbox, outbox = (int(a) for a in sys.argv[1:3])
    _close_others(inbox, outbox)
    for preload in sys.argv[3].split(",") if len(sys.argv) > 3 and sys.argv[3] else ():
        if any(preload in modules for modules in PRELOADS.values()):
            module, _, function = preload.partition(":")  # "module:function": call it too
            with suppress(Exception):  # the first call says what is wrong, in its words
                loaded = importlib.import_module(module)
                if function:
                    getattr(loaded, function)()
    gc.freeze()  # the modules loaded stay: collections pass over the calls' objects only
    gc.enable()  # (the worker starts with them off: `bcast._spawn`)
    cap = _read_exact(inbox, _HEADER.size)
    if cap is None:
        return
    memory = _serving = _HEADER.unpack(cap)[0]
    if memory:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    while True:
        header = _read_exact(inbox, _HEADER.size)
        if header is None:
            return
        body = _read_exact(inbox, _HEADER.unpack(header)[0])
        if body is None:
            return
        try:
            function, args = pickle.loads(body)
            with _no_collections():  # a model's graph: many objects, few cycles
                answer: tuple[str, Any] = ("ok", function(*args))
        except MemoryError:
            answer = ("memory", None)
        except Exception as err:  # C++ allocation failures arrive as RuntimeError
            answer = ("memory", None) if "bad_alloc" in str(err) else ("raise", err)
        try:
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:  # an unpicklable value or exception: say what it was
            data = pickle.dumps(("raise", RuntimeError(f"{type(err).__name__}: {err}")))
        try:
            _write_all(outbox, _HEADER.pack(len(data)))
            _write_all(outbox, data)
        except OSError:
            return
