"""The checks of one broadcasting node, for `bcast.check` (one function per rule).

Each check applies bcast's rules (`bcast.plan`) to the node's operands and records `Finding`
objects: a definite failure (with the aligned picture), the conditions under which symbols
and intervals fail, unidirectional violations, oversized outputs and OpenVINO pitfalls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Final

from bcast.core.conditions import is_open, readable, shown, shown_shape, symbols_at
from bcast.core.errors import BroadcastError, show_bytes
from bcast.core.modes import Mode
from bcast.core.picture import format_alignment
from bcast.core.planning import plan
from bcast.core.shape import Shape
from bcast.models.channel_checks import check_prelu_channel
from bcast.models.condition_sets import decided_conditions
from bcast.models.domain import PlanRecord, Record
from bcast.models.graph import Finding, Graph, Node, Rule, Severity
from bcast.models.operator_checks import check_operator
from bcast.models.pictures import error_picture, operand_label, upper_size

__all__ = ["check_node"]


# Plans known to carry no condition (a large model repeats its layers); without expressions.
_UNCONDITIONAL: set[tuple[object, ...]] = set()


@dataclass(slots=True)
class _Context:
    node: Node
    graph: Graph
    values: dict[str, Shape]
    max_elements: int
    targets: Mapping[str, Shape]
    findings: list[Finding] = field(default_factory=list)
    quiet: bool = False  # shapes only: no findings, no conditions, no pictures
    collect: list[Record] | None = None  # for the domain (issue 17)

    def shape(self, index: int) -> Shape:
        names = self.node.inputs
        if index >= len(names) or not names[index]:
            return Shape.dynamic()
        return self.values.get(names[index], Shape.dynamic())

    def operand(self, index: int) -> tuple[str, Shape]:
        names = self.node.inputs
        return (names[index] if index < len(names) else "", self.shape(index))

    def add(
        self,
        severity: Severity,
        kind: str,
        operands: Sequence[tuple[str, Shape]],
        mode: Mode | str | None,
        axis: int | None,
        reason: str,
        picture: Sequence[str] = (),
    ) -> None:
        if self.quiet:
            return
        self.findings.append(
            Finding(
                severity,
                kind,
                self.node.name,
                self.node.op,
                tuple((n, shown_shape(s, self.graph.expressions)) for n, s in operands),
                None if mode is None else str(mode),
                axis,
                readable(reason, self.graph.expressions),  # Min(64, s41), not Min_64__s41_
                tuple(picture),
            )
        )


def check_node(
    node: Node,
    graph: Graph,
    values: dict[str, Shape],
    max_elements: int,
    *,
    targets: Mapping[str, Shape] | None = None,
    quiet: bool = False,
    collect: list[Record] | None = None,
) -> tuple[Shape | None, list[Finding]]:
    """Check one broadcasting node; return its output shape (None: not decided) and findings.

    ``values`` holds the shapes propagated so far; the node's inputs are read from it.
    ``targets`` holds the values of shape tensors computed in the graph (symbols bound),
    for Expand targets that are not constants; it defaults to ``graph.shape_values``.
    ``quiet`` computes the output shape only (no findings): shape propagation's mode.
    ``collect`` receives each reported broadcast's plan and conditions (`bcast.models.domain`).
    """
    shape_values = graph.shape_values if targets is None else targets
    ctx = _Context(node, graph, values, max_elements, shape_values, quiet=quiet, collect=collect)
    check = _CHECKS.get(node.rule)  # one function per rule
    return (None if check is None else check(ctx)), ctx.findings


def _check_multidirectional(ctx: _Context) -> Shape | None:
    # mode none: Max/Min/Sum/Mean before opset 8 and SwiGLU need identical shapes.
    operands = [ctx.operand(i) for i, name in enumerate(ctx.node.inputs) if name]
    out = _apply(ctx, operands, ctx.node.mode or Mode.NUMPY)
    _size_note(ctx, out, operands, materializing=False)
    return out


def _apply(
    ctx: _Context,
    operands: Sequence[tuple[str, Shape]],
    mode: Mode,
    *,
    axis: int = -1,
    axes_mapping: tuple[int, ...] | None = None,
    kind: str = "incompatible",
    context: str = "",
    severity: Severity = Severity.ERROR,
    report: bool = True,
    roles: tuple[str, str] | None = None,
) -> Shape | None:
    """Run one rule on ``operands``; report a failure or the conditions of success.

    ``roles`` names the operands in the rule's message (``X`` and ``slope`` for PRelu, not
    the rule's ``A`` and ``B``), so that the reason speaks the operator's words.
    """
    shapes = [shape for _, shape in operands]
    if ctx.quiet:
        try:
            return plan(*shapes, mode=mode, axis=axis, axes_mapping=axes_mapping).output
        except BroadcastError:
            return None
    names = [operand_label(name, i) for i, (name, _) in enumerate(operands)]
    try:
        p = plan(*shapes, mode=mode, axis=axis, axes_mapping=axes_mapping, labels=roles)
    except BroadcastError as err:
        if report and ctx.collect is not None:
            ctx.collect.append(
                PlanRecord(ctx.node.name, ctx.node.op, None, error=err.reason, axis=err.axis)
            )
        if report:
            ctx.add(
                severity,
                kind,
                operands,
                mode,
                err.axis,
                context + err.reason,
                error_picture(err, names, shapes, ctx.graph.expressions),
            )
        return None
    if not report:
        return p.output
    rank, exprs = p.output.rank, ctx.graph.expressions
    key = (p.mode, p.shapes, p.alignment)
    if key in _UNCONDITIONAL and not exprs:
        conditions = []  # a plan seen before (a model repeats its layers), with none
    else:
        conditions = decided_conditions(p, names, exprs)
        if not conditions and len(_UNCONDITIONAL) < 65536:
            _UNCONDITIONAL.add(key)
    if ctx.collect is not None:
        ctx.collect.append(PlanRecord(ctx.node.name, ctx.node.op, p, tuple(conditions)))
    for found in conditions:
        out_axis, drawn = found.axis, [shown(s, exprs) for s in (*p.shapes, p.output)]
        picture = format_alignment(
            drawn[:-1], p.alignment, rank or 0, labels=names, result=drawn[-1], mark_axis=out_axis
        )
        # Info: only names the reader invented, or decided value by value and never failing.
        named = symbols_at(p, out_axis)
        invented = bool(named) and named <= ctx.graph.invented_dims
        quiet = found.failing == () or invented
        severity = Severity.INFO if quiet else Severity.WARNING
        ctx.add(severity, "conditional", operands, mode, out_axis, context + found.text, picture)
    return p.output


def _check_elementwise(ctx: _Context) -> Shape | None:
    node = ctx.node
    mode = node.mode or Mode.NUMPY
    operands = [ctx.operand(0), ctx.operand(1)]
    context = ""
    if ctx.graph.format == "onnx":  # an ONNX operator of opset 1 or 6 (the `broadcast` attribute)
        where = f"from axis {node.axis}" if node.axis >= 0 else "at its end (suffix matching)"
        context = (
            f"ONNX {node.op} before opset 7 with broadcast=1 places B in A {where}: "
            if mode is Mode.PDPD
            else f"ONNX {node.op} before opset 7 without broadcast=1 needs identical shapes: "
        )
    if mode is Mode.PDPD:
        _pdpd_axis_note(ctx, operands)
    out = _apply(ctx, operands, mode, axis=node.axis, context=context)
    if out is not None and mode is Mode.PDPD:
        _trailing_ones_note(ctx, operands, node.axis)
        _one_against_zero_note(ctx, operands, node.axis)
    _size_note(ctx, out, operands, materializing=False)
    return out


def _check_select(ctx: _Context) -> Shape | None:
    node = ctx.node
    mode = node.mode or Mode.NUMPY
    cond, then, other = ctx.operand(0), ctx.operand(1), ctx.operand(2)
    if mode is not Mode.PDPD:
        out = _apply(ctx, [cond, then, other], mode)
    else:
        # OpenVINO Select pdpd: 'else' goes into 'then', then 'cond' into the result.
        _pdpd_axis_note(ctx, [then, other])
        partial = _apply(ctx, [then, other], mode, axis=node.axis)
        out = None
        if partial is not None:
            out = _apply(ctx, [(node.outputs[0], partial), cond], mode, axis=node.axis)
    _size_note(ctx, out, [cond, then, other], materializing=False)
    return out


def _check_gemm(ctx: _Context) -> Shape | None:
    node = ctx.node
    a, b = ctx.shape(0), ctx.shape(1)
    if a.rank != 2 or b.rank != 2:
        return None
    m = a.dims[1] if node.trans_a else a.dims[0]
    n = b.dims[0] if node.trans_b else b.dims[1]
    y = Shape((m, n))
    if len(node.inputs) > 2 and node.inputs[2]:
        c = ctx.operand(2)
        if node.mode is Mode.NONE:  # Gemm-1/-6 with broadcast=0: C is exactly (M, N)
            kind, mode = "incompatible", Mode.NONE
            context = f"Gemm C {c[1]} must have the shape (M, N) = {y} (Gemm-1/-6 without "
            context += "broadcast=1): "
        else:
            kind, mode = "unidirectional", Mode.UNIDIRECTIONAL
            context = (
                f"Gemm C {c[1]} must broadcast unidirectionally to (M, N) = {y} (ONNX shape "
                "inference does not check it; onnxruntime fails at run time): "
            )
        _apply(ctx, [("(M,N)", y), c], mode, kind=kind, context=context, roles=("(M,N)", "C"))
    return y


def _check_prelu(ctx: _Context) -> Shape | None:
    x, slope = ctx.operand(0), ctx.operand(1)
    both = _apply(ctx, [x, slope], Mode.NUMPY, report=False)
    fits = _apply(ctx, [x, slope], Mode.UNIDIRECTIONAL, report=False)
    note = ""
    if fits is None and both is not None and both.rank is not None:
        note = f"; onnxruntime broadcasts both ways and outputs {both} instead of X's {x[1]}"
    out = _apply(
        ctx,
        [x, slope],
        Mode.UNIDIRECTIONAL,
        kind="unidirectional",
        context=(
            f"PRelu slope {slope[1]} must broadcast unidirectionally to X {x[1]} "
            f"(ONNX shape inference does not check it{note}): "
        ),
        roles=("X", "slope"),
    )
    return out if out is not None else x[1]


def _check_normalization(ctx: _Context) -> Shape | None:
    """LayerNormalization-17 and RMSNormalization-23: scale and bias unidirectional to X.

    The operator texts say "unidirectional broadcastable to tensor X", and onnxruntime
    accepts exactly that (a scale of ``[3,1]`` for X ``[2,3,4]`` with axis -1 runs), though
    RMSNormalization's input text says "broadcastable to the normalized shape".
    """
    node = ctx.node
    x = ctx.operand(0)
    roles = ("Scale", "B") if node.op == "LayerNormalization" else ("scale",)
    for index, role in enumerate(roles, start=1):
        if index >= len(node.inputs) or not node.inputs[index]:
            continue
        operand = ctx.operand(index)
        _apply(
            ctx,
            [x, operand],
            Mode.UNIDIRECTIONAL,
            kind="unidirectional",
            context=(
                f"{node.op} {role} {operand[1]} must broadcast unidirectionally to X {x[1]} "
                "(ONNX shape inference does not check it; onnxruntime fails at run time): "
            ),
            roles=("X", role),
        )
    return x[1] if x[1].rank is not None else None


def _constant_target(ctx: _Context, index: int) -> Shape | None:
    """Return a constant shape input as a Shape, None when it is not a constant."""
    name = ctx.node.inputs[index] if index < len(ctx.node.inputs) else ""
    values = ctx.graph.constants.get(name)
    if values is None:
        return None
    return Shape(values) if all(v >= 0 for v in values) else None


def _negative_target(ctx: _Context, index: int, operands: Sequence[tuple[str, Shape]]) -> bool:
    name = ctx.node.inputs[index] if index < len(ctx.node.inputs) else ""
    values = ctx.graph.constants.get(name)
    if values is None or all(v >= 0 for v in values):
        return False
    ctx.add(
        Severity.ERROR,
        "incompatible",
        operands,
        Mode.BIDIRECTIONAL if ctx.node.rule is Rule.EXPAND else ctx.node.mode,
        None,
        f"the target shape {list(values)} has a negative entry; ONNX Expand takes it literally, "
        "onnxruntime rejects it and OpenVINO reads -1 as a dynamic dim",
    )
    return True


def _check_expand(ctx: _Context) -> Shape | None:
    data = ctx.operand(0)
    name = ctx.node.inputs[1] if len(ctx.node.inputs) > 1 else ""
    if _negative_target(ctx, 1, [data, (name, ctx.shape(1))]):
        return None
    target = _constant_target(ctx, 1)
    if target is None:
        target = ctx.targets.get(name)  # computed in the graph: Shape -> Concat -> ...
    if target is None or target.rank is None or all(is_open(d) for d in target.dims):
        peer = ctx.node.output_shapes[0] if ctx.node.output_shapes else Shape.dynamic()
        return _apply(ctx, [data, ("shape", peer)], Mode.BIDIRECTIONAL, report=False)
    operands = [data, (name, target)]
    out = _apply(ctx, operands, Mode.BIDIRECTIONAL)
    _size_note(ctx, out, operands, materializing=True)
    return out


def _check_broadcast(ctx: _Context) -> Shape | None:
    node = ctx.node
    mode = node.mode or Mode.NUMPY
    data = ctx.operand(0)
    name = node.inputs[1] if len(node.inputs) > 1 else ""
    if _negative_target(ctx, 1, [data, (name, ctx.shape(1))]):
        return None
    target = _constant_target(ctx, 1)
    if target is None:
        target = node.output_shapes[0] if node.output_shapes else Shape.dynamic()
    tgt = (name, target)
    out: Shape | None
    if mode is Mode.EXPLICIT:
        mapping = node.axes_mapping
        if mapping is not None and len(set(mapping)) < len(mapping):
            repeated = sorted({v for v in mapping if mapping.count(v) > 1})
            ctx.add(
                Severity.ERROR,
                "axes-mapping-duplicates",
                [data, tgt],
                mode,
                repeated[0],
                f"axes_mapping {list(mapping)} repeats target axis "
                f"{', '.join(map(str, repeated))}; the spec requires strictly increasing axes "
                "(OpenVINO accepts it and its CPU plugin computes garbage)",
            )
            return target
        out = _apply(ctx, [data, tgt], mode, axes_mapping=mapping)
    elif mode is Mode.BIDIRECTIONAL:
        out = _apply(ctx, [data, tgt], mode)
    elif mode is Mode.PDPD:
        _pdpd_axis_note(ctx, [tgt, data])
        out = _apply(ctx, [tgt, data], mode, axis=node.axis)
    else:  # numpy: data broadcasts one way to the target
        out = _apply(ctx, [tgt, data], Mode.UNIDIRECTIONAL, roles=("target", "data"))
    _size_note(ctx, out, [data, tgt], materializing=True)
    return out


# -- OpenVINO notes ------------------------------------------------------------------------


def _pdpd_axis_note(ctx: _Context, operands: Sequence[tuple[str, Shape]]) -> None:
    if ctx.node.axis_written:
        return
    spec = _apply(ctx, operands, Mode.PDPD, axis=-1, report=False)
    read = _apply(ctx, operands, Mode.PDPD, axis=0, report=False)
    if spec == read:
        effect = "here both give the same result"
    elif spec is None:
        effect = f"with axis 0 the result is {read}, with -1 the shapes do not broadcast"
    elif read is None:
        effect = f"with axis -1 the result would be {spec}, with axis 0 they do not broadcast"
    else:
        effect = f"axis 0 gives {read}, -1 would give {spec}"
    ctx.add(
        Severity.WARNING,
        "pdpd-default-axis",
        operands,
        Mode.PDPD,
        None,
        "auto_broadcast is 'pdpd' with no axis attribute: OpenVINO reads it as axis 0, the "
        f"specification's default is -1 ({effect}); write the axis explicitly",
    )


def _one_against_zero_note(ctx: _Context, operands: Sequence[tuple[str, Shape]], axis: int) -> None:
    """OpenVINO's PDPD pre-check ``B > A`` rejects B=1 against A=0 (SEMANTICS §2.9, D8)."""
    a, b = operands[0][1], operands[1][1]
    if ctx.graph.format != "openvino" or a.rank is None or b.rank is None:
        return
    p = plan(a, b, mode=Mode.PDPD, axis=axis)
    placed = p.alignment[1] or ()
    for dim, out_axis in zip(b.dims, placed, strict=True):
        if out_axis is not None and dim == 1 and a.dims[out_axis] == 0:
            names = [operand_label(n, i) for i, (n, _) in enumerate(operands)]
            ctx.add(
                Severity.WARNING,
                "pdpd-one-against-zero",
                operands,
                Mode.PDPD,
                out_axis,
                f"B's 1 meets A's 0 at axis {out_axis}: the specification broadcasts it (the "
                "result keeps A's 0), but OpenVINO's shape inference rejects B > A there, so "
                "OpenVINO will not load it",
                format_alignment(
                    p.shapes, p.alignment, a.rank, labels=names, result=p.output, mark_axis=out_axis
                ),
            )
            return


