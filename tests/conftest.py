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
    """Record (operation, whether the compiled path ran) for each `bcast.engine.compiled.run`."""
    from bcast.engine import compiled

    seen: list[tuple[str, bool]] = []
    real = compiled.run

    def spy(name: str, *args: Any, **kwargs: Any) -> bool:
        done = real(name, *args, **kwargs)
        seen.append((name, done))
        return done

    monkeypatch.setattr(compiled, "run", spy)
    return seen
