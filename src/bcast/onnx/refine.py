"""Shapes where ONNX's own inference stops, handed back to it so that it goes on.

ONNX shape inference gives up after operators it has no shape function for (scikit-learn's
``ai.onnx.ml`` Scaler, Normalizer, LinearClassifier ...), leaves the ``-1`` of a Reshape
unknown when the element count holds a symbol, and cannot size an Expand whose target it
cannot compute. bcast knows those shapes (its own rules for every broadcasting node, the
``ai.onnx.ml`` definitions, Reshape's element count); `better_shapes` lists them, the reader
writes them into the model as ``value_info`` and runs ONNX's inference again, a few rounds.

An exporter's ``value_info`` is a claim; the weights are facts: the reader keeps the static
dims that inference derives from the weights and takes from the claims only what inference
cannot know (an exporter's symbols and expressions, ``Min(64, s41)``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

import onnx

from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.models import Graph, ModelError, propagate_shapes
from bcast.onnx.protos import attribute, symbol
from bcast.onnx.values import Value, shape_tensor_values

__all__ = ["better_shapes", "elem_types", "more_precise", "reshape_output", "with_shapes"]

_ML: Final = "ai.onnx.ml"
_SAME_SHAPE: Final = frozenset({"Scaler", "Normalizer", "Imputer", "Binarizer", "LabelEncoder"})
_CLASSIFIERS: Final = frozenset({"LinearClassifier", "SVMClassifier", "TreeEnsembleClassifier"})
_FLOAT_OUT: Final = frozenset(
    {"Scaler", "Normalizer", "LinearRegressor", "SVMRegressor", "TreeEnsembleRegressor"}
)
_UNKNOWN: Final = Dim.unknown()


def _informative(dim: Dim) -> bool:
    return dim.is_static or dim.name is not None or dim.hi is not None


def more_precise(new: Shape, old: Shape) -> Shape | None:
    """Return ``old`` with what ``new`` knows beyond it, or None if it knows nothing more.

    Only unknown dims of ``old`` are filled; a dim both know is ``old``'s (never contradicted).

    >>> str(more_precise(Shape.parse("[N,16]"), Shape.parse("[?,?]")))
    '[N,16]'
    >>> more_precise(Shape.parse("[N,16]"), Shape.parse("[N,16]")) is None
    True
    """
    if new.rank is None:
        return None
    if old.rank is None:
        return new
    if new.rank != old.rank:
        return None
    dims = [
        n if not _informative(o) and _informative(n) else o
        for n, o in zip(new.dims, old.dims, strict=True)
    ]
    merged = Shape(dims)
    return None if merged == old else merged


def reshape_output(data: Shape, target: Sequence[Dim | int], allowzero: bool) -> Shape | None:
    """Return Reshape's output shape, resolving ``-1`` by the element count, or None.

    Symbols cancel: ``[batch,32,4,4]`` to ``[batch,32,-1]`` gives ``[batch,32,16]``.

    >>> str(reshape_output(Shape.parse("[batch,32,4,4]"), [Dim.symbol("batch"), 32, -1], False))
    '[batch,32,16]'
    >>> reshape_output(Shape.parse("[batch,8]"), [-1, 3], False) is None
    True
    """
    if data.rank is None:
        return None
    out: list[Dim | None] = []
    for i, value in enumerate(target):
        if isinstance(value, Dim):
            out.append(value)
        elif value == 0 and not allowzero:
            out.append(data.dims[i] if i < len(data.dims) else None)
        elif value == -1:
            out.append(None)
        elif value >= 0:
            out.append(Dim(value))
        else:
            return None
    if out.count(None) > 1:
        return None
    if None in out:
        missing = _quotient(list(data.dims), [d for d in out if d is not None])
        if missing is None:
            return None
        out[out.index(None)] = missing
    return Shape(d for d in out if d is not None)


def _quotient(have: list[Dim], taken: list[Dim]) -> Dim | None:
    """Return the dim that makes ``taken`` hold as many elements as ``have``, if it is sure."""
    rest = list(have)
    static_taken = 1
    for dim in taken:
        if dim.is_static:
            static_taken *= dim.lo
        elif dim.name is not None and dim in rest:
            rest.remove(dim)
        else:
            return None
    if any(not d.is_static for d in rest):
        return None
    total = math.prod(d.lo for d in rest)
    if static_taken == 0 or total % static_taken:
        return None
    return Dim(total // static_taken)


def _ml_shapes(proto: onnx.NodeProto, inputs: Sequence[Shape]) -> list[Shape] | None:
    """Output shapes of the ``ai.onnx.ml`` operators skl2onnx writes (their definitions)."""
    op = proto.op_type
    x = inputs[0] if inputs else Shape.dynamic()
    if op in _SAME_SHAPE:
        return [x]
    if x.rank is None or x.rank == 0:
        return None
    n = x.dims[0]
    if op == "LinearRegressor":
        return [Shape((n, Dim(int(attribute(proto, "targets", 1)))))]
    if op in _CLASSIFIERS:
        labels = attribute(proto, "classlabels_ints", None) or attribute(
            proto, "classlabels_strings", None
        )
        scores = Shape((n, Dim(len(labels)))) if labels else Shape((n, _UNKNOWN))
        return [Shape((n,)), scores]
    if op == "TreeEnsembleRegressor":
        return [Shape((n, Dim(int(attribute(proto, "n_targets", 1)))))]
    return None


def _anything_unknown(graph: Graph) -> bool:
    """Tell whether ONNX's inference left any node output of unknown rank or with a ``?``."""
    return any(
        shape.rank is None or any(not _informative(d) for d in shape.dims)
        for node in graph.nodes
        for shape in node.output_shapes
    )


