"""Shared test configuration: a deterministic Hypothesis profile for CI, shared fixtures."""

from __future__ import annotations

import os
from typing import Any

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
# A laptop with 8 GB and a CI runner with 7 run this suite: each test's peak resident memory
# (its own process from its setup to the end of its call, and any child process it waited
# for) must stay under 2 GiB, unless the test is marked ``@pytest.mark.memory_gib(N)`` with the
# reason beside the mark. Linux resets a process's peak (VmHWM) when 5 is written to
# /proc/self/clear_refs; elsewhere the check is off. ``BCAST_TEST_MAX_RSS_MIB`` changes the
# bound (the suite's own test of this check uses a small one).
MAX_TEST_RSS = int(os.environ.get("BCAST_TEST_MAX_RSS_MIB", "2048")) * 2**20
_CLEAR_REFS = "/proc/self/clear_refs"


def _reset_peak() -> bool:
    try:
        with open(_CLEAR_REFS, "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def _own_peak() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _children_peak() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    item.stash[_measured] = (_reset_peak(), _children_peak())
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    result = yield
    measured, children_before = item.stash.get(_measured, (False, 0))
    if not measured:
        return result
    mark = item.get_closest_marker("memory_gib")
    allowed = int(mark.args[0] * 2**30) if mark else MAX_TEST_RSS
    own, children = _own_peak(), _children_peak()
    peak = max(own, children if children > children_before else 0)
    if peak > allowed:
        pytest.fail(
            f"this test's peak resident memory was {peak / 2**20:.0f} MiB, over the "
            f"{allowed / 2**20:.0f} MiB a test may take (tests/conftest.py, issue 36)",
            pytrace=False,
        )
    return result


_measured = pytest.StashKey[tuple[bool, int]]()
