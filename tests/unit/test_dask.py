"""Dask arrays: every mode and operator, lazily, on Dask's threaded scheduler.

Expected values are NumPy expressions written here, on NumPy copies of the inputs (with the
alignment of each mode written out by hand), never bcast's output. The distributed
scheduler is tested in ``test_dask_distributed.py``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bcast
from bcast import BroadcastError, ops


@pytest.fixture(autouse=True)
def threaded_scheduler() -> Iterator[None]:
    with dask.config.set(scheduler="threads"):
        yield


class CountingScheduler:
    """A Dask scheduler that counts the graphs it is asked to run (then runs them in order)."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, dsk: Any, keys: Any, **kwargs: Any) -> Any:
        self.runs += 1
        return dask.get(dsk, keys, **kwargs)


def lazy(x: np.ndarray, chunks: Any = 2) -> Any:
    return da.from_array(x, chunks=chunks)


def rng_floats(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def placements(*arrays: np.ndarray) -> list[tuple[Any, ...]]:
    """Every operand as Dask; only the first as Dask; only the last as Dask."""
    return [
        tuple(lazy(x) for x in arrays),
        (lazy(arrays[0]), *arrays[1:]),
        (*arrays[:-1], lazy(arrays[-1])),
    ]


def check(got: Any, expected: np.ndarray) -> None:
    assert isinstance(got, da.Array)
    assert tuple(got.shape) == expected.shape
    assert got.dtype == expected.dtype
    value = got.compute()
    assert value.dtype == expected.dtype
    np.testing.assert_array_equal(value, expected)


# -- import -------------------------------------------------------------------------------


def test_import_bcast_does_not_import_dask() -> None:
    code = "import sys, bcast, bcast.ops; print(sorted(m for m in sys.modules if 'dask' in m))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# -- views: broadcast_to and broadcast_arrays in every mode -----------------------------------

VIEW_CASES = [
    # x shape, target, kwargs, x reshaped by hand to the output's rank, output shape
    pytest.param((3,), (2, 3), {}, (1, 3), (2, 3), id="numpy"),
    pytest.param((3,), (4, 2, 3), {"mode": "unidirectional"}, (1, 1, 3), (4, 2, 3), id="uni"),
    pytest.param((3, 1), (2, 1, 6), {"mode": "bidirectional"}, (1, 3, 1), (2, 3, 6), id="bidi"),
    pytest.param((3, 1), (2, 3, 4), {"mode": "pdpd", "axis": 1}, (1, 3, 1), (2, 3, 4), id="pdpd"),
    pytest.param((4,), (2, 3, 4), {"mode": "pdpd"}, (1, 1, 4), (2, 3, 4), id="pdpd-default"),
    pytest.param(
        (6,),
        (1, 6, 5, 5),
        {"mode": "explicit", "axes_mapping": [1]},
        (1, 6, 1, 1),
        (1, 6, 5, 5),
        id="explicit",
    ),
    pytest.param(
        (3, 4),
        (3, 2, 4),
        {"mode": "explicit", "axes_mapping": [0, 2]},
        (3, 1, 4),
        (3, 2, 4),
        id="explicit-2",
    ),
    pytest.param((2, 3), (2, 3), {"mode": "none"}, (2, 3), (2, 3), id="none"),
    pytest.param((1,), (0, 3), {}, (1, 1), (0, 3), id="zero"),
]


@pytest.mark.parametrize(("shape", "target", "kwargs", "aligned", "out"), VIEW_CASES)
def test_broadcast_to_matches_numpy_in_every_mode(
    shape: tuple[int, ...],
    target: tuple[int, ...],
    kwargs: dict[str, Any],
    aligned: tuple[int, ...],
    out: tuple[int, ...],
) -> None:
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    view = bcast.broadcast_to(lazy(x), target, **kwargs)
    check(view, np.broadcast_to(x.reshape(aligned), out))


def test_broadcast_to_blocks_are_read_only_views() -> None:
    x = lazy(np.arange(4.0))
    view = bcast.broadcast_to(x, (3, 4))
    block = dask.get(dict(view.__dask_graph__()), (view.name, 0, 0))  # a block, as produced
    assert block.strides[0] == 0
    assert not block.flags.writeable


def test_broadcast_to_reports_incompatible_shapes_eagerly() -> None:
    counter = CountingScheduler()
    with dask.config.set(scheduler=counter):
        with pytest.raises(BroadcastError) as excinfo:
            bcast.broadcast_to(lazy(np.ones((2, 3))), (2, 4))
        assert excinfo.value.axis == 1
        with pytest.raises(BroadcastError, match="strictly increasing"):
            bcast.broadcast_to(
                lazy(np.ones((3, 4))), (3, 4, 5), mode="explicit", axes_mapping=[1, 0]
            )
    assert counter.runs == 0


ARRAYS_CASES = [
    # shapes, kwargs, each shape reshaped by hand to the output's rank
    pytest.param([(2, 1), (3,), (4, 1, 1)], {}, [(1, 2, 1), (1, 1, 3), (4, 1, 1)], id="numpy"),
    pytest.param([(2, 3), (2, 3)], {"mode": "none"}, [(2, 3), (2, 3)], id="none"),
    pytest.param(
        [(2, 3, 4), (3, 1)], {"mode": "pdpd", "axis": 1}, [(2, 3, 4), (1, 3, 1)], id="pdpd"
    ),
    pytest.param([(2, 3, 4), (3, 1)], {"mode": "unidirectional"}, [(2, 3, 4), (1, 3, 1)], id="uni"),
    pytest.param([(5, 1), (1, 4)], {"mode": "bidirectional"}, [(5, 1), (1, 4)], id="bidi"),
]


@pytest.mark.parametrize(("shapes", "kwargs", "aligned"), ARRAYS_CASES)
@pytest.mark.parametrize("which", ["all", "first", "last"])
def test_broadcast_arrays_matches_numpy_in_every_mode(
    shapes: list[tuple[int, ...]],
    kwargs: dict[str, Any],
    aligned: list[tuple[int, ...]],
    which: str,
) -> None:
    arrays = [rng_floats(s, seed=k) for k, s in enumerate(shapes)]
    inputs: list[Any] = list(arrays)
    for k in range(len(inputs)):
        if which == "all" or (which == "first" and k == 0) or (which == "last" and k > 0):
            inputs[k] = lazy(arrays[k])
    views = bcast.broadcast_arrays(*inputs, **kwargs)
    expected = np.broadcast_arrays(*(x.reshape(a) for x, a in zip(arrays, aligned, strict=True)))
    assert len(views) == len(expected)
    for view, want in zip(views, expected, strict=True):
        check(view, want)
    assert len({v.chunks for v in views}) == 1  # one chunk structure for all


def test_broadcast_arrays_of_other_libraries_with_dask_is_a_type_error() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        bcast.broadcast_arrays(lazy(np.ones(3)), torch.ones(3))


# -- operators ------------------------------------------------------------------------------

A = rng_floats((4, 1, 3), seed=1)
B = rng_floats((5, 3), seed=2)
C = rng_floats((1, 5, 1), seed=3)
A_NAN = A.copy()
A_NAN[0, 0, 1] = np.nan
K = np.array([[-7], [7], [-9], [9]], np.int32)
J = np.array([2, -2, 4], np.int32)
P = np.array([[1.0], [2.0]], np.float32)
Q = np.array([[-1], [2]], np.int32)
MASK = np.array([[True], [False], [True], [True]])
L1 = np.array([[True], [False]])
L2 = np.array([True, False, True])


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.trunc(a.astype(np.float64) / b).astype(a.dtype)


OPERATOR_CASES: list[Any] = [
    pytest.param(ops.add, (A, B), lambda a, b: a + b, id="add"),
    pytest.param(ops.sub, (A, B), lambda a, b: a - b, id="sub"),
    pytest.param(ops.mul, (A, B), lambda a, b: a * b, id="mul"),
    pytest.param(ops.div, (A, B), lambda a, b: a / b, id="div-float"),
    pytest.param(ops.div, (K, J), _trunc_div, id="div-int-truncates"),
    pytest.param(ops.pow, (np.abs(A), B), lambda a, b: np.abs(a) ** b, id="pow-float"),
    pytest.param(
        ops.pow,
        (J[None, :].repeat(2, 0), P),
        lambda a, b: np.trunc(a.astype(np.float64) ** b.astype(np.float64)).astype(a.dtype),
        id="pow-int-float",
    ),
    pytest.param(
        ops.pow, (J, Q), lambda a, b: np.array([[0, 0, 0], [4, 4, 16]], a.dtype), id="pow-int"
    ),
    pytest.param(ops.equal, (K, J), lambda a, b: a == b, id="equal"),
    pytest.param(ops.greater, (A, B), lambda a, b: a > b, id="greater"),
    pytest.param(ops.less, (A, B), lambda a, b: a < b, id="less"),
    pytest.param(ops.and_, (L1, L2), np.logical_and, id="and"),
    pytest.param(ops.or_, (L1, L2), np.logical_or, id="or"),
    pytest.param(ops.xor, (L1, L2), np.logical_xor, id="xor"),
    pytest.param(ops.max, (A_NAN, B, C), lambda a, b, c: np.maximum(np.maximum(a, b), c), id="max"),
    pytest.param(ops.min, (A_NAN, B, C), lambda a, b, c: np.minimum(np.minimum(a, b), c), id="min"),
    pytest.param(ops.sum, (A, B, C), lambda a, b, c: a + b + c, id="sum"),
    pytest.param(ops.mean, (A, B, C), lambda a, b, c: (a + b + c) / 3, id="mean"),
    pytest.param(ops.max, (B,), lambda b: b, id="max-one"),
    pytest.param(ops.where, (MASK, B[:1], A[:, 0]), lambda m, x, y: np.where(m, x, y), id="where"),
    pytest.param(
        ops.prelu,
        (B, np.array([0.5, 0.1, 2.0])),
        lambda x, s: np.where(x < 0, x * s, x),
        id="prelu",
    ),
    pytest.param(
        ops.gemm,
        (rng_floats((4, 3)), rng_floats((3, 5)), rng_floats((5,))),
        lambda a, b, c: a @ b + c,
        id="gemm",
    ),
]


@pytest.mark.parametrize(("op", "arrays", "expected"), OPERATOR_CASES)
@pytest.mark.parametrize("which", [0, 1, 2], ids=["all-dask", "first-dask", "last-dask"])
def test_operators_match_numpy(
    op: Callable[..., Any], arrays: tuple[np.ndarray, ...], expected: Callable[..., Any], which: int
) -> None:
    inputs = placements(*arrays)[which]
    want = np.asarray(expected(*arrays))
    got = op(*inputs)
    assert isinstance(got, da.Array)
    assert tuple(got.shape) == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.compute(), want, rtol=1e-12, atol=0)


