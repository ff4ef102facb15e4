"""The binary element-wise operators, with OpenVINO's ``auto_broadcast`` as ``broadcast=``.

ONNX Add-14, Sub-14, Mul-14, Div-14, Pow-15, Equal-19, Greater-13, Less-13, And-7, Or-7,
Xor-7: multidirectional broadcasting (``broadcast="numpy"``), or OpenVINO's ``none`` and
``pdpd`` (B broadcast onto A from ``axis``).
"""

from __future__ import annotations

from collections.abc import Callable

from bcast.arrays.views import ArrayT, Scalar
from bcast.core.modes import BinaryModeName, Mode
from bcast.core.planning import plan
from bcast.engine import Kernel, execute, prepare_call
from bcast.ops._common import check_operands, elementwise_mode
from bcast.ops._tiny import CALLS, call_key, kernel_for, tiny_path

__all__ = [
    "add",
    "and_",
    "div",
    "equal",
    "greater",
    "less",
    "mul",
    "or_",
    "pow",
    "sub",
    "xor",
]


def run_binary(
    op: str,
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    broadcast: str | Mode,
    axis: int,
    out: ArrayT | None,
    pick: Callable[[str], Kernel] | None = None,
) -> ArrayT:
    """Check, plan and run a binary element-wise operator: the full path behind `tiny_path`.

    ``pick`` chooses the kernel from the first operand's dtype name where an attribute
    decides it (Mod's ``fmod``, BitShift's ``direction``); such calls are not kept for
    replay, whose cache is by operator only. Else `kernel_for` gives the kernel.
    """
    key = call_key(a, b, out) if pick is None else None
    checked = check_operands(op, ("a", "b"), (a, b))
    a, b = checked.operands
    mode = elementwise_mode(broadcast)
    the_plan = plan(checked.lib.dims(a), checked.lib.dims(b), mode=mode, axis=axis)
    kernel = kernel_for(op, checked.names) if pick is None else pick(checked.names[0])
    if key is not None and mode is Mode.NUMPY and axis == -1:
        call = prepare_call(op, the_plan, kernel, (a, b), dtype=checked.dtype, out=out)
        if call is not None:  # kept for the next call of this call site
            CALLS[op].put(key, call)
            replayed: ArrayT = call((a, b), out)
            return replayed
    result: ArrayT = execute(
        op, the_plan, kernel, (a, b), dtype=checked.dtype, out=out, lib=checked.lib
    )
    return result


