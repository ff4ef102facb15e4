"""The variadic operators (Max, Min, Mean, Sum) and the ternary Where.

All broadcast multidirectionally over every operand (ONNX Max-13, Min-13, Mean-13, Sum-13,
Where-16; OpenVINO Maximum/Minimum chains and Select with ``auto_broadcast="numpy"``).
"""

from __future__ import annotations

from functools import lru_cache

from bcast.arrays.views import ArrayT, Scalar
from bcast.core.planning import plan
from bcast.engine import Kernel, execute, prepare_call
from bcast.ops import _kernels
from bcast.ops._common import check_operands
from bcast.ops._tiny import WHERE_CALLS, key_of

__all__ = ["max", "mean", "min", "sum", "where"]


@lru_cache(maxsize=64)
def _fold(op: str, count: int) -> Kernel:
    return _kernels.variadic_kernel(op, count)


def _variadic(op: str, given: tuple[ArrayT | Scalar, ...], out: ArrayT | None) -> ArrayT:
    if not given:
        raise TypeError(f"{op} takes at least one input; got none")
    labels = [f"inputs[{i}]" for i in range(len(given))]
    checked = check_operands(op, labels, given)
    inputs = checked.operands
    the_plan = plan(*(checked.lib.dims(x) for x in inputs))
    kernel = _fold(op, len(inputs))
    result: ArrayT = execute(
        op, the_plan, kernel, inputs, dtype=checked.dtype, out=out, lib=checked.lib
    )
    return result


def max(*inputs: ArrayT | Scalar, out: ArrayT | None = None) -> ArrayT:
    """Take the element-wise maximum of one or more arrays (ONNX Max-13).

    NaN propagates: any NaN among the operands gives NaN, as in the ONNX reference,
    onnxruntime and NumPy's ``maximum``.

    Parameters
    ----------
    *inputs : array or Python scalar
        One or more arrays of one library and one numeric dtype, broadcast together. A
        Python scalar takes the arrays' dtype (the array API rule); one array at least.
    out : array, optional
        An array of the result's shape and dtype to write into; it is returned.

    Returns
    -------
    array
        A new array (or ``out``) of the inputs' dtype.

    Raises
    ------
    BroadcastError
        If the shapes do not broadcast.
    TypeError
        If no input is given, the dtypes differ or are not allowed.
    MemoryLimitError
        If the result would exceed the memory limit.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.max(np.array([1, 5]), np.array([[3], [7]]))
    array([[3, 5],
           [7, 7]])
    >>> bcast.ops.max(np.array([np.nan, 1.0]), np.array([0.0, 2.0]))
    array([nan,  2.])
    """
    return _variadic("max", inputs, out)


def min(*inputs: ArrayT | Scalar, out: ArrayT | None = None) -> ArrayT:
    """Take the element-wise minimum of one or more arrays (ONNX Min-13).

    NaN propagates, as in `max`. Parameters, returns and errors as `max`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.min(np.array([1, 5], np.uint8), np.array([3], np.uint8))
    array([1, 3], dtype=uint8)
    """
    return _variadic("min", inputs, out)


def sum(*inputs: ArrayT | Scalar, out: ArrayT | None = None) -> ArrayT:
    """Add one or more float arrays element-wise (ONNX Sum-13).

    The ONNX schema allows float dtypes only; integers are a TypeError (onnxruntime rejects
    them too; the ONNX reference computes them anyway). float16 inputs are added in float32
    and the sum rounded once, as onnxruntime does. Parameters, returns and errors as `max`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.sum(np.array([1.0]), np.array([1.0, 2.0]), np.array([[1.0], [2.0]]))
    array([[3., 4.],
           [4., 5.]])
    >>> bcast.ops.sum(np.array([1, 2]), np.array([3, 4]))
    Traceback (most recent call last):
    ...
    TypeError: sum: inputs[0] has dtype int64, which ONNX Sum does not allow; ...
    """
    return _variadic("sum", inputs, out)


def mean(*inputs: ArrayT | Scalar, out: ArrayT | None = None) -> ArrayT:
    """Average one or more float arrays element-wise (ONNX Mean-13).

    The sum of the broadcast operands divided by their count; float dtypes only, as `sum`
    (float16: in float32, rounded once).
    Any operand may be the largest (the ONNX reference fails unless the first one is).
    Parameters, returns and errors as `max`.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.mean(np.array([1.0, 2.0]), np.array([4.0]), np.array([[10.0], [20.0]]))
    array([[5.        , 5.33333333],
           [8.33333333, 8.66666667]])
    """
    return _variadic("mean", inputs, out)


def where(
    condition: ArrayT | Scalar,
    x: ArrayT | Scalar,
    y: ArrayT | Scalar,
    /,
    *,
    out: ArrayT | None = None,
) -> ArrayT:
    """Choose ``x`` where ``condition`` holds, else ``y`` (ONNX Where-16, OpenVINO Select-1).

    The three operands broadcast multidirectionally, in the order condition, x, y.

    Parameters
    ----------
    condition : array
        A bool array.
    x, y : array or Python scalar
        Arrays of one dtype (any: numeric, bool, complex, string); the result has it. One
        may be a Python scalar: it takes the other's dtype (the array API rule).
    out : array, optional
        An array of the result's shape and dtype to write into; it is returned.

    Returns
    -------
    array
        A new array (or ``out``).

    Raises
    ------
    BroadcastError
        If the shapes do not broadcast.
    TypeError
        If ``condition`` is not bool or ``x`` and ``y`` differ in dtype.
    MemoryLimitError
        If the result would exceed the memory limit.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.where(np.array([[True], [False]]), np.array([1.0, 2.0, 3.0]), np.array(0.0))
    array([[1., 2., 3.],
           [0., 0., 0.]])
    """
    key = key_of((condition, x, y), out)
    if key is not None:
        call = WHERE_CALLS.lookup(key)
        if call is not None:  # planned by an earlier call of this call site
            replayed: ArrayT = call((condition, x, y), out)
            return replayed
    checked = check_operands("where", ("condition", "x", "y"), (condition, x, y))
    operands = condition, x, y = checked.operands
    the_plan = plan(checked.lib.dims(condition), checked.lib.dims(x), checked.lib.dims(y))
    if key is not None:
        call = prepare_call(
            "where", the_plan, _kernels.WHERE, operands, dtype=checked.dtype, out=out
        )
        if call is not None:  # kept for the next call of this call site
            WHERE_CALLS.put(key, call)
            planned: ArrayT = call(operands, out)
            return planned
    result: ArrayT = execute(
        "where", the_plan, _kernels.WHERE, operands, dtype=checked.dtype, out=out, lib=checked.lib
    )
    return result
