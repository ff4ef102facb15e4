"""The compiled front of a repeated walk: addresses, the checks they need, and the tiles.

Imported with `bcast.engine.numba_kernels`, only when numba is installed. A walk planned once
(`bcast.engine.compiled.Runner`) needs, on every call, what only the arrays of that call
know: their addresses (``__array_interface__`` costs a microsecond per array in Python;
numba unboxes an array in tens of nanoseconds), whether each is on its natural alignment,
whether the output overlaps an operand, and the values of the tiles of small operands.
`enter` does all of it in one compiled call; it is compiled once per number of dimensions
and dtype of the arrays it is given, and cached on disk like the walkers.

The walkers read and write memory through the raw pointers made here (`pointer`, `load`,
`save`): no array objects, so no reference counting, in their row loops.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
from numba import njit, types
from numba.extending import intrinsic
from numba.np.numpy_support import from_dtype

__all__ = [
    "OVERLAP",
    "READY",
    "UNALIGNED",
    "address",
    "compile_entry",
    "enter",
    "itemsize",
    "load",
    "pointer",
    "save",
]

READY: Final = 0
"""`enter` filled the addresses and tiles: the walker may run."""
UNALIGNED: Final = 1
"""An array is off its natural alignment: NumPy's path computes."""
OVERLAP: Final = 2
"""The output overlaps an operand (other than element for element): NumPy's path computes."""

TILE_FIELDS: Final = 3
"""A row of ``tiles``: operand index, rank, the tile's address, then shape and strides."""


@intrinsic
def pointer(typingctx: Any, address: Any, dtype: Any) -> Any:
    """Read an integer address as a pointer to elements of ``dtype`` (a dtype or a type)."""
    if isinstance(dtype, types.DType):
        element = dtype.dtype
    elif isinstance(dtype, types.NumberClass):
        element = dtype.instance_type
    else:
        return None
    if not isinstance(address, types.Integer):
        return None
    target = types.CPointer(element)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(target))

    return target(address, dtype), codegen


def _raw(pointer_type: Any, index: Any) -> bool:
    return isinstance(pointer_type, types.CPointer) and isinstance(index, types.Integer)


@intrinsic
def load(typingctx: Any, data: Any, index: Any) -> Any:
    """Read element ``index`` of a pointer's elements (a bool: from its byte).

    numba's own ``pointer[index]`` reads a bool's byte as a 1-bit value (an LLVM type
    error); this reads every type as its memory layout stores it. No reference counting: a
    walker's row loop that passes pointers, not arrays, makes no runtime calls per row.
    """
    if not _raw(data, index):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        raw = builder.load(builder.gep(args[0], [args[1]]))
        return context.data_model_manager[data.dtype].from_data(builder, raw)

    return data.dtype(data, index), codegen


@intrinsic
def save(typingctx: Any, data: Any, index: Any, value: Any) -> Any:
    """Write ``value`` (cast to the elements' type) as element ``index`` of a pointer's."""
    if not _raw(data, index):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        item = context.cast(builder, args[2], signature.args[2], data.dtype)
        stored = context.data_model_manager[data.dtype].as_data(builder, item)
        builder.store(stored, builder.gep(args[0], [args[1]]))
        return context.get_dummy_value()

    return types.void(data, index, value), codegen


