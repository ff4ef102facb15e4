"""Start the worker process of `bcast.models.isolation`, with nothing of bcast loaded.

``bcast check model.onnx`` waits for its worker, which parses and reads the model with the
peer library (onnx, OpenVINO): the sooner the worker's interpreter starts, the sooner that
library is loaded. `bcast.__main__` starts it here first, from the command line alone
(`kinds_for`), before bcast's own modules and click load; `bcast.models.isolation` starts
its workers with the same `spawn` and takes this one over. An ONNX worker first loads onnx's
protobuf classes and C++ inference alone (`lean_onnx`), not the whole package and NumPy.
Standard library only.

>>> kinds_for(["check", "model.onnx", "--json"]), kinds_for(["shape", "[2]", "[3]"])
(('onnx',), None)
"""

from __future__ import annotations

import os
import signal
import sys
import time

TYPE_CHECKING = False  # as typing's; `typing` and `collections.abc` load after the spawn
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Final

__all__ = [
    "PRELOADS",
    "READERS",
    "Child",
    "Spawned",
    "kinds_for",
    "lean_onnx",
    "preload_of",
    "spawn",
]

PRELOADS: Final = {
    "onnx": ("bcast._spawn:lean_onnx", "bcast.onnx.reader"),
    "openvino": ("bcast.openvino.reader", "openvino"),
}
"""What a worker may import before its first call, by the kind of model it will read.

``module:function`` imports the module and calls the function: `lean_onnx` first, so that
an ONNX model is read with onnx's protobuf classes and C++ inference only."""

READERS: Final = frozenset({"check", "verify", "domain"})
"""The commands that read models through the worker."""

_SUFFIXES: Final = (("onnx", (".onnx",)), ("openvino", (".xml",)))
_CODE: Final = "import gc; gc.disable(); from bcast.models.isolation import serve; serve()"
"""The worker's program: its modules load without collection passes (`serve` turns them
back on once they have)."""


class Child:
    """A worker process `spawn` started: what ``subprocess.Popen`` tells of it, no more.

    ``returncode`` is None while it runs, then its exit status (minus the signal that
    ended it), as Popen's; `wait` with a timeout returns None where Popen raises.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Return the exit status if it has ended (reaping it), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): as Popen says
                self.returncode = 0
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait ``timeout`` seconds at most (None: until it ends); return `poll`'s answer."""
        if timeout is None and self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = 0
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        deadline = time.monotonic() + (timeout or 0.0)
        pause = 0.0005
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
            pause = min(pause * 2, 0.05)
        return self.returncode

    def kill(self) -> None:
        """Send it SIGKILL, unless it has ended (and been reaped) already."""
        if self.returncode is None:
            try:  # noqa: SIM105 - contextlib is not loaded before the worker starts
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


Spawned = tuple[Child, int, int]
"""A started worker: its process, the fd calls are written to, the fd answers come from."""


def kinds_for(args: Sequence[str]) -> tuple[str, ...] | None:
    """Return the kinds of model (`PRELOADS` keys) a command line reads; None: it reads none.

    ``args`` follow ``bcast``: the command, then its arguments. ``--help`` reads none.
    """
    if not args or args[0] not in READERS or {"-h", "--help"} & set(args):
        return None
    return tuple(
        kind for kind, suffixes in _SUFFIXES if any(a.lower().endswith(suffixes) for a in args[1:])
    )


def preload_of(kinds: Sequence[str]) -> str:
    """Return the modules a worker for these kinds imports first, as `spawn` takes them."""
    return ",".join(m for k in kinds for m in PRELOADS.get(k, ()))


