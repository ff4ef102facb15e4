"""Dask arrays: lazy, chunk-aware views of a Plan, and the block layout operators share.

Imported only when a Dask array arrives (``import bcast`` never imports Dask). Nothing here
decides broadcasting: the Plan comes from the rules, with a Dask dim of unknown size (NaN
chunks) planned as ``?``. `Layout` puts every operand at its aligned shape into one
``blockwise`` layer; `bcast.engine.dask` runs the operators' kernels on it. How chunks are
chosen and what is checked at compute time is in ``docs/dask.md``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Final

import dask
import dask.array
import numpy as np
from dask.utils import parse_bytes

from bcast.arrays.targets import plan_to_target, static_shape
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode, ModeName
from bcast.core.planning import plan as make_plan
from bcast.core.plans import Plan
from bcast.core.shape import ShapeLike

__all__ = [
    "Layout",
    "aligned_operand",
    "as_dask",
    "broadcast_arrays",
    "broadcast_to",
    "dims_of",
    "known",
]

Chunks = tuple[tuple[float, ...], ...]

# Dask's functions are untyped; one Any-typed handle keeps mypy --strict quiet about them.
da: Any = dask.array

# Modes whose result has exactly the shape of one operand (slot 0: A), or of all (none).
_EXACT_A: Final = (Mode.UNIDIRECTIONAL, Mode.PDPD)


# -- views ----------------------------------------------------------------------------------


def dims_of(x: Any) -> tuple[int | None, ...]:
    """Return a Dask (or NumPy) array's dims for planning: unknown (NaN) dims are None (``?``).

    >>> import dask.array as da
    >>> x = da.ones(6, chunks=3)
    >>> dims_of(x[x > 0]), dims_of(da.ones((2, 3)))
    ((None,), (2, 3))
    """
    return tuple(None if math.isnan(d) else int(d) for d in x.shape)


def broadcast_to(
    x: Any,
    shape: ShapeLike,
    *,
    mode: ModeName | Mode,
    axis: int,
    axes_mapping: Sequence[int] | None,
) -> Any:
    """Broadcast a Dask array to ``shape`` lazily (see `bcast.broadcast_to`).

    The result is a Dask array whose blocks are read-only NumPy views (stride 0 along the
    stretched axes) of ``x``'s blocks: nothing is copied when it is computed either.

    Examples
    --------
    >>> import bcast
    >>> import dask.array as da
    >>> v = bcast.broadcast_to(da.arange(4, chunks=2), (3, 4))
    >>> v.chunks
    ((3,), (2, 2))
    >>> v.compute().tolist()
    [[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]]
    """
    target = static_shape(shape, "shape")
    the_plan, index = plan_to_target(
        dims_of(x), target, mode=mode, axis=axis, axes_mapping=axes_mapping
    )
    (view,) = _views(the_plan, [x], [index])
    return view


def broadcast_arrays(*arrays: Any, mode: ModeName | Mode, axis: int) -> tuple[Any, ...]:
    """Broadcast Dask (and NumPy) arrays against each other lazily (`bcast.broadcast_arrays`).

    Every result has the same chunks, those of the largest operand.

    Examples
    --------
    >>> import bcast
    >>> import dask.array as da
    >>> import numpy as np
    >>> a, b = bcast.broadcast_arrays(da.ones((4, 1), chunks=2), np.arange(3))
    >>> a.chunks == b.chunks == ((2, 2), (3,))
    True
    """
    the_plan = make_plan(*(dims_of(x) for x in arrays), mode=mode, axis=axis)
    return _views(the_plan, list(arrays), list(range(len(arrays))))


# -- layout: aligned operands, output chunks -----------------------------------------------


def _chunk_limit() -> int:
    """Bytes per chunk Dask aims at (``array.chunk-size``, 128 MiB by default)."""
    return int(parse_bytes(dask.config.get("array.chunk-size")))


def as_dask(x: Any) -> Any:
    """Return ``x`` as a Dask array: one chunk for a NumPy array of at most a chunk's size."""
    if isinstance(x, da.Array):
        return x
    x = np.asarray(x)
    if x.nbytes <= _chunk_limit():
        return da.from_array(x, chunks=x.shape)
    # name=False: do not hash gigabytes of data to name the array.
    return da.from_array(x, chunks="auto", name=False)


