"""The values of small shape tensors, where ONNX's data propagation stops.

Exporters compute Expand and Reshape targets from shapes: ``Shape → Gather → Concat``, and
PyTorch's ``expand(batch, -1, -1)`` as ``Where(Equal(target, -1), ones, target)``. ONNX's
data propagation knows the first chain but not ``Equal``, ``Where`` or
``ConstantOfShape``, so the target stays unknown. `shape_tensor_values` evaluates these
chains itself, element by element: an element is an int, or a `Dim` (a symbol for a dim of
unknown value, which is never negative). Anything it cannot decide stays unknown.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Final

import onnx

from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.core.shape_values import (
    Element,
    Value,
    arith,
    columns,
    elementwise,
    normal,
    rows,
    static,
)
from bcast.onnx.protos import DEFAULT_DOMAINS, attribute, small_values

__all__ = ["LiveValues", "Value", "shape_tensor_values"]


_MAX_ELEMENTS: Final = 64


def _equal(a: Element, b: Element) -> Element | None:
    x, y = static(a), static(b)
    if x is not None and y is not None:
        return x == y
    other = x if x is not None else y
    if other is not None and other < 0:
        return False  # a dim is never negative
    if isinstance(a, Dim) and isinstance(b, Dim) and a.name is not None and a == b:
        return True
    return None


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
        return tuple(normal(d) for d in dims[start : None if end is None else int(end)])
    if op == "ConstantOfShape":
        size = ins[0]
        tensor = attribute(node, "value", None)
        fill = _ints(tensor) if isinstance(tensor, onnx.TensorProto) else (0,)
        count = static(size[0]) if size is not None and len(size) == 1 else None
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
        picked = [first[static(i) or 0] for i in indices]
        return tuple(picked)
    if op == "Slice":
        grid = rows(first, shapes.get(node.input[0]))
        if grid is not None and len(node.input) > 3 and ins[3] in ((0,), (-2,)):
            # a 2-D value cut along its rows: F.pad's pads, reversed pair by pair
            cut = _slice(tuple(range(len(grid))), [*ins[1:3], None, *ins[4:]], len(node.input))
            return None if cut is None else tuple(e for i in cut for e in grid[int(i)])
        if _rank(shapes, node.input[0]) > 1:
            return None  # cut as 1-D, a 2-D value would be scrambled
        return _slice(first, ins[1:], len(node.input))
    if op == "Transpose" and tuple(attribute(node, "perm", (1, 0))) == (1, 0):
        return columns(first, shapes.get(node.input[0]))
    if op in ("Add", "Sub", "Mul", "Div", "Mod"):
        if len(ins) < 2 or ins[1] is None or (op == "Mod" and attribute(node, "fmod", 0)):
            return None
        return elementwise([first, ins[1]], arith(op, expressions))
    if op == "Equal":
        if len(ins) < 2 or ins[1] is None:
            return None
        return elementwise([first, ins[1]], _equal)
    if op == "Where":
        if len(ins) < 3 or ins[1] is None or ins[2] is None:
            return None
        return elementwise([first, ins[1], ins[2]], _where)
    return None


def _rank(shapes: Mapping[str, Shape], name: str) -> int:
    """Return the rank of ``name`` where it is known (0 where not: a value is 1-D)."""
    shape = shapes.get(name)
    return shape.rank if shape is not None and shape.rank is not None else 0


def _slice(data: Value, rest: Sequence[Value | None], count: int) -> Value | None:
    if count < 3 or rest[0] is None or rest[1] is None:
        return None
    if count > 3 and rest[2] not in (None, (0,), (-1,)):
        return None  # another axis than the only one a 1-D value has
    start, end = static(rest[0][0]), static(rest[1][0])
    step = static(rest[3][0]) if count > 4 and rest[3] is not None else 1
    if start is None or end is None or not step:
        return None
    return tuple(data[slice(start, min(end, 2**31), step)])
