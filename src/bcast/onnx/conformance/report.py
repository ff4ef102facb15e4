"""The report of ``bcast conformance``: a card per runtime, clusters, repros, JSON.

A *card* counts verdicts per operator and per element type for one runtime configuration.
Disagreements are *clustered* by runtime configuration, operator, verdict and shape pattern
with the way operands were given (``stretch/symbolic``); a runtime that refuses every valid
case of an element type is one cluster per operator (``every shape``: a missing kernel, not
a broadcasting path). Each cluster is a *finding* with a one-node repro: the case's model,
its inputs and bcast's output as ONNX backend test data (``model.onnx``,
``test_data_set_0/input_0.pb ... output_0.pb``) and ``repro.json`` (what the runtime did).
`write_suite` writes every case so: any runtime's own harness can run the kit.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any, Final

from onnx import numpy_helper

from bcast.onnx.conformance.cases import Case
from bcast.onnx.conformance.kit import Kit, Record
from bcast.onnx.conformance.spec import UNDEFINED, ulps
from bcast.onnx.conformance.verdicts import DEFECTS, VERDICTS

__all__ = ["EVERY_SHAPE", "Cluster", "cards", "clusters", "kit_json", "write_repro", "write_suite"]

EVERY_SHAPE: Final = "every shape"
_CITATIONS: Final = {row.key: row.citation for row in UNDEFINED}


class Cluster:
    """Disagreements of one runtime configuration that share op, verdict and pattern."""

    def __init__(self, key: tuple[str, str, str, str], records: list[Record]) -> None:
        self.label, self.op, self.verdict, self.pattern = key
        self.records = records
        self.repro: str | None = None

    @property
    def first(self) -> Record:
        """The representative record (the first case, in the kit's order)."""
        return self.records[0]

    @property
    def defect(self) -> bool:
        """Whether the cluster counts as a defect (``spec_undefined`` does not)."""
        return self.verdict in DEFECTS


def _pattern(record: Record) -> str:
    return f"{record.case.pattern}/{record.case.operands}"


def _op(record: Record) -> str:
    """Name the operator with the attributes that change its function (fmod, direction).

    So Mod(fmod=0) and Mod(fmod=1) never share a cluster. Attributes that only place
    the scale (axis, block_size) stay in the shape pattern.
    """
    picked = {k: v for k, v in record.case.attrs.items() if k in {"fmod", "direction"}}
    if not picked:
        return record.case.op
    return f"{record.case.op}({','.join(f'{k}={v}' for k, v in picked.items())})"


def clusters(kit: Kit) -> list[Cluster]:
    """Group the kit's disagreements; the defects first, then the larger clusters.

    Returns
    -------
    list of Cluster
    """
    valid_by_type: Counter[tuple[str, str, tuple[str, ...]]] = Counter()  # by _op
    refused_by_type: Counter[tuple[str, str, tuple[str, ...]]] = Counter()
    for r in kit.records:
        if r.case.valid:
            key = (r.label, _op(r), r.case.dtypes)
            valid_by_type[key] += 1
            refused_by_type[key] += r.verdict.refused
    groups: dict[tuple[str, str, str, str], list[Record]] = defaultdict(list)
    for r in kit.records:
        verdict = r.verdict.verdict
        if verdict == "agree":
            continue
        pattern = _pattern(r)
        type_key = (r.label, _op(r), r.case.dtypes)
        if verdict == "refuses_valid" and refused_by_type[type_key] == valid_by_type[type_key]:
            pattern = EVERY_SHAPE
        groups[(r.label, _op(r), verdict, pattern)].append(r)
    found = [Cluster(key, records) for key, records in groups.items()]
    found.sort(key=lambda c: (not c.defect, c.label, c.op, VERDICTS.index(c.verdict), c.pattern))
    return found


def cards(kit: Kit) -> dict[str, dict[str, dict[str, dict[str, int]]]]:
    """Count verdicts per runtime configuration, by operator and by element type.

    Returns
    -------
    dict
        ``{label: {"by_op": {op: {verdict: n}}, "by_dtype": {dtype: {verdict: n}}}}``,
        element types by the case's first input (its x, or its data).
    """
    out: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
    for r in kit.records:
        card = out.setdefault(r.label, {"by_op": {}, "by_dtype": {}})
        for table, key in (("by_op", r.case.op), ("by_dtype", r.case.dtypes[0])):
            row = card[table].setdefault(key, {})
            row[r.verdict.verdict] = row.get(r.verdict.verdict, 0) + 1
    return out


def _tensor_files(folder: str, case: Case, with_output: bool) -> None:
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(folder, "model.onnx"), "wb") as handle:
        handle.write(case.model)
    for i, (name, value) in enumerate(case.feeds.items()):
        _write_tensor(os.path.join(data, f"input_{i}.pb"), value, name)
    if with_output and case.expected is not None:
        _write_tensor(os.path.join(data, "output_0.pb"), case.expected[0], "Y")


