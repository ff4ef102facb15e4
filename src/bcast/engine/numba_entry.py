"""The compiled front of a repeated walk: addresses, the checks they need, and the tiles.

Imported with `bcast.engine.numba_kernels`, only when numba is installed. A walk planned once
(`bcast.engine.compiled.Runner`) needs, on every call, what only the arrays of that call
know: their addresses (``__array_interface__`` costs a microsecond per array in Python;
numba unboxes an array in tens of nanoseconds), whether each is on its natural alignment,
whether the output overlaps an operand, and the values of the tiles of small operands.
`enter` does all of it in one compiled call, and on one thread it then runs the walk too,
calling the walker's machine code (`call_walker`): a replay is one call from Python. It is
compiled once per number of dimensions and itemsize of the arrays it is given, and cached on
disk like the walkers.

The walkers read and write memory through the raw pointers made here (`pointer`, `load`,
`save`): no array objects, so no reference counting, in their row loops.
"""

from __future__ import annotations

from typing import Any, Final

import llvmlite.ir as ir
import numpy as np
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.numpy_support import from_dtype

from bcast.engine import numba_cache  # noqa: F401  (before any cache=True kernel)
from bcast.engine.numba_team import fetch_add
from bcast.engine.runner import HEAD, READY, WALKED

__all__ = [
    "BUSY",
    "FAILED",
    "OVERLAP",
    "UNALIGNED",
    "WALKER",
    "address",
    "call_walker",
    "compile_entry",
    "enter",
    "enter_one",
    "enter_two",
    "itemsize",
    "load",
    "native",
    "pointer",
    "save",
    "stack",
]

UNALIGNED: Final = 1
"""An array is off its natural alignment: NumPy's path computes."""
OVERLAP: Final = 2
"""The output overlaps an operand (other than element for element): NumPy's path computes."""
FAILED: Final = 4
"""The walker `enter` called failed (it could not allocate): NumPy's path computes."""
BUSY: Final = 5
"""Another thread is walking with this head's tiles: NumPy's path computes."""

# `enter`'s ``head``: where each field is (the runner writes them in `HEAD`'s order)
_WALKER, _WHERE, _PARTS, _LAYOUT, _CHUNK, _STREAM, _TILES, _TILE_ROWS, _TILE_WIDTH, _BUSY = (
    HEAD.index(field)
    for field in (
        "walker", "where", "parts", "layout", "chunk", "stream", "tiles", "tile_rows",
        "tile_width", "busy",
    )
)  # fmt: skip

WALKER: Final = (
    types.int64,  # op: a literal in the walker, whose machine code ignores the value
    types.int64,  # where
    types.int64,  # parts
    types.DType(types.float64),  # the four dtypes: types only (an opaque pointer each)
    types.DType(types.float64),
    types.DType(types.float64),
    types.DType(types.float64),
    types.int64,  # layout
    types.int64,  # chunk
    types.boolean,  # stream
    types.int64,  # home
    types.int64,  # board
    types.int64,  # helpers
)
"""The arguments of `bcast.engine.numba_kernels.walk` as its machine code takes them."""

_OWN: Final = 5
"""The words of a one-thread walk's ``where`` on the entry's stack: four addresses, a counter."""

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


@intrinsic
def stack(typingctx: Any, words: Any) -> Any:
    """Return the address of ``words`` int64 (a literal) on the stack of the function."""
    if not isinstance(words, types.IntegerLiteral):
        return None
    count = words.literal_value

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        slot = cgutils.alloca_once(builder, ir.ArrayType(ir.IntType(64), count))
        return builder.ptrtoint(slot, context.get_value_type(types.int64))

    return types.int64(words), codegen


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
def _check(o: Any, low: int, high: int, a: Any) -> int:
    """Check operand ``a`` against the output ``o``, which spans bytes ``low`` to ``high``."""
    if a.ctypes.data % a.itemsize != 0:
        return UNALIGNED
    a_low, a_high = _extent(a)
    if low < a_high and a_low < high and not _same_elements(o, a):
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


