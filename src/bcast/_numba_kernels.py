"""The numba code of `bcast._compiled`: one row walker, specialised per operation.

Imported only by `bcast._compiled`, only when numba is installed, and only on the first
large call. The operation is a literal integer (an index into `SCALARS`): numba compiles
the walker once per operation and dtypes, and caches the machine code on disk
(``cache=True``), so later processes load it instead of compiling it again.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Final

import llvmlite.ir as ir
import numpy as np
from numba import literally, njit, typeof, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

__all__ = ["SCALARS", "walk", "walker"]

ALIGN: Final = 64
"""Streaming stores start at an address aligned to this (a cache line; an AVX-512 vector)."""


def _copy(x: Any, y: Any, z: Any) -> Any:
    return x


def _select(x: Any, y: Any, z: Any) -> Any:
    return z ^ ((y ^ z) & x)  # x: all ones where the condition holds, else 0


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


SCALARS: Final = {
    "copy": _copy,
    "where": _select,
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "equal": _equal,
    "greater": _greater,
    "less": _less,
    "and_": _and,
    "or_": _or,
    "xor": _xor,
}
"""Each operation's scalar function of three operands (unused ones are never loaded)."""

_CODES: Final = tuple(njit(inline="always")(f) for f in SCALARS.values())
_entries: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()


def _scalar(op: Any, x: Any, y: Any, z: Any) -> Any:
    raise NotImplementedError  # compiled code only: see the overload below


@overload(_scalar, inline="always")
def _scalar_overload(op: Any, x: Any, y: Any, z: Any) -> Any:
    if not isinstance(op, types.IntegerLiteral):
        return None
    function = _CODES[op.literal_value]

    def impl(op: Any, x: Any, y: Any, z: Any) -> Any:
        return function(x, y, z)

    return impl


@intrinsic
def _stream(typingctx: Any, array: Any, index: Any, value: Any) -> Any:
    """``array[index] = value`` as a non-temporal store, in a run that starts ALIGN-aligned."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type, _, value_type = signature.args
        target, position, item = args
        view = context.make_array(array_type)(context, builder, target)
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, view, [position], wraparound=False
        )
        item = context.cast(builder, item, value_type, array_type.dtype)
        stored = context.data_model_manager[array_type.dtype].as_data(builder, item)
        store = builder.store(stored, pointer, align=ALIGN)  # a bool is a byte in memory
        store.set_metadata(
            "nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        )
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


@intrinsic
def _fence(typingctx: Any) -> Any:
    """Order every store before it: streaming stores are weakly ordered."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@njit(nogil=True, error_model="numpy", cache=True)
def _row(op: Any, o: Any, x: Any, y: Any, z: Any, n: int) -> None:
    literally(op)
    for c in range(n):
        o[c] = _scalar(op, x[c], y[c], z[c])


@njit(nogil=True, error_model="numpy", cache=True)
def _streamed_row(op: Any, o: Any, x: Any, y: Any, z: Any, n: int) -> None:
    # Plain stores up to the first aligned address, streaming stores over whole ALIGN-byte
    # runs, plain stores for the rest. Every loop starts at index 0: LLVM vectorises only
    # loops whose indices it knows are not negative (numba wraps negative indices).
    literally(op)
    size = o.itemsize
    head = min(((-o.ctypes.data) % ALIGN) // size, n)
    body = head + (n - head) // (ALIGN // size) * (ALIGN // size)
    _row(op, o, x, y, z, head)
    ob, xb, yb, zb = o[head:body], x[head:body], y[head:body], z[head:body]
    for c in range(body - head):
        _stream(ob, c, _scalar(op, xb[c], yb[c], zb[c]))
    _row(op, o[body:], x[body:], y[body:], z[body:], n - body)


@njit(nogil=True, cache=True)
def _operand_row(base: Any, offset: int, step: int, n: int, buf: Any, last: Any) -> Any:
    """One operand's row as a contiguous run: a slice of it, or ``buf`` filled from it."""
    if step == 1:
        return base[offset : offset + n]
    if step == 0:
        if last[0] != offset:  # a stretched operand: refill only when its value moves
            buf[:n] = base[offset]
            last[0] = offset
        return buf
    for c in range(n):
        buf[c] = base[offset + c * step]
    return buf


@njit(nogil=True, error_model="numpy", cache=True)
def walk(
    op: Any,
    o: Any,
    x: Any,
    y: Any,
    z: Any,
    strides: Any,
    shape: Any,
    start: int,
    stop: int,
    stream: bool,
) -> None:
    """Compute rows ``start`` to ``stop`` of ``o`` (all arrays 1-D runs of memory).

    ``shape`` is the output's (the last axis: one row); ``strides[k]`` are, in elements, the
    output's (k = 0) and the operands' strides on each axis, 0 where stretched.
    """
    literally(op)
    rank = shape.size
    n = shape[rank - 1]
    index = np.zeros(rank - 1, np.int64)
    rest = start
    for d in range(rank - 2, -1, -1):
        index[d] = rest % shape[d]
        rest //= shape[d]
    offsets = np.zeros(4, np.int64)
    for k in range(4):
        for d in range(rank - 1):
            offsets[k] += index[d] * strides[k, d]
    inner = strides[:, rank - 1]
    bx = np.empty(n if inner[1] != 1 else 0, x.dtype)
    by = np.empty(n if inner[2] != 1 else 0, y.dtype)
    bz = np.empty(n if inner[3] != 1 else 0, z.dtype)
    last = np.full(3, -1, np.int64)
    for _ in range(start, stop):
        ro = o[offsets[0] : offsets[0] + n]
        rx = _operand_row(x, offsets[1], inner[1], n, bx, last[0:1])
        ry = _operand_row(y, offsets[2], inner[2], n, by, last[1:2])
        rz = _operand_row(z, offsets[3], inner[3], n, bz, last[2:3])
        if stream:
            _streamed_row(op, ro, rx, ry, rz, n)
        else:
            _row(op, ro, rx, ry, rz, n)
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


def walker(name: str, arrays: list[np.ndarray[Any, Any]]) -> Any:
    """Return `walk` compiled for operation ``name`` and these arrays, its first argument bound.

    Resolved once per operation and array types, then called directly: a call through
    the dispatcher would make numba re-derive the literal operation on every call
    (milliseconds). ``compile`` reads numba's disk cache before compiling.
    """
    key = (name, *(typeof(a) for a in arrays))
    entry = _entries.get(key)
    if entry is None:
        with _lock:
            entry = _entries.get(key)
            if entry is None:
                code = list(SCALARS).index(name)
                signature = (
                    types.literal(code),
                    *key[1:],
                    typeof(np.zeros((1, 1), np.int64)),
                    typeof(np.zeros(1, np.int64)),
                    types.int64,
                    types.int64,
                    types.boolean,
                )
                compiled = walk.compile(signature)
                entry = _entries[key] = functools.partial(compiled, code)
    return entry
