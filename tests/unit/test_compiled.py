"""The compiled path (`bcast.engine.compiled`, numba): exactly NumPy's results, or NumPy's path.

Every comparison is against NumPy itself (the ufunc, ``np.where``, ``np.broadcast_to``),
bit for bit, with the compiled path forced onto small arrays and checked to have run. No
timings here (see ``benchmarks/``).
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from python_paths import python_ops as ops  # the compiled path behind the C tiny path

from bcast import engine
from bcast.engine import compiled as _compiled
from bcast.engine import config as _config
from bcast.engine import layout as _layout
from bcast.engine import operations as _operations
from bcast.engine import parallel as _parallel
from bcast.engine import runner as _runner
from bcast.engine.background import Resolver
from bcast.engine.runner import MAX_RANK, Runner
from bcast.ops import _tiny
from entries import entries

pytest.importorskip("numba", reason="the compiled path needs the 'fast' extra (numba)")

# Every large-work path forced: compiled (the kernel compiled, or loaded from numba's cache,
# in the caller's thread on first use), split over 3 threads, streaming stores on.
# The bit-for-bit tables compile entries for 4-byte operands only (65 entries for every
# case, 34 so): the entry's own tests below cover every itemsize.
FORCED = {
    "compiled_wait": True,
    "threads": 3,
    "parallel_min": 1,
    "compiled_min": 0,
    "compiled_thread_work": 1,
    "blocks_per_thread": 3,
    "stream_min_bytes": 0,
}


@pytest.fixture
def calls(
    monkeypatch: pytest.MonkeyPatch, compiled_runs: list[tuple[str, bool]]
) -> Iterator[list[tuple[str, bool]]]:
    """Record (operation, whether it ran) for each call of a compiled `Runner`."""
    seen = compiled_runs
    monkeypatch.setattr(_compiled, "CHUNK_BYTES", 1)  # threads claim one row at a time
    monkeypatch.setattr(_compiled, "_walks", {})  # every layout planned afresh
    yield seen


def _record_options(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[Any]:
    """Record the keyword arguments of each call of ``owner.name``, which still runs."""
    seen: list[dict[str, Any]] = []
    real = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return seen


@pytest.fixture
def run_options(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]]
) -> list[dict[str, Any]]:
    """The keyword arguments of each `bcast.engine.compiled.prepare` (threads, stream...)."""
    return _record_options(monkeypatch, _compiled, "prepare")


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of each layout the compiled path plans (`walk_axes`)."""
    return _record_options(monkeypatch, _layout, "walk_axes")


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    values = rng.standard_normal(shape).astype(dtype) * dtype.type(1e3)
    flat = values.reshape(-1)
    flat[::7] = 0  # zeros: x/0 is inf or nan, 0 == -0
    flat[3::11] = np.nan
    flat[5::13] = -np.inf
    return values


BINARY: dict[str, tuple[Callable[..., Any], Callable[..., Any], list[str]]] = {
    "add": (ops.add, np.add, ["float32", "float64", "int8", "int32", "uint64", "float16"]),
    "sub": (ops.sub, np.subtract, ["float32", "int64", "uint16", "float16"]),
    "mul": (ops.mul, np.multiply, ["float64", "int16", "uint32", "float16"]),
    "div": (ops.div, np.divide, ["float32", "float64", "float16"]),
    "equal": (ops.equal, np.equal, ["float32", "int32", "bool", "float16"]),
    "greater": (ops.greater, np.greater, ["float64", "uint8", "float16"]),
    "less": (ops.less, np.less, ["float32", "int64", "float16"]),
    "and_": (ops.and_, np.logical_and, ["bool"]),
    "or_": (ops.or_, np.logical_or, ["bool"]),
    "xor": (ops.xor, np.logical_xor, ["bool"]),
    # the operators of opset 10+ and OpenVINO's element-wise set that have kernels
    "not_equal": (ops.not_equal, np.not_equal, ["float32", "int16", "bool", "float16"]),
    "greater_or_equal": (ops.greater_or_equal, np.greater_equal, ["float64", "int8", "float16"]),
    "less_or_equal": (ops.less_or_equal, np.less_equal, ["float32", "uint32", "float16"]),
    "squared_difference": (
        ops.squared_difference,
        lambda a, b: np.multiply(np.subtract(a, b), np.subtract(a, b)),  # two roundings
        ["float32", "float64", "int16", "uint8", "float16"],
    ),
    "bitwise_and": (ops.bitwise_and, np.bitwise_and, ["int32", "uint8"]),
    "bitwise_or": (ops.bitwise_or, np.bitwise_or, ["int64", "uint16"]),
    "bitwise_xor": (ops.bitwise_xor, np.bitwise_xor, ["int8", "uint64"]),
}
CASES = [(op, dtype) for op, (_, _, dtypes) in BINARY.items() for dtype in dtypes]

# (a, b): stretched inner axes on either side, outer products, mid-rank, short rows (tiled),
# one long row, odd lengths (unaligned streaming runs)
SHAPES = [
    ((9, 1, 37), (1, 5, 37)),
    ((40, 1), (1, 50)),
    ((6, 1, 12, 10), (1, 5, 1, 10)),
    ((300, 7), (7,)),
    ((3, 133), (3, 1)),
    ((100_003,), (1,)),  # a prime length: one row, not cut
    ((120_000,), (120_000,)),  # one long row, cut into rows for the threads
    ((4, 2, 3, 2, 5, 2), (2, 1, 2, 1, 2)),
]


@pytest.mark.parametrize(("op", "dtype"), CASES)
def test_binary_operations_match_numpy_bit_for_bit(
    op: str, dtype: str, calls: list[tuple[str, bool]]
) -> None:
    ours, theirs, _ = BINARY[op]
    rng = np.random.default_rng(1)
    for a_shape, b_shape in SHAPES:
        a, b = _values(rng, a_shape, dtype), _values(rng, b_shape, dtype)
        with np.errstate(all="ignore"):
            want = theirs(a, b)
        with entries(np.dtype(dtype).itemsize == 4), engine.settings(**FORCED):
            got = ours(a, b)
        same_bits(got, want)
    assert calls and all(done for _, done in calls)
    assert {name for name, _ in calls} == {op}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "bool", "float16"])
