"""The numba code of one row of the walker (`bcast.engine.numba_kernels`): each operation.

Imported only by `bcast.engine.numba_kernels`, only when numba is installed. An operation is
a literal integer (its index in `NAMES`); a row's kind is one too (`run_row`), so each
operation and kind compiles to its own vectorised loop.
"""

from __future__ import annotations

from typing import Any, Final

import llvmlite.ir as ir
import numpy as np
from numba import literally, njit, types
from numba.extending import intrinsic, overload

from bcast.engine import numba_cache  # noqa: F401  (before any cache=True kernel)
from bcast.engine.numba_entry import address, itemsize, load, save
from bcast.engine.numba_halves import nan_over, narrow, signals, stored, widen, widened
from bcast.engine.numba_pow import pow_float32 as _pow
from bcast.engine.numba_pow import pow_special
from bcast.engine.operations import HALF_RULES, OPERATIONS

__all__ = [
    "ALIGN",
    "HALVES",
    "NAMES",
    "ROW_FLAGS",
    "SCALARS",
    "arity",
    "fence",
    "run_called_row",
    "run_row",
]

ALIGN: Final = 64
"""Streaming stores start at an address aligned to this (a cache line; an AVX-512 vector)."""

VECTOR: Final = 32
"""Plain stores of a long row start at an address aligned to this (an AVX2 vector: LLVM
compiles 256-bit vectors on AVX-512 CPUs too)."""


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


def _squared_difference(x: Any, y: Any, z: Any) -> Any:
    d = x - y
    return d * d


def _equal(x: Any, y: Any, z: Any) -> Any:
    return x == y


def _not_equal(x: Any, y: Any, z: Any) -> Any:
    return x != y


def _greater(x: Any, y: Any, z: Any) -> Any:
    return x > y


def _greater_or_equal(x: Any, y: Any, z: Any) -> Any:
    return x >= y


def _and(x: Any, y: Any, z: Any) -> Any:
    return x & y


def _or(x: Any, y: Any, z: Any) -> Any:
    return x | y


def _xor(x: Any, y: Any, z: Any) -> Any:
    return x ^ y


def _pick(kind: Any, operand: Any, value: Any, row: Any, at: Any) -> Any:
    raise NotImplementedError  # compiled code only: see the overload below


@overload(_pick, inline="always")
def _pick_overload(kind: Any, operand: Any, value: Any, row: Any, at: Any) -> Any:
    """Operand ``operand``'s element of a row: ``value`` where the row kind stretches it."""
    if not isinstance(kind, types.IntegerLiteral) or not isinstance(operand, types.IntegerLiteral):
        return None
    if kind.literal_value == operand.literal_value:

        def stretched(kind: Any, operand: Any, value: Any, row: Any, at: Any) -> Any:
            return value

        return stretched

    def element(kind: Any, operand: Any, value: Any, row: Any, at: Any) -> Any:
        return load(row, at)

    return element


def arity(op: Any) -> Any:
    """Return how many operands operation ``op`` reads (compiled code only: a constant)."""
    raise NotImplementedError  # see the overload below


@overload(arity, inline="always")
def _arity_overload(op: Any) -> Any:
    """How many operands the operation reads (the unused ones repeat x: never gathered)."""
    if not isinstance(op, types.IntegerLiteral):
        return None
    count = {"copy": 1, "where": 3}.get(NAMES[op.literal_value], 2)

    def arity(op: Any) -> Any:
        return count

    return arity


def _fix(op: Any, kind: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, n: Any) -> None:
    raise NotImplementedError  # compiled code only: see the overload below


