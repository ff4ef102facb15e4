"""Quantization as broadcasting, and the other per-axis parameters: scales, zero points, biases.

A quantization scale is an axis-aligned broadcast, as PDPD's: per tensor (one element), per
axis (a 1-D scale as long as ``x.shape[axis]``) or, from ONNX opset 21, per block (``x``'s
shape with ``x.shape[axis]`` ceil-divided by ``block_size``). ONNX's shape inference checks
none of it; onnxruntime refuses the node when it runs. The rules, each from the operator's
definition:

- ``QuantizeLinear`` / ``DequantizeLinear``: the scale per tensor, per axis or per block; the
  zero point of the scale's shape.
- ``QLinearConv``: ``x_scale`` and ``y_scale`` of one element; ``w_scale`` and ``w_zero_point``
  per output channel (``M`` elements, or one); the bias of ``M`` elements.
- ``QLinearMatMul``: ``a_scale`` per tensor or per row of ``a``, ``b_scale`` per tensor or
  per column of ``b``; ``y_scale`` of one element.
- ``Conv`` / ``ConvTranspose``: X has the channels W is made for (``group * W.shape[1]``,
  ``W.shape[0]`` for ConvTranspose); the bias has one element per output channel (``M``, or
  ``group * W.shape[1]`` for ConvTranspose).
- ``InstanceNormalization``, ``BatchNormalization``: the scale, the bias (and the running
  mean and variance) one element per channel of X; ``GroupNormalization``'s per group
  (opset 18) or per channel (21).
- ``GridSample``: the grid has X's batch and one coordinate per spatial axis.
- OpenVINO ``FakeQuantize``: ``input_low``... broadcast onto ``X`` by its ``auto_broadcast``.

Examples
--------
>>> from bcast import Shape
>>> from bcast.models.graph import Node
>>> node = Node("dq", "DequantizeLinear", ("x", "s"), ("y",), attrs=(("axis", 1),))
>>> outcome = QUANT_RULES["DequantizeLinear"](node, [Shape((1, 16, 8)), Shape((15,))])
>>> [str(s) for _, s in outcome.constraints[0].operands]
['[16]', '[15]']
"""

from __future__ import annotations

from typing import Final

from bcast.core.dim import Dim
from bcast.core.modes import Mode
from bcast.core.shape import Shape
from bcast.models.graph import Node
from bcast.models.rules_base import (
    Constraint,
    Operands,
    Outcome,
    RuleFunction,
    at,
    attr,
    ceil_div,
    dims_of,
    equal,
    last,
    one_way,
    times,
)

__all__ = ["MICROSOFT_QUANT_RULES", "QUANT_RULES", "one_element"]


def _given(node: Node, index: int) -> bool:
    return index < len(node.inputs) and bool(node.inputs[index])


def one_element(shape: Shape) -> bool | None:
    """Tell whether ``shape`` holds exactly one element (None: not known).

    >>> one_element(Shape(())), one_element(Shape((1,))), one_element(Shape((3,)))
    (True, True, False)
    """
    if shape.rank is None:
        return None
    if all(d.is_static for d in shape.dims):
        return all(d.lo == 1 for d in shape.dims)
    return False if any(d.lo is not None and d.lo > 1 for d in shape.dims) else None


def _scalar_errors(node: Node, shapes: Operands, roles: dict[int, str]) -> list[tuple[None, str]]:
    """Say which of the inputs ``roles`` names do not hold one element."""
    errors = []
    for index, role in roles.items():
        if _given(node, index):
            shape = at(shapes, index)
            if one_element(shape) is False:
                errors.append(
                    (None, f"{node.op} {role} {shape} must hold one element (per tensor)")
                )
    return errors


