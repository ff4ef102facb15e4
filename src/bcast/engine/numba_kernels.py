"""The numba code of `bcast.engine.compiled`: one row walker, specialised per operation.

Imported only by `bcast.engine.compiled`, only when numba is installed, and only on the first
large call. The operation is a literal integer (an index into `SCALARS`): numba compiles
the walker once per operation and dtypes, and caches the machine code on disk
(``cache=True``), so later processes load it instead of compiling it again.
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
from typing import Any, Final

import llvmlite.ir as ir
import numpy as np
from numba import carray, literally, njit, typeof, types
from numba.core import cgutils
from numba.core.errors import NumbaError
from numba.extending import intrinsic, overload

from bcast.engine.numba_entry import compile_entry, pointer
from bcast.engine.numba_pow import pow_float32 as _pow
from bcast.engine.numba_pow import pow_special

__all__ = ["SCALARS", "compile_entry", "walk", "walker"]

ALIGN: Final = 64
"""Streaming stores start at an address aligned to this (a cache line; an AVX-512 vector)."""


def _copy(x: Any, y: Any, z: Any) -> Any:
    return x


def _select(x: Any, y: Any, z: Any) -> Any:
    # x: the condition (bool); -uint64(x) is all ones where it holds. Bit arithmetic loads
    # both values, which vectorises (a branch, or a select of addresses, makes LLVM gather
    # lane by lane); the store keeps the low bits, the value's own width.
    return z ^ ((y ^ z) & -np.uint64(x))


def _add(x: Any, y: Any, z: Any) -> Any:
    return x + y


def _sub(x: Any, y: Any, z: Any) -> Any:
    return x - y


def _mul(x: Any, y: Any, z: Any) -> Any:
    return x * y


def _div(x: Any, y: Any, z: Any) -> Any:
    return x / y


def _equal(x: Any, y: Any, z: Any) -> Any:
    return x == y


def _greater(x: Any, y: Any, z: Any) -> Any:
    return x > y


def _less(x: Any, y: Any, z: Any) -> Any:
    return x < y


def _and(x: Any, y: Any, z: Any) -> Any:
    return x & y


def _or(x: Any, y: Any, z: Any) -> Any:
    return x | y


def _xor(x: Any, y: Any, z: Any) -> Any:
    return x ^ y


def _fix(op: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, n: Any) -> None:
    raise NotImplementedError  # compiled code only: see the overload below


@overload(_fix, inline="always")
def _fix_overload(op: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, n: Any) -> Any:
    """After a row: Pow recomputes its special elements with powf; other operations: nothing."""
    if not isinstance(op, types.IntegerLiteral):
        return None
    if _NAMES[op.literal_value] != "pow":

        def nothing(op: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, n: Any) -> None:
            pass

        return nothing

    def recompute(op: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, n: Any) -> None:
        special = False
        for c in range(n):  # a reduction: vectorised
            special |= pow_special(x[xo + c], y[yo + c])
        if special:
            for c in range(n):
                if pow_special(x[xo + c], y[yo + c]):
                    o[oo + c] = x[xo + c] ** y[yo + c]  # powf, as NumPy's float32 power

    return recompute


SCALARS: Final = {
    "copy": _copy,
    "where": _select,
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "equal": _equal,
    "greater": _greater,
    "less": _less,
    "and_": _and,
    "or_": _or,
    "xor": _xor,
}
"""Each operation's scalar function of three operands (unused ones are never loaded)."""

_NAMES: Final = tuple(SCALARS)  # an operation's code is its index here
_JITTED: Final = tuple(njit(inline="always")(f) for f in SCALARS.values())
_entries: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()


def _scalar(op: Any, x: Any, y: Any, z: Any) -> Any:
    raise NotImplementedError  # compiled code only: see the overload below


@overload(_scalar, inline="always")
def _scalar_overload(op: Any, x: Any, y: Any, z: Any) -> Any:
    if not isinstance(op, types.IntegerLiteral):
        return None
    function = _JITTED[op.literal_value]

    def impl(op: Any, x: Any, y: Any, z: Any) -> Any:
        return function(x, y, z)

    return impl