def test_where_matches_numpy_bit_for_bit(dtype: str, calls: list[tuple[str, bool]]) -> None:
    rng = np.random.default_rng(2)
    shapes = [((1, 40, 33), (6, 1, 33), (6, 40, 1)), ((70, 1), (1, 90), ()), ((5003,), (1,), ())]
    for c_shape, x_shape, y_shape in shapes:
        condition = rng.random(c_shape) < 0.5
        x, y = _values(rng, x_shape, dtype), _values(rng, y_shape, dtype)
        with engine.settings(**FORCED):
            got = ops.where(condition, x, y)
        same_bits(got, np.where(condition, x, y))
    assert calls and all(done for name, done in calls if name == "where")


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "uint8", "complex64"])
def test_expand_matches_numpy_bit_for_bit(dtype: str, calls: list[tuple[str, bool]]) -> None:
    rng = np.random.default_rng(3)
    for shape, target in [((33,), (7, 5, 33)), ((4, 1), (4, 1001)), ((1,), (3, 1, 257))]:
        x = _values(rng, shape, "float32" if dtype == "complex64" else dtype).astype(dtype)
        with engine.settings(**FORCED):
            got = ops.expand(x, target)
        same_bits(got, np.broadcast_to(x, np.broadcast_shapes(shape, target)))
    assert calls and all(done for _, done in calls)  # complex64: 8-byte words


@pytest.mark.parametrize("chunk_bytes", [1, 3 * 37 * 4, 1 << 16])
def test_threads_compute_every_row(
    chunk_bytes: int, monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]]
) -> None:
    # three walkers claim rows from one counter, a row or a few at a time, or all at once
    monkeypatch.setattr(_compiled, "CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((9, 7, 37)).astype(np.float32)
    b = rng.standard_normal((7, 1)).astype(np.float32)
    for stream in (0, 1 << 40):
        out = np.full(a.shape, np.nan, np.float32)
        with engine.settings(**{**FORCED, "stream_min_bytes": stream}):
            ops.add(a, b, out=out)
        same_bits(out, a + b)
    assert calls == [("add", True)] * 2


def test_small_compiled_work_takes_fewer_threads(
    run_options: list[dict[str, Any]], calls: list[tuple[str, bool]]
) -> None:
    # 6000 float64 elements: 48,000 bytes of work (the walk's time follows its bytes)
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)
    for per_thread in (1, 16000, 24000, 48001):
        with engine.settings(**{**FORCED, "compiled_thread_work": per_thread}):
            same_bits(ops.sub(a, b), a - b)
    assert [options["threads"] for options in run_options] == [3, 3, 2, 1]
    assert calls == [("sub", True)] * 4


def _python_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the helpers of each walk the caller's thread starts from Python (``go``)."""
    from bcast.engine import runner as _runner

    started: list[int] = []
    real = _runner._bind

    def bind(*args: Any) -> Any:
        go = real(*args)

        def counted(home: int, board: int, helpers: int) -> None:
            if home == 0:  # not a worker's share of a walk
                started.append(helpers)
            go(home, board, helpers)

        return counted

    monkeypatch.setattr(_runner, "_bind", bind)
    return started


# (a, b, b transposed): a bias (rows in place), an outer add (x one value a row), b strided
# (its rows gathered into a buffer), b tiled, both stretched on an axis
ONE_THREAD = [
    ((50, 64), (64,), False),
    ((70, 1), (1, 90), False),
    ((60, 40), (60, 40), True),  # above the tiny path's out= of 2048
    ((200, 6, 40), (6, 40), False),
    ((30, 1, 17), (1, 20, 1), False),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint8"])
def test_one_thread_replays_run_the_walk_inside_the_compiled_entry(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]], dtype: str
) -> None:
    # one thread: the entry calls the walker's machine code, and Python starts no walk;
    # each replay of a call site on new values, NumPy's bits exactly
    started = _python_walks(monkeypatch)
    rng = np.random.default_rng(11)
    with engine.settings(**{**FORCED, "threads": 1}):
        for shape_a, shape_b, transposed in ONE_THREAD:
            out = np.empty(np.broadcast_shapes(shape_a, shape_b), dtype)
            for _ in range(3):
                a = _values(rng, shape_a, dtype)
                b = (
                    _values(rng, shape_b[::-1], dtype).T
                    if transposed
                    else _values(rng, shape_b, dtype)
                )
                with np.errstate(invalid="ignore"):  # inf - inf in the reference: nan
                    expected = np.subtract(a, b)
                same_bits(ops.sub(a, b, out=out), expected)
    assert calls == [("sub", True)] * 15
    assert started == []


def test_replays_into_out_call_the_compiled_entry_without_the_runner(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]]
) -> None:
    # A replay goes from the operator straight to the compiled entry (the runner's lane),
    # never through the Python runner (the first call may, while it compiles). One the entry
    # declines
    # (out overlapping an operand, the same layout) takes NumPy's path, which handles the
    # overlap; a read-only out is refused as before, unwritten.
    python_runs: list[int] = []
    real = Runner.__call__

    def counted(self: Runner, out: Any, operands: Any) -> bool:
        python_runs.append(1)
        return real(self, out, operands)

    monkeypatch.setattr(Runner, "__call__", counted)
    rng = np.random.default_rng(5)
    big = rng.standard_normal((70, 90)).astype(np.float32)
    a = rng.standard_normal((70, 1)).astype(np.float32)
    out = np.empty_like(big)
    with engine.settings(**{**FORCED, "threads": 1}):
        for k in range(3):
            b = big[k : k + 1]  # (1, 90), the strides of a row of big
            same_bits(ops.add(a, b, out=out), a + b)
            python_runs.clear()
        same_bits(ops.add(a, big[7:8]), a + big[7:8])  # a new result: the lane too
        want = a + big[5:6]
        same_bits(ops.add(a, big[5:6], out=big), want)  # writes the row it reads
        frozen = np.zeros_like(out)
        frozen.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            ops.add(a, big[5:6], out=frozen)
        assert not frozen.any()
    assert python_runs == []
    assert calls == [("add", True)] * 3 + [("add", True), ("add", False)]