@intrinsic
def address(typingctx: Any, data: Any) -> Any:
    """Return a pointer's address as an unsigned integer."""
    if not isinstance(data, types.CPointer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.ptrtoint(args[0], context.get_value_type(types.uint64))

    return types.uint64(data), codegen


@intrinsic
def itemsize(typingctx: Any, data: Any) -> Any:
    """Return the size in bytes of a pointer's elements (a constant)."""
    if not isinstance(data, types.CPointer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        size = context.get_abi_sizeof(context.get_data_type(data.dtype))
        return context.get_constant(types.uint64, size)

    return types.uint64(data), codegen


@njit(inline="always")
def _extent(a: Any) -> Any:
    """Return the first and one past the last byte ``a`` spans (equal where it is empty)."""
    low = a.ctypes.data
    high = low
    for d in range(a.ndim):
        if a.shape[d] == 0:
            return low, low
        span = (a.shape[d] - 1) * a.strides[d]
        if span < 0:
            low += span
        else:
            high += span
    return low, high + a.itemsize


@njit(inline="always")
def _same_elements(o: Any, a: Any) -> bool:
    """Tell whether ``a`` reads, for each element of ``o``, exactly that element."""
    if a.ndim != o.ndim or a.ctypes.data != o.ctypes.data or a.itemsize != o.itemsize:
        return False
    for d in range(o.ndim):
        if a.shape[d] != o.shape[d] or (o.shape[d] > 1 and a.strides[d] != o.strides[d]):
            return False
    return True


@njit(inline="always")
def _check(o: Any, a: Any) -> int:
    if a.ctypes.data % a.itemsize != 0:
        return UNALIGNED
    o_low, o_high = _extent(o)
    a_low, a_high = _extent(a)
    if o_low < a_high and a_low < o_high and not _same_elements(o, a):
        return OVERLAP
    return READY


@njit(inline="always")
def _copy(tile: Any, source: int, kind: Any, itemsize: int) -> None:
    """Copy the strided elements ``tile`` describes from ``source`` into the tile, in order."""
    rank = tile[1]
    target = pointer(tile[2], kind)
    shape = tile[TILE_FIELDS : TILE_FIELDS + rank]
    strides = tile[TILE_FIELDS + rank : TILE_FIELDS + 2 * rank]
    inner, step = shape[rank - 1], strides[rank - 1]
    outer = 1
    for d in range(rank - 1):
        outer *= shape[d]
    k = 0
    for row in range(outer):
        offset = source
        rest = row
        for d in range(rank - 2, -1, -1):
            offset += (rest % shape[d]) * strides[d]
            rest //= shape[d]
        values = pointer(offset, kind)
        if step == 0:  # one element, stretched
            value = values[0]
            for c in range(inner):
                target[k + c] = value
        elif step == itemsize:  # a contiguous run: a vectorised copy
            for c in range(inner):
                target[k + c] = values[c]
        else:
            for c in range(inner):
                target[k + c] = pointer(offset + c * step, kind)[0]
        k += inner


@njit(inline="always")
def _fill(tile: Any, source: int, itemsize: int) -> None:
    if itemsize == 1:
        _copy(tile, source, np.uint8, 1)
    elif itemsize == 2:
        _copy(tile, source, np.uint16, 2)
    elif itemsize == 4:
        _copy(tile, source, np.uint32, 4)
    else:
        _copy(tile, source, np.uint64, 8)


@njit(nogil=True, cache=True)
def enter(where: Any, tiles: Any, o: Any, x: Any, y: Any, z: Any) -> int:
    """Check the arrays of one call and fill ``where`` and the tiles for the walker.

    ``where`` gets the addresses of ``o`` and the operands ``x, y, z`` (an operand that is
    tiled: its tile's, after the tile is filled from it), then zeros: the walkers' row
    counters, one per part of the rows.
    Each row of ``tiles`` names the operand (1, 2 or 3), the rank of the part copied, the
    tile's address, that part's shape and its strides in bytes from the operand's address.
    ``where``'s entries after the addresses are the walkers' row counters, zeroed.
    Returns `READY`, or `UNALIGNED` or `OVERLAP` having written nothing.
    """
    if o.ctypes.data % o.itemsize != 0:
        return UNALIGNED
    found: int = max(_check(o, x), _check(o, y), _check(o, z))  # OVERLAP over UNALIGNED
    if found != READY:
        return found
    where[0] = o.ctypes.data
    where[1] = x.ctypes.data
    where[2] = y.ctypes.data
    where[3] = z.ctypes.data
    for t in range(tiles.shape[0]):
        tile = tiles[t]
        j = tile[0]
        itemsize = x.itemsize if j == 1 else y.itemsize if j == 2 else z.itemsize
        _fill(tile, where[j], itemsize)
        where[j] = tile[2]
    for part in range(4, where.size):
        where[part] = 0  # no row handed out yet
    return READY


_WORDS: Final = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def compile_entry(kinds: tuple[tuple[int, int], ...]) -> Any:
    """Return `enter` compiled for arrays of these (itemsize, number of dimensions), four.

    The entry reads only addresses, shapes and strides, so an array is typed as unsigned
    integers of its itemsize (1, 2, 4 or 8 bytes), with any layout: the entry takes every
    array of those itemsizes and ranks (float16 and complex64 too). Called directly (no
    dispatcher), it must be given exactly those.
    """
    arrays = [types.Array(from_dtype(np.dtype(_WORDS[size])), ndim, "A") for size, ndim in kinds]
    signature = (types.int64[::1], types.int64[:, ::1], *arrays)
    return enter.compile(signature)