def _streaming_store(align: int | None) -> Any:
    """Build an intrinsic ``store(array, index, value)``, a non-temporal store.

    It claims ``align`` bytes' alignment (None: the element's own). LLVM vectorises such
    stores only where a vector fits the alignment, so runs claimed aligned must be
    (`_streamed_row`).
    """

    @intrinsic
    def store(typingctx: Any, array: Any, index: Any, value: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            array_type, _, value_type = signature.args
            target, position, item = args
            view = context.make_array(array_type)(context, builder, target)
            slot = cgutils.get_item_pointer(
                context, builder, array_type, view, [position], wraparound=False
            )
            item = context.cast(builder, item, value_type, array_type.dtype)
            stored = context.data_model_manager[array_type.dtype].as_data(builder, item)
            written = builder.store(stored, slot, align=align)  # a bool is a byte here
            flag = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
            written.set_metadata("nontemporal", flag)
            return context.get_dummy_value()

        return types.void(array, index, value), codegen

    return store


_stream = _streaming_store(ALIGN)  # inside runs that start ALIGN-aligned: vector stores
_stream_any = _streaming_store(None)  # anywhere: one element at a time (movnti)


@intrinsic
def _fence(typingctx: Any) -> Any:
    """Order every store before it: streaming stores are weakly ordered."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


_ROW_FLAGS: Final = {"contract"}
"""Multiply-adds may fuse (Pow's polynomials); every other operation is one IEEE operation."""

# Rows are runs of the 1-D arrays from an offset; offsets and lengths are unsigned (uint64):
# numba then emits no negative-index wraparound, so addresses are affine and LLVM vectorises
# the loops. Nothing here slices an array per row: each slice is a reference count taken
# and dropped, which costs more than the work on short rows.


@njit(nogil=True, error_model="numpy", fastmath=_ROW_FLAGS, cache=True)
def _row(
    op: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any, zo: Any, n: Any
) -> None:
    literally(op)
    for c in range(n):
        o[oo + c] = _scalar(op, x[xo + c], y[yo + c], z[zo + c])
    _fix(op, o, oo, x, xo, y, yo, n)


@njit(nogil=True, error_model="numpy", fastmath=_ROW_FLAGS, cache=True)
def _streamed_row(
    op: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any, zo: Any, n: Any
) -> None:
    # Streaming stores of one element up to the first aligned address, of vectors over whole
    # ALIGN-byte runs, of one element for the rest. Every store of the row streams: a cache
    # line written by plain and streaming stores (the ends of rows that do not start on a
    # line) costs more than plain stores alone (measured: 4x on rows of 128 float32).
    literally(op)
    align = np.uint64(ALIGN)
    size = np.uint64(o.itemsize)
    address = np.uint64(o.ctypes.data) + oo * size
    head = min((align - address % align) % align // size, n)
    step = align // size
    body = head + (n - head) // step * step
    for c in range(head):
        _stream_any(o, oo + c, _scalar(op, x[xo + c], y[yo + c], z[zo + c]))
    for c in range(head, body):
        _stream(o, oo + c, _scalar(op, x[xo + c], y[yo + c], z[zo + c]))
    for c in range(body, n):
        _stream_any(o, oo + c, _scalar(op, x[xo + c], y[yo + c], z[zo + c]))
    _fix(op, o, oo, x, xo, y, yo, n)


@njit(nogil=True, cache=True)
def _gather(buf: Any, base: Any, offset: int, step: int, n: int) -> None:
    """Fill ``buf`` with one row of an operand that is stretched (step 0) or strided."""
    if step == 0:
        value = base[offset]
        for c in range(n):
            buf[c] = value
    else:
        for c in range(n):
            buf[c] = base[offset + c * step]


@intrinsic
def _fetch_add(typingctx: Any, counter: Any, value: Any) -> Any:
    """Add ``value`` to ``counter[0]`` (an int64 array) atomically; return the old value."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        view = context.make_array(signature.args[0])(context, builder, args[0])
        delta = context.cast(builder, args[1], signature.args[1], types.int64)
        return builder.atomic_rmw("add", view.data, delta, "monotonic")

    return types.int64(counter, value), codegen


@njit(inline="always")
def _run(address: Any, dtype: Any, strides: Any, k: int, shape: Any) -> Any:
    """Return the 1-D run of memory that array ``k`` spans from ``address``."""
    span = 1
    for d in range(shape.size):
        span += (shape[d] - 1) * strides[k, d]
    return carray(pointer(address, dtype), span)


@njit(nogil=True, error_model="numpy", cache=True)
def walk(
    op: Any,
    addresses: Any,
    out_dtype: Any,
    x_dtype: Any,
    y_dtype: Any,
    z_dtype: Any,
    strides: Any,
    shape: Any,
    claimed: Any,
    chunk: int,
    stream: bool,
) -> None:
    """Compute rows of the output, ``chunk`` at a time, until every row is claimed.

    The output and the operands x, y, z are the arrays at ``addresses`` (their dtypes
    follow); ``shape`` is the output's (the last axis: one row); ``strides[k]`` are, in
    elements and none negative, the output's (k = 0) and the operands' strides on each
    axis, 0 where stretched. An operand whose row is not contiguous is gathered into a
    buffer first (a stretched one only when its value changes).

    ``claimed[0]`` counts the rows handed out: each thread that runs this on the same
    arrays takes the next ``chunk`` rows from it (an atomic add) until none are left, so
    threads share the work in compiled code and one that the machine slows takes less.
    """
    literally(op)
    for d in range(shape.size):  # (np.any would allocate)
        if shape[d] == 0:
            return
    if shape.size == 0:
        return
    o = _run(addresses[0], out_dtype, strides, 0, shape)
    x = _run(addresses[1], x_dtype, strides, 1, shape)
    y = _run(addresses[2], y_dtype, strides, 2, shape)
    z = _run(addresses[3], z_dtype, strides, 3, shape)
    if np.uint64(o.ctypes.data) % np.uint64(o.itemsize) != 0:
        # Elements off their natural alignment never reach an ALIGN boundary, where the
        # streaming vector stores must start. Checked here, once: a branch in _streamed_row
        # cost its loop the vectorisation.
        stream = False
    rank = shape.size
    n = shape[rank - 1]
    rows = 1
    for d in range(rank - 1):
        rows *= shape[d]
    # One allocation for the counters, one per gathered row (each costs about as much as
    # a short row of work).
    scratch = np.zeros(rank + 7, np.int64)
    index, offsets, last = scratch[: rank - 1], scratch[rank - 1 : rank + 3], scratch[rank + 3 :]
    last[:] = -1
    sx, sy, sz = strides[1, rank - 1], strides[2, rank - 1], strides[3, rank - 1]
    rx = np.empty(n, x.dtype) if sx != 1 else x  # the row: gathered, or read in place
    ry = np.empty(n, y.dtype) if sy != 1 else y
    rz = np.empty(n, z.dtype) if sz != 1 else z
    bx, by, bz = rx, ry, rz
    zero = np.uint64(0)
    length = np.uint64(n)
    while True:
        start = _fetch_add(claimed, chunk)
        if start >= rows:
            break
        rest = start
        for d in range(rank - 2, -1, -1):
            index[d] = rest % shape[d]
            rest //= shape[d]
        for k in range(4):
            offsets[k] = 0
            for d in range(rank - 1):
                offsets[k] += index[d] * strides[k, d]
        for _ in range(start, min(start + chunk, rows)):
            if sx != 1 and (sx != 0 or offsets[1] != last[1]):
                _gather(bx, x, offsets[1], sx, n)
                last[1] = offsets[1]
            if sy != 1 and (sy != 0 or offsets[2] != last[2]):
                _gather(by, y, offsets[2], sy, n)
                last[2] = offsets[2]
            if sz != 1 and (sz != 0 or offsets[3] != last[3]):
                _gather(bz, z, offsets[3], sz, n)
                last[3] = offsets[3]
            oo = np.uint64(offsets[0])
            xo = zero if sx != 1 else np.uint64(offsets[1])
            yo = zero if sy != 1 else np.uint64(offsets[2])
            zo = zero if sz != 1 else np.uint64(offsets[3])
            if stream:
                _streamed_row(op, o, oo, rx, xo, ry, yo, rz, zo, length)
            else:
                _row(op, o, oo, rx, xo, ry, yo, rz, zo, length)
            d = rank - 2  # the next row: an odometer over the outer axes
            while d >= 0:
                index[d] += 1
                for k in range(4):
                    offsets[k] += strides[k, d]
                if index[d] < shape[d]:
                    break
                for k in range(4):
                    offsets[k] -= shape[d] * strides[k, d]
                index[d] = 0
                d -= 1
    if stream:
        _fence()


def walker(name: str, dtypes: list[np.dtype[Any]]) -> Any:
    """Return `walk` compiled for operation ``name`` and four dtypes, its first argument bound.

    Resolved once per operation and dtypes, then called directly: a call through the
    dispatcher would make numba re-derive the literal operation on every call
    (milliseconds). ``compile`` reads numba's disk cache before compiling. None, with a
    warning the first time, where numba cannot compile it: the engine then uses NumPy.
    """
    key = (name, *dtypes)
    entry = _entries.get(key, False)
    if entry is False:
        with _lock:
            entry = _entries.get(key, False)
            if entry is False:
                entry = _entries[key] = _compile(name, tuple(typeof(d) for d in dtypes))
    return entry


def _compile(name: str, dtype_types: tuple[Any, ...]) -> Any:
    code = _NAMES.index(name)
    signature = (
        types.literal(code),
        typeof(np.zeros(4, np.int64)),
        *dtype_types,
        typeof(np.zeros((4, 1), np.int64)),
        typeof(np.zeros(1, np.int64)),
        typeof(np.zeros(1, np.int64)),
        types.int64,
        types.boolean,
    )
    kinds = "/".join(dict.fromkeys(str(t.dtype) for t in dtype_types))
    # Compiling takes seconds, reading numba's disk cache milliseconds: say so only when the
    # wait is noticeable, i.e. when it really compiles (once per machine).
    notice = threading.Timer(_NOTICE_AFTER, _say_compiling, (name, kinds))
    notice.daemon = True
    notice.start()
    try:
        compiled = walk.compile(signature)
    except NumbaError as exc:
        kinds = ", ".join(str(t.dtype) for t in dtype_types)
        warnings.warn(
            f"bcast: numba could not compile {name} for {kinds}; NumPy computes it "
            f"instead ({type(exc).__name__}: {str(exc).splitlines()[0]})",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    finally:
        notice.cancel()
    return functools.partial(compiled, code)


_NOTICE_AFTER: Final = 0.5
"""Seconds of compiling after which `_compile` tells stderr what it is doing."""


def _say_compiling(name: str, kinds: str) -> None:
    sys.stderr.write(f"bcast: compiling {name}/{kinds}, once per machine (numba caches it)\n")
    sys.stderr.flush()
