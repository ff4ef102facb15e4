"""How many threads large work gets (`bcast.engine.parallel.threads`): a setting, in order.

``bcast.engine.settings(threads=...)``, then ``BCAST_NUM_THREADS``, then the cores this
process may use (affinity, cgroup quota) capped by ``OMP_NUM_THREADS``; never the load
that other processes put on the machine.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from bcast import engine
from bcast.engine import config
from bcast.engine import parallel as _parallel

BIG = 1e15  # work large enough for any number of threads


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A clean environment: no thread variables, 6 usable cores, warnings not yet given."""
    monkeypatch.delenv("BCAST_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(_parallel, "cores", lambda: 6)
    monkeypatch.setattr(_parallel, "_warned", set())
    return monkeypatch


def test_the_default_is_the_cores_this_process_may_use(env: pytest.MonkeyPatch) -> None:
    assert _parallel.threads() == 6
    assert config.threads_for(BIG) == 6


def test_omp_num_threads_caps_the_default_only(env: pytest.MonkeyPatch) -> None:
    env.setenv("OMP_NUM_THREADS", "4")
    assert _parallel.threads() == 4
    env.setenv("OMP_NUM_THREADS", "2,1")  # nested levels: the outer one counts
    assert _parallel.threads() == 2
    env.setenv("OMP_NUM_THREADS", "16")  # a cap, not a request
    assert _parallel.threads() == 6
    env.setenv("BCAST_NUM_THREADS", "5")  # bcast's own variable is not capped
    assert _parallel.threads() == 5


def test_bcast_num_threads_then_settings(env: pytest.MonkeyPatch) -> None:
    env.setenv("BCAST_NUM_THREADS", "9")  # more than the cores: asked for, given
    assert config.threads_for(BIG) == 9
    with engine.settings(threads=3):
        assert config.threads_for(BIG) == 3
    assert config.threads_for(1) == 1  # small work takes one thread whatever the setting


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_value_is_ignored_with_one_warning(env: pytest.MonkeyPatch, value: str) -> None:
    env.setenv("BCAST_NUM_THREADS", value)
    with pytest.warns(RuntimeWarning, match="BCAST_NUM_THREADS"):
        assert _parallel.threads() == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _parallel.threads() == 6  # said once


def test_the_load_of_other_processes_does_not_count(env: pytest.MonkeyPatch) -> None:
    # a machine whose every core is busy: /proc/stat is not read any more
    real_open = open

    def no_proc_stat(path: object, *args: object, **kwargs: object) -> object:
        assert str(path) != "/proc/stat"
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    env.setattr("builtins.open", no_proc_stat)
    assert [_parallel.threads() for _ in range(3)] == [6, 6, 6]


def test_cgroup_v2_quota(tmp_path: Path) -> None:
    group = tmp_path / "job" / "a"
    group.mkdir(parents=True)
    (group / "cpu.max").write_text("250000 100000\n")
    assert _parallel.cgroup_cpus(tmp_path, own="/job/a") == 2.5
    (group / "cpu.max").write_text("max 100000\n")
    assert _parallel.cgroup_cpus(tmp_path, own="/job/a") is None
    (tmp_path / "cpu.max").write_text("50000 100000\n")  # the root's, where the own has none
    assert _parallel.cgroup_cpus(tmp_path, own="/elsewhere") == 0.5


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    assert _parallel.cgroup_cpus(tmp_path, own="/") is None
    (cpu / "cpu.cfs_quota_us").write_text("300000\n")
    assert _parallel.cgroup_cpus(tmp_path, own="/") == 3.0
    assert _parallel.cgroup_cpus(tmp_path / "missing", own="/") is None


def test_cores_takes_the_smaller_of_affinity_and_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    for quota, want in [(None, 4), (1.5, 2), (0.2, 1), (16.0, 4)]:
        monkeypatch.setattr(_parallel, "cgroup_cpus", lambda q=quota: q)
        _parallel.cores.cache_clear()
        assert _parallel.cores() == want
    _parallel.cores.cache_clear()
