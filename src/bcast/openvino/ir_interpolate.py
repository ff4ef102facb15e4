"""OpenVINO's Interpolate on symbolic dims, as dim expressions (issue 37).

Interpolate-4 and -11 size each interpolated axis from ``sizes`` (an integer input: the
size, a dim where a shape computes it) or from ``scales`` (a float input: ``floor(size *
scale)``, `bcast.core.spatial.scaled_dim`); Interpolate-1 from its ``target_spatial_shape``
and its ``axes`` attribute. The float scales are read from the ``.bin`` beside the XML
(`with_scales`: the reader keeps integer constants only) and handed over as an attribute
of the layer. OpenVINO's own inference gives such a layer of a symbolic input an interval
(``1..``): an upsampled map then compares with its skip connection as nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from bcast.core.arithmetic import expr_of, expression_dim
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.core.spatial import scaled_dim
from bcast.models import Node

__all__ = ["SCALES", "bin_constant", "interpolate", "with_scales"]

SCALES: Final = "bcast:scales"
"""The attribute `with_scales` gives an Interpolate layer: its float scales, as text."""
_PORT: Final = "bcast:scales_port"
_FLOATS: Final = {"f32": np.float32, "f16": np.float16, "f64": np.float64}
_MOST: Final = 64  # values of a scales constant read

Value = tuple[Dim | int, ...]


def with_scales(
    nodes: Sequence[Node], data: Mapping[str, Mapping[str, str]], xml_path: str
) -> dict[str, Mapping[str, str]]:
    """Return ``data`` with each Interpolate's float scales (a Const's) as `SCALES`.

    A Const converted to f32 (``ov.save_model`` compresses floats to f16) is read too.

    ``data`` maps a layer's name to its ``<data>`` attributes; the Const's values are read
    from the ``.bin`` beside ``xml_path`` (nothing is added where that fails).
    """
    found = dict(data)
    producers = {o: n for n in nodes for o in n.outputs if o}
    for node in nodes:
        if node.op != "Interpolate":
            continue
        for port, name in enumerate(node.inputs[1:3], start=1):
            source = producers.get(name)
            if source is not None and source.op == "Convert" and source.inputs:
                source = producers.get(source.inputs[0])  # f16 weights (save_model's default)
            if source is None or source.op != "Const":
                continue
            values = _floats(data.get(source.name, {}), xml_path)
            if values is not None:
                text = ", ".join(repr(v) for v in values)
                found[node.name] = {**data.get(node.name, {}), SCALES: text, _PORT: str(port)}
    return found


def _floats(attrs: Mapping[str, str], xml_path: str) -> tuple[float, ...] | None:
    found = bin_constant(attrs, xml_path, _FLOATS, _MOST * 8)
    return None if found is None else tuple(float(v) for v in found)


def bin_constant(
    attrs: Mapping[str, str], xml_path: str, types: Mapping[str, Any], most: int
) -> npt.NDArray[Any] | None:
    """Read a Const layer's values (``attrs``: its ``<data>``) from the ``.bin`` beside the XML.

    ``types`` maps the element types read to NumPy's; None for another type, more than
    ``most`` bytes, or a file that does not hold them.
    """
    dtype = types.get(attrs.get("element_type", ""))
    try:
        offset, size = int(attrs.get("offset", "-1")), int(attrs.get("size", "-1"))
    except ValueError:
        return None
    if dtype is None or offset < 0 or not 0 < size <= most:
        return None
    try:
        with open(os.path.splitext(xml_path)[0] + ".bin", "rb") as handle:
            handle.seek(offset)
            raw = handle.read(size)
    except OSError:
        return None
    if len(raw) != size or size % np.dtype(dtype).itemsize:
        return None
    return np.frombuffer(raw, dtype=dtype)


def interpolate(
    node: Node,
    data: Mapping[str, str],
    x: Shape,
    ins: Sequence[Value | None],
    expressions: dict[str, Expr],
) -> Shape | None:
    """Return Interpolate's output shape, or None where its sizes or scales are not known.

    ``ins`` holds the small integer inputs' values (sizes, axes). Pads other than 0: None.

    >>> node = Node("up", "Interpolate", ("x", "s"), ("y",))
    >>> data = {"shape_calculation_mode": "scales", SCALES: "1.0, 1.0, 2.0, 2.0", _PORT: "1"}
    >>> found = {}
    >>> out = interpolate(node, data, Shape.parse("[N,8,h,w]"), [None, None], found)
    >>> str(out.dims[1]), str(found[out.dims[2].name])
    ('8', '2*h')
    """
    rank = x.rank or 0
    if any(v not in (None, "") and set(v.replace(",", " ").split()) - {"0"}
           for v in (data.get("pads_begin"), data.get("pads_end"))):  # fmt: skip
        return None
    mode = data.get("shape_calculation_mode")
    if mode is None:  # Interpolate-1: target_spatial_shape and the axes attribute
        axes_text = data.get("axes", "")
        try:
            axes: list[int] = [int(a) for a in axes_text.replace(" ", "").split(",") if a]
        except ValueError:
            return None
        return _sized(x, axes, ins[1] if len(ins) > 1 else None)
    scales_port = int(data.get(_PORT, "0") or 0)
    v4 = len(node.inputs) >= 3 and scales_port != 1  # data, sizes, scales[, axes]
    axes_at = 3 if v4 else 2
    given = ins[axes_at] if len(ins) > axes_at else None
    if len(node.inputs) > axes_at and node.inputs[axes_at] and given is None:
        return None  # axes computed in the graph
    axes = [int(a) + rank if int(a) < 0 else int(a) for a in given or range(rank)
            if type(a) is int]  # fmt: skip
    if mode == "sizes":
        return _sized(x, axes, ins[1] if len(ins) > 1 else None)
    text = data.get(SCALES)
    if mode != "scales" or text is None:
        return None
    scales = [float(s) for s in text.split(",")]
    if len(scales) == rank and len(axes) != rank:
        scales = [scales[a] for a in axes]  # given for every axis
    if len(scales) != len(axes) or not all(0 <= a < rank for a in axes):
        return None
    dims = list(x.dims)
    for axis, scale in zip(axes, scales, strict=True):
        size = expr_of(dims[axis], expressions)
        if scale == 1.0:
            continue
        found = None if size is None else scaled_dim(size, scale)
        dims[axis] = Dim.unknown() if found is None else expression_dim(found, expressions)
    return Shape(dims)


def _sized(x: Shape, axes: Sequence[int], sizes: Value | None) -> Shape | None:
    rank = x.rank or 0
    if sizes is None or len(sizes) != len(axes):
        return None
    dims = list(x.dims)
    for axis, size in zip(axes, sizes, strict=True):
        at = axis + rank if axis < 0 else axis
        if not 0 <= at < rank or isinstance(size, bool):
            return None
        dims[at] = size if isinstance(size, Dim) else Dim(int(size))
    return Shape(dims)
