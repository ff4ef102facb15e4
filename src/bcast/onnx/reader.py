"""Read an ONNX model into the checker's graph IR (`bcast.check.Graph`).

The model is read with ``onnx`` itself, without loading external data (so a hostile model
cannot make bcast open files outside it). Shapes are kept as written: a ``dim_param`` is a
symbol (`bcast.Dim.symbol`), a dim with neither value nor param is ``?``, an input without a
shape has unknown rank. ONNX's own shape inference (``onnx.shape_inference.infer_shapes``,
with data propagation) supplies the output shapes of every node bcast does not check itself;
the ``unk__<k>`` names it invents are read as ``?``. Constants that feed shapes (initializers
and ``Constant`` nodes: Expand targets, Reshape shapes) are read as values.

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
import re
from dataclasses import replace
from typing import Any, Final

import numpy as np
import onnx
from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
from onnx import numpy_helper

from bcast.check import Graph, ModelError, Node, Rule
from bcast.dim import Dim
from bcast.errors import BroadcastError
from bcast.modes import Mode
from bcast.shape import Shape

__all__ = ["MULTIDIRECTIONAL_OPS", "load_model", "read_onnx"]

MULTIDIRECTIONAL_OPS: Final = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Equal", "Greater",
        "GreaterOrEqual", "Less", "LessOrEqual", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
        "Max", "Min", "Sum", "Mean", "Where",
    }
)  # fmt: skip
"""ONNX operators with multidirectional (NumPy) broadcasting over all their inputs."""

_LEGACY: Final = frozenset(
    {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"}
)
_DEFAULT_DOMAINS: Final = frozenset({"", "ai.onnx"})
_MAX_CONSTANT: Final = 64  # elements: shape-like constants only
_UNK: Final = re.compile(r"unk__\d+")
_BAD_SYMBOL_CHARS: Final = re.compile(r"[^A-Za-z0-9_.:/+\-*]")


def read_onnx(source: str | os.PathLike[str] | onnx.ModelProto) -> Graph:
    """Read an ONNX model file (or a ``ModelProto``) into a `bcast.check.Graph`.

    Parameters
    ----------
    source : str, path or onnx.ModelProto
        The model. External data is never loaded.

    Returns
    -------
    Graph
        Nodes of the main graph, shapes of inputs and initializers, integer constants,
        element sizes, and ONNX's inferred output shape of every node.

    Raises
    ------
    ModelError
        If the file cannot be read or is not an ONNX model (one-line message).
    """
    if isinstance(source, onnx.ModelProto):
        model, path = source, "<ModelProto>"
    else:
        path = os.fspath(source)
        model = load_model(path)
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (no IR version or no graph)")
    inferred = _infer(model)
    return _build(path, model, inferred)


def load_model(path: str) -> onnx.ModelProto:
    """Read an ONNX file without its external data; `ModelError` if it is not a model."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise ModelError(f"{path}: cannot read the file ({err.strerror or err})") from None
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ModelError(f"{path}: not an ONNX model: protobuf parse failed ({first})") from None
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (no IR version or no graph)")
    return model


def _infer(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """ONNX's own shape inference, or None when the peer itself gives up on the model."""
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # any failure of the peer means "no peer shapes"
        return None


def _build(path: str, model: onnx.ModelProto, inferred: onnx.ModelProto | None) -> Graph:
    graph = Graph(path=path, format="onnx")
    main = model.graph
    params: set[str] = set()
    for info in main.input:
        for dim in info.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                params.add(dim.dim_param)
    for init in main.initializer:
        graph.shapes[init.name] = Shape(max(int(d), 0) for d in init.dims)
        _item_size(graph, init.name, init.data_type)
        value = _tensor_ints(init)
        if value is not None:
            graph.constants[init.name] = value
    for info in main.input:
        if info.name not in graph.shapes:
            graph.shapes[info.name] = _shape_of(info, params)
            _item_size(graph, info.name, info.type.tensor_type.elem_type)
    peer: dict[str, Shape] = {}
    source = inferred.graph if inferred is not None else main
    for info in [*source.value_info, *source.output, *main.output]:
        if info.name not in peer and info.type.HasField("tensor_type"):
            peer[info.name] = _shape_of(info, params)
            _item_size(graph, info.name, info.type.tensor_type.elem_type)
    for index, proto in enumerate(main.node):
        node = _node(proto, index, peer)
        graph.nodes.append(node)
        if proto.op_type == "Constant" and proto.domain in _DEFAULT_DOMAINS and proto.output:
            value = _constant_node_ints(proto)
            if value is not None:
                graph.constants[proto.output[0]] = value
    return graph


def _item_size(graph: Graph, name: str, elem_type: int) -> None:
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError, TypeError):
        return
    graph.item_sizes[name] = int(np.dtype(dtype).itemsize)


