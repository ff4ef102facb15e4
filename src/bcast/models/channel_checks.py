"""The check of an OpenVINO PRelu node: its slope per channel, else unidirectional to X.

OpenVINO's own shape inference does not look at the slope (the output is X's shape, always),
so a slope that fits no rule loads and fails only when the CPU plugin compiles the model.
The rule is `bcast.core.channels.channel_plan`; this module only turns its answer into
`Finding` objects, as `bcast.models.node_checks` does for the other rules.
"""

from __future__ import annotations

from bcast.core.channels import channel_plan
from bcast.core.conditions import conditions
from bcast.core.errors import BroadcastError
from bcast.core.picture import format_alignment
from bcast.core.shape import Shape
from bcast.models.graph import Finding, Node, Severity

__all__ = ["check_prelu_channel"]

_KIND = "unidirectional"  # as the ONNX PRelu check of `bcast.models.node_checks`


def check_prelu_channel(
    node: Node, x: tuple[str, Shape], slope: tuple[str, Shape], findings: list[Finding]
) -> Shape | None:
    """Check an OpenVINO PRelu's slope; append findings, return the output shape.

    The output is X's shape (narrowed where the slope forces a dim), also when the slope
    does not fit: an error finding says so at the axis where the NumPy rule fails.

    Examples
    --------
    >>> from bcast import Shape
    >>> node = Node("p", "PRelu", ("x", "s"), ("y",))
    >>> found: list[Finding] = []
    >>> str(check_prelu_channel(node, ("x", Shape((2, 3, 4))), ("s", Shape((3,))), found))
    '[2,3,4]'
    >>> check_prelu_channel(node, ("x", Shape((2, 3, 4))), ("s", Shape((5,))), found)
    Shape.parse('[2,3,4]')
    >>> [(f.severity.value, f.axis) for f in found]
    [('error', 2)]
    """
    operands = (x, slope)
    names = [_label(name, i) for i, (name, _) in enumerate(operands)]
    context = (
        "OpenVINO PRelu (its shape inference does not check the slope; its CPU plugin "
        "rejects the model): "
    )
    try:
        plan = channel_plan(x[1], slope[1])
    except BroadcastError as err:
        picture: tuple[str, ...] = ()
        if err.alignment is not None and err.out_rank is not None:
            picture = tuple(
                format_alignment(
                    err.shapes, err.alignment, err.out_rank, labels=names, mark_axis=err.axis
                )
            )
        findings.append(
            _finding(node, operands, Severity.ERROR, _KIND, err.axis, context + err.reason, picture)
        )
        return x[1] if x[1].rank is not None else None
    rank = plan.output.rank or 0
    for out_axis, text in conditions(plan, names):
        picture = tuple(
            format_alignment(
                plan.shapes,
                plan.alignment,
                rank,
                labels=names,
                result=plan.output,
                mark_axis=out_axis,
            )
        )
        findings.append(
            _finding(
                node, operands, Severity.WARNING, "conditional", out_axis, context + text, picture
            )
        )
    return plan.output


def _finding(
    node: Node,
    operands: tuple[tuple[str, Shape], ...],
    severity: Severity,
    kind: str,
    axis: int | None,
    reason: str,
    picture: tuple[str, ...],
) -> Finding:
    return Finding(
        severity, kind, node.name, node.op, operands, "unidirectional", axis, reason, picture
    )


def _label(name: str, index: int) -> str:
    text = name or f"#{index}"
    return text if len(text) <= 24 else text[:11] + "…" + text[-12:]
