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
from bcast.core.plans import Plan
from bcast.core.shape import ShapeLike
from bcast.engine import CallCache, execute, prepare_call
from bcast.ops import _kernels
from bcast.ops._common import Checked, check_operands
from bcast.ops._tiny import BROADCAST_CALLS, EXPAND_CALLS, dims_key, key_of

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
    key = _call_key(x, out, shape)
    if key is not None:
        call = EXPAND_CALLS.lookup(key)
        if call is not None:  # planned by an earlier call of this call site
            replayed: ArrayT = call((x,), out)
            return replayed
    checked = check_operands("expand", ("x",), (x,))
    (x,) = checked.operands
    target = static_shape(shape, "shape")
    the_plan = plan(checked.lib.dims(x), target, mode="bidirectional")
    return _copy("expand", EXPAND_CALLS, key, the_plan, x, checked, out)


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
    key = _broadcast_key(data, out, target_shape, axes_mapping, mode, axis)
    if key is not None:
        call = BROADCAST_CALLS.lookup(key)
        if call is not None:  # planned by an earlier call of this call site
            replayed: ArrayT = call((data,), out)
            return replayed
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
    return _copy("broadcast", BROADCAST_CALLS, key, the_plan, data, checked, out, (index,))


def _copy(
    op: str,
    calls: CallCache,
    key: tuple[object, ...] | None,
    the_plan: Plan,
    data: ArrayT,
    checked: Checked,
    out: ArrayT | None,
    slots: tuple[int, ...] | None = None,
) -> ArrayT:
    """Copy ``data`` into the plan's output: by a call kept in ``calls`` under ``key``, or not."""
    if key is not None:
        call = prepare_call(
            op, the_plan, _kernels.COPY, (data,), dtype=checked.dtype, out=out, slots=slots
        )
        if call is not None:  # kept for the next call of this call site
            calls.put(key, call)
            planned: ArrayT = call((data,), out)
            return planned
    result: ArrayT = execute(
        op, the_plan, _kernels.COPY, (data,), dtype=checked.dtype, out=out, lib=checked.lib,
        slots=slots,
    )  # fmt: skip
    return result


def _call_key(x: object, out: object, target: object) -> tuple[object, ...] | None:
    """Return the key of a call on a NumPy array to a target of Python ints, or None."""
    key = key_of((x,), out)
    if key is None:
        return None
    dims = dims_key(target)
    return None if dims is None else (*key, dims)


def _broadcast_key(
    data: object, out: object, target: object, axes_mapping: object, mode: object, axis: object
) -> tuple[object, ...] | None:
    """`_call_key` with Broadcast's parameters, or None where one is not of a plain type."""
    key = _call_key(data, out, target)
    if key is None or type(axis) is not int or not (type(mode) is str or type(mode) is Mode):
        return None
    if axes_mapping is None:
        return (*key, None, mode, axis)
    mapping = dims_key(axes_mapping)
    return None if mapping is None else (*key, mapping, mode, axis)