def _symbol(name: str, params: set[str]) -> Dim:
    if _UNK.fullmatch(name) and name not in params:
        return Dim.unknown()  # invented by ONNX shape inference: no identity worth keeping
    try:
        return Dim.symbol(name)
    except BroadcastError:
        cleaned = _BAD_SYMBOL_CHARS.sub("_", name).replace("..", "_")
        if not cleaned or not (cleaned[0].isalpha() or cleaned[0] == "_"):
            cleaned = "_" + cleaned
        try:
            return Dim.symbol(cleaned)
        except BroadcastError:
            return Dim.unknown()


def _shape_of(info: onnx.ValueInfoProto, params: set[str]) -> Shape:
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return Shape.dynamic()
    dims: list[Dim] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value >= 0:
            dims.append(Dim.static(int(dim.dim_value)))
        elif dim.HasField("dim_param") and dim.dim_param:
            dims.append(_symbol(dim.dim_param, params))
        else:
            dims.append(Dim.unknown())
    return Shape(dims)


def _attr(proto: onnx.NodeProto, name: str, default: Any) -> Any:
    for attr in proto.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return default


def _node(proto: onnx.NodeProto, index: int, peer: dict[str, Shape]) -> Node:
    op = proto.op_type
    name = proto.name or f"{op}_{index}"
    outputs = tuple(proto.output)
    shapes = tuple(peer.get(o, Shape.dynamic()) for o in outputs)
    base = Node(name, op, tuple(proto.input), outputs, output_shapes=shapes)
    if proto.domain not in _DEFAULT_DOMAINS:
        return base
    if op in _LEGACY and any(a.name == "broadcast" for a in proto.attribute):
        # Opsets before 7: broadcast=1 with axis is the PDPD rule, broadcast=0 is none.
        legacy = int(_attr(proto, "broadcast", 0))
        return replace(
            base,
            rule=Rule.ELEMENTWISE,
            mode=Mode.PDPD if legacy else Mode.NONE,
            axis=int(_attr(proto, "axis", -1)),
        )
    if op in MULTIDIRECTIONAL_OPS:
        return replace(base, rule=Rule.MULTIDIRECTIONAL)
    if op == "Gemm":
        return replace(
            base,
            rule=Rule.GEMM,
            trans_a=bool(_attr(proto, "transA", 0)),
            trans_b=bool(_attr(proto, "transB", 0)),
        )
    if op == "PRelu":
        return replace(base, rule=Rule.PRELU)
    if op == "Expand":
        return replace(base, rule=Rule.EXPAND, mode=Mode.BIDIRECTIONAL)
    return base


def _tensor_ints(tensor: onnx.TensorProto) -> tuple[int, ...] | None:
    """Return the values of a small integer tensor, or None (large, non-integer, external)."""
    if tensor.data_type not in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        return None
    count = 1
    for d in tensor.dims:
        count *= int(d)
    if len(tensor.dims) > 1 or count > _MAX_CONSTANT or count < 0:
        return None
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return None
    try:
        array = numpy_helper.to_array(tensor)
    except (ValueError, TypeError, RuntimeError):
        return None
    return tuple(int(v) for v in np.asarray(array).reshape(-1))


def _constant_node_ints(proto: onnx.NodeProto) -> tuple[int, ...] | None:
    for attr in proto.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
            return _tensor_ints(attr.t)
        if attr.name == "value_ints":
            return tuple(int(v) for v in attr.ints) if len(attr.ints) <= _MAX_CONSTANT else None
        if attr.name == "value_int":
            return (int(attr.i),)
    return None
