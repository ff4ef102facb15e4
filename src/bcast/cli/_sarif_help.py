"""The help of each ``bcast check`` rule, as SARIF's ``rules[].help`` shows it (issue 40).

GitHub code scanning shows it under "Rule help" on each alert: what the finding means and
what to do about it. `rule_help` returns the text and the Markdown of one rule.
"""

from __future__ import annotations

from typing import Final

__all__ = ["rule_help"]

_DO: Final = {
    "incompatible": (
        "The inputs of this node cannot broadcast: the model fails whenever it runs. Read the "
        "aligned shapes in the message, find the initializer or input whose dim is wrong at "
        "the axis marked, and fix its export (a weight of the wrong size, a reshape that "
        "dropped an axis)."
    ),
    "conditional": (
        "The node runs for some sizes of the input dims only (the message says which). If "
        "the model is only used at sizes that run, say so: `bcast check MODEL --dim "
        "NAME=LO..HI` proves the model for every size in the range and passes; "
        "`bcast domain MODEL` lists the sizes the model accepts."
    ),
    "fails-in-range": (
        "A node fails at a size inside the range given with `--dim NAME=LO..HI` (or at the "
        "value given with `--dim NAME=N`, where the index it reads depends on the value): the "
        "model will fail when used there. Narrow the range to the sizes the model accepts "
        "(`bcast domain MODEL`), or fix the node (a position table with too few rows)."
    ),
    "unidirectional": (
        "An input that may only be stretched one way (Gemm's C, PRelu's slope) is larger "
        "than the shape it must fit. ONNX shape inference does not check it; runtimes "
        "differ on it. Give the input the output's shape, or 1s where it repeats."
    ),
    "size": (
        "A broadcast makes an output with more elements than `--max-elements`: it will "
        "exhaust memory. Check the target shape of the Expand or Broadcast."
    ),
    "pdpd-default-axis": (
        "A pdpd node without an axis attribute: OpenVINO reads 0, the specification says "
        "-1. Write the axis in the IR."
    ),
    "peer-rejects": (
        "The model's own shape inference (ONNX or OpenVINO) refuses the model; the message "
        "has its reason."
    ),
    "runtime-deviation": (
        "The specification accepts this node, but the runtime named by --target is known to "
        "depart from it here (a wrong result, a refusal or a crash): docs/peer-differences.md "
        "has the case and the test that pins it. Rewrite the node (numpy broadcast, an "
        "explicit Unsqueeze) or check the runtime's own output."
    ),
    "unreadable": (
        "bcast could not read the model: not a model, truncated, or a reader that failed "
        "(the message has the reason). Nothing in it was checked."
    ),
}
_DEFAULT: Final = "See the message for the node, the shapes and the axis concerned."
_DOCS: Final = (
    "bcast's exit codes and messages are described in docs/errors.md; the JSON and SARIF "
    "output in docs/json.md."
)


def rule_help(kind: str) -> dict[str, str]:
    """Return a rule's help as SARIF writes it: ``{"text": ..., "markdown": ...}``.

    >>> sorted(rule_help("conditional")), "--dim" in rule_help("conditional")["text"]
    (['markdown', 'text'], True)
    """
    body = _DO.get(kind, _DEFAULT)
    return {
        "text": f"{body.replace('`', '')} {_DOCS}",
        "markdown": f"**{kind}**\n\n{body}\n\n{_DOCS}",
    }