BINARY_MODES = [
    pytest.param((2, 3), (2, 3), {"broadcast": "none"}, (2, 3), id="none"),
    pytest.param((2, 3, 4), (3, 1), {"broadcast": "pdpd", "axis": 1}, (1, 3, 1), id="pdpd-axis"),
    pytest.param((2, 3, 4), (3, 4), {"broadcast": "pdpd"}, (1, 3, 4), id="pdpd-default"),
    pytest.param(
        (2, 3, 4), (4, 1), {"broadcast": "pdpd", "axis": 2}, (1, 1, 4), id="pdpd-trailing-one"
    ),
    pytest.param((2, 3, 4), (3, 1), {}, (1, 3, 1), id="numpy"),
]


@pytest.mark.parametrize(("sa", "sb", "kwargs", "b_aligned"), BINARY_MODES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "greater", "less", "equal"])
def test_binary_operators_match_numpy_in_every_broadcast_mode(
    sa: tuple[int, ...],
    sb: tuple[int, ...],
    kwargs: dict[str, Any],
    b_aligned: tuple[int, ...],
    op: str,
) -> None:
    a = rng_floats(sa, seed=4)
    b = rng_floats(sb, seed=5)
    numpy_op = {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "div": np.divide,
        "greater": np.greater,
        "less": np.less,
        "equal": np.equal,
    }[op]
    want = numpy_op(a, b.reshape(b_aligned))
    for left, right in placements(a, b):
        check(getattr(ops, op)(left, right, **kwargs), want)


