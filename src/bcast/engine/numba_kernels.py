"""The numba code of `bcast.engine.compiled`: one row walker, specialised per operation.

Imported only by `bcast.engine.compiled`, only when numba is installed, and only on the first
large call. The operation is a literal integer (an index into `SCALARS`): numba compiles
the walker once per operation and dtypes, and caches the machine code on disk
(``cache=True``), so later processes load it instead of compiling it again.
"""

from __future__ import annotations

import functools
import platform
import sys
import threading
import warnings
from typing import Any, Final

import llvmlite.ir as ir
import numpy as np
from llvmlite.binding import get_host_cpu_features
from numba import carray, literally, njit, typeof, types
from numba.core import cgutils, config
from numba.core.errors import NumbaError
from numba.extending import intrinsic

from bcast.engine import numba_cache  # noqa: F401  (before any cache=True kernel)
from bcast.engine.numba_entry import (
    compile_entry,
    itemsize,
    load,
    native,
    pointer,
    save,
    stack,
)
from bcast.engine.numba_rows import (
    NAMES,
    ROW_FLAGS,
    SCALARS,
    arity,
    fence,
    run_called_row,
    run_row,
)
from bcast.engine.numba_team import LINE, fetch_add, join, post
from bcast.engine.runner import MAX_RANK

__all__ = ["NOTICES", "SCALARS", "compile_entry", "walk", "walker"]

_entries: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()


def _libc(builder: Any, name: str, result: Any, *arguments: Any) -> Any:
    """Declare the C library's function ``name`` (LLVM types) in the module being built."""
    kind = ir.FunctionType(result, list(arguments))
    return cgutils.get_or_insert_function(builder.module, kind, name)


