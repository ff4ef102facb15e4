"""Read an OpenVINO IR model (``.xml`` + ``.bin``) into the checker's graph IR.

The XML is parsed first with ``defusedxml`` (no DTD, no entities, no external references,
no network), because the broadcast attributes must be kept *exactly as written*: OpenVINO's
API fills in axis 0 for a ``pdpd`` node that has no axis attribute (SEMANTICS §0.4), so only
the raw XML tells whether the axis was written. The model is then read with OpenVINO
itself (``ov.Core().read_model``, in the worker process of `bcast.models.isolation`): its
output partial shapes (intervals included) and its
constants are what the checker uses. When OpenVINO refuses the model (its shape inference
rejects a node), the checker still reads the graph from the XML and notes the refusal.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET  # only for ParseError; parsing is defusedxml
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as safe_fromstring

from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.shape import Shape
from bcast.models import Finding, Graph, ModelError, Node, Rule, Severity
from bcast.models.domain_collect import einsum_labels
from bcast.models.files import model_file_size, read_model_file
from bcast.models.isolation import run_isolated
from bcast.openvino.ir_interpolate import bin_constant, with_scales
from bcast.openvino.ir_shapes import refine_ir

__all__ = ["AXIS_KEY", "ELEMENTWISE_AXIS_KEY", "ELEMENTWISE_OPS", "layer_details", "read_ir"]

ELEMENTWISE_OPS: Final = frozenset(
    {
        "Add", "Subtract", "Multiply", "Divide", "Power", "Maximum", "Minimum",
        "SquaredDifference", "FloorMod", "Mod", "Equal", "NotEqual", "Greater",
        "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr", "LogicalXor",
        "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    }
)  # fmt: skip
"""OpenVINO binary element-wise operators whose broadcasting is their ``auto_broadcast``."""

_AUTO_BROADCAST: Final = {
    "numpy": Mode.NUMPY,
    "none": Mode.NONE,
    "explicit": Mode.NONE,  # AutoBroadcastType::EXPLICIT = NONE
    "pdpd": Mode.PDPD,
}
_BROADCAST_MODE: Final = {
    "numpy": Mode.NUMPY,
    "explicit": Mode.EXPLICIT,
    "none": Mode.EXPLICIT,  # Broadcast-1 spells explicit "none"
    "bidirectional": Mode.BIDIRECTIONAL,
    "pdpd": Mode.PDPD,
}
# The PDPD axis is a nested attribute (SEMANTICS §0.4).
AXIS_KEY: Final = {
    ("Broadcast", "opset1"): "mode.auto_broadcast_axis",
    ("Broadcast", "opset3"): "mode.mode.axis",
}
ELEMENTWISE_AXIS_KEY: Final = "auto_broadcast.auto_broadcast_axis"
_ITEM_SIZE: Final = {
    "FP64": 8, "FP32": 4, "FP16": 2, "BF16": 2, "I64": 8, "U64": 8, "I32": 4, "U32": 4,
    "I16": 2, "U16": 2, "I8": 1, "U8": 1, "BOOL": 1, "BOOLEAN": 1,
}  # fmt: skip
_INT_TYPES: Final = {"i64": np.int64, "i32": np.int32, "u64": np.uint64, "u32": np.uint32}
_MAX_CONSTANT_BYTES: Final = 64 * 8
_INTERVAL: Final = re.compile(r"(\d*)\.\.(\d*)")
_FRIENDLY: Final = re.compile(r"with friendly_name '([^']*)'")
_OP_TYPE: Final = re.compile(r"While validating node '\w+::(\w+) ")


@dataclass(slots=True)
class _Layer:
    id: str
    name: str
    type: str
    version: str
    data: dict[str, str]
    inputs: list[tuple[str, list[str]]] = field(default_factory=list)  # (port, dims)
    outputs: list[tuple[str, list[str], str]] = field(default_factory=list)  # + precision
    values: list[str] = field(default_factory=list)  # readable names of the outputs
    nested: int = 0  # layers of its bodies (TensorIterator, Loop, If): not read


def read_ir(path: str | os.PathLike[str]) -> Graph:
    """Read an OpenVINO IR ``.xml`` (and its ``.bin``) into a `bcast.models.Graph`.

    Parameters
    ----------
    path : str or path
        The ``.xml`` file; the weights are the ``.bin`` beside it.

    Returns
    -------
    Graph
        One node per layer; shapes from OpenVINO's own inference (the XML's port dims when
        OpenVINO refuses the model, with an ``info`` note saying so).

    Raises
    ------
    ModelError
        If the file is unsafe XML (a DTD, entities), not an IR, or its weights are missing
        or unreadable (one-line message).
    """
    xml_path = os.fspath(path)
    layers, edges = _parse_xml(xml_path)
    weights = os.path.splitext(xml_path)[0] + ".bin"
    if os.path.lexists(weights):
        model_file_size(weights)  # OpenVINO and _constant read it: a regular file, or refused
    graph = Graph(path=xml_path, format="openvino")
    shapes, constants, refusal, invented = run_isolated(
        "OpenVINO", "reading the model", _read_with_openvino, xml_path, where=xml_path
    )
    graph.invented_dims = invented
    if refusal is not None:
        graph.declared = True  # shapes from the XML's port dims: what the file claims
        culprit = _FRIENDLY.search(refusal[1])
        name = culprit.group(1) if culprit else ""
        op = next((layer.type for layer in layers if layer.name == name), "")
        if not op:  # OpenVINO names a node by its internal name while it validates it
            found = _OP_TYPE.search(refusal[1])
            op = found.group(1) if found else ""
            same = [layer.name for layer in layers if layer.type == op]
            name = same[0] if len(same) == 1 else ""  # the only layer of that type
        graph.notes.append(
            Finding(
                Severity.INFO,
                "peer-rejects",
                name,
                op,
                (),
                None,
                None,
                f"OpenVINO refuses to load this model ({refusal[0]}); checked from the XML",
            )
        )
    _name_values(layers, edges)
    plain = [_node(layer, edges, shapes, constants, graph, xml_path) for layer in layers]
    # Rules second: a Broadcast's axes_mapping may come from a Const listed after it.
    graph.nodes = [
        _with_rule(node, layer, graph) for node, layer in zip(plain, layers, strict=True)
    ]
    for index, layer in enumerate(layers):  # listed as not modelled, never passed in silence
        if layer.nested:
            why = f"its bodies ({layer.nested} layers) are not read: their broadcasts are unchecked"
            graph.nodes[index] = replace(graph.nodes[index], unmodelled=why)
    refine_ir(graph, with_scales(graph.nodes, {la.name: la.data for la in layers}, xml_path))
    return graph


def layer_details(
    path: str | os.PathLike[str],
) -> tuple[list[tuple[str, dict[str, str]]], dict[str, str]]:
    """Return each layer's version and ``<data>`` attributes, and each value's precision.

    Parameters
    ----------
    path : str or path
        The ``.xml`` file.

    Returns
    -------
    layers : list of (str, dict of str to str)
        ``(version, attributes)`` per layer, as written, in the order of `read_ir`'s nodes.
    precisions : dict of str to str
        The ``precision`` of each output port (``FP32``, ``I64``, ``BOOL``...), by the value
        names of `read_ir`.

    Raises
    ------
    ModelError
        As `read_ir`, for a file that is not safe, well-formed IR XML.
    """
    layers, edges = _parse_xml(os.fspath(path))
    _name_values(layers, edges)
    precisions = {
        value: precision
        for layer in layers
        for value, (_, _, precision) in zip(layer.values, layer.outputs, strict=True)
    }
    return [(layer.version, dict(layer.data)) for layer in layers], precisions


def _parse_xml(path: str) -> tuple[list[_Layer], dict[tuple[str, str], str]]:
    data = read_model_file(path)  # a regular file within the limits, or ModelError
    try:
        root = safe_fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as err:
        raise ModelError(
            f"{path}: refusing unsafe XML: a DTD, entity or external reference "
            f"({type(err).__name__}); OpenVINO IR has none"
        ) from None
    except ET.ParseError as err:
        raise ModelError(f"{path}: not an OpenVINO IR: malformed XML ({err})") from None
    if root.tag != "net" or root.find("layers") is None:
        raise ModelError(f"{path}: not an OpenVINO IR (no <net> with <layers>)")
    layers = []
    for element in root.iterfind("layers/layer"):
        data = element.find("data")
        layer = _Layer(
            id=element.get("id", ""),
            name=element.get("name", element.get("id", "")),
            type=element.get("type", ""),
            version=element.get("version", ""),
            data=dict(data.attrib) if data is not None else {},
            nested=sum(1 for _ in element.iter("layer")) - 1,
        )
        for port in element.iterfind("input/port"):
            layer.inputs.append((port.get("id", ""), [d.text or "" for d in port.iter("dim")]))
        for port in element.iterfind("output/port"):
            dims = [d.text or "" for d in port.iter("dim")]
            layer.outputs.append((port.get("id", ""), dims, port.get("precision", "")))
        layers.append(layer)
    edges: dict[tuple[str, str], str] = {}
    for edge in root.iterfind("edges/edge"):
        source = f"{edge.get('from-layer')}:{edge.get('from-port')}"
        edges[(edge.get("to-layer", ""), edge.get("to-port", ""))] = source
    return layers, edges


def _name_values(layers: list[_Layer], edges: dict[tuple[str, str], str]) -> None:
    """Name each output ``layer`` (or ``layer:port`` for several), and rewrite the edges."""
    seen: dict[str, int] = {}
    for layer in layers:
        seen[layer.name] = seen.get(layer.name, 0) + 1
    by_port: dict[str, str] = {}
    for layer in layers:
        base = layer.name if seen[layer.name] == 1 else f"{layer.name}#{layer.id}"
        for index, (port, _, _) in enumerate(layer.outputs):
            value = base if len(layer.outputs) == 1 else f"{base}:{index}"
            layer.values.append(value)
            by_port[f"{layer.id}:{port}"] = value
    for key, source in edges.items():
        edges[key] = by_port.get(source, source)


def _read_with_openvino(
    path: str,
) -> tuple[
    dict[str, list[Shape]], dict[str, tuple[int, ...]], tuple[str, str] | None, frozenset[str]
]:
    """OpenVINO's output shapes and integer constants by layer name, or its refusal.

    The last item is the names given to the inputs' dims (`_name_input_dims`).
    """
    import openvino as ov

    try:
        model = ov.Core().read_model(path)
    except RuntimeError as err:
        text = str(err)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if "While validating node" in text or ("shape" in text.lower() and "Check" in text):
            return {}, {}, (lines[-1] if lines else "shape inference failed", text), frozenset()
        reason = next((ln for ln in lines if "Check" not in ln and "Exception" not in ln), None)
        reason = reason or (lines[-1] if lines else type(err).__name__)
        raise ModelError(f"{path}: OpenVINO cannot read the model: {reason}") from None
    symbols = _name_input_dims(ov, model)
    shapes: dict[str, list[Shape]] = {}
    constants: dict[str, tuple[int, ...]] = {}
    for op in model.get_ordered_ops():
        name = op.get_friendly_name()
        shapes[name] = [
            _partial(op.get_output_partial_shape(i), symbols) for i in range(op.get_output_size())
        ]
        if op.get_type_name() == "Constant" and op.get_output_element_type(0).is_integral():
            shape = op.get_output_partial_shape(0)
            single = shape.is_static and shape.to_shape() and np.prod(shape.to_shape()) == 1
            if shape.rank.is_static and (shape.rank.get_length() <= 1 or single):
                values = np.asarray(op.get_data()).reshape(-1)
                if values.size <= _MAX_CONSTANT_BYTES // 8:
                    constants[name] = tuple(int(v) for v in values)
    return shapes, constants, None, frozenset(symbols.values())


def _name_input_dims(ov: Any, model: Any) -> dict[Any, str]:
    """Give each dynamic dim of each input a symbol and let OpenVINO propagate them.

    An IR's dims have no names, but OpenVINO's shape inference carries symbols through
    shape-preserving operators. Each input dim is named ``input.axis`` (``input_ids.1``), so
    that dims that come from one input dim are known to be the same (a residual connection
    is no condition), findings speak of the inputs, and ``--dim input_ids.1=8`` binds them.
    Returns the names by symbol (empty when the inputs are static or OpenVINO refuses).
    """
    names: dict[Any, str] = {}
    for index, parameter in enumerate(model.get_parameters()):
        shape = parameter.get_partial_shape()
        if shape.rank.is_dynamic or shape.is_static:
            continue
        dims = []
        for axis, dim in enumerate(shape):
            if dim.is_dynamic:
                symbol = ov.Symbol()
                dim.set_symbol(symbol)
                names[symbol] = _dim_name(parameter.get_friendly_name(), index, axis)
            dims.append(dim)
        parameter.set_partial_shape(ov.PartialShape(dims))
    if not names:
        return names
    try:
        model.validate_nodes_and_infer_types()
    except RuntimeError:  # OpenVINO loaded the model, so this is not expected: no names
        return {}
    return names


def _dim_name(parameter: str, index: int, axis: int) -> str:
    """``parameter.axis``, or ``input{index}.axis`` where the name cannot be a symbol.

    >>> _dim_name("input_ids", 0, 1), _dim_name("a b", 2, 0)
    ('input_ids.1', 'input2.0')
    """
    for text in (f"{parameter}.{axis}", f"input{index}.{axis}"):
        try:
            Dim.symbol(text)
        except BroadcastError:
            continue
        return text
    raise AssertionError("unreachable: input{index}.{axis} is a symbol")  # pragma: no cover


def _partial(shape: Any, symbols: dict[Any, str] | None = None) -> Shape:
    """Read an OpenVINO partial shape; a dim carrying an input's symbol is that symbol.

    A symbol stands for a dim of unknown value: it replaces ``?`` and unbounded intervals,
    while a bounded interval keeps its bounds (the more precise fact).
    """
    if shape.rank.is_dynamic:
        return Shape.dynamic()
    dims = []
    for d in shape:
        if d.is_static:
            dims.append(Dim.static(d.get_length()))
            continue
        hi = d.get_max_length()
        lo = d.get_min_length()
        name = symbols.get(d.get_symbol()) if symbols and d.has_symbol() else None
        if name is not None and hi < 0 and lo <= 1:
            dims.append(Dim.symbol(name))
        else:
            dims.append(Dim.interval(lo, None if hi < 0 else hi))
    return Shape(dims)


def _dim_text(text: str) -> Dim:
    token = text.strip()
    if token in ("-1", "?", ""):
        return Dim.unknown()
    if token.isdigit():
        return Dim.static(int(token))
    match = _INTERVAL.fullmatch(token)
    if match:
        lo, hi = match.groups()
        return Dim.interval(int(lo or 0), int(hi) if hi else None)
    raise ModelError(f"cannot read the dimension {token!r}")


def _shape_text(dims: list[str]) -> Shape:
    return Shape(_dim_text(d) for d in dims)


def _node(
    layer: _Layer,
    edges: dict[tuple[str, str], str],
    shapes: dict[str, list[Shape]],
    constants: dict[str, tuple[int, ...]],
    graph: Graph,
    path: str,
) -> Node:
    try:
        written = [_shape_text(dims) for _, dims, _ in layer.outputs]
        if layer.type == "Parameter" and "shape" in layer.data and written:
            written[0] = _parameter_shape(layer.data["shape"])
    except (ModelError, BroadcastError) as err:
        raise ModelError(f"{path}: layer {layer.name!r}: {err}") from None
    outputs = tuple(layer.values)
    known = shapes.get(layer.name)
    out_shapes = tuple(known) if known and len(known) == len(outputs) else tuple(written)
    for name, (_, _, precision), shape in zip(outputs, layer.outputs, out_shapes, strict=True):
        size = _ITEM_SIZE.get(precision.upper())
        if size is not None:
            graph.item_sizes[name] = size
        if layer.type in ("Parameter", "Const"):
            graph.shapes[name] = shape
    if layer.type == "Const" and outputs:
        value = constants.get(layer.name) if shapes else _bin_constant(layer, path)
        if value is not None:
            graph.constants[outputs[0]] = value
    inputs = tuple(edges.get((layer.id, port), "") for port, _ in layer.inputs)
    return Node(layer.name, layer.type, inputs, outputs, output_shapes=out_shapes)


def _parameter_shape(text: str) -> Shape:
    if text.strip() in ("...", "[...]"):
        return Shape.dynamic()
    return Shape(_dim_text(d) for d in text.split(",") if d.strip()) if text else Shape(())


def _with_rule(node: Node, layer: _Layer, graph: Graph) -> Node:
    data = layer.data
    fields: dict[str, Any] = {
        "name": node.name,
        "op": node.op,
        "inputs": node.inputs,
        "outputs": node.outputs,
        "output_shapes": node.output_shapes,
    }
    if layer.type in ELEMENTWISE_OPS or layer.type == "Select":
        mode = _AUTO_BROADCAST.get(data.get("auto_broadcast", "numpy").lower())
        if mode is None:
            return node
        key = ELEMENTWISE_AXIS_KEY
        rule = Rule.SELECT if layer.type == "Select" else Rule.ELEMENTWISE
    elif layer.type == "FakeQuantize":  # its limits broadcast onto X (models/rules_quant.py)
        mode = _AUTO_BROADCAST.get(data.get("auto_broadcast", "numpy").lower())
        if mode is None:
            return node
        key, rule = ELEMENTWISE_AXIS_KEY, Rule.OPERATOR
    elif layer.type == "Broadcast":
        mode = _BROADCAST_MODE.get(data.get("mode", "numpy").lower())
        if mode is None:
            return node
        key = AXIS_KEY.get((layer.type, layer.version), "mode.mode.axis")
        rule = Rule.BROADCAST
        if mode is Mode.EXPLICIT and len(node.inputs) > 2:
            fields["axes_mapping"] = graph.constants.get(node.inputs[2])
    elif layer.type == "Concat" and _is_int(data.get("axis", "0")):  # for the domain
        return Node(**fields, axis=int(data.get("axis", "0")))
    elif layer.type == "MatMul":  # for the domain: which dims are inner
        transposed = (data.get(f"transpose_{s}", "false").lower() == "true" for s in "ab")
        return Node(**fields, trans_a=next(transposed), trans_b=next(transposed))
    elif layer.type == "GatherElements" and _is_int(data.get("axis", "")):  # for the domain
        return Node(**fields, axis=int(data["axis"]))
    elif layer.type == "CumSum":  # exclusive or not, for the domain's index bounds
        return Node(**fields, axis=int(data.get("exclusive", "false").lower() == "true"))
    elif layer.type == "ScaledDotProductAttention":
        return Node(**fields, causal=data.get("causal", "false").lower() == "true")
    elif layer.type == "Reshape":
        return Node(**fields, allowzero=data.get("special_zero", "false").lower() != "true")
    elif layer.type == "DepthToSpace" and _is_int(data.get("block_size", "")):  # the domain
        return Node(**fields, attrs=(("block_size", int(data["block_size"])),))
    elif layer.type == "Einsum":  # for the domain: each label's dims broadcast
        return Node(**fields, attrs=einsum_labels(data.get("equation", "")))
    elif layer.type == "Pad" and data.get("pad_mode") in ("reflect", "symmetric"):
        return Node(**fields, attrs=((data["pad_mode"], 1),))  # for the domain: mirrored pads
    elif layer.type in ("LSTMSequence", "GRUSequence", "RNNSequence"):  # models/rules_recurrent
        if not _is_int(data.get("hidden_size", "")):
            return replace(node, unmodelled=f"{layer.type} has no integer hidden_size")
        reset = int(data.get("linear_before_reset", "false").lower() == "true")
        attrs = (("hidden_size", int(data["hidden_size"])), ("linear_before_reset", reset))
        return Node(**fields, rule=Rule.OPERATOR, attrs=attrs)
    elif layer.type in ("PReLU", "PRelu"):  # the slope per channel where it fits (core/channels.py)
        return Node(**fields, rule=Rule.PRELU_CHANNEL)
    else:
        return node
    fields.update(rule=rule, mode=mode)
    if mode is Mode.PDPD:
        written = data.get(key)
        # Absent: OpenVINO reads axis 0 (its default-constructed spec), not the spec's -1.
        fields["axis"] = int(written) if written is not None and _is_int(written) else 0
        fields["axis_written"] = written is not None
    return Node(**fields)


def _is_int(text: str) -> bool:
    return text.strip().lstrip("-").isdigit()


def _bin_constant(layer: _Layer, path: str) -> tuple[int, ...] | None:
    """Read a small integer constant from the ``.bin`` beside the XML (fallback path)."""
    found = bin_constant(layer.data, path, _INT_TYPES, _MAX_CONSTANT_BYTES)
    return None if found is None else tuple(int(v) for v in found)