def test_binary_modes_raise_eagerly_on_definite_mismatch() -> None:
    counter = CountingScheduler()
    with dask.config.set(scheduler=counter):
        with pytest.raises(BroadcastError):
            ops.add(lazy(np.ones((2, 3))), lazy(np.ones((3, 2))), broadcast="none")
        with pytest.raises(BroadcastError) as excinfo:
            ops.add(lazy(np.ones((2, 3, 4))), np.ones((2, 1)), broadcast="pdpd", axis=1)
        assert excinfo.value.axis == 1
        with pytest.raises(TypeError):
            ops.add(lazy(np.ones(3, np.int32)), lazy(np.ones(3, np.float32)))
    assert counter.runs == 0


EXPAND_CASES = [
    pytest.param((3,), (2, 1), (1, 3), (2, 3), id="grows"),
    pytest.param((3, 1), (4,), (3, 1), (3, 4), id="bidirectional"),
]


@pytest.mark.parametrize(("shape", "target", "aligned", "out"), EXPAND_CASES)
def test_expand_matches_numpy(
    shape: tuple[int, ...], target: tuple[int, ...], aligned: tuple[int, ...], out: tuple[int, ...]
) -> None:
    x = np.arange(np.prod(shape), dtype=np.int16).reshape(shape)
    got = ops.expand(lazy(x), target)
    check(got, np.broadcast_to(x.reshape(aligned), out).copy())
    assert got.compute().flags.writeable  # materialised, not a view


