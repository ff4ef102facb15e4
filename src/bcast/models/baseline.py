"""Which findings fail a run: the ``--fail-on`` threshold and the baseline (issue 40).

A finding is known by its model, its node, its rule (``kind``) and a `fingerprint`: a hash of
what places it in the graph (rule, node, operator, axis, operand names), not of its wording,
so that it stays the same from one bcast version to the next and differs between two
findings of one rule in one model. A baseline is a JSON file of such keys
(``bcast check --write-baseline FILE``); with ``--baseline FILE`` the findings it holds are
left out, and only new ones fail. Its format is the schema ``baseline.json`` beside the
commands' schemas (docs/json.md).

Examples
--------
>>> from bcast.models import Finding, Severity
>>> f = Finding(Severity.WARNING, "conditional", "add", "Add", (), "numpy", 1, "fails ...")
>>> fingerprint(f) == fingerprint(f), len(fingerprint(f))
(True, 16)
>>> fails(Severity.WARNING, "error"), fails(Severity.WARNING, "warning")
(False, True)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from bcast.models.graph import Finding, ModelError, Report, Severity

__all__ = [
    "BASELINE_VERSION",
    "FAIL_ON",
    "Baseline",
    "baseline_json",
    "digest",
    "fails",
    "fingerprint",
    "model_key",
    "read_baseline",
    "write_baseline",
]

FAIL_ON: Final = ("error", "warning", "info", "never")
"""What ``--fail-on`` takes: the least severity that fails the run (``never``: none does)."""
BASELINE_VERSION: Final = 1
_RANK: Final = {Severity.INFO: 1, Severity.WARNING: 2, Severity.ERROR: 3}
_THRESHOLD: Final = {"info": 1, "warning": 2, "error": 3, "never": 4}

Key = tuple[str, str, str, str]
"""``(model, node, kind, fingerprint)``."""


def fails(severity: Severity, fail_on: str) -> bool:
    """Tell whether a finding of ``severity`` fails a run under ``--fail-on fail_on``.

    >>> [fails(Severity.INFO, t) for t in FAIL_ON]
    [False, False, True, False]
    """
    if fail_on not in _THRESHOLD:
        raise ValueError(f"fail_on takes {', '.join(FAIL_ON)}; got {fail_on!r:.40}")
    return _RANK[severity] >= _THRESHOLD[fail_on]


def fingerprint(finding: Finding) -> str:
    """Return 16 hex digits that identify ``finding`` within its model, stable across runs."""
    return digest(
        finding.kind,
        finding.node,
        finding.op,
        "" if finding.axis is None else str(finding.axis),
        *(name for name, _ in finding.inputs),
    )


def digest(*parts: str) -> str:
    """Return 16 hex digits of SHA-256 over ``parts`` (joined by a unit separator).

    >>> digest("unreadable", "m.onnx") == digest("unreadable", "m.onnx") != digest("m.onnx")
    True
    """
    import hashlib  # OpenSSL's, 5 ms to load: only when something is fingerprinted

    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "replace")).hexdigest()[:16]


def model_key(path: str) -> str:
    """Write a model's path as a baseline keys it: normalised, with ``/`` separators.

    >>> model_key("./models//bert.onnx")
    'models/bert.onnx'
    """
    return os.path.normpath(path).replace("\\", "/")


def _key(path: str, finding: Finding) -> Key:
    return (model_key(path), finding.node, finding.kind, fingerprint(finding))


class Baseline:
    """The findings known when the baseline was written (`read_baseline`)."""

    def __init__(self, keys: Iterable[Key] = ()) -> None:
        self.keys = frozenset(keys)

    def __len__(self) -> int:
        return len(self.keys)

    def known(self, path: str, finding: Finding) -> bool:
        """Tell whether the baseline holds ``finding`` of the model at ``path``."""
        return _key(path, finding) in self.keys

    def apply(self, path: str, report: Report) -> tuple[Report, int]:
        """Return the report without its known findings, and how many were left out."""
        kept = tuple(f for f in report.findings if not self.known(path, f))
        return replace(report, findings=kept), len(report.findings) - len(kept)


def baseline_json(results: Sequence[tuple[str, Report]]) -> dict[str, Any]:
    """Return the baseline of ``results`` (model path, report) as plain JSON data.

    >>> from bcast.models import Finding, Report, Severity
    >>> f = Finding(Severity.ERROR, "incompatible", "add", "Add", (), "numpy", 0, "...")
    >>> doc = baseline_json([("m.onnx", Report("m.onnx", 1, (f,)))])
    >>> doc["schema_version"], sorted(doc["findings"][0])
    (1, ['fingerprint', 'kind', 'model', 'node', 'op', 'reason', 'severity'])
    """
    findings = [
        {
            "model": model_key(path),
            "node": f.node,
            "kind": f.kind,
            "fingerprint": fingerprint(f),
            "op": f.op,
            "severity": f.severity.value,
            "reason": f.reason,
        }
        for path, report in results
        for f in report.findings
    ]
    return {"schema_version": BASELINE_VERSION, "tool": "bcast", "findings": findings}


def write_baseline(path: str, results: Sequence[tuple[str, Report]]) -> int:
    """Write the baseline of ``results`` to ``path``; return the number of findings.

    Raises
    ------
    ModelError
        If the file cannot be written (one line).
    """
    doc = baseline_json(results)
    try:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(doc, out, indent=2, ensure_ascii=False)
            out.write("\n")
    except OSError as err:
        raise ModelError(f"{path}: cannot write the baseline ({err.strerror or err})") from None
    return len(doc["findings"])


def read_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline file (``--write-baseline``'s JSON).

    Raises
    ------
    ModelError
        If the file cannot be read or is not a bcast baseline (one line, naming the file).
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as source:
            doc = json.load(source)
    except OSError as err:
        raise ModelError(f"{name}: cannot read the baseline ({err.strerror or err})") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise ModelError(f"{name}: not a bcast baseline (not JSON: {err})") from None
    return Baseline(_keys(name, doc))


def _keys(name: str, doc: object) -> list[Key]:
    wrong = ModelError(
        f"{name}: not a bcast baseline (expected an object with schema_version "
        f"{BASELINE_VERSION} and findings of model, node, kind and fingerprint)"
    )
    if not isinstance(doc, Mapping) or doc.get("schema_version") != BASELINE_VERSION:
        raise wrong
    items = doc.get("findings")
    if not isinstance(items, list):
        raise wrong
    keys = []
    for item in items:
        found = [item.get(k) if isinstance(item, Mapping) else None for k in _FIELDS]
        fields = [v for v in found if isinstance(v, str)]
        if len(fields) != len(_FIELDS):
            raise wrong
        keys.append((model_key(fields[0]), fields[1], fields[2], fields[3]))
    return keys


_FIELDS: Final = ("model", "node", "kind", "fingerprint")
