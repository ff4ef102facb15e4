"""How the engine walks a large output: axes in memory order, merged, a long inner loop, blocks.

`arrange` re-views the output and its (broadcast) operands without copying them: axes in the
output's memory order, axes of length 1 dropped, neighbouring axes merged wherever every array
allows it. When the innermost run is still short, an operand that is broadcast along the
axis next to it is *tiled*: a few KiB of it copied contiguously so that NumPy's inner loop
runs over ``k`` rows at once (``(256,256,64) + (64,)`` becomes ``(2048,2048) + (2048,)``).
`blocks` then cuts the arranged output into pieces of about a given number of elements.

None of this changes a value: every output element is still computed from the same operand
elements by the same operation.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["Axis", "Tile", "arrange", "blocks", "make_tile", "same_elements", "walk_axes"]

INNER_MIN: Final = 8192
"""An inner loop shorter than this (elements) is lengthened by tiling, where possible.

It is NumPy's default ufunc buffer size: an inner run shorter than the buffer makes NumPy's
iterator copy strided operands into its buffers (measured: ``(256,256,64) + (64,)`` as
4096 rows of 4096 takes 1.5x the time of 1024 rows of 16384)."""
INNER_TARGET: Final = 1 << 18
"""The inner length tiling aims at."""


def buffer_size(inner: int) -> int | None:
    """Return a ufunc buffer size (a multiple of 16, at most 8192) that divides ``inner``.

    Buffers that end where rows end let NumPy use the operands in place. None: keep NumPy's.

    Runs shorter than 1024 elements keep NumPy's buffer (measured: a 128-element buffer is
    slower than NumPy's copies into its own; 1024 makes Where twice as fast).

    >>> buffer_size(1024), buffer_size(16384), buffer_size(1000), buffer_size(12288)
    (1024, 8192, None, 6144)
    """
    if inner < 1024:
        return None
    for parts in range(-(-inner // 8192), 65):
        size, rest = divmod(inner, parts)
        if rest == 0 and size % 16 == 0:
            return size
    return None


Axis = tuple[int, list[int]]
"""An axis to walk: its length and, in bytes, each array's stride on it (the output first)."""


def _merge(axes: list[Axis]) -> list[Axis]:
    """Drop axes of length 1; merge each axis into its outer neighbour where all strides allow."""
    merged: list[Axis] = []
    for n, strides in axes:
        if n == 1:
            continue
        if merged:
            outer_n, outer = merged[-1]
            if all(so == si * n for so, si in zip(outer, strides, strict=True)):
                merged[-1] = (outer_n * n, strides)
                continue
        merged.append((n, strides))
    return merged


def arrange(
    out: np.ndarray[Any, Any], views: Sequence[np.ndarray[Any, Any]], *, max_tile_bytes: int
) -> tuple[np.ndarray[Any, Any], list[np.ndarray[Any, Any]]] | None:
    """Re-view ``out`` and the operands (aligned to ``out``'s rank) for a fast walk.

    Returns the output view (writeable) and one read-only view per operand, all of one
    shape; or None when ``out`` overlaps itself (its elements cannot be split safely).
    Tiles take at most ``max_tile_bytes`` in all.
    """
    found = walk_axes(out, views, max_tile_bytes=max_tile_bytes)
    if found is None:
        return None
    bases, axes = found
    dims = tuple(n for n, _ in axes)
    arranged = [
        as_strided(a, dims, tuple(s[k] for _, s in axes), writeable=k == 0)
        for k, a in enumerate(bases)
    ]
    return arranged[0], arranged[1:]