def test_the_walk_is_started_from_python_where_the_entry_cannot_call_the_walker(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]]
) -> None:
    # threads: the caller's walk posts to the workers (Python starts it); a walker whose
    # machine code the entry cannot call (its arguments passed otherwise): Python too
    from bcast.engine import numba_kernels as _numba_kernels

    started = _python_walks(monkeypatch)
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)
    with engine.settings(**FORCED):
        same_bits(ops.mul(a, b), a * b)
    assert started == [2]  # the caller's walk, with two helpers
    monkeypatch.setattr(_numba_kernels, "native", lambda *args: 0)
    monkeypatch.setattr(_numba_kernels, "_entries", {})  # resolved again (numba has it)
    monkeypatch.setattr(_compiled, "_kernels", Resolver(_compiled._compile, name="test"))
    with engine.settings(**{**FORCED, "threads": 1}):
        same_bits(ops.mul(a, b), a * b)
    assert started == [2, 0]
    assert calls == [("mul", True)] * 2


def test_the_compiled_path_tiles_within_its_own_budget(
    plans: list[dict[str, Any]], calls: list[tuple[str, bool]]
) -> None:
    a, b = np.arange(6400, dtype=np.float32).reshape(100, 64), np.arange(64, dtype=np.float32)
    for budget in (0, 4096):
        with engine.settings(**FORCED, compiled_tile_bytes=budget, max_tile_bytes=1 << 20):
            same_bits(ops.add(a, b), a + b)
    assert [plan["max_tile_bytes"] for plan in plans] == [0, 4096]
    assert calls == [("add", True)] * 2


def test_a_repeated_layout_is_planned_once_and_tiled_with_each_calls_values(
    plans: list[dict[str, Any]], calls: list[tuple[str, bool]]
) -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((200, 6, 40)).astype(np.float32)
    with engine.settings(**FORCED, compiled_tile_bytes=1 << 20):
        for _ in range(3):
            b = rng.standard_normal((6, 40)).astype(np.float32)  # new values, one layout
            c = rng.standard_normal((6, 40)).astype(np.float32)
            same_bits(ops.add(a, b), a + b)  # b is tiled
            same_bits(ops.where(a > 0, b, c), np.where(a > 0, b, c))  # b and c are
    assert len(plans) == 2
    assert [len(walk.tiles) for walk in _compiled._walks.values()] == [1, 2]  # type: ignore[attr-defined]
    assert calls == [("add", True), ("where", True)] * 3


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
@pytest.mark.parametrize("source", ["runs", "strided", "stretched"])
def test_tiles_are_filled_for_every_itemsize_and_source_layout(
    dtype: str, source: str, calls: list[tuple[str, bool]]
) -> None:
    # One compiled copy per itemsize fills each call's tiles: from contiguous runs, from
    # every other element, from one element stretched along the row. New values each call.
    rng = np.random.default_rng(11)
    a = rng.integers(0, 50, (200, 6, 40)).astype(dtype)
    with engine.settings(**FORCED, compiled_tile_bytes=1 << 20):
        for _ in range(2):
            base = rng.integers(0, 50, (6, 80)).astype(dtype)
            b = {
                "runs": base[:, :40],
                "strided": base[:, ::2],
                "stretched": np.broadcast_to(base[:, :1], (6, 40)),
            }[source]
            same_bits(ops.add(a, b), np.add(a, b))
    walks = _compiled._walks.values()  # type: ignore[attr-defined]
    steps = {tile[2][-1] for walk in walks for tile in walk.tiles}  # the inner stride read
    assert {"runs": 1, "strided": 2, "stretched": 0}[source] * np.dtype(dtype).itemsize in steps
    assert calls and all(done for _, done in calls)


def test_tiles_lengthen_rows_to_row_bytes_within_the_budget(calls: list[tuple[str, bool]]) -> None:
    # A bias's tile makes rows of ROW_BYTES (a tile in the first-level cache), though the
    # budget allows 256 KiB; a mid-rank add's tile, which must hold every value of an outer
    # axis, takes the budget to make its rows as long as it can.
    found = []
    for a_shape, b_shape, dtype in [
        ((4096, 64), (64,), "float32"),
        ((4096, 64), (64,), "float64"),
        ((4, 1, 128, 128), (1, 64, 1, 128), "float32"),
    ]:
        _compiled._walks.clear()
        a = np.ones(a_shape, dtype)
        b = np.arange(math.prod(b_shape), dtype=dtype).reshape(b_shape)
        with engine.settings(**FORCED, compiled_tile_bytes=1 << 18):
            same_bits(ops.add(a, b), a + b)
        [walk] = _compiled._walks.values()  # type: ignore[attr-defined]
        tiles = [math.prod(tile[4]) * np.dtype(dtype).itemsize for tile in walk.tiles]
        found.append((walk.row_bytes, tiles))
    assert _compiled.ROW_BYTES == 1 << 14
    assert found == [(1 << 14, [1 << 14]), (1 << 14, [1 << 14]), (1 << 12, [1 << 18])]
    assert calls and all(done for _, done in calls)


def test_streaming_into_unaligned_outputs(calls: list[tuple[str, bool]]) -> None:
    # out= views starting at every offset of a cache line, rows of lengths around a line
    rng = np.random.default_rng(4)
    buffer = np.zeros(64 * 100 + 64, np.float32)
    for offset in range(0, 17):
        for n in (15, 16, 17, 31, 48, 95):
            out = buffer[offset : offset + 5 * n].reshape(5, n)
            a, b = _values(rng, (5, 1), "float32"), _values(rng, (n,), "float32")
            with engine.settings(**FORCED):
                ops.add(a, b, out=out)
            same_bits(out, np.add(a, b))
    assert calls and all(done for _, done in calls)


