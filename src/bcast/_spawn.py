"""Start the worker process of `bcast.models.isolation`, with nothing of bcast loaded.

``bcast check model.onnx`` waits for its worker, which parses and reads the model with the
peer library (onnx, OpenVINO): the sooner the worker's interpreter starts, the sooner that
library is loaded. `bcast.__main__` starts it here first, from the command line alone
(`kinds_for`), before bcast's own modules and click load; `bcast.models.isolation` starts
its workers with the same `spawn` and takes this one over. Standard library only.

>>> kinds_for(["check", "model.onnx", "--json"]), kinds_for(["shape", "[2]", "[3]"])
(('onnx',), None)
"""

from __future__ import annotations

import os
import subprocess
import sys

TYPE_CHECKING = False  # as typing's; `typing` and `collections.abc` load after the spawn
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Final

__all__ = ["PRELOADS", "READERS", "Spawned", "kinds_for", "preload_of", "spawn"]

PRELOADS: Final = {
    "onnx": ("bcast.onnx.reader",),
    "openvino": ("bcast.openvino.reader", "openvino"),
}
"""What a worker may import before its first call, by the kind of model it will read."""

READERS: Final = frozenset({"check", "verify", "domain"})
"""The commands that read models through the worker."""

_SUFFIXES: Final = (("onnx", (".onnx",)), ("openvino", (".xml",)))
_CODE: Final = "from bcast.models.isolation import serve; serve()"

Spawned = tuple["subprocess.Popen[bytes]", int, int]
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

    Its first message must be its memory cap (`bcast.models.isolation` sends it).
    """
    to_child_r, to_child = os.pipe()
    from_child, from_child_w = os.pipe()
    env = dict(os.environ, MALLOC_ARENA_MAX="2")  # fewer malloc arenas: less address space
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # this process's bcast
    process = subprocess.Popen(
        [sys.executable, "-c", _CODE, str(to_child_r), str(from_child_w), preload],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(to_child_r, from_child_w),
        env=env,
        start_new_session=True,
    )
    os.close(to_child_r)
    os.close(from_child_w)
    return process, to_child, from_child
