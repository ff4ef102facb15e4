"""IR layers that cut or drop dims by constants: Slice, StridedSlice, Squeeze, Reduce*.

Unsqueeze too; `bcast.openvino.ir_shapes` sizes them with these (issue 37).

A cut of a symbolic dim is written as a dim expression (`bcast.core.spatial.slice_length`):
``h[1:-1:2]`` is ``(Max(Max(h - 1, 0) - Min(1, h), 0) + 1)//2``; a stop that is a dim
(``x[:, :h]``, an unpad) is ``Min`` of the two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.core.shape_values import Element
from bcast.core.spatial import BIG, cut_dim, strided_axes
from bcast.models import Graph
from bcast.openvino.ir_spatial import ints

__all__ = ["cut", "reduced", "sliced_ir", "strided", "unsqueezed"]

Value = tuple[Dim | int, ...]


def sliced_ir(data: Shape, ins: list[Value | None], expressions: dict[str, Expr]) -> Shape | None:
    """Slice-8's output: constant starts, stops and steps cut any dim (`cut_dim`).

    A stop may be an input's dim with start 0 and step 1: ``x[:, :seq]`` of a 64-row
    position buffer is ``Min(64, seq)``.
    """
    start, stop, step = ins[0], ins[1], ins[2]
    axes = ins[3] if len(ins) > 3 else None
    if data.rank is None or start is None or stop is None or step is None:
        return None
    axes = axes if axes is not None else tuple(range(len(start)))
    sizes = (*start, *step, *axes)
    ends = all(type(v) is int or (isinstance(v, Dim) and v.name) for v in stop)
    if (
        all(type(v) is int for v in sizes)
        and ends
        and len(start) == len(stop) == len(step) == len(axes)
    ):
        return cut(data, list(zip(axes, start, stop, step, strict=True)), expressions)
    return None


def cut(
    data: Shape, cuts: Sequence[tuple[Element, ...]], expressions: dict[str, Expr]
) -> Shape | None:
    """Cut ``(axis, start, stop, step)`` from ``data``; None where one cannot be.

    All constants, or a stop that is a dim with start 0 and step 1 (``x[:, :h]``, an
    unpad): ``Min`` of the two, or the dim itself where they are one.

    >>> found = {}
    >>> out = cut(Shape.parse("[N,h,32]"), [(-1, 16, 32, 1), (1, 0, -1, 1)], found)
    >>> str(out.dims[2]), str(found[out.dims[1].name])
    ('16', 'Max(h - 1, 0)')
    >>> str(cut(Shape.parse("[N,p,8]"), [(1, 0, Dim.symbol("h"), 1)], found).dims[1].name)
    'Min_p__h_'
    """
    rank = data.rank or 0
    dims = list(data.dims)
    for axis, start, stop, step in cuts:
        at = int(axis) + rank if int(axis) < 0 else int(axis)
        if not 0 <= at < rank or step == 0 or isinstance(stop, bool):
            return None
        end = stop if isinstance(stop, Dim) else int(stop)
        found = cut_dim(dims[at], int(start), end, int(step), expressions)
        if not found.is_static and found.name is None:
            return None
        dims[at] = found
    return Shape(dims)


def unsqueezed(op: str, x: Shape, axes: Value | None) -> Shape | None:
    """Unsqueeze: a 1 inserted at each axis (of the output); Squeeze: the axes removed.

    >>> str(unsqueezed("Unsqueeze", Shape.parse("[h,2]"), (0, -1)))
    '[1,h,2,1]'
    >>> str(unsqueezed("Squeeze", Shape.parse("[1,h,1]"), (0,)))
    '[h,1]'
    """
    rank = x.rank or 0
    if axes is None or not all(type(a) is int for a in axes):
        return None
    width = rank + len(axes) if op == "Unsqueeze" else rank
    at = {int(a) + width if int(a) < 0 else int(a) for a in axes}
    if len(at) != len(axes) or not all(0 <= a < width for a in at):
        return None
    if op == "Squeeze":
        return Shape(d for k, d in enumerate(x.dims) if k not in at)
    rest = iter(x.dims)
    return Shape(Dim(1) if k in at else next(rest) for k in range(width))


def reduced(x: Shape, axes: Value | None, keep: bool) -> Shape | None:
    """Reduce*: the constant axes become 1 (``keep_dims``) or go.

    >>> str(reduced(Shape.parse("[N,8,h,w]"), (2, -1), True))
    '[N,8,1,1]'
    >>> str(reduced(Shape.parse("[N,8,h]"), (1,), False))
    '[N,h]'
    """
    rank = x.rank or 0
    if axes is None or not all(type(a) is int for a in axes):
        return None
    at = {int(a) + rank if int(a) < 0 else int(a) for a in axes}
    if not all(0 <= a < rank for a in at):
        return None
    if keep:
        return Shape(Dim(1) if k in at else d for k, d in enumerate(x.dims))
    return Shape(d for k, d in enumerate(x.dims) if k not in at)


def strided(
    x: Shape, data: Mapping[str, str], ins: Sequence[Value | None], graph: Graph
) -> Shape | None:
    """StridedSlice-1 of constant begin, end and strides, as Python slices (`cut`).

    A ``begin_mask`` or ``end_mask`` of 1 ignores that bound (from the start, to the end);
    a new axis is a 1, a shrunk axis goes (OpenVINO clamps its index into the dim, so it
    requires nothing: docs/peer-differences.md), an ellipsis keeps the axes the other
    entries do not name (`bcast.core.spatial.strided_axes`).

    >>> g = Graph("m.xml", "openvino")
    >>> attrs = {"begin_mask": "1, 0", "end_mask": "1, 0"}
    >>> out = strided(Shape.parse("[N,h]"), attrs, [(0, 1), (0, -1), (1, 2)], g)
    >>> str(g.expressions[out.dims[1].name])
    '(Max(Max(h - 1, 0) - Min(1, h), 0) + 1)//2'
    >>> masks = {"ellipsis_mask": "1, 0", "shrink_axis_mask": "0, 1", "new_axis_mask": "0"}
    >>> str(strided(Shape.parse("[N,h,8]"), masks, [(0, -1), (0, 0), (1, 1)], g))  # x[..., -1]
    '[N,h]'
    """
    begin, end, strides = ins
    if (
        begin is None
        or end is None
        or strides is None
        or not len(begin) == len(end) == len(strides)
        or x.rank is None
        or not all(type(v) is int for v in (*begin, *end, *strides))
    ):
        return None
    read = [ints(data.get(k), []) for k in ("begin_mask", "end_mask", "new_axis_mask",
                                             "shrink_axis_mask", "ellipsis_mask")]  # fmt: skip
    masks = [m for m in read if m is not None]
    if len(masks) < len(read):
        return None  # a malformed mask
    begin_mask, end_mask, new_axis, shrink, ellipsis = masks
    placed = strided_axes(x.rank, len(begin), new_axis, shrink, ellipsis)
    if placed is None:
        return None
    cuts: list[tuple[Element, ...]] = []
    for kind, axis, entry in placed:
        if kind != "slice":
            continue
        b, e, step = int(begin[entry]), int(end[entry]), int(strides[entry])
        skip_begin = entry < len(begin_mask) and begin_mask[entry]
        skip_end = entry < len(end_mask) and end_mask[entry]
        first = (0 if step > 0 else -1) if skip_begin else b
        last = (BIG if step > 0 else -BIG - 1) if skip_end else e
        cuts.append((axis, first, last, step))
    sliced = cut(x, cuts, graph.expressions)
    if sliced is None:
        return None
    return Shape(
        Dim(1) if kind == "new" else sliced.dims[axis]
        for kind, axis, _ in placed
        if kind != "shrink"
    )
