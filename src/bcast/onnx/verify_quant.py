"""Concrete shapes of QuantizeLinear and DequantizeLinear nodes for ``bcast verify``.

Their scale and zero point broadcast along ``axis`` (per axis) or in blocks, which no
element-wise alignment expresses, so `bcast.onnx.verify` asks here: ``x`` takes concrete
dims (an unknown dim on the quantization axis takes the scale's length, or the blocks'
total length), the scale and the zero point keep the shapes they have (an initializer's, or
a static declared shape). bcast's side then runs `bcast.ops.quantize_linear` /
`dequantize_linear` through `bcast.onnx.backend`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy.typing as npt
import onnx

from bcast.core.dim import Dim
from bcast.core.shape import Shape
from bcast.models.graph import Node
from bcast.models.inputs import concrete_shapes
from bcast.models.rules_base import attr

__all__ = ["QUANT_OPS", "concrete_quant"]

QUANT_OPS: Final = frozenset({"QuantizeLinear", "DequantizeLinear"})
"""The quantizers `verify` runs although `check` models them by an operator rule."""


def concrete_quant(
    node: Node,
    operands: Sequence[Shape | None],
    constants: Mapping[str, onnx.TensorProto],
) -> tuple[list[tuple[int, ...]], int, dict[int, npt.NDArray[Any]]] | str:
    """Return concrete input shapes, the output's elements and no fixed inputs; or why not.

    ``constants`` are the model's initializers and constants by name (their dims are read,
    not their data).

    Examples
    --------
    >>> node = Node("q", "QuantizeLinear", ("x", "s"), ("y",), attrs=(("axis", 1),))
    >>> scale = onnx.helper.make_tensor("s", onnx.TensorProto.FLOAT, [3], [1.0, 2.0, 4.0])
    >>> concrete_quant(node, [Shape.parse("[N,?,4]"), None], {"s": scale})
    ([(2, 3, 4), (3,)], 24, {})
    """
    x = operands[0]
    if x is None or x.rank is None:
        return "no rank is known for the input x"
    side: list[tuple[int, ...]] = []
    for name, shape in zip(node.inputs[1:], operands[1:], strict=False):
        if not name:
            side.append(())  # an optional input left out: fed nothing, planned as a scalar
            continue
        proto = constants.get(name)
        dims = None if proto is None else tuple(max(int(d), 0) for d in proto.dims)
        if dims is None and shape is not None and shape.is_static:
            dims = shape.to_tuple()
        if dims is None:
            return f"the shape of {name!r:.80} is not known: verify needs a static scale"
        side.append(dims)
    rank = x.rank
    axis = attr(node, "axis", 1)
    block = attr(node, "block_size", 0)
    given = list(x.dims)
    if side and -rank <= axis < rank and math.prod(side[0]) > 1:
        axis %= rank
        scale = side[0]
        if not given[axis].is_static:
            length = scale[0] if len(scale) == 1 and not block else scale[axis] * max(block, 1)
            given[axis] = Dim(length)
        if block and len(scale) == rank:
            given = [d if d.is_static or k == axis else Dim(scale[k]) for k, d in enumerate(given)]
    concrete = concrete_shapes([Shape(given)], [tuple(range(rank))], {})[0]
    return [concrete, *side], math.prod(concrete), {}