@pytest.mark.parametrize(
    ("op", "dtype"), [("add", "float32"), ("mul", "float64"), ("less", "int16"), ("where", "uint8")]
)
def test_plain_stores_into_unaligned_outputs(
    op: str, dtype: str, calls: list[tuple[str, bool]]
) -> None:
    # a long row is stored one element at a time up to a vector-aligned address, then by
    # the vector loop: outputs at every offset of a line, rows around the length where the
    # head starts, each operand stretched over the row in turn
    rng = np.random.default_rng(5)
    kernels = {"add": np.add, "mul": np.multiply, "less": np.less}
    width = np.dtype(bool if op == "less" else dtype).itemsize
    buffer = np.zeros(64 * 300, np.uint8)
    for offset in range(0, 64, width):
        for n in (128 // width - 1, 128 // width, 128 // width + 5, 300 // width):
            for shapes in [((5, 1), (n,)), ((5, n), (1,)), ((5, n), (n,))]:
                a, b = (_values(rng, s, dtype) for s in shapes)
                out_dtype = bool if op == "less" else dtype
                out = buffer[offset : offset + 5 * n * width].view(out_dtype).reshape(5, n)
                with (
                    engine.settings(**{**FORCED, "stream_min_bytes": 1 << 40}),
                    np.errstate(all="ignore"),
                ):
                    if op == "where":
                        mask = _values(rng, (5, n), "bool")
                        ops.where(mask, a, b, out=out)
                        same_bits(out, np.where(mask, a, b))
                    else:
                        getattr(ops, op)(a, b, out=out)
                        same_bits(out, kernels[op](a, b))
    assert calls and all(done for _, done in calls)


def test_plain_stores_below_the_streaming_size(calls: list[tuple[str, bool]]) -> None:
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)  # above the tiny path's size
    with engine.settings(**{**FORCED, "stream_min_bytes": 1 << 40}):
        same_bits(ops.sub(a, b), a - b)
    assert calls == [("sub", True)]


def test_streaming_counts_the_operands_bytes_with_the_output(
    run_options: list[dict[str, Any]], calls: list[tuple[str, bool]]
) -> None:
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)  # 48000 + 800 bytes in
    for limit in (48_001, 96_800, 96_801):  # the output alone: 48000 bytes
        with engine.settings(**{**FORCED, "stream_min_bytes": limit}):
            same_bits(ops.sub(a, b), a - b)
    assert [options["stream"] for options in run_options] == [True, True, False]
    assert calls == [("sub", True)] * 3


@pytest.mark.parametrize(
    ("cache", "cap", "streams"),
    [
        (1 << 40, 48_001, True),  # a VM's reported host cache: the cap decides
        (1 << 40, 96_801, False),
        (48_001, 1 << 40, True),  # a cache below the cap decides
        (96_801, 1 << 40, False),
    ],
)
def test_default_streaming_size_is_the_cache_at_most_the_cap(
    monkeypatch: pytest.MonkeyPatch,
    run_options: list[dict[str, Any]],
    calls: list[tuple[str, bool]],
    cache: int,
    cap: int,
    streams: bool,
) -> None:
    monkeypatch.setattr(_parallel, "cache_bytes", lambda: cache)
    monkeypatch.setattr(_config, "STREAM_CAP", cap)
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)  # 96800 bytes of work
    with engine.settings(**{**FORCED, "stream_min_bytes": None}):
        same_bits(ops.sub(a, b), a - b)
    assert [options["stream"] for options in run_options] == [streams]
    assert calls == [("sub", True)]


@pytest.mark.parametrize(
    ("cache", "streams", "measures"),
    [
        (48_399, True, False),  # 96,800 bytes of work: over twice the size, streams
        (48_400, True, True),  # twice the size: measured, streaming first
        (96_801, False, True),
        (193_600, False, True),  # half the size: measured, plain stores first
        (193_602, False, False),
    ],
)
def test_work_near_the_default_streaming_size_measures_both_stores(
    monkeypatch: pytest.MonkeyPatch,
    run_options: list[dict[str, Any]],
    calls: list[tuple[str, bool]],
    cache: int,
    streams: bool,
    measures: bool,
) -> None:
    monkeypatch.setattr(_parallel, "cache_bytes", lambda: cache)
    monkeypatch.setattr(_config, "STREAM_CAP", 1 << 40)
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)  # 96800 bytes of work
    with engine.settings(**{**FORCED, "stream_min_bytes": None}):
        same_bits(ops.sub(a, b), a - b)
    assert _config.MEASURED_SPAN == 2
    assert [(o["stream"], o["measure_stores"]) for o in run_options] == [(streams, measures)]
    assert calls == [("sub", True)]


def test_one_byte_outputs_never_stream_by_default(
    monkeypatch: pytest.MonkeyPatch,
    run_options: list[dict[str, Any]],
    calls: list[tuple[str, bool]],
) -> None:
    # Streaming stores of single bytes are slower than plain ones at any size (a comparison
    # into a 64 MiB bool out: 133 ms streamed, 23 plain); wider outputs past the cache stream.
    monkeypatch.setattr(_parallel, "cache_bytes", lambda: 1024)  # everything is past it
    monkeypatch.setattr(_config, "STREAM_CAP", 1 << 40)
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)
    small_a, small_b = a.astype(np.uint8), b.astype(np.uint8)
    with engine.settings(**{**FORCED, "stream_min_bytes": None}):
        same_bits(ops.less(a, b), a < b)
        same_bits(ops.add(small_a, small_b), small_a + small_b)
        same_bits(ops.sub(a, b), a - b)
    assert [(o["stream"], o["measure_stores"]) for o in run_options] == [
        (False, False),
        (False, False),
        (True, False),
    ]
    with engine.settings(**{**FORCED, "stream_min_bytes": 0}):  # asked for: they stream
        same_bits(ops.less(a, b), a < b)
    assert run_options[-1]["stream"] is True
    assert calls and all(done for _, done in calls)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("quicker", [True, False])
