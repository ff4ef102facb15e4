"""The alignment picture as an HTML table, for notebooks (``_repr_html_``) and HTML reports.

One row per operand, one column per output axis, as `bcast.core.picture` draws it in text:
cells where an operand is stretched are shaded, the failing axis is marked. Plain strings,
every value escaped; no styling library (the core stays pure).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from html import escape
from typing import Final

from bcast.core.picture import Drawable

__all__ = ["STYLE", "alignment_html"]

STYLE: Final = (
    "table.bcast{border-collapse:collapse;font-family:ui-monospace,monospace;margin:.3em 0}"
    "table.bcast th,table.bcast td{padding:.15em .6em;text-align:right;"
    "border-bottom:1px solid #ddd}"
    "table.bcast th.label{text-align:left}"
    "table.bcast td.stretched{background:#fff3bf}"
    "table.bcast td.absent{color:#999}"
    "table.bcast .failing{background:#ffc9c9;color:#c92a2a;font-weight:bold}"
    "table.bcast tr.result td,table.bcast tr.result th{font-weight:bold;border-top:2px solid #888}"
)
"""The CSS of the table (scoped to ``table.bcast``), written once per HTML document."""

_ABSENT: Final = "&middot;"


def alignment_html(
    shapes: Sequence[Drawable],
    alignment: Sequence[tuple[int | None, ...] | None],
    out_rank: int,
    *,
    labels: Sequence[str],
    result: Drawable | None = None,
    stretched: Collection[tuple[int, int]] = (),
    mark_axis: int | None = None,
    caption: str | None = None,
) -> str:
    """Draw operands as table rows and output axes as columns, in HTML.

    Parameters
    ----------
    shapes, alignment, out_rank
        As `bcast.core.picture.format_alignment` takes them.
    labels : sequence of str
        The operands' names, one per row.
    result : shape, optional
        Drawn as the last row.
    stretched : collection of (operand, axis)
        Cells shaded as stretched (the operand is replicated along that axis).
    mark_axis : int, optional
        The failing output axis: its header and cells are marked.
    caption : str, optional
        A line above the table.

    Examples
    --------
    >>> from bcast import Shape
    >>> html = alignment_html([Shape((2, 3)), Shape((4,))], [(0, 1), (1,)], 2,
    ...                       labels=["A", "B"], mark_axis=1)
    >>> '<th class="failing">1 ✗</th>' in html, html.count("<tr")
    (True, 3)
    """
    head = ['<th class="label">axis</th>']
    for j in range(out_rank):
        if j == mark_axis:
            head.append(f'<th class="failing">{j} ✗</th>')
        else:
            head.append(f"<th>{j}</th>")
    head.append('<th class="label">shape</th>')
    rows = [f"<tr>{''.join(head)}</tr>"]
    for i, (shape, axes) in enumerate(zip(shapes, alignment, strict=True)):
        cells = [f'<th class="label">{escape(labels[i])}</th>']
        placed: dict[int, str] = {}
        dropped: list[str] = []
        if axes is not None and shape.rank is not None:
            for dim, out_axis in zip(shape, axes, strict=True):
                if out_axis is None or out_axis >= out_rank:
                    dropped.append(str(dim))
                else:
                    placed[out_axis] = str(dim)
        for j in range(out_rank):
            text = placed.get(j)
            classes = []
            if j == mark_axis:
                classes.append("failing")
            elif (i, j) in stretched:
                classes.append("stretched")
            if text is None:
                classes.append("absent")
            shown = _ABSENT if text is None and axes is not None else escape(text or "")
            attr = f' class="{" ".join(classes)}"' if classes else ""
            cells.append(f"<td{attr}>{shown}</td>")
        tail = escape(str(shape)) + (f" (ignored: {escape(' '.join(dropped))})" if dropped else "")
        cells.append(f'<td class="label">{tail}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    if result is not None and result.rank == out_rank:
        cells = ['<th class="label">result</th>']
        cells += [f"<td>{escape(str(d))}</td>" for d in result]
        cells.append(f'<td class="label">{escape(str(result))}</td>')
        rows.append(f'<tr class="result">{"".join(cells)}</tr>')
    top = f"<div><code>{escape(caption)}</code></div>" if caption else ""
    return f'<div>{top}<table class="bcast">{"".join(rows)}</table></div>'
