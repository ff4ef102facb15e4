"""The binary element-wise operators, with OpenVINO's ``auto_broadcast`` as ``broadcast=``.

ONNX Add-14, Sub-14, Mul-14, Div-14, Pow-15, Equal-19, Greater-13, Less-13, And-7, Or-7,
Xor-7: multidirectional broadcasting (``broadcast="numpy"``), or OpenVINO's ``none`` and
``pdpd`` (B broadcast onto A from ``axis``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, TypeVar

import numpy as np

from bcast import engine
from bcast.arrays.views import Array
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.planning import plan
from bcast.engine import Kernel, execute
from bcast.engine import guard as _guard
from bcast.ops import _kernels
from bcast.ops._common import check_operands
from bcast.ops._dtypes import FLOAT, SIGNATURES, fixed_output

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

_MODES: Final = (Mode.NUMPY, Mode.NONE, Mode.PDPD)
_NDARRAY: Final = np.ndarray
_DEFAULT_AXIS: Final = -1  # compared by identity: any other object takes the full path
_NUMPY: Final = "numpy"  # the default of ``broadcast``, likewise
_TINY_SIZE: Final = engine.TINY
_F = TypeVar("_F", bound=Callable[..., Any])


def _binary(op: str, a: Any, b: Any, broadcast: str | Mode, axis: int, out: Any) -> Any:
    checked = check_operands(op, ("a", "b"), (a, b))
    mode = Mode.parse(broadcast)
    if mode not in _MODES:
        raise BroadcastError(
            f"broadcast must be one of numpy, none, pdpd for an element-wise operator; "
            f"got {broadcast!r}",
            mode=mode.value,
        )
    the_plan = plan(checked.lib.dims(a), checked.lib.dims(b), mode=mode, axis=axis)
    kernel = _kernel(op, checked.names)
    return execute(op, the_plan, kernel, (a, b), dtype=checked.dtype, out=out, lib=checked.lib)


def _kernel(op: str, names: list[str]) -> Kernel:
    if op == "div":
        return _kernels.FLOAT_DIV if names[0] in FLOAT else _kernels.INT_DIV
    if op == "pow":
        if names[0] in FLOAT:
            return _kernels.FLOAT_POW
        return _kernels.INT_FLOAT_POW if names[1] in FLOAT else _kernels.INT_POW
    return _kernels.BINARY[op]


def _tiny_ufuncs(op: str) -> dict[np.dtype[Any], Any]:
    """Map each NumPy dtype whose kernel for ``op`` (both operands of it) is one ufunc to it."""
    sig = SIGNATURES[op]
    found: dict[np.dtype[Any], Any] = {}
    for name in sorted(sig.allowed[sig.inputs[0]]):
        if name in ("string", "bfloat16"):
            continue
        ufunc = _kernel(op, [name, name]).ufunc
        if ufunc is not None:
            found[np.dtype(name)] = ufunc
    return found


_TINY: Final = {
    op: _tiny_ufuncs(op) if engine.quiet_run is not None else {}
    for op in ("add", "sub", "mul", "div", "pow", "equal", "greater", "less", "and_", "or_", "xor")
}
_quiet_run: Any = engine.quiet_run


def _tiny_path(op: str) -> Callable[[_F], _F]:
    """Give a binary operator the tiny fast path in front of its full path.

    NumPy operands of one dtype whose kernel is one ufunc, the default multidirectional
    broadcast (NumPy's own: the ufunc applies exactly the plan), a result too small for the
    memory guard or for threads (or an ``out=`` of an operand's shape and the result's
    dtype): one lookup and one quiet ufunc call. Anything else, shapes that do not
    broadcast included, takes the operator's full path, which explains.
    """
    table = _TINY[op]
    fixed = None if fixed_output(op) is None else np.dtype(fixed_output(op))

    def decorate(full: _F) -> _F:
        @functools.wraps(full)
        def run(
            a: Any,
            b: Any,
            /,
            *,
            broadcast: Any = _NUMPY,
            axis: Any = _DEFAULT_AXIS,
            out: Any = None,
        ) -> Any:
            if (
                type(a) is _NDARRAY
                and type(b) is _NDARRAY
                and broadcast is _NUMPY
                and axis is _DEFAULT_AXIS
            ):
                dt = a.dtype
                ufunc = table.get(dt)
                if ufunc is not None and b.dtype is dt and a.size * b.size <= _TINY_SIZE:
                    if out is None:
                        if _guard.small_fits:
                            try:
                                result = _quiet_run(ufunc, a, b)
                            except (ValueError, RuntimeError):
                                pass  # no broadcast, or the quiet context is busy
                            else:
                                return result if type(result) is _NDARRAY else np.asarray(result)
                    elif (
                        type(out) is _NDARRAY
                        and out.dtype is (fixed or dt)
                        and (out.shape == a.shape or out.shape == b.shape)
                    ):
                        # out has the shape of an operand; the other one must broadcast to
                        # it (else NumPy raises ValueError before writing), so it is the
                        # result's shape. NumPy makes an out overlapping an operand safe.
                        try:
                            _quiet_run(ufunc, a, b, out)  # positional: no keyword dict
                        except (ValueError, RuntimeError):
                            pass  # no broadcast, read-only out, or a busy context
                        else:
                            return out
            return full(a, b, broadcast=broadcast, axis=axis, out=out)

        return run  # type: ignore[return-value]

    return decorate


@_tiny_path("add")
def add(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
    """Add ``a + b`` element-wise (ONNX Add-14, OpenVINO Add-1).

    Parameters
    ----------
    a, b : array
        Operands of one library and one numeric dtype (no bool).
    broadcast : {"numpy", "none", "pdpd"}, default "numpy"
        How the shapes combine: multidirectional (NumPy, ONNX), identical shapes only, or
        OpenVINO PDPD (``b`` onto ``a`` from ``axis``).
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
    >>> bcast.ops.add(np.zeros((2, 3, 4)), np.ones((3, 1)), broadcast="pdpd", axis=1).shape
    (2, 3, 4)
    >>> bcast.ops.add(np.ones(3, np.int32), np.ones(3, np.float32))
    Traceback (most recent call last):
    ...
    TypeError: add: a and b must have the same dtype (ONNX type parameter T); got int32 and float32
    """
    return _binary("add", a, b, broadcast, axis, out)


@_tiny_path("sub")
def sub(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
    """Subtract ``a - b`` element-wise (ONNX Sub-14, OpenVINO Subtract-1).

    Parameters, returns and errors as `add`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.sub(np.array([5, 7], np.uint8), np.array([1], np.uint8))
    array([4, 6], dtype=uint8)
    """
    return _binary("sub", a, b, broadcast, axis, out)


@_tiny_path("mul")
def mul(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
    """Multiply ``a * b`` element-wise (ONNX Mul-14, OpenVINO Multiply-1).

    Parameters, returns and errors as `add`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.mul(np.array([1.5, 2.0]), np.array(2.0))
    array([3., 4.])
    """
    return _binary("mul", a, b, broadcast, axis, out)


@_tiny_path("div")
def div(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
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
    return _binary("div", a, b, broadcast, axis, out)


@_tiny_path("pow")
def pow(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
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
    return _binary("pow", a, b, broadcast, axis, out)


@_tiny_path("equal")
def equal(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
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
    return _binary("equal", a, b, broadcast, axis, out)


@_tiny_path("greater")
def greater(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
    """Compare ``a > b`` element-wise, giving bool (ONNX Greater-13, OpenVINO Greater-1).

    Parameters and errors as `add`; the result is bool.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.greater(np.array([1.0, np.nan, 3.0]), np.array([2.0]))
    array([False, False,  True])
    """
    return _binary("greater", a, b, broadcast, axis, out)


@_tiny_path("less")
def less(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
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
    return _binary("less", a, b, broadcast, axis, out)


@_tiny_path("and_")
def and_(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
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
    return _binary("and_", a, b, broadcast, axis, out)


@_tiny_path("or_")
def or_(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
    """Logical ``a or b`` of bool arrays (ONNX Or-7, OpenVINO LogicalOr-1).

    Bool operands only, as `and_`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.or_(np.array([True, False]), np.array([False]))
    array([ True, False])
    """
    return _binary("or_", a, b, broadcast, axis, out)


@_tiny_path("xor")
def xor(
    a: Array, b: Array, /, *, broadcast: str = "numpy", axis: int = -1, out: Array | None = None
) -> Any:
    """Logical ``a xor b`` of bool arrays (ONNX Xor-7, OpenVINO LogicalXor-1).

    Bool operands only, as `and_`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.xor(np.array([True, False]), np.array([True]))
    array([False,  True])
    """
    return _binary("xor", a, b, broadcast, axis, out)
