"""What operators that carry dims through require of them, for the domain (issue 17).

The checker records each broadcast's plan and conditions itself (`bcast.models.node_checks`);
`collect_other` adds, node by node in graph order, MatMul's inner dims (exact) and batch dims
(two-way), Concat's other axes (exact), and a Reshape's element count against a constant
target. `bcast.models.domain_solve` solves them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from bcast.core.arithmetic import expr_of, plus
from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.expressions import Expr
from bcast.core.modes import Mode
from bcast.core.planning import plan
from bcast.core.shape import Shape, informative
from bcast.models.condition_sets import decided_conditions
from bcast.models.domain import (
    BoundRecord,
    CountRecord,
    IndexRecord,
    PlanRecord,
    ProductRecord,
    Record,
    WindowRecord,
)
from bcast.models.domain_arithmetic import ARITHMETIC_OPS, arithmetic_records
from bcast.models.graph import Graph, Node

__all__ = ["NOT_COLLECTED", "OUTPUT_SIZED", "Record", "collect_other", "einsum_labels"]


_MULTIPLIED: Final = frozenset({"MatMul", "Gemm"})  # A's K against B's K

NOT_COLLECTED: Final = (
    "If/Loop/Scan bodies (they run for some data only)",
    "Pad's pads computed in the graph that may be negative or that a mirror must fit",
    "OpenVINO Interpolate with pads or computed scales",
    "IR Reshape targets, Slice ends and Pad amounts computed by other operators than "
    "ShapeOf, Gather, Concat, element-wise arithmetic, Slice, Transpose and Split",
    "index bounds of Gather, GatherND and ScatterND indices made otherwise than by Range, "
    "Add, Mul and Concat",
)


def collect_other(
    node: Node,
    graph: Graph,
    values: Mapping[str, Shape],
    records: list[Record],
    producers: Mapping[str, Node] | None = None,
) -> None:
    """Record what a non-broadcasting node requires of the dims it carries.

    MatMul's and Gemm's inner dims must be equal and MatMul's batch dims broadcast; Concat's
    inputs agree on every axis but its own; a Reshape's element count matches its target,
    constant or computed in the graph (its output shape then holds symbols); a Gather of a
    ``Range`` of positions stays inside the table (``producers`` maps values to the nodes
    making them); a Conv's or pooling's window fits its input (each spatial output dim at
    least 1). An IR MatMul's ``transpose_a/b`` swap its operands' last two dims first.
    Call it once the node's outputs are in ``values``.

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
    if any(s.rank is None for name, s in zip(node.inputs, inputs, strict=True) if name):
        return  # an optional input left out (Pad-18's constant_value "") is no unknown
    if node.op in _MULTIPLIED and len(inputs) >= 2 and inputs[0].rank and inputs[1].rank:
        a, b = _transposed(inputs[0].dims, node.trans_a), _transposed(inputs[1].dims, node.trans_b)
        inner = b[-2] if len(b) >= 2 else b[0]
        _record(node, graph, [Shape((a[-1],)), Shape((inner,))], Mode.NONE, records, ["A", "B"])
        if node.op == "MatMul" and (len(a) > 2 or len(b) > 2):
            batch = [Shape(a[:-2]), Shape(b[:-2] if len(b) >= 2 else ())]
            _record(node, graph, batch, Mode.NUMPY, records, ["A", "B"])
    elif node.op == "Einsum" and node.attrs:
        _einsum(node, graph, inputs, records)
    elif node.op == "ScaledDotProductAttention" and len(inputs) >= 3:
        _attention(node, graph, inputs, records)
    elif node.op == "Concat" and len(inputs) > 1:
        rank = inputs[0].rank
        if rank is None or rank == 0 or any(s.rank != rank for s in inputs):
            return
        axis = node.axis % rank
        rest = [Shape(s.dims[:axis] + s.dims[axis + 1 :]) for s in inputs]
        _record(node, graph, rest, Mode.NONE, records, list(node.inputs), skip=axis)
    elif node.op == "Reshape" and len(node.inputs) > 1:
        target = graph.constants.get(node.inputs[1])
        output = values.get(node.outputs[0]) if node.outputs else None
        if target is not None and inputs[0].rank is not None:
            if node.allowzero and 0 in target:
                return  # a size of 0: no input of dims at least 1 holds no elements
            records.append(ProductRecord(node.name, node.op, inputs[0], target))
        elif output is not None and output.rank is not None and all(map(informative, output.dims)):
            records.append(CountRecord(node.name, node.op, inputs[0], output))
    elif node.op in _WINDOWED and node.outputs and node.outputs[0]:
        output = values.get(node.outputs[0])
        for axis, dim in enumerate(output.dims if output is not None and output.rank else ()):
            if axis >= 2 and not dim.is_static and dim.name in graph.expressions:
                records.append(WindowRecord(node.name, node.op, axis, dim))
    elif node.op in ARITHMETIC_OPS and node.outputs:  # SpaceToDepth, Split, Pad's cut
        outs = [values.get(name, Shape.dynamic()) for name in node.outputs if name]
        records.extend(arithmetic_records(node, graph, inputs, outs))
    elif node.op == "GatherND" and len(inputs) == 2 and graph.format == "onnx":
        _index_tuples(node, graph, inputs[0], node.axis, producers or {}, values, records)
    elif node.op in ("ScatterND", "ScatterNDUpdate") and len(inputs) == 3:
        _scatter_nd(node, graph, inputs, producers or {}, values, records)
    elif node.op in ("ScatterElements", "ScatterElementsUpdate") and len(inputs) >= 3:
        _record(node, graph, inputs[1:3], Mode.NONE, records, ["indices", "updates"])
    elif node.op == "GatherElements" and len(inputs) == 2 and inputs[0].rank:
        size = inputs[0].dims[node.axis % inputs[0].rank]
        largest = _largest(node.inputs[1], graph, producers or {}, values, 0)
        if informative(size) and largest is not None and largest.symbols:
            records.append(IndexRecord(node.name, node.op, plus(largest, 1), size))
    elif node.op == "Gather" and len(inputs) in (2, 3) and inputs[0].rank:
        positions = _range_of(node.inputs[1], graph, producers or {}, values)
        given = graph.constants.get(node.inputs[2]) if len(inputs) == 3 else (node.axis,)
        if given is None or len(given) != 1:
            return  # an IR Gather's axis computed in the graph
        axis = given[0] % inputs[0].rank
        size = inputs[0].dims[axis]
        if positions is not None and size.is_static:
            records.append(BoundRecord(node.name, node.op, positions[1], positions[0], size.lo))
        elif positions is None and informative(size):
            largest = _largest(node.inputs[1], graph, producers or {}, values, 0)
            picked = graph.constants.get(node.inputs[1])
            if picked and min(picked) < 0:  # -k reads row size - k: k rows, as index k - 1
                largest = Expr("int", value=max(max(picked), -min(picked) - 1))
            # Indices computed from dims, or constant ones on an axis of symbolic size
            # (Mamba's last-step x[:, 7] at seq 1): as many rows as the largest needs.
            if largest is not None and (largest.symbols or not size.is_static):
                records.append(IndexRecord(node.name, node.op, plus(largest, 1), size))


