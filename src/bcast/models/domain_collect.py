"""What operators that carry dims through require of them, for the domain (issue 17).

The checker records each broadcast's plan and conditions itself (`bcast.models.node_checks`);
`collect_other` adds, node by node in graph order, MatMul's inner dims (exact) and batch dims
(two-way), Concat's other axes (exact), and a Reshape's element count against a constant
target. `bcast.models.domain_solve` solves them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from bcast.core.conditions import find_conditions
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.planning import plan
from bcast.core.shape import Shape
from bcast.models.domain import PlanRecord, ProductRecord
from bcast.models.graph import Graph, Node

__all__ = ["NOT_COLLECTED", "Record", "collect_other"]

Record = PlanRecord | ProductRecord
"""What the checker records for the domain, node by node."""

NOT_COLLECTED: Final = (
    "If/Loop/Scan and function bodies",
    "Slice, Gather and Pad bounds",
    "Reshape targets computed in the graph, IR Reshape and MatMul (transpose attributes)",
    "Conv/Pool spatial arithmetic unless the exporter wrote it as dim expressions",
)


def collect_other(
    node: Node, graph: Graph, values: Mapping[str, Shape], records: list[Record]
) -> None:
    """Record what a non-broadcasting node requires of the dims it carries.

    MatMul's inner dims must be equal and its batch dims broadcast; Concat's inputs agree on
    every axis but its own; a Reshape's element count matches a constant target (ONNX only:
    the IR's MatMul and Reshape take attributes the reader does not keep).

    Examples
    --------
    >>> from bcast.models import Graph, Node
    >>> g = Graph("m.onnx", "onnx")
    >>> records: list[Record] = []
    >>> values = {"a": Shape.parse("[b,seq,K]"), "w": Shape.parse("[32,8]")}
    >>> collect_other(Node("mm", "MatMul", ("a", "w"), ("y",)), g, values, records)
    >>> [c.text for c in records[0].conditions]
    ['fails unless K = 32 (axis 0 of A)']
    """
    inputs = [
        values.get(name, Shape.dynamic()) if name else Shape.dynamic() for name in node.inputs
    ]
    if any(s.rank is None for s in inputs) or (graph.format != "onnx" and node.op != "Concat"):
        return
    if node.op == "MatMul" and len(inputs) == 2 and inputs[0].rank and inputs[1].rank:
        a, b = inputs[0].dims, inputs[1].dims
        inner = b[-2] if len(b) >= 2 else b[0]
        _record(node, graph, [Shape((a[-1],)), Shape((inner,))], Mode.NONE, records, ["A", "B"])
        if len(a) > 2 or len(b) > 2:
            batch = [Shape(a[:-2]), Shape(b[:-2] if len(b) >= 2 else ())]
            _record(node, graph, batch, Mode.NUMPY, records, ["A", "B"])
    elif node.op == "Concat" and len(inputs) > 1:
        rank = inputs[0].rank
        if rank is None or rank == 0 or any(s.rank != rank for s in inputs):
            return
        axis = node.axis % rank
        rest = [Shape(s.dims[:axis] + s.dims[axis + 1 :]) for s in inputs]
        _record(node, graph, rest, Mode.NONE, records, list(node.inputs), skip=axis)
    elif node.op == "Reshape" and len(node.inputs) > 1:
        target = graph.constants.get(node.inputs[1])
        if target is not None and inputs[0].rank is not None:
            records.append(ProductRecord(node.name, node.op, inputs[0], target))


def _record(
    node: Node,
    graph: Graph,
    shapes: Sequence[Shape],
    mode: Mode,
    records: list[Record],
    names: Sequence[str],
    skip: int | None = None,
) -> None:
    try:
        p = plan(*shapes, mode=mode)
    except BroadcastError as err:
        records.append(PlanRecord(node.name, node.op, None, error=err.reason, axis=err.axis))
        return
    found = tuple(find_conditions(p, names, expressions=graph.expressions))
    records.append(PlanRecord(node.name, node.op, p, found, axis=skip))