BROADCAST_OP_CASES = [
    pytest.param((3,), (2, 3), (), {}, (1, 3), (2, 3), id="numpy"),
    pytest.param(
        (2,), (2, 2, 3), ([1],), {"mode": "explicit"}, (1, 2, 1), (2, 2, 3), id="explicit"
    ),
    pytest.param((3, 1), (2, 1, 4), (), {"mode": "bidirectional"}, (1, 3, 1), (2, 3, 4), id="bidi"),
    pytest.param(
        (3, 1), (2, 3, 4), (), {"mode": "pdpd", "axis": 1}, (1, 3, 1), (2, 3, 4), id="pdpd"
    ),
]


@pytest.mark.parametrize(
    ("shape", "target", "args", "kwargs", "aligned", "out"), BROADCAST_OP_CASES
)
def test_broadcast_operator_matches_numpy_in_every_mode(
    shape: tuple[int, ...],
    target: tuple[int, ...],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    aligned: tuple[int, ...],
    out: tuple[int, ...],
) -> None:
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    got = ops.broadcast(lazy(x), target, *args, **kwargs)
    check(got, np.broadcast_to(x.reshape(aligned), out).copy())


def test_gemm_transposes_and_scales_like_numpy() -> None:
    a = rng_floats((3, 4), seed=6)
    b = rng_floats((5, 3), seed=7)
    c = rng_floats((4, 1), seed=8)
    got = ops.gemm(lazy(a), lazy(b), lazy(c), alpha=0.5, beta=2.0, trans_a=True, trans_b=True)
    assert isinstance(got, da.Array)
    np.testing.assert_allclose(got.compute(), 0.5 * (a.T @ b.T) + 2.0 * c, rtol=1e-12)


def test_float16_gemm_rounds_once_as_on_numpy() -> None:
    # array_api_compat's dask namespace has no float16, its arrays may: computed in float32
    # and rounded once, as NumPy arrays (and onnxruntime, differential/test_ops_onnxruntime)
    rng = np.random.default_rng(9)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = (rng.standard_normal((32, 16)) * 0.2).astype(np.float16)
    c = rng.standard_normal(16).astype(np.float16)
    got = ops.gemm(lazy(a), lazy(b), lazy(c), alpha=0.5, beta=2.0)
    want = 0.5 * (a.astype(np.float32) @ b.astype(np.float32)) + 2.0 * c.astype(np.float32)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.compute(), want.astype(np.float16))


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_float16_sum_and_mean_round_once_as_on_numpy(op: str) -> None:
    rng = np.random.default_rng(10)
    xs = [(rng.standard_normal((16, 16)) * s).astype(np.float16) for s in (1.0, 100.0, 0.01)]
    wide = sum(x.astype(np.float32) for x in xs)
    want = (wide / np.float32(3) if op == "mean" else wide).astype(np.float16)
    got = getattr(ops, op)(*(lazy(x, 4) for x in xs))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.compute(), want)
    np.testing.assert_array_equal(getattr(ops, op)(*xs), want)


