"""Where a graph's dims stop being computed: the soundness contract's bookkeeping (issue 37).

A node whose inputs all have exact dims (sizes, symbols, expressions of the inputs' dims)
but whose output holds a ``?`` (or an interval) has lost a dim: nothing after it can be
decided from the model's inputs. `mark_lost` names each such node (``Node.unmodelled``, so
the coverage lists it and the domain says it is not decided past it), with why: an output
the data decides (NonZero, TopK of a computed ``k``) is "decided at run time"; any other is
"output dim not computed". `lost_operands` makes a broadcast that compares such a dim say
so ("not decided beyond node X"), instead of passing it silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import replace
from typing import Final

from bcast.core.dim import Dim
from bcast.core.shape import Shape
from bcast.models.domain import Imposed
from bcast.models.domain_collect import OUTPUT_SIZED
from bcast.models.graph import Finding, Graph, Node, Rule, Severity

__all__ = [
    "RUN_TIME",
    "compared",
    "free_claims",
    "free_symbol",
    "input_symbols",
    "is_lost",
    "lost_operands",
    "mark_lost",
    "why_lost",
]

RUN_TIME: Final = {
    "NonZero": "the count of nonzero elements",
    "Unique": "the count of distinct values",
    "NonMaxSuppression": "the boxes kept",
    "Compress": "the condition's true values",
    "TopK": "k, computed in the graph",
    "If": "the branch taken",
    "Loop": "the iterations run",
    "Scan": "the iterations run",
    "StringSplit": "the strings",
    "RandomUniformLike": "the input",
    "NonZeroIndices": "the count of nonzero elements",
    "NMSRotated": "the boxes kept",
    "Bucketize": "the data",
    "Unique_2": "the count of distinct values",
}
"""Operators whose output dims the data decides, and what decides them."""
_COMPUTED: Final = {
    "Reshape": "its target",
    "Expand": "its target",
    "Tile": "its repeats",
    "Slice": "its starts, ends or steps",
    "Pad": "its pads",
    "Resize": "its scales or sizes",
    "Upsample": "its scales",
    "Range": "its start, limit or delta",
    "ConstantOfShape": "its shape",
    "Split": "its split sizes",
    "TopK": "k",
    "OneHot": "its depth",
    "Broadcast": "its target",
    "Interpolate": "its scales or sizes",
    "StridedSlice": "its begin, end or stride",
}
"""Operators whose output dims follow from an input tensor's values, and which input."""
_RUN_TIME: Final = "decided at run time"
_NOT_COMPUTED: Final = "output dim not computed"
_ONNX: Final = ("", "ai.onnx")  # a com.microsoft rule that leaves a shape: the checker lists it


def _exact(dim: Dim) -> bool:
    return dim.is_static or dim.name is not None


def _known(shape: Shape | None) -> bool:
    return shape is not None and shape.rank is not None and all(map(_exact, shape.dims))


def input_symbols(graph: Graph) -> frozenset[str]:
    """Return the symbols of the graph's inputs' dims (weights are not inputs).

    >>> g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[N,3]"), "w": Shape((3,))})
    >>> sorted(input_symbols(g))
    ['N']
    """
    return frozenset(
        d.name
        for name, shape in graph.shapes.items()
        if name not in graph.initializers and shape.rank is not None
        for d in shape.dims
        if d.name is not None
    )


def free_symbol(dim: Dim, inputs: frozenset[str], graph: Graph) -> bool:
    """Tell whether ``dim`` is a symbol no input has and no expression defines.

    An exporter's name for a dynamic output dim (TorchScript's ``Conv13_dim_2``) says
    nothing of the inputs: the dim was not computed from them.
    """
    return dim.name is not None and dim.name not in inputs and dim.name not in graph.expressions


def free_claims(graph: Graph, claimed: Set[str], shapes: Mapping[str, Shape]) -> set[str]:
    """Return the values of ``claimed`` whose shape (in ``shapes``) holds a `free_symbol`.

    >>> g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[N,4]")})
    >>> shapes = {"y": Shape.parse("[N,Conv_dim_1]"), "z": Shape.parse("[N,4]")}
    >>> sorted(free_claims(g, {"y", "z"}, shapes))
    ['y']
    """
    inputs = input_symbols(graph)
    return {
        name
        for name in claimed
        if (shape := shapes.get(name)) is not None
        and any(free_symbol(d, inputs, graph) for d in shape.dims)
    }


