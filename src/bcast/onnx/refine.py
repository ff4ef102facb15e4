"""Shapes where ONNX's own inference stops, handed back to it so that it goes on.

ONNX shape inference gives up after operators it has no shape function for (scikit-learn's
``ai.onnx.ml`` Scaler, Normalizer, LinearClassifier ...), leaves the ``-1`` of a Reshape
unknown when the element count holds a symbol, and cannot size an Expand whose target it
cannot compute. bcast knows those shapes (its own rules for every broadcasting node, and
`bcast.onnx.own_shapes` for Conv and pooling windows, Concat, Flatten, Range, Reshape's
element count and the ``ai.onnx.ml`` definitions); `better_shapes` lists them, the reader
writes them into the model as ``value_info`` and runs ONNX's inference again, a few rounds.

An exporter's ``value_info`` is a claim; the weights are facts: the reader keeps the static
dims that inference derives from the weights and takes from the claims only what inference
cannot know (an exporter's symbols and expressions, ``Min(64, s41)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import replace
from typing import Final

import onnx

from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape, informative, more_precise
from bcast.models import Graph, ModelError, Node, propagate_shapes
from bcast.models.lost_dims import free_claims, free_symbol, input_symbols
from bcast.models.rules_microsoft import MICROSOFT, OUTPUT_TYPE_FROM
from bcast.onnx.own_shapes import own_shapes
from bcast.onnx.protos import attribute, value_info
from bcast.onnx.spatial_shapes import float_values
from bcast.onnx.values import LiveValues, shape_tensor_values

__all__ = ["better_shapes", "elem_types", "with_shapes"]

_ML: Final = "ai.onnx.ml"
_CLASSIFIERS: Final = frozenset({"LinearClassifier", "SVMClassifier", "TreeEnsembleClassifier"})
_SAME_TYPE: Final = frozenset(
    {
        "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Transpose", "Reshape", "Softmax",
        "Relu", "Gelu", "Erf", "Tanh", "Sigmoid", "LayerNormalization", "Squeeze",
        "Unsqueeze", "Flatten", "Identity", "Slice", "Expand", "Concat",
    }
)  # fmt: skip
"""ONNX operators whose first output has their first input's element type."""
_QUANT_TYPE: Final = {
    "QLinearConv": 7,
    "QLinearMatMul": 7,
    "QuantizeLinear": 2,
    "DequantizeLinear": 1,
}
_CACHES: Final = frozenset({"Attention", "MultiHeadAttention"})  # their KV cache outputs
_FLOAT_OUT: Final = frozenset(
    {"Scaler", "Normalizer", "LinearRegressor", "SVMRegressor", "TreeEnsembleRegressor"}
)


def _anything_unknown(graph: Graph) -> bool:
    """Tell whether ONNX's inference left any node output of unknown rank or with a ``?``."""
    return any(
        shape.rank is None or any(not informative(d) for d in shape.dims)
        for node in graph.nodes
        for shape in node.output_shapes
    )


def better_shapes(
    proto: onnx.GraphProto, graph: Graph, *, refine: bool, claimed: Set[str] = frozenset()
) -> dict[str, Shape]:
    """Return the values whose shapes bcast knows better than ONNX's inference said.

    ``graph`` is the main graph as read with the peer's shapes. First the small shape
    tensors are evaluated where ONNX's data propagation stopped (`shape_tensor_values`)
    and given to ``graph.shape_values`` (Expand targets). Then, with ``refine``: shapes are
    propagated once more (`propagate_shapes`), the broadcasting nodes with bcast's own
    rules and the operators ONNX's inference leaves unknown with `own_shapes` (Conv and
    pooling windows, Concat sums, Reshape's ``-1``, ``ai.onnx.ml``...), each from what
    the nodes before it gave, so that a chain of them is sized in one pass. ``claimed``:
    the values the exporter's claims sized where ONNX's inference could not; bcast's rules
    size them again from the inputs (`_derived_over_claim`).
    """
    unknown = _anything_unknown(graph) or _free_claims(proto, graph) or bool(claimed)
    if not unknown and not any(n.op_type == "Shape" for n in proto.node):
        return {}  # ONNX's inference knew every shape: nothing to refine, nothing to evaluate
    try:
        shapes = propagate_shapes(graph)
    except ModelError:  # a cycle: the checker reports it, with the model's path
        return {}
    tensors = shape_tensor_values(proto, shapes, graph.constants, graph.expressions)
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
    if not refine or not unknown:  # the values of shapes are kept (index bounds read them)
        return {}
    declared = {v.name for v in proto.output}  # a graph output's dims are the file's claim
    claims = graph.nodes
    graph.nodes = [_unclaimed(n, declared, graph.expressions) for n in claims]
    try:
        return _refined(proto, graph, declared, claims, claimed)
    finally:
        graph.nodes = claims


