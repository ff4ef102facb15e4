"""The alignment picture: operands drawn in columns, one column per output axis.

The messages of `BroadcastError`, the CLI's ``explain`` and the model checker all draw with
`format_alignment`. It is a leaf of the core: it knows shapes only as `Drawable` (a rank and
dims that print), so the values (`Dim`, `Shape`) and the errors they raise can all use it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

__all__ = ["Drawable", "format_alignment"]


class Drawable(Protocol):
    """What the picture needs of a shape: its rank (None if unknown) and its dims, as text."""

    @property
    def rank(self) -> int | None:
        """The number of dims, or None for an unknown rank."""

    def __iter__(self) -> Iterator[object]:
        """Iterate over the dims, each written with ``str``."""


def format_alignment(
    shapes: Sequence[Drawable],
    alignment: Sequence[tuple[int | None, ...] | None],
    out_rank: int,
    *,
    labels: Sequence[str] | None = None,
    result: Drawable | None = None,
    mark_axis: int | None = None,
) -> list[str]:
    """Draw operands in columns, one column per output axis, as a mode aligns them.

    Each operand axis is written in the column of the output axis it pairs with; an axis the
    mode drops (PDPD's trimmed trailing ones) is written after a ``|`` at the end of its row.
    A caret marks ``mark_axis``. The CLI's ``explain`` and the model checker use the same
    picture.

    Examples
    --------
    >>> from bcast import Shape
    >>> for row in format_alignment([Shape((2, 3)), Shape((4,))], [(0, 1), (1,)], 2,
    ...                             mark_axis=1):
    ...     print(row)
    #0  2  3
    #1     4
           ^ axis 1
    """
    names = list(labels) if labels is not None else [f"#{i}" for i in range(len(shapes))]
    rows: list[list[str]] = []
    extras: list[str] = []
    for shape, axes in zip(shapes, alignment, strict=True):
        cells = [""] * out_rank
        dropped: list[str] = []
        if axes is None or shape.rank is None:
            rows.append(["[...]"] + [""] * max(out_rank - 1, 0))
            extras.append("")
            continue
        for dim, out_axis in zip(shape, axes, strict=True):
            if out_axis is None or out_axis >= out_rank:
                dropped.append(str(dim))
            else:
                cells[out_axis] = str(dim)
        rows.append(cells)
        extras.append(("| " + " ".join(dropped)) if dropped else "")
    if result is not None and result.rank is not None and result.rank == out_rank:
        names.append("=")
        rows.append([str(d) for d in result])
        extras.append("")
    width = [1] * out_rank
    for cells in rows:
        for i, cell in enumerate(cells[:out_rank]):
            width[i] = max(width[i], len(cell))
    name_width = max((len(n) for n in names), default=0)
    out = []
    for name, cells, extra in zip(names, rows, extras, strict=True):
        body = "  ".join(cell.rjust(width[i]) for i, cell in enumerate(cells[:out_rank]))
        if not cells:
            body = "(scalar)" if name != "=" else "[]"
        line = f"{name.ljust(name_width)}  {body}"
        if extra:
            line += "  " + extra
        out.append(line.rstrip())
    if mark_axis is not None and 0 <= mark_axis < out_rank:
        offset = name_width + 2 + sum(w + 2 for w in width[:mark_axis]) + width[mark_axis] - 1
        out.append(" " * offset + f"^ axis {mark_axis}")
    return out