def _linear(node: Node, shapes: Operands) -> Outcome:
    """QuantizeLinear / DequantizeLinear: the scale per tensor, per axis or per block."""
    x, scale, zero = at(shapes, 0), at(shapes, 1), at(shapes, 2)
    if x.rank is None or scale.rank is None:
        return Outcome()
    constraints: list[Constraint] = []
    errors: list[tuple[int | None, str]] = []
    block = attr(node, "block_size", 0)
    axis = attr(node, "axis", 1)
    axis = axis + x.rank if axis < 0 else axis
    per_tensor = one_element(scale) is True and block <= 0
    if not per_tensor and not 0 <= axis < max(x.rank, 1):
        errors.append((None, f"{node.op} axis {attr(node, 'axis', 1)} is outside x {x}"))
    elif block > 0:
        expected = Shape(ceil_div(d, block) if i == axis else d for i, d in enumerate(x.dims))
        context = (
            f"{node.op} with block_size={block} needs a scale of x's shape {x} with axis "
            f"{axis} ceil-divided by {block} ({expected}); onnxruntime refuses the node: "
        )
        constraints.append(equal("blocks", expected, "scale", scale, context))
    elif not per_tensor and scale.rank == 1:
        context = (
            f"{node.op} per axis: the scale {scale} needs one element per x.shape[{axis}] "
            f"({x.dims[axis]}) of x {x}; onnxruntime refuses the node: "
        )
        constraints.append(equal(f"x[{axis}]", dims_of(x.dims[axis]), "scale", scale, context))
    elif not per_tensor and scale.rank is not None and scale.rank > 1:
        errors.append(
            (None, f"{node.op} scale {scale} is neither one element nor 1-D per axis "
             "(a scale of x's rank needs block_size > 0, opset 21)")
        )  # fmt: skip
    if _given(node, 2) and zero.rank is not None:
        context = f"{node.op} zero point {zero} must have the scale's shape {scale}: "
        constraints.append(equal("scale", scale, "zero_point", zero, context))
    return Outcome(tuple(constraints), x, errors=tuple(errors))


def _qlinear_conv(node: Node, shapes: Operands) -> Outcome:
    """QLinearConv: w_scale and w_zero_point per output channel, the bias of M elements."""
    w = at(shapes, 3)
    errors = _scalar_errors(node, shapes, {1: "x_scale", 2: "x_zero_point", 6: "y_scale"})
    if w.rank is None or w.rank < 1:
        return Outcome(errors=tuple(errors))
    channels = dims_of(w.dims[0])
    constraints = []
    for index, role in ((4, "w_scale"), (5, "w_zero_point")):
        shape = at(shapes, index)
        if _given(node, index) and shape.rank is not None:
            context = (
                f"QLinearConv {role} {shape} must hold one element or one per output channel "
                f"(M = {w.dims[0]}); onnxruntime refuses the node: "
            )
            constraints.append(one_way("M", channels, role, shape, context))
    bias = at(shapes, 8)
    if _given(node, 8) and bias.rank is not None:
        context = f"QLinearConv bias {bias} needs one element per output channel (M): "
        constraints.append(equal("M", channels, "B", bias, context))
    return Outcome(tuple(constraints), errors=tuple(errors))


def _qlinear_matmul(node: Node, shapes: Operands) -> Outcome:
    """QLinearMatMul: a_scale per tensor or per row of a, b_scale per column of b."""
    a, b = at(shapes, 0), at(shapes, 3)
    errors = _scalar_errors(node, shapes, {6: "y_scale"})
    constraints = []
    for index, role, dim, what in (
        (1, "a_scale", last(a, 2), "row of a"),
        (2, "a_zero_point", last(a, 2), "row of a"),
        (4, "b_scale", last(b), "column of b"),
        (5, "b_zero_point", last(b), "column of b"),
    ):
        shape = at(shapes, index)
        if dim is None or shape.rank is None or not _given(node, index):
            continue
        context = (
            f"QLinearMatMul {role} {shape} must hold one element or one per {what} ({dim}); "
            "onnxruntime refuses the node: "
        )
        constraints.append(one_way(what, dims_of(dim), role, shape, context))
    inner_a, inner_b = last(a), last(b, 2)
    if inner_a is not None and inner_b is not None:
        context = "QLinearMatMul: a's last dim and b's second to last must be equal: "
        constraints.append(equal("a[-1]", dims_of(inner_a), "b[-2]", dims_of(inner_b), context))
    return Outcome(tuple(constraints), errors=tuple(errors))