# ONNX's and the OpenVINO IR's windowed operators (their outputs sized in bcast.onnx.own_shapes
# and bcast.openvino.ir_shapes).
_WINDOWED: Final = frozenset(
    {"Conv", "MaxPool", "AveragePool", "LpPool", "Convolution", "GroupConvolution", "AvgPool"}
)
OUTPUT_SIZED: Final = _WINDOWED | {"Reshape"} | {"SpaceToDepth", "Split", "VariadicSplit"}
"""Operators whose requirements `collect_other` reads off their output's dims (a window fits
where each output size is at least 1): a name the file declares there hides them."""
# Operators whose outputs are booleans (RoBERTa's positions count the tokens that are not
# padding: CumSum(Not(Equal(ids, pad)))).
_BOOLEAN: Final = frozenset(
    {
        "Equal", "Not", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor",
        "NotEqual", "GreaterEqual", "LessEqual", "LogicalNot", "LogicalAnd", "LogicalOr",
        "LogicalXor",
    }
)  # fmt: skip
# Operators that keep the set of an integer tensor's values (Range's positions reach Gather).
_SAME_VALUES: Final = frozenset(
    {"Unsqueeze", "Squeeze", "Reshape", "Cast", "Identity", "Expand", "Convert", "Broadcast"}
)


def _attention(node: Node, graph: Graph, inputs: Sequence[Shape], records: list[Record]) -> None:
    """Record OpenVINO ScaledDotProductAttention's requirements.

    Query [N..., L, E], key [N..., S, E], value [N..., S, Ev]; the mask broadcasts one way
    into the scores [N..., L, S] (ignored when the node is ``causal``).
    """
    q, k, v = inputs[0].dims, inputs[1].dims, inputs[2].dims
    if min(len(q), len(k), len(v)) < 2:
        return
    names = ["query", "key", "value", "attention_mask"]
    _record(node, graph, [Shape(q[-1:]), Shape(k[-1:])], Mode.NONE, records, names[:2])
    _record(node, graph, [Shape(k[-2:-1]), Shape(v[-2:-1])], Mode.NONE, records, names[1:3])
    mask = inputs[3] if len(inputs) > 3 and node.inputs[3] and not node.causal else None
    if mask is not None and mask.rank:
        scores = Shape((*q[:-1], k[-2]))
        _record(node, graph, [scores, mask], Mode.UNIDIRECTIONAL, records, names[::3])