def aligned_operand(x: Any, the_plan: Plan, index: int) -> Any:
    """Reshape ``x`` to the plan's aligned shape of operand ``index``, lazily.

    Indexing (``None`` inserts an axis, ``0`` drops one) rather than ``reshape``, so that
    axes of unknown length keep their chunks.
    """
    axes = the_plan.alignment[index]
    rank = the_plan.output.rank
    assert axes is not None and rank is not None  # a Dask array has a known rank
    dropped = [i for i, out_axis in enumerate(axes) if out_axis is None]
    for i in reversed(dropped):  # PDPD's trailing ones of B
        x = _drop_axis(x, i)
    kept = [out_axis for out_axis in axes if out_axis is not None]
    if len(kept) == rank:
        return x
    mapped = set(kept)
    return x[tuple(slice(None) if j in mapped else None for j in range(rank))]


def _drop_axis(x: Any, axis: int) -> Any:
    if not math.isnan(x.shape[axis]):
        return x[(slice(None),) * axis + (0,)]
    if x.numblocks[axis] != 1:
        raise ValueError(
            f"axis {axis} of unknown length is split into {x.numblocks[axis]} chunks; "
            "call compute_chunk_sizes() on the Dask array first"
        )
    meta = np.empty((0,) * (x.ndim - 1), dtype=x.dtype)
    return x.map_blocks(_squeeze_block, axis, drop_axis=axis, dtype=x.dtype, meta=meta)


def _squeeze_block(block: Any, axis: int) -> Any:
    if block.shape[axis] != 1:
        raise BroadcastError(
            f"pdpd: a dropped trailing dim of B has length {block.shape[axis]}, not 1",
            mode="pdpd",
        )
    return block.squeeze(axis)


def _fit_block(block: Any, axis: int, size: int, exact: bool) -> Any:
    """Check a block's length along ``axis`` (1 or ``size``; ``size`` if ``exact``), stretch it."""
    have = block.shape[axis]
    if have != size and (exact or have != 1):
        allowed = str(size) if exact else f"1 or {size}"
        raise BroadcastError(
            f"a dim of unknown length turned out to be {have} at axis {axis}; "
            f"the plan needs {allowed}"
        )
    shape = list(block.shape)
    shape[axis] = size
    return np.broadcast_to(block, tuple(shape))


def known(d: float) -> bool:
    """Tell whether a Dask dim (a float: NaN when unknown) is known."""
    return not math.isnan(d)


def _elements(x: Any) -> int:
    """Known elements of an array (unknown dims count as 1): what "largest" compares."""
    return math.prod(int(d) for d in x.shape if known(d))