def test_measured_stores_keep_the_quicker_kind(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]], threads: int, quicker: bool
) -> None:
    # A replayed call near the streaming size walks TRIAL_CALLS times with plain stores
    # (the guess: 96,800 bytes of work, a cache of 96,801), as many with streaming ones,
    # timed by a clock under which the kind `quicker` takes 1 s a walk and the other 2 s,
    # then keeps `quicker`; the values are NumPy's on every call.
    monkeypatch.setattr(_parallel, "cache_bytes", lambda: 96_801)
    monkeypatch.setattr(_config, "STREAM_CAP", 1 << 40)
    now = [0.0]

    def clock() -> float:
        found = [call.runner for call in _tiny.CALLS["sub"]._calls.values()]  # type: ignore[attr-defined]
        now[0] += 1.0 if found and found[0].stream == quicker else 2.0
        return now[0]

    monkeypatch.setattr(_runner, "_clock", clock)
    rng = np.random.default_rng(11)
    a, b = _values(rng, (60, 100), "float64"), _values(rng, (100,), "float64")
    out = np.empty((60, 100))
    kinds = []
    with engine.settings(**{**FORCED, "stream_min_bytes": None, "threads": threads}):
        for _ in range(2 * _runner.TRIAL_CALLS + 3):
            out[:] = 7.0
            ops.sub(a, b, out=out)
            with np.errstate(invalid="ignore"):  # inf - inf
                same_bits(out, np.subtract(a, b))
            [call] = _tiny.CALLS["sub"]._calls.values()  # type: ignore[attr-defined]
            kinds.append((call.runner.stream, call.runner.measuring))
    trial = _runner.TRIAL_CALLS
    assert trial == 8
    assert kinds == (
        [(False, True)] * (trial - 1) + [(True, True)] * trial + [(quicker, False)] * 4
    )
    assert (call.runner.lane is not None) == (threads == 1)  # no clock once decided
    assert calls and all(done for _, done in calls)


def test_explicit_streaming_size_is_not_measured(calls: list[tuple[str, bool]]) -> None:
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)
    with engine.settings(**{**FORCED, "stream_min_bytes": 96_801}):
        for _ in range(3):
            same_bits(ops.sub(a, b), a - b)
        [call] = _tiny.CALLS["sub"]._calls.values()  # type: ignore[attr-defined]
    assert (call.runner.stream, call.runner.measuring) == (False, False)


def test_layouts_the_walker_takes(calls: list[tuple[str, bool]]) -> None:
    rng = np.random.default_rng(5)
    a = _values(rng, (30, 40), "float64")
    b = _values(rng, (40, 30), "float64").T  # a strided inner axis: gathered into a row
    out_f = np.empty((30, 40), order="F")  # out in Fortran order: walked in its own order
    with np.errstate(all="ignore"):
        want = a * b  # 0 * inf is nan
    with engine.settings(**FORCED):
        same_bits(ops.mul(a, b), want)
        ops.mul(a, b, out=out_f)
        same_bits(out_f, want)
        in_place = a.copy()
        ops.add(in_place, b, out=in_place)  # out is an operand
    same_bits(in_place, a + b)
    assert calls and all(done for _, done in calls)


def test_layouts_left_to_numpy(calls: list[tuple[str, bool]]) -> None:
    rng = np.random.default_rng(6)
    a = _values(rng, (20, 30), "float32")
    b = _values(rng, (30,), "float32")[::-1]  # a negative stride
    out = np.zeros((20, 60), np.float32)[:, ::2]  # out not contiguous in its inner axis
    with engine.settings(**FORCED):
        same_bits(ops.add(a, b), a + b)
        ops.add(a, b[::-1].copy(), out=out)
    same_bits(out, a + b[::-1])
    assert not any(done for _, done in calls)  # planned once: the walker declines them


def test_operands_numba_cannot_take_use_numpy(calls: list[tuple[str, bool]]) -> None:
    # all above the tiny path's size, so that they reach the engine
    a64 = np.linspace(0.5, 2, 6000).reshape(60, 100)
    swapped = np.arange(6000, dtype=">f4")  # another byte order
    integer = np.arange(1, 6001, dtype=np.int32).reshape(60, 100)
    with engine.settings(**FORCED):
        same_bits(ops.pow(a64, a64[0]), a64 ** a64[0])
        got = ops.add(swapped, swapped)
        same_bits(ops.div(integer, integer[:1]), integer // integer[:1])
    # As NumPy: the result of non-native operands is in native byte order.
    assert got.dtype == (swapped + swapped).dtype == np.dtype("float32")
    assert np.array_equal(got, swapped + swapped)
    # float64 Pow and integer Div: turned down before arranging (accepts() said no); the
    # swapped operands, made native first, are an ordinary float32 add.
    assert calls == [("add", True)]


# Every float16 bit pattern (65536: NaNs of every payload, signaling ones included,
# subnormals, infinities, both zeros) against values that make each kind of result.
_HALF_BITS = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
_HALF_SPECIAL = np.array(
    [0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x3C00, 0xBC00, 0x3C01, 0x3555, 0x7BFF, 0xFBFF,
     0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7D00, 0xFE01, 0x1400, 0x4000, 0x5A00],
    np.uint16,
).view(np.float16)  # fmt: skip


@pytest.mark.parametrize(
    "op",
    [
        *["add", "sub", "mul", "div", "equal", "greater", "less"],
        *["not_equal", "greater_or_equal", "less_or_equal", "squared_difference"],
    ],
)
def test_float16_matches_numpy_on_every_bit_pattern(op: str, calls: list[tuple[str, bool]]) -> None:
    # The half-precision kernels compute in float32 and round once more (`numba_rows.
    # HALVES`): NumPy's float16 loop does the same. Both ways round, overflow to inf, keep
    # subnormals, and (where both operands are NaN) pick the same NaN.
    ours, theirs, _ = BINARY[op]
    a = _HALF_BITS.reshape(-1, 1)
    for b in (_HALF_SPECIAL, _HALF_SPECIAL[::-1].copy()):
        with np.errstate(all="ignore"):
            want = theirs(a, b)
            with entries(False), engine.settings(**FORCED):
                got = ours(a, b)
        same_bits(got, want)
        with np.errstate(all="ignore"):  # the other operand order
            want = theirs(b, a)
            with entries(False), engine.settings(**FORCED):
                got = ours(b, a)
        same_bits(got, want)
    # Compiled wherever numba's target CPU converts halves (NumPy's path elsewhere).
    assert calls and all(done for _, done in calls) is _compiled._half_kernels()


def test_float16_kernels_only_where_the_cpu_converts_halves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from numba.core import config as numba_config

    from bcast.engine import numba_kernels

    rule = numba_kernels._half_conversions
    for machine, features, want in [
        ("x86_64", "+sse2,+avx,+f16c", True),
        ("x86_64", "+sse2,+avx,-f16c", False),  # LLVM would call a function numba lacks
        ("AMD64", "+sse2", False),
        ("aarch64", "", True),  # a base instruction there
        ("ppc64le", "+vsx", False),
    ]:
        monkeypatch.setattr(numba_kernels.platform, "machine", lambda m=machine: m)
        monkeypatch.setattr(numba_config, "CPU_FEATURES", features)
        assert rule() is want, (machine, features)
    # Where it cannot, nothing is compiled (so nothing can crash) and NumPy computes.
    monkeypatch.setattr(numba_kernels, "HALF", False)
    half = np.dtype(np.float16)
    assert numba_kernels._compile("add", [half] * 4) is None
    assert not any(np.float16 in dtypes for _, dtypes in _compiled.signatures())
    monkeypatch.setattr(numba_kernels, "HALF", True)
    assert ("add", (half,) * 4) in _compiled.signatures(["add"])


def test_without_numba_the_numpy_path_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_compiled._state, "kernels", None)
    assert not _compiled.available()
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)
    with engine.settings(**FORCED):
        same_bits(ops.add(a, b), a + b)


