"""The engine's large-work paths against NumPy itself, on shapes and layouts hypothesis draws.

Every split path is forced onto small arrays: the compiled walkers (three threads claiming
one row or a few at a time, tiles within random budgets, streaming stores on or off, layouts
replayed from the walk cache) and NumPy's blocks. Each result must be NumPy's, bit for bit,
whichever path computed it; outputs start as NaN so that a row nobody wrote shows.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from bcast import engine, ops
from bcast.engine import compiled as _compiled
from entries import entries

OPERATIONS: dict[str, Any] = {
    "add": (ops.add, np.add),
    "sub": (ops.sub, np.subtract),
    "mul": (ops.mul, np.multiply),
}
DTYPES = ["float32", "float64", "int32", "float16"]


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "int32":
        return rng.integers(-1000, 1000, shape, dtype=np.int32)
    return rng.standard_normal(shape).astype(dtype)


def _out(shape: tuple[int, ...], dtype: str, layout: str) -> np.ndarray:
    """An output of ``shape`` in memory order C, F (transposed) or every second element.

    It starts as a value no computation here gives (NaN; int32's minimum), so that an
    element nobody wrote shows.
    """
    unset = np.iinfo(np.int32).min if dtype == "int32" else np.nan
    if layout == "F" and shape:
        return np.full(shape[::-1], unset, dtype).T
    if layout == "strided" and shape:
        return np.full((*shape[:-1], 2 * shape[-1]), unset, dtype)[..., ::2]
    return np.full(shape, unset, dtype)


def _forced(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "threads": 3,
        "parallel_min": 1,
        "compiled_min": 0,
        "compiled_thread_work": 1,
        "blocks_per_thread": draw(st.integers(1, 4)),
        "block_bytes": draw(st.sampled_from([16, 256, 1 << 20])),
        "compiled_tile_bytes": draw(st.sampled_from([0, 512, 4096, 1 << 18])),
        "max_tile_bytes": draw(st.sampled_from([0, 4096, 1 << 22])),
        "stream_min_bytes": draw(st.sampled_from([0, 1 << 40])),
        "compiled": draw(st.sampled_from([True, True, True, False])),
        "compiled_wait": True,  # the kernel ready on the first call, not later
    }


@st.composite
def operand_shapes(draw: st.DrawFn, result: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``result``: leading axes dropped, some axes stretched."""
    rank = draw(st.integers(0, len(result)))
    kept = result[len(result) - rank :]
    return tuple(n if draw(st.booleans()) else 1 for n in kept)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    # Outputs of 2 to 5 axes of up to 16: most operand pairs are past the binary operators'
    # tiny path (sizes multiplying to at most 4096), which calls NumPy's ufunc directly.
    result = tuple(draw(st.lists(st.integers(1, 16), min_size=2, max_size=5)))
    shapes = [draw(operand_shapes(result)) for _ in range(3)]
    shapes[draw(st.integers(0, 2))] = result  # one operand of the result's own shape
    return {
        "shapes": shapes,
        "result": result,
        "dtype": draw(st.sampled_from(DTYPES)),
        "op": draw(st.sampled_from(sorted(OPERATIONS))),
        "layout": draw(st.sampled_from(["C", "F", "strided"])),
        "chunk_bytes": draw(st.sampled_from([1, 100, 1 << 16])),
        "settings": _forced(draw),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "short": draw(st.integers(0, 2)),  # Where's operand of fewer axes (cond, x or y)
        "entry": draw(st.integers(0, 3)) == 0,  # a compiled entry (`entries`): a quarter
    }


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


@given(cases())
def test_binary_operators_match_numpy_on_every_path(case: dict[str, Any]) -> None:
    note(repr(case))
    pytest.importorskip("numba")
    rng = np.random.default_rng(case["seed"])
    a, b, _ = (_values(rng, s, case["dtype"]) for s in case["shapes"])
    ours, theirs = OPERATIONS[case["op"]]
    out = _out(np.broadcast_shapes(a.shape, b.shape), case["dtype"], case["layout"])
    with (
        mock.patch.object(_compiled, "CHUNK_BYTES", case["chunk_bytes"]),
        entries(case["entry"]),
        engine.settings(**case["settings"]),
    ):
        got = ours(a, b, out=out)
        fresh = ours(a, b)
        again = ours(a, b)  # the same layout: replayed from the walk cache
    want = theirs(a, b)
    assert got is out
    _same_bits(out, want)
    _same_bits(fresh, want)
    _same_bits(again, want)


@given(cases())
def test_where_and_expand_match_numpy_on_every_path(case: dict[str, Any]) -> None:
    note(repr(case))
    pytest.importorskip("numba")
    rng = np.random.default_rng(case["seed"])
    cond_shape, x_shape, y_shape = case["shapes"]
    # One operand of fewer axes at a time, the others of the result's: each itemsize and
    # rank of each array is an entry of its own to compile (`bcast.engine.numba_entry`,
    # about 2.4 s each on the 2-core Xeon): all of them crossed made this test 141 s of
    # compiling on a machine's first run.
    short = case["short"]
    condition = rng.random(cond_shape if short == 0 else case["result"]) < 0.5
    x_shape = x_shape if short == 1 else case["result"]
    y_shape = y_shape if short == 2 else case["result"]
    x, y = _values(rng, x_shape, case["dtype"]), _values(rng, y_shape, case["dtype"])
    out = _out(case["result"], case["dtype"], case["layout"])
    expanded = _out(case["result"], case["dtype"], case["layout"])
    with (
        mock.patch.object(_compiled, "CHUNK_BYTES", case["chunk_bytes"]),
        entries(case["entry"]),
        engine.settings(**case["settings"]),
    ):
        ops.where(condition, x, y, out=out)
        ops.expand(x, case["result"], out=expanded)
        fresh = ops.expand(y, case["result"])
    _same_bits(out, np.where(condition, x, y))
    _same_bits(expanded, np.broadcast_to(x, case["result"]))
    _same_bits(fresh, np.broadcast_to(y, case["result"]))