class Layout:
    """The operands at their aligned shapes and the chunks of the output.

    Attributes
    ----------
    arrays : list of dask.array.Array
        The operands, aligned, unknown dims the plan fixed resolved, rechunked along the
        axes they span to the output's chunks.
    shape : tuple of float
        The output shape (NaN where unknown).
    chunks : tuple of tuple
        The output chunks.
    spans : list of set of int
        For each operand, the output axes it spans (not stretched).
    carried : list of int
        The output axes no operand spans (only the target has them).
    """

    def __init__(self, the_plan: Plan, operands: list[Any], indices: list[int], dtype: Any):
        self.plan = the_plan
        self.shape: tuple[float, ...] = tuple(
            float(d.value) if d.is_static else math.nan for d in the_plan.output
        )
        exact = the_plan.mode is Mode.NONE
        arrays = []
        for x, k in zip(operands, indices, strict=True):
            aligned = aligned_operand(as_dask(x), the_plan, k)
            arrays.append(self._resolve(aligned, exact=exact))
        self.spans = [self._spanned(a) for a in arrays]
        order = sorted(range(len(arrays)), key=lambda k: -_elements(arrays[k]))
        chunks: list[tuple[float, ...] | None] = []
        for axis, size in enumerate(self.shape):
            owner = next((k for k in order if axis in self.spans[k]), None)
            if owner is not None:
                chunks.append(tuple(arrays[owner].chunks[axis]))
            elif size == 1:
                chunks.append((1,))
            else:
                chunks.append(None)  # only the target has this axis
        self.carried = [axis for axis, c in enumerate(chunks) if c is None]
        self.chunks: Chunks = _fill_auto(chunks, self.shape, dtype)
        self.arrays = [self._rechunked(a, span) for a, span in zip(arrays, self.spans, strict=True)]

    def _resolve(self, x: Any, *, exact: bool) -> Any:
        """Give the plan's known length to the operand's unknown dims (checked per block)."""
        for axis, (have, want) in enumerate(zip(x.shape, self.shape, strict=True)):
            if known(have) or not known(want):
                continue
            if x.numblocks[axis] != 1:
                raise ValueError(
                    f"an operand's axis {axis} has unknown length and {x.numblocks[axis]} "
                    f"chunks, where the result's is {int(want)}; call compute_chunk_sizes() "
                    "on the Dask array first"
                )
            chunks = list(x.chunks)
            chunks[axis] = (int(want),)
            x = x.map_blocks(
                _fit_block,
                axis,
                int(want),
                exact,
                chunks=tuple(chunks),
                dtype=x.dtype,
                meta=np.empty((0,) * x.ndim, dtype=x.dtype),
            )
        return x

    def _spanned(self, x: Any) -> set[int]:
        return {
            axis
            for axis, (have, want) in enumerate(zip(x.shape, self.shape, strict=True))
            if not (have == 1 and want != 1)
        }

    def _rechunked(self, x: Any, span: set[int]) -> Any:
        wanted = {
            axis: self.chunks[axis]
            for axis in span
            if known(self.shape[axis]) and tuple(x.chunks[axis]) != self.chunks[axis]
        }
        return x.rechunk(wanted) if wanted else x

    def exact_positions(self, indices: Sequence[int]) -> tuple[int, ...]:
        """Operands whose block must have the output block's shape (unknown dims only)."""
        if all(known(d) for d in self.shape):
            return ()
        if self.plan.mode is Mode.NONE:
            return tuple(range(len(indices)))
        if self.plan.mode in _EXACT_A and 0 in indices:
            return (indices.index(0),)
        return ()

    def carrier(self, axes: Sequence[int]) -> Any:
        """Return a zero-copy array with the output's length and chunks on ``axes``, 1 elsewhere."""
        shape = tuple(int(self.shape[i]) if i in axes else 1 for i in range(len(self.shape)))
        chunks = tuple(self.chunks[i] if i in axes else (1,) for i in range(len(self.shape)))
        # Dask's ones are lazy (a blockwise layer) and each block is a broadcast view of
        # one element: the carrier costs no memory, whatever the output's size.
        return da.ones(shape, dtype=bool, chunks=chunks)

    def blockwise(
        self,
        op: str,
        compute: Callable[..., Any],
        arrays: list[Any],
        exact: tuple[int, ...],
        dtype: Any,
        carried: Sequence[int] | None = None,
    ) -> Any:
        """One ``blockwise`` layer over ``arrays``, plus a carrier of the ``carried`` axes.

        ``carried`` defaults to the axes only the target has; a view adds the axes along
        which its operand is stretched.
        """
        carried = self.carried if carried is None else carried
        args = list(arrays)
        if carried:
            args.append(self.carrier(carried))
        index = tuple(range(len(self.shape)))
        pairs: list[Any] = []
        for a in args:
            pairs += [a, index]
        with warnings.catch_warnings():
            # Chunks are aligned already; Dask's "increasing number of chunks" warning would
            # only say that a broadcast output has more blocks than its inputs.
            warnings.simplefilter("ignore", da.PerformanceWarning)
            return da.blockwise(
                _Block(compute, exact),
                index,
                *pairs,
                dtype=dtype,
                meta=np.empty((0,) * len(index), dtype=dtype),
                token=f"bcast-{op}",
            )