def test_integer_division_by_zero_raises_when_computed() -> None:
    got = ops.div(lazy(np.array([1, 2, 3], np.int64)), lazy(np.array([1, 0, 1], np.int64)))
    with pytest.raises(ZeroDivisionError):
        got.compute()


def test_out_receives_the_result_lazily() -> None:
    out = da.zeros((4, 3), chunks=2)
    got = ops.add(lazy(np.ones((4, 1))), np.arange(3.0), out=out)
    assert got is out
    np.testing.assert_array_equal(out.compute(), np.ones((4, 1)) + np.arange(3.0))
    with pytest.raises(ValueError, match="shape"):
        ops.add(lazy(np.ones((4, 1))), np.arange(3.0), out=da.zeros((4, 4)))
    with pytest.raises(TypeError, match="dtype"):
        ops.add(lazy(np.ones((4, 1))), np.arange(3.0), out=da.zeros((4, 3), dtype=np.float32))


# -- laziness ---------------------------------------------------------------------------------


def test_nothing_is_computed_before_compute() -> None:
    made: list[int] = []

    @dask.delayed
    def make() -> np.ndarray:
        made.append(1)
        return np.arange(8.0).reshape(2, 4)

    x = da.from_delayed(make(), shape=(2, 4), dtype=np.float64)
    counter = CountingScheduler()
    with dask.config.set(scheduler=counter):
        results = [
            bcast.broadcast_to(x, (10**6, 2, 4)),
            *bcast.broadcast_arrays(x, np.ones((10**5, 1, 1))),
            ops.add(x, np.ones(4)),
            ops.div(x, lazy(np.ones((3, 1, 1)))),
            ops.max(x, x, np.zeros(4)),
            ops.where(np.array([True, False, True, False]), x, 0.0 * np.ones((2, 1))),
            ops.prelu(x, np.array([0.1])),
            ops.gemm(x, np.ones((4, 3))),
            ops.expand(x, (5, 1, 1)),
            ops.broadcast(x, (3, 2, 4)),
        ]
        assert all(isinstance(r, da.Array) for r in results)
        assert made == []
        assert counter.runs == 0
        ops.add(x, np.ones(4)).compute()
    assert counter.runs == 1
    assert made == [1]


def test_a_huge_lazy_result_needs_no_memory_until_computed() -> None:
    # 8 * 10**12 bytes: only a graph; the memory guard does not apply to lazy results.
    big = ops.add(da.ones((10**6, 1), chunks=(10**5, 1)), da.ones(10**6, chunks=10**5))
    assert big.shape == (10**6, 10**6)
    assert big.numblocks == (10, 10)


# -- chunk structure --------------------------------------------------------------------------


def test_output_chunks_follow_the_largest_operand_and_the_row_is_one_block() -> None:
    made: list[int] = []

    @dask.delayed
    def make_row() -> np.ndarray:
        made.append(1)
        return np.arange(10.0)

    row = da.from_delayed(make_row(), shape=(10,), dtype=np.float64)  # one block
    big = da.from_array(rng_floats((8, 6, 10)), chunks=(2, 3, 10))
    got = ops.add(row, big)
    assert got.chunks == big.chunks
    # One task per output block, one per block of `big`, and the row's three (make, wrap,
    # insert axes): the row is neither tiled per output block nor rechunked to the target.
    graph = dict(got.__dask_graph__())
    assert len(graph) == big.npartitions + got.npartitions + 3
    np.testing.assert_array_equal(got.compute(), big.compute() + np.arange(10.0))
    assert made == [1]  # the row's block was made once and reused by every output block