def _free_claims(proto: onnx.GraphProto, graph: Graph) -> bool:
    """Tell whether a graph output is declared with a symbol that no input has.

    TorchScript names a dynamic output's dims (``Conv13_dim_2``); ONNX's inference takes
    the declaration where it cannot compute the dim (a Conv on an expression), so nothing
    looks unknown, yet the dim says nothing of the inputs: a window that must fit would go
    unchecked. bcast's own rules compute it from the inputs (`_computed_over_claim`).
    """
    shapes = {o: s for n in graph.nodes for o, s in zip(n.outputs, n.output_shapes, strict=False)}
    return bool(free_claims(graph, {v.name for v in proto.output}, shapes))


def _unclaimed(node: Node, declared: Set[str], expressions: Mapping[str, Expr]) -> Node:
    """Return ``node`` with the symbols a graph output merely declares left unknown.

    ONNX takes a graph output's declared dims as the value's (a KV cache's ``present``
    declared ``total`` long); what follows it would be sized from that claim. Unknown, the
    dim is filled by bcast's own rule (``past + seq``) where it has one.
    """
    if not any(name in declared for name in node.outputs):
        return node
    shapes = tuple(
        s
        if name not in declared or s.rank is None
        else Shape(d if d.is_static or d.name in expressions else Dim.unknown() for d in s.dims)
        for name, s in zip(node.outputs, node.output_shapes, strict=False)
    )
    return replace(node, output_shapes=shapes)


def _refined(
    proto: onnx.GraphProto,
    graph: Graph,
    declared: Set[str],
    nodes: Sequence[Node],
    claimed: Set[str],
) -> dict[str, Shape]:
    """Propagate with `own_shapes` (see `better_shapes`); ``nodes``: the nodes as read.

    ``claimed``: the values an exporter's claim sized (`better_shapes`).

    The small tensors a node reads (a Reshape's target) are evaluated when the walk reaches
    it, from the shapes sized before it (`LiveValues`), which the walk does not change
    again: one walk sizes a chain of them, and a second would read and size the same.
    """
    by_node = {id(node): p for node, p in zip(graph.nodes, proto.node, strict=True)}
    computed: dict[str, Shape] = {}
    floats = float_values(proto)  # Resize's scales
    live = LiveValues(proto, graph.constants, graph.expressions)

    def derive(node: Node, values: Mapping[str, Shape]) -> Sequence[Shape | None] | None:
        node_proto = by_node.get(id(node))
        if node_proto is None:
            return None
        first = node.output_shapes[0] if node.output_shapes else Shape.dynamic()
        sized = first.rank is not None and all(map(informative, first.dims))
        if node_proto.op_type == "MatMul" and sized:
            return None  # ONNX sized it (its dims are kept): only one after an unknown op
        inputs = [
            values.get(name, Shape.dynamic()) if name else Shape.dynamic()
            for name in node_proto.input
        ]
        live.follow(values)
        derived = own_shapes(node_proto, inputs, graph, live, floats)
        for name, shape in zip(node_proto.output, derived or (), strict=False):
            if shape is not None:
                computed[name] = shape  # before the walk merges it with the claim
        return derived

    values = propagate_shapes(graph, derive=derive)
    symbols = input_symbols(graph)
    found: dict[str, Shape] = {}
    for node in nodes:
        for index, name in enumerate(node.outputs):
            shape = values.get(name) if name else None
            if shape is None:
                continue
            old = node.output_shapes[index] if index < len(node.output_shapes) else None
            if name in computed and old is not None:
                if name in declared:
                    over = _computed_over_claim(computed[name], old, graph, symbols)
                else:
                    over = _derived_over_claim(computed[name], old) if name in claimed else old
                if over != old:
                    found[name] = over
                    continue
            better = more_precise(shape, old if old is not None else Shape.dynamic())
            if better is not None:
                found[name] = better
    return found


