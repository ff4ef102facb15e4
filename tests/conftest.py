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
    leave Pow to NumPy's own vector loop (`bcast.engine.compiled.numpy_power_vectorised`).
    """
    from bcast.engine import compiled
    from bcast.engine.runner import Runner

    monkeypatch.setattr(compiled, "numpy_power_vectorised", lambda: False)

    seen: list[tuple[str, bool]] = []
    real = Runner.__call__

    def spy(self: Runner, out: Any, operands: Any) -> bool:
        done = real(self, out, operands)
        seen.append((self.name, done))
        return done

    monkeypatch.setattr(Runner, "__call__", spy)
    return seen
