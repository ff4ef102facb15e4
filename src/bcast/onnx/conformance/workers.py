"""Worker processes of ``bcast conformance``: a runtime runs cases where it cannot hurt us.

Each batch of cases runs in a fresh interpreter (``python -m
bcast.onnx.conformance.workers``) that constructs the runtime, runs the cases in order and
sends one framed pickle back per case. A worker that dies (abort, segmentation fault, a
kill) or stays silent past the per-case timeout has *crashed* on the case it was running:
that case is the result ``crash``, it is run again alone in another fresh process (a crash
there too is deterministic; otherwise it depended on the cases run before it in the same
process), and the rest of the batch goes on in a new worker. Batches run on up to
``jobs`` workers at a time. Runtimes print what they like: the worker's own stdout goes to
its stderr, which is discarded, and the frames travel on a private copy of the pipe.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from threading import Event, Lock
from typing import Any, Final

__all__ = ["DEFAULT_TIMEOUT", "Outcome", "Task", "describe", "run_tasks"]

DEFAULT_TIMEOUT: Final = 60.0
"""Seconds one case may take in a runtime before it counts as a crash (a hang)."""
_HEADER: Final = struct.Struct("<Q")
_BATCH: Final = 200


@dataclass(slots=True)
class Outcome:
    """What a runtime did with one case."""

    kind: str  # ok, refused, crash
    outputs: list[Any] | None = None
    message: str = ""
    deterministic: bool | None = None  # crashes: again when run alone in a fresh process


@dataclass(slots=True)
class Task:
    """Cases for one configuration of one runtime: ``(case_id, model, feeds)`` triples."""

    label: str
    target: str
    config: dict[str, str]
    cases: list[tuple[str, bytes, dict[str, Any]]]


def _spawn() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "bcast.onnx.conformance.workers"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _read_frame(fd: int, timeout: float | None) -> Any:
    """Read one frame; None on end of file; TimeoutError when nothing came in time."""
    header = _read_exact(fd, _HEADER.size, timeout)
    if header is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(header)[0], timeout)
    return None if body is None else pickle.loads(body)


def _read_exact(fd: int, size: int, timeout: float | None) -> bytes | None:
    chunks, left = [], size
    deadline = None if timeout is None else time.monotonic() + timeout
    while left:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


_LIVE: set[subprocess.Popen[bytes]] = set()
"""The workers running now, ended by `run_tasks` when the run is interrupted."""
_STOPPING = Event()


def _start(request: Mapping[str, Any]) -> subprocess.Popen[bytes]:
    if _STOPPING.is_set():
        raise KeyboardInterrupt
    proc = _spawn()
    _LIVE.add(proc)
    assert proc.stdin is not None
    try:
        proc.stdin.write(pickle.dumps(dict(request)))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> str:
    """End the worker; return how it ended, in words."""
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    code = proc.wait()
    _LIVE.discard(proc)
    if proc.stdout is not None:
        proc.stdout.close()
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def describe(target: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Construct the runtime in a worker; return its name, version and configurations.

    Returns ``{"available": False, "reason": ...}`` when it is not installed or its
    construction fails.
    """
    proc = _start({"target": target, "config": {}, "cases": []})
    assert proc.stdout is not None
    try:
        frame = _read_frame(proc.stdout.fileno(), timeout + 60)
    except TimeoutError:
        frame = None
    how = _stop(proc)
    if frame is None:
        return {"available": False, "reason": f"its worker {how} while loading it"}
    return dict(frame[1])


def _run_batch(
    target: str,
    config: dict[str, str],
    cases: Sequence[tuple[str, bytes, dict[str, Any]]],
    timeout: float,
    done: Callable[[int], None],
) -> list[Outcome]:
    """Run ``cases`` in as few workers as crashes allow; return one outcome per case."""
    results: list[Outcome] = []
    while len(results) < len(cases):
        rest = cases[len(results) :]
        got, crash = _run_in_one(target, config, rest, timeout, done)
        results.extend(got)
        if crash is not None:
            one = rest[len(got) : len(got) + 1]
            _, again = _run_in_one(target, config, one, timeout, lambda n: None)
            crash.deterministic = again is not None
            results.append(crash)
    return results


