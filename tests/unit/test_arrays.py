"""Views: `bcast.broadcast_to` and `bcast.broadcast_arrays`.

Expected values never come from bcast: each mode's aligned reshape is written out here from
the specification text (`aligned_by_spec`), and NumPy's own ``broadcast_to`` does the rest.
"""

from __future__ import annotations

import sys
import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bcast
from bcast import BroadcastError


def aligned_by_spec(
    x_shape: tuple[int, ...],
    target: tuple[int, ...],
    mode: str,
    axis: int = -1,
    axes_mapping: tuple[int, ...] | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The spec's reshape of x and the result shape, derived from the texts, not from bcast."""
    if mode in ("numpy", "unidirectional", "none"):
        # NumPy broadcast_to / ONNX unidirectional: right-align, pad with 1s; result = target.
        return (1,) * (len(target) - len(x_shape)) + x_shape, target
    if mode == "bidirectional":
        # numpy.array(input) * numpy.ones(target_shape)
        out = np.broadcast_shapes(x_shape, target)
        return (1,) * (len(out) - len(x_shape)) + x_shape, out
    if mode == "pdpd":
        # axis -1 = rank(A) - rank(B) on B's rank before trimming; trailing ones of B ignored.
        start = len(target) - len(x_shape) if axis == -1 else axis
        trimmed = list(x_shape)
        while trimmed and trimmed[-1] == 1 and start + len(trimmed) > len(target):
            trimmed.pop()
        aligned = (1,) * start + tuple(trimmed)
        return aligned + (1,) * (len(target) - len(aligned)), target
    if mode == "explicit":
        assert axes_mapping is not None
        aligned = [1] * len(target)
        for dim, out_axis in zip(x_shape, axes_mapping, strict=True):
            aligned[out_axis] = dim
        return tuple(aligned), target
    raise AssertionError(mode)


def expected_view(x: np.ndarray, target: tuple[int, ...], mode: str, **kw: object) -> np.ndarray:
    aligned, out = aligned_by_spec(x.shape, target, mode, **kw)  # type: ignore[arg-type]
    return np.broadcast_to(x.reshape(aligned), out)


CASES = [
    # (x shape, target, mode, kwargs)
    pytest.param((3,), (2, 3), "numpy", {}, id="numpy-row"),
    pytest.param((2, 1), (2, 4), "numpy", {}, id="numpy-column"),
    pytest.param((), (2, 3), "numpy", {}, id="numpy-scalar"),
    pytest.param((1,), (0,), "numpy", {}, id="numpy-one-to-zero"),
    pytest.param((1, 3), (4, 0, 3), "numpy", {}, id="numpy-zero-size"),
    pytest.param((3,), (2, 3), "unidirectional", {}, id="unidirectional-row"),
    pytest.param((2, 3), (2, 3), "none", {}, id="none-same"),
    pytest.param((), (), "none", {}, id="none-scalar"),
    pytest.param((3, 1), (2, 1, 6), "bidirectional", {}, id="bidirectional-grows"),
    pytest.param((3,), (1,), "bidirectional", {}, id="bidirectional-target-one"),
    pytest.param((2, 3), (3,), "bidirectional", {}, id="bidirectional-lower-rank-target"),
    pytest.param((16, 1, 1), (1, 1, 50, 50), "bidirectional", {}, id="bidirectional-o147"),
    pytest.param((3,), (0, 3), "bidirectional", {}, id="bidirectional-zero"),
    pytest.param((3, 1), (2, 3, 4), "pdpd", {"axis": 1}, id="pdpd-axis1-trailing-one"),
    pytest.param((3, 4, 1), (2, 3, 4), "pdpd", {"axis": 1}, id="pdpd-trailing-one-dropped"),
    pytest.param((3, 4), (2, 3, 4), "pdpd", {}, id="pdpd-default-axis"),
    pytest.param((3,), (2, 3, 4), "pdpd", {"axis": 1}, id="pdpd-middle"),
    pytest.param((), (2, 3), "pdpd", {"axis": 2}, id="pdpd-scalar-at-end"),
    pytest.param((1,), (5, 0), "pdpd", {}, id="pdpd-one-onto-zero-is-fine-in-ours"),
    pytest.param((16,), (1, 16, 50, 50), "explicit", {"axes_mapping": (1,)}, id="explicit-c"),
    pytest.param((2, 3), (2, 4, 3), "explicit", {"axes_mapping": (0, 2)}, id="explicit-gap"),
    pytest.param((1, 3), (5, 2, 3), "explicit", {"axes_mapping": (1, 2)}, id="explicit-one"),
    pytest.param((), (2, 2), "explicit", {"axes_mapping": ()}, id="explicit-scalar"),
]


@pytest.mark.parametrize(("x_shape", "target", "mode", "kw"), CASES)
def test_view_values_match_the_spec_reshape(x_shape, target, mode, kw) -> None:
    x = np.arange(int(np.prod(x_shape)), dtype=np.float64).reshape(x_shape)
    view = bcast.broadcast_to(x, target, mode=mode, **kw)
    expected = expected_view(x, target, mode, **kw)
    assert view.shape == expected.shape
    np.testing.assert_array_equal(view, expected)


@pytest.mark.parametrize(("x_shape", "target", "mode", "kw"), CASES)
def test_view_is_read_only_zero_copy_with_stride_zero_on_stretched_axes(
    x_shape, target, mode, kw
) -> None:
    x = (np.arange(int(np.prod(x_shape)), dtype=np.int32) + 1).reshape(x_shape)
    view = bcast.broadcast_to(x, target, mode=mode, **kw)
    aligned, out = aligned_by_spec(x_shape, target, mode, **kw)
    assert not view.flags.writeable
    if x.size and view.size:
        assert np.shares_memory(view, x)
    for i, (a, o) in enumerate(zip(aligned, out, strict=True)):
        if a == 1 and o > 1:
            assert view.strides[i] == 0, f"axis {i} is stretched and must have stride 0"
    if view.size:
        with pytest.raises(ValueError, match="read-only"):
            view[(0,) * view.ndim] = 0


def test_view_of_a_non_contiguous_array_is_still_a_view() -> None:
    base = np.arange(24.0).reshape(4, 6)
    x = base[::2, ::3].T  # shape (2, 2), odd strides
    view = bcast.broadcast_to(x, (3, 2, 2))
    np.testing.assert_array_equal(view, np.broadcast_to(x, (3, 2, 2)))
    assert np.shares_memory(view, base)


def test_numpy_mode_is_one_directional_like_np_broadcast_to() -> None:
    with pytest.raises(BroadcastError) as info:
        bcast.broadcast_to(np.ones((3, 1)), (3, 4, 1)[1:])  # target (4, 1): 3 vs 4
    assert info.value.axis == 0
    with pytest.raises(ValueError):
        np.broadcast_to(np.ones((3, 1)), (4, 1))
    # the target's 1 does not stretch to x's 3 (the bidirectional rule would)
    with pytest.raises(BroadcastError):
        bcast.broadcast_to(np.ones(3), (1,))
    assert bcast.broadcast_to(np.ones(3), (1,), mode="bidirectional").shape == (3,)


@pytest.mark.parametrize(
    ("x_shape", "target", "mode", "kw", "axis"),
    [
        pytest.param((3,), (2,), "numpy", {}, 0, id="numpy-mismatch"),
        pytest.param((2, 3), (3,), "numpy", {}, None, id="numpy-rank-too-big"),
        pytest.param((0,), (5,), "bidirectional", {}, 0, id="bidirectional-zero-vs-five"),
        pytest.param((2, 3), (2, 4), "none", {}, 1, id="none-differs"),
        pytest.param((3,), (2, 1), "pdpd", {"axis": 1}, 1, id="pdpd-b-bigger-than-a"),
        pytest.param((2,), (2, 2), "explicit", {"axes_mapping": (1, 0)}, None, id="explicit-bad"),
    ],
)
def test_incompatible_shapes_raise_broadcast_error(x_shape, target, mode, kw, axis) -> None:
    with pytest.raises(BroadcastError) as info:
        bcast.broadcast_to(np.ones(x_shape), target, mode=mode, **kw)
    assert info.value.axis == axis


def test_partial_target_shape_is_rejected() -> None:
    with pytest.raises(BroadcastError, match="must be static"):
        bcast.broadcast_to(np.ones(3), "[N,3]")


def test_target_shape_forms_are_accepted() -> None:
    x = np.arange(3)
    for target in ([2, 3], (2, 3), "[2,3]", bcast.Shape((2, 3)), np.array([2, 3])):
        assert bcast.broadcast_to(x, target).shape == (2, 3)


def test_non_array_input_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="expected an array"):
        bcast.broadcast_to([1, 2, 3], (2, 3))  # type: ignore[type-var]
    with pytest.raises(TypeError):
        bcast.broadcast_to(np.ones(3), 3)  # type: ignore[arg-type]