def better_shapes(proto: onnx.GraphProto, graph: Graph, *, refine: bool) -> dict[str, Shape]:
    """Return the values whose shapes bcast knows better than ONNX's inference said.

    ``graph`` is the main graph as read with the peer's shapes. First the small shape
    tensors are evaluated where ONNX's data propagation stopped (`shape_tensor_values`)
    and given to ``graph.shape_values`` (Expand targets). Then, with ``refine``: the
    broadcasting nodes get bcast's own results (`propagate_shapes`), ``ai.onnx.ml`` nodes
    their definitions' shapes, Reshape its resolved ``-1``.
    """
    if not _anything_unknown(graph):
        return {}  # ONNX's inference knew every shape: nothing to refine, nothing to evaluate
    try:
        shapes = propagate_shapes(graph)
    except ModelError:  # a cycle: the checker reports it, with the model's path
        return {}
    tensors = shape_tensor_values(proto, shapes, graph.constants)
    before = dict(graph.shape_values)
    for name, value in tensors.items():
        if name in graph.constants:
            continue
        if all(isinstance(e, Dim) or (type(e) is int and e >= 0) for e in value):
            evaluated = Shape(value)
            theirs = graph.shape_values.get(name)
            if theirs is None:
                graph.shape_values[name] = evaluated
            else:
                graph.shape_values[name] = more_precise(evaluated, theirs) or theirs
    if not refine:
        return {}
    values = shapes if graph.shape_values == before else propagate_shapes(graph)
    found: dict[str, Shape] = {}
    for node, node_proto in zip(graph.nodes, proto.node, strict=True):
        inputs = [values.get(name, Shape.dynamic()) for name in node_proto.input]
        if node_proto.domain == _ML:
            ours: Sequence[Shape | None] | None = _ml_shapes(node_proto, inputs)
        elif node_proto.op_type == "Slice" and len(inputs) > 2:
            ours = [_slice(graph, node_proto, inputs[0], tensors)]
        elif node_proto.op_type == "Reshape" and len(inputs) > 1:
            ours = [_reshape(tensors.get(node_proto.input[1]), node_proto, inputs[0])]
        elif node.rule is not None:
            ours = [values.get(node_proto.output[0])] if node_proto.output else None
        else:
            continue
        for index, shape in enumerate(ours or ()):
            if shape is None or index >= len(node_proto.output) or not node_proto.output[index]:
                continue
            old = node.output_shapes[index] if index < len(node.output_shapes) else None
            better = more_precise(shape, old if old is not None else Shape.dynamic())
            if better is not None:
                found[node_proto.output[index]] = better
    return found


