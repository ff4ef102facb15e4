"""Output shapes of the ONNX operators that resize, pad, cut and rearrange dims (issue 37).

ONNX's inference sizes ConvTranspose, pooling with ``ceil_mode``, Resize, DepthToSpace,
SpaceToDepth, Pad, Slice, Split, Tile and Range only from static dims and constants: a
U-Net's ``ConvTranspose`` of ``(height - 1)//2 + 1`` rows is ``?``, and the skip ``Add``
after it is then checked against nothing. `spatial_shapes` writes those outputs as dim
expressions of the inputs' dims (`bcast.core.spatial`), from the operator definitions and
what onnxruntime computes; `relations` names what such a node requires of its input dims
(``SpaceToDepth`` needs ``H % 2 == 0``, a ``Split``'s sizes sum to its dim).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import onnx

from bcast.core.arithmetic import expr_of, expression_dim, floor_div, plus, product
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.core.shape_values import padded
from bcast.core.spatial import (
    ceil_window_dim,
    cut_dim,
    range_length,
    scaled_dim,
    transposed_window_dim,
    up,
)
from bcast.models import Graph
from bcast.onnx.protos import attribute, small_values
from bcast.onnx.values import Value

__all__ = ["Floats", "SPATIAL_OPS", "float_values", "spatial_shapes"]

Floats = Mapping[str, tuple[float, ...]]
"""Small float constants by value name (Resize's and Upsample's scales)."""

SPATIAL_OPS: Final = frozenset(
    {
        "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
        "GlobalMaxPool", "GlobalLpPool", "Resize", "Upsample", "DepthToSpace",
        "SpaceToDepth", "Pad", "Slice", "Split", "Tile", "Range", "ConstantOfShape",
    }
)  # fmt: skip
"""The operators `spatial_shapes` sizes."""
_POOLS: Final = frozenset({"MaxPool", "AveragePool", "LpPool"})


def float_values(proto: onnx.GraphProto) -> dict[str, tuple[float, ...]]:
    """Return the small float constants of ``proto``: initializers and ``Constant`` nodes.

    >>> from onnx import helper, TensorProto
    >>> g = helper.make_graph([], "g", [], [], [helper.make_tensor("s", TensorProto.FLOAT,
    ...     [4], [1.0, 1.0, 2.0, 2.0])])
    >>> float_values(g)
    {'s': (1.0, 1.0, 2.0, 2.0)}
    """
    tensors = [(t.name, t) for t in proto.initializer]
    for node in proto.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                    tensors.append((node.output[0], attr.t))
    found: dict[str, tuple[float, ...]] = {}
    for name, tensor in tensors:
        values = small_values(tensor)
        if values is not None and values[0] == "f":
            found[name] = values[1]
    return found


def spatial_shapes(
    proto: onnx.NodeProto,
    inputs: Sequence[Shape],
    graph: Graph,
    tensors: Mapping[str, Value],
    floats: Floats,
) -> list[Shape | None] | None:
    """Return the output shapes of ``proto`` (one of `SPATIAL_OPS`); None where not known.

    ``tensors`` holds the small integer tensors' values (dims where they come from shapes),
    ``floats`` the float constants; new expressions go to ``graph.expressions``.

    Examples
    --------
    >>> from onnx import helper
    >>> from bcast.models import Graph
    >>> g = Graph("m.onnx", "onnx")
    >>> node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])
    >>> shapes = [Shape.parse("[N,8,h,w]"), Shape.parse("[8,4,2,2]")]
    >>> out = spatial_shapes(node, shapes, g, {}, {})[0]
    >>> str(out.dims[1]), str(g.expressions[out.dims[2].name])
    ('4', '2*h')
    """
    op, x = proto.op_type, inputs[0] if inputs else Shape.dynamic()
    ins = [tensors.get(name) if name else None for name in proto.input]
    if x.rank is None:
        return None
    expressions = graph.expressions
    if op == "ConvTranspose":
        return [_conv_transpose(proto, x, inputs, expressions)]
    if op in _POOLS:
        if not attribute(proto, "ceil_mode", 0):
            return None  # bcast.onnx.own_shapes writes the floor windows
        found = _ceil_pool(proto, x, expressions)
        return [found] * len(proto.output)
    if op.startswith("Global"):
        return [Shape((*x.dims[:2], *(Dim(1),) * (x.rank - 2)))] if x.rank >= 2 else None
    if op in ("Resize", "Upsample"):
        return [_resize(proto, x, ins, floats, expressions)]
    if op in ("DepthToSpace", "SpaceToDepth"):
        return [_space_depth(op, int(attribute(proto, "blocksize", 0)), x, expressions)]
    if op == "Pad":
        return [_pad(proto, x, ins, expressions)]
    if op == "Slice":
        return [_slice(proto, x, ins, expressions)]
    if op == "Split":
        return _split(proto, x, ins, expressions)
    if op == "Tile" and len(ins) > 1:
        return [_tile(x, ins[1], expressions)]
    if op == "Range" and len(ins) == 3:
        return [_range(ins, expressions)]
    if op == "ConstantOfShape" and ins and ins[0] is not None:
        values = ins[0]
        if all(isinstance(v, Dim) or (type(v) is int and v >= 0) for v in values):
            return [Shape(v if isinstance(v, Dim) else Dim(int(v)) for v in values)]
    return None


def _ints(proto: onnx.NodeProto, name: str, default: list[int]) -> list[int]:
    value = attribute(proto, name, None)
    return [int(v) for v in value] if value else default


def _conv_transpose(
    proto: onnx.NodeProto, x: Shape, inputs: Sequence[Shape], expressions: dict[str, Expr]
) -> Shape | None:
    """ConvTranspose's output: ``stride*(H - 1) + output_padding + span - pads`` per axis.

    ``output_shape`` given: those sizes; ``SAME_UPPER``/``SAME_LOWER``: ``H*stride``.
    """
    w = inputs[1] if len(inputs) > 1 else Shape.dynamic()
    spatial = x.rank - 2 if x.rank is not None else 0
    if spatial < 1 or w.rank != x.rank:
        return None
    group = int(attribute(proto, "group", 1))
    channels = Dim(w.dims[1].lo * group) if w.dims[1].is_static else Dim.unknown()
    kernel = _ints(proto, "kernel_shape", [d.lo if d.is_static else 0 for d in w.dims[2:]])
    strides = _ints(proto, "strides", [1] * spatial)
    dilations = _ints(proto, "dilations", [1] * spatial)
    pads = _ints(proto, "pads", [0] * (2 * spatial))
    extra = _ints(proto, "output_padding", [0] * spatial)
    given = _ints(proto, "output_shape", [])
    auto_pad = attribute(proto, "auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    lists = (kernel, strides, dilations, extra)
    if any(len(v) != spatial for v in lists) or len(pads) != 2 * spatial:
        return None
    if given:
        if len(given) != spatial:
            return None
        return Shape((x.dims[0], channels, *(Dim(v) for v in given)))
    out = [x.dims[0], channels]
    for i, dim in enumerate(x.dims[2:]):
        size = expr_of(dim, expressions)
        if size is None:
            out.append(Dim.unknown())
            continue
        if auto_pad.startswith("SAME"):
            found: Expr | None = product([Expr("int", value=strides[i]), size])
        else:
            total = 0 if auto_pad == "VALID" else pads[i] + pads[i + spatial]
            found = transposed_window_dim(
                size, kernel[i], strides[i], dilations[i], total, extra[i]
            )
        out.append(Dim.unknown() if found is None else expression_dim(found, expressions))
    return Shape(out)


def _ceil_pool(proto: onnx.NodeProto, x: Shape, expressions: dict[str, Expr]) -> Shape | None:
    """MaxPool/AveragePool/LpPool with ``ceil_mode=1``, as onnxruntime sizes it.

    The last window must start inside the padded input (`bcast.core.spatial.ceil_window_dim`);
    ONNX's own inference omits that rule and says one more where onnxruntime gives one less.
    """
    spatial = x.rank - 2 if x.rank is not None else 0
    kernel = _ints(proto, "kernel_shape", [])
    strides = _ints(proto, "strides", [1] * spatial)
    dilations = _ints(proto, "dilations", [1] * spatial)
    pads = _ints(proto, "pads", [0] * (2 * spatial))
    auto_pad = attribute(proto, "auto_pad", b"NOTSET")
    if (auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)) != "NOTSET":
        return None  # SAME/VALID do not round up: the floor windows
    if spatial < 1 or any(len(v) != spatial for v in (kernel, strides, dilations)):
        return None
    if len(pads) != 2 * spatial:
        return None
    out = list(x.dims[:2])
    for i, dim in enumerate(x.dims[2:]):
        size = expr_of(dim, expressions)
        found = None if size is None else ceil_window_dim(
            size, kernel[i], strides[i], dilations[i], pads[i], pads[i + spatial],
            last_inside=True,
        )  # fmt: skip
        out.append(Dim.unknown() if found is None else expression_dim(found, expressions))
    return Shape(out)


def _resize(
    proto: onnx.NodeProto,
    x: Shape,
    ins: Sequence[Value | None],
    floats: Floats,
    expressions: dict[str, Expr],
) -> Shape | None:
    """Resize's (Upsample's) output: ``floor(H*scale)`` for constant scales, or the sizes.

    Resize-10 and Upsample-9 take the scales as input 1, Upsample-7 as an attribute,
    Resize-11+ as input 2 (sizes input 3); ``axes`` (Resize-18) names the axes they cover.
    """
    rank = x.rank or 0
    names = list(proto.input)
    if proto.op_type == "Upsample" and len(names) == 1:
        scales: tuple[float, ...] | None = tuple(attribute(proto, "scales", ()) or ())
    else:
        at = 1 if len(names) == 2 else 2
        scales = floats.get(names[at]) if len(names) > at and names[at] else None
    axes = _ints(proto, "axes", list(range(rank)))
    axes = [a + rank if a < 0 else a for a in axes]
    if not all(0 <= a < rank for a in axes):
        return None
    dims = list(x.dims)
    sizes = ins[3] if len(ins) > 3 else None
    if scales:  # an empty scales tensor means "use sizes"
        if len(scales) != len(axes):
            return None
        for axis, scale in zip(axes, scales, strict=True):
            if scale == 1.0:
                continue
            size = expr_of(dims[axis], expressions)
            found = None if size is None else scaled_dim(size, scale)
            dims[axis] = Dim.unknown() if found is None else expression_dim(found, expressions)
        return Shape(dims)
    policy = attribute(proto, "keep_aspect_ratio_policy", b"stretch")
    if sizes is None or len(sizes) != len(axes) or policy not in (b"stretch", "stretch"):
        return None
    for axis, value in zip(axes, sizes, strict=True):
        if isinstance(value, bool) or (type(value) is int and value < 0):
            return None
        dims[axis] = value if isinstance(value, Dim) else Dim(int(value))
    return Shape(dims)


def _space_depth(op: str, block: int, x: Shape, expressions: dict[str, Expr]) -> Shape | None:
    """DepthToSpace ``[N, C/b², H*b, W*b]`` and SpaceToDepth ``[N, C*b², H/b, W/b]``.

    The divisions are floor divisions here; `relations` says they must be exact.
    """
    if x.rank != 4 or block < 1:
        return None
    parts = [expr_of(d, expressions) for d in x.dims[1:]]
    if any(p is None for p in parts):
        return None
    c, h, w = (p for p in parts if p is not None)
    square = Expr("int", value=block * block)
    b = Expr("int", value=block)
    if op == "DepthToSpace":
        found = [floor_div(c, block * block), product([h, b]), product([w, b])]
    else:
        found = [product([c, square]), floor_div(h, block), floor_div(w, block)]
    return Shape((x.dims[0], *(expression_dim(e, expressions) for e in found)))


def _pad(
    proto: onnx.NodeProto, x: Shape, ins: Sequence[Value | None], expressions: dict[str, Expr]
) -> Shape | None:
    """Return Pad's output: each dim plus its two pads (negative pads cut).

    A pad is a constant or a dim computed from shapes (``(7 - h % 7) % 7``, as exporters
    pad to a multiple of a window). A mirrored pad (``reflect``, ``wrap``) must fit inside the
    dim, which the domain requires of constant pads only: computed ones leave it unsized.
    """
    rank = x.rank or 0
    pads = ins[1] if len(ins) > 1 else tuple(_ints(proto, "pads", []))
    axes: Sequence[int | Dim | bool] = ins[3] or () if len(ins) > 3 else ()
    axes = list(axes) or list(range(rank))
    if pads is None or not all(type(v) is int for v in axes):
        return None
    mode = attribute(proto, "mode", b"constant")
    plain = (mode.decode() if isinstance(mode, bytes) else str(mode)) in ("constant", "edge")
    if not plain and not all(type(v) is int for v in pads):
        return None
    if any(isinstance(v, bool) or (isinstance(v, Dim) and expr_of(v, expressions) is None)
           for v in pads):  # fmt: skip
        return None  # a bool, or a dim of no expression
    count = len(axes)
    if len(pads) != 2 * count:
        return None
    dims = list(x.dims)
    for i, axis in enumerate(axes):
        at = int(axis) + rank if int(axis) < 0 else int(axis)
        if not 0 <= at < rank:
            return None
        dims[at] = padded(dims[at], pads[i], pads[i + count], expressions) or Dim.unknown()
    return Shape(dims)


def _slice(
    proto: onnx.NodeProto, x: Shape, ins: Sequence[Value | None], expressions: dict[str, Expr]
) -> Shape | None:
    """Slice's output for constant starts, ends and steps (Slice-1: attributes).

    A static dim is cut as Python cuts it; a symbolic one gets `slice_length`'s ``Min``/
    ``Max`` expression; an end that is a dim (``x[:, :seq]``) is ``Min(size, seq)``.
    """
    rank = x.rank or 0
    if len(proto.input) == 1:
        starts: Value | None = tuple(_ints(proto, "starts", []))
        ends: Value | None = tuple(_ints(proto, "ends", []))
        axes: Value | None = tuple(_ints(proto, "axes", [])) or None
        steps: Value | None = None
    else:
        starts, ends = ins[1] if len(ins) > 1 else None, ins[2] if len(ins) > 2 else None
        axes = ins[3] if len(ins) > 3 else None
        steps = ins[4] if len(ins) > 4 else None
    if starts is None or ends is None:
        return None
    axes = axes if axes is not None else tuple(range(len(starts)))
    steps = steps if steps is not None else (1,) * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        return None
    dims = list(x.dims)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if type(axis) is not int or type(start) is not int or type(step) is not int:
            return None
        at = axis + rank if axis < 0 else axis
        if not 0 <= at < rank:
            return None
        dims[at] = cut_dim(dims[at], start, end, step, expressions)
    return Shape(dims)


def _split(
    proto: onnx.NodeProto, x: Shape, ins: Sequence[Value | None], expressions: dict[str, Expr]
) -> list[Shape | None] | None:
    """Return Split's outputs: constant sizes, ``num_outputs`` parts, or equal parts."""
    rank, count = x.rank or 0, len(proto.output)
    axis = int(attribute(proto, "axis", 0))
    at = axis + rank if axis < 0 else axis
    if not 0 <= at < rank or count == 0:
        return None
    sizes = ins[1] if len(ins) > 1 and proto.input[1] else tuple(_ints(proto, "split", []))
    dim = x.dims[at]
    if sizes:
        if len(sizes) != count or not all(type(s) is int and s >= 0 for s in sizes):
            return None
        parts = [Dim(int(s)) for s in sizes]
    else:
        size = expr_of(dim, expressions)
        if size is None:
            return None
        if attribute(proto, "num_outputs", None) is not None:
            each = up(size, count)  # ceil(H/n) each, the last one what is left
            last = plus(size, 0) if count == 1 else Expr("-", (size, product(
                [Expr("int", value=count - 1), each])))  # fmt: skip
            parts = [expression_dim(each, expressions)] * (count - 1)
            parts.append(expression_dim(last, expressions))
        else:  # equal parts: relations() requires the dim to divide
            parts = [expression_dim(floor_div(size, count), expressions)] * count
    return [Shape((*x.dims[:at], p, *x.dims[at + 1 :])) for p in parts]


def _tile(x: Shape, repeats: Value | None, expressions: dict[str, Expr]) -> Shape | None:
    """Tile's output: each dim times its constant repeat."""
    if repeats is None or len(repeats) != x.rank or not all(type(r) is int for r in repeats):
        return None
    dims = []
    for dim, times in zip(x.dims, repeats, strict=True):
        size = expr_of(dim, expressions)
        if size is None or type(times) is not int or times < 0:
            return None
        dims.append(expression_dim(product([Expr("int", value=times), size]), expressions))
    return Shape(dims)


def _range(ins: Sequence[Value | None], expressions: dict[str, Expr]) -> Shape | None:
    """Range's length for a constant start and a positive constant delta, a dim as limit."""
    start, limit, delta = ins
    if start is None or limit is None or delta is None:
        return None
    if not len(start) == len(limit) == len(delta) == 1:
        return None
    first, last, step = start[0], limit[0], delta[0]
    if type(first) is not int or type(step) is not int or not isinstance(last, Dim):
        return None
    size = expr_of(last, expressions)
    found = None if size is None else range_length(first, size, step)
    return None if found is None else Shape((expression_dim(found, expressions),))
