"""bcast's own shapes for IR layers whose output OpenVINO gives only as an interval.

OpenVINO's inference keeps a symbol through shape-keeping layers, but a Convolution of a
``?`` height gives ``1..``, and a Reshape or Concat of that gives another interval: the
link to the input's dims is lost, so a later broadcast against a constant (a ViT's
position embeddings) cannot say which image sizes run. `ir_shapes` gives those outputs as
dim expressions of the inputs' dims (``(height - 8)//8 + 1``, ``h*w + 1``) from the
operators' definitions in the OpenVINO opset specification; `refine_ir` hands them to the
graph where OpenVINO's dim is unnamed, so that the checker and the domain see them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from bcast.core.arithmetic import (
    concat_output,
    reshape_output,
    transposed,
    windowed_shape,
)
from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.expressions import Expr
from bcast.core.shape import Shape, more_named
from bcast.core.shape_values import arith, columns, elementwise, rows
from bcast.models import Graph, ModelError, Node, propagate_shapes
from bcast.models.lost_dims import mark_lost
from bcast.openvino.ir_cuts import reduced, sliced_ir, strided, unsqueezed
from bcast.openvino.ir_spatial import IR_SPATIAL, ints, ir_spatial

__all__ = ["Value", "ir_shapes", "refine_ir", "track_values"]

Value = tuple[Dim | int, ...]
"""A small integer tensor's values, flattened; a dim where a value is an input's size."""
_MAX_VALUES: Final = 64
_REDUCE: Final = frozenset(
    {
        "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
        "ReduceL2", "ReduceLogicalAnd", "ReduceLogicalOr",
    }
)  # fmt: skip
_ARITH: Final = {"Add": "Add", "Subtract": "Sub", "Multiply": "Mul", "Divide": "Div",
                 "FloorMod": "Mod"}  # fmt: skip
_INT64_MAX: Final = 2**63 - 1

_WINDOWED: Final = frozenset({"Convolution", "GroupConvolution", "MaxPool", "AvgPool"})
# Layers whose outputs all have their first input's shape.
_KEEPS_SHAPE: Final = frozenset(
    {
        "Relu", "ReLU", "PReLU", "Gelu", "Sigmoid", "Tanh", "Clamp", "Elu", "Selu", "Swish",
        "HSwish", "HSigmoid", "Mish", "SoftPlus", "SoftSign", "Erf", "Exp", "Log", "Sqrt",
        "Abs", "Negative", "Floor", "Ceiling", "Round", "Sign", "Convert", "ConvertLike",
        "MVN", "SoftMax", "Softmax", "LogSoftmax", "BatchNormInference", "NormalizeL2", "LRN",
        "FakeQuantize", "LogicalNot",
    }
)  # fmt: skip


def ir_shapes(
    node: Node,
    data: Mapping[str, str],
    inputs: Sequence[Shape],
    graph: Graph,
    tensors: Mapping[str, Value] | None = None,
) -> list[Shape | None] | None:
    """Return the output shapes bcast derives for the IR layer ``node`` (None: none).

    ``data`` is the layer's ``<data>`` attributes as written, ``inputs`` its input shapes
    as known so far, ``tensors`` the values of small integer tensors (constants, and shapes
    computed in the graph: `track_values`); new dim expressions are recorded in
    ``graph.expressions``.

    Examples
    --------
    >>> from bcast.models import Graph, Node
    >>> g = Graph("m.xml", "openvino")
    >>> conv = Node("c", "Convolution", ("x", "w"), ("y",))
    >>> attrs = {"strides": "8, 8", "dilations": "1, 1", "pads_begin": "0, 0",
    ...          "pads_end": "0, 0", "auto_pad": "explicit"}
    >>> shapes = [Shape.parse("[N,3,height,width]"), Shape.parse("[32,3,8,8]")]
    >>> [str(g.expressions[d.name]) for d in ir_shapes(conv, attrs, shapes, g)[0].dims[2:]]
    ['(height - 8)//8 + 1', '(width - 8)//8 + 1']
    """
    if not inputs or inputs[0].rank is None:
        return None
    op, x = node.op, inputs[0]
    tensors = graph.constants if tensors is None else tensors
    if op in _KEEPS_SHAPE:
        return [x] * len(node.outputs)
    if op in IR_SPATIAL:  # ConvolutionBackpropData, ceil pools, Pad, Split, Tile, Range...
        sized = ir_spatial(node, data, inputs, tensors, graph.expressions)
        if sized is not None or op not in _WINDOWED:
            return sized
    if op in _WINDOWED:
        found = _windowed(op, data, inputs, graph.expressions)
        return None if found is None else [found] * len(node.outputs)
    if op == "Concat":
        return [concat_output(node.axis, inputs, graph.expressions)]
    if op == "Transpose" and len(node.inputs) > 1:
        return [transposed(x, graph.constants.get(node.inputs[1]))]
    if op == "MatMul" and len(inputs) == 2:
        return [_matmul(x, inputs[1], node.trans_a, node.trans_b)]
    if op == "ScaledDotProductAttention" and len(inputs) >= 3 and inputs[2].rank:
        return [Shape((*x.dims[:-1], inputs[2].dims[-1]))] if x.rank else None
    if op == "Gather" and len(inputs) == 3:
        axis = tensors.get(node.inputs[2])
        return [_gather(x, inputs[1], axis, data.get("batch_dims", "0"))]
    if op in _REDUCE and len(node.inputs) > 1:
        keep = data.get("keep_dims", "false").lower() == "true"
        return [reduced(x, tensors.get(node.inputs[1]), keep)]
    if op in ("Unsqueeze", "Squeeze") and len(node.inputs) > 1:
        return [unsqueezed(op, x, tensors.get(node.inputs[1]))]
    if op == "StridedSlice" and len(node.inputs) >= 4:
        return [strided(x, data, [tensors.get(name) for name in node.inputs[1:4]], graph)]
    if op == "Slice" and len(node.inputs) > 3:
        return [sliced_ir(x, [tensors.get(name) for name in node.inputs[1:]], graph.expressions)]
    if op == "Reshape" and len(node.inputs) > 1:
        target = tensors.get(node.inputs[1])
        if target is None:
            return None
        try:
            return [reshape_output(x, target, node.allowzero, graph.expressions)]
        except BroadcastError:  # a size past what a dim can hold: the model is broken there
            return None
    return None


def refine_ir(graph: Graph, data: Mapping[str, Mapping[str, str]]) -> None:
    """Give ``graph``'s nodes bcast's own output shapes where OpenVINO's dims are unnamed.

    ``data`` maps a node's name to its layer's attributes. A dim OpenVINO knows (a size, a
    symbol) is kept; an unnamed one (``?``, ``1..``, ``2..64``) is replaced by the
    expression, which says more: which input dims it comes from.
    """
    tensors: dict[str, Value] = dict(graph.constants)
    producers = {o: n for n in graph.nodes for o in n.outputs if o}

    def arithmetic(names: Sequence[str]) -> None:
        """Track the element-wise layers computing ``names`` (the walk does not derive them)."""
        stack, opened = list(names), set()
        while stack:
            maker = producers.get(stack[-1])
            if maker is None or maker.op not in _ARITH or stack[-1] in tensors:
                stack.pop()
            elif stack[-1] not in opened:  # its inputs first
                opened.add(stack[-1])
                stack.extend(i for i in maker.inputs if i and i not in opened)
            else:
                track_values(maker, [], tensors, graph.expressions)
                stack.pop()

    def derive(node: Node, values: Mapping[str, Shape]) -> Sequence[Shape | None] | None:
        arithmetic(node.inputs)
        inputs = [values.get(name, Shape.dynamic()) if name else Shape.dynamic()
                  for name in node.inputs]  # fmt: skip
        track_values(node, inputs, tensors, graph.expressions)
        try:
            return ir_shapes(node, data.get(node.name, {}), inputs, graph, tensors)
        except BroadcastError:  # a size past what a dim can hold: the model is broken there
            return None

    if not any(not d.is_static and d.name is None for n in graph.nodes
               for s in n.output_shapes for d in s.dims):  # fmt: skip
        return  # OpenVINO named every dim: nothing to refine, nothing lost
    try:
        values = propagate_shapes(graph, derive=derive, over_intervals=True)
    except ModelError:  # a cycle: the checker reports it, with the model's path
        return
    nodes = []
    for node in graph.nodes:
        shapes = tuple(
            (more_named(values[name], old) or old) if name in values else old
            for name, old in zip(node.outputs, node.output_shapes, strict=False)
        )
        nodes.append(node if shapes == node.output_shapes else replace(node, output_shapes=shapes))
    graph.nodes = nodes
    mark_lost(graph)  # the layers past which dims are not computed (the coverage lists them)


def _windowed(
    op: str, data: Mapping[str, str], inputs: Sequence[Shape], expressions: dict[str, Expr]
) -> Shape | None:
    """Convolution's and pooling's output as expressions of the spatial input dims.

    The opset's arithmetic: ``(H + pads_begin + pads_end - ((k - 1)*dilation + 1))//stride
    + 1``, ``ceiling(H/stride)`` for ``same_upper``/``same_lower``; pooling with
    ``rounding_type`` ceil is left to OpenVINO (its last window has a rule of its own).
    """
    x = inputs[0]
    if x.rank is None or x.rank < 3 or data.get("rounding_type", "floor").lower() != "floor":
        return None
    spatial = x.rank - 2
    if op in ("Convolution", "GroupConvolution"):
        w = inputs[1] if len(inputs) > 1 else Shape.dynamic()
        grouped = op == "GroupConvolution"
        if w.rank != x.rank + grouped or any(not d.is_static for d in w.dims[-spatial:]):
            return None
        kernel: list[int] | None = [d.lo for d in w.dims[-spatial:]]
        first = w.dims[:2] if grouped else w.dims[:1]
        channels = Dim(first[0].lo * first[-1].lo) if all(d.is_static for d in first) else None
    else:
        kernel = ints(data.get("kernel"))
        channels = x.dims[1]
    strides = ints(data.get("strides"), [1] * spatial)
    dilations = ints(data.get("dilations"), [1] * spatial)
    begin = ints(data.get("pads_begin"), [0] * spatial)
    end = ints(data.get("pads_end"), [0] * spatial)
    auto_pad = data.get("auto_pad", "explicit").lower()
    if auto_pad not in ("explicit", "notset", "valid", "same_upper", "same_lower"):
        return None
    if kernel is None or strides is None or dilations is None or begin is None or end is None:
        return None  # an attribute bcast cannot read: OpenVINO's own shape stays
    if not all(len(v) == spatial for v in (kernel, strides, dilations, begin, end)):
        return None
    if min(kernel + strides + dilations) < 1:
        return None  # OpenVINO refuses the layer: nothing to derive
    totals = [0 if auto_pad == "valid" else begin[i] + end[i] for i in range(spatial)]
    width = channels if channels is not None else Dim.unknown()
    same = auto_pad.startswith("same")
    return windowed_shape(x, width, kernel, strides, dilations, totals, same, expressions)


def track_values(
    node: Node,
    inputs: Sequence[Shape],
    tensors: dict[str, Value],
    expressions: dict[str, Expr] | None = None,
) -> None:
    """Record the values of ``node``'s output where it computes a shape.

    ``ShapeOf``, and the ``Gather``, ``Concat``, ``Convert``, ``Squeeze``, ``Unsqueeze``
    and ``Reshape`` on it; with ``expressions``, its ``Add``, ``Subtract``, ``Multiply``,
    ``Divide`` and ``FloorMod`` too (`bcast.core.shape_values`: a dim over a size is its
    floor division, a difference only where it is never negative).

    Exporters compute Reshape targets and Slice ends from the input's shape; OpenVINO's
    inference keeps their symbols only as intervals.

    >>> from bcast.models import Node
    >>> tensors: dict[str, Value] = {"i": (1,), "axis": (0,)}
    >>> track_values(Node("s", "ShapeOf", ("x",), ("s",)), [Shape.parse("[b,seq]")], tensors)
    >>> track_values(Node("g", "Gather", ("s", "i", "axis"), ("g",)), [], tensors)
    >>> [str(v) for v in tensors["g"]]
    ['seq']
    """
    op, ins = node.op, [tensors.get(name) for name in node.inputs]
    out = node.outputs[0] if node.outputs else ""
    found: Value | None = None
    if op == "ShapeOf" and inputs and inputs[0].rank is not None:
        dims = inputs[0].dims
        if all(d.is_static or d.name is not None for d in dims):
            found = tuple(d.lo if d.is_static else d for d in dims)
    elif op in ("Convert", "Squeeze", "Unsqueeze", "Reshape") and ins and ins[0] is not None:
        found = ins[0]
    elif op == "Concat" and ins and all(v is not None for v in ins) and node.axis in (0, -1):
        found = tuple(v for values in ins if values is not None for v in values)
    elif op == "Gather" and len(ins) == 3 and ins[0] is not None and ins[2] in ((0,), (-1,)):
        found = _picked(ins[0], ins[1])
    elif op in _ARITH and len(ins) == 2 and ins[0] is not None and ins[1] is not None:
        # Divide's m_pythondiv may be false (truncation): only where no size is negative
        signs = op != "Divide" or all(type(v) is not int or v >= 0 for v in (*ins[0], *ins[1]))
        found = elementwise([ins[0], ins[1]], arith(_ARITH[op], expressions, floor=True))
        found = found if signs else None
    elif op == "Slice" and len(ins) >= 4 and ins[0] is not None and inputs:
        found = _value_slice(ins[0], inputs[0], ins[1:])
    elif op == "Transpose" and len(ins) > 1 and ins[0] is not None and ins[1] == (1, 0):
        found = columns(ins[0], inputs[0] if inputs else None)
    elif op in ("Split", "VariadicSplit") and ins and ins[0] is not None and ins[1:2] == [(0,)]:
        lengths = ins[2] if op == "VariadicSplit" and len(ins) > 2 else None
        for name, part in zip(
            node.outputs, _parts(ins[0], len(node.outputs), lengths), strict=False
        ):
            tensors[name] = part
    if out and found is not None and len(found) <= _MAX_VALUES:
        tensors[out] = found


def _value_slice(data: Value, shape: Shape, rest: Sequence[Value | None]) -> Value | None:
    """Slice-8 of a small value: its elements (1-D) or its rows (2-D, axis 0) by constants.

    >>> _value_slice((0, 1, 2, 3), Shape.parse("[2,2]"), [(-1,), (-2**63,), (-1,), (0,)])
    (2, 3, 0, 1)
    """
    start, stop, step = rest[0], rest[1], rest[2]
    axes = rest[3] if len(rest) > 3 else (0,)
    cut = (start, stop, step)
    if any(v is None or len(v) != 1 or type(v[0]) is not int for v in cut):
        return None
    picked = slice(*(int(v[0]) for v in cut if v is not None))
    if shape.rank == 1 and axes in ((0,), (-1,)):
        return data[picked]
    grid = rows(data, shape) if shape.rank == 2 and axes in ((0,), (-2,)) else None
    return None if grid is None else tuple(e for row in grid[picked] for e in row)


def _parts(data: Value, count: int, lengths: Value | None) -> list[Value]:
    """Split a 1-D value in ``count`` equal parts, or by constant ``lengths`` (-1: the rest)."""
    if lengths is None:
        size = len(data) // count if count else 0
        if not size or size * count != len(data):
            return []
        return [data[k * size : (k + 1) * size] for k in range(count)]
    if not all(type(v) is int for v in lengths) or list(lengths).count(-1) > 1:
        return []
    known = sum(int(v) for v in lengths if int(v) >= 0)
    sizes = [int(v) if int(v) >= 0 else len(data) - known for v in lengths]
    if any(v < 0 for v in sizes) or sum(sizes) != len(data):
        return []
    edges = [sum(sizes[:k]) for k in range(len(sizes) + 1)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def _picked(values: Value, indices: Value | None) -> Value | None:
    """``values[indices]`` for constant indices inside (or wrapping from the end), else None."""
    if indices is None or not all(type(i) is int for i in indices):
        return None
    size = len(values)
    picks = [i + size if type(i) is int and i < 0 else i for i in indices]
    if not all(type(i) is int and 0 <= i < size for i in picks):
        return None
    return tuple(values[i] for i in picks if type(i) is int)


def _matmul(a: Shape, b: Shape, trans_a: bool, trans_b: bool) -> Shape | None:
    """MatMul's output for operands of rank 2 or more: batch dims, A's rows, B's columns.

    A batch dim is the one of the two that is not 1 where they differ (unknown where both
    are other dims: the checker's MatMul requirement says which must hold).
    """
    if a.rank is None or b.rank is None or a.rank < 2 or b.rank < 2:
        return None
    rows = a.dims[-1] if trans_a else a.dims[-2]
    cols = b.dims[-2] if trans_b else b.dims[-1]
    batch_a, batch_b = a.dims[:-2], b.dims[:-2]
    width = max(len(batch_a), len(batch_b))
    padded_a = (Dim(1),) * (width - len(batch_a)) + batch_a
    padded_b = (Dim(1),) * (width - len(batch_b)) + batch_b
    batch = [
        x if x == y or y.definitely_one() else y if x.definitely_one() else Dim.unknown()
        for x, y in zip(padded_a, padded_b, strict=True)
    ]
    return Shape((*batch, rows, cols))


def _gather(data: Shape, indices: Shape, axis: Value | None, batch: str) -> Shape | None:
    """Gather-8's output: the data's dims around ``axis`` with the indices' dims there."""
    if data.rank is None or indices.rank is None or axis is None or len(axis) != 1:
        return None
    if batch.strip() not in ("", "0") or type(axis[0]) is not int:
        return None
    at = axis[0] + data.rank if axis[0] < 0 else axis[0]
    if not 0 <= at < data.rank:
        return None
    return Shape((*data.dims[:at], *indices.dims, *data.dims[at + 1 :]))
