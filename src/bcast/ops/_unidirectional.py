"""The operators with ONNX unidirectional broadcasting: Gemm's C and PRelu's slope.

Unidirectional: B must broadcast to A and the result is exactly A (ONNX Broadcasting.md).
For Gemm, A is the product's shape (M, N) and B is C; for PRelu, A is X and B the slope.
"""

from __future__ import annotations

from typing import Any

from bcast.arrays.libraries import shape_of
from bcast.arrays.views import ArrayT, Scalar
from bcast.core.errors import BroadcastError
from bcast.core.planning import plan
from bcast.core.plans import Plan
from bcast.engine import execute
from bcast.ops import _kernels
from bcast.ops._common import check_operands

__all__ = ["gemm", "prelu"]


def _unidirectional(a: Any, b: Any, labels: tuple[str, str]) -> Plan:
    """Plan B onto A unidirectionally; on failure, re-plan so the error names the roles.

    The labels are passed only when the shapes fail: the common path hits the plan cache.
    """
    try:
        return plan(a, b, mode="unidirectional")
    except BroadcastError:
        pass  # raised again below, outside this handler: no chained traceback
    return plan(a, b, mode="unidirectional", labels=labels)


def _scalar(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"gemm: {name} must be a float; got {type(value).__name__} {value!r}")
    return float(value)


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"gemm: {name} must be a bool; got {type(value).__name__} {value!r}")
    return value


def gemm(
    a: ArrayT,
    b: ArrayT,
    c: ArrayT | Scalar | None = None,
    /,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
    out: ArrayT | None = None,
) -> ArrayT:
    """Compute ``alpha * A' @ B' + beta * C`` (ONNX Gemm-13).

    ``A'`` is ``A`` transposed when ``trans_a``, likewise ``B'``; M, N and K come from the
    transposed views. ``C`` must broadcast *unidirectionally* to (M, N): ``[]``, ``[N]``,
    ``[1,N]``, ``[M,1]``, ``[M,N]`` and so on, never a shape larger than (M, N).

    Parameters
    ----------
    a, b : array
        Rank-2 arrays of one library and dtype (float, or 32/64-bit integers). float16
        computes in float32 and is rounded once, as onnxruntime and OpenVINO do.
    c : array, optional
        The bias; absent means 0.
    alpha, beta : float, default 1.0
        Scale factors. With ``beta == 0`` the values of ``c`` are not read (its shape is
        still checked). Integer operands compute exactly when ``alpha`` and ``beta`` are
        whole numbers (and not negative, for unsigned dtypes), else in float64, converted
        into the dtype as the ONNX reference does (truncation).
    trans_a, trans_b : bool, default False
        Transpose ``a`` / ``b`` first.
    out : array, optional
        An array of shape (M, N) and the operands' dtype to write into; it is returned.

    Returns
    -------
    array
        A new (M, N) array (or ``out``).

    Raises
    ------
    ValueError
        If ``a`` or ``b`` is not rank 2, or their inner dimensions differ.
    BroadcastError
        If ``c`` does not broadcast unidirectionally to (M, N).
    TypeError
        If the dtypes differ or are not allowed, or an option has the wrong type.
    MemoryLimitError
        If the result would exceed the memory limit.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> b = np.ones((3, 4), np.float32)
    >>> bcast.ops.gemm(a, b, np.array([[1], [2]], np.float32))
    array([[ 4.,  4.,  4.,  4.],
           [14., 14., 14., 14.]], dtype=float32)
    >>> bcast.ops.gemm(a, b, np.ones((3,), np.float32))
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: unidirectional: cannot broadcast [2,4] and [3] at axis 1: ... (C must ...
    """
    scale, weight = _scalar("alpha", alpha), _scalar("beta", beta)
    flags = (_flag("trans_a", trans_a), _flag("trans_b", trans_b))
    operands = (a, b) if c is None else (a, b, c)
    checked = check_operands("gemm", ("a", "b", "c")[: len(operands)], operands)
    a, b = checked.operands[:2]
    c = None if c is None else checked.operands[2]
    xp = checked.lib.xp
    for label, x in (("a", a), ("b", b)):
        if len(shape_of(x)) != 2:
            raise ValueError(f"gemm: {label} must be rank 2; got shape {list(shape_of(x))}")
    left = _transposed(a, xp) if flags[0] else a
    right = _transposed(b, xp) if flags[1] else b
    (m, k), (k2, n) = shape_of(left), shape_of(right)
    if k != k2:
        raise ValueError(
            f"gemm: the inner dimensions of A' [{m},{k}] and B' [{k2},{n}] differ "
            f"(trans_a={flags[0]}, trans_b={flags[1]})"
        )
    kernel = _kernels.gemm_kernel(left, right, scale, weight, has_c=c is not None)
    if c is None:
        the_plan = plan((m, n))
        alone: ArrayT = execute(
            "gemm", the_plan, kernel, (), dtype=checked.dtype, out=out, lib=checked.lib
        )
        return alone
    the_plan = _unidirectional((m, n), checked.lib.dims(c), ("(M,N)", "C"))
    result: ArrayT = execute(
        "gemm", the_plan, kernel, (c,), dtype=checked.dtype, out=out, lib=checked.lib, slots=(1,)
    )
    return result


def _transposed(x: Any, xp: Any) -> Any:
    return x.T if xp is None else xp.permute_dims(x, (1, 0))


def prelu(x: ArrayT, slope: ArrayT | Scalar, /, *, out: ArrayT | None = None) -> ArrayT:
    """Apply ``slope * x`` where ``x < 0``, ``x`` elsewhere (ONNX PRelu-16).

    ``slope`` broadcasts *unidirectionally* to ``x``: the result has exactly ``x``'s shape.
    onnxruntime broadcasts both ways (a slope larger than ``x`` grows the result) and the
    ONNX reference also tries a channel axis for a 1-D slope; neither is the ONNX text,
    and bcast raises BroadcastError for both.

    Parameters
    ----------
    x : array
        The input (float, or 32/64-bit integers).
    slope : array
        Of ``x``'s dtype and library.
    out : array, optional
        An array of ``x``'s shape and dtype to write into; it is returned.

    Returns
    -------
    array
        A new array (or ``out``) of ``x``'s shape and dtype.

    Raises
    ------
    BroadcastError
        If ``slope`` does not broadcast unidirectionally to ``x``.
    TypeError
        If the dtypes differ or are not allowed.
    MemoryLimitError
        If the result would exceed the memory limit.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> x = np.array([[-1.0, 2.0], [-3.0, 4.0]])
    >>> bcast.ops.prelu(x, np.array([[0.1], [0.5]]))
    array([[-0.1,  2. ],
           [-1.5,  4. ]])
    >>> bcast.ops.prelu(np.array([-1.0, 1.0]), np.ones((2, 2)))
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: unidirectional: slope [2,2] has rank 2, more than X [2] ...
    """
    checked = check_operands("prelu", ("x", "slope"), (x, slope))
    x, slope = checked.operands
    the_plan = _unidirectional(checked.lib.dims(x), checked.lib.dims(slope), ("X", "slope"))
    result: ArrayT = execute(
        "prelu",
        the_plan,
        _kernels.PRELU,
        (x, slope),
        dtype=checked.dtype,
        out=out,
        lib=checked.lib,
    )
    return result
