"""What the checker reports besides broadcasts: a file contradicting itself, a peer refusing it.

`against_declared` holds a broadcast's result against the output shape the file declares
(an IR states every output's dims); `unexplained_refusals` makes a peer's refusal of the
model an error where nothing of bcast's own accounts for it.
"""

from __future__ import annotations

from dataclasses import replace

from bcast.core.dim import intersect_dims
from bcast.core.shape import Shape
from bcast.models.graph import Finding, Node, Severity

__all__ = ["against_declared", "unexplained_refusals"]


def against_declared(node: Node, result: Shape, declared: Shape) -> list[Finding]:
    """Hold a broadcast's result against the output shape the file declares for it.

    An IR states every output's dims; a broadcast whose operands give another size than the
    one declared (a Const cut short feeding a Multiply) is what OpenVINO refuses, and the
    first node where the file contradicts itself.
    """
    if result.rank is None or declared.rank is None:
        return []
    if result.rank != declared.rank:
        reason = f"the model declares the output {declared}; the broadcast gives {result}"
        return [_declared_finding(node, None, reason, result, declared)]
    for axis, (got, said) in enumerate(zip(result.dims, declared.dims, strict=True)):
        if intersect_dims(got, said) is None:
            reason = (
                f"the model declares the output {declared}; the broadcast gives {result}: "
                f"{got} vs {said} at axis {axis}"
            )
            return [_declared_finding(node, axis, reason, result, declared)]
    return []


def _declared_finding(
    node: Node, axis: int | None, reason: str, result: Shape, declared: Shape
) -> Finding:
    picture = (f"broadcast  {result}", f"declared   {declared}")
    operands = tuple((name, declared) for name in node.outputs[:1])
    return Finding(
        Severity.ERROR, "declared-shape", node.name, node.op, operands, None, axis, reason, picture
    )


def unexplained_refusals(findings: list[Finding]) -> list[Finding]:
    """Make a peer's refusal of the model an error unless bcast reported something itself.

    A model the peer will not load never passes: when no error or warning of bcast's own
    accounts for the refusal, the refusal itself is the error, with the peer's reason.
    """
    if any(f.severity is not Severity.INFO and f.kind != "peer-rejects" for f in findings):
        return findings
    return [
        replace(f, severity=Severity.ERROR) if f.kind == "peer-rejects" else f for f in findings
    ]