def walk_axes(
    out: np.ndarray[Any, Any],
    views: Sequence[np.ndarray[Any, Any]],
    *,
    max_tile_bytes: int,
    tiles: list[Tile] | None = None,
    inner_target: int = INNER_TARGET,
) -> tuple[list[np.ndarray[Any, Any]], list[Axis]] | None:
    """Return what `arrange` views, without the views: the arrays and the axes to walk.

    The arrays are ``out`` and one per operand (the operand itself or its tile); each axis
    is ``(length, [stride in bytes of each array])``, outermost first. Building the views
    (``as_strided``) costs more than the compiled path needs: it reads this directly. Each
    tile made is appended to ``tiles``, as `make_tile` makes it again from arrays of the
    same layout. Tiles lengthen an inner run up to ``inner_target`` elements, at most
    ``max_tile_bytes`` of them in all.

    >>> import numpy as np
    >>> out = np.zeros((4, 3, 2))
    >>> bases, axes = walk_axes(out, [out[:1]], max_tile_bytes=0)
    >>> axes
    [(4, [48, 0]), (6, [8, 8])]
    """
    shape = out.shape
    order = sorted(
        (i for i in range(out.ndim) if shape[i] != 1), key=lambda i: -abs(out.strides[i])
    )
    for outer, inner in itertools.pairwise(order):
        if abs(out.strides[outer]) < abs(out.strides[inner]) * shape[inner]:
            return None
    bases: list[np.ndarray[Any, Any]] = [out, *views]
    axes: list[Axis] = [
        (shape[i], [a.strides[i] if a.shape[i] != 1 else 0 for a in bases]) for i in order
    ]
    axes = _merge(axes)
    budget = min(max_tile_bytes, out.size * out.itemsize // 32)
    while len(axes) >= 2 and axes[-1][0] < INNER_MIN:
        (n2, _), (n1, _) = axes[-2], axes[-1]
        fixed, per_row = _tile_cost(bases, axes)
        step = None
        for k in _folds(n2, n1, inner_target):
            if fixed + per_row * k <= budget:  # else a step would build views to refuse it
                step = _tile_step(bases, axes, out.itemsize, budget, k, tiles)
                if step is not None:
                    break
        if step is None:
            break
        bases, axes, used = step
        budget -= used
    return bases, axes


def _folds(n2: int, n1: int, target: int = INNER_TARGET) -> list[int]:
    """Row counts ``k`` (divisors of ``n2``) to fold into an inner run of ``n1``, best first.

    The longest run up to ``target`` elements first (NumPy's blocks: `INNER_TARGET`,
    measured: one larger tile beats a smaller tile and a shorter run; the compiled path
    aims lower, `bcast.engine.compiled.ROW_BYTES`); the caller takes the first whose tiles
    fit its budget.

    >>> _folds(128, 128)[:3], _folds(12, 1000)
    ([128, 64, 32], [12, 6, 4, 3, 2])
    """
    return list(_folds_cached(n2, min(n2, target // n1)))


@functools.lru_cache(maxsize=256)
def _folds_cached(n: int, limit: int) -> tuple[int, ...]:
    """Return the divisors of ``n`` in ``[2, limit]``, largest first (O(sqrt n), cached).

    A scan of every candidate would cost a fair share of a cache-sized addition.
    """
    found: set[int] = set()
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            found.update((d, n // d))
    return tuple(sorted((d for d in found if 2 <= d <= limit), reverse=True))


Tile = tuple[int, tuple[int, ...], tuple[int, ...], tuple[slice, ...], tuple[int, ...]]
"""How `walk_axes` made a tile: ``(array index, shape, strides, kept part, tile shape)``."""


def make_tile(base: np.ndarray[Any, Any], recipe: Tile) -> np.ndarray[Any, Any]:
    """Copy the part of ``base`` that ``recipe`` names into a new contiguous tile.

    >>> import numpy as np
    >>> row = np.arange(3.0)
    >>> make_tile(row, (1, (2, 3), (0, 8), (), (6,)))  # two rows of a stretched row
    array([0., 1., 2., 0., 1., 2.])
    """
    _, shape, strides, keep, tile_shape = recipe
    if base.flags.c_contiguous:  # a view of its buffer: 2 us, where as_strided takes 8
        small = np.ndarray(shape, base.dtype, buffer=base, strides=strides)[keep]
    else:
        small = as_strided(base, shape, strides, writeable=False)[keep]
    return np.ascontiguousarray(small).reshape(tile_shape)


def _tile_cost(bases: list[np.ndarray[Any, Any]], axes: list[Axis]) -> tuple[int, int]:
    """Return the bytes the tiles of a fold of ``k`` rows take, as ``fixed + per_row * k``.

    (`_tile_step` counts the same bytes; this tells which ``k`` fit without trying each.)
    """
    (n2, s2), (n1, s1) = axes[-2], axes[-1]
    fixed = per_row = 0
    for j, base in enumerate(bases):
        if s2[j] == s1[j] * n1:  # needs no tile
            continue
        kept = math.prod(n for n, s in axes[:-2] if s[j] != 0) * n1 * base.itemsize
        if s2[j] != 0:  # a tile of every row: n2 // k tiles of k rows
            fixed += kept * n2
        else:  # one tile of k rows
            per_row += kept
    return fixed, per_row


def _tile_step(
    bases: list[np.ndarray[Any, Any]],
    axes: list[Axis],
    itemsize: int,
    budget: int,
    k: int,
    tiles: list[Tile] | None = None,
) -> tuple[list[np.ndarray[Any, Any]], list[Axis], int] | None:
    """Fold ``k`` rows of the next axis into the inner one; tile operands that need it."""
    (n2, s2), (n1, s1) = axes[-2], axes[-1]
    if s1[0] != itemsize or s2[0] != n1 * itemsize:
        return None  # the output itself is not contiguous over the two axes
    lead = axes[:-2]
    new_bases = list(bases)
    inner_strides: list[int] = []
    row_strides: list[int] = []
    lead_strides: list[list[int]] = [list(s) for _, s in lead]
    used = 0
    for j, base in enumerate(bases):
        if s2[j] == s1[j] * n1:  # contiguous over both axes (or broadcast over both)
            row_strides.append(s2[j] * k)
            inner_strides.append(s1[j])
            continue
        shape = [n for n, _ in lead] + [n2 // k, k, n1]
        strides = [s[j] for _, s in lead] + [s2[j] * k, s2[j], s1[j]]
        keep = tuple(slice(None) if st != 0 else slice(0, 1) for st in strides[:-2])
        kept = [n if st != 0 else 1 for n, st in zip(shape[:-2], strides, strict=False)]
        used += math.prod(kept) * k * n1 * base.itemsize  # known before any view is made
        if used > budget:
            return None
        recipe = (j, tuple(shape), tuple(strides), keep, (*kept, k * n1))
        tile = new_bases[j] = make_tile(base, recipe)
        if tiles is not None:
            tiles.append(recipe)
        for axis, st in enumerate(strides[:-3]):
            lead_strides[axis][j] = 0 if st == 0 else tile.strides[axis]
        row_strides.append(0 if strides[-3] == 0 else tile.strides[-2])
        inner_strides.append(tile.strides[-1])
    new_axes: list[Axis] = [(n, lead_strides[a]) for a, (n, _) in enumerate(lead)]
    new_axes += [(n2 // k, row_strides), (k * n1, inner_strides)]
    return new_bases, _merge(new_axes), used


def blocks(shape: tuple[int, ...], block_elements: int) -> list[tuple[Any, ...]]:
    """Cut an array of ``shape`` into index tuples of about ``block_elements`` elements each.

    Blocks follow the memory order: whole inner axes, a range of one axis, single indices of
    the axes outside it.

    >>> blocks((4, 6), 12)
    [(slice(0, 2, None),), (slice(2, 4, None),)]
    >>> len(blocks((2, 3, 4), 5)), blocks((2, 3, 4), 5)[4]
    (6, (1, slice(1, 2, None)))
    >>> blocks((2, 3), 100)
    [(Ellipsis,)]
    """
    inner = 1
    axis = len(shape) - 1
    while axis >= 0 and inner * shape[axis] <= block_elements:
        inner *= shape[axis]
        axis -= 1
    if axis < 0:
        return [(...,)]  # the whole array (a view even at rank 0)
    chunk = max(1, block_elements // inner)
    n = shape[axis]
    parts = -(-n // chunk)
    step, extra = divmod(n, parts)
    ranges = []
    start = 0
    for p in range(parts):
        stop = start + step + (1 if p < extra else 0)
        ranges.append(slice(start, stop))
        start = stop
    return [
        (*outer, r)
        for outer in itertools.product(*(range(m) for m in shape[:axis]))
        for r in ranges
    ]


def same_elements(out: np.ndarray[Any, Any], view: np.ndarray[Any, Any]) -> bool:
    """Tell whether ``view`` reads, for each output element, exactly that element of ``out``.

    Then a block reads only what it writes itself, and splitting is safe.
    """
    return (
        view.shape == out.shape
        and view.strides == out.strides
        and view.dtype == out.dtype
        and view.__array_interface__["data"][0] == out.__array_interface__["data"][0]
    )