def _conv(node: Node, shapes: Operands) -> Outcome:
    """Conv / ConvTranspose: X's channels as W says, and one bias element per output channel.

    Conv's W is ``[M, C/group, ...]``: X holds ``group * W.shape[1]`` channels; ConvTranspose's
    W is ``[C, M/group, ...]``: X holds ``W.shape[0]``. ONNX's inference leaves a symbolic C
    unchecked; onnxruntime refuses another count.
    """
    x, w, bias = at(shapes, 0), at(shapes, 1), at(shapes, 2)
    if w.rank is None or w.rank < 2:
        return Outcome()
    group = attr(node, "group", 1)
    constraints = []
    if x.rank is not None and x.rank >= 2:
        if node.op == "ConvTranspose":
            needed, told = w.dims[0], f"W.shape[0] = {w.dims[0]}"
        else:
            needed, told = times(group, w.dims[1]), f"group * W.shape[1] = {group} * {w.dims[1]}"
        context = f"{node.op} X needs the channels W is made for ({told}): "
        constraints.append(equal("C", dims_of(x.dims[1]), "W", dims_of(needed), context))
    if _given(node, 2) and bias.rank is not None:
        if node.op == "ConvTranspose":
            per = w.dims[1]
            channels = (
                Dim(per.lo * group) if per.is_static and per.lo is not None else Dim.unknown()
            )
            said = f"group * W.shape[1] = {group} * {per}"
        else:
            channels, said = w.dims[0], f"W.shape[0] = {w.dims[0]}"
        context = (
            f"{node.op} bias {bias} needs one element per output channel ({said}); ONNX shape "
            "inference does not check it, onnxruntime refuses the node: "
        )
        constraints.append(equal("M", dims_of(channels), "B", bias, context))
    return Outcome(tuple(constraints))


def _grid_sample(node: Node, shapes: Operands) -> Outcome:
    """GridSample: the grid has X's batch (N) and one coordinate per spatial axis of X."""
    x, grid = at(shapes, 0), at(shapes, 1)
    if x.rank is None or grid.rank is None or x.rank < 3 or grid.rank != x.rank:
        return Outcome()
    context = f"{node.op} grid needs X's batch and one coordinate per spatial axis: "
    batch = equal("N", dims_of(x.dims[0]), "grid N", dims_of(grid.dims[0]), context)
    spatial, last = dims_of(x.rank - 2), dims_of(grid.dims[-1])
    axes = equal("X's spatial rank", spatial, "grid's last", last, context)
    output = Shape((x.dims[0], x.dims[1], *grid.dims[1:-1]))  # [N, C, H_out, W_out]
    return Outcome((batch, axes), output=output)


_PER_CHANNEL: Final = {
    "InstanceNormalization": ("scale", "B"),
    "BatchNormalization": ("scale", "B", "input_mean", "input_var"),
    "GroupNormalization": ("scale", "bias"),
}


def _per_channel(node: Node, shapes: Operands) -> Outcome:
    """Require each normalization parameter to hold one element per channel of X.

    GroupNormalization-18's scale and bias are per group (``num_groups`` elements); from
    opset 21 per channel. The output is X's shape (ONNX's inference leaves a
    GroupNormalization's unknown).
    """
    x = at(shapes, 0)
    if x.rank is None or x.rank < 2:
        return Outcome()
    labels = _PER_CHANNEL[node.op]
    per, expected = "C", x.dims[1]
    if node.op == "GroupNormalization" and attr(node, "since", 21) < 21:
        per, expected = "num_groups", Dim(attr(node, "num_groups", 0))
    context = f"{node.op} needs one {', '.join(labels)} element per {per}: "
    constraints = tuple(
        equal(per, dims_of(expected), label, at(shapes, i), context)
        for i, label in enumerate(labels, start=1)
        if _given(node, i) and at(shapes, i).rank is not None
    )
    return Outcome(constraints, output=x)