def _transposed(dims: tuple[Dim, ...], swap: bool) -> tuple[Dim, ...]:
    """Return a MatMul operand's dims as multiplied: the last two swapped for a transpose."""
    return (*dims[:-2], dims[-1], dims[-2]) if swap and len(dims) >= 2 else dims


def _scatter_nd(
    node: Node,
    graph: Graph,
    inputs: Sequence[Shape],
    producers: Mapping[str, Node],
    values: Mapping[str, Shape],
    records: list[Record],
) -> None:
    """Record ScatterND's requirements: the updates' shape, and the index tuples' bounds.

    Indices ``[..., k]`` address data's first ``k`` axes; the updates are
    ``indices.shape[:-1] + data.shape[k:]`` (onnxruntime and OpenVINO refuse any other).
    """
    data, indices, updates = inputs[:3]
    if not indices.rank or data.rank is None:
        return
    width = indices.dims[-1]
    if not width.is_static or width.lo > data.rank:
        return
    expected = Shape((*indices.dims[:-1], *data.dims[width.lo :]))
    _record(node, graph, [expected, updates], Mode.NONE, records, ["indices, data", "updates"])
    _index_tuples(node, graph, data, 0, producers, values, records)


def _index_tuples(
    node: Node,
    graph: Graph,
    data: Shape,
    first: int,
    producers: Mapping[str, Node],
    values: Mapping[str, Shape],
    records: list[Record],
) -> None:
    """Bound each component of GatherND's or ScatterND's index tuples by its data dim.

    The tuples exporters write are a Concat on the last axis of one part per component
    (positions from Ranges, expanded): part ``k``'s largest value indexes data axis
    ``first + k`` (GatherND's ``batch_dims``; 0 for ScatterND).
    """
    concat = producers.get(node.inputs[1])
    if concat is None or concat.op != "Concat" or data.rank is None:
        return
    parts = [values.get(name) for name in concat.inputs]
    if any(p is None or p.rank is None or not p.rank for p in parts):
        return
    if concat.axis not in (-1, (parts[0].rank or 0) - 1 if parts[0] is not None else -1):
        return
    at = first
    for name, part in zip(concat.inputs, parts, strict=True):
        width = part.dims[-1] if part is not None and part.rank else Dim.unknown()
        if not width.is_static:
            return  # where each component falls is not known
        largest = _largest(name, graph, producers, values, 0) if width.lo == 1 else None
        if largest is not None and largest.symbols and 0 <= at < data.rank:
            size = data.dims[at]
            if informative(size):
                records.append(IndexRecord(node.name, node.op, plus(largest, 1), size))
        at += width.lo


def _largest(
    name: str, graph: Graph, producers: Mapping[str, Node], values: Mapping[str, Shape], depth: int
) -> Expr | None:
    """Return the largest value of an index tensor computed from dims, where it is sure.

    Followed: Ranges of step 1 from a constant start (their length a dim), the operators
    that keep values, and Add and Mul of such (all values at least 0, so the largest sum or
    product is that of the largest parts); a shape value (``Shape -> Gather``) is its dim.
    """
    constant = graph.constants.get(name)
    if constant is not None:
        return Expr("int", value=max(constant)) if constant and min(constant) >= 0 else None
    known = graph.shape_values.get(name)
    if known is not None and known.rank == 1:
        return expr_of(known.dims[0], graph.expressions)
    node = producers.get(name)
    if node is None or depth > 32 or not node.inputs:
        return None
    if node.op in _SAME_VALUES:
        return _largest(node.inputs[0], graph, producers, values, depth + 1)
    if node.op in _BOOLEAN:
        return Expr("int", value=1)  # false or true: 0 or 1 once cast to a number
    if node.op == "CumSum" and len(node.inputs) == 2 and node.axis == 0:
        # A running sum of values at least 0: at most the length times the largest value.
        shape, axis = values.get(node.inputs[0]), graph.constants.get(node.inputs[1])
        part = _largest(node.inputs[0], graph, producers, values, depth + 1)
        if part is None or shape is None or not shape.rank or axis is None or len(axis) != 1:
            return None
        at = axis[0] + shape.rank if axis[0] < 0 else axis[0]
        length = expr_of(shape.dims[at], graph.expressions) if 0 <= at < shape.rank else None
        return None if length is None else Expr("*", (part, length))
    if node.op in ("Add", "Mul", "Multiply") and len(node.inputs) == 2:
        parts = [_largest(i, graph, producers, values, depth + 1) for i in node.inputs]
        if parts[0] is None or parts[1] is None:
            return None
        return Expr("+" if node.op == "Add" else "*", (parts[0], parts[1]))
    found = _range_of(name, graph, producers, values)
    if found is None:
        return None
    count = expr_of(found[1], graph.expressions)
    return None if count is None else plus(count, found[0] - 1)


