"""Half-precision floats in compiled code: their bits (uint16) read as float32 and back.

Part of `bcast.engine.numba_kernels` (imported only with it, only when numba is installed):
the ``"<name>/float16"`` operations of `bcast.engine.numba_rows` compute with these.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from numba import njit, types
from numba.extending import intrinsic, overload

__all__ = ["nan_over", "narrow", "signaling", "signals", "stored", "widen", "widened"]


@intrinsic
def widen(typingctx: Any, bits: Any) -> Any:
    """Read a half-precision float's 16 bits (uint16) as the float32 of the same value.

    LLVM's own conversion (F16C's ``vcvtph2ps`` on x86; an instruction on AArch64): exact.
    Where the CPU has none, LLVM calls a runtime function numba does not link, and the code
    crashes: `bcast.engine.numba_kernels.HALF` tells whether it may be compiled.
    """
    if bits != types.uint16:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(bits), codegen


@intrinsic
def narrow(typingctx: Any, value: Any) -> Any:
    """Round a float32 to the nearest half-precision float (ties to even); its 16 bits."""
    if value != types.float32:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(value), codegen


@njit(inline="always")
def signaling(bits: Any) -> Any:
    """Tell whether a half-precision float's bits are a signaling NaN's (quiet bit clear)."""
    return ((bits & 0x7E00) == 0x7C00) & ((bits & 0x01FF) != 0)  # no branch: inlined anywhere


@intrinsic
def nan_over(typingctx: Any, value: Any, other: Any) -> Any:
    """Return ``other`` where it is a NaN, else ``value`` (float32; a select, not a branch)."""
    if value != types.float32 or other != types.float32:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        nan = builder.fcmp_unordered("uno", args[1], args[1])
        return builder.select(nan, args[1], args[0])

    return types.float32(value, other), codegen


# The same code for float32 and float16 operands (float16 Pow's recomputed elements): each of
# these is the identity, or False, on anything but float16's bits (uint16).


def widened(value: Any) -> Any:
    """Return a float16's bits widened (`widen`); any other value as it is."""
    raise NotImplementedError  # compiled code only: see the overload below


@overload(widened, inline="always")
def _widened_overload(value: Any) -> Any:
    if value == types.uint16:

        def wide(value: Any) -> Any:
            return widen(value)

        return wide

    def same(value: Any) -> Any:
        return value

    return same


def signals(value: Any) -> Any:
    """Tell whether a float16's bits are a signaling NaN's (`signaling`); False otherwise."""
    raise NotImplementedError  # compiled code only: see the overload below


@overload(signals, inline="always")
def _signals_overload(value: Any) -> Any:
    if value == types.uint16:

        def signal(value: Any) -> Any:
            return signaling(value)

        return signal

    def never(value: Any) -> Any:
        return False

    return never


def stored(data: Any, value: Any) -> Any:
    """Return float32 ``value`` rounded to float16's bits where ``data`` holds them."""
    raise NotImplementedError  # compiled code only: see the overload below


@overload(stored, inline="always")
def _stored_overload(data: Any, value: Any) -> Any:
    if isinstance(data, types.CPointer) and data.dtype == types.uint16:

        def rounded(data: Any, value: Any) -> Any:
            return narrow(value)

        return rounded

    def unchanged(data: Any, value: Any) -> Any:
        return value

    return unchanged