def test_off_switches(monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]]) -> None:
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)
    with engine.settings(**FORCED, compiled=False):
        same_bits(ops.add(a, b), a + b)
    monkeypatch.setenv("BCAST_COMPILED", "0")
    assert not _compiled.available()
    with engine.settings(**FORCED):
        same_bits(ops.add(a, b), a + b)
    assert calls == []


def test_importing_bcast_does_not_import_numba() -> None:
    code = "import sys, bcast, bcast.ops; print('numba' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_accepts_names_the_exact_cases() -> None:
    f4, f8 = np.zeros(2, np.float32), np.zeros(2, np.float64)
    boolean, mask = np.zeros(2, bool), np.zeros(2, np.uint32)
    assert _compiled.accepts("div", f4, [f4, f4])
    assert not _compiled.accepts("div", f4.astype(np.int32), [f4.astype(np.int32)] * 2)
    assert not _compiled.accepts("add", f8, [f4, f8])  # mixed dtypes: NumPy's casting
    assert _compiled.accepts("less", boolean, [f8, f8])
    assert not _compiled.accepts("less", f8, [f8, f8])
    assert _compiled.accepts("where", f4, [boolean, f4, f4])
    assert not _compiled.accepts("where", f4, [mask, f4, f4])  # a condition is bool
    assert not _compiled.accepts("max", f4, [f4, f4])  # not an operation of the table
    f2 = np.zeros(2, np.float16)  # computed in float32 and rounded, as NumPy does
    assert _compiled.accepts("add", f2, [f2, f2]) and _compiled.accepts("div", f2, [f2, f2])
    assert _compiled.accepts("less", boolean, [f2, f2])
    assert _compiled.accepts("pow", f2, [f2, f2])  # float32's Pow, rounded to half
    assert not _compiled.accepts("pow", f4.astype(np.float64), [f4.astype(np.float64)] * 2)
    assert not _compiled.accepts("copy", np.zeros(2, "U3"), [np.zeros(2, "U3")])
    i1, u8 = np.zeros(2, np.int8), np.zeros(2, np.uint64)
    assert _compiled.accepts("bitwise_xor", i1, [i1, i1]) and _compiled.accepts(
        "bitwise_and", u8, [u8, u8]
    )
    assert not _compiled.accepts("bitwise_or", f4, [f4, f4])  # integers only
    assert not _compiled.accepts("bitwise_or", boolean, [boolean, boolean])
    assert _compiled.accepts("not_equal", boolean, [boolean, boolean])
    # ordered comparisons of booleans are no operator's (ONNX's Greater and Less take none)
    assert not _compiled.accepts("greater_or_equal", boolean, [boolean, boolean])
    assert _compiled.accepts("less_or_equal", boolean, [i1, i1])


def test_kernels_are_shared_where_the_bits_are_the_same() -> None:
    # Less and LessOrEqual are Greater and GreaterOrEqual with the operands swapped; sums,
    # differences, products, bitwise operations and equality of a signed integer have the
    # bits of the unsigned integer's of its width: one kernel for both.
    kernels = dict.fromkeys(name for name, _ in _compiled.signatures())
    assert "less" not in kernels and "less_or_equal" not in kernels
    assert {"greater", "greater_or_equal", "not_equal", "bitwise_xor"} <= set(kernels)
    for name in ["add", "mul", "equal", "squared_difference", "bitwise_and"]:
        widths = [d for n, dtypes in _compiled.signatures([name]) for d in dtypes if n == name]
        assert not any(d.kind == "i" for d in widths), name
        assert np.dtype(np.uint16) in widths
    signed = [dtypes for _, dtypes in _compiled.signatures(["greater"])]
    assert any(np.dtype(np.int8) in dtypes for dtypes in signed)  # order needs the sign