def _fake_quantize(node: Node, shapes: Operands) -> Outcome:
    """OpenVINO FakeQuantize: the four limits broadcast onto X by ``auto_broadcast``."""
    named = ("X", "input_low", "input_high", "output_low", "output_high")
    operands = tuple(
        ((node.inputs[i] if _given(node, i) else "") or named[i], at(shapes, i)) for i in range(5)
    )
    mode = node.mode or Mode.NUMPY
    context = f"FakeQuantize limits broadcast onto X ({mode.value}): "
    if mode is Mode.PDPD:
        constraints = tuple(
            Constraint(
                (operands[0], operand), Mode.PDPD, context, roles=("X", named[i]), axis=node.axis
            )
            for i, operand in enumerate(operands[1:], start=1)
        )
        return Outcome(constraints)
    return Outcome((Constraint(operands, mode, context),))


def _qgemm(node: Node, shapes: Operands) -> Outcome:
    """QGemm (com.microsoft): Gemm's (M, N) with b_scale per column and C one way to it."""
    a, b = at(shapes, 0), at(shapes, 3)
    if a.rank != 2 or b.rank != 2:
        return Outcome()
    m, k_a = (a.dims[1], a.dims[0]) if attr(node, "transA", 0) else (a.dims[0], a.dims[1])
    k_b, n = (b.dims[1], b.dims[0]) if attr(node, "transB", 0) else (b.dims[0], b.dims[1])
    context = f"QGemm: A {a} and B {b} must agree on K; onnxruntime refuses the node: "
    constraints = [equal("A's K", dims_of(k_a), "B's K", dims_of(k_b), context)]
    for index, role in ((4, "b_scale"), (5, "b_zero_point")):
        shape = at(shapes, index)
        if _given(node, index) and shape.rank is not None:
            context = (
                f"QGemm {role} {shape} must hold one element or one per column of B (N = {n}); "
                "onnxruntime refuses the node: "
            )
            constraints.append(one_way("N", dims_of(n), role, shape, context))
    c = at(shapes, 6)
    if _given(node, 6) and c.rank is not None:
        context = f"QGemm C {c} must broadcast unidirectionally to (M, N): "
        constraints.append(one_way("(M,N)", Shape((m, n)), "C", c, context))
    errors = _scalar_errors(node, shapes, {1: "a_scale", 2: "a_zero_point", 7: "y_scale"})
    return Outcome(tuple(constraints), Shape((m, n)), errors=tuple(errors))


def _qlinear_pool(node: Node, shapes: Operands) -> Outcome:
    """QLinearGlobalAveragePool (com.microsoft): one value per channel, NCHW or NHWC."""
    x = at(shapes, 0)
    if x.rank is None or x.rank < 3:
        return Outcome()
    ones = [Dim(1)] * (x.rank - 2)
    last = attr(node, "channels_last", 0)
    out = Shape((x.dims[0], *ones, x.dims[-1])) if last else Shape((*x.dims[:2], *ones))
    errors = _scalar_errors(node, shapes, {1: "x_scale", 3: "y_scale"})
    return Outcome((), out, errors=tuple(errors))


def _same_shape(node: Node, shapes: Operands) -> Outcome:
    """QLinearSigmoid, QLinearLeakyRelu (com.microsoft): element-wise, scales of one element."""
    x = at(shapes, 0)
    errors = _scalar_errors(node, shapes, {1: "X_scale", 3: "Y_scale"})
    return Outcome((), x if x.rank is not None else None, errors=tuple(errors))


MICROSOFT_QUANT_RULES: Final[dict[str, RuleFunction]] = {
    "QGemm": _qgemm,
    "QLinearGlobalAveragePool": _qlinear_pool,
    "QLinearLeakyRelu": _same_shape,
    "QLinearSigmoid": _same_shape,
}
"""The ``com.microsoft`` operators of onnxruntime's quantizer (QOperator format) of this family."""

QUANT_RULES: Final[dict[str, RuleFunction]] = {
    "QuantizeLinear": _linear,
    "DequantizeLinear": _linear,
    "QLinearConv": _qlinear_conv,
    "QLinearMatMul": _qlinear_matmul,
    "Conv": _conv,
    "ConvTranspose": _conv,
    "InstanceNormalization": _per_channel,
    "BatchNormalization": _per_channel,
    "GroupNormalization": _per_channel,
    "GridSample": _grid_sample,
    "FakeQuantize": _fake_quantize,  # OpenVINO IR
}
"""The ONNX (default domain) and OpenVINO operators of this family, by op type."""