@tiny_path("add")
def add(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Add ``a + b`` element-wise (ONNX Add-14, OpenVINO Add-1).

    Parameters
    ----------
    a, b : array or Python scalar
        Operands of one library and one numeric dtype (no bool). NumPy scalars count as
        0-d NumPy arrays; a Python ``int`` or ``float`` takes the other operand's dtype
        (the array API rule), and an int out of that dtype's range is an OverflowError.
    broadcast : {"numpy", "none", "pdpd"}, default "numpy"
        How the shapes combine (in any case: ``"NUMPY"`` is OpenVINO's spelling):
        multidirectional (NumPy, ONNX), identical shapes only, or OpenVINO PDPD (``b`` onto
        ``a`` from ``axis``).
    axis : int, default -1
        PDPD only: the axis of ``a`` where ``b`` starts; -1 right-aligns.
    out : array, optional
        An array of the result's shape and dtype to write into; it is returned.

    Returns
    -------
    array
        A new array (or ``out``) of the operands' dtype and library.

    Raises
    ------
    BroadcastError
        If the shapes do not broadcast under ``broadcast``.
    TypeError
        If the dtypes differ or are not allowed, or an operand is not an array.
    MemoryLimitError
        If the result would exceed the memory limit (see `set_memory_limit`).

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.add(np.array([[1], [2]]), np.array([10, 20, 30]))
    array([[11, 21, 31],
           [12, 22, 32]])
    >>> bcast.ops.add(np.array([1.5, 2.5], np.float32), 1)
    array([2.5, 3.5], dtype=float32)
    >>> bcast.ops.add(np.zeros((2, 3, 4)), np.ones((3, 1)), broadcast="pdpd", axis=1).shape
    (2, 3, 4)
    >>> bcast.ops.add(np.ones(3, np.int32), np.ones(3, np.float32))
    Traceback (most recent call last):
    ...
    TypeError: add: a and b must have the same dtype (ONNX type parameter T); got int32 and float32
    """
    return run_binary("add", a, b, broadcast, axis, out)


@tiny_path("sub")
def sub(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Subtract ``a - b`` element-wise (ONNX Sub-14, OpenVINO Subtract-1).

    Parameters, returns and errors as `add`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.sub(np.array([5, 7], np.uint8), np.array([1], np.uint8))
    array([4, 6], dtype=uint8)
    """
    return run_binary("sub", a, b, broadcast, axis, out)


@tiny_path("mul")
def mul(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Multiply ``a * b`` element-wise (ONNX Mul-14, OpenVINO Multiply-1).

    Parameters, returns and errors as `add`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.mul(np.array([1.5, 2.0]), np.array(2.0))
    array([3., 4.])
    """
    return run_binary("mul", a, b, broadcast, axis, out)


@tiny_path("div")
def div(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Divide ``a / b`` element-wise (ONNX Div-14, OpenVINO Divide-1 on runtime inputs).

    Floats follow IEEE (``1 / 0`` is ``inf``). Integers use truncating division, rounding
    toward zero, as the ONNX Div text requires (NumPy's ``//`` floors instead).

    Parameters, returns and errors as `add`, and:

    Raises
    ------
    ZeroDivisionError
        For an integer division by zero. onnxruntime fails the same way ("Integer division
        by zero"); the ONNX reference returns 0. On Dask arrays it is raised when the result
        is computed. Inside ``jax.jit`` the values cannot be read and nothing is raised
        (JAX gives its own, undefined values).

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.div(np.array([-7, 7, -7, 7], np.int32), np.array([2, -2, -2, 2], np.int32))
    array([-3, -3,  3,  3], dtype=int32)
    >>> bcast.ops.div(np.array([1], np.int32), np.array([0], np.int32))
    Traceback (most recent call last):
    ...
    ZeroDivisionError: div: integer division by zero
    """
    return run_binary("div", a, b, broadcast, axis, out)


@tiny_path("pow")
def pow(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Raise ``a ** b`` element-wise (ONNX Pow-15, OpenVINO Power-1).

    The result has the dtype of the base ``a`` (Pow-15: X in T, Y in T1, output T); the
    exponent may have any numeric dtype.

    - A float base: computed in the wider of the two dtypes (``float32 ** int64`` in
      float64, as C++ ``std::pow`` in onnxruntime), rounded to the base's dtype.
    - An integer base, float exponent: computed in float64, then truncated toward zero
      (``2 ** 0.5`` is 1, ``4 ** -1.0`` is 0), as both the ONNX reference and onnxruntime.
      NaN and out-of-range values convert as the platform's C cast (INT_MIN on x86-64).
    - Integers: exact (wrapping on overflow) for exponents >= 0. A negative exponent gives
      the truncated real power: 0, or 1 and -1 for the bases 1 and -1; this is
      onnxruntime's answer (NumPy and the ONNX reference raise instead).

    Parameters, returns and errors as `add`, except that the dtypes may differ, and:

    Raises
    ------
    ZeroDivisionError
        For an integer 0 raised to a negative integer power (when computed, on Dask; not
        inside ``jax.jit``, where the values cannot be read).

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.pow(np.array([2, 3, 4], np.int32), np.array([0.5, 2.0, -1.0], np.float32))
    array([1, 9, 0], dtype=int32)
    >>> bcast.ops.pow(np.array([2, -1, 1], np.int64), np.array([-1], np.int64))
    array([ 0, -1,  1])
    """
    return run_binary("pow", a, b, broadcast, axis, out)


@tiny_path("equal")
def equal(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Compare ``a == b`` element-wise, giving bool (ONNX Equal-19, OpenVINO Equal-1).

    Numeric, bool and string operands (NumPy ``str``/``object`` arrays) of one dtype.
    Parameters and errors as `add`; the result is bool.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.equal(np.array([1, 2, 3]), np.array([2]))
    array([False,  True, False])
    """
    return run_binary("equal", a, b, broadcast, axis, out)


@tiny_path("greater")
def greater(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Compare ``a > b`` element-wise, giving bool (ONNX Greater-13, OpenVINO Greater-1).

    Parameters and errors as `add`; the result is bool.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.greater(np.array([1.0, np.nan, 3.0]), np.array([2.0]))
    array([False, False,  True])
    """
    return run_binary("greater", a, b, broadcast, axis, out)


@tiny_path("less")
def less(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Compare ``a < b`` element-wise, giving bool (ONNX Less-13, OpenVINO Less-1).

    Parameters and errors as `add`; the result is bool.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.less(np.array([[1], [3]]), np.array([2, 4]))
    array([[ True,  True],
           [False,  True]])
    """
    return run_binary("less", a, b, broadcast, axis, out)


@tiny_path("and_")
def and_(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Logical ``a and b`` of bool arrays (ONNX And-7, OpenVINO LogicalAnd-1).

    Only bool operands (the ONNX schema; the ONNX reference also accepts integers):
    anything else is a TypeError. Parameters and errors as `add`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.and_(np.array([[True], [False]]), np.array([True, False]))
    array([[ True, False],
           [False, False]])
    >>> bcast.ops.and_(np.array([1, 0]), np.array([1, 1]))
    Traceback (most recent call last):
    ...
    TypeError: and_: a has dtype int64, which ONNX And does not allow; expected one of bool
    """
    return run_binary("and_", a, b, broadcast, axis, out)


@tiny_path("or_")
def or_(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Logical ``a or b`` of bool arrays (ONNX Or-7, OpenVINO LogicalOr-1).

    Bool operands only, as `and_`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.or_(np.array([True, False]), np.array([False]))
    array([ True, False])
    """
    return run_binary("or_", a, b, broadcast, axis, out)


@tiny_path("xor")
def xor(
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: BinaryModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Logical ``a xor b`` of bool arrays (ONNX Xor-7, OpenVINO LogicalXor-1).

    Bool operands only, as `and_`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.xor(np.array([True, False]), np.array([True]))
    array([False,  True])
    """
    return run_binary("xor", a, b, broadcast, axis, out)
