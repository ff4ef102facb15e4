"""OpenVINO IR layers that resize, pad, cut and rearrange dims, as dim expressions (issue 37).

The IR counterparts of `bcast.onnx.spatial_shapes`: ConvolutionBackpropData and its grouped
form, pooling with ``rounding_type`` ``ceil`` and ``ceil_torch``, DepthToSpace, SpaceToDepth,
Pad, Split, VariadicSplit, Tile, Range and Interpolate (`bcast.openvino.ir_interpolate`),
from the OpenVINO opset specification and what
OpenVINO infers (the tests hold each against it). OpenVINO's own inference gives such a
layer of a symbolic input an interval (``1..``): the link to the input's dims is lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from bcast.core.arithmetic import expr_of, expression_dim, floor_div, plus, product
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.core.shape_values import padded
from bcast.core.spatial import ceil_window_dim, range_length, transposed_window_dim
from bcast.models import Node
from bcast.openvino.ir_interpolate import interpolate

__all__ = ["IR_SPATIAL", "ints", "ir_spatial"]

Value = tuple[Dim | int, ...]

IR_SPATIAL: Final = frozenset(
    {
        "ConvolutionBackpropData", "GroupConvolutionBackpropData", "MaxPool", "AvgPool",
        "DepthToSpace", "SpaceToDepth", "Pad", "Split", "VariadicSplit", "Tile", "Range",
        "Interpolate",
    }
)  # fmt: skip
"""The layers `ir_spatial` sizes (pooling only where it rounds up)."""


def ints(text: str | None, default: list[int] | None = None) -> list[int] | None:
    """Read an IR list attribute (``"2, 2"``); ``default`` where absent, None if malformed.

    >>> ints("2, 2"), ints(None, [1]), ints("2,x")
    ([2, 2], [1], None)
    """
    if text is None:
        return default
    try:
        return [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        return None


def ir_spatial(
    node: Node,
    data: Mapping[str, str],
    inputs: Sequence[Shape],
    tensors: Mapping[str, Value],
    expressions: dict[str, Expr],
) -> list[Shape | None] | None:
    """Return the output shapes of the IR layer ``node`` (one of `IR_SPATIAL`), or None.

    ``data`` is the layer's attributes as written, ``tensors`` the small integer tensors'
    values (dims where they come from shapes); new expressions go to ``expressions``.

    Examples
    --------
    >>> from bcast.models import Node
    >>> found = {}
    >>> node = Node("up", "ConvolutionBackpropData", ("x", "w"), ("y",))
    >>> attrs = {"strides": "2", "dilations": "1", "pads_begin": "0", "pads_end": "0"}
    >>> shapes = [Shape.parse("[N,8,h]"), Shape.parse("[8,4,2]")]
    >>> out = ir_spatial(node, attrs, shapes, {}, found)[0]
    >>> str(out.dims[1]), str(found[out.dims[2].name])
    ('4', '2*h')
    """
    op, x = node.op, inputs[0]
    ins = [tensors.get(name) if name else None for name in node.inputs]
    if x.rank is None:
        return None
    if op in ("ConvolutionBackpropData", "GroupConvolutionBackpropData"):
        return [_backprop(op, data, x, inputs, ins, expressions)]
    if op in ("MaxPool", "AvgPool"):
        rounding = data.get("rounding_type", "floor").lower()
        if rounding not in ("ceil", "ceil_torch"):
            return None  # the floor windows: bcast.openvino.ir_shapes
        found = _ceil_pool(data, x, rounding == "ceil_torch", expressions)
        return [found] * len(node.outputs)
    if op in ("DepthToSpace", "SpaceToDepth"):
        block = ints(data.get("block_size"), [0])
        return [_space_depth(op, block[0] if block else 0, x, expressions)]
    if op == "Pad" and len(ins) > 2:
        mirrored = data.get("pad_mode", "constant") in ("reflect", "symmetric")
        computed = any(not isinstance(v, int) for p in ins[1:3] for v in p or ())
        if mirrored and computed:  # the mirror's requirement is read off constant pads only
            return None
        return [_pad(x, ins[1], ins[2], expressions)]
    if op in ("Split", "VariadicSplit") and len(ins) > 1:
        return _split(op, data, x, ins, len(node.outputs), expressions)
    if op == "Tile" and len(ins) > 1:
        return [_tile(x, ins[1], expressions)]
    if op == "Range" and len(ins) == 3:
        return [_range(ins, expressions)]
    if op == "Interpolate":
        return [interpolate(node, data, x, ins, expressions)]
    return None


def _backprop(
    op: str,
    data: Mapping[str, str],
    x: Shape,
    inputs: Sequence[Shape],
    ins: Sequence[Value | None],
    expressions: dict[str, Expr],
) -> Shape | None:
    """ConvolutionBackpropData: ``stride*(H - 1) + span - pads_begin - pads_end + output_padding``.

    A constant ``output_shape`` input gives the spatial dims itself; ``same_upper`` and
    ``same_lower`` give ``H*stride``. The filter is ``[C_in, C_out, k...]`` (grouped:
    ``[G, C_in/G, C_out/G, k...]``).
    """
    spatial = (x.rank or 0) - 2
    w = inputs[1] if len(inputs) > 1 else Shape.dynamic()
    grouped = op.startswith("Group")
    if (
        spatial < 1
        or x.rank is None
        or w.rank != x.rank + grouped
        or any(not d.is_static for d in w.dims)
    ):
        return None
    kernel = [d.lo for d in w.dims[-spatial:]]
    out_channels = w.dims[0].lo * w.dims[2].lo if grouped else w.dims[1].lo
    strides = ints(data.get("strides"), [1] * spatial)
    dilations = ints(data.get("dilations"), [1] * spatial)
    begin = ints(data.get("pads_begin"), [0] * spatial)
    end = ints(data.get("pads_end"), [0] * spatial)
    extra = ints(data.get("output_padding"), [0] * spatial)
    auto_pad = data.get("auto_pad", "explicit").lower()
    lists = (strides, dilations, begin, end, extra)
    if any(v is None or len(v) != spatial for v in lists):
        return None
    out: list[Dim] = [x.dims[0], Dim(out_channels)]
    given = ins[2] if len(ins) > 2 else None
    if given is not None:
        if len(given) != spatial:
            return None
        out += [v if isinstance(v, Dim) else Dim(v) for v in given]
        return Shape(out)
    assert strides and dilations and begin is not None and end is not None and extra is not None
    for i, dim in enumerate(x.dims[2:]):
        size = expr_of(dim, expressions)
        if size is None:
            out.append(Dim.unknown())
            continue
        if auto_pad.startswith("same"):
            found: Expr | None = product([Expr("int", value=strides[i]), size])
        else:
            pads = 0 if auto_pad == "valid" else begin[i] + end[i]
            found = transposed_window_dim(size, kernel[i], strides[i], dilations[i], pads, extra[i])
        out.append(Dim.unknown() if found is None else expression_dim(found, expressions))
    return Shape(out)


def _ceil_pool(
    data: Mapping[str, str], x: Shape, torch: bool, expressions: dict[str, Expr]
) -> Shape | None:
    """Size MaxPool/AvgPool windows that round up (``rounding_type`` ceil or ceil_torch).

    ``ceil`` is the formula alone; ``ceil_torch`` also has the last window start inside
    the padded input (OpenVINO infers both so). Either way OpenVINO refuses a dilated window
    larger than the padded input, where rounding up would still make one window.
    """
    spatial = (x.rank or 0) - 2
    kernel = ints(data.get("kernel"), [])
    strides = ints(data.get("strides"), [1] * spatial)
    dilations = ints(data.get("dilations"), [1] * spatial)
    begin = ints(data.get("pads_begin"), [0] * spatial)
    end = ints(data.get("pads_end"), [0] * spatial)
    if data.get("auto_pad", "explicit").lower() not in ("explicit", "notset"):
        return None
    lists = (kernel, strides, dilations, begin, end)
    if spatial < 1 or any(v is None or len(v) != spatial for v in lists):
        return None
    assert kernel and strides and dilations and begin is not None and end is not None
    out = list(x.dims[:2])
    for i, dim in enumerate(x.dims[2:]):
        size = expr_of(dim, expressions)
        found = None if size is None else ceil_window_dim(
            size, kernel[i], strides[i], dilations[i], begin[i], end[i], last_inside=torch,
            window_fits=True,
        )  # fmt: skip
        out.append(Dim.unknown() if found is None else expression_dim(found, expressions))
    return Shape(out)


def _space_depth(op: str, block: int, x: Shape, expressions: dict[str, Expr]) -> Shape | None:
    """DepthToSpace ``[N, C/b^k, D*b...]``, SpaceToDepth ``[N, C*b^k, D/b...]`` (k spatial)."""
    spatial = (x.rank or 0) - 2
    parts = [expr_of(d, expressions) for d in x.dims[1:]]
    if spatial < 1 or block < 1 or any(p is None for p in parts):
        return None
    c, *rest = (p for p in parts if p is not None)
    scale = block**spatial
    b = Expr("int", value=block)
    if op == "DepthToSpace":
        found = [floor_div(c, scale), *(product([d, b]) for d in rest)]
    else:
        found = [product([Expr("int", value=scale), c]), *(floor_div(d, block) for d in rest)]
    return Shape((x.dims[0], *(expression_dim(e, expressions) for e in found)))


def _pad(
    x: Shape, begin: Value | None, end: Value | None, expressions: dict[str, Expr]
) -> Shape | None:
    """Pad: each dim plus its ``pads_begin`` and ``pads_end`` (negative ones cut).

    A pad is a constant or a dim computed from the shape (never negative: padding to a
    multiple of a window), as ONNX's (`bcast.onnx.spatial_shapes`).
    """
    if begin is None or end is None or not len(begin) == len(end) == x.rank:
        return None
    dims = [padded(dim, a, b, expressions) for dim, a, b in zip(x.dims, begin, end, strict=True)]
    return None if None in dims else Shape(d for d in dims if d is not None)


def _split(
    op: str,
    data: Mapping[str, str],
    x: Shape,
    ins: Sequence[Value | None],
    count: int,
    expressions: dict[str, Expr],
) -> list[Shape | None] | None:
    """Split into ``num_splits`` equal parts; VariadicSplit by its lengths (``-1``: the rest)."""
    axis = ins[1]
    rank = x.rank or 0
    if axis is None or len(axis) != 1 or type(axis[0]) is not int or count == 0:
        return None
    at = axis[0] + rank if axis[0] < 0 else axis[0]
    if not 0 <= at < rank:
        return None
    size = expr_of(x.dims[at], expressions)
    if size is None:
        return None
    if op == "Split":
        parts = [expression_dim(floor_div(size, count), expressions)] * count
    else:
        lengths = ins[2] if len(ins) > 2 else None
        if lengths is None or len(lengths) != count or not all(type(v) is int for v in lengths):
            return None
        known = sum(int(v) for v in lengths if type(v) is int and v >= 0)
        rest = expression_dim(plus(size, -known), expressions)
        parts = [rest if v == -1 else Dim(int(v)) for v in lengths]
    return [Shape((*x.dims[:at], p, *x.dims[at + 1 :])) for p in parts]


def _tile(x: Shape, repeats: Value | None, expressions: dict[str, Expr]) -> Shape | None:
    """Tile: the repeats right-aligned with the dims (the shorter one padded with 1s)."""
    if repeats is None or not all(type(r) is int and r >= 0 for r in repeats):
        return None
    rank = max(len(repeats), x.rank or 0)
    dims = (Dim(1),) * (rank - (x.rank or 0)) + x.dims
    times = (1,) * (rank - len(repeats)) + tuple(int(r) for r in repeats)
    out = []
    for dim, r in zip(dims, times, strict=True):
        size = expr_of(dim, expressions)
        if size is None:
            return None
        out.append(expression_dim(product([Expr("int", value=r), size]), expressions))
    return Shape(out)


def _range(ins: Sequence[Value | None], expressions: dict[str, Expr]) -> Shape | None:
    """Size Range-4 of a constant start and step whose stop is a dim (`range_length`)."""
    start, stop, step = ins
    if start is None or stop is None or step is None:
        return None
    if not len(start) == len(stop) == len(step) == 1:
        return None
    first, last, delta = start[0], stop[0], step[0]
    if type(first) is not int or type(delta) is not int or not isinstance(last, Dim):
        return None
    size = expr_of(last, expressions)
    found = None if size is None else range_length(first, size, delta)
    return None if found is None else Shape((expression_dim(found, expressions),))