def _write_tensor(path: str, value: Any, name: str) -> None:
    with open(path, "wb") as handle:
        handle.write(numpy_helper.from_array(value, name).SerializeToString())


def write_repro(folder: str, cluster: Cluster) -> str:
    """Write the cluster's representative case as a repro; return its folder.

    The folder holds ``model.onnx``, ``test_data_set_0/input_*.pb``, bcast's
    ``output_0.pb`` (none where the model must be refused) and ``repro.json``.
    """
    record = cluster.first
    case = record.case
    os.makedirs(folder, exist_ok=True)
    _tensor_files(folder, case, with_output=case.valid)
    about = {
        "case": case.id,
        "runtime": record.label,
        "op": case.op,
        "verdict": cluster.verdict,
        "expected": "refusal: " + case.refusal if case.refusal else "output_0.pb",
        "runtime_answer": record.verdict.got,
        "detail": record.verdict.detail,
        "ulps": ulps(case.op, len(case.inputs)),
        "undefined_elements": None if case.mask is None else int(case.mask.sum()),
    }
    with open(os.path.join(folder, "repro.json"), "w", encoding="utf-8") as handle:
        json.dump(about, handle, indent=2)
    return folder


def write_suite(folder: str, cases: Iterable[Case]) -> int:
    """Write every case as ONNX backend test data under ``folder``; return how many.

    Valid cases go to ``folder/suite/test_<case>/`` with bcast's output; cases that must be
    refused to ``folder/suite-must-refuse/test_<case>/`` (a model and inputs, no output).
    """
    count = 0
    for case in cases:
        kind = "suite" if case.valid else "suite-must-refuse"
        _tensor_files(os.path.join(folder, kind, f"test_{case.id}"), case, with_output=True)
        count += 1
    return count


def _finding(cluster: Cluster, info: dict[str, Any]) -> dict[str, Any]:
    record = cluster.first
    case = record.case
    finding = {
        "runtime": info.get("name", record.label),
        "configuration": record.label,
        "op": case.op,
        "verdict": cluster.verdict,
        "defect": cluster.defect,
        "pattern": cluster.pattern,
        "dtypes": list(case.dtypes),
        "shapes": list(case.shapes),
        "attributes": {k: v for k, v in case.attrs.items()},
        "cases": len(cluster.records),
        "case_ids": [r.case.id for r in cluster.records[:20]],
        "all_dtypes": sorted({"/".join(dict.fromkeys(r.case.dtypes)) for r in cluster.records}),
        "detail": record.verdict.detail,
        "runtime_answer": record.verdict.got,
        "expected": case.refusal or "output",
        "spec": [{"key": k, "citation": _CITATIONS[k]} for k in case.spec],
        "deterministic": (
            all("deterministic:" in r.verdict.detail for r in cluster.records)
            if cluster.verdict == "crash"
            else None
        ),
        "repro": cluster.repro,
    }
    return finding


def kit_json(kit: Kit, found: list[Cluster], *, dropped: int) -> dict[str, Any]:
    """Return the JSON of ``bcast conformance`` (without ``schema_version``)."""
    infos = {i.label: {"name": i.name} for i in kit.runtimes}
    verdicts = Counter(r.verdict.verdict for r in kit.records)
    return {
        "seed": kit.seed,
        "runtimes": [
            {
                "name": i.name,
                "label": i.label,
                "version": i.version,
                "config": i.config,
                "available": i.available,
                "reason": i.reason,
            }
            for i in kit.runtimes
        ],
        "findings": [_finding(c, infos.get(c.label, {})) for c in found],
        "cards": cards(kit),
        "summary": {
            "cases": len(kit.cases),
            "dropped": dropped,
            "runs": len(kit.records),
            "verdicts": {v: verdicts.get(v, 0) for v in VERDICTS},
            "clusters": len(found),
            "defects": sum(c.defect for c in found),
            "seconds": round(kit.seconds, 1),
        },
        "error": None,
    }