@overload(_fix, inline="always")
def _fix_overload(
    op: Any, kind: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, n: Any
) -> Any:
    """After a row: Pow recomputes its special elements with powf; other operations: nothing."""
    if not isinstance(op, types.IntegerLiteral):
        return None
    if NAMES[op.literal_value] not in ("pow", "pow/float16"):

        def nothing(
            op: Any, kind: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, n: Any
        ) -> None:
            pass

        return nothing

    def recompute(
        op: Any, kind: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, n: Any
    ) -> None:
        # float16 (bits) is widened to float32 first and rounded back (`numba_halves`). The
        # widening quiets a signaling NaN, and powf answers 1 for 1 ** qNaN and qNaN ** 0;
        # NumPy widens in software, keeps it signaling, and powf answers NaN (the ONNX
        # reference too): a signaling NaN operand gives a NaN here as well.
        xv, yv = load(x, xo), load(y, yo)
        special = False
        for c in range(n):  # a reduction: vectorised
            base = widened(_pick(kind, 1, xv, x, xo + c))
            special |= pow_special(base, widened(_pick(kind, 2, yv, y, yo + c)))
        if special:
            for c in range(n):
                xb, yb = _pick(kind, 1, xv, x, xo + c), _pick(kind, 2, yv, y, yo + c)
                base, exponent = widened(xb), widened(yb)
                if signals(xb) | signals(yb):
                    save(o, oo + c, stored(o, base + exponent))  # the NaN's, quiet
                elif pow_special(base, exponent):
                    save(o, oo + c, stored(o, base**exponent))  # powf, as NumPy's power

    return recompute


def _on_halves(name: str) -> Any:
    """Return operation ``name`` computed on half-precision floats, as NumPy computes float16.

    The operands (their bits, uint16) are widened to float32 and the operation runs there;
    a float result is rounded back to half precision. Rounding twice (the float32 operation,
    then to half) gives the correctly rounded half-precision result of +, -, * and / (float32
    has more than 2 * 11 + 2 bits), so this is NumPy's float16 loop (which does the same) bit
    for bit; comparisons of the widened values are exact.
    """
    inner = njit(inline="always")(SCALARS[name])
    if OPERATIONS[name] in ("compare", "order"):

        def compared(x: Any, y: Any, z: Any) -> Any:
            return inner(widen(x), widen(y), z)

        return compared

    if name in ("add", "mul"):
        # Where both operands are NaN, NumPy's float16 addition and multiplication (x86)
        # return y's; LLVM orders the operands of a commutative one as it likes.

        def commuted(x: Any, y: Any, z: Any) -> Any:
            right = widen(y)  # y NaN: y + y (y * y) is y's NaN, quieted
            return narrow(inner(nan_over(widen(x), right), right, z))

        return commuted

    if name == "squared_difference":
        # NumPy's is two passes: the difference is rounded to half precision, then squared
        # (a half times a half is exact in float32, so the square rounds once).

        def squared(x: Any, y: Any, z: Any) -> Any:
            d = widen(narrow(widen(x) - widen(y)))
            return narrow(d * d)

        return squared

    def computed(x: Any, y: Any, z: Any) -> Any:
        return narrow(inner(widen(x), widen(y), z))

    return computed


SCALARS: Final = {
    "copy": _copy,
    "where": _select,
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "squared_difference": _squared_difference,
    "equal": _equal,
    "not_equal": _not_equal,
    "greater": _greater,
    "greater_or_equal": _greater_or_equal,
    "and_": _and,
    "or_": _or,
    "xor": _xor,
    "bitwise_and": _and,
    "bitwise_or": _or,
    "bitwise_xor": _xor,
}
"""Each operation's scalar function of three operands (unused ones are never loaded)."""

HALVES: Final = tuple(name for name, rule in OPERATIONS.items() if rule in HALF_RULES)
"""The operations with a float16 kernel: `SCALARS` has each as ``"<name>/float16"``."""
SCALARS.update({f"{name}/float16": _on_halves(name) for name in HALVES})