def _trailing_ones_note(ctx: _Context, operands: Sequence[tuple[str, Shape]], axis: int) -> None:
    a, b = operands[0][1], operands[1][1]
    if ctx.graph.format != "openvino" or a.rank is None or b.rank is None:
        return
    if axis < 0 or axis + b.rank <= a.rank:
        return
    names = [operand_label(n, i) for i, (n, _) in enumerate(operands)]
    p = plan(a, b, mode=Mode.PDPD, axis=axis)
    ctx.add(
        Severity.WARNING,
        "pdpd-trailing-ones",
        operands,
        Mode.PDPD,
        None,
        f"B {b} at axis {axis} reaches past A {a}: the specification and OpenVINO's PDPD kernel "
        "ignore B's trailing ones, but OpenVINO's shape inference rejects "
        f"axis + rank(B) > rank(A) ({axis} + {b.rank} > {a.rank}), so OpenVINO will not load it",
        format_alignment(p.shapes, p.alignment, a.rank, labels=names, result=p.output),
    )


# -- sizes ---------------------------------------------------------------------------------


def _size_note(
    ctx: _Context,
    out: Shape | None,
    operands: Sequence[tuple[str, Shape]],
    *,
    materializing: bool,
) -> None:
    if out is None:
        return
    upper = upper_size(out)
    if upper is None or upper <= ctx.max_elements:
        return
    if not materializing:
        biggest = [upper_size(s) for _, s in operands]
        if any(s is None or s >= upper for s in biggest):
            return  # the output is no bigger than an input: not a broadcasting blow-up
    count = f"{upper:,} elements" if out.is_static else f"up to {upper:,} elements"
    name = ctx.node.outputs[0] if ctx.node.outputs else ""
    item = ctx.graph.item_sizes.get(name)
    if item is not None:
        count += f" ({show_bytes(upper * item)})"
    ctx.add(
        Severity.WARNING,
        "size",
        operands,
        None,
        None,
        f"the broadcast output {out} has {count}, more than the limit of "
        f"{ctx.max_elements:,} (--max-elements)",
    )


_CHECKS: Final[dict[Rule | None, Callable[[_Context], Shape | None]]] = {
    Rule.MULTIDIRECTIONAL: _check_multidirectional,
    Rule.ELEMENTWISE: _check_elementwise,
    Rule.SELECT: _check_select,
    Rule.GEMM: _check_gemm,
    Rule.PRELU: _check_prelu,
    Rule.PRELU_CHANNEL: lambda ctx: check_prelu_channel(  # OpenVINO PRelu: channel_checks
        ctx.node, ctx.operand(0), ctx.operand(1), ctx.findings
    ),
    Rule.NORMALIZATION: _check_normalization,
    Rule.EXPAND: _check_expand,
    Rule.BROADCAST: _check_broadcast,
    Rule.OPERATOR: lambda c: check_operator(c.node, c.shape, partial(_apply, c), c.add, c.collect),
}  # one function per rule, registered explicitly (tests/unit/test_check.py holds it whole)
