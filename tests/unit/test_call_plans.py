"""Call plans: a repeated call replays what its first call planned, and nothing else.

The key of a call site is the operands' and ``out=``'s shapes, strides and dtypes; a call
that differs in any of them is planned afresh, and a replayed call still checks what only
its arrays can tell (a read-only or overlapping ``out=``, the memory limit, alignment).
Results are NumPy's, bit for bit, whichever way they are computed. No timings here.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from python_paths import python_ops as ops  # the calls planned behind the compiled tiny path

from bcast import BroadcastError, engine
from bcast.engine import compiled as _compiled
from bcast.engine import parallel as _parallel
from bcast.ops import MemoryLimitError, _tiny, memory_limit

pytest.importorskip("numba", reason="the compiled path needs the 'fast' extra (numba)")

# The compiled path on small arrays, the kernels compiled in the caller's thread.
COMPILED = {"compiled_wait": True, "compiled_min": 0, "threads": 2}


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    engine.clear_call_caches()
    yield
    engine.clear_call_caches()


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def test_the_second_identical_call_is_replayed() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    out = np.empty_like(a)
    with engine.settings(**COMPILED):
        before = engine.call_cache_info()
        for _ in range(3):
            same_bits(ops.add(a, b, out=out), a + b)
        after = engine.call_cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)
    assert after.size == before.size + 1


def test_new_values_in_the_same_arrays_are_read_on_every_call() -> None:
    a = np.arange(6400, dtype=np.float64).reshape(100, 64)
    b = np.arange(64, dtype=np.float64)
    out = np.empty_like(a)
    with engine.settings(**COMPILED):
        for step in range(4):
            b += step  # the small operand is tiled: its tile must be refilled each call
            a[::7] *= -1
            same_bits(ops.sub(a, b, out=out), a - b)


@pytest.mark.parametrize("how", ["transposed", "negative", "strided", "fortran_out"])
def test_a_call_of_other_strides_is_planned_afresh(how: str) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((48, 48)).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    out = np.empty((48, 48), np.float32)
    with engine.settings(**COMPILED):
        same_bits(ops.add(a, b, out=out), a + b)  # contiguous: planned and kept
        same_bits(ops.add(a, b, out=out), a + b)  # replayed
        other_a, other_b, other_out = a, b, out
        if how == "transposed":
            other_a = np.ascontiguousarray(a.T).T  # same shape and values, other strides
        elif how == "negative":
            other_b = b[::-1].copy()[::-1]  # a negative stride
        elif how == "strided":
            other_a = np.repeat(a, 2, axis=1)[:, ::2]
        else:
            other_out = np.empty((48, 48), np.float32, order="F")
        misses = engine.call_cache_info().misses
        got = ops.add(other_a, other_b, out=other_out)
        assert engine.call_cache_info().misses == misses + 1
    same_bits(got, other_a + other_b)


def test_a_call_of_another_dtype_or_without_out_is_planned_afresh() -> None:
    a64, b64 = np.ones((80, 80)), np.arange(80.0)
    out = np.empty((80, 80))
    with engine.settings(**COMPILED):
        ops.mul(a64, b64, out=out)
        misses = engine.call_cache_info().misses
        same_bits(
            ops.mul(a64.astype(np.float32), b64.astype(np.float32)), (a64 * b64).astype(np.float32)
        )
        same_bits(ops.mul(a64, b64), a64 * b64)  # no out=: another call site
        same_bits(ops.mul(a64.astype(np.int32), b64.astype(np.int32)), (a64 * b64).astype(np.int32))
        assert engine.call_cache_info().misses == misses + 3


def test_a_replayed_call_checks_its_out() -> None:
    a, b = np.ones((70, 70)), np.ones(70)
    out = np.empty((70, 70))
    ops.add(a, b, out=out)
    ops.add(a, b, out=out)
    frozen = np.empty((70, 70))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ops.add(a, b, out=frozen)  # same layout as the kept call: still refused


@pytest.mark.parametrize("op", ["add", "div"])
def test_an_out_overlapping_an_operand_gives_numpys_result(op: str) -> None:
    ours, theirs = {"add": (ops.add, np.add), "div": (ops.div, np.divide)}[op]
    rng = np.random.default_rng(2)
    with engine.settings(**COMPILED):
        for _ in range(3):  # planned, then replayed
            buffer = rng.standard_normal(130 * 64 + 64)
            a = buffer[64:].reshape(130, 64)
            b = rng.standard_normal(64)
            want = theirs(a, b)
            in_place = a.copy()
            ours(a, b, out=buffer[: 130 * 64].reshape(130, 64))  # shifted by a row
            same_bits(buffer[: 130 * 64].reshape(130, 64), want)
            ours(in_place, b, out=in_place)  # element for element: computed in place
            same_bits(in_place, want)
            # out a row ahead of the second operand: a walk would overwrite rows it has
            # yet to read, so the entry must check that operand too
            behind = rng.standard_normal(130 * 64 + 64)
            c = behind[: 130 * 64].reshape(130, 64)
            want = theirs(b, c)
            ours(b, c, out=behind[64:].reshape(130, 64))
            same_bits(behind[64:].reshape(130, 64), want)


def test_a_replayed_call_respects_the_memory_limit() -> None:
    a, b = np.ones((100, 100)), np.ones(100)
    ops.add(a, b)
    ops.add(a, b)  # replayed
    with memory_limit(1000), pytest.raises(MemoryLimitError):
        ops.add(a, b)


def test_changing_the_settings_forgets_the_plans(compiled_runs: list[tuple[str, bool]]) -> None:
    a, b = np.ones((256, 256), np.float32), np.ones(256, np.float32)
    out = np.empty_like(a)
    with engine.settings(**COMPILED):
        ops.add(a, b, out=out)
    assert engine.call_cache_info().size == 0  # leaving the block forgot it
    with engine.settings(**COMPILED, compiled=False):
        ops.add(a, b, out=out)
        ops.add(a, b, out=out)
    assert compiled_runs == [("add", True)]  # the call planned without the compiled path


def test_threads_decided_once_per_plan_follow_the_setting() -> None:
    a, b = np.ones((512, 512), np.float32), np.ones(512, np.float32)
    out = np.empty_like(a)
    chosen = []
    for threads in (1, 2):
        forced = {**COMPILED, "threads": threads, "compiled_thread_work": 1, "parallel_min": 1}
        with engine.settings(**forced):
            ops.add(a, b, out=out)
            runners = [
                call.runner for cache in [_tiny.CALLS["add"]] for call in cache._calls.values()
            ]  # type: ignore[attr-defined]
            chosen.append([r.threads for r in runners])
            same_bits(ops.add(a, b, out=out), a + b)
    assert chosen == [[1], [2]]


# a bias whose rows the runner tiles (a buffer every call fills), an outer add (none)
CONCURRENT = [((300, 64), (64,), True), ((300, 1), (1, 64), False)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("shape_a", "shape_b", "tiled"), CONCURRENT)
def test_concurrent_replays_of_one_call_are_correct(
    monkeypatch: pytest.MonkeyPatch,
    threads: int,
    shape_a: tuple[int, ...],
    shape_b: tuple[int, ...],
    tiled: bool,
) -> None:
    # One thread a walk: the operators call the compiled entry directly (the runner's
    # lane), from four threads at once, on one runner: its addresses and row counter on
    # each call's stack, its tiles held by one call at a time. Two: Python's lock around
    # the shared walk. A walk claims one row at a time, so that walks sharing a counter
    # would each write only some rows.
    monkeypatch.setattr(_compiled, "CHUNK_BYTES", 1)
    monkeypatch.setattr(_compiled, "_walks", {})
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape_a).astype(np.float32)
    bs = [rng.standard_normal(shape_b).astype(np.float32) for _ in range(4)]
    outs = [np.empty(np.broadcast_shapes(shape_a, shape_b), np.float32) for _ in range(4)]
    failures: list[str] = []
    forced = {**COMPILED, "threads": threads, "compiled_thread_work": 1, "parallel_min": 1}
    with engine.settings(**forced):
        ops.add(a, bs[0], out=outs[0])  # planned: every thread replays the one runner
        [call] = _tiny.CALLS["add"]._calls.values()  # type: ignore[attr-defined]
        assert call.runner is not None
        assert call.runner.threads == threads
        assert bool(call.runner.walk.tiles) == tiled
        assert (call.runner.lane is not None) == (threads == 1)

        def work(k: int) -> None:
            for _ in range(200):
                ops.add(a, bs[k], out=outs[k])
                if not np.array_equal(outs[k], a + bs[k]):
                    failures.append(f"thread {k}")
                    return

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []


def test_misaligned_arrays_of_a_kept_layout_take_numpys_path(
    compiled_runs: list[tuple[str, bool]],
) -> None:
    raw = np.zeros(8 * 64 * 64 + 8, np.uint8)
    aligned = raw[:-8].view(np.float64).reshape(64, 64)
    shifted = raw[1:-7].view(np.float64).reshape(64, 64)  # same layout, one byte off
    shifted[...] = np.arange(64.0)
    b = np.arange(64.0)
    with engine.settings(**COMPILED):
        ops.add(aligned, b)
        same_bits(ops.add(shifted, b), shifted + b)
    assert [done for _, done in compiled_runs] == [True, False]


def test_the_pool_starts_again_in_a_forked_child() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    a, b = np.ones((512, 512)), np.arange(512.0)
    with engine.settings(threads=2, parallel_min=1, compiled=False):
        ops.add(a, b)  # the parent's worker started
        assert _parallel.pool_size() >= 1
        code = """
