"""Element-wise operators of ONNX opset 10+ and of OpenVINO's element-wise set.

ONNX Mod-28, BitShift-28, BitwiseAnd/Or/Xor-18, GreaterOrEqual-16, LessOrEqual-16, and
OpenVINO NotEqual-1 and SquaredDifference-1 (FloorMod-1 and Mod-1 are `mod` with ``fmod`` 0
and 1; GreaterEqual-1 and LessEqual-1 are `greater_or_equal` and `less_or_equal`). All take
OpenVINO's ``auto_broadcast`` as ``broadcast=`` (numpy, none, pdpd), as `bcast.ops.add` does;
the shapes are planned by `bcast.plan` and the kernel runs in `bcast.engine`, through the
binary operators' own path (`bcast.ops._binary.run_binary`): the operators whose kernel no
attribute picks take their tiny path and replay their call plans too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from bcast.arrays.views import ArrayT, Scalar
from bcast.core.modes import BinaryModeName, Mode
from bcast.engine import Kernel
from bcast.ops._binary import run_binary
from bcast.ops._dtypes import FLOAT
from bcast.ops._elementwise_kernels import bit_shift_kernel, mod_kernel
from bcast.ops._tiny import tiny_path

__all__ = [
    "bit_shift",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "greater_or_equal",
    "less_or_equal",
    "mod",
    "not_equal",
    "squared_difference",
]


def mod(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    fmod: int = 0,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Remainder of ``a / b`` element-wise (ONNX Mod-28; OpenVINO FloorMod-1, Mod-1).

    ``fmod=0`` (ONNX's default, OpenVINO FloorMod-1): ``a - floor(a / b) * b``, the sign of
    the divisor, as Python's ``%`` and ``numpy.remainder``. ``fmod=1`` (OpenVINO Mod-1):
    ``a - trunc(a / b) * b``, the sign of the dividend, as C ``fmod``. Both apply to integers
    and floats (Mod-28 defines ``fmod=0`` for floats too, with IEEE special cases: a divisor
    of 0 or an infinite dividend gives NaN).

    Parameters
    ----------
    a, b : array or Python scalar
        Operands of one library and one numeric dtype (no bool), as `add`.
    fmod : {0, 1}, default 0
        Floor (0) or truncation (1) of the quotient.
    broadcast, axis, out
        As `add`.

    Returns
    -------
    array
        A new array (or ``out``) of the operands' dtype.

    Raises
    ------
    ZeroDivisionError
        For an integer divisor of 0 (the ONNX text gives no value; onnxruntime's kernel
        divides by it, the ONNX reference returns 0: docs/peer-differences.md).
    ValueError
        If ``fmod`` is not 0 or 1 (`BroadcastError` for shapes that do not broadcast).
    TypeError
        If the dtypes differ or are not allowed.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> a = np.array([-4, 7, 5, 4, -7, 8], np.int32)
    >>> b = np.array([2, -3, 8, -2, 3, 5], np.int32)
    >>> bcast.ops.mod(a, b)
    array([ 0, -2,  5,  0,  2,  3], dtype=int32)
    >>> bcast.ops.mod(a, b, fmod=1)
    array([ 0,  1,  5,  0, -1,  3], dtype=int32)
    >>> bcast.ops.mod(np.array([[5.5], [-5.5]]), np.array([2.0, -2.0]))
    array([[ 1.5, -0.5],
           [ 0.5, -1.5]])
    """
    return run_binary("mod", a, b, broadcast, axis, out, _mod(fmod))


