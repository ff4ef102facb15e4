"""Prove a model for every size in a range of its input dims (``--dim seq=1..512``; issue 40).

A range is a claim about how the model will be used: ``seq`` takes every size from 1 to 512.
`prove_ranges` holds the domain's requirements (`Domain.requirements`, each decidable at any
point) to that claim and rewrites the report:

- a ``conditional`` finding goes when every requirement of its node holds at every size in
  the ranges (the sizes that make it fail are outside them);
- a requirement that fails at some size inside the ranges becomes an error,
  ``fails-in-range``, at the first size where it fails (it replaces the node's conditional
  findings);
- a node whose requirements involve a dim without a range, or more sizes than are tried, keeps
  its findings as they were.

A requirement over one dim is decided by the domain's sizes for that dim (what ``bcast domain``
prints; its contract is soundness), then size by size from the first size outside them to find
where it fails. A requirement over several dims is tried at every point of the ranges, up to
`GRID_POINTS` points.

Examples
--------
>>> from bcast.models.domain import Domain, DimDomain, Imposed, Requirement
>>> at = Imposed("add", "Add", 1, "fails when seq > 512")
>>> need = Requirement(at, frozenset({"seq"}), lambda b: b["seq"] <= 512 if "seq" in b else None)
>>> domain = Domain(dims=(DimDomain("seq", ((1, 512),), (at,)),), requirements=(need,))
>>> decide(domain, {"seq": (1, 512)}).failing, decide(domain, {"seq": (1, 512)}).proven
({}, {'add'})
>>> decide(domain, {"seq": (1, 513)}).failing["add"][1]
{'seq': 513}
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from bcast.core.dim import MAX_DIM, Dim
from bcast.core.errors import BroadcastError
from bcast.models.domain import ANY, Domain, Imposed, Requirement, Sizes, contains
from bcast.models.graph import Finding, Report, Severity

__all__ = [
    "GRID_POINTS",
    "TRIED",
    "Decision",
    "DimValue",
    "Range",
    "decide",
    "prove_ranges",
    "range_text",
    "split_dims",
]

Range = tuple[int, int | None]
"""The sizes ``lo..hi`` of one dim, both included; ``hi`` None: no upper bound."""
DimValue = int | Range | str | Dim
"""What ``dims=`` takes for one dim: a size, a range ``(1, 512)``, ``"1..512"`` or a `Dim`."""
TRIED: Final = 1 << 12
"""Sizes tried one by one past the first size the domain leaves out (to find the failure)."""
GRID_POINTS: Final = 1 << 16
"""Points of the ranges tried for a requirement over several dims; more: left undecided."""


def range_text(bounds: Range) -> str:
    """Write a range as ``--dim`` takes it.

    >>> range_text((1, 512)), range_text((8, None))
    ('1..512', '8..')
    """
    lo, hi = bounds
    return f"{lo}..{'' if hi is None else hi}"


def split_dims(
    dims: Mapping[str, DimValue] | None,
) -> tuple[dict[str, int], dict[str, Range]]:
    """Separate the sizes given to dims (``4``) from the ranges (``(1, 512)``, ``"1.."``).

    A range whose ends meet is a size. Ranges start at 1 (the domain's sizes do).

    Raises
    ------
    ValueError
        For a value that is neither a size nor a range of sizes from 1.

    Examples
    --------
    >>> split_dims({"batch": 4, "seq": (1, 512), "kv": "8..", "n": "3..3"})
    ({'batch': 4, 'n': 3}, {'seq': (1, 512), 'kv': (8, None)})
    >>> split_dims({"seq": (0, 512)})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: dims['seq']: expected a size (4) or a range of sizes from 1 ... got '(0, 512)'
    """
    points: dict[str, int] = {}
    ranges: dict[str, Range] = {}
    for name, value in (dims or {}).items():
        bounds = _bounds(name, value)
        if isinstance(bounds, int):
            points[name] = bounds
        elif bounds[0] == bounds[1]:
            points[name] = bounds[0]
        else:
            ranges[name] = bounds
    return points, ranges


def _bounds(name: str, value: object) -> int | Range:
    wrong = ValueError(
        f"dims[{name!r}]: expected a size (4) or a range of sizes from 1 ((1, 512), "
        f"'1..512', '1..'); got {str(value)[:40]!r}"
    )
    if isinstance(value, bool):
        raise wrong
    if _whole(value):
        size = operator.index(value)  # type: ignore[arg-type]  # an int or NumPy integer
        if not 0 <= size <= MAX_DIM:
            raise wrong
        return size
    if isinstance(value, str):
        try:
            value = Dim.parse(value)
        except BroadcastError:
            raise wrong from None
    if isinstance(value, Dim):
        if value.name is not None:
            raise wrong
        if value.is_static:
            return value.lo
        value = (value.lo, value.hi)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = value
        if _whole(lo) and (hi is None or _whole(hi)):
            low = operator.index(lo)
            high = None if hi is None else operator.index(hi)
            if low >= 1 and (high is None or low <= high <= MAX_DIM):
                return (low, high)
    raise wrong


def _whole(value: object) -> bool:
    """Tell whether ``value`` is an integer (a Python or NumPy one), not a bool."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


@dataclass(slots=True)
class Decision:
    """What the ranges decide, node by node.

    ``proven``: nodes whose requirements all hold in the ranges; ``failing``: a node's first
    failing requirement and the point where it fails; ``undecided``: nodes left as they were.
    """

    proven: set[str] = field(default_factory=set)
    failing: dict[str, tuple[Imposed, dict[str, int]]] = field(default_factory=dict)
    undecided: set[str] = field(default_factory=set)
    why: dict[str, str] = field(default_factory=dict)
    """Why a node the ranges enter is left undecided (said in its finding)."""


def decide(
    domain: Domain, ranges: Mapping[str, Range], points: Mapping[str, int] | None = None
) -> Decision:
    """Decide every requirement of ``domain`` that a ranged dim enters, over the ranges.

    ``points`` gives other dims a size (where the domain was solved without them).
    """
    out = Decision()
    touched: set[str] = set()
    fixed = dict(points or {})
    for given in domain.requirements:
        node = given.imposed.node
        requirement = _at(given, fixed)
        free = requirement.symbols
        if not free & ranges.keys():
            if free or requirement.test({}) is not True:
                out.undecided.add(node)  # its finding stands whatever the ranges
            continue
        touched.add(node)
        if node in out.failing:
            continue
        if not free <= ranges.keys():
            out.undecided.add(node)
            others = ", ".join(sorted(free - ranges.keys()))
            out.why.setdefault(node, f"it also depends on {others}, which no --dim range bounds")
            continue
        verdict = (
            _one(domain, requirement, ranges)
            if len(given.symbols) == 1  # its dim's sizes in the domain are cut by it
            else _grid(requirement, ranges)
        )
        if isinstance(verdict, dict):
            out.failing[node] = (requirement.imposed, verdict)
        elif verdict is None:
            out.undecided.add(node)
            out.why.setdefault(
                node,
                f"it relates {', '.join(sorted(free))} over more than {GRID_POINTS} sizes "
                "(or a range without an upper bound)",
            )
    out.proven = touched - out.undecided - out.failing.keys()
    return out


def _at(requirement: Requirement, points: Mapping[str, int]) -> Requirement:
    """Return ``requirement`` with the dims of ``points`` fixed at their sizes."""
    fixed = {k: v for k, v in points.items() if k in requirement.symbols}
    if not fixed:
        return requirement
    test = requirement.test
    return replace(
        requirement,
        symbols=requirement.symbols - fixed.keys(),
        test=lambda bindings: test({**bindings, **fixed}),
    )


def _one(
    domain: Domain, requirement: Requirement, ranges: Mapping[str, Range]
) -> dict[str, int] | bool | None:
    """Decide a requirement over one ranged dim: True, the failing point, or None."""
    (symbol,) = requirement.symbols
    lo, hi = ranges[symbol]
    found = domain.dim(symbol)
    missing = _first_outside(lo, hi, found.sizes if found is not None else ANY)
    if missing is None:
        return True  # sizes below it hold: the domain's sizes lie inside each requirement's
    top = missing + TRIED if hi is None else min(hi, missing + TRIED)
    for value in range(missing, top + 1):
        if requirement.test({symbol: value}) is False:
            return {symbol: value}
    return True if hi is not None and top == hi else None


def _grid(requirement: Requirement, ranges: Mapping[str, Range]) -> dict[str, int] | bool | None:
    """Decide a requirement over several ranged dims point by point (bounded ranges only)."""
    names = sorted(requirement.symbols)
    spans = [ranges[n] for n in names]
    if any(hi is None for _, hi in spans):
        return None
    if math.prod((hi or lo) - lo + 1 for lo, hi in spans) > GRID_POINTS:
        return None
    undecided = False
    for point in itertools.product(*(range(lo, (hi or lo) + 1) for lo, hi in spans)):
        bindings = dict(zip(names, point, strict=True))
        verdict = requirement.test(bindings)
        if verdict is False:
            return bindings
        undecided = undecided or verdict is None
    return None if undecided else True


def _first_outside(lo: int, hi: int | None, sizes: Sizes) -> int | None:
    """Return the smallest size of ``lo..hi`` that ``sizes`` leaves out; None if none.

    >>> _first_outside(1, 512, ((1, 512),)), _first_outside(1, None, ((1, 512),))
    (None, 513)
    """
    value = lo
    while hi is None or value <= hi:
        if not contains(sizes, value):
            return value
        top = next(h for s, h in sizes if s <= value and (h is None or value <= h))
        if top is None:
            return None
        value = top + 1
    return None


def prove_ranges(report: Report, ranges: Mapping[str, Range]) -> Report:
    """Rewrite ``report``'s findings for the claim that each ranged dim takes every size in it.

    Examples
    --------
    >>> from bcast.models.domain import Domain, DimDomain, Imposed, Requirement
    >>> at = Imposed("add", "Add", 1, "fails when seq > 512")
    >>> need = Requirement(at, frozenset({"seq"}), lambda b: b.get("seq", 0) <= 512)
    >>> seen = Finding(Severity.WARNING, "conditional", "add", "Add", (), "numpy", 1, "...")
    >>> found = Domain(dims=(DimDomain("seq", ((1, 512),), (at,)),), requirements=(need,))
    >>> report = Report("m.onnx", 1, (seen,), 1, (), found)
    >>> prove_ranges(report, {"seq": (1, 512)}).findings
    ()
    >>> print(prove_ranges(report, {"seq": (1, 600)}).findings[0].reason)
    fails at seq=513, inside --dim seq=1..600: fails when seq > 512
    """
    if not ranges:
        return report
    decision = decide(report.domain, ranges)
    kept: list[Finding] = []
    said: set[str] = set()
    for finding in report.findings:
        failing = decision.failing.get(finding.node)
        if finding.kind != "conditional":
            kept.append(finding)
        elif failing is not None and finding.node not in said:
            said.add(finding.node)  # the condition met inside the ranges: an error there
            kept.append(_failure(finding, *failing, ranges))
        elif failing is None and finding.node not in decision.proven:
            why = decision.why.get(finding.node)
            note = f" (not decided over the --dim ranges: {why})" if why else ""
            kept.append(replace(finding, reason=finding.reason + note))
    for node, (imposed, point) in decision.failing.items():
        if node not in said:  # a requirement with no finding of its own (a Gather's table)
            blank = Finding(Severity.ERROR, "", node, imposed.op, (), None, imposed.axis, "")
            kept.append(_failure(blank, imposed, point, ranges))
    return replace(report, findings=tuple(kept))


def _failure(
    finding: Finding, imposed: Imposed, point: dict[str, int], ranges: Mapping[str, Range]
) -> Finding:
    at = ", ".join(f"{k}={v}" for k, v in point.items())
    claimed = ", ".join(f"--dim {k}={range_text(ranges[k])}" for k in point)
    reason = f"fails at {at}, inside {claimed}: {imposed.reason}"
    return replace(
        finding, severity=Severity.ERROR, kind="fails-in-range", axis=imposed.axis, reason=reason
    )
