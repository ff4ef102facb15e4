"""Lowering: any `Plan` as a plain NumPy-style program (squeeze, unsqueeze, expand).

Every broadcasting rule set, however it aligns its operands, ends in the same two steps:
put each operand at the output's rank with 1s where it has no axis (the *aligned shape*),
then broadcast it multidirectionally to the output. This module writes those steps down
per operand, so that an adapter can emit them in another language (ONNX nodes in
`bcast.onnx.lower`) and tests can run them with NumPy (`apply_numpy`).

The steps are expressed as axis lists rather than one reshape, because axis lists work for
partial shapes too:

1. ``squeeze_axes``: operand axes the rule drops (PDPD's trailing ones of B that stick out
   past A's last axis). They are 1 in every valid instance.
2. ``unsqueeze_axes``: output axes where the operand has no axis; inserting 1s there gives
   the aligned shape. Every mode pairs operand axes with output axes in increasing order,
   so squeeze-then-unsqueeze is exactly the reshape to `Plan.aligned_dims`.
3. ``expand_to``: the output shape; NumPy's ``broadcast_to`` (ONNX ``Expand``) finishes the
   job, and can be skipped when no axis is stretched.

The module is pure: it reads the Plan and imports no ONNX.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bcast.core.dim import Dim
from bcast.core.modes import Mode
from bcast.core.plans import Plan
from bcast.core.shape import Shape

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Lowering", "LoweredOperand", "apply_numpy", "broadcast_operands", "lower"]


@dataclass(frozen=True, slots=True)
class LoweredOperand:
    """The program that broadcasts one operand of a `Plan` to the plan's output.

    Attributes
    ----------
    operand : int
        Index of the operand in ``plan.shapes``.
    shape : Shape
        The operand's own shape.
    squeeze_axes : tuple of int
        Operand axes to remove first (ascending); each is 1 in a valid instance.
    unsqueeze_axes : tuple of int
        Output axes at which to insert a 1 next (ascending).
    aligned : tuple of Dim
        The shape after the two steps above: the operand at the output's rank.
    expand_to : Shape
        The output shape, the target of the final multidirectional broadcast.
    stretched_axes : tuple of int
        Output axes along which the operand is (or may be) replicated; empty means the
        final broadcast is the identity and can be left out.
    """

    operand: int
    shape: Shape
    squeeze_axes: tuple[int, ...]
    unsqueeze_axes: tuple[int, ...]
    aligned: tuple[Dim, ...]
    expand_to: Shape
    stretched_axes: tuple[int, ...]

    @property
    def aligned_shape(self) -> tuple[int, ...]:
        """`aligned` as ints (static shapes only), the equivalent single reshape."""
        return tuple(d.value for d in self.aligned)

    @property
    def needs_expand(self) -> bool:
        """Whether the final broadcast changes anything (some axis is stretched)."""
        return bool(self.stretched_axes)


@dataclass(frozen=True, slots=True)
class Lowering:
    """A `Plan` lowered to one `LoweredOperand` per operand that gets broadcast.

    Attributes
    ----------
    plan : Plan
        The plan that was lowered.
    operands : tuple of LoweredOperand
        The programs, in operand order (see `broadcast_operands` for which operands).
    """

    plan: Plan
    operands: tuple[LoweredOperand, ...]


def broadcast_operands(mode: Mode, count: int) -> tuple[int, ...]:
    """Return the indices of the operands that a mode broadcasts (the arrays, not targets).

    ``numpy`` and ``none`` broadcast every operand; ``pdpd`` and ``unidirectional`` only B
    (A *is* the result's shape); ``explicit`` and ``bidirectional`` only data (the target is
    a shape, not an array).

    Examples
    --------
    >>> import bcast
    >>> from bcast.core.lowering import broadcast_operands
    >>> broadcast_operands(bcast.Mode.NUMPY, 3), broadcast_operands(bcast.Mode.PDPD, 2)
    ((0, 1, 2), (1,))
    """
    if mode in (Mode.NUMPY, Mode.NONE):
        return tuple(range(count))
    if mode in (Mode.PDPD, Mode.UNIDIRECTIONAL):
        return (1,)
    return (0,)


def lower(plan: Plan, /) -> Lowering:
    """Lower a `Plan` to squeeze / unsqueeze / expand steps for each broadcast operand.

    Parameters
    ----------
    plan : Plan
        A plan from `bcast.plan`. Partial shapes are fine; every operand that gets
        broadcast, and the output, must have a known rank.

    Returns
    -------
    Lowering
        One `LoweredOperand` per operand named by `broadcast_operands`.

    Raises
    ------
    ValueError
        If the output or a broadcast operand has unknown rank: the axes to insert depend on
        the rank, so there is no fixed program.

    See Also
    --------
    apply_numpy : run one lowered operand with NumPy.
    bcast.onnx.lower : the same program as ONNX nodes.

    Notes
    -----
    In mode ``none`` no axis is ever stretched, even where partial dims may be 1: the mode
    does not broadcast, it only requires identical shapes.

    Examples
    --------
    A PDPD B with a trailing one that sticks out past A is squeezed, then unsqueezed:

    >>> import bcast
    >>> from bcast.core.lowering import lower
    >>> step = lower(bcast.plan("[2,3,4]", "[3,1,1]", mode="pdpd", axis=1)).operands[0]
    >>> step.squeeze_axes, step.unsqueeze_axes, step.aligned_shape, step.stretched_axes
    ((2,), (0,), (1, 3, 1), (0, 2))

    Explicit mode inserts 1s in the gaps of ``axes_mapping``; partial dims are kept:

    >>> step = lower(bcast.plan("[N]", "[2,N,5]", mode="explicit", axes_mapping=[1])).operands[0]
    >>> step.unsqueeze_axes, str(step.expand_to)
    ((0, 2), '[2,N,5]')
    """
    if plan.output.rank is None:
        raise ValueError(
            f"cannot lower a {plan.mode.value} plan whose output has unknown rank "
            f"(operands {', '.join(str(s) for s in plan.shapes)})"
        )
    out_rank = plan.output.rank
    steps = []
    for k in broadcast_operands(plan.mode, len(plan.shapes)):
        axes = plan.alignment[k]
        if axes is None:
            raise ValueError(
                f"cannot lower operand {plan.labels[k]} {plan.shapes[k]}: its rank is unknown"
            )
        kept = {a for a in axes if a is not None}
        stretched = () if plan.mode is Mode.NONE else plan.stretched_axes(k)
        steps.append(
            LoweredOperand(
                operand=k,
                shape=plan.shapes[k],
                squeeze_axes=tuple(i for i, a in enumerate(axes) if a is None),
                unsqueeze_axes=tuple(j for j in range(out_rank) if j not in kept),
                aligned=plan.aligned_dims(k),
                expand_to=plan.output,
                stretched_axes=stretched,
            )
        )
    return Lowering(plan=plan, operands=tuple(steps))


def apply_numpy(lowered: LoweredOperand, x: Any, /) -> np.ndarray[Any, Any]:
    """Run one lowered operand with NumPy: squeeze, expand_dims, then ``broadcast_to``.

    Parameters
    ----------
    lowered : LoweredOperand
        One step of `lower`; its output shape must be static.
    x : array_like
        The operand's values, of the operand's shape.

    Returns
    -------
    numpy.ndarray
        A read-only view of ``x`` with the plan's output shape.

    Raises
    ------
    ValueError
        If the output shape is not static, or ``x`` does not fit the program (a squeezed
        axis that is not 1, an axis that cannot be broadcast).

    Examples
    --------
    >>> import bcast, numpy as np
    >>> from bcast.core.lowering import apply_numpy, lower
    >>> step = lower(bcast.plan((2,), (2, 3), mode="explicit", axes_mapping=[0])).operands[0]
    >>> apply_numpy(step, np.array([1, 2]))
    array([[1, 1, 1],
           [2, 2, 2]])
    """
    if not lowered.expand_to.is_static:
        raise ValueError(f"apply_numpy needs a static output shape; got {lowered.expand_to}")
    import numpy as np  # only here: reading an ONNX model for check loads no NumPy

    y = np.asarray(x)
    if lowered.squeeze_axes:
        y = np.squeeze(y, axis=lowered.squeeze_axes)
    if lowered.unsqueeze_axes:
        y = np.expand_dims(y, axis=lowered.unsqueeze_axes)
    return np.broadcast_to(y, lowered.expand_to.to_tuple())