def test_small_operand_is_rechunked_only_along_its_own_axes() -> None:
    big = da.from_array(rng_floats((4, 12)), chunks=(2, 4))
    row = da.from_array(rng_floats((1, 12), seed=3), chunks=(1, 6))
    got = ops.mul(big, row)
    assert got.chunks == ((2, 2), (4, 4, 4))
    np.testing.assert_array_equal(got.compute(), big.compute() * row.compute())


@st.composite
def chunked_operands(draw: st.DrawFn) -> tuple[list[np.ndarray], list[Any]]:
    """Mutually broadcastable arrays, each NumPy or Dask with random chunks per axis."""
    count = draw(st.integers(1, 3))
    shapes = draw(
        hnp.mutually_broadcastable_shapes(num_shapes=count, max_dims=3, min_side=0, max_side=5)
    )
    arrays, inputs = [], []
    for k, shape in enumerate(shapes.input_shapes):
        x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) * (k + 1)
        arrays.append(x)
        if k == 0 or draw(st.booleans()):  # at least one Dask operand
            chunks = tuple(draw(st.integers(1, max(d, 1))) for d in shape)
            inputs.append(da.from_array(x, chunks=chunks))
        else:
            inputs.append(x)
    return arrays, inputs


@settings(max_examples=60, deadline=None)
@given(chunked_operands())
def test_any_chunking_gives_numpys_values_and_the_largest_operands_chunks(
    case: tuple[list[np.ndarray], list[Any]],
) -> None:
    arrays, inputs = case
    got = ops.sum(*inputs)
    want = arrays[0].copy()
    for x in arrays[1:]:
        want = want + x
    np.testing.assert_array_equal(got.compute(), want)
    # When one Dask operand is strictly the largest and spans the whole output, the output
    # has exactly its chunks.
    sizes = [x.size for x in arrays]
    big = int(np.argmax(sizes))
    unique = sizes.count(sizes[big]) == 1
    if unique and isinstance(inputs[big], da.Array) and arrays[big].shape == want.shape:
        assert got.chunks == inputs[big].chunks


def test_chunks_follow_a_large_numpy_operand() -> None:
    big = rng_floats((6, 8))
    small = lazy(rng_floats((8,), seed=1), chunks=4)
    got = ops.sub(big, small)
    assert got.chunks == ((6,), (8,))  # a NumPy operand within a chunk's size is one block
    np.testing.assert_array_equal(got.compute(), big - small.compute())


def test_each_axis_takes_the_chunks_of_an_operand_that_spans_it() -> None:
    col = da.from_array(rng_floats((6, 1)), chunks=(2, 1))
    row = da.from_array(rng_floats((1, 9), seed=1), chunks=(1, 3))
    got = ops.add(col, row)
    assert got.chunks == ((2, 2, 2), (3, 3, 3))
    np.testing.assert_array_equal(got.compute(), col.compute() + row.compute())


def test_new_axes_get_chunks_of_the_configured_chunk_size() -> None:
    x = da.arange(1000.0, chunks=500)
    with dask.config.set({"array.chunk-size": "1MiB"}):
        view = bcast.broadcast_to(x, (4000, 1000))
        copy = ops.expand(x, (4000, 1))
    for got in (view, copy):
        assert got.chunks[1] == (500, 500)  # x's own chunks
        assert len(got.chunks[0]) > 1  # the new axis is split...
        assert max(got.chunks[0]) * 500 * 8 <= 2**20  # ...into blocks of at most 1 MiB
    np.testing.assert_array_equal(
        view[-3:].compute(), np.broadcast_to(np.arange(1000.0), (3, 1000))
    )


# -- unknown dims (NaN chunks) ------------------------------------------------------------------


def unknown(values: np.ndarray, keep: np.ndarray) -> Any:
    """A Dask array whose first axis has unknown length: ``values[keep]`` with NaN chunks."""
    x = da.from_array(values, chunks=(len(values), *values.shape[1:]))
    picked = x[da.from_array(keep, chunks=len(keep))]
    assert np.isnan(picked.shape[0])
    return picked