def bit_shift(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    direction: str = "left",
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Shift the bits of ``a`` by ``b`` element-wise (ONNX BitShift-28).

    ONNX BitShift-28: ``direction="left"`` shifts toward the high bits (they drop off),
    ``"right"`` toward the low bits, arithmetically for signed dtypes (the sign bit fills).
    A shift count below 0 or at least the dtype's width gives -1 for a right shift of a
    negative value and 0 otherwise, as BitShift-28 defines (before opset 28 only unsigned
    dtypes were allowed and such counts were undefined).

    Parameters
    ----------
    a, b : array or Python scalar
        The values and the shift counts, of one integer dtype.
    direction : {"left", "right"}, default "left"
        In any case (ONNX writes ``"LEFT"``, ``"RIGHT"``).
    broadcast, axis, out
        As `add`.

    Returns
    -------
    array
        A new array (or ``out``) of the operands' dtype.

    Raises
    ------
    ValueError
        If ``direction`` is neither (`BroadcastError` for shapes that do not broadcast).
    TypeError
        If the dtypes differ or are not integers.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.bit_shift(np.array([16, 4, 1], np.uint8), np.array([1, 2, 3], np.uint8))
    array([32, 16,  8], dtype=uint8)
    >>> x = np.array([-16, 16, -1], np.int8)
    >>> bcast.ops.bit_shift(x, np.array([2, 9, 8], np.int8), direction="right")
    array([-4,  0, -1], dtype=int8)
    """
    return run_binary("bit_shift", a, b, broadcast, axis, out, _shift(direction))


@tiny_path("bitwise_and")
def bitwise_and(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Bitwise ``a & b`` of integers (ONNX BitwiseAnd-18).

    Integer operands of one dtype; parameters and errors as `add`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.bitwise_and(np.array([[12], [10]], np.uint8), np.array([10, 6], np.uint8))
    array([[ 8,  4],
           [10,  2]], dtype=uint8)
    """
    return run_binary("bitwise_and", a, b, broadcast, axis, out)


@tiny_path("bitwise_or")
def bitwise_or(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Bitwise ``a | b`` of integers (ONNX BitwiseOr-18).

    Integer operands of one dtype; parameters and errors as `add`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.bitwise_or(np.array([12, -8], np.int16), np.array([3], np.int16))
    array([15, -5], dtype=int16)
    """
    return run_binary("bitwise_or", a, b, broadcast, axis, out)


@tiny_path("bitwise_xor")
def bitwise_xor(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Bitwise ``a ^ b`` of integers (ONNX BitwiseXor-18).

    Integer operands of one dtype; parameters and errors as `add`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.bitwise_xor(np.array([12, 10], np.int32), np.array([10], np.int32))
    array([6, 0], dtype=int32)
    """
    return run_binary("bitwise_xor", a, b, broadcast, axis, out)


@tiny_path("greater_or_equal")
def greater_or_equal(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Compare ``a >= b``, giving bool (ONNX GreaterOrEqual-16, OpenVINO GreaterEqual-1).

    Numeric operands of one dtype; parameters and errors as `add`; the result is bool.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.greater_or_equal(np.array([1.0, np.nan, 3.0]), np.array([3.0]))
    array([False, False,  True])
    """
    return run_binary("greater_or_equal", a, b, broadcast, axis, out)


@tiny_path("less_or_equal")
def less_or_equal(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Compare ``a <= b``, giving bool (ONNX LessOrEqual-16, OpenVINO LessEqual-1).

    Numeric operands of one dtype; parameters and errors as `add`; the result is bool.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.less_or_equal(np.array([[1], [3]]), np.array([2, 3]))
    array([[ True,  True],
           [False,  True]])
    """
    return run_binary("less_or_equal", a, b, broadcast, axis, out)


@tiny_path("not_equal")
def not_equal(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Compare ``a != b``, giving bool (OpenVINO NotEqual-1; ONNX ``Not(Equal)``).

    Numeric or bool operands of one dtype; parameters and errors as `add`; the result is
    bool (NaN differs from everything, itself included).

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.not_equal(np.array([1, 2, 3]), np.array([2]))
    array([ True, False,  True])
    """
    return run_binary("not_equal", a, b, broadcast, axis, out)


@tiny_path("squared_difference")
def squared_difference(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Compute ``(a - b) ** 2`` element-wise (OpenVINO SquaredDifference-1).

    Numeric operands of one dtype; parameters and errors as `add`. Integers wrap as
    ``(a - b) * (a - b)`` does in the dtype.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.squared_difference(np.array([[1.0], [4.0]]), np.array([3.0, 0.5]))
    array([[ 4.  ,  0.25],
           [ 1.  , 12.25]])
    """
    return run_binary("squared_difference", a, b, broadcast, axis, out)


def _mod(fmod: int) -> Callable[[str], Kernel]:
    if fmod not in (0, 1) or isinstance(fmod, bool):
        raise ValueError(f"mod: fmod must be 0 or 1; got {fmod!r}")
    return lambda name: _MODS[fmod, name not in FLOAT]


def _shift(direction: str) -> Callable[[str], Kernel]:
    if not isinstance(direction, str) or direction.lower() not in ("left", "right"):
        raise ValueError(f"bit_shift: direction must be 'left' or 'right'; got {direction!r}")
    kernel = _SHIFTS[direction.lower() == "right"]
    return lambda name: kernel


_MODS: Final = {
    (fmod, integer): mod_kernel(fmod, integer=integer)
    for fmod in (0, 1)
    for integer in (False, True)
}
_SHIFTS: Final = (bit_shift_kernel(right=False), bit_shift_kernel(right=True))