@pytest.mark.parametrize("dtype", ["int8", "int64"])
def test_a_signed_integer_on_the_unsigned_kernel_keeps_numpys_bits(
    dtype: str, calls: list[tuple[str, bool]]
) -> None:
    # Overflowing sums, differences and products wrap to the same bits as NumPy's signed loop.
    info = np.iinfo(dtype)
    a = np.array([info.min, info.max, -1, 0, 1, info.min + 1] * 700, dtype).reshape(-1, 6)
    b = np.array([info.max, info.max, info.min, -1, info.min, -2], dtype)
    for ours, theirs in [(ops.add, np.add), (ops.sub, np.subtract), (ops.mul, np.multiply)]:
        with np.errstate(all="ignore"), engine.settings(**FORCED):
            same_bits(ours(a, b), theirs(a, b))
            same_bits(ops.equal(a, b), np.equal(a, b))
    assert calls and all(done for _, done in calls)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between float32 arrays (finite, same sign)."""
    return np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))


def test_pow_float32_within_one_ulp_of_numpy(calls: list[tuple[str, bool]]) -> None:
    # The compiled Pow evaluates 2 ** (y log2 x) in float64 and rounds once; NumPy calls
    # powf. Bases over many octaves, exponents from -40 to 40: results from subnormal to inf.
    rng = np.random.default_rng(8)
    base = np.exp2(rng.uniform(-30, 30, (64, 257))).astype(np.float32)
    exponent = rng.uniform(-40, 40, (257,)).astype(np.float32)
    with engine.settings(**FORCED):
        got = ops.pow(base, exponent)
    with np.errstate(over="ignore"):
        want = np.power(base, exponent)
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    assert finite.mean() > 0.5 and (want[finite] < np.finfo(np.float32).tiny).any()
    assert _ulps(got[finite], want[finite]).max() <= 1
    assert calls and all(done for _, done in calls)


def test_pow_special_operands_take_powf_exactly(calls: list[tuple[str, bool]]) -> None:
    specials = np.array(
        [0.0, -0.0, -2.0, -0.5, 1e-45, -1e-45, 1e-40, np.inf, -np.inf, np.nan, 1.0, 2.0, 0.75],
        np.float32,
    )
    exponents = np.array(
        [0.0, -0.0, 1.0, 2.0, 3.0, -1.0, -2.0, 0.5, -0.5, 1e10, -1e10, np.inf, -np.inf, np.nan],
        np.float32,
    )
    base = np.tile(specials, 400).reshape(-1, 1)  # 5200 x 14: above the tiny path's size
    with engine.settings(**FORCED), np.errstate(all="ignore"):
        got = ops.pow(base, exponents)
        want = np.power(base, exponents)
    special = (base <= np.float32(1e-38)) | ~np.isfinite(base) | ~np.isfinite(exponents)
    mask = np.broadcast_to(special, got.shape)
    # Special operands are computed by the C library's powf, bit for bit. NumPy's own float32
    # power agrees with powf on AVX2 machines; on AVX-512 ones it takes its own vector code,
    # which differs from powf by one ulp on some subnormal bases (1e-40 ** -0.5): the
    # comparison with NumPy allows that ulp, the one with powf none.
    powf = _libm_powf()
    if powf is not None:
        with np.errstate(all="ignore"):
            reference = np.vectorize(powf, otypes=[np.float32])(
                np.broadcast_to(base, got.shape), exponents
            )
        same_bits(got[mask], reference[mask])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    assert _ulps(got[finite], want[finite]).max() <= 1
    assert calls and all(done for _, done in calls)


def _libm_powf() -> Any:
    """The C library's powf, through ctypes (None where no C library is found)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("m")
    if name is None:
        return None
    libm = ctypes.CDLL(name)
    libm.powf.restype = ctypes.c_float
    libm.powf.argtypes = [ctypes.c_float, ctypes.c_float]
    return libm.powf


_POW_EXPONENTS = np.array(
    [2, 3, 4, 7, 0.5, -0.5, -1, -2, 1.5, 1.7, 0.3333, 0.1, -3.25, 11.5],
    np.float16,
)  # the common ones (squares, cubes, roots, reciprocals: LayerNorm, GELU) and others


@pytest.mark.parametrize("vectorised", [False, True])
def test_float16_pow_within_a_unit_of_numpy_on_every_bit_pattern(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]], vectorised: bool
) -> None:
    # NumPy's float16 power (the ONNX reference's; onnxruntime's agrees) widens to float32,
    # calls powf and rounds to half. The kernel does the same with the compiled float32 Pow,
    # within a unit of powf's float32: its half is the same, but where that unit straddles a
    # half-way point (none here, on the Xeon of docs/benchmarks.md). Every base (all 65536
    # bit patterns: NaNs, signaling ones included, subnormals, infinities, zeros) against
    # common exponents and every special one; both operand orders. NaN where NumPy has one
    # (1 ** sNaN and sNaN ** 0 included, which a quieted NaN would make 1). Compiled whether
    # or not NumPy's float32 power is vector code (it has none for float16).
    monkeypatch.setattr(_operations, "numpy_power_vectorised", lambda: vectorised)
    base = _HALF_BITS.reshape(-1, 1)
    exponents = np.concatenate([_POW_EXPONENTS, _HALF_SPECIAL])
    for a, b in ((base, exponents), (exponents.reshape(-1, 1), _HALF_BITS)):
        with np.errstate(all="ignore"):
            want = np.power(a, b)
            with engine.settings(**FORCED):
                got = ops.pow(a, b)
        assert got.dtype == np.float16 and got.shape == want.shape
        assert np.array_equal(np.isnan(got), np.isnan(want))
        numbers = ~np.isnan(want)
        g, w = got[numbers].view(np.int16), want[numbers].view(np.int16)
        assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
        apart = np.abs(g.astype(np.int32) - w.astype(np.int32))
        assert apart.max() <= 1
        assert np.count_nonzero(apart) <= 1e-5 * apart.size
    assert calls and all(done for _, done in calls) is _compiled._half_kernels()


def test_pow_other_dtypes_stay_on_numpy(calls: list[tuple[str, bool]]) -> None:
    rng = np.random.default_rng(9)
    base = rng.uniform(0.5, 2, (60, 100))
    with engine.settings(**FORCED):
        same_bits(ops.pow(base, base[0]), np.power(base, base[0]))  # float64
        base32 = base.astype(np.float32)
        same_bits(ops.pow(base32, base[0]), np.power(base32, base[0]).astype(np.float32))
    assert calls == []


def test_pow_is_left_to_numpy_where_numpy_has_a_vector_loop_for_it(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]]
) -> None:
    # On an AVX-512 CPU NumPy's float32 power is vector code, faster on the engine's threads
    # than the compiled polynomial: Pow runs on NumPy's path there, NumPy's bits exactly
    monkeypatch.setattr(_operations, "numpy_power_vectorised", lambda: True)
    rng = np.random.default_rng(10)
    base = rng.uniform(0.5, 2, (60, 100)).astype(np.float32)
    exponent = rng.uniform(-3, 3, (100,)).astype(np.float32)
    f4 = np.zeros(3, np.float32)
    assert not _compiled.accepts("pow", f4, [f4, f4])
    assert _compiled.accepts("add", f4, [f4, f4])
    with engine.settings(**FORCED):
        for _ in range(2):  # planned, then replayed
            same_bits(ops.pow(base, exponent), np.power(base, exponent))
    assert calls == []


