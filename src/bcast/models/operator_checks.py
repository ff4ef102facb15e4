"""The check of a node with its operator's own rule (`bcast.models.Rule.OPERATOR`).

The rules are in one module per operator family (`bcast.models.rules_quant`: quantization
scales and biases; `bcast.models.rules_microsoft`: the ``com.microsoft`` operators that
onnxruntime's optimizer and quantizer emit), each giving the broadcasts its operator
requires (`bcast.models.rules_base.Outcome`). This module runs them through the checker's
one broadcasting rule (``apply``: `bcast.models.node_checks`), so each finding, condition
and domain requirement is a broadcast's, reports the rule's own errors and limits, and
returns the output shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from bcast.core.modes import Mode
from bcast.core.shape import Shape
from bcast.models.domain import BoundRecord, Record
from bcast.models.graph import Node, Severity
from bcast.models.rules_base import RuleFunction
from bcast.models.rules_microsoft import MICROSOFT, MICROSOFT_RULES
from bcast.models.rules_quant import QUANT_RULES
from bcast.models.rules_recurrent import RECURRENT_RULES

__all__ = ["OPERATOR_RULES", "check_operator", "more_outputs", "rule_for"]

OPERATOR_RULES: Final[dict[tuple[str, str], RuleFunction]] = {
    **{("", op): rule for op, rule in QUANT_RULES.items()},
    **{("", op): rule for op, rule in RECURRENT_RULES.items()},
    **{(MICROSOFT, op): rule for op, rule in MICROSOFT_RULES.items()},
}
"""Every operator rule, by ``(domain, op)`` (``""``: ONNX's default domain, an IR layer)."""
_DYNAMIC: Final = Shape.dynamic()


def rule_for(domain: str, op: str) -> RuleFunction | None:
    """Return the rule of ``op`` in operator set ``domain`` (None: bcast has none).

    >>> rule_for("com.microsoft", "BiasGelu") is not None, rule_for("com.example", "Foo")
    (True, None)
    """
    return OPERATOR_RULES.get(("" if domain == "ai.onnx" else domain, op))


def check_operator(
    node: Node,
    shape: Callable[[int], Shape],
    apply: Callable[..., Shape | None],
    add: Callable[..., None],
    collect: list[Record] | None,
) -> Shape | None:
    """Check ``node`` by its operator's rule; return its first output's shape (None: unknown).

    ``shape(i)`` gives input ``i``'s shape; ``apply(operands, mode, kind=, context=,
    roles=)`` runs one broadcast and reports it; ``add(severity, kind, operands, mode,
    axis, reason)`` reports a finding; ``collect`` receives the domain's records.
    """
    rule = rule_for(node.domain, node.op)
    if rule is None:
        return None
    shapes = [shape(i) for i in range(len(node.inputs))]
    outcome = rule(node, shapes)
    for c in outcome.constraints:
        apply(c.operands, c.mode, axis=c.axis, kind=c.kind, context=c.context, roles=c.roles)
    operands: Sequence[tuple[str, Any]] = [
        (name, shapes[i]) for i, name in enumerate(node.inputs) if name
    ]
    for axis, reason in outcome.errors:
        add(Severity.ERROR, "incompatible", operands, None, axis, reason)
    for limit in outcome.limits:
        if limit.dim.lo is not None and limit.dim.lo > limit.size:
            text = f"{limit.reason}: {limit.label} is {limit.dim}, more than {limit.size}"
            add(Severity.ERROR, "size-limit", operands, Mode.NONE, None, text)
        elif collect is not None and not limit.dim.is_static:
            collect.append(BoundRecord(node.name, node.op, limit.dim, 0, limit.size))
    return outcome.output


def more_outputs(
    node: Node, values: Mapping[str, Shape], outputs: Sequence[Shape]
) -> tuple[Shape, ...]:
    """Fill the shapes of a node's outputs after the first from its rule, where unknown.

    ``values`` holds the shapes known so far; ``outputs`` the node's (the first is the
    checked one, the others the peer's).
    """
    rule = rule_for(node.domain, node.op)
    if rule is None:
        return tuple(outputs)
    shapes = [values.get(name, _DYNAMIC) if name else _DYNAMIC for name in node.inputs]
    more = rule(node, shapes).more
    filled = list(outputs) + [_DYNAMIC] * (len(node.outputs) - len(outputs))
    for index, shape in enumerate(more, start=1):
        if shape is not None and index < len(filled) and filled[index].rank is None:
            filled[index] = shape
    return tuple(filled)
