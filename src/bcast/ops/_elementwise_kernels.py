"""The kernels of the element-wise operators of ONNX opset 10+ and OpenVINO's element-wise set.

As in `bcast.ops._kernels`, a kernel never broadcasts: the engine hands it operands at the
output's rank, aligned by the plan.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from bcast.engine import Kernel
from bcast.ops._kernels import readable, ufunc_kernel

__all__ = ["KERNELS", "bit_shift_kernel", "mod_kernel", "zero_divisor_check"]


def _squared_difference_numpy(out: Any, a: Any, b: Any) -> None:
    np.subtract(a, b, out=out)
    np.multiply(out, out, out=out)


def _squared_difference_generic(xp: Any, a: Any, b: Any) -> Any:
    d = a - b
    return d * d


KERNELS: Final[dict[str, Kernel]] = {
    "bitwise_and": ufunc_kernel("bitwise_and", "bitwise_and", "bitwise_and"),
    "bitwise_or": ufunc_kernel("bitwise_or", "bitwise_or", "bitwise_or"),
    "bitwise_xor": ufunc_kernel("bitwise_xor", "bitwise_xor", "bitwise_xor"),
    "greater_or_equal": ufunc_kernel("greater_equal", "greater_equal", "greater_or_equal"),
    "less_or_equal": ufunc_kernel("less_equal", "less_equal", "less_or_equal"),
    "not_equal": ufunc_kernel("not_equal", "not_equal", "not_equal"),
    "squared_difference": Kernel(
        _squared_difference_numpy,
        _squared_difference_generic,
        passes=2,
        compiled="squared_difference",
    ),
}
"""Kernels of the operators that need no attribute to pick one."""


# -- Mod -------------------------------------------------------------------------------------


def zero_divisor_check(op: str) -> Any:
    """Return a precheck raising ZeroDivisionError for an integer divisor of 0 (Mod on integers)."""

    def precheck(out: Any, a: Any, b: Any) -> None:
        if out.size and not np.all(b):
            raise ZeroDivisionError(f"{op}: integer modulo by zero")

    return precheck


def _fmod_generic(xp: Any, a: Any, b: Any) -> Any:
    # C fmod: the remainder of truncating division, with the sign of the dividend. The
    # array API has only the floor-division remainder; correct it where the signs differ.
    fmod = getattr(xp, "fmod", None)
    if fmod is not None:
        return fmod(a, b)
    r = xp.remainder(a, b)
    fix = (r != 0) & ((r < 0) != (a < 0))
    return xp.where(fix, r - b, r)


def mod_kernel(fmod: int, *, integer: bool) -> Kernel:
    """Return the kernel of Mod: floor remainder (``fmod=0``) or C fmod (``fmod=1``).

    Integer operands check the divisor first (ZeroDivisionError for 0, as integer Div).
    Floats follow IEEE: a divisor of 0 gives NaN, as Mod-28's special cases say.
    """
    ufunc = np.fmod if fmod else np.remainder

    def run_numpy(out: Any, a: Any, b: Any) -> None:
        if integer and out.size and not np.all(b):
            raise ZeroDivisionError("mod: integer modulo by zero")
        ufunc(a, b, out=out)

    def run_generic(xp: Any, a: Any, b: Any) -> Any:
        if integer and readable(b) and bool(xp.any(b == 0)):
            raise ZeroDivisionError("mod: integer modulo by zero")
        return _fmod_generic(xp, a, b) if fmod else xp.remainder(a, b)

    return Kernel(
        run_numpy,
        run_generic,
        single_pass=True,
        precheck=zero_divisor_check("mod") if integer else None,
        cost=4.0,
    )


# -- BitShift --------------------------------------------------------------------------------


def bit_shift_kernel(right: bool) -> Kernel:
    """Return the kernel of BitShift-28: logical left, arithmetic right, defined edges.

    A shift count below 0 or at least the dtype's width gives what the sign extension alone
    gives: -1 for a right shift of a negative value, 0 otherwise (BitShift-28). Counts
    within the width shift as C does on the dtype (left shifts drop the high bits).
    """
    ufunc = np.right_shift if right else np.left_shift

    def run_numpy(out: Any, a: Any, b: Any) -> None:
        bits = a.dtype.itemsize * 8
        valid = b < bits
        if b.dtype.kind == "i":
            valid &= b >= 0
        ufunc(a, np.where(valid, b, 0), out=out)
        if not valid.all():
            fill = np.where(a < 0, -1, 0) if right and a.dtype.kind == "i" else 0
            np.copyto(out, fill, where=~valid, casting="unsafe")

    def run_generic(xp: Any, a: Any, b: Any) -> Any:
        bits = xp.iinfo(a.dtype).bits
        valid = (b < bits) & (b >= 0)
        safe = xp.where(valid, b, xp.zeros_like(b))
        shifted = xp.bitwise_right_shift(a, safe) if right else xp.bitwise_left_shift(a, safe)
        zero = xp.zeros_like(shifted)
        fill = xp.where(a < 0, zero - 1, zero) if right else zero
        return xp.where(valid, shifted, fill)

    return Kernel(run_numpy, run_generic, cost=4.0, passes=3)