NAMES: Final = tuple(SCALARS)  # an operation's code is its index here
_JITTED: Final = tuple(njit(inline="always")(f) for f in SCALARS.values())


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
    """Build an intrinsic ``store(pointer, index, value)``, a non-temporal store.

    It claims ``align`` bytes' alignment (None: the element's own). LLVM vectorises such
    stores only where a vector fits the alignment, so runs claimed aligned must be
    (`_streamed_row`).
    """

    @intrinsic
    def store(typingctx: Any, data: Any, index: Any, value: Any) -> Any:
        if not isinstance(data, types.CPointer):
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            target, position, item = args
            slot = builder.gep(target, [position])
            item = context.cast(builder, item, signature.args[2], data.dtype)
            stored = context.data_model_manager[data.dtype].as_data(builder, item)
            written = builder.store(stored, slot, align=align)  # a bool is a byte here
            flag = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
            written.set_metadata("nontemporal", flag)
            return context.get_dummy_value()

        return types.void(data, index, value), codegen

    return store


_stream = _streaming_store(ALIGN)  # inside runs that start ALIGN-aligned: vector stores
_stream_any = _streaming_store(None)  # anywhere: one element at a time (movnti)


@intrinsic
def fence(typingctx: Any) -> Any:
    """Order every store before it: streaming stores are weakly ordered."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


ROW_FLAGS: Final = {"contract"}
"""Multiply-adds may fuse (Pow's polynomials); every other operation is one IEEE operation."""

# Rows are runs of elements from an offset of a raw pointer (`bcast.engine.numba_entry.load`
# and `save`). Arrays are reference counted: a row function given arrays makes numba emit
# runtime calls per row, which cost more than the work of a row of 16 elements (an outer add
# of (1024,1)+(16,) float32: a walk of 19.4 us with arrays, 9.7 us with pointers). Offsets
# and lengths are unsigned (uint64), so addresses are affine and LLVM vectorises the loops.


# A row's kind (a literal): 0, every operand's row is a run of elements; 1 (2), operand x (y)
# is one element stretched over the row, read once before the loop as a scalar (an outer
# add's row) instead of filled into a buffer.


@njit(inline="always")
def _element(
    op: Any, kind: Any, x: Any, xo: Any, xv: Any, y: Any, yo: Any, yv: Any, z: Any, zo: Any, c: Any
) -> Any:
    """Compute the row's element ``c`` from x, y and z (a stretched one: its value)."""
    return _scalar(
        op, _pick(kind, 1, xv, x, xo + c), _pick(kind, 2, yv, y, yo + c), load(z, zo + c)
    )


@njit(inline="always")
def _plain_row(
    op: Any, kind: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any, zo: Any, n: Any
) -> None:
    # One element at a time up to the first VECTOR-aligned output address, then the
    # vectorised loop, whose stores then never straddle two cache lines. NumPy's small
    # arrays are 16-byte aligned: a 64 KiB outer add into one 16 bytes off a line took 5.5 us
    # a call, 4.5 us into an aligned one. Rows shorter than 8 vectors are not worth the
    # scalar head (it leaves a body too short for the unrolled loop: an outer add of
    # (512,1)+(1,32) float32 into an output 16 bytes off took 5.7 us with it, 4.1 without).
    size = itemsize(o)
    vector = np.uint64(VECTOR)
    head = np.uint64(0)
    if n * size >= np.uint64(8 * VECTOR):
        head = (vector - (address(o) + oo * size) % vector) % vector // size
    xv, yv = load(x, xo), load(y, yo)
    for c in range(head):
        save(o, oo + c, _element(op, kind, x, xo, xv, y, yo, yv, z, zo, c))
    for c in range(head, n):
        save(o, oo + c, _element(op, kind, x, xo, xv, y, yo, yv, z, zo, c))
    _fix(op, kind, o, oo, x, xo, y, yo, n)


@njit(inline="always")
def _streamed_row(
    op: Any, kind: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any, zo: Any, n: Any
) -> None:
    # Streaming stores of one element up to the first aligned address, of vectors over whole
    # ALIGN-byte runs, of one element for the rest. Every store of the row streams: a cache
    # line written by plain and streaming stores (the ends of rows that do not start on a
    # line) costs more than plain stores alone (measured: 4x on rows of 128 float32).
    align = np.uint64(ALIGN)
    size = itemsize(o)
    at = address(o) + oo * size
    head = min((align - at % align) % align // size, n)
    step = align // size
    body = head + (n - head) // step * step
    xv, yv = load(x, xo), load(y, yo)
    for c in range(head):
        _stream_any(o, oo + c, _element(op, kind, x, xo, xv, y, yo, yv, z, zo, c))
    for c in range(head, body):
        _stream(o, oo + c, _element(op, kind, x, xo, xv, y, yo, yv, z, zo, c))
    for c in range(body, n):
        _stream_any(o, oo + c, _element(op, kind, x, xo, xv, y, yo, yv, z, zo, c))
    _fix(op, kind, o, oo, x, xo, y, yo, n)


# Rows are inlined in the walker (`run_row`): a row costs no call, and the walker's work that
# is the same for every row is hoisted out of it (an outer add of (512,1)+(1,32) float32: 4.9
# -> 3.5 us). Pow's rows are functions of their own (`run_called_row`): its polynomials,
# inlined in each of the walker's six kinds of row, doubled its compile time (13 -> 25 s),
# and a call costs nothing next to a row of them.


@njit(inline="always")
def _inlined(
    op: Any, kind: Any, stream: bool, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any,
    zo: Any, n: Any,
) -> None:  # fmt: skip
    if stream:
        _streamed_row(op, kind, o, oo, x, xo, y, yo, z, zo, n)
    else:
        _plain_row(op, kind, o, oo, x, xo, y, yo, z, zo, n)


@njit(nogil=True, error_model="numpy", fastmath=ROW_FLAGS, cache=True)
def _called_row(
    op: Any, kind: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any, zo: Any, n: Any
) -> None:
    literally(op)
    literally(kind)
    _plain_row(op, kind, o, oo, x, xo, y, yo, z, zo, n)


@njit(nogil=True, error_model="numpy", fastmath=ROW_FLAGS, cache=True)
def _called_streamed_row(
    op: Any, kind: Any, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any, zo: Any, n: Any
) -> None:
    literally(op)
    literally(kind)
    _streamed_row(op, kind, o, oo, x, xo, y, yo, z, zo, n)


@njit(inline="always")
def _called(
    op: Any, kind: Any, stream: bool, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any,
    zo: Any, n: Any,
) -> None:  # fmt: skip
    if stream:
        _called_streamed_row(op, kind, o, oo, x, xo, y, yo, z, zo, n)
    else:
        _called_row(op, kind, o, oo, x, xo, y, yo, z, zo, n)


@njit(inline="always")
def run_row(
    op: Any, kind: int, stream: bool, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any,
    zo: Any, n: Any,
) -> None:  # fmt: skip
    """Write ``n`` elements of ``o`` from ``oo`` (streaming stores if ``stream``), inlined.

    Operand x's elements are ``x[xo:xo + n]``, y's ``y[yo:yo + n]``, z's ``z[zo:zo + n]``;
    but where ``kind`` is 1 (2), the value ``x[xo]`` (``y[yo]``) throughout. Each kind
    compiles its own loop.
    """
    if kind == 1:
        _inlined(op, 1, stream, o, oo, x, xo, y, yo, z, zo, n)
    elif kind == 2:
        _inlined(op, 2, stream, o, oo, x, xo, y, yo, z, zo, n)
    else:
        _inlined(op, 0, stream, o, oo, x, xo, y, yo, z, zo, n)


@njit(inline="always")
def run_called_row(
    op: Any, kind: int, stream: bool, o: Any, oo: Any, x: Any, xo: Any, y: Any, yo: Any, z: Any,
    zo: Any, n: Any,
) -> None:  # fmt: skip
    """As `run_row`, each kind of row a function compiled on its own, called."""
    if kind == 1:
        _called(op, 1, stream, o, oo, x, xo, y, yo, z, zo, n)
    elif kind == 2:
        _called(op, 2, stream, o, oo, x, xo, y, yo, z, zo, n)
    else:
        _called(op, 0, stream, o, oo, x, xo, y, yo, z, zo, n)