def _range_of(
    name: str, graph: Graph, producers: Mapping[str, Node], values: Mapping[str, Shape]
) -> tuple[int, Dim] | None:
    """Return (start, count) when ``name``'s values are ``Range(start, start + count, 1)``.

    Only the positions exporters write for a position embedding are followed: a Range of
    step 1 from a constant start, through operators that keep its values.
    """
    node = producers.get(name)
    for _ in range(16):
        if node is None or node.op not in _SAME_VALUES:
            break
        node = producers.get(node.inputs[0]) if node.inputs else None
    if node is None or node.op != "Range" or len(node.inputs) != 3:
        return None
    start = graph.constants.get(node.inputs[0])
    step = graph.constants.get(node.inputs[2])
    out = values.get(node.outputs[0]) if node.outputs else None
    if start is None or step != (1,) or len(start) != 1 or out is None or out.rank != 1:
        return None
    count = out.dims[0]
    if (count.name is None and not count.is_static) or start[0] < 0:
        return None  # a negative start wraps; a count neither static nor named is unknown
    return start[0], count


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
    found = tuple(decided_conditions(p, names, graph.expressions))
    records.append(PlanRecord(node.name, node.op, p, found, axis=skip))


_ELLIPSIS: Final = -1


def einsum_labels(equation: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Return an Einsum equation's operand labels as `Node.attrs` (``()``: not readable).

    One entry per operand, ``("in<k>", labels)``: each label its letter's code point,
    ``...`` as -1.

    >>> einsum_labels("bij, bjk -> bik")
    (('in0', (98, 105, 106)), ('in1', (98, 106, 107)))
    >>> einsum_labels("...ij,j->...i")[0]
    ('in0', (-1, 105, 106))
    """
    terms = equation.replace(" ", "").split("->")[0].split(",")
    found = []
    for k, term in enumerate(terms):
        if term.count("...") > 1:
            return ()
        codes: list[int] = []
        for i, part in enumerate(term.split("...")):
            if i:
                codes.append(_ELLIPSIS)
            if not all(c.isalpha() and c.isascii() for c in part):
                return ()
            codes.extend(ord(c) for c in part)
        found.append((f"in{k}", tuple(codes)))
    return tuple(found)


def _einsum(node: Node, graph: Graph, inputs: Sequence[Shape], records: list[Record]) -> None:
    """Record that each Einsum label's dims broadcast across the operands, as ``...``'s do.

    onnxruntime and NumPy take a label's dims as NumPy broadcasts them (``j`` of 1 with
    ``j`` of 3 runs; 2 with 3 fails), and the dims under ``...`` likewise, right-aligned.
    """
    terms = [labels for name, labels in node.attrs if name.startswith("in")]
    if len(terms) != len(inputs):
        return
    seen: dict[int, list[tuple[str, Dim]]] = {}
    spans: list[tuple[str, Shape]] = []
    for name, labels, shape in zip(node.inputs, terms, inputs, strict=True):
        codes = labels if isinstance(labels, tuple) else (labels,)
        rank = shape.rank or 0
        if _ELLIPSIS in codes:
            at = codes.index(_ELLIPSIS)
            after = len(codes) - at - 1
            if rank < len(codes) - 1:
                return  # fewer dims than labels: ONNX's inference refuses the model
            spans.append((name, Shape(shape.dims[at : rank - after])))
            head = zip(codes[:at], shape.dims[:at], strict=True)
            tail = zip(codes[at + 1 :], shape.dims[rank - after :], strict=True)
            placed = [*head, *tail]
        elif len(codes) == rank:
            placed = list(zip(codes, shape.dims, strict=True))
        else:
            return
        for code, dim in placed:
            seen.setdefault(code, []).append((name, dim))
    for found in seen.values():
        if len(found) > 1:
            shapes = [Shape((dim,)) for _, dim in found]
            _record(node, graph, shapes, Mode.NUMPY, records, [n for n, _ in found])
    if len(spans) > 1:
        _record(node, graph, [s for _, s in spans], Mode.NUMPY, records, [n for n, _ in spans])
