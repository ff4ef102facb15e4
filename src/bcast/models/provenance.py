"""Where a failing dim comes from: the initializer and the input that decide a finding.

A finding says that ``Min(64, s41)`` must equal ``s41``; what the user changes is the
tensor whose size put the 64 there (a position table of 64 rows) or the input that slices
it. `name_sources` walks back from each operand of a finding, through the nodes that
produced it, to the initializer (an IR's ``Const``) whose shape holds the constant of the
operand's dim at the failing axis, and says so in the finding's reason:
``Min(64, s41) is from initializer pos [1,64], sliced by s41``; and the model input each
symbol of the failing axis is a dim of: ``s41 is axis 1 of input input_ids``. Only dims
written as an expression of the inputs' dims are traced to a tensor (an exporter's
``Min(64, s41)``): a plain static size such as 32 is held by too many tensors of a model to
name one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.models.graph import Finding, Graph, Node

__all__ = ["name_sources"]

_KINDS: Final = frozenset({"incompatible", "conditional", "unidirectional"})
_CONSTANT_OPS: Final = frozenset({"Constant", "Const"})
_SLICED: Final = frozenset({"Slice", "StridedSlice"})
_MOST_NODES: Final = 64  # nodes walked back from one operand
_RIGHT_ALIGNED: Final = frozenset({"numpy", "multidirectional", "unidirectional", "bidirectional"})


def name_sources(graph: Graph, findings: Sequence[Finding]) -> list[Finding]:
    """Add to each finding's reason the initializer (or input) that decides its failing axis.

    Examples
    --------
    >>> from bcast import Shape
    >>> from bcast.core.expressions import parse_expression
    >>> from bcast.models import Graph, Node, Rule, check_graph
    >>> g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[seq,8]"),
    ...                                    "pos": Shape((16, 8)), "k": Shape((1,))})
    >>> g.initializers = {"pos", "k"}
    >>> g.expressions["M"] = parse_expression("Min(16, seq)")
    >>> g.nodes += [Node("cut", "Slice", ("pos", "k"), ("p",),
    ...                  output_shapes=(Shape.parse("[M,8]"),)),
    ...             Node("add", "Add", ("x", "p"), ("y",), rule=Rule.MULTIDIRECTIONAL)]
    >>> print(check_graph(g).findings[0].reason.split("; ")[-1])
    Min(16, seq) is from initializer pos [16,8], sliced by seq (node cut, Slice)
    """
    if not any(f.kind in _KINDS and f.axis is not None for f in findings):
        return list(findings)
    producers = {o: n for n in graph.nodes for o in n.outputs if o}
    out = []
    for finding in findings:
        said = _source_of(graph, producers, finding) if finding.kind in _KINDS else None
        out.append(
            finding if said is None else replace(finding, reason=f"{finding.reason}; {said}")
        )
    return out


def _source_of(graph: Graph, producers: Mapping[str, Node], finding: Finding) -> str | None:
    """Say where the dims of ``finding``'s operands at its axis come from (None: not found)."""
    if finding.axis is None or not finding.inputs:
        return None
    ranks = [s.rank for _, s in finding.inputs]
    if any(r is None for r in ranks):
        return None
    if finding.mode not in _RIGHT_ALIGNED:
        return None
    out_rank = max(r for r in ranks if r is not None)
    said = []
    symbols: list[str] = []
    for name, shape in finding.inputs:
        index = finding.axis - (out_rank - len(shape.dims))
        if not name or not 0 <= index < len(shape.dims):
            continue
        dim = shape.dims[index]
        text = _source_of_dim(graph, producers, name, dim)
        if text is not None:
            said.append(text)
        if dim.name is not None:
            expr = graph.expressions.get(dim.name)
            symbols.extend(sorted(expr.symbols) if expr is not None else [dim.name])
    operands = {name for name, _ in finding.inputs}
    said.extend(t for t in (_input_of(graph, producers, s, operands) for s in symbols) if t)
    return "; ".join(dict.fromkeys(said)) or None


def _input_of(
    graph: Graph, producers: Mapping[str, Node], symbol: str, operands: set[str]
) -> str | None:
    """Name the model input whose dim ``symbol`` is (``s41 is axis 1 of input input_ids``).

    An exporter's symbol (``s41``) says nothing of where it comes from; a symbol the reader
    made itself (an IR's ``input_ids.1``) already says it, and so does an input that is one
    of the finding's own operands: neither is repeated.
    """
    if symbol in graph.invented_dims:
        return None
    for name, shape in graph.shapes.items():
        if name in graph.initializers or name in producers or shape.rank is None:
            continue
        for axis, dim in enumerate(shape.dims):
            if dim.name == symbol:
                return None if name in operands else f"{symbol} is axis {axis} of input {name}"
    return None


def _source_of_dim(graph: Graph, producers: Mapping[str, Node], value: str, dim: Dim) -> str | None:
    """Walk back from ``value`` to the constant tensor whose size is in ``dim``."""
    expr = graph.expressions.get(dim.name) if dim.name is not None else None
    wanted = _constants(dim, expr)
    if not wanted:
        return None
    shown = str(expr) if expr is not None else str(dim)
    seen = {value}
    queue: deque[tuple[str, tuple[Node, ...]]] = deque([(value, ())])
    found: list[str] = []
    walked = 0
    while queue and walked < _MOST_NODES:
        name, path = queue.popleft()
        node = producers.get(name)
        if node is None or node.op in _CONSTANT_OPS:
            shape = graph.shapes.get(name)
            if shape is None and node is not None and node.output_shapes:
                shape = node.output_shapes[0]
            if (
                name != value
                and shape is not None
                and shape.rank is not None
                and (node is not None or name in graph.initializers)
                and any(d.is_static and d.lo in wanted for d in shape.dims)
            ):
                sliced = any(n.op in _SLICED for n in path)
                if sliced or expr is None or not expr.symbols:
                    return _said(shown, name, shape, node, path, expr)
                found.append(_said(shown, name, shape, node, path, expr))
            continue
        walked += 1
        for source in node.inputs:
            if source and source not in seen:
                seen.add(source)
                queue.append((source, (*path, node)))
    # A dim written with the user's symbols is decided where the tensor is cut to them (a
    # Slice); without one on any path, the first tensor of that size found is named.
    return found[0] if found else None


def _constants(dim: Dim, expr: Expr | None) -> frozenset[int]:
    """Return the sizes a tensor may hold that make ``dim``: an expression's constants above 1."""
    if expr is not None:
        return frozenset(c for c in expr.constants if c > 1)
    # A static size (32) is held by many tensors of a model (every hidden-size weight):
    # walking back, the first one found is as likely wrong as right. Not said.
    return frozenset()


def _said(
    shown: str,
    name: str,
    shape: Shape,
    node: Node | None,
    path: tuple[Node, ...],
    expr: Expr | None,
) -> str:
    what = "initializer" if node is None else node.op
    text = f"{shown} is from {what} {name} {shape}"
    cut = [n for n in path if n.op in _SLICED]
    if cut:
        by = ", ".join(sorted(expr.symbols)) if expr is not None and expr.symbols else None
        text += ", sliced" + (f" by {by}" if by else "") + f" (node {cut[-1].name}, {cut[-1].op})"
    return text
