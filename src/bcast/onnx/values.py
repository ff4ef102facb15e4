"""The values of small shape tensors, where ONNX's data propagation stops.

Exporters compute Expand and Reshape targets from shapes: ``Shape → Gather → Concat``, and
PyTorch's ``expand(batch, -1, -1)`` as ``Where(Equal(target, -1), ones, target)``. ONNX's
data propagation knows the first chain but not ``Equal``, ``Where`` or
``ConstantOfShape``, so the target stays unknown. `shape_tensor_values` evaluates these
chains itself, element by element: an element is an int, or a `Dim` (a symbol for a dim of
unknown value, which is never negative). Anything it cannot decide stays unknown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final

import onnx

from bcast.core.arithmetic import expr_of, expression_dim, floor_div, product, total
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.core.spatial import bounds, difference
from bcast.onnx.protos import DEFAULT_DOMAINS, attribute, small_values

__all__ = ["LiveValues", "Value", "shape_tensor_values"]

Element = int | Dim | bool
Value = tuple[Element, ...]
"""A 1-D (or 0-D, as one element) integer tensor: its elements."""

_MAX_ELEMENTS: Final = 64


def _static(e: Element) -> int | None:
    if isinstance(e, bool):
        return int(e)
    if isinstance(e, int):
        return e
    return e.lo if e.is_static else None


def _normal(e: Element) -> Element:
    """Write a static Dim as its int."""
    if isinstance(e, Dim) and e.is_static:
        return e.lo
    return e


def _arith(
    op: str, expressions: dict[str, Expr] | None = None
) -> Callable[[Element, Element], Element | None]:
    def apply(a: Element, b: Element) -> Element | None:
        x, y = _static(a), _static(b)
        if x is not None and y is not None:
            if op == "Add":
                return x + y
            if op == "Sub":
                return x - y
            if op == "Mul":
                return x * y
            if op == "Mod":  # fmod=0: the sign of the divisor, as Python's %
                return None if y == 0 else x % y
            return None if y == 0 else math.trunc(x / y)
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


def _equal(a: Element, b: Element) -> Element | None:
    x, y = _static(a), _static(b)
    if x is not None and y is not None:
        return x == y
    other = x if x is not None else y
    if other is not None and other < 0:
        return False  # a dim is never negative
    if isinstance(a, Dim) and isinstance(b, Dim) and a.name is not None and a == b:
        return True
    return None


def _broadcast(values: Sequence[Value]) -> list[Value] | None:
    size = max(len(v) for v in values)
    if any(len(v) not in (1, size) for v in values):
        return None
    return [v * size if len(v) == 1 else v for v in values]


def _elementwise(values: Sequence[Value], fn: Callable[..., Element | None]) -> Value | None:
    spread = _broadcast(values)
    if spread is None:
        return None
    out = []
    for items in zip(*spread, strict=True):
        result = fn(*items)
        if result is None:
            return None
        out.append(_normal(result))
    return tuple(out)


def _where(c: Element, a: Element, b: Element) -> Element | None:
    return a if c else b


def _ints(tensor: onnx.TensorProto) -> Value | None:
    found = small_values(tensor)
    if found is None or found[0] not in "biu":
        return None
    return found[1]


def shape_tensor_values(
    proto: onnx.GraphProto,
    shapes: Mapping[str, Shape],
    known: Mapping[str, Value],
    expressions: dict[str, Expr] | None = None,
) -> dict[str, Value]:
    """Evaluate the small integer tensors of ``proto`` that shapes and constants decide.

    Parameters
    ----------
    proto : onnx.GraphProto
        The graph, nodes in file order (a producer before its users, as ONNX requires).
    shapes : mapping of str to Shape
        The shapes of the graph's values (what ``Shape`` reads).
    known : mapping of str to tuple
        Values known already (initializers, constants).
    expressions : dict of str to Expr, optional
        A graph's dim expressions: with it, the sum and the product of two dims are
        written as a new expression dim there (``h*w``); without, they stay unknown.

    Returns
    -------
    dict of str to tuple
        Every value evaluated, ``known`` included.

    Examples
    --------
    >>> from onnx import helper
    >>> g = helper.make_graph(
    ...     [helper.make_node("Shape", ["x"], ["s"]),
    ...      helper.make_node("Equal", ["s", "m1"], ["e"]),
    ...      helper.make_node("Where", ["e", "one", "s"], ["t"])], "g", [], [])
    >>> v = shape_tensor_values(g, {"x": Shape.parse("[N,3]")}, {"m1": (-1,), "one": (1,)})
    >>> [str(e) for e in v["t"]]
    ['N', '3']
    """
    values: dict[str, Value] = dict(known)
    for node in proto.node:
        if node.domain not in DEFAULT_DOMAINS or not node.output or not node.output[0]:
            continue
        try:
            found = _evaluate(node, values, shapes, expressions)
        except (IndexError, ValueError, TypeError, OverflowError):
            found = None
        if found is not None and len(found) <= _MAX_ELEMENTS:
            values[node.output[0]] = found
    return values


class LiveValues(Mapping[str, "Value"]):
    """`shape_tensor_values` asked for value by value, each from the shapes known when asked.

    A walk that sizes the nodes in order (`bcast.models.propagate_shapes`) asks for a
    Reshape's target when it reaches the Reshape. The target's chain (``Shape → Gather →
    Concat``) reads the shapes of values before the Reshape, which the walk has sized
    already: one walk sizes a chain of Reshapes whose targets each read the shape the one
    before gave, where evaluating every value once per walk takes a walk per link (a U-Net's
    GroupNorms). `follow` points it at the walk's shapes; a value is evaluated once.

    >>> from onnx import helper
    >>> g = helper.make_graph([helper.make_node("Shape", ["x"], ["s"])], "g", [], [])
    >>> live = LiveValues(g, {})
    >>> live.follow({"x": Shape.parse("[N,3]")})
    >>> [str(e) for e in live["s"]], live.get("nothing")
    (['N', '3'], None)
    """

    def __init__(
        self,
        proto: onnx.GraphProto,
        known: Mapping[str, Value],
        expressions: dict[str, Expr] | None = None,
    ) -> None:
        self.producers: dict[str, onnx.NodeProto] = {}
        for node in proto.node:
            if node.domain in DEFAULT_DOMAINS and node.output and node.output[0]:
                self.producers[node.output[0]] = node
        self.found: dict[str, Value] = dict(known)
        self.expressions = expressions
        self.shapes: Mapping[str, Shape] = {}
        self._failed: set[str] = set()

    def follow(self, shapes: Mapping[str, Shape]) -> None:
        """Read the shapes of ``shapes`` (the walk's, as it fills them) from now on."""
        self.shapes = shapes

    def get(self, name: str, default: Value | None = None) -> Value | None:  # type: ignore[override]
        """Return the value of ``name``, evaluated now if it was not yet (``default``: none)."""
        if name not in self.found and name not in self._failed:
            self._evaluate_up_to(name)
        return self.found.get(name, default)

    def __getitem__(self, name: str) -> Value:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self.found)

    def __len__(self) -> int:
        return len(self.found)

    def _evaluate_up_to(self, name: str) -> None:
        """Evaluate ``name`` and what it needs, inputs first (no recursion: chains are long)."""
        stack, opened = [name], set()
        while stack:
            top = stack[-1]
            node = self.producers.get(top)
            if top in self.found or top in self._failed or node is None:
                if node is None and top not in self.found:
                    self._failed.add(top)
                stack.pop()
                continue
            if top not in opened:  # its inputs first; one met again while open is a cycle
                opened.add(top)
                for i in node.input:
                    if i and i not in self.found and i not in self._failed and i not in opened:
                        stack.append(i)
                continue
            stack.pop()
            try:
                value = _evaluate(node, self.found, self.shapes, self.expressions)
            except (IndexError, ValueError, TypeError, OverflowError):
                value = None
            if value is not None and len(value) <= _MAX_ELEMENTS:
                self.found[top] = value
            else:
                self._failed.add(top)


