"""Compiled walks on several threads (`bcast.engine.numba_team`, `bcast.engine.parallel.run_team`).

The walker's rows are cut into one part per thread; the caller's walk posts the walk to
spinning workers and joins them in compiled code; a row whose operand is stretched over it
reads that operand as one value. Every result is compared with NumPy's, bit for bit (Pow:
within one ulp of powf, as the rest of the compiled path). No timings here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from typing import Any

import numpy as np
import pytest

from bcast import engine
from bcast.engine import parallel as _parallel
from bcast.engine.runner import MAX_RANK

pytest.importorskip("numba", reason="the compiled path needs the 'fast' extra (numba)")

from python_paths import python_ops as ops  # the compiled path behind the C tiny path

from bcast.engine import numba_kernels as _kernels
from bcast.engine import numba_team as _team

# The compiled path on small arrays, on two threads, waiting for the kernel's compile.
TEAM = {
    "compiled_wait": True,
    "threads": 2,
    "compiled_min": 0,
    "compiled_thread_work": 1,
}


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize(
    "shapes",
    [((67, 1), (1, 131)), ((1, 131), (67, 1)), ((5, 67, 1), (1, 131)), ((67, 1), (131,))],
)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "greater"])
def test_a_stretched_row_reads_its_operand_as_one_value(
    name: str, shapes: tuple[tuple[int, ...], ...], compiled_runs: list[tuple[str, bool]]
) -> None:
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    b[..., ::5] = 0.0  # a / 0: inf and nan, as NumPy's
    want = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
            "greater": np.greater}[name]  # fmt: skip
    with engine.settings(**TEAM), np.errstate(all="ignore"):
        for _ in range(3):  # planned, then replayed
            same_bits(getattr(ops, name)(a, b), want(a, b))
    assert compiled_runs and all(done for _, done in compiled_runs)


def test_pow_with_a_stretched_base_or_exponent_keeps_its_special_operands(
    compiled_runs: list[tuple[str, bool]],
) -> None:
    # the row fix-up of Pow recomputes special operands (0, inf, nan, negative bases) with
    # powf: it must read the stretched operand as the row's one value too
    # (more elements than the tiny path takes)
    base = np.tile([[0.0], [-2.0], [np.inf], [np.nan], [1.5], [1e-40], [3.0]], (10, 1))
    exponent = np.tile([[-1.0, 0.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 3.0, 40.0]], (1, 10))
    base, exponent = base.astype(np.float32), exponent.astype(np.float32)
    with engine.settings(**TEAM), np.errstate(all="ignore"):
        for x, y in [(base, exponent), (exponent.T, base.T)]:
            got, want = ops.pow(x, y), np.power(x, y)
            assert np.array_equal(np.isnan(got), np.isnan(want))
            finite = np.isfinite(want) & (want != 0)
            same_bits(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
            ulps = np.abs(got[finite].view(np.int32).astype(np.int64) - want[finite].view(np.int32))
            assert ulps.max() <= 1
    assert compiled_runs and all(done for _, done in compiled_runs)


def test_where_and_expand_with_stretched_rows(compiled_runs: list[tuple[str, bool]]) -> None:
    rng = np.random.default_rng(12)
    condition = rng.random((67, 1)) < 0.5
    x, y = rng.standard_normal((1, 131)), rng.standard_normal((67, 131))
    with engine.settings(**TEAM):
        for c, p, q in [(condition, x, y), (condition.T, y.T, x.T), (condition, y, x)]:
            same_bits(ops.where(c, p, q), np.where(c, p, q))
        column = y[:, :1]  # (67, 1): each row of the result one value
        same_bits(ops.expand(column, [67, 131]), np.broadcast_to(column, (67, 131)).copy())
    assert compiled_runs and all(done for _, done in compiled_runs)


def _walk(out: np.ndarray, a: np.ndarray, parts: int, home: int, board: Any, helpers: int) -> Any:
    """Call the walker of float64 add directly on contiguous ``out = a + a``; return counters."""
    walker = _kernels.walker("add", [out.dtype] * 4)
    rows, n = out.shape
    layout = np.ones((5, MAX_RANK), np.int64)  # the strides, then the shape, at the right
    layout[:4, -2], layout[:4, -1], layout[4, -2:] = n, 1, (rows, n)
    where = np.array([out.ctypes.data] + [a.ctypes.data] * 3 + [0] * parts, np.int64)
    address = 0 if board is None else board.ctypes.data
    walker(
        where.ctypes.data,
        parts,
        *[out.dtype] * 4,
        layout.ctypes.data,
        2,
        False,
        home,
        address,
        helpers,
    )
    return where[4:]  # the rows claimed of each part


def test_one_thread_walks_every_part_its_own_first() -> None:
    # a walk whose helpers never come (busy, asleep) is still whole: the caller takes the
    # other parts' rows too
    a = np.arange(37 * 5, dtype=np.float64).reshape(37, 5)
    for parts in (1, 2, 3, 7):
        for home in range(parts):
            out = np.full_like(a, np.nan)
            claimed = _walk(out, a, parts, home, None, 0)
            same_bits(out, a + a)
            bounds = [37 * p // parts for p in range(parts + 1)]
            assert all(claimed[p] >= bounds[p + 1] - bounds[p] for p in range(parts))


def test_a_walk_no_worker_took_is_withdrawn() -> None:
    board = np.zeros(_team.LINE * 3, np.int64)
    a = np.arange(40.0).reshape(8, 5)
    out = np.full_like(a, np.nan)
    _walk(out, a, 3, 0, board, 2)  # posted to workers 1 and 2, which never serve
    same_bits(out, a + a)
    assert board[_team.TICKET] == 1  # one walk posted
    assert board[_team.LINE + _team.BOX] == board[2 * _team.LINE + _team.BOX] == 0


def test_serve_takes_a_posted_walk_is_poked_or_goes_to_sleep() -> None:
    board = np.zeros(_team.LINE * 2, np.int64)
    box, done = _team.LINE + _team.BOX, _team.LINE + _team.DONE
    asleep, poke = _team.LINE + _team.ASLEEP, _team.LINE + _team.POKE
    assert _team.serve(board, 1, 5, 1000) == 0  # nothing posted: asleep
    assert board[done] == 5 and board[asleep] == 1
    board[asleep], board[box] = 0, 9
    assert _team.serve(board, 1, 5, 1000) == 9  # taken: the box holds it negated
    assert board[box] == -9 and board[asleep] == 0
    board[box], board[poke] = 0, 1
    assert _team.serve(board, 1, 9, 1000) == -1  # Python work waits: poked
    assert board[poke] == 0 and board[done] == 9
    board[box] = 4
    assert _team.serve(board, 1, 9, 0) == 4  # posted as it gave up: taken after all
    assert board[asleep] == 0


@pytest.mark.parametrize("spin", [0, 200, 100_000])
def test_many_walks_on_a_spinning_or_sleeping_team_are_exact(spin: int) -> None:
    rng = np.random.default_rng(13)
    a = rng.standard_normal((64, 1000)).astype(np.float32)
    bias = rng.standard_normal(1000).astype(np.float32)
    out = np.empty_like(a)
    with engine.settings(**TEAM, spin_us=spin):
        for k in range(200):
            a[k % 64] += 1.0  # new values every call, same layout: replayed
            out[:] = np.nan
            same_bits(ops.add(a, bias, out=out), a + bias)
    assert _parallel.pool_size() >= 1


def test_two_callers_at_once_share_the_team_or_walk_alone() -> None:
    # one walk at a time has the workers; the other caller's walk does its parts itself
    rng = np.random.default_rng(14)
    inputs = [rng.standard_normal((48, 999)) for _ in range(2)]
    failures: list[str] = []

    def caller(a: np.ndarray) -> None:
        b = a[0] * 2
        try:
            for _ in range(150):
                if not np.array_equal(ops.sub(a, b), a - b):
                    failures.append("wrong")
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(repr(exc))

    with engine.settings(**TEAM):
        ops.sub(inputs[0], inputs[0][0])  # compiled before the race
        threads = [threading.Thread(target=caller, args=(a,)) for a in inputs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []


def test_spin_time_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "_warned", set())
    monkeypatch.delenv("BCAST_SPIN_US", raising=False)
    assert _parallel.spin_us() == _parallel.SPIN_US == 200
    monkeypatch.setenv("BCAST_SPIN_US", "0")
    assert _parallel.spin_us() == 0
    monkeypatch.setenv("BCAST_SPIN_US", "-5")
    with pytest.warns(RuntimeWarning, match="BCAST_SPIN_US"):
        assert _parallel.spin_us() == 200
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        assert _parallel.spin_us() == 200


def test_the_team_starts_again_in_a_forked_child() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    code = """
import os, sys, numpy as np
from bcast import engine, ops
a, b = np.ones((256, 512)), np.arange(512.0)
settings = dict(compiled_wait=True, threads=2, compiled_min=0, compiled_thread_work=1)
with engine.settings(**settings):
    ops.add(a, b); ops.add(a, b)  # the parent's team walks, its worker spins
    pid = os.fork()
    if pid == 0:
        ok = all((ops.add(a, b) == a + b).all() for _ in range(20))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_workers_do_not_spin_when_threads_exceed_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    # a spinning worker would take a core from the worker whose part the caller waits for
    monkeypatch.setattr(_parallel, "cores", lambda: 2)
    a, b = np.ones((64, 999)), np.arange(999.0)
    spins = []
    for threads in (2, 3):
        with engine.settings(**{**TEAM, "threads": threads, "spin_us": 200}):
            same_bits(ops.add(a, b), a + b)
            assert _parallel._team is not None
            spins.append(_parallel._team.spins)
    assert spins[0] > 0 and spins[1] == 0