def _run_in_one(
    target: str,
    config: dict[str, str],
    cases: Sequence[tuple[str, bytes, dict[str, Any]]],
    timeout: float,
    done: Callable[[int], None],
) -> tuple[list[Outcome], Outcome | None]:
    """Run cases in one worker until it ends; return the outcomes and the crash, if any."""
    proc = _start({"target": target, "config": config, "cases": list(cases)})
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    outcomes: list[Outcome] = []
    try:
        ready = _read_frame(fd, timeout + 60)  # the runtime's import may be slow
        if ready is None or not ready[1].get("available", False):
            how = _stop(proc)
            reason = "" if ready is None else ready[1].get("reason", "")
            return outcomes, Outcome("crash", message=reason or f"the worker {how}")
        while len(outcomes) < len(cases):
            frame = _read_frame(fd, timeout)
            if frame is None:
                break
            kind, payload = frame
            if kind == "ok":
                outcomes.append(Outcome(kind, outputs=payload))
            else:
                outcomes.append(Outcome(kind, message=str(payload)))
            done(1)
    except TimeoutError:
        _stop(proc)
        done(1)
        return outcomes, Outcome("crash", message=f"no answer within {timeout:g} s (a hang)")
    if len(outcomes) == len(cases):
        _stop(proc)
        return outcomes, None
    how = _stop(proc)
    done(1)
    return outcomes, Outcome("crash", message=f"the process {how}")


def run_tasks(
    tasks: Sequence[Task],
    *,
    jobs: int = 2,
    timeout: float = DEFAULT_TIMEOUT,
    progress: Callable[[int], None] | None = None,
) -> dict[str, list[Outcome]]:
    """Run every task's cases in batches on up to ``jobs`` workers; outcomes by task label."""
    lock = Lock()

    def done(n: int) -> None:
        if progress is not None:
            with lock:
                progress(n)

    pieces = []
    for task in tasks:
        for start in range(0, len(task.cases), _BATCH):
            pieces.append((task, start, task.cases[start : start + _BATCH]))
    results: dict[str, list[Outcome | None]] = {t.label: [None] * len(t.cases) for t in tasks}
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    _STOPPING.clear()
    try:
        futures = [
            (task, start, pool.submit(_run_batch, task.target, task.config, part, timeout, done))
            for task, start, part in pieces
        ]
        for task, start, future in futures:
            got = future.result()
            results[task.label][start : start + len(got)] = got
    except BaseException:  # Ctrl-C above all: end every worker now, not batch by batch
        _STOPPING.set()
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(_LIVE):
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        raise
    pool.shutdown()
    return {label: [o for o in outs if o is not None] for label, outs in results.items()}


def _write_frame(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _first_line(err: BaseException) -> str:
    """Return the error in one line of at most 300 characters, its lines joined.

    (OpenVINO's first line only names a source file: "Exception from src/...cpp:117:".)
    """
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    return f"{type(err).__name__}: {text}"[:300]


def serve() -> None:  # pragma: no cover - runs in the worker process
    """Serve one request in the worker: read it from stdin, answer frame by frame."""
    frames = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the runtime prints goes to stderr, not into the frames
    request = pickle.loads(sys.stdin.buffer.read())
    from bcast.onnx.conformance.runtimes import load_runtime

    try:
        runtime = load_runtime(request["target"])
        info = {
            "available": True,
            "name": str(getattr(runtime, "name", request["target"])),
            "version": str(runtime.version()),
            "configurations": [dict(c) for c in runtime.configurations()],
        }
    except Exception as err:  # not installed, or a plug-in that fails: named and skipped
        _write_frame(frames, ("ready", {"available": False, "reason": _first_line(err)}))
        return
    _write_frame(frames, ("ready", info))
    with tempfile.TemporaryDirectory(prefix="bcast-conformance-") as folder:
        path = os.path.join(folder, "model.onnx")
        config = request["config"]
        for _case_id, model, feeds in request["cases"]:
            with open(path, "wb") as handle:
                handle.write(model)
            try:
                outputs = runtime.run(model, feeds, config=config, path=path)
                _write_frame(frames, ("ok", [_plain(y) for y in outputs]))
            except Exception as err:  # the runtime refused the model: a result
                _write_frame(frames, ("refused", _first_line(err)))


def _plain(value: Any) -> Any:
    import numpy as np

    return np.array(value, copy=True)


if __name__ == "__main__":  # pragma: no cover
    serve()