def test_negative_target_dim_is_a_broadcast_error() -> None:
    with pytest.raises(BroadcastError):
        bcast.broadcast_to(np.ones(3), (-1, 3))


def test_huge_view_costs_no_memory() -> None:
    x = np.arange(10.0)
    bcast.broadcast_to(x, (2, 10))  # warm the plan cache and imports
    tracemalloc.start()
    try:
        view = bcast.broadcast_to(x, (10**11, 10))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert view.size == 10**12
    assert view.strides == (0, 8)
    assert peak < 64 * 1024, f"a 10**12-element view allocated {peak} bytes"
    assert view[10**11 - 1, 9] == 9.0


def test_huge_view_in_every_mode_is_o1() -> None:
    x = np.ones((1, 4))
    big = (10**6, 10**6, 4)
    for mode, kw in [
        ("numpy", {}),
        ("bidirectional", {}),
        ("pdpd", {"axis": 1}),
        ("explicit", {"axes_mapping": (1, 2)}),
    ]:
        view = bcast.broadcast_to(x, big, mode=mode, **kw)
        assert view.shape == big
        assert view.strides[0] == 0


# -- broadcast_arrays --------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes",
    [
        pytest.param([(2, 1), (3,)], id="two"),
        pytest.param([(8, 1, 6, 1), (7, 1, 5), (1,)], id="three"),
        pytest.param([(), (2, 3)], id="scalar"),
        pytest.param([(0, 1), (1, 4)], id="zero"),
        pytest.param([(5,)], id="one"),
    ],
)
def test_broadcast_arrays_numpy_matches_np_broadcast_arrays(shapes) -> None:
    xs = [np.arange(int(np.prod(s))).reshape(s) for s in shapes]
    ours = bcast.broadcast_arrays(*xs)
    theirs = np.broadcast_arrays(*xs)
    assert isinstance(ours, tuple)
    assert len(ours) == len(theirs)
    for a, b, x in zip(ours, theirs, xs, strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
        assert not a.flags.writeable
        if x.size and a.size:
            assert np.shares_memory(a, x)


def test_broadcast_arrays_are_read_only_where_numpy_returns_writeable_views() -> None:
    # NumPy's test_stride_tricks.py::test_writeable: np.broadcast_arrays gives writeable
    # views (writing is deprecated, not forbidden). bcast's are read-only, as broadcast_to's.
    x, y = np.ones((2, 1)), np.arange(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # NumPy warns on reading the flag
        theirs = [view.flags.writeable for view in np.broadcast_arrays(x, y)]
    assert theirs == [True, True]
    ours = bcast.broadcast_arrays(x, y)
    assert [view.flags.writeable for view in ours] == [False, False]
    with pytest.raises(ValueError, match="read-only"):
        ours[1][0, 0] = 5.0
    assert y[0] == 0.0


def test_broadcast_arrays_of_nothing_is_empty() -> None:
    assert bcast.broadcast_arrays() == ()


def test_broadcast_arrays_pdpd_puts_b_onto_a() -> None:
    a = np.zeros((2, 3, 4))
    b = np.arange(3.0).reshape(3, 1)
    va, vb = bcast.broadcast_arrays(a, b, mode="pdpd", axis=1)
    assert va.shape == vb.shape == (2, 3, 4)
    np.testing.assert_array_equal(vb, np.broadcast_to(b.reshape(1, 3, 1), (2, 3, 4)))


def test_broadcast_arrays_none_requires_identical_shapes() -> None:
    a, b = bcast.broadcast_arrays(np.ones((2, 3)), np.zeros((2, 3)), mode="none")
    assert a.shape == b.shape == (2, 3)
    with pytest.raises(BroadcastError):
        bcast.broadcast_arrays(np.ones((2, 3)), np.zeros((1, 3)), mode="none")


def test_broadcast_arrays_incompatible_raises_with_axis() -> None:
    with pytest.raises(BroadcastError) as info:
        bcast.broadcast_arrays(np.ones((2, 3)), np.ones(4))
    assert info.value.axis == 1


@given(hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, max_side=4))
def test_broadcast_arrays_agree_with_numpy_on_random_shapes(shapes) -> None:
    xs = [np.arange(int(np.prod(s)), dtype=np.int16).reshape(s) for s in shapes.input_shapes]
    for ours, theirs in zip(bcast.broadcast_arrays(*xs), np.broadcast_arrays(*xs), strict=True):
        assert ours.shape == shapes.result_shape
        np.testing.assert_array_equal(ours, theirs)
        assert _strides_that_matter(ours) == _strides_that_matter(theirs)


@given(
    st.data(),
    hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
)
def test_broadcast_to_agrees_with_np_broadcast_to(data, target) -> None:
    x_shape = data.draw(
        hnp.broadcastable_shapes(target, min_dims=0, max_dims=len(target), min_side=0)
    )
    x = np.arange(int(np.prod(x_shape)), dtype=np.int8).reshape(x_shape)
    try:
        theirs = np.broadcast_to(x, target)
    except ValueError:
        # hypothesis draws mutually broadcastable shapes; NumPy's broadcast_to is one-way
        with pytest.raises(BroadcastError):
            bcast.broadcast_to(x, target)
        return
    ours = bcast.broadcast_to(x, target)
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)
    assert _strides_that_matter(ours) == _strides_that_matter(theirs)


