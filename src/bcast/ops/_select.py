"""OpenVINO Select-1 and FakeQuantize-1, with their ``auto_broadcast`` as ``broadcast=``.

``numpy`` broadcasts every operand multidirectionally; ``none`` wants identical shapes;
``pdpd`` places each other operand onto the first data operand (Select's ``then``,
FakeQuantize's ``X``) from ``axis``, as OpenVINO's shape inference merges them, and the
result has that operand's shape. Either way `bcast.plan` decides; the kernel runs in
`bcast.engine`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bcast.arrays.views import ArrayT, Scalar, broadcast_to
from bcast.core.modes import Mode
from bcast.core.planning import plan
from bcast.engine import execute
from bcast.ops._common import Checked, check_operands, elementwise_mode
from bcast.ops._kernels import WHERE
from bcast.ops._quant_kernels import fake_quantize_kernel

__all__ = ["fake_quantize", "select"]


def _planned(
    checked: Checked, labels: Sequence[str], anchor: int, broadcast: Any, axis: int
) -> tuple[Any, tuple[Any, ...]]:
    """Plan the operands under ``broadcast``; for pdpd, first view each onto the anchor."""
    mode = elementwise_mode(broadcast)
    operands = checked.operands
    dims = [checked.lib.dims(v) for v in operands]
    if mode is Mode.PDPD:
        viewed = []
        for k, v in enumerate(operands):
            if k == anchor:
                viewed.append(v)
                continue
            plan(dims[anchor], dims[k], mode=mode, axis=axis, labels=[labels[anchor], labels[k]])
            viewed.append(broadcast_to(v, dims[anchor], mode="pdpd", axis=axis))
        operands = tuple(viewed)
        return plan(*(checked.lib.dims(v) for v in operands), labels=labels), operands
    return plan(*dims, mode=mode, labels=labels), operands


def select(
    cond: ArrayT | Scalar,
    a: ArrayT | Scalar,
    b: ArrayT | Scalar,
    /,
    *,
    broadcast: str | Mode = "numpy",
    axis: int = -1,
    out: ArrayT | None = None,
) -> ArrayT:
    """Choose ``a`` where ``cond`` holds, else ``b`` (OpenVINO Select-1).

    With ``broadcast="numpy"`` (the default) this is `where`. With ``"pdpd"``, ``b`` and
    then ``cond`` are broadcast onto ``a`` from ``axis`` (OpenVINO merges else, then cond,
    into then's shape) and the result has ``a``'s shape; ``"none"`` wants three identical
    shapes.

    Parameters
    ----------
    cond : array
        A bool array.
    a, b : array or Python scalar
        The "then" and "else" values, of one dtype (numeric, bool or string).
    broadcast : {"numpy", "none", "pdpd"}, default "numpy"
        OpenVINO's ``auto_broadcast``.
    axis : int, default -1
        PDPD only: the axis of ``a`` where the other operands start; -1 right-aligns.
    out : array, optional
        An array of the result's shape and dtype to write into; it is returned.

    Returns
    -------
    array
        A new array (or ``out``) of ``a``'s dtype.

    Raises
    ------
    BroadcastError
        If the shapes do not broadcast under ``broadcast``.
    TypeError
        If ``cond`` is not bool or ``a`` and ``b`` differ in dtype.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> bcast.ops.select(np.array([True, False]), np.array([[1, 2], [3, 4]]), np.array(0))
    array([[1, 0],
           [3, 0]])
    >>> cond = np.array([[True], [False]])
    >>> bcast.ops.select(cond, np.ones((2, 3)), np.zeros(2), broadcast="pdpd", axis=0)
    array([[1., 1., 1.],
           [0., 0., 0.]])
    """
    labels = ("cond", "a", "b")
    checked = check_operands("select", labels, (cond, a, b))
    the_plan, operands = _planned(checked, labels, 1, broadcast, axis)
    result: ArrayT = execute(
        "select", the_plan, WHERE, operands, dtype=checked.dtype, out=out, lib=checked.lib
    )
    return result


def fake_quantize(
    x: ArrayT,
    in_low: ArrayT | Scalar,
    in_high: ArrayT | Scalar,
    out_low: ArrayT | Scalar,
    out_high: ArrayT | Scalar,
    /,
    *,
    levels: int,
    broadcast: str | Mode = "numpy",
    out: ArrayT | None = None,
) -> ArrayT:
    """Fake-quantize ``x`` to ``levels`` levels (OpenVINO FakeQuantize-1).

    Where ``x <= min(in_low, in_high)`` the result is ``out_low``; where ``x > max(in_low,
    in_high)`` it is ``out_high``; elsewhere ``round((x - in_low) / (in_high - in_low) *
    (levels - 1)) / (levels - 1) * (out_high - out_low) + out_low``, rounded half to even,
    computed in float32 (float64 for float64 data). The four limits broadcast with ``x``
    under ``broadcast`` (pdpd: onto ``x``, right-aligned).

    Parameters
    ----------
    x : array
        Floating-point data.
    in_low, in_high, out_low, out_high : array or Python float
        The input and output ranges, of ``x``'s dtype.
    levels : int
        The number of quantization levels, at least 2.
    broadcast : {"numpy", "none", "pdpd"}, default "numpy"
        OpenVINO's ``auto_broadcast``.
    out : array, optional
        An array of the result's shape and dtype to write into; it is returned.

    Returns
    -------
    array
        A new array (or ``out``) of ``x``'s dtype.

    Raises
    ------
    BroadcastError
        If the shapes do not broadcast under ``broadcast``.
    TypeError
        If the dtypes differ or are not floating-point.
    ValueError
        If ``levels`` is not an integer of at least 2.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> x = np.array([-1.0, 0.1, 0.5, 0.8, 2.0], np.float32)
    >>> bcast.ops.fake_quantize(x, 0.0, 1.0, 0.0, 10.0, levels=3)
    array([ 0.,  0.,  5., 10., 10.], dtype=float32)
    >>> bcast.ops.fake_quantize(x, np.zeros((2, 1), np.float32), 1.0, 0.0, 1.0, levels=5).shape
    (2, 5)
    """
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 2:
        raise ValueError(f"fake_quantize: levels must be an integer of at least 2; got {levels!r}")
    labels = ("x", "in_low", "in_high", "out_low", "out_high")
    checked = check_operands("fake_quantize", labels, (x, in_low, in_high, out_low, out_high))
    the_plan, operands = _planned(checked, labels, 0, broadcast, -1)
    result: ArrayT = execute(
        "fake_quantize",
        the_plan,
        fake_quantize_kernel(levels),
        operands,
        dtype=checked.dtype,
        out=out,
        lib=checked.lib,
    )
    return result
