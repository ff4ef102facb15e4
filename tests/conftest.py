"""Shared test configuration: a deterministic Hypothesis profile for CI, shared fixtures."""

from __future__ import annotations

import os
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def compiled_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Record (operation, whether the compiled path ran) for each call of a compiled `Runner`.

    Every NumPy call whose kernel the compiled path accepts calls one (a repeated call
    replays the runner its first call prepared). float32 Pow is compiled on every CPU here:
    the compiled kernel is what these tests check, also on a CPU where the engine would
    leave Pow to NumPy's own vector loop (`bcast.engine.operations.numpy_power_vectorised`).
    """
    from bcast.engine import operations
    from bcast.engine.runner import WALKED, Runner

    monkeypatch.setattr(operations, "numpy_power_vectorised", lambda: False)

    seen: list[tuple[str, bool]] = []
    real = Runner.__call__
    real_resolve = Runner._resolve

    def spy(self: Runner, out: Any, operands: Any) -> bool:
        done = real(self, out, operands)
        if self.lane is None:  # else the lane's spy saw it (a runner with a lane takes it)
            seen.append((self.name, done))
        return done

    def resolve(self: Runner) -> bool:
        ready = real_resolve(self)
        lane = self.lane
        # the operators call the lane directly: a spy of its own
        if lane is not None and getattr(lane, "__name__", "") != "spied":

            def spied(*arrays: Any) -> int:
                status: int = lane(*arrays)
                seen.append((self.name, status == WALKED))
                return status

            self.lane = spied
        return ready

    monkeypatch.setattr(Runner, "__call__", spy)
    monkeypatch.setattr(Runner, "_resolve", resolve)
    return seen


# -- issue 36: no test may need more than 2 GiB ------------------------------------------------
# A laptop with 8 GB and a CI runner with 7 run this suite: what a test adds to the pytest
# process's resident memory at its peak (from its setup to the end of its call) must stay
# under 2 GiB, unless the test is marked ``@pytest.mark.memory_gib(N)`` with the reason beside
# the mark. Linux resets a process's peak (VmHWM) to its current size when 5 is written to
# /proc/self/clear_refs; elsewhere the check is off. ``BCAST_TEST_MAX_RSS_MIB`` changes the
# bound (the suite's own test of this check uses a small one). A child process's peak cannot
# be read afterwards (its ru_maxrss counts the pytest process it was forked from): tests
# that start memory-hungry children measure them with the `tree_peak` fixture below.
MAX_TEST_RSS = int(os.environ.get("BCAST_TEST_MAX_RSS_MIB", "2048")) * 2**20


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> int | None:
    """Reset this process's peak to its current size; return that size (None: no /proc)."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return _status("VmRSS:")
    except OSError:
        return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    item.stash[_start] = _reset_peak()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    result = yield
    start = item.stash.get(_start, None)
    if start is None:
        return result
    mark = item.get_closest_marker("memory_gib")
    allowed = int(mark.args[0] * 2**30) if mark else MAX_TEST_RSS
    taken = _status("VmHWM:") - start
    if taken > allowed:
        pytest.fail(
            f"this test took {taken / 2**20:.0f} MiB of resident memory at its peak, over the "
            f"{allowed / 2**20:.0f} MiB a test may take (tests/conftest.py, issue 36)",
            pytrace=False,
        )
    return result


_start = pytest.StashKey[Optional[int]]()


def _tree_resident(root: int) -> int:
    """The resident bytes of process ``root`` and all its descendants (Linux /proc)."""
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/statm", "rb") as statm:
                total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children", "rb") as children:
                    todo.extend(int(c) for c in children.read().split())
        except (OSError, ValueError):
            continue
    return total


@pytest.fixture
def tree_peak() -> Any:
    """Run a command; return (exit code, stdout, peak resident bytes of its process tree).

    The tree's resident memory (the child and every descendant, summed) is read every 10 ms
    while it runs, so a limit the child and its workers must keep together can be asserted.
    """
    import subprocess
    import threading
    import time

    def run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, int]:
        child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        out: list[bytes] = []
        assert child.stdout is not None
        reader = threading.Thread(target=lambda: out.append(child.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        peak = 0
        while child.poll() is None:
            peak = max(peak, _tree_resident(child.pid))
            time.sleep(0.01)
        reader.join()
        return child.returncode, b"".join(out).decode(), peak

    return run
