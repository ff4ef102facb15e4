"""The execution engine: blocks and threads never change a result.

Every test compares the engine's split, threaded path (forced onto small arrays through
`bcast.engine.settings`) with its single-call, single-threaded path. No timings here.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from python_paths import python_ops

from bcast import engine, ops
from bcast.core.errors import BroadcastError
from bcast.engine import config
from bcast.engine import layout as _layout
from bcast.engine import parallel as _parallel

# Threads forced, work split into small (odd-sized) blocks, tiles allowed.
SPLIT = {
    "threads": 3,
    "parallel_min": 1,
    "compiled_min": 0,
    "compiled_thread_work": 1,
    "block_bytes": 24,
    "blocks_per_thread": 5,
}
SINGLE = {"threads": 1, "parallel_min": 1 << 62}


def both(call: Callable[[], Any]) -> tuple[Any, Any]:
    """Run ``call`` single-threaded in one call, then split on threads."""
    with engine.settings(**SINGLE):
        single = call()
    with engine.settings(**SPLIT):
        split = call()
    return single, split


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape
    assert a.dtype == b.dtype
    if a.dtype.hasobject:
        assert a.tolist() == b.tolist()
    else:
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


SHAPES = [
    ((5, 1, 7), (1, 3, 1)),
    ((64, 33), (33,)),
    ((256, 8, 4), (4,)),  # a short inner run: b is tiled
    ((6, 1, 12, 10), (1, 5, 1, 10)),  # midrank
    ((40, 1), (1, 50)),  # outer
    ((3, 0, 4), (1, 4)),  # empty
    ((), ()),
    ((1,), ()),
    ((2, 3, 1, 1, 7), (7,)),
]


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "greater"])
def test_binary_split_is_bit_identical(op: str, a_shape: Any, b_shape: Any) -> None:
    rng = _rng()
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    single, split = both(lambda: getattr(ops, op)(a, b))
    same_bits(single, split)
    np.testing.assert_array_equal(split, {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                                          "div": np.divide, "max": np.maximum,
                                          "greater": np.greater}[op](a, b))  # fmt: skip


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPES)
def test_pow_split_matches_within_rounding(a_shape: Any, b_shape: Any) -> None:
    rng = _rng()
    a = (rng.random(a_shape) * 1.5 + 0.5).astype(np.float32)
    b = (rng.random(b_shape) * 4 - 2).astype(np.float32)
    single, split = both(lambda: ops.pow(a, b))
    np.testing.assert_allclose(split, single, rtol=2 * np.finfo(np.float32).eps)
    assert split.dtype == single.dtype


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64, bool, np.float16,
              np.complex64, np.complex128, np.dtype("<U3"), object],
)  # fmt: skip
@pytest.mark.parametrize(
    "shapes",
    [((1, 9, 11), (4, 1, 11), (4, 9, 1)), ((30,), (5, 1), ()), ((0, 1), (3,), (1,))],
)
def test_where_split_is_bit_identical(dtype: Any, shapes: Any) -> None:
    rng = _rng()
    cond = rng.random(shapes[0]) < 0.5
    x = rng.integers(-50, 50, shapes[1]).astype(dtype)
    y = rng.integers(-50, 50, shapes[2]).astype(dtype)
    single, split = both(lambda: ops.where(cond, x, y))
    same_bits(single, split)
    same_bits(split, np.where(cond, x, y).astype(split.dtype))


def test_where_with_operands_to_convert() -> None:
    cond = _rng().random((40, 3)) < 0.5
    narrow, wide = np.array(["a", "b", "c"]), np.array([["xy"], ["zw"]] * 20)
    single, split = both(lambda: ops.where(cond, narrow, wide))
    same_bits(single, split)
    same_bits(split, np.where(cond, narrow, wide))
    swapped = np.arange(3, dtype=">f4")  # float32 like y, in the other byte order
    native = np.full((40, 1), 7.0, np.float32)
    single, split = both(lambda: ops.where(cond, swapped, native))
    same_bits(single, split)
    np.testing.assert_array_equal(split, np.where(cond, swapped, 7.0))


def test_where_keeps_nan_payloads_and_signed_zeros() -> None:
    bits = np.array([0x7FC00001, 0x80000000, 0xFF800000, 0x00000001], np.uint32)
    x = np.broadcast_to(bits.view(np.float32), (50, 4)).copy()
    y = np.full((50, 1), -0.0, np.float32)
    cond = _rng().random((50, 4)) < 0.5
    single, split = both(lambda: ops.where(cond, x, y))
    same_bits(single, split)
    expected = np.where(cond, x.view(np.uint32), y.view(np.uint32))
    np.testing.assert_array_equal(split.view(np.uint32), expected)


@pytest.mark.parametrize(
    ("x_shape", "target"),
    [((7,), (40, 3, 7)), ((5, 1), (2, 5, 9)), ((1,), (0, 4)), ((), (3, 2)), ((2, 1, 3), (2, 4, 3))],
)
def test_expand_and_broadcast_split_are_bit_identical(x_shape: Any, target: Any) -> None:
    x = _rng().standard_normal(x_shape)
    single, split = both(lambda: ops.expand(x, target))
    same_bits(single, split)
    same_bits(split, np.broadcast_to(x, np.broadcast_shapes(x_shape, target)).copy())
    single, split = both(lambda: ops.broadcast(x, split.shape))
    same_bits(single, split)


def test_variadic_prelu_and_integer_kernels_split() -> None:
    rng = _rng()
    a, b, c = (rng.standard_normal(s) for s in [(12, 1, 5), (1, 7, 5), (5,)])
    x = a * np.ones((12, 7, 5))
    n = rng.integers(-99, 99, (30, 4))
    m = rng.integers(1, 5, (30, 4)) * rng.choice([-1, 1], (30, 4))
    for call in (
        lambda: ops.mean(a, b, c),
        lambda: ops.min(a, b, c),
        lambda: ops.sum(a, b),
        lambda: ops.prelu(x, c),
        lambda: ops.div(n, np.array([3, -2, 5, -7])),
        lambda: ops.pow(m, np.array([3, -1, 0, 2])),
    ):
        single, split = both(call)
        same_bits(single, split)


@pytest.mark.parametrize("order", ["C", "F"])
def test_out_of_any_layout(order: str) -> None:
    rng = _rng()
    a = rng.standard_normal((20, 1, 9)).astype(np.float32)
    b = rng.standard_normal((1, 13, 9)).astype(np.float32)
    expected = a + b
    for out in (
        np.empty((20, 13, 9), np.float32, order=order),
        np.empty((40, 13, 18), np.float32, order=order)[::2, :, ::2],  # not contiguous
        np.empty((9, 13, 20), np.float32, order=order).transpose(2, 1, 0),
        np.empty((20, 13, 9), np.float32)[::-1],  # negative strides
    ):
        with engine.settings(**SPLIT):
            assert ops.add(a, b, out=out) is out
        same_bits(out, expected)


def test_out_overlapping_an_operand() -> None:
    base = np.arange(60.0).reshape(6, 10)
    b = np.arange(10.0)
    # the same elements: safe to split
    a = base.copy()
    with engine.settings(**SPLIT):
        ops.add(a, b, out=a)
    same_bits(a, base + b)
    # shifted: a block would read what another wrote; the engine must not let that show
    for shift in (1, -1):
        buf = np.arange(70.0).reshape(7, 10)
        x = buf[1:] if shift > 0 else buf[:-1]
        dst = buf[:-1] if shift > 0 else buf[1:]
        expected = x + b
        with engine.settings(**SPLIT):
            ops.add(x, b, out=dst)
        same_bits(dst, expected)
    # a broadcast row of out read by every block
    m = np.arange(30.0).reshape(5, 6)
    expected = m + m[0]
    with engine.settings(**SPLIT):
        ops.add(m, m[0], out=m)
    same_bits(m, expected)
    # where writes y first, then x: out aliasing x must still give Where
    cond = _rng().random((8, 9)) < 0.5
    xs, ys = np.arange(72.0).reshape(8, 9), -np.arange(9.0)
    expected = np.where(cond, xs, ys)
    with engine.settings(**SPLIT):
        ops.where(cond, xs, ys, out=xs)
    same_bits(xs, expected)


def test_huge_but_lazy_operands() -> None:
    lazy = np.broadcast_to(np.float32(2.0), (500, 400))  # 0 bytes of its own
    row = np.arange(400, dtype=np.float32)
    single, split = both(lambda: ops.add(lazy, row))
    same_bits(single, split)
    same_bits(split, lazy + row)
    single, split = both(lambda: ops.where(np.broadcast_to(True, (500, 1)), row, lazy))
    same_bits(single, split)


def test_where_mask_of_a_lazy_condition_stays_lazy() -> None:
    from bcast.ops import _kernels

    cond = np.broadcast_to(np.array([True, False, True]), (10**6, 3))
    x = np.zeros((1, 3), np.float32)
    y = np.ones((10**6, 1), np.float32)
    block, (mask, _, _) = _kernels.WHERE.prepare(np.dtype(np.float32), [cond, x, y])  # type: ignore[misc]
    assert mask.shape == cond.shape
    assert mask.base is not None and mask.base.size == 3  # three distinct elements, not 3e6
    out = np.empty((4, 3), np.float32)
    block(out, mask[:4], x, y[:4])
    np.testing.assert_array_equal(out, np.where(cond[:4], x, y[:4]))


def test_a_block_error_is_raised_and_out_is_untouched() -> None:
    a = np.arange(40).reshape(10, 4)
    b = np.array([1, 2, 0, 4])
    out = np.full((10, 4), 77)
    with engine.settings(**SPLIT), pytest.raises(ZeroDivisionError):
        ops.div(a, b, out=out)
    assert (out == 77).all()
    with engine.settings(**SPLIT), pytest.raises(ZeroDivisionError):
        ops.pow(np.zeros((10, 4), np.int64), np.array([1, -1, 2, 3]))


def test_settings_restore_and_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    before = engine.get_settings()
    with engine.settings(threads=5) as s:
        assert s.threads == 5
        assert engine.get_settings().threads == 5
    assert engine.get_settings() == before
    monkeypatch.setenv("BCAST_NUM_THREADS", "3")
    assert config.threads_for(1e12) == 3
    monkeypatch.setenv("BCAST_NUM_THREADS", "nonsense")
    monkeypatch.setattr(_parallel, "_warned", set())
    with pytest.warns(RuntimeWarning, match="BCAST_NUM_THREADS='nonsense'"):
        assert 1 <= config.threads_for(1e12) <= _parallel.cores()
    assert config.threads_for(1) == 1  # small work: one thread


# -- the tiny path ---------------------------------------------------------------------------


@pytest.fixture(params=["compiled", "numpy"])
def tiny_ops(request: pytest.FixtureRequest) -> Any:
    """`bcast.ops` as users call it, then without the compiled tiny path (NumPy's ufunc)."""
    return ops if request.param == "compiled" else python_ops


def test_tiny_path_results_are_new_arrays_of_the_right_kind(tiny_ops: Any) -> None:
    a, b = np.array(3.0, np.float32), np.array(2.0, np.float32)
    got = tiny_ops.add(a, b)
    assert type(got) is np.ndarray and got.shape == () and got.dtype == np.float32
    assert tiny_ops.less(np.ones(3, np.int8), np.zeros(1, np.int8)).dtype == bool
    x = np.ones(4)
    assert not np.shares_memory(tiny_ops.mul(x, np.ones(1)), x)


def test_tiny_path_is_quiet_and_explains_errors(tiny_ops: Any) -> None:
    big = np.full(3, 3e38, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf(tiny_ops.add(big, big)).all()
        assert np.isinf(tiny_ops.div(np.ones(2), np.zeros(2))).all()
    with pytest.raises(BroadcastError, match="cannot broadcast"):
        tiny_ops.add(np.ones(3), np.ones(4))
    with pytest.raises(BroadcastError):
        tiny_ops.add(np.ones(3), np.ones(3), axis=0)
    with pytest.raises(TypeError):
        tiny_ops.add(np.ones(3), np.ones(3), axis=-1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "less", "and_"])
def test_binary_options_stay_keyword_only(op: str, tiny_ops: Any) -> None:
    """The wrapper declares its options positional (CPython calls that faster); a third
    positional argument is still refused, whichever path the call would take."""
    fn = getattr(tiny_ops, op)
    a = np.ones(3, bool) if op == "and_" else np.ones(3)
    for extra in (["numpy"], ["numpy", -1], ["numpy", -1, np.empty(3)], ["pdpd", 0]):
        with pytest.raises(TypeError, match=rf"{op}\(\) takes 2 positional arguments"):
            fn(a, a, *extra)
    with pytest.raises(TypeError, match=rf"{op}\(\) takes 2 positional arguments"):
        fn(1.0, 2.0, "numpy")  # scalars, which skip the tiny path: refused all the same
    params = inspect.signature(fn).parameters
    assert [p.kind for p in params.values()] == [
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_ONLY,
        *[inspect.Parameter.KEYWORD_ONLY] * 3,
    ]


def test_tiny_path_honours_a_memory_limit(tiny_ops: Any) -> None:
    from bcast.ops import MemoryLimitError

    with tiny_ops.memory_limit(10), pytest.raises(MemoryLimitError):
        tiny_ops.add(np.ones(4, np.float32), np.ones(1, np.float32))
    assert tiny_ops.add(np.ones(4, np.float32), np.ones(1, np.float32)).shape == (4,)


def test_tiny_path_with_out(tiny_ops: Any) -> None:
    a, b = np.arange(4.0), np.array([10.0])
    out = np.empty(4)
    assert tiny_ops.add(a, b, out=out) is out
    np.testing.assert_array_equal(out, a + b)
    assert tiny_ops.less(a, b, out=np.empty(4, bool)).all()
    with pytest.raises(ValueError, match=r"out has shape \[1\]"):
        tiny_ops.add(b, a, out=np.empty(1))
    with pytest.raises(ValueError, match=r"out has shape \[2, 4\]"):
        tiny_ops.add(a, b, out=np.empty((2, 4)))
    with pytest.raises(ValueError, match="read-only"):
        tiny_ops.add(a, b, out=np.broadcast_to(np.empty(4), (4,)))
    with pytest.raises(TypeError, match="out has dtype float32"):
        tiny_ops.add(a, b, out=np.empty(4, np.float32))
    assert tiny_ops.add(a, b, out=a) is a  # out aliasing an operand
    np.testing.assert_array_equal(a, [10.0, 11.0, 12.0, 13.0])
    zero = np.empty((), np.float64)
    assert tiny_ops.mul(np.array(3.0), np.array(2.0), out=zero) is zero
    assert zero == 6.0


def test_quiet_context_used_by_two_threads_at_once(tiny_ops: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    a = np.arange(16.0)

    def many(_: int) -> float:
        return float(sum(tiny_ops.add(a, a).sum() for _ in range(300)))

    with ThreadPoolExecutor(4) as pool:
        assert set(pool.map(many, range(8))) == {300 * 240.0}


# -- layout and blocks -------------------------------------------------------------------


def test_arrange_merges_axes_and_tiles_short_inner_runs() -> None:
    out = np.empty((256, 256, 64), np.float32)
    a = np.ones((256, 256, 64), np.float32)
    b = np.arange(64, dtype=np.float32).reshape(1, 1, 64)
    arranged = _layout.arrange(out, [a, b], max_tile_bytes=1 << 20)
    assert arranged is not None
    target, (va, vb) = arranged
    assert target.ndim == 2 and target.shape[1] >= _layout.INNER_MIN
    assert vb.strides[0] == 0 and vb.strides[1] == 4
    np.testing.assert_array_equal(vb[3], np.tile(b.ravel(), target.shape[1] // 64))
    assert np.shares_memory(target, out) and np.shares_memory(va, a)
    assert _layout.arrange(out, [a, b], max_tile_bytes=0)[0].shape[-1] == 64  # type: ignore[index]


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((256, 256, 64), (64,)), ((8, 16, 32), (8, 1, 32)), ((6, 40, 10), (6, 1, 1)), ((50, 3), (3,))],
)
def test_tile_cost_predicts_the_bytes_each_fold_takes(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...]
) -> None:
    # walk_axes picks a fold from _tile_cost without building tiles; _tile_step builds them
    out = np.empty(np.broadcast_shapes(a_shape, b_shape), np.float32)
    a = np.ones(a_shape, np.float32)
    b = np.ones(b_shape, np.float64).reshape((1,) * (out.ndim - len(b_shape)) + b_shape)
    found = _layout.walk_axes(out, [a, b], max_tile_bytes=0)
    assert found is not None
    bases, axes = found
    fixed, per_row = _layout._tile_cost(bases, axes)
    folds = _layout._folds(axes[-2][0], axes[-1][0])
    assert folds
    for k in folds:
        step = _layout._tile_step(bases, axes, out.itemsize, 1 << 40, k)
        assert step is not None
        assert step[2] == fixed + per_row * k
        assert _layout._tile_step(bases, axes, out.itemsize, fixed + per_row * k - 1, k) is None


def test_walk_axes_gives_the_strides_arrange_views() -> None:
    out = np.empty((256, 256, 64), np.float32)
    views = [np.ones((256, 256, 64), np.float32), np.ones((1, 1, 64), np.float32)]
    for budget in (0, 1 << 14, 1 << 20):
        bases, axes = _layout.walk_axes(out, views, max_tile_bytes=budget)  # type: ignore[misc]
        target, sources = _layout.arrange(out, views, max_tile_bytes=budget)  # type: ignore[misc]
        assert target.shape == tuple(n for n, _ in axes)
        assert bases[0] is out and bases[1] is views[0]  # neither is copied
        for k, view in enumerate([target, *sources]):
            assert view.strides == tuple(s[k] for _, s in axes)


def test_arrange_refuses_an_out_that_overlaps_itself() -> None:
    base = np.zeros(10)
    out = np.lib.stride_tricks.as_strided(base, (4, 4), (8, 8))
    assert _layout.arrange(out, [], max_tile_bytes=0) is None


@pytest.mark.parametrize("shape", [(7,), (3, 5), (4, 1, 6), (2, 3, 4, 5), (1000,)])
@pytest.mark.parametrize("size", [1, 2, 5, 13, 10**6])
def test_blocks_cover_every_element_once(shape: tuple[int, ...], size: int) -> None:
    seen = np.zeros(shape, int)
    for index in _layout.blocks(shape, size):
        seen[index] += 1
    assert (seen == 1).all()


def test_run_blocks_runs_each_once_and_reraises() -> None:
    hits: list[int] = []
    _parallel.run_blocks(hits.append, 50, 4, _quiet)
    assert sorted(hits) == list(range(50))

    def boom(i: int) -> None:
        if i == 17:
            raise KeyError(i)

    with pytest.raises(KeyError):
        _parallel.run_blocks(boom, 40, 3, _quiet)


@pytest.fixture(autouse=True)
def _no_leaked_settings() -> Iterator[None]:
    before = engine.get_settings()
    yield
    assert engine.get_settings() == before


def _quiet() -> Any:
    return np.errstate(all="ignore")
