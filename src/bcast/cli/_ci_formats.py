"""``bcast check --format sarif|github|html``: the findings as CI systems read them.

- SARIF 2.1.0 (OASIS), as code-scanning tools (GitHub code scanning, GitLab, Azure DevOps)
  take it: one run, a rule per finding kind, one result per finding, located in the model
  file (physical location) and at the node (logical location ``model::node``).
- GitHub Actions workflow commands: ``::error file=...,title=...::message``, one per
  finding, shown as annotations on the run and the pull request.
- A self-contained HTML page: a section per model, each finding with its aligned picture.

Everything is built from the checker's `Report` values; nothing is decided here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

import bcast
from bcast.core.text import safe_text
from bcast.models import Finding, Report, Severity
from bcast.models.baseline import digest, fingerprint
from bcast.models.report_html import html_page

from ._safe_output import safe_json
from ._sarif_help import rule_help

__all__ = ["FORMATS", "github_annotations", "html_report", "sarif_log"]

FORMATS: Final = ("text", "json", "sarif", "github", "html")
"""What ``bcast check --format`` takes."""

Results = Sequence[tuple[str, "Report | str"]]

_SARIF_LEVEL: Final = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_GITHUB_LEVEL: Final = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "notice",
}
_UNREADABLE: Final = "unreadable"
_RULES: Final = {
    "incompatible": "The inputs of a broadcasting node cannot broadcast.",
    "conditional": "A node fails unless its symbolic or interval dims take certain values.",
    "unidirectional": "An input must broadcast one way (Gemm C, PRelu slope) and does not.",
    "size": "A broadcast output has more elements than --max-elements.",
    "pdpd-default-axis": "A pdpd node without an axis: OpenVINO reads 0, the spec says -1.",
    "axes-mapping-duplicates": "An explicit axes_mapping repeats an axis.",
    "pdpd-trailing-ones": "PDPD trailing ones that OpenVINO's shape inference does not ignore.",
    "pdpd-one-against-zero": "PDPD B=1 against A=0.",
    "peer-rejects": "The model's own shape inference rejects the model.",
    "not-checked": "A node bcast could not check.",
    "not-modelled": "A node bcast cannot model (no shape rule): nothing past it is decided.",
    "runtime-deviation": "A node where the --target runtime departs from the specification.",
    _UNREADABLE: "The model cannot be read.",
}


def _findings(results: Results) -> Iterator[tuple[str, Finding | str]]:
    for path, result in results:
        if isinstance(result, str):
            yield path, result
        else:
            yield from ((path, finding) for finding in result.findings)
            for u in result.unmodelled:  # listed at note level, never skipped silently
                reason = f"not modelled: {u.reason}; nothing past it is decided"
                yield (
                    path,
                    Finding(Severity.INFO, "not-modelled", u.node, u.op, (), None, None, reason),
                )


# -- SARIF ---------------------------------------------------------------------------------


def sarif_log(results: Results) -> str:
    """Return the findings as a SARIF 2.1.0 log (one JSON document).

    >>> import json
    >>> doc = json.loads(sarif_log([("m.onnx", "m.onnx: no such file")]))
    >>> doc["version"], doc["runs"][0]["results"][0]["ruleId"]
    ('2.1.0', 'unreadable')
    >>> doc["runs"][0]["invocations"][0]["executionSuccessful"]
    False
    """
    kinds: list[str] = []
    sarif_results: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []
    for path, item in _findings(results):
        kind = _UNREADABLE if isinstance(item, str) else item.kind
        if kind not in kinds:
            kinds.append(kind)
        sarif_results.append(_sarif_result(path, item, kinds.index(kind)))
        if isinstance(item, str):  # also where SARIF puts a tool's own failures
            notifications.append(
                {
                    "level": "error",
                    "message": {"text": item},
                    "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(path)}}}],
                    "descriptor": {"id": _UNREADABLE},
                }
            )
    rules = [
        {
            "id": kind,
            "name": "".join(part.capitalize() for part in kind.split("-")),
            "shortDescription": {"text": _RULES.get(kind, kind)},
            "fullDescription": {"text": _RULES.get(kind, kind)},
            "help": rule_help(kind),
        }
        for kind in kinds
    ]
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "bcast",
                        "version": bcast.__version__,
                        "rules": rules,
                    }
                },
                "invocations": [
                    {
                        "executionSuccessful": not notifications,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "results": sarif_results,
                "columnKind": "unicodeCodePoints",
                # The input sizes each model runs for (bcast domain), by model path.
                "properties": {
                    "domains": {
                        path: result.domain.to_json()
                        for path, result in results
                        if not isinstance(result, str)
                    }
                },
            }
        ],
    }
    return safe_json(log)


def _sarif_result(path: str, item: Finding | str, rule_index: int) -> dict[str, Any]:
    physical = {"artifactLocation": {"uri": _uri(path)}, "region": {"startLine": 1}}
    if isinstance(item, str):
        return {
            "ruleId": _UNREADABLE,
            "ruleIndex": rule_index,
            "level": "error",
            "message": {"text": item},
            "locations": [{"physicalLocation": physical}],
            "partialFingerprints": {_FINGERPRINT: digest(_UNREADABLE, path)},
        }
    # The alert view shows the message alone: it names the node, then the condition.
    where = f"{item.node} ({item.op}" + ("" if item.axis is None else f", axis {item.axis}")
    text = f"{where}): {item.reason}"
    if item.picture:
        text += "\n" + "\n".join(item.picture)
    return {
        "ruleId": item.kind,
        "ruleIndex": rule_index,
        "level": _SARIF_LEVEL[item.severity],
        "message": {"text": text},
        "partialFingerprints": {_FINGERPRINT: fingerprint(item)},
        "locations": [
            {
                "physicalLocation": physical,
                "logicalLocations": [
                    {
                        "name": item.node,
                        "fullyQualifiedName": f"{path}::{item.node}",
                        "kind": "member",
                    }
                ],
                "message": {"text": f"node {item.node} ({item.op})"},
            }
        ],
        "properties": {
            "op": item.op,
            "mode": item.mode,
            "axis": item.axis,
            "inputs": [{"name": n, "shape": str(s)} for n, s in item.inputs],
        },
    }


_FINGERPRINT: Final = "bcastFinding/v1"
"""The ``partialFingerprints`` key: rule, node, operator, axis and operands (`fingerprint`)."""


def _uri(path: str) -> str:
    """Write a path as a relative URI reference (code scanning resolves it in the repo)."""
    return path.replace("\\", "/").replace(" ", "%20")


# -- GitHub Actions ------------------------------------------------------------------------


def github_annotations(results: Results) -> list[str]:
    r"""Return one GitHub Actions workflow command per finding (``::error file=...::...``).

    >>> github_annotations([("a,b.onnx", "a,b.onnx: no such file\nsecond line")])
    ['::error file=a%2Cb.onnx,title=bcast unreadable::a,b.onnx: no such file\\nsecond line']
    """
    lines = []
    for path, item in _findings(results):
        if isinstance(item, str):
            level, title, message = "error", f"bcast {_UNREADABLE}", safe_text(item)
        else:
            level = _GITHUB_LEVEL[item.severity]
            title = safe_text(f"bcast {item.kind}: {item.node} ({item.op})")
            message = "\n".join(safe_text(line) for line in [item.reason, *item.picture])
        properties = f"file={_property(safe_text(path))},title={_property(title)}"
        lines.append(f"::{level} {properties}::{_data(message)}")
    return lines


def _data(text: str) -> str:
    # The escapes of the Actions runner (toolkit/packages/core/src/command.ts).
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


# -- HTML ----------------------------------------------------------------------------------


def html_report(results: Results, summary: dict[str, int]) -> str:
    """Return a self-contained HTML page: a summary table, then a section per model.

    Each finding's operands are drawn as a table, each model's domain as bars
    (`bcast.models.report_html`); no script, no resource from the network.

    >>> page = html_report([("<m>.onnx", "<m>.onnx: no such file")], {"models": 1})
    >>> "&lt;m&gt;.onnx" in page and "<m>" not in page
    True
    """
    return html_page(results, summary)