def why_lost(node: Node, values: Mapping[str, Shape], constants: Set[str] = frozenset()) -> str:
    """Say why ``node``'s output dims were not computed from its inputs' exact dims.

    ``constants``: the values known as constants (an operand among them is not to blame).

    >>> why_lost(Node("nz", "NonZero", ("x",), ("y",)), {})
    'decided at run time: the count of nonzero elements'
    >>> why_lost(Node("r", "Resize", ("x", "", "s"), ("y",)), {})
    'output dim not computed: its scales or sizes not known as constants'
    >>> why_lost(Node("r", "Resize", ("x", "", "s"), ("y",)), {}, {"s"})
    'output dim not computed: bcast has no rule for its dims from '
    """
    if node.op in RUN_TIME and (node.op != "TopK" or len(node.inputs) > 1):
        return f"{_RUN_TIME}: {RUN_TIME[node.op]}"
    if node.op in _COMPUTED and not all(i in constants for i in node.inputs[1:] if i):
        return f"{_NOT_COMPUTED}: {_COMPUTED[node.op]} not known as constants"
    known = ", ".join(str(values[i]) for i in node.inputs if i and i in values)
    return f"{_NOT_COMPUTED}: bcast has no rule for its dims from {known}"


def is_lost(node: Node) -> bool:
    """Tell whether `mark_lost` named ``node`` (not another reason it is not modelled).

    >>> is_lost(Node("nz", "NonZero", ("x",), ("y",), unmodelled=why_lost(
    ...     Node("nz", "NonZero", ("x",), ("y",)), {})))
    True
    """
    return node.unmodelled.startswith((_RUN_TIME, _NOT_COMPUTED))


def mark_lost(
    graph: Graph, derived: Mapping[str, Shape] | None = None, claimed: Set[str] = frozenset()
) -> None:
    """Name the nodes of ``graph`` that lose a dim: exact inputs, a ``?`` in an output.

    Each gets ``unmodelled`` set to `why_lost`'s reason (a node already unmodelled keeps
    its reason). The shapes read are the graph's own (inputs, weights) and each node's
    ``output_shapes``, as the reader left them, where ``derived`` (the shapes bcast's own
    rules gave, as `bcast.onnx.refine` found them) knows no better: an old Dropout's mask,
    which ONNX's inference leaves unknown, has its data's shape. A value of ``claimed``
    (the graph's outputs, which the file declares) whose dims hold a `free_symbol` was
    not computed either, where the node's requirements are read off its output
    (`bcast.models.domain_collect.OUTPUT_SIZED`: a window must fit): it only has the
    declaration's name.

    Examples
    --------
    >>> g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[N,4]")})
    >>> g.nodes.append(Node("nz", "NonZero", ("x",), ("y",), output_shapes=(Shape.parse("[2,?]"),)))
    >>> mark_lost(g)
    >>> g.nodes[0].unmodelled
    'decided at run time: the count of nonzero elements'
    """
    values: dict[str, Shape] = dict(graph.shapes)
    for node in graph.nodes:
        values.update(zip(node.outputs, node.output_shapes, strict=False))
    for name, shape in (derived or {}).items():
        if not _known(values.get(name)) and _known(shape):
            values[name] = shape
    sized = {o for n in graph.nodes if n.op in OUTPUT_SIZED for o in n.outputs}
    for name in free_claims(graph, set(claimed) & sized, values):
        values[name] = Shape.dynamic()  # the declaration's name: not computed
    nodes = []
    for node in graph.nodes:
        lost = (
            not node.unmodelled
            and any(node.inputs)  # an IR Parameter's dims are the user's
            and (
                node.rule in (None, Rule.EXPAND, Rule.BROADCAST)  # a target computed
                or (node.rule is Rule.OPERATOR and node.domain in _ONNX)
            )
            and all(_known(values.get(i)) for i in node.inputs if i)
            and any(n and not _known(values.get(n)) for n in node.outputs)
        )
        why = why_lost(node, values, graph.constants.keys()) if lost else ""
        nodes.append(replace(node, unmodelled=why) if lost else node)
    graph.nodes = nodes


