"""Read an ONNX model into the checker's graph IR (`bcast.models.Graph`).

The model is read with ``onnx`` itself, without loading external data (so a hostile model
cannot make bcast open files outside it). Shapes are kept as written: a ``dim_param`` is a
symbol (`bcast.Dim.symbol`), a dim with neither value nor param is ``?``, an input without a
shape has unknown rank. ONNX's own shape inference (``onnx.shape_inference.infer_shapes``,
with data propagation) supplies the output shapes of every node bcast does not check itself;
the ``unk__<k>`` names it invents are read as ``?``. Constants that feed shapes (initializers
and ``Constant`` nodes: Expand targets, Reshape shapes) are read as values, and so are Expand
targets computed in the graph (``Shape`` → ``Gather`` → ``Concat``...), through ONNX's data
propagation: symbols stay symbols.

If/Loop/Scan bodies and the bodies of model-local functions become `bcast.models.Subgraph`
objects of the node that runs them; their nodes are named by path (``if_node/then_branch/add``).
The rule of an operator is the one of the operator set the model imports: before opset 7 the
element-wise operators broadcast only with ``broadcast=1``.

Examples
--------
>>> from onnx import TensorProto, helper
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])
>>> z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
>>> node = helper.make_node("Add", ["x", "y"], ["z"], name="add")
>>> model = helper.make_model(helper.make_graph([node], "g", [x, y], [z]))
>>> graph = read_onnx(model)
>>> str(graph.shapes["x"]), graph.nodes[0].rule.value
('[batch,3]', 'multidirectional')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

import onnx
from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]

from bcast.core.shape import Shape
from bcast.models import Finding, Graph, ModelError, Node, Severity, Subgraph
from bcast.models.files import read_model_file
from bcast.models.isolation import IsolationError
from bcast.models.lost_dims import mark_lost
from bcast.onnx._integrity import check_integrity
from bcast.onnx.inference import infer, infer_with_claims
from bcast.onnx.node_kinds import MULTIDIRECTIONAL_OPS, node_kind
from bcast.onnx.protos import (
    DEFAULT_DOMAINS,
    constant_node_ints,
    item_size,
    read_opsets,
    shape_of,
    tensor_ints,
    tensor_type,
)
from bcast.onnx.refine import better_shapes, elem_types, with_shapes

__all__ = ["MULTIDIRECTIONAL_OPS", "load_model", "read_onnx"]

_MAX_DEPTH: Final = 16  # nested bodies and function calls
_MAX_CALLS: Final = 2000  # function bodies read per model (each costs an inference run)
_REFINE_ROUNDS: Final = 8  # rounds of ONNX inference fed with what bcast knows (at most)
_BODIES: Final = frozenset({onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS})

_Opsets = Mapping[str, int]
_FunctionKey = tuple[str, str, str]
_Inferred = tuple[onnx.ModelProto, onnx.ModelProto | None, dict[str, str]]


def read_onnx(source: str | os.PathLike[str] | onnx.ModelProto) -> Graph:
    """Read an ONNX model file (or a ``ModelProto``) into a `bcast.models.Graph`.

    Parameters
    ----------
    source : str, path or onnx.ModelProto
        The model. External data is never loaded.

    Returns
    -------
    Graph
        Nodes of the main graph (with their bodies and called functions as subgraphs),
        shapes of inputs and initializers, integer constants, propagated shape values,
        element sizes, and ONNX's inferred output shape of every node.

    Raises
    ------
    ModelError
        If the file cannot be read, is not an ONNX model, or is broken: no operator set
        imported, or an initializer holding less or more data than its dims say
        (one-line message).
    """
    if isinstance(source, onnx.ModelProto):
        model, path = source, "<ModelProto>"
    else:
        path = os.fspath(source)
        model = load_model(path)
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (no IR version or no graph)")
    check_integrity(path, model)
    try:
        return _Reader(path, model).read()
    except IsolationError as err:  # ONNX shape inference crashed or ran out of its limits
        raise IsolationError(f"{path}: {err}") from None
    except ModelError as err:  # an attribute of the wrong type: name the file
        raise ModelError(str(err) if str(err).startswith(path) else f"{path}: {err}") from None


def load_model(path: str) -> onnx.ModelProto:
    """Read an ONNX file without its external data; `ModelError` if it is not a model.

    Only a regular file within the size limit is read (`bcast.models.files`): not a FIFO,
    a device or a symlink to one.
    """
    data = read_model_file(path)
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ModelError(f"{path}: not an ONNX model: protobuf parse failed ({first})") from None
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (no IR version or no graph)")
    return model


# -- reading graphs ----------------------------------------------------------------------


class _Reader:
    """Read one model: its main graph, nested bodies and called functions."""

    def __init__(self, path: str, model: onnx.ModelProto) -> None:
        self.path = path
        self.model = model
        self.functions: dict[_FunctionKey, onnx.FunctionProto] = {
            (f.domain, f.name, f.overload): f for f in model.functions
        }
        self.calls = 0
        self.noted: set[str] = set()  # a reason is noted once per model, at its first node
        self.inferred: dict[tuple[object, ...], _Inferred] = {}  # by function and input types

    def read(self) -> Graph:
        opsets = read_opsets(self.model.opset_import)
        main = self.model.graph
        original = list(main.value_info)
        outputs = [o.SerializeToString() for o in main.output]  # with_shapes writes into them
        seeded: set[str] = set()
        derived: dict[str, Shape] = {}  # what bcast's own rules sized, round by round
        try:
            for round_ in range(_REFINE_ROUNDS + 1):
                taken: set[str] = set()  # values a claim sized, where the facts could not
                inferred, probes = infer_with_claims(self.model, seeded, taken)
                peer = inferred.graph if inferred is not None else None
                graph = self.graph(main, peer, probes, opsets, _Scope(), 0)
                refine = round_ < _REFINE_ROUNDS
                better = better_shapes(main, graph, refine=refine, claimed=taken)
                if all(derived.get(name) == shape for name, shape in better.items()):
                    break  # nothing new (a ConvNeXt's stages take a round each): done
                # ONNX's inference goes on from what bcast knows (see bcast.onnx.refine).
                with_shapes(main, better, elem_types(main, peer), graph.expressions)
                seeded.update(better)
                derived.update(better)
            declared = {o.name for o in main.output}  # their dims: the file's claim
            mark_lost(graph, derived, declared)  # the nodes past which dims are not computed
            return graph
        finally:  # the model is left as it came
            del main.value_info[:]
            main.value_info.extend(original)
            for output, saved in zip(main.output, outputs, strict=True):
                output.ParseFromString(saved)

    def graph(
        self,
        proto: onnx.GraphProto,
        peer_proto: onnx.GraphProto | None,
        probes: Mapping[str, str],
        opsets: _Opsets,
        scope: _Scope,
        depth: int,
    ) -> Graph:
        graph = Graph(path=self.path, format="onnx")
        graph.constants.update(scope.constants)
        graph.shape_values.update(scope.shape_values)
        types = dict(scope.types)
        params = set(scope.params)
        seen: dict[bytes, Shape] = {}  # the shapes read in this graph, by their proto
        for info in proto.input:
            for dim in info.type.tensor_type.shape.dim:
                if dim.HasField("dim_param"):
                    params.add(dim.dim_param)
        for init in proto.initializer:
            graph.shapes[init.name] = Shape(max(int(d), 0) for d in init.dims)
            graph.initializers.add(init.name)
            types[init.name] = tensor_type(init.data_type, init.dims)
            item_size(graph, init.name, init.data_type)
            value = tensor_ints(init)
            if value is not None:
                graph.constants[init.name] = value
        for sparse in proto.sparse_initializer:  # its dims are the tensor's, as a Constant's
            name, data_type = sparse.values.name, sparse.values.data_type
            graph.shapes[name] = Shape(max(int(d), 0) for d in sparse.dims)
            graph.initializers.add(name)
            types[name] = tensor_type(data_type, sparse.dims)
            item_size(graph, name, data_type)
        for info in proto.input:
            if info.name not in graph.shapes:
                graph.shapes[info.name] = shape_of(info, params, graph.expressions, seen)
                types[info.name] = info.type
                item_size(graph, info.name, info.type.tensor_type.elem_type)
        peer: dict[str, Shape] = {}
        source = peer_proto if peer_proto is not None else proto
        for info in [*source.value_info, *source.output, *proto.output]:
            if info.name not in peer and info.type.HasField("tensor_type"):
                peer[info.name] = shape_of(info, params, graph.expressions, seen)
                types.setdefault(info.name, info.type)
                item_size(graph, info.name, info.type.tensor_type.elem_type)
        for target, probe in probes.items():
            probed = peer.get(probe)
            if probed is not None and probed.rank is not None and target not in graph.constants:
                graph.shape_values[target] = probed
        prefix = scope.prefix
        for index, node_proto in enumerate(proto.node):
            local = (node_proto.domain, node_proto.op_type, node_proto.overload) in self.functions
            graph.nodes.append(_node(node_proto, index, peer, opsets, prefix, local=local))
            if node_proto.op_type == "Constant" and node_proto.domain in DEFAULT_DOMAINS:
                value = constant_node_ints(node_proto) if node_proto.output else None
                if value is not None:
                    graph.constants[node_proto.output[0]] = value
        # Bodies second: they see every constant and value type of this graph.
        inner = _Scope(
            prefix,
            dict(graph.constants),
            dict(graph.shape_values),
            types,
            frozenset(params),
            scope.stack,
        )
        peer_nodes = list(peer_proto.node) if peer_proto is not None else []
        for index, node_proto in enumerate(proto.node):
            peer_node = peer_nodes[index] if index < len(peer_nodes) else None
            subgraphs = self.bodies(
                node_proto, peer_node, graph, index, probes, opsets, inner, depth
            )
            if subgraphs:
                graph.nodes[index] = replace(graph.nodes[index], subgraphs=subgraphs)
        return graph

    def bodies(
        self,
        proto: onnx.NodeProto,
        peer_proto: onnx.NodeProto | None,
        graph: Graph,
        index: int,
        probes: Mapping[str, str],
        opsets: _Opsets,
        scope: _Scope,
        depth: int,
    ) -> tuple[Subgraph, ...]:
        node = graph.nodes[index]
        found: list[Subgraph] = []
        peer_attrs: dict[str, onnx.AttributeProto] | None = None
        for attr in proto.attribute:
            if attr.type not in _BODIES:
                continue
            if peer_attrs is None:  # made for the nodes that have bodies only
                peer_attrs = {a.name: a for a in peer_proto.attribute} if peer_proto else {}
            if attr.type == onnx.AttributeProto.GRAPH:
                pairs = [(attr.name, attr.g, _peer_graph(peer_attrs.get(attr.name), None))]
            elif attr.type == onnx.AttributeProto.GRAPHS:
                pairs = [
                    (f"{attr.name}[{k}]", g, _peer_graph(peer_attrs.get(attr.name), k))
                    for k, g in enumerate(attr.graphs)
                ]
            else:
                continue
            for label, body, peer_body in pairs:
                name = f"{node.name}/{label}"
                if depth >= _MAX_DEPTH:
                    why = f"{label} is not checked: bodies and calls nest deeper than {_MAX_DEPTH}"
                    graph.notes.append(_not_checked(node, why))
                    graph.nodes[index] = replace(graph.nodes[index], unmodelled=why)
                    continue
                sub_scope = replace(scope, prefix=name + "/")
                sub = self.graph(body, peer_body, probes, opsets, sub_scope, depth + 1)
                found.append(Subgraph(name, sub))
        function = self.functions.get((proto.domain, proto.op_type, proto.overload))
        if function is not None:
            body_or_why = self.call(proto, function, node, scope, depth)
            if isinstance(body_or_why, Subgraph):
                found.append(body_or_why)
            else:  # its nodes are not modelled: listed in the coverage, each call
                graph.nodes[index] = replace(graph.nodes[index], unmodelled=body_or_why)
            if isinstance(body_or_why, str) and body_or_why not in self.noted:
                self.noted.add(body_or_why)
                graph.notes.append(_not_checked(node, body_or_why))
        return tuple(found)

    def call(
        self,
        proto: onnx.NodeProto,
        function: onnx.FunctionProto,
        node: Node,
        scope: _Scope,
        depth: int,
    ) -> Subgraph | str:
        """Read a function's body for one call, typed with the caller's input shapes.

        Return why it is not read instead.
        """
        title = f"model-local function {function.domain}.{function.name}"
        key = (function.domain, function.name, function.overload)
        if key in scope.stack:
            return f"{title} is not checked: it calls itself (ONNX forbids recursion)"
        if depth >= _MAX_DEPTH:
            return f"{title} is not checked: bodies and calls nest deeper than {_MAX_DEPTH}"
        if self.calls >= _MAX_CALLS:
            return f"function calls past the first {_MAX_CALLS} are not checked"
        self.calls += 1
        inputs = []
        for formal, actual in zip(function.input, proto.input, strict=False):
            if not actual:
                continue
            known = scope.types.get(actual)
            if known is None or not known.tensor_type.HasField("shape"):
                return f"{title} is not checked: the shape of its input {actual!r} is unknown"
            info = onnx.ValueInfoProto(name=formal)
            info.type.CopyFrom(known)
            inputs.append(info)
        body = onnx.GraphProto(
            name=function.name,
            node=function.node,
            input=inputs,
            output=[onnx.ValueInfoProto(name=o) for o in function.output],
        )
        imports = function.opset_import or self.model.opset_import
        signature = (key, *(info.SerializeToString() for info in inputs))
        if signature not in self.inferred:
            model = onnx.ModelProto(
                ir_version=self.model.ir_version,
                opset_import=imports,
                functions=self.model.functions,
                graph=body,
            )
            self.inferred[signature] = (model, *infer(model))
        model, inferred, probes = self.inferred[signature]
        name = f"{node.name}/{function.name}"
        sub_scope = _Scope(name + "/", params=scope.params, stack=(*scope.stack, key))
        peer = inferred.graph if inferred is not None else None
        sub = self.graph(model.graph, peer, probes, read_opsets(imports), sub_scope, depth + 1)
        bindings = tuple(
            (formal, actual)
            for formal, actual in zip(function.input, proto.input, strict=False)
            if actual
        )
        return Subgraph(name, sub, bindings, outer_scope=False)


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a nested graph inherits from the graph around it (a function body: nothing)."""

    prefix: str = ""
    constants: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    shape_values: Mapping[str, Shape] = field(default_factory=dict)
    types: Mapping[str, onnx.TypeProto] = field(default_factory=dict)
    params: frozenset[str] = frozenset()
    stack: tuple[_FunctionKey, ...] = ()  # the functions being read, outermost first


def _peer_graph(attr: onnx.AttributeProto | None, index: int | None) -> onnx.GraphProto | None:
    if attr is None:
        return None
    if index is None:
        return attr.g if attr.type == onnx.AttributeProto.GRAPH else None
    return attr.graphs[index] if index < len(attr.graphs) else None


def _not_checked(node: Node, reason: str) -> Finding:
    return Finding(Severity.INFO, "not-checked", node.name, node.op, (), None, None, reason)


def _node(
    proto: onnx.NodeProto,
    index: int,
    peer: dict[str, Shape],
    opsets: _Opsets,
    prefix: str,
    *,
    local: bool = False,
) -> Node:
    op = proto.op_type
    outputs = tuple(proto.output)
    return Node(
        prefix + (proto.name or f"{op}_{index}"),
        op,
        tuple(proto.input),
        outputs,
        output_shapes=tuple(peer.get(o, Shape.dynamic()) for o in outputs),
        **node_kind(
            proto, opsets, local=local
        ),  # built once: dataclasses.replace costs 10 us a call
    )