def _fill_auto(
    chunks: list[tuple[float, ...] | None], shape: tuple[float, ...], dtype: Any
) -> Chunks:
    """Choose chunks for the target-only axes: blocks of about Dask's ``array.chunk-size``."""
    auto = [axis for axis, c in enumerate(chunks) if c is None]
    if not auto:
        return tuple(c for c in chunks if c is not None)
    fixed = math.prod(max((x for x in c if known(x)), default=1) for c in chunks if c is not None)
    itemsize = max(np.dtype(dtype).itemsize, 1)
    limit = max(_chunk_limit() // max(int(fixed), 1), itemsize)
    picked = da.core.normalize_chunks(
        ("auto",) * len(auto),
        tuple(int(shape[i]) for i in auto),
        limit=limit,
        dtype=np.dtype(dtype),
    )
    filled = iter(picked)
    return tuple(next(filled) if c is None else c for c in chunks)


# -- what runs on each block ---------------------------------------------------------------


class _Block:
    """The function of the ``blockwise`` layer: check shapes, then compute one output block.

    Blocks arrive at the output's rank; NumPy's broadcasting of their shapes is the output
    block's shape (the plan's broadcast, restricted to the block). A module-level class, so
    that Dask's distributed scheduler ships it by reference.
    """

    def __init__(self, compute: Callable[..., Any], exact: tuple[int, ...]) -> None:
        self.compute = compute
        self.exact = exact

    def __call__(self, *blocks: Any) -> Any:
        shape = np.broadcast_shapes(*(b.shape for b in blocks))
        for k in self.exact:
            if blocks[k].shape != shape:
                raise BroadcastError(
                    f"dims of unknown length turned out incompatible: operand {k} has a block "
                    f"of shape {list(blocks[k].shape)}, the result's is {list(shape)}"
                )
        return self.compute(shape, blocks)


class _View:
    """Broadcast one block to the output block's shape: a read-only, zero-copy view."""

    def __init__(self, position: int) -> None:
        self.position = position

    def __call__(self, shape: tuple[int, ...], blocks: Sequence[Any]) -> Any:
        return np.broadcast_to(blocks[self.position], shape)


# -- views ---------------------------------------------------------------------------------


def _views(the_plan: Plan, arrays: list[Any], indices: list[int]) -> tuple[Any, ...]:
    """Build the lazy views of `broadcast_to` / `broadcast_arrays`, one ``blockwise`` each.

    A view's own operand spans some output axes; a carrier gives the others their length
    and chunks. Where the output has unknown dims, the other operands' blocks carry them
    instead (and the checks of the one-directional modes).
    """
    if not arrays:
        return ()
    layout = Layout(the_plan, arrays, indices, np.dtype(arrays[0].dtype))
    exact = layout.exact_positions(indices)
    with_others = bool(exact) or any(not known(d) for d in layout.shape)
    views = []
    for k, x in enumerate(layout.arrays):
        if with_others:
            order = [k] + [j for j in range(len(layout.arrays)) if j != k]
            args = [layout.arrays[j] for j in order]
            moved = tuple(order.index(j) for j in exact)
            carried: list[int] = layout.carried
        else:
            args, moved = [x], ()
            carried = [axis for axis in range(len(layout.shape)) if axis not in layout.spans[k]]
        views.append(layout.blockwise("broadcast_to", _View(0), args, moved, x.dtype, carried))
    return tuple(views)
