"""OpenVINO PRelu-1's slope rule: per channel where a 1-D slope fits, else NumPy's.

The PRelu-1 specification: the channel axis is the second axis of ``data`` (the first of a
1-D ``data``); "if slope input rank is 1 and its dimension is equal to the second dimension
of data input, then per channel broadcast is applied. Otherwise slope input is broadcasted
with numpy rules". The output has data's shape, so "numpy rules" can only mean the slope
broadcasts *to* data: unidirectional, as ONNX's PRelu. The per-channel case is only an
alignment (the slope placed at the channel axis): both cases are decided by the existing
rules (`bcast.core.rules.apply_rule`, explicit and unidirectional), so nothing here merges
a dim itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.plans import Plan
from bcast.core.rules import apply_rule
from bcast.core.shape import Shape, ShapeLike, as_shape

__all__ = ["CHANNEL_AXIS", "channel_axis", "channel_plan"]

CHANNEL_AXIS: Final = 1
"""The channel axis of OpenVINO's PRelu (NCHW...): data's second axis."""


def channel_axis(x: Shape) -> int | None:
    """Return the axis a 1-D slope may follow: 1, or 0 for 1-D ``x``; None if there is none.

    >>> from bcast import Shape
    >>> channel_axis(Shape((2, 3, 4))), channel_axis(Shape((5,))), channel_axis(Shape(()))
    (1, 0, None)
    """
    if x.rank is None or x.rank == 0:
        return None
    return CHANNEL_AXIS if x.rank > 1 else 0


def channel_plan(x: ShapeLike, slope: ShapeLike, *, labels: Sequence[str] = ("X", "slope")) -> Plan:
    """Plan OpenVINO PRelu-1: ``slope`` per channel of ``x`` where it fits, else unidirectional.

    A 1-D slope whose length equals ``x``'s channel dim (axis 1; axis 0 of a 1-D ``x``) is
    placed at that axis; any other slope must broadcast unidirectionally to ``x`` (the
    NumPy rule with the result ``x``). The Plan's mode is ``unidirectional`` and its
    alignment says where the slope goes. On partial shapes where either placement may
    apply (a slope ``[?]``), both are planned: the output holds both results and the
    slope's alignment is None (decided only by the concrete shapes).

    Parameters
    ----------
    x, slope : Shape, str or sequence of dims
        PRelu's ``data`` and ``slope``.
    labels : sequence of str
        The operands' names in an error's message and picture.

    Returns
    -------
    Plan
        Operands ``(x, slope)``; the output is ``x``, narrowed by what the slope forces.

    Raises
    ------
    BroadcastError
        If the slope fits neither the channel axis nor, unidirectionally, ``x``: the axis
        is where the NumPy rule fails (OpenVINO's CPU plugin fails there too).

    Examples
    --------
    >>> p = channel_plan("[2,3,4]", "[3]")
    >>> str(p.output), p.alignment[1], p.aligned_shape(1)
    ('[2,3,4]', (1,), (1, 3, 1))
    >>> channel_plan("[2,3,4]", "[4]").alignment[1]  # not the channel count: NumPy's rule
    (2,)
    >>> channel_plan("[2,3,4]", "[5]")
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: unidirectional: slope [5] is not X's channel count (axis 1: 3) ...
      X      2  3  4
      slope        5
                   ^ axis 2
    """
    names = tuple(labels)
    xs, ss = as_shape(x), as_shape(slope)
    axis = channel_axis(xs)
    if axis is None or ss.rank != 1:
        return apply_rule((xs, ss), Mode.UNIDIRECTIONAL, -1, None, names)
    length, channels = ss.dims[0], xs.dims[axis]
    if length.definitely_equal(channels):
        return _per_channel(xs, ss, axis, names)
    try:
        numpy_rule = apply_rule((xs, ss), Mode.UNIDIRECTIONAL, -1, None, names)
    except BroadcastError as err:
        if length.maybe_equal(channels):  # then only the channel placement can hold
            return _per_channel(xs, ss, axis, names)
        raise BroadcastError(
            f"{names[1]} {ss} is not {names[0]}'s channel count (axis {axis}: {channels}) "
            f"and does not broadcast to {names[0]} by the NumPy rule: {err.reason}",
            mode=err.mode,
            shapes=err.shapes,
            axis=err.axis,
            operand=err.operand,
            alignment=err.alignment,
            out_rank=err.out_rank,
            labels=err.labels,
            kind=err.kind,
        ) from None
    if not length.maybe_equal(channels):
        return numpy_rule
    channel = _per_channel(xs, ss, axis, names)
    output = Shape.of_dims(
        tuple(_hull(a, b) for a, b in zip(channel.output, numpy_rule.output, strict=True))
    )
    return Plan(Mode.UNIDIRECTIONAL, (xs, ss), output, (numpy_rule.alignment[0], None))


def _per_channel(x: Shape, slope: Shape, axis: int, names: tuple[str, ...]) -> Plan:
    """Place the slope at ``axis``: explicit broadcasting into ``x`` by ``[axis]``."""
    placed = apply_rule((slope, x), Mode.EXPLICIT, -1, (axis,), (names[1], names[0]))
    rank = x.rank or 0
    return Plan(Mode.UNIDIRECTIONAL, (x, slope), placed.output, (tuple(range(rank)), (axis,)))


def _hull(a: Dim, b: Dim) -> Dim:
    """Return the narrowest dim holding every value of ``a`` and of ``b``."""
    if a == b:
        return a
    if a.name is not None or b.name is not None:
        return Dim.unknown() if a.name != b.name else a
    hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
    return Dim.interval(min(a.lo, b.lo), hi)
