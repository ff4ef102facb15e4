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