# Compiled once, on its own, and called: inlined, its four copies of `_copy` were most of
# every entry's compile time (an entry per itemsizes and ranks: 4.6 s to compile a binary
# one), and a call costs nothing next to a tile's copy.
@njit(nogil=True, cache=True)
def _fill(tile: Any, source: int, itemsize: int) -> None:
    """Fill ``tile`` from the operand at address ``source`` (elements of ``itemsize`` bytes)."""
    if itemsize == 1:
        _copy(tile, source, np.uint8, 1)
    elif itemsize == 2:
        _copy(tile, source, np.uint16, 2)
    elif itemsize == 4:
        _copy(tile, source, np.uint32, 4)
    else:
        _copy(tile, source, np.uint64, 8)


@intrinsic
def call_walker(
    typingctx: Any, walker: Any, where: Any, parts: Any, layout: Any, chunk: Any, stream: Any
) -> Any:
    """Run the walker at address ``walker`` on one thread (part 0 first, no helpers).

    Called as numba calls its own functions (`WALKER`'s arguments, a status returned);
    returns that status: 0 when the walk is done.
    """
    if not all(isinstance(t, types.Integer) for t in (walker, where, parts, layout, chunk)):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        conv = context.call_conv
        function = conv.get_function_type(types.none, WALKER)
        target = builder.inttoptr(args[0], function.as_pointer())
        returned = conv.get_return_type(types.none).pointee
        slot = cgutils.alloca_once_value(builder, cgutils.get_null_value(returned))
        raised = cgutils.alloca_once(builder, function.args[1].pointee)
        zero = context.get_constant(types.int64, 0)
        typeless = cgutils.get_null_value(context.get_value_type(WALKER[3]))
        flag = context.cast(builder, args[5], signature.args[5], types.boolean)
        values = [zero, *args[1:3], *[typeless] * 4, args[3], args[4], flag, zero, zero, zero]
        passed = list(conv._get_arg_packer(WALKER).as_arguments(builder, values))
        status = builder.call(target, [slot, raised, *passed])
        return builder.sext(status, context.get_value_type(types.int64))

    return types.int64(walker, where, parts, layout, chunk, stream), codegen


def native(dispatcher: Any, signature: tuple[Any, ...]) -> int:
    """Return the machine code address of ``dispatcher`` compiled for ``signature``.

    0 where its arguments are not passed as `WALKER` 's are (`call_walker` then cannot call
    it) or numba does not give the address.
    """
    result = dispatcher.overloads.get(tuple(signature))
    if result is None:
        return 0
    conv = result.target_context.call_conv
    expected = conv.get_function_type(types.none, WALKER)
    found = conv.get_function_type(result.signature.return_type, result.signature.args)
    if str(found) != str(expected):
        return 0
    return int(result.library.get_pointer_to_function(result.fndesc.llvm_func_name) or 0)


