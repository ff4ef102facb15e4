"""``bcast conformance`` as a library call: generate, answer, run, judge.

`run_kit` is the whole pipeline: the runtimes asked for are loaded in worker processes
(those not installed are named and skipped), the cases are generated and answered by bcast
(`bcast.onnx.conformance.expected`), every configuration of every runtime runs every case
(`bcast.onnx.conformance.workers`) and each outcome gets its verdict
(`bcast.onnx.conformance.verdicts`). `bcast.onnx.conformance.report` turns the `Kit` into
cards, clusters, repros and JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bcast.onnx.conformance.cases import Case, generate
from bcast.onnx.conformance.expected import decide
from bcast.onnx.conformance.runtimes import BUILTIN, known_runtimes
from bcast.onnx.conformance.verdicts import Verdict, judge
from bcast.onnx.conformance.workers import DEFAULT_TIMEOUT, Task, describe, run_tasks

__all__ = ["Kit", "Record", "RuntimeInfo", "UnknownRuntimeError", "run_kit"]


class UnknownRuntimeError(ValueError):
    """A runtime name asked for that is neither built in nor registered as a plug-in."""


@dataclass(slots=True)
class RuntimeInfo:
    """One configuration of a runtime (or a runtime that is skipped)."""

    name: str
    label: str
    version: str = ""
    config: dict[str, str] = field(default_factory=dict)
    available: bool = True
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Record:
    """One case in one runtime configuration, judged."""

    case: Case
    label: str
    verdict: Verdict


@dataclass(slots=True)
class Kit:
    """The outcome of a conformance run."""

    runtimes: list[RuntimeInfo]
    cases: list[Case]
    records: list[Record]
    dropped: dict[str, str]
    seed: int
    seconds: float = 0.0


def _label(name: str, configs: Sequence[dict[str, str]], index: int) -> str:
    """Name a configuration by what differs from the runtime's first one.

    >>> _label("openvino", [{"load": "memory"}, {"load": "file"}], 1)
    'openvino[load=file]'
    """
    if index == 0:
        return name
    first, this = configs[0], configs[index]
    diff = [f"{k}={v}" for k, v in this.items() if first.get(k) != v]
    return f"{name}[{','.join(diff) or index}]"


def select_cases(ops: Sequence[str] | None, *, seed: int, limit: int | None) -> list[Case]:
    """Return the cases of ``ops``, at most ``limit`` per operator (spread over its table)."""
    cases = list(generate(ops, seed=seed))
    if limit is None:
        return cases
    by_op: dict[str, list[Case]] = {}
    for case in cases:
        by_op.setdefault(case.op, []).append(case)
    kept = []
    for group in by_op.values():
        step = max(1, len(group) // max(limit, 1))
        kept.extend(group[::step][:limit])
    return kept


def run_kit(
    runtimes: Sequence[str] | None = None,
    *,
    ops: Sequence[str] | None = None,
    seed: int = 0,
    limit: int | None = None,
    jobs: int = 2,
    timeout: float = DEFAULT_TIMEOUT,
    progress: Callable[[str, int, int], None] | None = None,
) -> Kit:
    """Run the conformance kit.

    Parameters
    ----------
    runtimes : sequence of str, optional
        Runtime names (default: every built-in and every registered plug-in).
    ops : sequence of str, optional
        ONNX operators (default: all of the kit).
    seed : int
        The seed of the random inputs.
    limit : int, optional
        At most this many cases per operator.
    jobs : int
        Worker processes run at a time.
    timeout : float
        Seconds a case may take before it counts as a crash.
    progress : callable, optional
        Called with ``(stage, done, total)``.

    Returns
    -------
    Kit

    Raises
    ------
    UnknownRuntimeError
        If a runtime named in ``runtimes`` is neither built in nor a plug-in.
    """
    start = time.monotonic()
    known = known_runtimes()
    names = list(runtimes) if runtimes is not None else list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnknownRuntimeError(
            f"unknown runtime {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
        )
    infos: list[RuntimeInfo] = []
    for name in names:
        about = describe(known[name], timeout)
        if not about.get("available"):
            infos.append(RuntimeInfo(name, name, available=False, reason=about.get("reason", "")))
            continue
        configs = about["configurations"] or [{}]
        for i, config in enumerate(configs):
            infos.append(RuntimeInfo(name, _label(name, configs, i), about["version"], config))
    cases, dropped = [], {}
    for case in select_cases(ops, seed=seed, limit=limit):
        reason = decide(case)
        if reason is None:
            cases.append(case)
        else:
            dropped[case.id] = reason
    tasks = [
        Task(info.label, known[info.name], info.config, [(c.id, c.model, c.feeds) for c in cases])
        for info in infos
        if info.available
    ]
    total = sum(len(t.cases) for t in tasks)
    count = [0]

    def seen(n: int) -> None:
        count[0] += n
        if progress is not None:
            progress("running", min(count[0], total), total)

    outcomes = run_tasks(tasks, jobs=jobs, timeout=timeout, progress=seen)
    records = [
        Record(case, task.label, judge(case, outcome))
        for task in tasks
        for case, outcome in zip(cases, outcomes[task.label], strict=True)
    ]
    return Kit(infos, cases, _gaps(records), dropped, seed, time.monotonic() - start)


def _gaps(records: list[Record]) -> list[Record]:
    """Blame a refusal on the element types where the runtime refuses every valid case.

    A runtime without a kernel for, say, bfloat16 Max also refuses the bfloat16 case whose
    NaNs the operator text leaves open; that refusal is the missing kernel
    (``refuses_valid``), not an answer to the undefined values (``spec_undefined``).
    """
    valid: dict[tuple[str, str, tuple[str, ...]], list[bool]] = {}
    for r in records:
        if r.case.valid:
            valid.setdefault((r.label, r.case.op, r.case.dtypes), []).append(r.verdict.refused)
    out = []
    for r in records:
        refusals = valid.get((r.label, r.case.op, r.case.dtypes), [])
        if r.verdict.verdict == "spec_undefined" and r.verdict.refused and all(refusals):
            why = "it refuses every valid case of these element types: " + r.verdict.got
            r = Record(r.case, r.label, Verdict("refuses_valid", why, r.verdict.got, True))
        out.append(r)
    return out


def builtin_names() -> list[str]:
    """Return the names of the built-in runtimes.

    >>> builtin_names()
    ['onnxruntime', 'openvino', 'reference', 'tract']
    """
    return list(BUILTIN)