@intrinsic
def _malloc(typingctx: Any, size: Any) -> Any:
    """Return the address of ``size`` new bytes from the C library (0 if none), as int64."""
    if not isinstance(size, types.Integer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        word, raw = ir.IntType(64), ir.IntType(8).as_pointer()
        found = builder.call(_libc(builder, "malloc", raw, word), [args[0]])
        return builder.ptrtoint(found, word)

    return types.int64(size), codegen


@intrinsic
def _free(typingctx: Any, found: Any) -> Any:
    """Give bytes `_malloc` returned back to the C library."""
    if not isinstance(found, types.Integer):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        raw = ir.IntType(8).as_pointer()
        builder.call(_libc(builder, "free", ir.VoidType(), raw), [builder.inttoptr(args[0], raw)])
        return context.get_dummy_value()

    return types.void(found), codegen


@njit(inline="always")
def _allocate(size: int) -> int:
    """Return the address of ``size`` new bytes (given back by `_free`); MemoryError if none."""
    found: int = _malloc(size)
    if found == 0:
        raise MemoryError("bcast: no memory for a walk's gathered rows")
    return found


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


def _walker_of(called: bool) -> Any:
    """Return numba's dispatcher of `walk`, whose rows are inlined or (``called``) calls."""

    def walk(
        op: Any,
        where: int,
        parts: int,
        out_dtype: Any,
        x_dtype: Any,
        y_dtype: Any,
        z_dtype: Any,
        layout: int,
        chunk: int,
        stream: bool,
        home: int,
        board: int,
        helpers: int,
    ) -> None:
        """Compute rows of the output, ``chunk`` at a time, until every row is claimed.

        Every argument is a number (`bcast.engine.numba_entry.WALKER`): the entry calls the
        walker through its address (`bcast.engine.numba_entry.enter`), and each array argument
        would cost a call from Python about 50 ns. ``where``, ``layout`` and ``board`` are
        addresses of int64 arrays. ``where`` holds the addresses of the output and the operands
        x, y, z (their dtypes follow), then ``parts`` row counters (``claimed``). ``layout`` is
        (5, `MAX_RANK`): ``layout[4]`` the output's shape (the last axis: one row),
        ``layout[k]`` (k < 4), in elements and none negative, the output's (k = 0) and the
        operands' strides on each axis, 0 where stretched. An operand whose row is not
        contiguous is gathered into a buffer first (a stretched one only when its value
        changes); x or y stretched over the row is read as one value instead (the row's kind).

        The rows are cut into ``parts`` equal parts, one per thread that runs this on the same
        arrays; ``claimed[p]`` counts the rows of part ``p`` handed out. A thread takes
        ``chunk`` rows at a time (an atomic add) from part ``home`` first, then from the
        others until none are left: each thread writes the same part on every call, whose
        lines stay in its core's cache, and one that the machine slows takes less. The
        caller's thread (``helpers`` > 0) posts the walk to that many workers on ``board``
        first and joins them at the end (`bcast.engine.numba_team`): it returns once no worker
        writes any more.
        """
        literally(op)
        held = carray(pointer(where, np.int64), (4 + parts,))
        addresses, claimed = held[:4], held[4:]
        table = carray(pointer(layout, np.int64), (5, MAX_RANK))
        strides, shape = table[:4], table[4]
        team = carray(pointer(board, np.int64), (LINE * (helpers + 1),))
        for d in range(shape.size):  # (np.any would allocate)
            if shape[d] == 0:
                return
        if shape.size == 0:
            return
        ticket = post(team, helpers) if helpers > 0 else 0
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
        # No allocation where no row is gathered (the counters are on the stack; an allocation
        # costs about as much as a short row of work), one otherwise: the buffers, in words.
        wx = (n * itemsize(x) + 7) // 8 if gx else 0
        wy = (n * itemsize(y) + 7) // 8 if gy else 0
        wz = (n * itemsize(z) + 7) // 8 if gz else 0
        index = carray(pointer(stack(MAX_RANK), np.int64), (MAX_RANK,))  # the outer axes' odometer
        buffers = _allocate(8 * (wx + wy + wz)) if gx or gy or gz else 0
        rx = pointer(buffers, x_dtype) if gx else x
        ry = pointer(buffers + 8 * wx, y_dtype) if gy else y
        rz = pointer(buffers + 8 * (wx + wy), z_dtype) if gz else z
        length = np.uint64(n)
        # The next row is one step along the last outer axis (the odometer's memory is read
        # only when that axis ends): the offsets and that axis' steps are locals, kept in
        # registers, where counters in memory were reloaded after each row's stores (an
        # outer add of (512,1)+(1,32) float32: 3.5 -> 3.35 us).
        inner = rank - 2
        span = shape[inner] if inner >= 0 else 1
        to = strides[0, inner] if inner >= 0 else 0
        tx = strides[1, inner] if inner >= 0 else 0
        ty = strides[2, inner] if inner >= 0 else 0
        tz = strides[3, inner] if inner >= 0 else 0
        lx, ly, lz = -1, -1, -1  # the offsets of the rows gathered last
        parts = claimed.size
        for turn in range(parts):
            part = (home + turn) % parts
            first, end = rows * part // parts, rows * (part + 1) // parts
            while True:
                start = first + fetch_add(claimed, part, chunk)
                if start >= end:
                    break
                rest = start
                fo, fx, fy, fz = 0, 0, 0, 0
                for d in range(inner, -1, -1):
                    index[d] = rest % shape[d]
                    rest //= shape[d]
                    fo += index[d] * strides[0, d]
                    fx += index[d] * strides[1, d]
                    fy += index[d] * strides[2, d]
                    fz += index[d] * strides[3, d]
                at = index[inner] if inner >= 0 else 0
                for _ in range(start, min(start + chunk, end)):
                    if gx and (sx != 0 or fx != lx):
                        _gather(rx, x, fx, sx, n)
                        lx = fx
                    if gy and (sy != 0 or fy != ly):
                        _gather(ry, y, fy, sy, n)
                        ly = fy
                    if gz and (sz != 0 or fz != lz):
                        _gather(rz, z, fz, sz, n)
                        lz = fz
                    oo = np.uint64(fo)
                    xo = np.uint64(0 if gx else fx)
                    yo = np.uint64(0 if gy else fy)
                    zo = np.uint64(0 if gz else fz)
                    if called:  # a constant: numba prunes the other branch
                        run_called_row(op, kind, stream, o, oo, rx, xo, ry, yo, rz, zo, length)
                    else:
                        run_row(op, kind, stream, o, oo, rx, xo, ry, yo, rz, zo, length)
                    at += 1
                    fo, fx, fy, fz = fo + to, fx + tx, fy + ty, fz + tz
                    if at == span and inner > 0:  # carry into the outer axes
                        at = 0
                        fo, fx, fy, fz = (
                            fo - span * to,
                            fx - span * tx,
                            fy - span * ty,
                            fz - span * tz,
                        )
                        d = inner - 1
                        while d >= 0:
                            index[d] += 1
                            fo, fx = fo + strides[0, d], fx + strides[1, d]
                            fy, fz = fy + strides[2, d], fz + strides[3, d]
                            if index[d] < shape[d]:
                                break
                            fo, fx = fo - shape[d] * strides[0, d], fx - shape[d] * strides[1, d]
                            fy, fz = fy - shape[d] * strides[2, d], fz - shape[d] * strides[3, d]
                            index[d] = 0
                            d -= 1
        if stream:
            fence()
        if helpers > 0:
            join(team, helpers, ticket)
        if buffers != 0:
            _free(buffers)

    return njit(nogil=True, error_model="numpy", fastmath=ROW_FLAGS, cache=True)(walk)


walk = _walker_of(False)
"""The walker: numba's dispatcher of `_walker_of`'s ``walk``, every row inlined."""
_called_walk = _walker_of(True)  # Pow's: a call per row (`run_called_row`)


def walker(name: str, dtypes: list[np.dtype[Any]]) -> Any:
    """Return `walk` compiled for operation ``name`` and four dtypes, its first argument bound.

    Resolved once per operation and dtypes, then called directly: a call through the
    dispatcher would make numba re-derive the literal operation on every call
    (milliseconds). ``compile`` reads numba's disk cache before compiling. None, with a
    warning the first time, where numba cannot compile it: the engine then uses NumPy.
    Its ``native`` is the machine code's address, which the entry calls (0 where the
    compiled function's arguments are not `bcast.engine.numba_entry.WALKER` 's).

    float16 operands are read as their bits (uint16) by the operation's ``/float16``
    scalar (`bcast.engine.numba_rows.HALVES`); None, silently, where numba's target CPU
    cannot convert half-precision floats (`HALF`).
    """
    key = (name, *dtypes)
    entry = _entries.get(key, False)
    if entry is False:
        with _lock:
            entry = _entries.get(key, False)
            if entry is False:
                entry = _entries[key] = _compile(name, dtypes)
    return entry


def _half_conversions() -> bool:
    """Tell whether numba's target CPU converts half-precision floats in hardware.

    x86's F16C (numba's target features: ``NUMBA_CPU_FEATURES``, else the host's) or
    AArch64, whose base instructions do. Elsewhere LLVM calls a runtime function that
    numba's JIT does not link, and the compiled code crashes the process.
    """
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return True
    if machine not in ("x86_64", "amd64"):
        return False
    features = config.CPU_FEATURES
    if features is None:
        features = get_host_cpu_features().flatten()
    return "+f16c" in str(features).split(",")


HALF: Final = _half_conversions()
"""Whether float16 kernels may be compiled here (`_half_conversions`)."""


def _compile(name: str, dtypes: list[np.dtype[Any]]) -> Any:
    kinds = "/".join(dict.fromkeys(str(d) for d in dtypes))
    scalar = name
    if np.dtype(np.float16) in dtypes:
        if not HALF:
            return None  # NumPy computes float16 here: the same results
        scalar = f"{name}/float16"
        dtypes = [np.dtype(np.uint16) if d == np.float16 else d for d in dtypes]
    dtype_types = tuple(typeof(d) for d in dtypes)
    code = NAMES.index(scalar)
    signature = (
        types.literal(code),
        types.int64,
        types.int64,
        *dtype_types,
        types.int64,
        types.int64,
        types.boolean,
        types.int64,
        types.int64,
        types.int64,
    )
    # Compiling takes seconds, reading numba's disk cache milliseconds: say so only when the
    # wait is noticeable, i.e. when it really compiles (once per machine).
    notice = threading.Timer(_NOTICE_AFTER, _say_compiling, (name, kinds))
    notice.daemon = True
    if NOTICES["compiling"]:
        notice.start()
    try:
        dispatcher = _called_walk if name == "pow" else walk
        compiled = dispatcher.compile(signature)
    except NumbaError as exc:
        warnings.warn(
            f"bcast: numba could not compile {name} for {kinds.replace('/', ', ')}; NumPy "
            f"computes it instead ({type(exc).__name__}: {str(exc).splitlines()[0]})",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    finally:
        notice.cancel()
    bound = functools.partial(compiled, code)
    bound.native = native(dispatcher, signature)  # type: ignore[attr-defined]
    return bound


_NOTICE_AFTER: Final = 0.5
"""Seconds of compiling after which `_compile` tells stderr what it is doing."""

NOTICES: Final = {"compiling": True}
"""Whether `_compile` tells stderr (`bcast.engine.compiled.warm` turns it off: its caller
reports each kernel itself)."""


def _say_compiling(name: str, kinds: str) -> None:
    sys.stderr.write(f"bcast: compiling {name}/{kinds}, once per machine (numba caches it)\n")
    sys.stderr.flush()