def _evaluate(
    node: onnx.NodeProto,
    values: Mapping[str, Value],
    shapes: Mapping[str, Shape],
    expressions: dict[str, Expr] | None = None,
) -> Value | None:
    op = node.op_type
    ins = [values.get(name) for name in node.input]
    if op == "Constant":
        tensor = attribute(node, "value", None)
        if isinstance(tensor, onnx.TensorProto):
            return _ints(tensor)
        ints = attribute(node, "value_ints", None)
        return tuple(int(i) for i in ints) if ints is not None else None
    if op == "Shape":
        shape = shapes.get(node.input[0])
        if shape is None or shape.rank is None:
            return None
        dims = shape.dims
        start, end = int(attribute(node, "start", 0)), attribute(node, "end", None)
        return tuple(_normal(d) for d in dims[start : None if end is None else int(end)])
    if op == "ConstantOfShape":
        size = ins[0]
        tensor = attribute(node, "value", None)
        fill = _ints(tensor) if isinstance(tensor, onnx.TensorProto) else (0,)
        count = _static(size[0]) if size is not None and len(size) == 1 else None
        if count is None or fill is None or not 0 <= count <= _MAX_ELEMENTS:
            return None  # a shape tensor is small: anything larger is not one
        return fill * count
    if any(v is None for v in ins[:1]):
        return None
    first: Value = ins[0] or ()
    if op in ("Identity", "Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten"):
        return first
    if op == "Concat":
        if any(v is None for v in ins):
            return None
        return tuple(e for v in ins for e in (v or ()))
    if op == "Gather":
        indices = ins[1] if len(ins) > 1 else None
        if indices is None or _rank(shapes, node.input[0]) > 1:
            return None
        picked = [first[_static(i) or 0] for i in indices]
        return tuple(picked)
    if op == "Slice":
        rows = _rows(first, shapes.get(node.input[0]))
        if rows is not None and len(node.input) > 3 and ins[3] in ((0,), (-2,)):
            # a 2-D value cut along its rows: F.pad's pads, reversed pair by pair
            cut = _slice(tuple(range(len(rows))), [*ins[1:3], None, *ins[4:]], len(node.input))
            return None if cut is None else tuple(e for i in cut for e in rows[int(i)])
        if _rank(shapes, node.input[0]) > 1:
            return None  # cut as 1-D, a 2-D value would be scrambled
        return _slice(first, ins[1:], len(node.input))
    if op == "Transpose":
        rows = _rows(first, shapes.get(node.input[0]))
        if rows is None or tuple(attribute(node, "perm", (1, 0))) != (1, 0):
            return None
        return tuple(row[k] for k in range(len(rows[0])) for row in rows)
    if op in ("Add", "Sub", "Mul", "Div", "Mod"):
        if len(ins) < 2 or ins[1] is None or (op == "Mod" and attribute(node, "fmod", 0)):
            return None
        return _elementwise([first, ins[1]], _arith(op, expressions))
    if op == "Equal":
        if len(ins) < 2 or ins[1] is None:
            return None
        return _elementwise([first, ins[1]], _equal)
    if op == "Where":
        if len(ins) < 3 or ins[1] is None or ins[2] is None:
            return None
        return _elementwise([first, ins[1], ins[2]], _where)
    return None