def test_unknown_dims_plan_as_question_marks() -> None:
    y = unknown(np.arange(6.0), np.array([1, 0, 1, 1, 0, 1], bool))
    assert bcast.arrays.library_of(y).dims(y) == (None,)
    got = ops.add(y[:, None], np.arange(3.0))
    assert np.isnan(got.shape[0]) and got.shape[1] == 3
    np.testing.assert_array_equal(got.compute(), np.array([0.0, 2, 3, 5])[:, None] + np.arange(3.0))
    a, b = bcast.broadcast_arrays(y[:, None], np.ones((1, 4)))
    assert np.isnan(a.shape[0]) and np.isnan(b.shape[0])
    np.testing.assert_array_equal(b.compute(), np.ones((4, 4)))


def test_unknown_dim_against_a_known_one_takes_it_and_is_checked_when_computed() -> None:
    five = unknown(np.arange(7.0), np.array([1, 1, 0, 1, 1, 0, 1], bool))
    got = ops.add(five, np.ones(5))
    assert got.shape == (5,)
    np.testing.assert_array_equal(got.compute(), np.array([0.0, 1, 3, 4, 6]) + 1)
    one = unknown(np.arange(3.0), np.array([0, 1, 0], bool))
    np.testing.assert_array_equal(bcast.broadcast_to(one, (2, 5)).compute(), np.ones((2, 5)))
    three = unknown(np.arange(3.0), np.ones(3, bool))
    with pytest.raises(BroadcastError, match="unknown length"):
        ops.add(three, np.ones(5)).compute()
    with pytest.raises(BroadcastError, match="unknown length"):
        ops.add(one, np.ones(5), broadcast="none").compute()  # none: 1 is not 5


def test_unknown_dims_keep_one_directional_modes_one_directional() -> None:
    one = unknown(np.arange(3.0), np.array([0, 1, 0], bool))
    four = unknown(np.arange(4.0), np.ones(4, bool))
    with pytest.raises(BroadcastError, match="unknown length"):
        ops.prelu(one, four).compute()  # the slope may not grow x
    with pytest.raises(BroadcastError, match="unknown length"):
        ops.add(one, four, broadcast="none").compute()
    np.testing.assert_array_equal(ops.add(one, four).compute(), 1.0 + np.arange(4.0))


def test_definite_incompatibility_with_unknown_dims_raises_before_computing() -> None:
    y = unknown(np.ones((6, 3)), np.array([1, 0, 1, 1, 0, 1], bool))  # [?,3]
    counter = CountingScheduler()
    with dask.config.set(scheduler=counter):
        with pytest.raises(BroadcastError) as excinfo:
            ops.add(y, np.ones(4))
        assert excinfo.value.axis == 1
        with pytest.raises(BroadcastError, match="rank"):
            ops.add(y[:, 0], np.ones((2, 2)), broadcast="pdpd")
        with pytest.raises(BroadcastError, match="strictly increasing"):
            ops.broadcast(y, (6, 3, 2), [1, 0], mode="explicit")
        with pytest.raises(BroadcastError):
            bcast.broadcast_to(y, (5, 4))
    assert counter.runs == 0


def test_unknown_length_split_in_several_chunks_cannot_meet_a_known_axis() -> None:
    x = da.from_array(np.arange(6.0), chunks=3)
    y = x[x > 1]  # [?] in two NaN chunks
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        ops.add(y, np.ones(4))
    np.testing.assert_array_equal(ops.add(y, np.ones(1)).compute(), np.arange(2.0, 6.0) + 1)


def test_views_with_unknown_dims_keep_pdpd_one_directional() -> None:
    one = unknown(np.arange(3.0), np.array([0, 1, 0], bool))  # [?], 1 when computed
    four = unknown(np.arange(4.0), np.ones(4, bool))  # [?], 4 when computed
    a, b = bcast.broadcast_arrays(four, one, mode="pdpd")
    np.testing.assert_array_equal(a.compute(), np.arange(4.0))
    np.testing.assert_array_equal(b.compute(), np.ones(4))
    a, b = bcast.broadcast_arrays(one, four, mode="pdpd")  # B may not grow A
    for view in (a, b):
        with pytest.raises(BroadcastError, match="unknown length"):
            view.compute()