def spawn(preload: str) -> Spawned:
    """Start a worker (``serve``) that imports ``preload`` at once; return it and its pipes.

    Its first message must be its memory cap (`bcast.models.isolation` sends it). The
    worker runs in a session of its own (no terminal's Ctrl-C), reads nothing from stdin
    and writes nothing to stdout or stderr; it closes every other file it was given
    (``serve``). ``os.posix_spawn``, not ``subprocess``: 0.6 ms where ``subprocess.Popen``
    took 10 ms (its import included) on the path of every ``bcast check``.
    """
    to_child_r, to_child = os.pipe()
    from_child, from_child_w = os.pipe()
    env = dict(os.environ, MALLOC_ARENA_MAX="2")  # fewer malloc arenas: less address space
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # this process's bcast
    args = [sys.executable, "-c", _CODE, str(to_child_r), str(from_child_w), preload]
    quiet = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    try:
        os.set_inheritable(to_child_r, True)
        os.set_inheritable(from_child_w, True)
        try:
            pid = os.posix_spawn(sys.executable, args, env, file_actions=quiet, setsid=True)
        except NotImplementedError:  # no POSIX_SPAWN_SETSID: a process group of its own
            pid = os.posix_spawn(sys.executable, args, env, file_actions=quiet, setpgroup=0)
    except BaseException:
        for fd in (to_child, from_child):
            os.close(fd)
        raise
    finally:
        os.close(to_child_r)
        os.close(from_child_w)
    return Child(pid), to_child, from_child


def lean_onnx() -> bool:
    """Load onnx's protobuf classes and C++ shape inference without the rest of onnx.

    ``bcast check model.onnx`` waits for its worker to parse the model and run ONNX's shape
    inference. ``import onnx`` loads far more than that needs (NumPy, ml_dtypes,
    ``importlib.metadata``, protobuf's JSON and text formats, the model hub...): 0.15 s of
    the worker's 0.19 s of imports, on the path of every check. The worker calls this
    first (`PRELOADS`): a stand-in for the ``onnx`` package goes into ``sys.modules`` that
    holds only ``onnx.onnx_ml_pb2``'s classes (``onnx.ModelProto`` is that module's class,
    as in onnx itself), with ``onnx.onnx_cpp2py_export`` loaded.

    Nothing is lost: a submodule asked for as an attribute (``onnx.helper``) is imported
    then, and any other name (``onnx.load``) first runs onnx's own ``__init__`` in the
    stand-in, which becomes the package ``import onnx`` would have given. The reader uses
    only the protobuf classes and the C++ inference (`bcast.onnx.protos` reads what
    ``onnx.helper`` would); ``verify``'s work in the same worker loads the rest as it needs.

    Returns whether the stand-in is the ``onnx`` now loaded: False where onnx is loaded
    already (nothing to do), not installed, or not laid out as expected (then nothing is
    changed, and ``import onnx`` loads the whole package as before).
    """
    import importlib
    import importlib.util
    import types

    if "onnx" in sys.modules:
        return False
    spec = importlib.util.find_spec("onnx")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    loader = spec.loader
    package = types.ModuleType("onnx")
    package.__spec__ = spec
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    package.__loader__ = loader
    package.__package__ = "onnx"

    def rest(name: str) -> object:
        """Return ``onnx.<name>``: a submodule imported now, or onnx's own name."""
        if name.startswith("__") and name != "__version__":
            raise AttributeError(name)
        if importlib.util.find_spec(f"onnx.{name}") is not None:
            return importlib.import_module(f"onnx.{name}")
        del vars(package)["__getattr__"]
        loader.exec_module(package)  # onnx's __init__, in the stand-in: the whole package
        return getattr(package, name)

    vars(package)["__getattr__"] = rest  # the module's own (PEP 562)
    sys.modules["onnx"] = package
    try:
        protos = importlib.import_module("onnx.onnx_ml_pb2")
        importlib.import_module("onnx.onnx_cpp2py_export.shape_inference")
        # ONNX registers its operator schemas on first use (35 ms): now, while the caller
        # still loads, not in the first shape inference of the model
        importlib.import_module("onnx.onnx_cpp2py_export.defs").has_schema("Add", "")
    except Exception:  # another layout: the whole package, as if nothing had happened
        for name in [m for m in sys.modules if m == "onnx" or m.startswith("onnx.")]:
            del sys.modules[name]
        return False
    for name in dir(protos):
        if not name.startswith("_"):
            setattr(package, name, getattr(protos, name))
    return True