def _slice(
    graph: Graph, proto: onnx.NodeProto, data: Shape, tensors: Mapping[str, Value]
) -> Shape | None:
    """Slice's output where an end is a symbol: ``x[:, :seq]`` of 64 rows is ``Min(64, seq)``.

    Exporters slice a buffer (position ids, a causal mask) to the input's length; ONNX's
    inference leaves that dim unknown, the dynamo exporter writes ``Min(64, s41)``. Only
    the plain case is taken: one axis, step 1, start 0, a static data dim and an end that is
    a symbol (a dim is never negative, so Slice's clamping is the Min).
    """
    if data.rank is None:
        return None
    ins = [tensors.get(name) if name else None for name in proto.input]
    starts, ends = ins[1], ins[2]
    axes = ins[3] if len(ins) > 3 and ins[3] is not None else (0,)
    steps = ins[4] if len(ins) > 4 and ins[4] is not None else (1,)
    if starts is None or ends is None or not (len(starts) == len(ends) == len(axes) == 1):
        return None
    axis, start, end, step = axes[0], starts[0], ends[0], steps[0]
    if not isinstance(axis, int) or isinstance(axis, bool) or step != 1 or start != 0:
        return None
    axis = axis + data.rank if axis < 0 else axis
    if not 0 <= axis < data.rank or not isinstance(end, Dim) or end.name is None:
        return None
    size = data.dims[axis]
    if not size.is_static:
        return None
    named = symbol(f"Min({size.lo}, {end.name})", frozenset(), graph.expressions)
    return Shape((*data.dims[:axis], named, *data.dims[axis + 1 :]))


def _reshape(target: Value | None, proto: onnx.NodeProto, data: Shape) -> Shape | None:
    if target is None or any(isinstance(e, bool) for e in target):
        return None
    values = [e for e in target if not isinstance(e, bool)]
    try:
        return reshape_output(data, values, bool(attribute(proto, "allowzero", 0)))
    except BroadcastError:  # a size past what a dim can hold: the model is broken there
        return None


def elem_types(proto: onnx.GraphProto, inferred: onnx.GraphProto | None) -> dict[str, int]:
    """Element types of the graph's values: the inferred ones, and the ``ai.onnx.ml`` outputs.

    ONNX infers no type for Scaler's output; the ``ai.onnx.ml`` definitions give them
    (float scores and scaled values, integer or string labels, else the input's type).
    """
    source = inferred if inferred is not None else proto
    types = {
        v.name: v.type.tensor_type.elem_type
        for v in [*proto.input, *source.value_info, *source.output]
        if v.type.HasField("tensor_type")
    }
    types.update({t.name: t.data_type for t in proto.initializer})
    for node in proto.node:
        if node.domain != _ML:
            continue
        first = types.get(node.input[0], 0) if node.input else 0
        for index, name in enumerate(node.output):
            if not name or types.get(name):
                continue
            if node.op_type in _CLASSIFIERS and index == 0:
                ints = attribute(node, "classlabels_ints", None)
                types[name] = onnx.TensorProto.INT64 if ints else onnx.TensorProto.STRING
            elif node.op_type in _FLOAT_OUT or node.op_type in _CLASSIFIERS:
                types[name] = onnx.TensorProto.FLOAT
            else:
                types[name] = first
    return types


def _dim_param(dim: Dim, expressions: Mapping[str, Expr]) -> str | None:
    """Write a dim as ONNX does: an expression by its text, so that it reads back as one."""
    if dim.name is None:
        return None
    found = expressions.get(dim.name)
    return str(found) if found is not None else dim.name


def with_shapes(
    proto: onnx.GraphProto,
    shapes: Mapping[str, Shape],
    types: Mapping[str, int],
    expressions: Mapping[str, Expr],
) -> None:
    """Write ``shapes`` into ``proto.value_info`` (replacing entries of the same names)."""
    keep = [v for v in proto.value_info if v.name not in shapes]
    del proto.value_info[:]
    proto.value_info.extend(keep)
    for name, shape in shapes.items():
        if not types.get(name):  # no element type known: ONNX would reject the entry
            continue
        dims = [
            d.lo if d.is_static else _dim_param(d, expressions)
            for d in shape.dims  # a rank-known shape: better_shapes never gives [...]
        ]
        proto.value_info.append(onnx.helper.make_tensor_value_info(name, types[name], dims))