def _rank(shapes: Mapping[str, Shape], name: str) -> int:
    """Return the rank of ``name`` where it is known (0 where not: a value is 1-D)."""
    shape = shapes.get(name)
    return shape.rank if shape is not None and shape.rank is not None else 0


def _rows(data: Value, shape: Shape | None) -> list[Value] | None:
    """Split a 2-D value of static ``shape`` into its rows; None for any other value."""
    if shape is None or shape.rank != 2 or not shape.dims[1].is_static:
        return None
    width = shape.dims[1].lo
    count = len(data) // width if width else 0
    if width == 0 or count * width != len(data):
        return None
    if shape.dims[0].is_static and shape.dims[0].lo != count:
        return None
    return [data[i * width : (i + 1) * width] for i in range(count)]


def _slice(data: Value, rest: Sequence[Value | None], count: int) -> Value | None:
    if count < 3 or rest[0] is None or rest[1] is None:
        return None
    if count > 3 and rest[2] not in (None, (0,), (-1,)):
        return None  # another axis than the only one a 1-D value has
    start, end = _static(rest[0][0]), _static(rest[1][0])
    step = _static(rest[3][0]) if count > 4 and rest[3] is not None else 1
    if start is None or end is None or not step:
        return None
    return tuple(data[slice(start, min(end, 2**31), step)])
