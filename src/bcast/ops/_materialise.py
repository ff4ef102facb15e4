"""The materialising operators: ONNX Expand and OpenVINO Broadcast-3.

Both are the view of `bcast.broadcast_to` copied into a new array (or ``out``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bcast.arrays.targets import plan_to_target, static_shape
from bcast.arrays.views import ArrayT
from bcast.core.errors import BroadcastError
from bcast.core.modes import BroadcastModeName, Mode
from bcast.core.planning import plan
from bcast.core.shape import ShapeLike
from bcast.engine import execute
from bcast.ops import _kernels
from bcast.ops._common import check_operands

__all__ = ["broadcast", "expand"]

_BROADCAST_MODES: Final = (Mode.NUMPY, Mode.EXPLICIT, Mode.BIDIRECTIONAL, Mode.PDPD)


def expand(x: ArrayT, shape: ShapeLike, /, *, out: ArrayT | None = None) -> ArrayT:
    """Broadcast ``x`` with ``shape`` into a new array (ONNX Expand-13).

    The rule is bidirectional: the result is the NumPy broadcast of ``x``'s shape and
    ``shape``, so it can be larger than ``shape`` (1s in ``shape``, a lower rank).

    Parameters
    ----------
    x : array
        Any dtype.
    shape : sequence of int, 1-D integer array, Shape or str
        The target shape (non-negative; ONNX's int64 ``shape`` input).
    out : array, optional
        An array of the result's shape and ``x``'s dtype to write into; it is returned.

    Returns
    -------
    array
        A new array (or ``out``).

    Raises
    ------
    BroadcastError
        If the shapes do not broadcast, or ``shape`` has negative entries.
    TypeError
        If ``x`` is not an array or ``shape`` is not shape-like.
    MemoryLimitError
        If the result would exceed the memory limit.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.expand(np.array([1, 2, 3]), [2, 1])
    array([[1, 2, 3],
           [1, 2, 3]])
    >>> bcast.ops.expand(np.array([1, 2, 3]), [1]).shape
    (3,)
    """
    checked = check_operands("expand", ("x",), (x,))
    (x,) = checked.operands
    target = static_shape(shape, "shape")
    the_plan = plan(checked.lib.dims(x), target, mode="bidirectional")
    result: ArrayT = execute(
        "expand", the_plan, _kernels.COPY, (x,), dtype=checked.dtype, out=out, lib=checked.lib
    )
    return result


def broadcast(
    data: ArrayT,
    target_shape: ShapeLike,
    axes_mapping: Sequence[int] | None = None,
    /,
    *,
    mode: BroadcastModeName | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Broadcast ``data`` to ``target_shape`` into a new array (OpenVINO Broadcast-3).

    =================  ========================================================================
    ``numpy``          one-directional: the result is exactly ``target_shape`` (ONNX
                       unidirectional with the target as A)
    ``explicit``       ``axes_mapping`` gives the target axis of each data axis (strictly
                       increasing)
    ``bidirectional``  the NumPy broadcast of both, as ONNX Expand
    ``pdpd``           the element-wise PDPD rule with ``data`` as B and the target as A:
                       ``data`` placed from ``axis``, trailing ones ignored; the result is
                       ``target_shape``. OpenVINO's own Broadcast-3 pdpd applies a different,
                       per-dim bidirectional rule; see ``docs/peer-differences.md``.
    =================  ========================================================================

    Parameters
    ----------
    data : array
        Any dtype.
    target_shape : sequence of int, 1-D integer array, Shape or str
        The target (static, non-negative).
    axes_mapping : sequence of int, optional
        Explicit mode only.
    mode : {"numpy", "explicit", "bidirectional", "pdpd"}, default "numpy"
        The broadcast specification.
    axis : int, default -1
        PDPD only: the target axis where ``data`` starts; -1 right-aligns.
    out : array, optional
        An array of the result's shape and ``data``'s dtype to write into; it is returned.

    Returns
    -------
    array
        A new array (or ``out``).

    Raises
    ------
    BroadcastError
        If ``data`` does not broadcast to the target under ``mode``, or a parameter is
        invalid.
    TypeError
        If ``data`` is not an array or the target is not shape-like.
    MemoryLimitError
        If the result would exceed the memory limit.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.broadcast(np.array([1, 2]), [2, 2, 3], [1], mode="explicit")[..., 0]
    array([[1, 2],
           [1, 2]])
    >>> bcast.ops.broadcast(np.array([[1], [2]]), [2, 3]).tolist()
    [[1, 1, 1], [2, 2, 2]]
    >>> bcast.ops.broadcast(np.array([1, 2]), [2, 1])
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: unidirectional: cannot broadcast [2,1] and [2] at axis 1: ...
    """
    checked = check_operands("broadcast", ("data",), (data,))
    (data,) = checked.operands
    parsed = Mode.parse(mode)
    if parsed not in _BROADCAST_MODES:
        raise BroadcastError(
            f"mode must be one of numpy, explicit, bidirectional, pdpd for Broadcast; got {mode!r}",
            mode=parsed.value,
        )
    target = static_shape(target_shape, "target_shape")
    the_plan, index = plan_to_target(
        checked.lib.dims(data), target, mode=parsed, axis=axis, axes_mapping=axes_mapping
    )
    result: ArrayT = execute(
        "broadcast",
        the_plan,
        _kernels.COPY,
        (data,),
        dtype=checked.dtype,
        out=out,
        lib=checked.lib,
        slots=(index,),
    )
    return result
