"""Arithmetic on the elements of small shape tensors: sizes, and dims that are never negative.

Exporters compute Reshape targets, Slice ends and Pad amounts from ``Shape`` (ONNX) or
``ShapeOf`` (OpenVINO IR) with Add, Sub, Mul, Div and Mod. An element is an int or a `Dim`
(a symbol, or an expression of the input dims registered in a graph's ``expressions``);
`arith` computes one operator on two elements, `elementwise` over two values with NumPy's
broadcasting of one element. What it cannot decide (a difference that may be negative, a
division by a dim) is None: the value stays unknown. Both readers use it
(`bcast.onnx.values`, `bcast.openvino.ir_shapes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from bcast.core.arithmetic import expr_of, expression_dim, floor_div, product, total
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.core.spatial import bounds, difference

__all__ = [
    "Element",
    "Value",
    "arith",
    "columns",
    "elementwise",
    "normal",
    "padded",
    "rows",
    "static",
]

Element = int | Dim | bool
Value = tuple[Element, ...]
"""A 1-D (or 0-D, as one element) integer tensor: its elements."""


def static(e: Element) -> int | None:
    """Return an element's size where it has one (a bool as 0 or 1), else None.

    >>> static(True), static(Dim(3)), static(Dim.symbol("h"))
    (1, 3, None)
    """
    if isinstance(e, bool):
        return int(e)
    if isinstance(e, int):
        return e
    return e.lo if e.is_static else None


def normal(e: Element) -> Element:
    """Write a static Dim as its int."""
    if isinstance(e, Dim) and e.is_static:
        return e.lo
    return e


def arith(
    op: str, expressions: dict[str, Expr] | None = None, *, floor: bool = False
) -> Callable[[Element, Element], Element | None]:
    """Return ``op`` (ONNX's Add, Sub, Mul, Div, Mod) on two elements; None: not decided.

    ``floor``: Div of two sizes rounds down (OpenVINO's Divide), not toward 0 (ONNX's).

    >>> found = {}
    >>> str(arith("Div", found)(Dim.symbol("h"), 4))
    'h//4'
    >>> arith("Div")(-7, 2), arith("Div", floor=True)(-7, 2)
    (-3, -4)
    """

    def apply(a: Element, b: Element) -> Element | None:
        x, y = static(a), static(b)
        if x is not None and y is not None:
            if op == "Add":
                return x + y
            if op == "Sub":
                return x - y
            if op == "Mul":
                return x * y
            if op == "Mod":  # fmod=0: the sign of the divisor, as Python's %
                return None if y == 0 else x % y
            if y == 0:
                return None
            return x // y if floor else math.trunc(x / y)
        # A symbol times 1, plus 0: itself.
        if op == "Mul" and (x == 1 or y == 1):
            return b if x == 1 else a
        if op in ("Add", "Sub") and y == 0:
            return a
        if expressions is not None and op in ("Add", "Mul"):  # h*w of two dims, h + 1
            return _combined(op, a, b, expressions)
        if expressions is not None and op in ("Mod", "Sub"):
            return _signed(op, a, b, expressions)
        if expressions is not None and op == "Div" and x is None and y is not None and y > 0:
            # a dim over a positive size: a shape tensor is integers, and a dim is never
            # negative, so ONNX's truncating Div is floor division (Swin's H//4 windows)
            found = expr_of(a, expressions) if isinstance(a, Dim) else None
            return None if found is None else expression_dim(floor_div(found, y), expressions)
        return None

    return apply


def _combined(op: str, a: Element, b: Element, expressions: dict[str, Expr]) -> Dim | None:
    """Write the sum or product of two dims (or a dim and a size) as a dim expression.

    Dims are never negative, so the sum and the product of two are dims too: the
    ``H*W`` of a ``Reshape(x, [b, c, H*W])`` target that exporters compute from ``Shape``.

    >>> found = {}
    >>> dim = _combined("Mul", Dim.symbol("h"), Dim.symbol("w"), found)
    >>> str(found[dim.name])
    'h*w'
    """
    parts = []
    for e in (a, b):
        if isinstance(e, bool) or (isinstance(e, int) and e < 0):
            return None
        parts.append(Expr("int", value=e) if isinstance(e, int) else expr_of(e, expressions))
    if any(p is None for p in parts):
        return None
    known = [p for p in parts if p is not None]
    return expression_dim(product(known) if op == "Mul" else total(known), expressions)


def _signed(op: str, a: Element, b: Element, expressions: dict[str, Expr]) -> Dim | None:
    """Write ``a % b`` (``b`` a size) or ``a - b`` as a dim, where it is never negative.

    A pad to a multiple of 7 is ``(7 - h % 7) % 7``: TorchScript exports compute it from
    ``Shape`` with Mod and Sub, and the Pad after it is then sized.

    >>> found = {}
    >>> rest = _signed("Mod", Dim.symbol("h"), 7, found)
    >>> pad = _signed("Sub", 7, rest, found)
    >>> str(found[pad.name]), _signed("Sub", Dim.symbol("h"), 1, found)
    ('7 - h%7', None)
    """
    parts = [Expr("int", value=int(e)) if not isinstance(e, Dim) else expr_of(e, expressions)
             for e in (a, b)]  # fmt: skip
    left, right = parts
    if left is None or right is None:
        return None
    if op == "Mod":
        if right.op != "int" or right.value <= 0:
            return None  # Python's % by a positive size is never negative
        return expression_dim(Expr("%", (left, right)), expressions)
    found = difference(left, right)
    lowest = bounds(found)[0]
    return None if lowest is None or lowest < 0 else expression_dim(found, expressions)


def _broadcast(values: Sequence[Value]) -> list[Value] | None:
    size = max(len(v) for v in values)
    if any(len(v) not in (1, size) for v in values):
        return None
    return [v * size if len(v) == 1 else v for v in values]


def elementwise(values: Sequence[Value], fn: Callable[..., Element | None]) -> Value | None:
    """Apply ``fn`` element by element, a one-element value broadcast; None if any is None."""
    spread = _broadcast(values)
    if spread is None:
        return None
    out = []
    for items in zip(*spread, strict=True):
        result = fn(*items)
        if result is None:
            return None
        out.append(normal(result))
    return tuple(out)


def rows(data: Value, shape: Shape | None) -> list[Value] | None:
    """Split a 2-D value of ``shape`` (its width static) into its rows; None otherwise.

    F.pad's pads are laid out as a ``[-1, 2]`` value whose rows a Slice reverses.

    >>> rows((0, 1, 2, 3), Shape.parse("[?,2]")), rows((0, 1, 2), Shape.parse("[?,2]"))
    ([(0, 1), (2, 3)], None)
    """
    if shape is None or shape.rank != 2 or not shape.dims[1].is_static:
        return None
    width = shape.dims[1].lo
    count = len(data) // width if width else 0
    if width == 0 or count * width != len(data):
        return None
    if shape.dims[0].is_static and shape.dims[0].lo != count:
        return None
    return [data[i * width : (i + 1) * width] for i in range(count)]


def columns(data: Value, shape: Shape | None) -> Value | None:
    """Transpose a 2-D value of ``shape`` (see `rows`): its columns, flattened.

    >>> columns((0, 1, 2, 3, 4, 5), Shape.parse("[3,2]"))
    (0, 2, 4, 1, 3, 5)
    """
    grid = rows(data, shape)
    if not grid:
        return None
    return tuple(row[k] for k in range(len(grid[0])) for row in grid)


def padded(dim: Dim, before: Element, after: Element, expressions: dict[str, Expr]) -> Dim | None:
    """Return ``dim`` plus its two pads (a size, or a dim computed from shapes; negative cut).

    None where the dim or a pad has no expression (a bool, an unknown). Both readers' Pad.

    >>> found = {}
    >>> str(found[padded(Dim.symbol("h"), 0, arith("Mod", found)(Dim.symbol("h"), 7), found).name])
    'h + h%7'
    """
    parts = [expr_of(dim, expressions)]
    for pad in (before, after):
        if isinstance(pad, bool):
            return None
        parts.append(Expr("int", value=pad) if isinstance(pad, int) else expr_of(pad, expressions))
    known = [p for p in parts if p is not None]
    return expression_dim(total(known), expressions) if len(known) == len(parts) else None
