"""How the checker names operands and draws them: labels, the error picture, sizes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bcast.core.conditions import shown
from bcast.core.errors import BroadcastError
from bcast.core.expressions import Expr
from bcast.core.picture import format_alignment
from bcast.core.shape import Shape

__all__ = ["error_picture", "operand_label", "upper_size"]


def operand_label(name: str, index: int) -> str:
    """Name an operand in a picture: its value name (middle elided past 24 characters).

    >>> operand_label("", 1), operand_label("x" * 30, 0)
    ('#1', 'xxxxxxxxxxx…xxxxxxxxxxxx')
    """
    text = name or f"#{index}"
    return text if len(text) <= 24 else text[:11] + "…" + text[-12:]


def error_picture(
    err: BroadcastError,
    names: Sequence[str],
    shapes: Sequence[Shape],
    expressions: Mapping[str, Expr],
) -> list[str]:
    """Draw a failed rule's operands as it aligned them, named by the model's values.

    A dim that stands for an exporter's expression is drawn as its text (``Min(64, s41)``).
    """
    if err.alignment is not None and err.out_rank is not None and len(err.shapes) == len(names):
        drawn = [shown(s, expressions) for s in err.shapes]
        return format_alignment(
            drawn, err.alignment, err.out_rank, labels=names, mark_axis=err.axis
        )
    width = max((len(n) for n in names), default=0)
    return [f"{n.ljust(width)}  {s}" for n, s in zip(names, shapes, strict=True)]


# -- the rules, node by node ---------------------------------------------------------------


def upper_size(shape: Shape) -> int | None:
    """Return the most elements a shape can hold, or None if that is unbounded.

    >>> upper_size(Shape.parse("[2,1..4]")), upper_size(Shape.parse("[N,2]"))
    (8, None)
    """
    if shape.rank is None:
        return None
    total = 1
    for d in shape.dims:
        if d.hi is None:
            return None
        total *= d.hi
    return total
