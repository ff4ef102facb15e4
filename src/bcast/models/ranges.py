"""Prove a model for every size in a range of its input dims (``--dim seq=1..512``; issue 40).

A range is a claim about how the model will be used: ``seq`` takes every size from 1 to 512.
`prove_ranges` holds the domain's requirements (`Domain.requirements`, each decidable at any
point) to that claim and rewrites the report:

- a ``conditional`` finding goes when every requirement of its node holds at every size in
  the ranges (the sizes that make it fail are outside them);
- a requirement that fails at some size inside the ranges becomes an error,
  ``fails-in-range``, at the first size where it fails (it replaces the node's conditional
  findings);
- a node whose requirements involve a dim without a range, or one that multiplies dims and
  z3 cannot decide, keeps its findings as they were, and says why.

Each requirement is decided by set inclusion (isl, `bcast.models.presburger`): the box of the
ranges (unbounded for ``LO..``) minus the requirement's set is empty, or it holds a point, and
the smallest (isl's lexicographic minimum, dims in name order) is the counterexample. A
requirement that multiplies dims goes to z3 (`bcast.models.smt`). No size is tried.

Examples
--------
>>> from bcast.core.expressions import parse_expression as p
>>> from bcast.models.domain import Domain, DimDomain, Imposed, Requirement
>>> from bcast.models.presburger import Space
>>> space = Space(["seq"])
>>> at = Imposed("add", "Add", 1, "fails when seq > 512")
>>> need = Requirement(at, frozenset({"seq"}), lambda b: b["seq"] <= 512 if "seq" in b else None,
...                    space.compare(p("seq"), "<=", p("512")))
>>> domain = Domain(dims=(DimDomain("seq", ((1, 512),), (at,)),), requirements=(need,),
...                 space=space)
>>> decide(domain, {"seq": (1, 512)}).failing, decide(domain, {"seq": (1, 512)}).proven
({}, {'add'})
>>> decide(domain, {"seq": (1, 513)}).failing["add"][1]
{'seq': 513}
>>> decide(domain, {"seq": (7, None)}).failing["add"][1]  # 7.. : no bound, still exact
{'seq': 513}
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from bcast.core.dim import MAX_DIM, Dim
from bcast.core.errors import BroadcastError
from bcast.models.domain import Domain, Imposed, Requirement
from bcast.models.graph import Finding, Report, Severity
from bcast.models.smt import failing

__all__ = [
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
        verdict = _included(domain, given, fixed, ranges)
        if isinstance(verdict, dict):
            out.failing[node] = (requirement.imposed, verdict)
        elif verdict is None:
            out.undecided.add(node)
            out.why.setdefault(
                node,
                f"it multiplies dims ({', '.join(sorted(free))}): not a Presburger set, "
                "and z3 could not decide it over the ranges (each point is decided)",
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


def _included(
    domain: Domain,
    requirement: Requirement,
    points: Mapping[str, int],
    ranges: Mapping[str, Range],
) -> dict[str, int] | bool | None:
    """Decide a requirement over the ranges: True, its smallest failing point, or None.

    The box of the ranges (with the dims of ``points`` at their sizes) minus the
    requirement's set: empty, the requirement holds everywhere in it; otherwise isl's
    lexicographic minimum of the difference is where it fails first. A requirement that is
    not a set isl holds (a product of dims) goes to z3 (`bcast.models.smt`): a failing point
    (not the smallest), True, or None where z3 cannot say.
    """
    space, region = domain.space, requirement.region
    if space is None or region is None:
        if requirement.formula is None:
            return None
        found = failing(requirement.formula, ranges, points)  # z3, for a product of dims
        if isinstance(found, dict) and requirement.test({**points, **found}) is not False:
            return None  # z3's point does not fail when evaluated: not trusted
        return found
    free = sorted(requirement.symbols - points.keys())
    box = space.box({n: ranges[n] for n in free}).intersect(
        space.fixed({k: v for k, v in points.items() if k in requirement.symbols})
    )
    point = space.smallest(box.subtract(region), free)
    return True if point is None else point


def prove_ranges(report: Report, ranges: Mapping[str, Range]) -> Report:
    """Rewrite ``report``'s findings for the claim that each ranged dim takes every size in it.

    Examples
    --------
    >>> from bcast.core.expressions import parse_expression as p
    >>> from bcast.models.domain import Domain, DimDomain, Imposed, Requirement
    >>> from bcast.models.presburger import Space
    >>> space = Space(["seq"])
    >>> at = Imposed("add", "Add", 1, "fails when seq > 512")
    >>> need = Requirement(at, frozenset({"seq"}), lambda b: b.get("seq", 0) <= 512,
    ...                    space.compare(p("seq"), "<=", p("512")))
    >>> seen = Finding(Severity.WARNING, "conditional", "add", "Add", (), "numpy", 1, "...")
    >>> found = Domain(dims=(DimDomain("seq", ((1, 512),), (at,)),), requirements=(need,),
    ...                space=space)
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