@njit(inline="always")
def _enter(at_head: int, o: Any, x: Any, y: Any, z: Any, found: int) -> int:
    """Fill the walker's addresses and tiles for one call's arrays, maybe walk.

    ``at_head`` is the address of the int64 fields `HEAD` names (``head``); ``found`` what
    `_check` found of the operands (the entry checks each distinct one once, OVERLAP over
    UNALIGNED). The walker's ``where`` gets the addresses of ``o`` and the operands ``x, y,
    z`` (an operand that is tiled: its tile's, after the tile is filled from it), then
    zeros: its row counters, one per part of the rows. Each row of the table of tiles names
    the operand (1, 2 or 3), the rank of the part copied, the tile's address, that part's
    shape and its strides in bytes from the operand's address. Then, where ``head`` gives a
    walker, it runs the walk on this thread.
    Returns `WALKED` (or `FAILED`) having walked, `READY` for the caller to walk, or
    `UNALIGNED`, `OVERLAP` or `BUSY` having written nothing.
    """
    if o.ctypes.data % o.itemsize != 0:
        return UNALIGNED
    if found != READY:
        return found
    head = carray(pointer(at_head, np.int64), (len(HEAD),))
    parts = head[_PARTS]
    walker = head[_WALKER]
    walking = walker != 0 and parts == 1
    # Walking here (one thread, one part): the addresses and the row counter on this call's
    # stack, so that calls from several threads share nothing but the tiles, which one call
    # at a time holds (the others answer BUSY at once; a caller that walks holds a lock).
    at = stack(_OWN) if walking else head[_WHERE]
    held = walking and head[_TILE_ROWS] > 0
    if held and fetch_add(head, _BUSY, 1) != 0:
        fetch_add(head, _BUSY, -1)
        return BUSY
    where = carray(pointer(at, np.int64), (4 + parts,))
    where[0] = o.ctypes.data
    where[1] = x.ctypes.data
    where[2] = y.ctypes.data
    where[3] = z.ctypes.data
    tiles = carray(pointer(head[_TILES], np.int64), (head[_TILE_ROWS], head[_TILE_WIDTH]))
    for t in range(tiles.shape[0]):
        tile = tiles[t]
        j = tile[0]
        itemsize = x.itemsize if j == 1 else y.itemsize if j == 2 else z.itemsize
        _fill(tile, where[j], itemsize)
        where[j] = tile[2]
    for part in range(4, where.size):
        where[part] = 0  # no row handed out yet
    if walker == 0:
        return READY
    failed = call_walker(walker, at, parts, head[_LAYOUT], head[_CHUNK], head[_STREAM] != 0)
    if held:
        fetch_add(head, _BUSY, -1)
    return FAILED if failed else WALKED


# An entry per number of operands: an array passed twice would cost its unboxing twice (about
# 40 ns each; so would ``head`` as an array rather than its address). Each checks its own
# operands, so that numba inlines (and compiles) one check per operand.


@njit(nogil=True, cache=True)
def enter(at_head: int, o: Any, x: Any, y: Any, z: Any) -> int:
    """`_enter` on three operands (Where): see there.

    Returns `WALKED` (or `FAILED`) having walked, `READY` for the caller to walk, or
    `UNALIGNED`, `OVERLAP` or `BUSY` having written nothing.
    """
    low, high = _extent(o)
    found = max(_check(o, low, high, x), _check(o, low, high, y), _check(o, low, high, z))
    status: int = _enter(at_head, o, x, y, z, found)
    return status


@njit(nogil=True, cache=True)
def enter_two(at_head: int, o: Any, x: Any, y: Any) -> int:
    """`_enter` on two operands (the binary operators): the walker's z is x."""
    low, high = _extent(o)
    found = max(_check(o, low, high, x), _check(o, low, high, y))
    status: int = _enter(at_head, o, x, y, x, found)
    return status


@njit(nogil=True, cache=True)
def enter_one(at_head: int, o: Any, x: Any) -> int:
    """`_enter` on one operand (Expand, Broadcast): the walker's y and z are x."""
    low, high = _extent(o)
    status: int = _enter(at_head, o, x, x, x, _check(o, low, high, x))
    return status


_WORDS: Final = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def compile_entry(kinds: tuple[tuple[int, int], ...]) -> Any:
    """Return the entry compiled for arrays of these (itemsize, number of dimensions).

    The output's, then one, two or three operands' (`enter_one`, `enter_two`, `enter`).

    The entry reads only addresses, shapes and strides, so an array is typed as unsigned
    integers of its itemsize (1, 2, 4 or 8 bytes), with any layout: the entry takes every
    array of those itemsizes and ranks (float16 and complex64 too). Called directly (no
    dispatcher), it must be given exactly those.
    """
    arrays = [types.Array(from_dtype(np.dtype(_WORDS[size])), ndim, "A") for size, ndim in kinds]
    entry = {2: enter_one, 3: enter_two, 4: enter}[len(kinds)]
    return entry.compile((types.int64, *arrays))