def _strides_that_matter(view: np.ndarray) -> list[int | None]:
    # the stride of an axis of length 0 or 1 is never used to address an element
    return [s if d > 1 else None for s, d in zip(view.strides, view.shape, strict=True)]


# -- other array libraries -----------------------------------------------------------------


def test_import_bcast_loads_neither_numpy_nor_array_api_compat() -> None:
    import subprocess

    code = (
        "import sys, bcast; "
        "print('numpy' in sys.modules, 'array_api_compat' in sys.modules, 'torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "False", "False"]


def test_torch_views_are_torch_views() -> None:
    torch = pytest.importorskip("torch")
    x = torch.arange(3.0)
    view = bcast.broadcast_to(x, (2, 3))
    assert isinstance(view, torch.Tensor)
    assert view.stride() == (0, 1)
    assert view.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(view.numpy(), np.broadcast_to(np.arange(3.0), (2, 3)))
    pdpd = bcast.broadcast_to(torch.ones(3, 1), (2, 3, 4), mode="pdpd", axis=1)
    assert tuple(pdpd.shape) == (2, 3, 4)
    assert pdpd.stride()[0] == 0
    a, b = bcast.broadcast_arrays(torch.ones(2, 1), torch.ones(3))
    assert tuple(a.shape) == tuple(b.shape) == (2, 3)
    big = bcast.broadcast_to(x, (10**11, 3))
    assert tuple(big.shape) == (10**11, 3)


def test_array_api_strict_views_are_array_api_strict_arrays() -> None:
    xps = pytest.importorskip("array_api_strict")
    x = xps.asarray([1.0, 2.0, 3.0])
    view = bcast.broadcast_to(x, (2, 1, 3), mode="explicit", axes_mapping=[2])
    assert type(view) is type(x)
    assert view.shape == (2, 1, 3)
    np.testing.assert_array_equal(np.asarray(xps.reshape(view, (6,))), np.tile([1.0, 2.0, 3.0], 2))


def test_dask_views_stay_lazy() -> None:
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    calls = []

    @dask.delayed
    def make() -> np.ndarray:
        calls.append(1)
        return np.arange(4.0)

    x = da.from_delayed(make(), shape=(4,), dtype=np.float64)
    view = bcast.broadcast_to(x, (10**6, 10**6, 4))
    assert isinstance(view, da.Array)
    assert view.shape == (10**6, 10**6, 4)
    assert calls == []  # nothing computed
    small = bcast.broadcast_to(x, (2, 4))
    np.testing.assert_array_equal(small.compute(), np.broadcast_to(np.arange(4.0), (2, 4)))
    assert calls == [1]


def test_mixed_libraries_are_a_type_error() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        bcast.broadcast_arrays(np.ones(3), torch.ones(3))


@pytest.mark.parametrize("numpy_first", [True, False], ids=["numpy-torch", "torch-numpy"])
def test_an_operator_on_torch_and_numpy_names_both_libraries(numpy_first: bool) -> None:
    torch = pytest.importorskip("torch")
    operands = (np.ones(3), torch.ones(3)) if numpy_first else (torch.ones(3), np.ones(3))
    with pytest.raises(TypeError, match="different array libraries") as excinfo:
        bcast.ops.add(*operands)
    message = str(excinfo.value)
    assert "torch" in message and "numpy" in message
    assert "site-packages" not in message and "namespaces" not in message


def test_dask_with_torch_is_a_type_error_naming_both_while_dask_with_numpy_runs() -> None:
    torch = pytest.importorskip("torch")
    da = pytest.importorskip("dask.array")
    with pytest.raises(TypeError, match="different array libraries") as excinfo:
        bcast.ops.add(da.ones(3, chunks=2), torch.ones(3))
    assert "dask" in str(excinfo.value) and "torch" in str(excinfo.value)
    # NumPy operands join Dask ones (documented): no error there.
    np.testing.assert_array_equal(bcast.ops.add(da.ones(3, chunks=2), np.ones(3)).compute(), 2.0)
