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

import numpy as np
from numba import literally, njit, typeof, types
from numba.core.errors import NumbaError

from bcast.engine.numba_entry import compile_entry, itemsize, load, pointer, save
from bcast.engine.numba_rows import NAMES, SCALARS, arity, fence, run_row
from bcast.engine.numba_team import fetch_add, join, post

__all__ = ["SCALARS", "compile_entry", "walk", "walker"]

_entries: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()


@njit(nogil=True, cache=True)
def _gather(buf: Any, base: Any, offset: int, step: int, n: int) -> None:
    """Fill ``buf`` with one row of an operand that is stretched (step 0) or strided."""
    if step == 0:
        value = load(base, offset)
        for c in range(n):
            save(buf, c, value)
    else:
        for c in range(n):
            save(buf, c, load(base, offset + c * step))


@njit(nogil=True, error_model="numpy", cache=True)
def walk(
    op: Any,
    where: Any,
    out_dtype: Any,
    x_dtype: Any,
    y_dtype: Any,
    z_dtype: Any,
    layout: Any,
    chunk: int,
    stream: bool,
    home: int,
    board: Any,
    helpers: int,
) -> None:
    """Compute rows of the output, ``chunk`` at a time, until every row is claimed.

    The output and the operands x, y, z are the arrays at the addresses ``where[:4]``
    (their dtypes follow). ``layout[4]`` is the output's shape (the last axis: one row);
    ``layout[k]`` (k < 4) are, in elements and none negative, the output's (k = 0) and the
    operands' strides on each axis, 0 where stretched. (Two arrays where there could be
    four: each array argument costs the call about 50 ns.) An operand whose row is not
    contiguous is gathered into a buffer first (a stretched one only when its value
    changes); x or y stretched over the row is read as one value instead (the row's kind).

    The rows are cut into ``claimed.size`` equal parts (``claimed`` is ``where[4:]``), one
    per thread that runs this on the same arrays; ``claimed[p]`` counts the rows of part
    ``p`` handed out. A thread takes ``chunk`` rows at a time (an atomic add) from part
    ``home`` first, then from the others until none are left: each thread writes the same
    part on every call, whose lines stay in its core's cache, and one that the machine
    slows takes less. The caller's thread (``helpers`` > 0) posts the walk to that many
    workers on ``board`` first and joins them at the end (`bcast.engine.numba_team`): it
    returns once no worker writes any more.
    """
    literally(op)
    addresses, claimed = where[:4], where[4:]
    strides, shape = layout[:4], layout[4]
    for d in range(shape.size):  # (np.any would allocate)
        if shape[d] == 0:
            return
    if shape.size == 0:
        return
    ticket = post(board, helpers) if helpers > 0 else 0
    o = pointer(addresses[0], out_dtype)
    x = pointer(addresses[1], x_dtype)
    y = pointer(addresses[2], y_dtype)
    z = pointer(addresses[3], z_dtype)
    if np.uint64(addresses[0]) % itemsize(o) != 0:
        # Elements off their natural alignment never reach an ALIGN boundary, where the
        # streaming vector stores must start. Checked here, once: a branch in _streamed_row
        # cost its loop the vectorisation.
        stream = False
    rank = shape.size
    n = shape[rank - 1]
    rows = 1
    for d in range(rank - 1):
        rows *= shape[d]
    sx, sy, sz = strides[1, rank - 1], strides[2, rank - 1], strides[3, rank - 1]
    kind = 1 if sx == 0 else 2 if sy == 0 else 0
    count = arity(op)
    gx = sx != 1 and kind != 1  # the rows gathered
    gy = sy != 1 and kind != 2 and count >= 2
    gz = sz != 1 and count == 3
    # One allocation (each costs about as much as a short row of work): the counters, then
    # a buffer per gathered row, in whole words; the rows read: a buffer's, or in place.
    wx = (n * itemsize(x) + 7) // 8 if gx else 0
    wy = (n * itemsize(y) + 7) // 8 if gy else 0
    wz = (n * itemsize(z) + 7) // 8 if gz else 0
    scratch = np.zeros(rank + 7 + wx + wy + wz, np.int64)
    index, offsets, last = scratch[: rank - 1], scratch[rank - 1 : rank + 3], scratch[rank + 3 :]
    last[:4] = -1
    buffers = scratch.ctypes.data + 8 * (rank + 7)
    rx = pointer(buffers, x_dtype) if gx else x
    ry = pointer(buffers + 8 * wx, y_dtype) if gy else y
    rz = pointer(buffers + 8 * (wx + wy), z_dtype) if gz else z
    zero = np.uint64(0)
    length = np.uint64(n)
    parts = claimed.size
    for turn in range(parts):
        part = (home + turn) % parts
        first, end = rows * part // parts, rows * (part + 1) // parts
        while True:
            start = first + fetch_add(claimed, part, chunk)
            if start >= end:
                break
            rest = start
            for d in range(rank - 2, -1, -1):
                index[d] = rest % shape[d]
                rest //= shape[d]
            for k in range(4):
                offsets[k] = 0
                for d in range(rank - 1):
                    offsets[k] += index[d] * strides[k, d]
            for _ in range(start, min(start + chunk, end)):
                if gx and (sx != 0 or offsets[1] != last[1]):
                    _gather(rx, x, offsets[1], sx, n)
                    last[1] = offsets[1]
                if gy and (sy != 0 or offsets[2] != last[2]):
                    _gather(ry, y, offsets[2], sy, n)
                    last[2] = offsets[2]
                if gz and (sz != 0 or offsets[3] != last[3]):
                    _gather(rz, z, offsets[3], sz, n)
                    last[3] = offsets[3]
                oo = np.uint64(offsets[0])
                xo = zero if gx else np.uint64(offsets[1])
                yo = zero if gy else np.uint64(offsets[2])
                zo = zero if gz else np.uint64(offsets[3])
                if kind == 1:
                    run_row(op, 1, stream, o, oo, rx, xo, ry, yo, rz, zo, length)
                elif kind == 2:
                    run_row(op, 2, stream, o, oo, rx, xo, ry, yo, rz, zo, length)
                else:
                    run_row(op, 0, stream, o, oo, rx, xo, ry, yo, rz, zo, length)
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
        fence()
    if helpers > 0:
        join(board, helpers, ticket)
    scratch[0] = 0  # the buffers live until here


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
    code = NAMES.index(name)
    signature = (
        types.literal(code),
        typeof(np.zeros(5, np.int64)),
        *dtype_types,
        typeof(np.zeros((5, 1), np.int64)),
        types.int64,
        types.boolean,
        types.int64,
        typeof(np.zeros(1, np.int64)),
        types.int64,
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
