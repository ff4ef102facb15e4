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

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from bcast.core.arithmetic import (
    concat_output,
    expr_of,
    expression_dim,
    reshape_output,
    window_dim,
)
from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.models import Graph, ModelError, Node, propagate_shapes

__all__ = ["ir_shapes", "refine_ir"]

_WINDOWED: Final = frozenset({"Convolution", "GroupConvolution", "MaxPool", "AvgPool"})
# Layers whose outputs all have their first input's shape.
_KEEPS_SHAPE: Final = frozenset(
    {
        "Relu", "PReLU", "Gelu", "Sigmoid", "Tanh", "Clamp", "Elu", "Selu", "Swish", "HSwish",
        "HSigmoid", "Mish", "SoftPlus", "SoftSign", "Erf", "Exp", "Log", "Sqrt", "Abs",
        "Negative", "Floor", "Ceiling", "Round", "Sign", "Convert", "ConvertLike", "MVN",
        "SoftMax", "LogSoftmax", "BatchNormInference", "NormalizeL2", "LRN", "FakeQuantize",
        "LogicalNot",
    }
)  # fmt: skip


def ir_shapes(
    node: Node, data: Mapping[str, str], inputs: Sequence[Shape], graph: Graph
) -> list[Shape | None] | None:
    """Return the output shapes bcast derives for the IR layer ``node`` (None: none).

    ``data`` is the layer's ``<data>`` attributes as written, ``inputs`` its input shapes
    as known so far; new dim expressions are recorded in ``graph.expressions``.

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
    if op in _KEEPS_SHAPE:
        return [x] * len(node.outputs)
    if op in _WINDOWED:
        found = _windowed(op, data, inputs, graph.expressions)
        return None if found is None else [found] * len(node.outputs)
    if op == "Concat":
        return [concat_output(node.axis, inputs, graph.expressions)]
    if op == "Transpose" and len(node.inputs) > 1:
        return [_transpose(x, graph.constants.get(node.inputs[1]))]
    if op == "Reshape" and len(node.inputs) > 1:
        target = graph.constants.get(node.inputs[1])
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

    def derive(node: Node, values: Mapping[str, Shape]) -> Sequence[Shape | None] | None:
        inputs = [values.get(name, Shape.dynamic()) if name else Shape.dynamic()
                  for name in node.inputs]  # fmt: skip
        try:
            return ir_shapes(node, data.get(node.name, {}), inputs, graph)
        except BroadcastError:  # a size past what a dim can hold: the model is broken there
            return None

    if not any(not d.is_static and d.name is None for n in graph.nodes
               for s in n.output_shapes for d in s.dims):  # fmt: skip
        return  # OpenVINO named every dim: nothing to refine
    try:
        values = propagate_shapes(graph, derive=derive)
    except ModelError:  # a cycle: the checker reports it, with the model's path
        return
    nodes = []
    for node in graph.nodes:
        shapes = tuple(
            _named_over(values.get(name), old) if name else old
            for name, old in zip(node.outputs, node.output_shapes, strict=False)
        )
        nodes.append(node if shapes == node.output_shapes else replace(node, output_shapes=shapes))
    graph.nodes = nodes


def _named_over(new: Shape | None, old: Shape) -> Shape:
    """``old`` with its unnamed, non-static dims replaced by ``new``'s named ones."""
    if new is None or new.rank is None or old.rank is None or new.rank != old.rank:
        return old if old.rank is not None or new is None else new
    return Shape(
        n if not o.is_static and o.name is None and (n.is_static or n.name is not None) else o
        for n, o in zip(new.dims, old.dims, strict=True)
    )


def _ints(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        return None


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
        kernel = _ints(data.get("kernel"))
        channels = x.dims[1]
    strides = _ints(data.get("strides")) or [1] * spatial
    dilations = _ints(data.get("dilations")) or [1] * spatial
    begin = _ints(data.get("pads_begin")) or [0] * spatial
    end = _ints(data.get("pads_end")) or [0] * spatial
    auto_pad = data.get("auto_pad", "explicit").lower()
    if auto_pad not in ("explicit", "notset", "valid", "same_upper", "same_lower"):
        return None
    values = (kernel, strides, dilations, begin, end)
    if kernel is None or not all(v is not None and len(v) == spatial for v in values):
        return None
    out = [x.dims[0], channels if channels is not None else Dim.unknown()]
    for i, dim in enumerate(x.dims[2:]):
        size = expr_of(dim, expressions)
        pads = 0 if auto_pad == "valid" else begin[i] + end[i]
        found = (
            None
            if size is None
            else window_dim(
                size, kernel[i], strides[i], dilations[i], pads, same=auto_pad.startswith("same")
            )
        )
        out.append(Dim.unknown() if found is None else expression_dim(found, expressions))
    return Shape(out)


def _transpose(data: Shape, perm: tuple[int, ...] | None) -> Shape | None:
    if data.rank is None or perm is None:
        return None
    order = list(perm) if perm else list(range(data.rank))[::-1]
    if sorted(order) != list(range(data.rank)):
        return None
    return Shape(data.dims[p] for p in order)