@pytest.mark.parametrize(
    ("report", "vectorised"),
    [
        ({"power": {"fff": {"current": "X86_V4", "available": "X86_V4 baseline(X86_V2)"}}}, True),
        ({"power": {"fff": {"current": "baseline(X86_V2)", "available": "..."}}}, False),
        ({}, False),  # no dispatched loop reported for float32 power
        (AttributeError, False),  # a NumPy without the report
    ],
)
def test_numpy_power_vectorised_reads_numpys_report_of_its_loops(
    monkeypatch: pytest.MonkeyPatch, report: Any, vectorised: bool
) -> None:
    from numpy.lib import introspect

    def opt_func_info(func_name: str, signature: str) -> Any:
        assert (func_name, signature) == ("^power$", "^float32$")
        if report is AttributeError:
            raise AttributeError("no opt_func_info")
        return report

    monkeypatch.setattr(introspect, "opt_func_info", opt_func_info)
    _operations.numpy_power_vectorised.cache_clear()
    try:
        assert _operations.numpy_power_vectorised() is vectorised
    finally:
        _operations.numpy_power_vectorised.cache_clear()


def test_a_kernel_numba_cannot_compile_warns_once_and_numpy_computes(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool]]
) -> None:
    from numba.core.errors import TypingError

    from bcast.engine import numba_kernels as _numba_kernels

    def refuse(signature: Any) -> Any:
        raise TypingError("no implementation\nmore lines")

    monkeypatch.setattr(_numba_kernels.walk, "compile", refuse)
    monkeypatch.setattr(_numba_kernels, "_entries", {})
    monkeypatch.setattr(_compiled, "_kernels", Resolver(_compiled._compile, name="test"))
    a, b = np.arange(6000, dtype=np.int16).reshape(60, 100), np.arange(100, dtype=np.int16)
    with engine.settings(**FORCED):
        # int16's Sub runs on the kernel of uint16 (`operations.BY_WIDTH`): that one failed
        with pytest.warns(RuntimeWarning, match=r"could not compile sub for uint16.*NumPy"):
            same_bits(ops.sub(a, b), a - b)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once: the refusal is remembered
            same_bits(ops.sub(b, a), b - a)
    assert calls == [("sub", False), ("sub", False)]


def test_misaligned_arrays_stay_on_numpy(calls: list[tuple[str, bool]]) -> None:
    # float32 views one byte into a buffer: the walker's loads and stores assume natural
    # alignment, so such arrays are NumPy's to compute
    raw = np.zeros(4 * 6000 + 1, np.uint8)
    a = raw[1:].view(np.float32).reshape(60, 100)
    a[...] = np.arange(6000, dtype=np.float32).reshape(60, 100)
    out_raw = np.zeros(4 * 6000 + 1, np.uint8)
    out = out_raw[1:].view(np.float32).reshape(60, 100)
    assert not a.flags.aligned and not out.flags.aligned
    with engine.settings(**FORCED):
        same_bits(ops.add(a, a[0]), a + a[0])  # aligned out, misaligned operands
        ops.mul(a, a[:, :1], out=out)  # misaligned out
    same_bits(out, a * a[:, :1])
    assert [done for _, done in calls] == [False, False]


def test_the_walker_never_streams_where_it_cannot_align() -> None:
    # called directly, streaming asked for, into float32 elements one byte off alignment:
    # aligned vector streaming stores there would fault
    from bcast.engine import numba_kernels as _numba_kernels

    assert _compiled.available()
    out = np.zeros(4 * 4099 + 1, np.uint8)[1:].view(np.float32)
    x = np.arange(4099, dtype=np.float32)
    x.flags.writeable = False
    walk = _numba_kernels.walker("add", [out.dtype] * 4)
    layout = np.zeros((5, MAX_RANK), np.int64)  # the strides, then the shape, at the right
    layout[:4, -1] = 1
    layout[4] = 1
    layout[4, -1] = 4099
    addresses = [out.__array_interface__["data"][0]] + [x.ctypes.data] * 3
    where = np.array([*addresses, 0], np.int64)  # then one part's counter of rows claimed
    walk(where.ctypes.data, 1, *[out.dtype] * 4, layout.ctypes.data, 1, True, 0, 0, 0)
    same_bits(out, x + x)


def test_a_numba_that_cannot_load_the_kernels_turns_the_path_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # as numba does when it finds no folder to cache in: a RuntimeError at import
    import importlib.abc

    import bcast

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any, target: Any = None) -> None:
            if name == "bcast.engine.numba_kernels":
                raise RuntimeError("cannot cache function 'walk': no locator available")

    monkeypatch.delitem(sys.modules, "bcast.engine.numba_kernels", raising=False)
    monkeypatch.delattr(bcast.engine, "numba_kernels", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Refuse(), *sys.meta_path])
    monkeypatch.setattr(_compiled, "_state", {})
    with pytest.warns(RuntimeWarning, match=r"compiled path is off.*no locator"):
        assert not _compiled.available()
    a, b = np.arange(6000.0).reshape(60, 100), np.arange(100.0)
    with engine.settings(**FORCED):
        same_bits(ops.add(a, b), a + b)


def test_float16_reaches_the_compiled_path_sooner(calls: list[tuple[str, bool]]) -> None:
    # NumPy's float16 ufuncs cost 8x float32's per element (`numpy_path.HALF_COST`): a
    # (32,32)+(32,) add is compiled work in float16 and one ufunc call in float32.
    a = np.linspace(-4, 4, 1024).reshape(32, 32)
    b = np.linspace(1, 2, 32)
    with engine.settings(compiled_wait=True):
        for dtype in ("float32", "float16"):
            x, y = a.astype(dtype), b.astype(dtype)
            same_bits(ops.add(x, y), x + y)
            same_bits(ops.less(x, y), x < y)
            tiny = x[:1, :4], y[:1]  # 4 elements: NumPy's ufunc either way
            same_bits(ops.mul(*tiny), tiny[0] * tiny[1])
    assert calls == [("add", True), ("less", True)]