import os, sys, numpy as np
from bcast import BroadcastError, engine, ops
from bcast.engine import parallel
a, b = np.ones((512, 512)), np.arange(512.0)
with engine.settings(threads=2, parallel_min=1, compiled=False):
    ops.add(a, b)
    pid = os.fork()
    if pid == 0:
        ok = parallel.pool_size() == 0 and (ops.add(a, b) == a + b).all()
        ok = ok and parallel.pool_size() >= 1 and (ops.add(a, b) == a + b).all()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
"""
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr


def test_a_failing_block_is_raised_after_every_worker_stopped() -> None:
    seen: list[int] = []

    def task(i: int) -> None:
        if i == 3:
            raise ZeroDivisionError("block 3")
        time.sleep(0.001)
        seen.append(i)

    with pytest.raises(ZeroDivisionError, match="block 3"):
        _parallel.run_blocks(task, 50, 2, contextlib.nullcontext)
    count = len(seen)
    time.sleep(0.05)
    assert len(seen) == count < 50  # nothing ran after the raise; the rest was never started


def test_the_compiled_entry_is_waited_for_with_the_kernels() -> None:
    a = np.ones((40, 50), np.int16)
    with engine.settings(compiled_min=0, parallel_min=1, compiled_thread_work=1):
        same_bits(ops.add(a, a[0]), a + a[0])
    assert _compiled.wait_for_kernels(timeout=120)


def test_where_replays_its_plan_and_reads_new_values() -> None:
    rng = np.random.default_rng(21)
    condition = rng.random((300, 1)) < 0.5
    x = rng.standard_normal((300, 64)).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    out = np.empty_like(x)
    with engine.settings(**COMPILED):
        before = engine.call_cache_info()
        for step in range(4):
            condition[step::5] ^= True
            y += 1.0
            same_bits(ops.where(condition, x, y, out=out), np.where(condition, x, y))
            same_bits(ops.where(condition, x, y), np.where(condition, x, y))  # no out=: its own
        after = engine.call_cache_info()
        assert (after.misses - before.misses, after.hits - before.hits) == (2, 6)
        out.flags.writeable = False  # a replay still refuses a read-only out=
        with pytest.raises(ValueError, match="read-only"):
            ops.where(condition, x, y, out=out)
        with pytest.raises(TypeError, match="same dtype"):  # never planned, never kept
            ops.where(condition, x, y.astype(np.float64))


def test_expand_replays_its_plan_for_any_spelling_of_the_target() -> None:
    x = np.arange(64, dtype=np.float32)
    out = np.empty((300, 64), np.float32)
    targets = ([300, 64], (300, 64), np.array([300, 64]), np.array([300, 64], np.int32))
    with engine.settings(**COMPILED):
        before = engine.call_cache_info()
        for step, target in enumerate(targets):
            x += step  # new values, the same array
            want = np.broadcast_to(x, (300, 64))
            same_bits(ops.expand(x, target, out=out), want)
            same_bits(ops.expand(x, target), want)  # no out=: its own plan
        after = engine.call_cache_info()
        assert (after.misses - before.misses, after.hits - before.hits) == (2, 6)
        same_bits(ops.expand(x[:, None], [64, 300]), np.broadcast_to(x[:, None], (64, 300)))
        assert engine.call_cache_info().misses == after.misses + 1  # another layout
        out.flags.writeable = False  # a replay still refuses a read-only out=
        with pytest.raises(ValueError, match="read-only"):
            ops.expand(x, [300, 64], out=out)


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ([True, 64], TypeError),  # == [1, 64] as a dict key
        ([1.0, 64], TypeError),
        ((np.int64(1), 64), None),  # a NumPy int: the full path takes it, unplanned
        (np.array([1.0, 64.0]), TypeError),
        ([-1, 64], BroadcastError),  # never planned, so never replayed
    ],
)
def test_a_target_only_the_full_path_can_judge_is_never_replayed(
    target: object, error: type[Exception] | None
) -> None:
    x = np.arange(64, dtype=np.float32)
    with engine.settings(**COMPILED):
        same_bits(ops.expand(x, [1, 64]), x[None, :])  # planned
        for _ in range(2):
            planned = engine.call_cache_info()
            if error is None:
                same_bits(ops.expand(x, target), x[None, :])
            else:
                with pytest.raises(error):
                    ops.expand(x, target)
            assert engine.call_cache_info().hits == planned.hits


@pytest.mark.parametrize("path", [COMPILED, {"compiled": False}], ids=["compiled", "numpy"])
def test_broadcast_plans_by_mode_axis_and_axes_mapping(path: dict[str, object]) -> None:
    data = np.arange(64.0)
    along_rows = np.broadcast_to(data[:, None], (64, 64))
    along_columns = np.broadcast_to(data, (64, 64))
    calls = [
        ({"axes_mapping": [0], "mode": "explicit"}, along_rows),
        ({"axes_mapping": [1], "mode": "explicit"}, along_columns),
        ({"mode": "numpy"}, along_columns),
        ({"mode": "pdpd", "axis": 0}, along_rows),
        ({"mode": "pdpd", "axis": 1}, along_columns),
    ]
    with engine.settings(**path):  # NumPy's path gets an operand as it is only if aligned
        before = engine.call_cache_info()
        for _ in range(2):
            for given, want in calls:
                mapping = given.get("axes_mapping")
                mode, axis = given["mode"], given.get("axis", -1)
                same_bits(ops.broadcast(data, [64, 64], mapping, mode=mode, axis=axis), want)
        after = engine.call_cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (5, 5)


@pytest.mark.parametrize("op", ["sub", "div", "less"])
def test_small_replays_are_numpys_ufunc_into_out_or_a_new_array(op: str) -> None:
    # Below the compiled path's size a replayed call is one ufunc call on the caller's
    # thread (`Call.ufunc`): NumPy's result, with or without out=, an out that is an
    # operand included; every replay counted as a hit.
    ours, theirs = {"sub": (ops.sub, np.subtract), "div": (ops.div, np.divide), "less": (
        ops.less, np.less)}[op]  # fmt: skip
    rng = np.random.default_rng(4)
    a = rng.standard_normal((40, 64)).astype(np.float32)  # above the tiny path's 4096
    b = rng.standard_normal(64).astype(np.float32)
    b[::5] = 0  # x/0
    with np.errstate(all="ignore"):
        want = theirs(a, b)
    out = np.empty(want.shape, want.dtype)
    before = engine.call_cache_info()
    for _ in range(3):
        same_bits(ours(a, b), want)
        same_bits(ours(b, a), theirs(b, a))
        same_bits(ours(a, b, out=out), want)
    after = engine.call_cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (3, 6)
    if op != "less":
        in_place = a.copy()
        for _ in range(2):
            in_place[...] = a
            ours(in_place, b, out=in_place)
            same_bits(in_place, want)
    frozen = np.empty(want.shape, want.dtype)
    frozen.flags.writeable = False
    ours(a, b, out=out)
    with pytest.raises(ValueError, match=f"{op}: out is read-only"):
        ours(a, b, out=frozen)


def test_small_replays_without_out_still_respect_the_memory_limit() -> None:
    a, b = np.ones((40, 64), np.float32), np.ones(64, np.float32)
    ops.add(a, b)
    ops.add(a, b)  # replayed by one ufunc call
    with memory_limit(1000), pytest.raises(MemoryLimitError):
        ops.add(a, b)


def test_an_out_of_a_few_thousand_elements_takes_the_tiny_path() -> None:
    # out= has an operand's shape: its size is the work's, whatever the operands' sizes
    # multiply to. Up to 2048 elements NumPy's ufunc is called at once, nothing planned;
    # above, the call is planned (and replayed by the compiled entry).
    for rows, planned in [(32, 0), (33, 1)]:
        a = np.arange(rows * 64, dtype=np.float32).reshape(rows, 64)
        b = np.linspace(-1, 1, 64, dtype=np.float32)
        out = np.empty_like(a)
        misses = engine.call_cache_info().misses
        same_bits(ops.mul(a, b, out=out), a * b)
        assert engine.call_cache_info().misses - misses == planned
