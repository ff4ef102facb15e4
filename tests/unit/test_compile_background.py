"""Kernels compile in the background: the first calls run on NumPy's path, never waiting.

Results are the same before and after a kernel is ready (bit for bit; float32 Pow within one
unit in the last place); a compile under way at exit finishes and nothing new starts; without
numba nothing starts at all and nothing warns. No timings: a compile that blocks on an Event
shows that a call did not wait for it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from python_paths import python_ops as ops  # what compiles behind the compiled tiny path

from bcast import engine
from bcast.engine import compiled as _compiled
from bcast.engine import operations as _operations
from bcast.engine import warm
from bcast.engine.background import PENDING, Resolver

pytest.importorskip("numba", reason="the compiled path needs the 'fast' extra (numba)")

# The compiled path at any size
LARGE = {"threads": 2, "parallel_min": 1, "compiled_min": 0, "compiled_thread_work": 1}


@pytest.fixture
def calls(
    monkeypatch: pytest.MonkeyPatch, compiled_runs: list[tuple[str, bool]]
) -> list[tuple[str, bool]]:
    """Record (operation, whether the compiled path ran) for each `compiled.run`."""
    monkeypatch.delenv("BCAST_COMPILED", raising=False)
    return compiled_runs


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """A fresh kernel store whose compiles wait until the returned Event is set."""
    opened = threading.Event()

    def compile_when_open(key: tuple[Any, ...]) -> Any:
        assert opened.wait(60), "the test never opened the gate"
        return _compiled._compile(key)

    monkeypatch.setattr(_compiled, "_kernels", Resolver(compile_when_open, name="gated"))
    yield opened
    opened.set()
    assert _compiled.wait_for_kernels(60)


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def _ulps(got: np.ndarray, want: np.ndarray) -> int:
    return int(np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32)).max())


CASES = {
    "add": (lambda a, b: ops.add(a, b), lambda a, b: np.add(a, b), np.float32),
    "where": (lambda a, b: ops.where(a > 0, a, b), lambda a, b: np.where(a > 0, a, b), np.int16),
    "pow": (lambda a, b: ops.pow(a, b), lambda a, b: np.power(a, b), np.float32),
}


@pytest.mark.parametrize("name", list(CASES))
def test_first_calls_run_on_numpy_while_the_kernel_compiles(
    name: str, gate: threading.Event, calls: list[tuple[str, bool]]
) -> None:
    ours, numpy, dtype = CASES[name]
    rng = np.random.default_rng(0)
    a = (rng.uniform(0.5, 2.0, (300, 64)) * (1 if dtype == np.float32 else 100)).astype(dtype)
    b = (rng.uniform(-3.0, 3.0, (64,)) * (1 if dtype == np.float32 else 100)).astype(dtype)
    with engine.settings(**LARGE):
        before = [ours(a, b) for _ in range(3)]  # the compile is held: these cannot wait for it
        assert not _compiled.wait_for_kernels(timeout=0)  # still compiling
        gate.set()
        assert _compiled.wait_for_kernels(timeout=60)
        after = ours(a, b)
    assert calls == [(name, False)] * 3 + [(name, True)]
    want = numpy(a, b)
    for got in before:
        same_bits(got, want)  # NumPy's path: NumPy's results
    if name == "pow":  # float32 Pow, compiled: within one unit in the last place
        assert after.dtype == want.dtype and _ulps(after, want) <= 1
    else:
        same_bits(after, want)


def test_a_kernel_is_queued_once(gate: threading.Event, calls: list[tuple[str, bool]]) -> None:
    a = np.arange(6000.0).reshape(60, 100)
    with engine.settings(**LARGE):
        for _ in range(4):
            ops.sub(a, a[0])
    assert _compiled._kernels._queued == {("sub", *[np.dtype(float)] * 4)}
    (worker,) = [t for t in threading.enumerate() if t.name == "gated"]  # one thread
    gate.set()
    assert _compiled.wait_for_kernels(timeout=60)
    worker.join(timeout=60)
    assert not worker.is_alive()  # nothing left to compile: the thread has ended
    assert calls == [("sub", False)] * 4


@pytest.mark.parametrize("how", ["setting", "environment"])
def test_waiting_compiles_in_the_callers_thread(
    how: str, monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]]
) -> None:
    where: list[str] = []

    def compile_here(key: tuple[Any, ...]) -> Any:
        where.append(threading.current_thread().name)
        return _compiled._compile(key)

    monkeypatch.setattr(_compiled, "_kernels", Resolver(compile_here, name="bcast-compile"))
    if how == "environment":
        monkeypatch.setenv("BCAST_COMPILED", "wait")
    a = np.arange(6000, dtype=np.float32).reshape(60, 100)
    with engine.settings(**LARGE, compiled_wait=how == "setting"):
        same_bits(ops.mul(a, a[0]), a * a[0])
    assert calls == [("mul", True)]
    assert where == [threading.current_thread().name]


def test_a_compile_that_fails_warns_and_is_not_tried_again() -> None:
    def broken(key: tuple[Any, ...]) -> Any:
        raise OSError("disk full")

    store = Resolver(broken, name="bcast-compile")
    assert store.get("k") is PENDING
    with pytest.warns(RuntimeWarning, match="disk full"):
        assert store.wait(timeout=60)
    assert store.get("k") is None  # remembered: not tried again


def test_the_signatures_are_the_kernels_calls_compile(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]]
) -> None:
    store = Resolver(_compiled._compile, name="bcast-compile")
    monkeypatch.setattr(_compiled, "_kernels", store)
    x8 = np.arange(6000, dtype=np.int8).reshape(60, 100)
    f8 = np.arange(6000.0).reshape(60, 100)
    with engine.settings(**LARGE, compiled_wait=True):
        ops.add(x8, x8[0])
        ops.where(f8 > 3, f8, f8[0])
        ops.less(f8, f8[:, :1])
        ops.expand(np.arange(100, dtype=np.float16), (60, 100))
    assert all(done for _, done in calls) and len(calls) == 4
    known = {(name, *dtypes) for name, dtypes in _compiled.signatures()}
    assert len(store._done) == 4 and set(store._done) <= known


def test_warm_compiles_what_it_is_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_operations, "numpy_power_vectorised", lambda: False)
    seen: list[tuple[str, bool]] = []
    want = [("pow(float16,float16,float16,float16)", True)] if _compiled._half_kernels() else []
    want.append(("pow(float32,float32,float32,float32)", True))
    assert _compiled.warm(["pow"], lambda k, ready, s: seen.append((k, ready))) == len(want)
    assert seen == want
    assert warm.main(["--ops", "pow"]) == 0
    assert f"{len(want)} of {len(want)} kernels ready" in capsys.readouterr().out
    assert warm.main(["--ops", "pow,nonsense"]) == 2


def test_warm_says_which_operations_have_no_kernel_on_this_machine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # where NumPy's float32 power is vector code, float32 Pow has no kernel: nothing to wait
    # for; float16 Pow has one (NumPy's float16 power is not vector code anywhere)
    monkeypatch.setattr(_operations, "numpy_power_vectorised", lambda: True)
    half = [("pow", (np.dtype(np.float16),) * 4)] if _compiled._half_kernels() else []
    assert _compiled.signatures(["pow"]) == half
    assert warm.main(["--list", "--ops", "pow,xor"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "pow: no float32 kernel on this machine, NumPy computes it (its own float32"
    assert out[2:] == ["pow(float16,float16,float16,float16)"] * len(half) + [
        "xor(bool,bool,bool,bool)"
    ]
    monkeypatch.setattr(_operations, "numpy_power_vectorised", lambda: False)
    assert warm.main(["--list", "--ops", "and_"]) == 0
    assert capsys.readouterr().out == "and_(bool,bool,bool,bool)\n"


def test_warm_quiet_prints_only_the_last_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_operations, "numpy_power_vectorised", lambda: False)
    assert warm.main(["--quiet", "--ops", "xor"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("1 of 1 kernels ready (")


def test_warm_into_a_closed_pipe_ends_quietly() -> None:
    # `python -m bcast.engine.warm --list | true`: the reader is gone before the first line
    child = subprocess.Popen(
        [sys.executable, "-m", "bcast.engine.warm", "--list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    error = child.stderr.read().decode()
    assert child.wait(timeout=120) == 0
    assert error == ""


def _python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    environment = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), **env}
    environment.pop("BCAST_COMPILED", None)
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def test_at_exit_the_compile_under_way_finishes_and_no_other_starts(tmp_path: Path) -> None:
    code = f"""
        import threading, time
        import numpy as np
        from bcast import engine, ops
        from bcast.engine import compiled
        from bcast.engine.background import Resolver
        started = threading.Event()

        def slow(key):
            started.set()
            time.sleep(0.5)
            open({str(tmp_path)!r} + "/" + key[0], "w").close()

        compiled._kernels = Resolver(slow, name="bcast-compile")
        a = np.ones((400, 100), np.float32)
        with engine.settings(parallel_min=1, compiled_min=0, compiled_thread_work=1):
            ops.add(a, a[0])
            ops.sub(a, a[0])
        assert started.wait(30)
        print("exiting")
    """
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("exiting\n", "")
    assert (tmp_path / "add").exists() and not (tmp_path / "sub").exists()


def test_a_real_compile_at_exit_ends_cleanly_and_is_cached(tmp_path: Path) -> None:
    code = """
        import numpy as np
        from bcast import engine, ops
        a = np.ones((400, 100))
        with engine.settings(parallel_min=1, compiled_min=0, compiled_thread_work=1):
            assert (ops.add(a, a[0]) == 2).all()  # exits at once: the compile is under way
    """
    done = _python(code, tmp_path)
    assert (done.returncode, done.stdout) == (0, "")
    # Nothing on stderr but the one-line notice of a first compile (issue 16), if any.
    notice = "bcast: compiling add/float64, once per machine (numba caches it)\n"
    assert done.stderr in ("", notice)
    assert list((tmp_path / "cache").rglob("*.nbi"))  # the kernel was compiled and cached


def test_without_numba_nothing_starts_and_nothing_warns(tmp_path: Path) -> None:
    code = """
        import sys, threading
        sys.modules["numba"] = None  # numba not installed
        import numpy as np
        from bcast import engine, ops
        from bcast.engine import compiled
        a = np.arange(6000.0).reshape(60, 100)
        with engine.settings(parallel_min=1, compiled_min=0, compiled_thread_work=1, threads=2):
            assert (ops.add(a, a[0]) == a + a[0]).all()
        names = [t.name for t in threading.enumerate()]
        print(compiled.enabled(), compiled.available(), "bcast-compile" in names)
    """
    done = _python(code, tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", "False False False\n")


def test_telling_whether_the_path_may_run_does_not_import_numba(tmp_path: Path) -> None:
    code = """
        import sys
        import bcast.ops
        from bcast.engine import compiled
        print(compiled.enabled(), "numba" in sys.modules)
    """
    done = _python(code, tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", "True False\n")