def lost_operands(
    node: Node,
    values: Mapping[str, Shape],
    graph: Graph,
    undecided: list[Imposed] | None,
    *,
    quiet: bool = False,
    producers: Mapping[str, Node] | None = None,
) -> list[Finding]:
    """Say where a broadcast compares a dim that a node before it lost.

    ``producers`` maps values to the nodes making them (built here where not given).

    For each operand dim that is not exact, the node that lost it is found walking back
    through the operands whose dims are not exact; the finding (info: it is not an error,
    it is what bcast does not know) and the domain both say "not decided beyond" it.

    Examples
    --------
    >>> nz = Node("nz", "NonZero", ("x",), ("i",), unmodelled="decided at run time")
    >>> add = Node("add", "Add", ("i", "y"), ("z",), rule=Rule.MULTIDIRECTIONAL)
    >>> values = {"i": Shape.parse("[2,?]"), "y": Shape.parse("[2,n]"), "x": Shape((4, 4))}
    >>> g = Graph("m.onnx", "onnx", nodes=[nz, add])
    >>> [f.reason for f in lost_operands(add, values, g, None)]
    ['not decided beyond node nz (NonZero: decided at run time): i [2,?] is compared at axis 1']
    """
    if quiet:  # shapes propagated, no findings
        return []
    found: list[Finding] = []
    operands = compared(node, values)
    if operands is None:
        return found
    if all(s is None or s.rank is None or _known(s) for _, s in operands):
        return found
    if producers is None:
        producers = {o: n for n in graph.nodes for o in n.outputs if o}
    rank = max((s.rank or 0 for _, s in operands if s is not None), default=0)
    for name, shape in operands:
        if shape is None or shape.rank is None or _known(shape):
            continue
        origin = _origin(name, values, producers)
        if origin is None:
            continue
        axis = next(
            rank - shape.rank + k for k, d in enumerate(shape.dims) if not _exact(d)
        )  # the output axis of its first lost dim (numpy's right alignment)
        reason = (
            f"not decided beyond node {origin.name} ({origin.op}: {origin.unmodelled}): "
            f"{name} {shape} is compared at axis {axis}"
        )
        found.append(
            Finding(
                Severity.INFO, "undecided", node.name, node.op, ((name, shape),), None, axis, reason
            )
        )
        if undecided is not None:
            lost = f"compares {name} {shape}, not decided beyond node {origin.name} ({origin.op})"
            undecided.append(Imposed(node.name, node.op, axis, lost))
    return found


def compared(node: Node, values: Mapping[str, Shape]) -> list[tuple[str, Shape | None]] | None:
    """Return the operands whose dims ``node`` compares (None: it compares none).

    A broadcast's operands whole; a MatMul's or Gemm's inner and batch dims (an operand
    cut to them: its rows and columns are compared with nothing); a Concat's operands
    (their concatenated axis is compared with nothing, but kept: what is lost past it is
    lost all the same).

    >>> mm = Node("mm", "MatMul", ("a", "b"), ("y",))
    >>> [str(s) for _, s in compared(mm, {"a": Shape.parse("[?,5,8]"), "b": Shape((8, 3))})]
    ['[?,8]', '[8]']
    """
    if node.op in ("MatMul", "Gemm") and node.rule in (None, Rule.GEMM):
        first, second = (*node.inputs, "", "")[:2]
        a, b = values.get(first) if first else None, values.get(second) if second else None
        if a is None or b is None or a.rank is None or b.rank is None or not a.rank or not b.rank:
            return None
        ka = a.dims[-2] if node.trans_a and a.rank >= 2 else a.dims[-1]
        kb = b.dims[-1] if node.trans_b and b.rank >= 2 else b.dims[-2 if b.rank >= 2 else -1]
        bias = [(c, values.get(c)) for c in node.inputs[2:3] if c]  # Gemm's C: (M, N)
        return [
            (node.inputs[0], Shape((*a.dims[:-2], ka))),
            (node.inputs[1], Shape((*b.dims[:-2], kb))),
            *bias,
        ]
    if node.op == "Concat" or node.rule not in (None, Rule.OPERATOR):
        return [(i, values.get(i)) for i in node.inputs if i]
    return None


def _origin(name: str, values: Mapping[str, Shape], producers: Mapping[str, Node]) -> Node | None:
    """Return the node that lost the dims of ``name`` (None: an input's own ``?``)."""
    seen: set[str] = set()
    while name not in seen:
        seen.add(name)
        node = producers.get(name)
        if node is None:
            return None
        if node.unmodelled:
            return node
        inexact = [i for i in node.inputs if i and not _known(values.get(i))]
        if not inexact:
            return None
        name = inexact[0]
    return None
