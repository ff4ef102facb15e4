"""bcast's own shape functions, for the operators ONNX's inference leaves unknown.

ONNX's inference sizes Conv, pooling, Concat, Flatten and Range only from static dims and
constants, leaves the ``-1`` of a Reshape unknown when the element count holds a symbol,
and knows no ``ai.onnx.ml`` shapes (`bcast.onnx.spatial_shapes` sizes ConvTranspose,
Resize, Pad, Slice, Split and the like). `own_shapes` gives those outputs, symbols and dim
expressions kept (``(height - 8)//8 + 1``, ``h*w + 1``, ``Min(64, seq)``), from the
operator definitions; `bcast.onnx.refine` hands them back to ONNX's inference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import onnx

from bcast.core.arithmetic import (
    concat_output,
    expr_of,
    expression_dim,
    product,
    reshape_output,
    transposed,
    windowed_shape,
)
from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.expressions import Expr
from bcast.core.planning import broadcast_shapes
from bcast.core.shape import Shape
from bcast.models import Graph
from bcast.models.rules_microsoft import MICROSOFT
from bcast.onnx.cache_shapes import present_shapes
from bcast.onnx.protos import DEFAULT_DOMAINS, attribute
from bcast.onnx.spatial_shapes import SPATIAL_OPS, Floats, spatial_shapes
from bcast.onnx.values import Value

__all__ = ["own_shapes"]

_ML: Final = "ai.onnx.ml"
_SAME_SHAPE: Final = frozenset({"Scaler", "Normalizer", "Imputer", "Binarizer", "LabelEncoder"})
_CLASSIFIERS: Final = frozenset({"LinearClassifier", "SVMClassifier", "TreeEnsembleClassifier"})
_UNKNOWN: Final = Dim.unknown()
_WINDOWED: Final = frozenset(
    {"Conv", "MaxPool", "AveragePool", "LpPool", "QLinearConv", "ConvInteger"}
)
_CONVOLUTIONS: Final = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3}  # the weights' input
_AUTO_PADS: Final = frozenset({"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"})
# Operators whose first output has their first input's shape: what lies between convs.
_KEEPS_SHAPE: Final = frozenset(
    {
        "Relu",
        "LeakyRelu",
        "Sigmoid",
        "Tanh",
        "HardSigmoid",
        "HardSwish",
        "Gelu",
        "Erf",
        "Elu",
        "Selu",
        "Celu",
        "Softplus",
        "Softsign",
        "Mish",
        "Clip",
        "Dropout",
        "BatchNormalization",
        "InstanceNormalization",
        "GroupNormalization",
        "LRN",
        "Identity",
        "Cast",
        "CastLike",
        "Neg",
        "Abs",
        "Sqrt",
        "Exp",
        "Log",
        "Reciprocal",
        "Floor",
        "Ceil",
        "Round",
        "Sign",
        "Not",
        "Softmax",
        "LogSoftmax",
        "ThresholdedRelu",
        "Shrink",
    }
)


def own_shapes(
    proto: onnx.NodeProto,
    inputs: Sequence[Shape],
    graph: Graph,
    tensors: Mapping[str, Value],
    floats: Floats | None = None,
) -> list[Shape | None] | None:
    """Return the output shapes bcast derives for ``proto`` (None where it derives none).

    ``inputs`` are its input shapes as known so far, ``tensors`` the values of small
    integer tensors (`bcast.onnx.values.shape_tensor_values`), ``floats`` the small float
    constants (Resize's scales: `bcast.onnx.spatial_shapes.float_values`); new dim
    expressions are recorded in ``graph.expressions``.
    """
    op, expressions = proto.op_type, graph.expressions
    if proto.domain == _ML:
        found = _ml_shapes(proto, inputs)
        return None if found is None else list(found)
    if proto.domain == MICROSOFT:  # the KV cache's present: past + seq
        return present_shapes(proto, inputs, expressions)
    if proto.domain not in DEFAULT_DOMAINS or not inputs:
        return None
    if op == "Dropout":  # its mask (output 1) has the data's shape too
        return [inputs[0]] * len(proto.output)
    if op in _KEEPS_SHAPE:
        return [inputs[0]]
    if op == "Transpose":
        return [transposed(inputs[0], attribute(proto, "perm", None) or [])]
    if op in SPATIAL_OPS:  # ConvTranspose, ceil_mode pools, Resize, Pad, Slice, Split...
        sized = spatial_shapes(proto, inputs, graph, tensors, floats or {})
        if sized is not None or op not in _WINDOWED:
            return sized
    if op == "Reshape" and len(inputs) > 1:
        return [_reshape(tensors.get(proto.input[1]), proto, inputs[0], expressions)]
    if op in _WINDOWED:
        return [_windowed(proto, inputs, expressions)]
    if op == "Concat":
        return [concat_output(int(attribute(proto, "axis", 0)), inputs, expressions)]
    if op == "Flatten":
        return [_flatten(proto, inputs[0], expressions)]
    if op == "MatMul" and len(inputs) == 2:  # after an operator ONNX does not know
        return [_matmul(inputs[0], inputs[1])]
    if op == "TopK" and len(proto.input) > 1:  # ONNX leaves a symbolic axis unknown
        return _top_k(proto, inputs[0], tensors.get(proto.input[1]))
    return None


def _top_k(proto: onnx.NodeProto, x: Shape, k: Value | None) -> list[Shape | None] | None:
    """TopK's values and indices: ``x``'s shape with ``k`` (a constant) on the axis.

    >>> from onnx import helper
    >>> node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1)
    >>> [str(s) for s in _top_k(node, Shape.parse("[1,seq]"), (5,))]
    ['[1,5]', '[1,5]']
    """
    rank = x.rank
    axis = int(attribute(proto, "axis", -1))
    if rank is None or k is None or len(k) != 1 or type(k[0]) is not int or k[0] < 0:
        return None
    if not -rank <= axis < rank:
        return None
    dims = list(x.dims)
    dims[axis % rank] = Dim(k[0])
    return [Shape(dims)] * len(proto.output)


def _matmul(a: Shape, b: Shape) -> Shape | None:
    """numpy.matmul's output shape: the batch dims broadcast, then ``[A[-2], B[-1]]``.

    >>> str(_matmul(Shape.parse("[batch,seq,64]"), Shape((64, 32))))
    '[batch,seq,32]'
    """
    if a.rank is None or b.rank is None or a.rank == 0 or b.rank == 0:
        return None
    rows = a.dims[-2:-1] if a.rank > 1 else ()  # a 1-D operand loses its added axis
    columns = b.dims[-1:] if b.rank > 1 else ()
    try:
        batch = broadcast_shapes(Shape(a.dims[:-2]), Shape(b.dims[:-2]))
    except BroadcastError:
        return None
    return Shape((*batch.dims, *rows, *columns))


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


def _windowed(
    proto: onnx.NodeProto, inputs: Sequence[Shape], expressions: dict[str, Expr]
) -> Shape | None:
    """Conv's and pooling's output where a spatial input dim is a symbol or expression.

    ONNX's inference sizes the output only from static dims; the windows' arithmetic is
    ``(H + pads - ((k - 1)*dilation + 1))//stride + 1`` (``ceiling(H/stride)`` for SAME
    padding), kept as an expression of the input's dims. Pooling with ``ceil_mode`` is
    `bcast.onnx.spatial_shapes`' (its last window has a rule of its own).
    """
    x = inputs[0] if inputs else Shape.dynamic()
    if x.rank is None or x.rank < 3 or attribute(proto, "ceil_mode", 0):
        return None
    spatial = x.rank - 2
    if proto.op_type in _CONVOLUTIONS:
        at = _CONVOLUTIONS[proto.op_type]  # QLinearConv's weights come after x's scale
        w = inputs[at] if len(inputs) > at else Shape.dynamic()
        if w.rank != x.rank or any(not d.is_static for d in w.dims[2:]):
            return None
        kernel = attribute(proto, "kernel_shape", None) or [d.lo for d in w.dims[2:]]
        channels = w.dims[0]
    else:
        kernel = attribute(proto, "kernel_shape", None)
        channels = x.dims[1]
    strides = attribute(proto, "strides", None) or [1] * spatial
    dilations = attribute(proto, "dilations", None) or [1] * spatial
    pads = attribute(proto, "pads", None) or [0] * (2 * spatial)
    auto_pad = attribute(proto, "auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if auto_pad not in _AUTO_PADS:
        return None
    if not kernel or not all(len(v) == spatial for v in (kernel, strides, dilations)):
        return None
    if len(pads) != 2 * spatial:
        return None
    same = auto_pad.startswith("SAME")
    totals = [0 if auto_pad != "NOTSET" else int(pads[i]) + int(pads[i + spatial])
              for i in range(spatial)]  # fmt: skip
    k, s, d = ([int(v) for v in values] for values in (kernel, strides, dilations))
    return windowed_shape(x, channels, k, s, d, totals, same, expressions)


def _flatten(
    proto: onnx.NodeProto, data: Shape | None, expressions: dict[str, Expr]
) -> Shape | None:
    """Flatten's output as the products of the dims before and from its axis."""
    if data is None or data.rank is None:
        return None
    axis = int(attribute(proto, "axis", 1))
    axis = axis + data.rank if axis < 0 else axis
    if not 0 <= axis <= data.rank:
        return None
    halves = []
    for part in (data.dims[:axis], data.dims[axis:]):
        found = [expr_of(d, expressions) for d in part]
        if any(f is None for f in found):
            return None
        halves.append(expression_dim(product([f for f in found if f is not None]), expressions))
    return Shape(halves)


def _reshape(
    target: Value | None, proto: onnx.NodeProto, data: Shape, expressions: dict[str, Expr]
) -> Shape | None:
    if target is None or any(isinstance(e, bool) for e in target):
        return None
    values = [e for e in target if not isinstance(e, bool)]
    try:
        allowzero = bool(attribute(proto, "allowzero", 0))
        return reshape_output(data, values, allowzero, expressions)
    except BroadcastError:  # a size past what a dim can hold: the model is broken there
        return None