def _computed_over_claim(
    ours: Shape, claimed: Shape, graph: Graph, inputs: frozenset[str]
) -> Shape:
    """Put the dims bcast computed from the inputs over a graph output's declared symbols.

    An exporter names an output's dims as it was told (a KV cache's ``present`` as ``total``,
    TorchScript's ``Conv13_dim_2``) and onnxruntime does not hold the run to it; the
    expression of the inputs' dims (``past + seq``) is what the node computes, and so is an
    input's own dim or a size where the declaration has a name no input has (``inputs``).

    >>> from bcast.core.expressions import parse_expression
    >>> g = Graph("m.onnx", "onnx", expressions={"past_+_seq": parse_expression("past + seq")})
    >>> ours = Shape.parse("[b,past_+_seq,4,b]")
    >>> str(_computed_over_claim(ours, Shape.parse("[b,total,out,n]"), g, frozenset({"b"})))
    '[b,past_+_seq,4,b]'
    """
    if ours.rank is None or ours.rank != claimed.rank:
        return claimed
    expressions = graph.expressions
    return Shape(
        mine
        if (mine.name in expressions and theirs.name not in expressions)
        or (free_symbol(theirs, inputs, graph) and (mine.is_static or mine.name in inputs))
        else theirs
        for mine, theirs in zip(ours.dims, claimed.dims, strict=True)
    )


def _derived_over_claim(ours: Shape, theirs: Shape) -> Shape:
    """Put the dims bcast's rules derived from the inputs over another symbol of the reader's.

    Where ONNX's inference cannot size a value, the reader takes the exporter's claim (its
    ``value_info``); bcast's own rules (`own_shapes`) may then size it from the inputs. A
    symbol of the claim that differs from the derived dim is the claim's word against the
    computation: a dynamo export of ``nn.MultiheadAttention`` claims a Reshape of
    ``[T, s77, 32]`` to ``[-1, 1, 2, 16]`` is ``[T, 1, 2, 16]``, where it holds ``T*s77``
    rows (onnxruntime runs it at any batch). A static dim is kept (ONNX's, from the weights).

    >>> str(_derived_over_claim(Shape.parse("[Ts,1,2,16]"), Shape.parse("[T,1,2,16]")))
    '[Ts,1,2,16]'
    >>> str(_derived_over_claim(Shape.parse("[s,?]"), Shape.parse("[1,n]")))
    '[1,n]'
    """
    if ours.rank is None or ours.rank != theirs.rank:
        return theirs
    return Shape(
        mine if informative(mine) and not said.is_static and mine != said else said
        for mine, said in zip(ours.dims, theirs.dims, strict=True)
    )


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
        known = node.output and not types.get(node.output[0]) and node.input
        if known and (
            node.domain == MICROSOFT or node.op_type in _SAME_TYPE or node.op_type in _QUANT_TYPE
        ):
            # its first output has the type of the input its definition says (rules_microsoft);
            # ONNX's operators after one have their input's (a chain of them, one pass), the
            # quantized ones their output zero point's (or scale's)
            index = (
                OUTPUT_TYPE_FROM.get(node.op_type, 0)
                if node.domain == MICROSOFT
                else _QUANT_TYPE.get(node.op_type, 0)
            )
            if index < len(node.input) and types.get(node.input[index]):
                types[node.output[0]] = types[node.input[index]]
        if node.domain == MICROSOFT and node.op_type in _CACHES and types.get(node.input[0]):
            types.update((o, types[node.input[0]]) for o in node.output[1:] if not types.get(o))
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
    """Write ``shapes`` into ``proto.value_info`` (replacing entries of the same names).

    A graph output's declared symbols give way too (the reader restores the declaration):
    ONNX types a graph output by it, so the declaration would win over what bcast computed.
    """
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
        proto.value_info.append(value_info(name, types[name], dims))
    for output in proto.output:  # ONNX types a graph output by its declaration: ours instead
        computed = shapes.get(output.name)
        declared = output.type.tensor_type.shape if output.type.HasField("tensor_type") else None
        if computed is None or declared is None or len(declared.dim) != computed.rank:
            continue
        for dim, ours in zip(declared.dim, computed.dims, strict=True):
            text = None if ours.is_static else _dim_param(ours, expressions)
            if text is not None and not dim.HasField("dim_value"):
                dim.dim_param = text
