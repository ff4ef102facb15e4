"""The nodes `bcast verify` runs inside If, Loop and Scan bodies, and what they read.

A body's values are not the model's outputs, but `bcast.onnx.verify` does not need them:
it runs each broadcasting node alone, as a one-node model, on random inputs of the shapes
propagation gives its operands. A body node is run the same way, on the shapes
propagated through its body (`bcast.models.propagate_shapes` with the enclosing graph's
values as the outer scope); where those are not concrete it is skipped with the reason, as
a main-graph node is. A model-local function is inlined before (`bcast.onnx.coverage`); a
function the inliner refused stays listed, each of its broadcasting nodes with why.

Examples
--------
>>> import numpy as np
>>> from onnx import TensorProto, helper, numpy_helper
>>> bias = helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(np.ones(4)))
>>> add = helper.make_node("Add", ["x", "b"], ["y"], name="add")
>>> branch = helper.make_graph(
...     [bias, add], "then", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
>>> node = helper.make_node("If", ["c"], ["out"], name="if", then_branch=branch,
...                         else_branch=branch)
>>> sorted(constant_tensors(helper.make_model(helper.make_graph([node], "g", [], []))))
['b']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import onnx

from bcast.core.shape import Shape
from bcast.models import Graph, Node, propagate_shapes
from bcast.models.isolation import IsolationError
from bcast.models.rules_base import broadcasting
from bcast.onnx._integrity import graphs
from bcast.onnx.peer import infer_isolated

__all__ = ["BodyNode", "body_nodes", "constant_tensors", "elem_types"]


@dataclass(frozen=True, slots=True)
class BodyNode:
    """A broadcasting node of a body: its proto, the shapes of its body's values, or why not.

    ``shapes`` holds every value the node can read (its body's and the enclosing graphs');
    ``computed`` the shape values propagation knows there (Expand targets). ``why`` is set
    (and the rest is not used) where the node cannot be run at all.
    """

    node: Node
    proto: onnx.NodeProto
    shapes: Mapping[str, Shape]
    computed: Mapping[str, Shape]
    why: str = ""


def constant_tensors(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """Return every initializer and ``Constant`` value of the model and of its bodies."""
    found: dict[str, onnx.TensorProto] = {}
    for graph in graphs(model.graph):
        found.update((init.name, init) for init in graph.initializer)
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                for attr in node.attribute:
                    if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                        found[node.output[0]] = attr.t
    return found


def elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Return the element type of every value ONNX's shape inference types, bodies included.

    Where the peer gives up, the model's own declarations (then float32 by default).
    """
    try:
        inferred = infer_isolated(model, data_prop=False)
    except IsolationError:
        raise
    except Exception:  # the peer giving up only costs us the types
        inferred = model
    types: dict[str, int] = {}
    for graph in graphs(inferred.graph):
        for info in [*graph.input, *graph.value_info, *graph.output]:
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
                types.setdefault(info.name, info.type.tensor_type.elem_type)
        for init in graph.initializer:
            types.setdefault(init.name, init.data_type)
    return types


def _bodies(proto: onnx.NodeProto) -> list[onnx.GraphProto]:
    """Return the graphs of ``proto``'s attributes in the order the reader reads them."""
    found: list[onnx.GraphProto] = []
    for attr in proto.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            found.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            found.extend(attr.graphs)
    return found


def body_nodes(
    graph: Graph,
    protos: Sequence[onnx.NodeProto],
    values: Mapping[str, Shape],
    dims: Mapping[str, int],
) -> Iterator[BodyNode]:
    """Yield the broadcasting nodes inside the bodies of ``graph``'s nodes, deepest last.

    ``protos`` are ``graph``'s node protos, in its order (the reader keeps it); ``values``
    the shapes of ``graph``'s values, which the bodies see.
    """
    for node, proto in zip(graph.nodes, protos, strict=False):
        graphs = iter(_bodies(proto))
        for sub in node.subgraphs:
            body = next(graphs, None) if sub.outer_scope else None
            if body is None:  # a function the inliner refused: its nodes stay listed
                why = (
                    f"in the function {sub.name}: verify runs model-local functions "
                    "inlined, and onnx's inliner refused this one"
                )
                for inner in _broadcasting(sub.graph):
                    yield BodyNode(inner, onnx.NodeProto(), {}, {}, why)
                continue
            inner_values = propagate_shapes(sub.graph, dims=dims, outer=values)
            computed = dict(sub.graph.shape_values)
            for inner, inner_proto in zip(sub.graph.nodes, body.node, strict=False):
                if broadcasting(inner):
                    yield BodyNode(inner, inner_proto, inner_values, computed)
            yield from body_nodes(sub.graph, list(body.node), inner_values, dims)


def _broadcasting(graph: Graph) -> Iterator[Node]:
    for node in graph.nodes:
        if broadcasting(node):
            yield node
        for sub in node.subgraphs:
            yield from _broadcasting(sub.graph)
