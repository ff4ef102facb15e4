"""Decide a broadcast's "fails unless" condition as a set of sizes (isl; issue 37).

`bcast.core.conditions.find_conditions` says, axis by axis, what the sizes must satisfy;
where they are expressions of one input dim (``Min(64, s41)``), `decided_conditions`
decides the sizes at which the axis fails exactly and without a bound
(`bcast.models.presburger`), and says them: ``fails when s41 > 64``, ``fails unless H is a
multiple of 2``, ``never fails``. A condition isl cannot hold (a product of dims) keeps its
plain text.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Final

from bcast.core.conditions import Condition, find_conditions, requirement_text
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.plans import Plan
from bcast.models.presburger import Congruence, Intervals, NotAffine, Space

__all__ = [
    "decided_conditions",
    "derived_dim",
    "never_below",
    "period",
    "periodic_text",
    "pieces_text",
    "failing_text",
    "sizes_text",
    "space_of",
    "strided_text",
]

_LISTED: Final = 4  # failing intervals written out; more are counted
_PERIOD: Final = 64  # the largest period a set is said residue by residue with
_DIVIDES: Final = frozenset({"//", "%", "/", "FloorDiv", "Mod", "PythonMod", "CleanDiv"})


@functools.lru_cache(maxsize=256)
def space_of(names: tuple[str, ...]) -> Space:
    """Return the (shared) `Space` of these input dims: one per tuple of names, kept.

    >>> space_of(("s",)) is space_of(("s",))
    True
    """
    return Space(names)


def decided_conditions(
    plan: Plan, names: Sequence[str], expressions: Mapping[str, Expr] | None = None
) -> list[Condition]:
    """`find_conditions`, each condition in one input dim decided as a set of its sizes.

    Examples
    --------
    >>> import bcast
    >>> from bcast.core.expressions import parse_expression
    >>> p = bcast.plan("[s41,8]", "[M,8]")
    >>> [c.text for c in decided_conditions(p, ["x", "y"],
    ...                                     {"M": parse_expression("Min(64, s41)")})]
    ['fails when s41 > 64: s41, Min(64, s41) must be equal (or 1)']
    >>> p = bcast.plan("[s,8]", "[M,8]")
    >>> [c.text for c in decided_conditions(p, ["x", "y"],
    ...                                     {"M": parse_expression("Min(5000, s)")})]
    ['fails when s > 5000: s, Min(5000, s) must be equal (or 1)']
    """
    found = find_conditions(plan, names, expressions=expressions)
    if not expressions:
        return found
    return [_decided(plan, c, expressions) or c for c in found]


def _column(plan: Plan, axis: int) -> list[tuple[int, Dim]]:
    column: list[tuple[int, Dim]] = []
    for k, (shape, axes) in enumerate(zip(plan.shapes, plan.alignment, strict=True)):
        if axes is None or shape.rank is None:
            continue
        column.extend((k, d) for d, a in zip(shape.dims, axes, strict=True) if a == axis)
    return column


def _decided(plan: Plan, cond: Condition, expressions: Mapping[str, Expr]) -> Condition | None:
    """Decide ``cond`` when its dims are expressions of one input dim; None otherwise."""
    if len(cond.symbols) != 1:
        return None
    column = [(k, d) for k, d in _column(plan, cond.axis) if d.name is not None or d.hi is not None]
    if not any(d.name in expressions for _, d in column):
        return None
    if any(d.name is None and not d.is_static for _, d in column):
        return None  # a bounded unnamed interval: not a function of the symbol
    exprs = [(k, _expr(d, expressions)) for k, d in column]
    (symbol,) = cond.symbols
    space = space_of((symbol,))
    try:
        region = space.column(exprs, plan.mode)
        head, failing = failing_text(space, symbol, region, period(e for _, e in exprs))
    except (NotAffine, space.isl.Error):  # not a Presburger set: the plain condition stays
        return None
    text = f"{head}: {requirement_text(column, plan.mode, expressions)}"
    return replace(cond, text=text, failing=failing)


def _expr(dim: Dim, expressions: Mapping[str, Expr]) -> Expr:
    if dim.is_static:
        return Expr("int", value=dim.lo)
    found = expressions.get(dim.name or "")
    return found if found is not None else Expr("sym", name=dim.name or "")


def failing_text(
    space: Space, symbol: str, region: object, modulus: int = 1
) -> tuple[str, Intervals]:
    """Say where one dim's sizes leave ``region``; with the failing intervals (hulls).

    ``modulus``: a period the sizes may have (`period` of the expressions), to say a set of
    several residues (``h % 4 ∈ {0, 3}``) where no single congruence does.

    >>> from bcast.core.expressions import parse_expression as p
    >>> s = space_of(("H",))
    >>> failing_text(s, "H", s.compare(p("2*((H - 1)//2 + 1)"), "==", p("H")))
    ('fails unless H is a multiple of 2', ((1, None),))
    >>> failing_text(s, "H", s.compare(p("Min(64, H)"), "==", p("H")))
    ('fails when H > 64', ((65, None),))
    """
    fails = space.sizes.subtract(region)
    if fails.is_empty():
        return "never fails", ()
    if space.sizes.intersect(region).is_empty():
        return f"fails for every {symbol}", ((1, None),)
    intervals, congruence = space.one_dim(fails, symbol)
    fails_exactly = space.exactly(fails, symbol)
    if congruence is None and fails_exactly:
        return "fails when " + _when(symbol, intervals), intervals
    held, kept = space.one_dim(region, symbol)
    if space.exactly(region, symbol):
        return f"fails unless {sizes_text(symbol, held, kept)}", intervals
    if fails_exactly:
        return f"fails when {sizes_text(symbol, intervals, congruence)}", intervals
    found = space.residues(region, symbol, modulus) if 1 < modulus <= _PERIOD else None
    if found:
        return f"fails unless {periodic_text(symbol, found, modulus)}", intervals
    return f"fails unless {space.text(region)}", intervals


def _when(symbol: str, intervals: Intervals) -> str:
    if len(intervals) > _LISTED:
        return f"{symbol} is in one of {len(intervals)} intervals, from {intervals[0][0]}"
    parts = []
    for lo, hi in intervals:
        if hi is None:
            parts.append(f"{symbol} > {lo - 1}")
        elif lo <= 1:
            parts.append(f"{symbol} < {hi + 1}")
        elif lo == hi:
            parts.append(f"{symbol} = {lo}")
        else:
            parts.append(f"{symbol} ∈ {lo}..{hi}")
    return " or ".join(parts)


def sizes_text(name: str, intervals: Intervals, congruence: Congruence | None) -> str:
    """Say a dim's sizes as a condition: ``H is a multiple of 8``, ``s <= 64``.

    >>> sizes_text("H", ((8, None),), (8, 0)), sizes_text("s", ((1, 64),), None)
    ('H is a multiple of 8', 's <= 64')
    >>> sizes_text("n", ((3, 99),), (4, 3))
    'n % 4 == 3 and n <= 99'
    """
    parts = []
    if congruence is not None:
        m, r = congruence
        parts.append(f"{name} is a multiple of {m}" if r == 0 else f"{name} % {m} == {r}")
    low = 1  # the smallest size the congruence allows: a bound at or below it says nothing
    if congruence is not None:
        low = congruence[1] or congruence[0]
    ranges = []
    for lo, hi in intervals:
        if hi is None and lo <= low:
            continue
        if hi is None:
            ranges.append(f"{name} >= {lo}")
        elif lo <= low:
            ranges.append(f"{name} <= {hi}")
        elif lo == hi:
            ranges.append(f"{name} = {lo}")
        else:
            ranges.append(f"{lo} <= {name} <= {hi}")
    if ranges:
        parts.append(ranges[0] if len(ranges) == 1 else "(" + " or ".join(ranges) + ")")
    return " and ".join(parts) or f"{name} >= 1"


def strided_text(sizes: Intervals, congruence: Congruence) -> str:
    """Write the sizes ``n % m == r`` of intervals: the first few, then the rule.

    >>> strided_text(((2, None),), (2, 0)), strided_text(((3, 27),), (8, 3))
    ('2, 4, 6, ... (multiples of 2)', '3, 11, 19, 27 (8k + 3)')
    """
    m, r = congruence
    parts = []
    for lo, hi in sizes:
        first = lo + (r - lo) % m
        if hi is not None and first > hi:
            continue
        if hi is None:
            parts.append(f"{first}, {first + m}, {first + 2 * m}, ...")
            continue
        last = hi - (hi - r) % m
        values = range(first, last + 1, m)
        shown = (
            [str(v) for v in values]
            if len(values) <= 4
            else [*map(str, values[:3]), "...", str(last)]
        )
        parts.append(", ".join(shown))
    rule = f"multiples of {m}" if r == 0 else f"{m}k + {r}"
    return ", ".join(parts) + f" ({rule})"


def derived_dim(name: str, sizes: Intervals, congruence: Congruence, text: str) -> list[str]:
    """Write a dim with a congruence as torch.export's derived ``Dim`` (``2*_height``).

    >>> derived_dim("height", ((2, None),), (2, 0), "2, 4, ...")
    ['_height = Dim("_height", min=1)', 'height = 2*_height']
    >>> derived_dim("w", ((3, 99),), (8, 3), "3, 11, ...")
    ['_w = Dim("_w", min=0, max=12)', 'w = 8*_w + 3']
    """
    m, r = congruence
    lo, hi = sizes[0][0], sizes[-1][1]
    low = (lo - r + m - 1) // m
    bounds = f", min={low}" + ("" if hi is None else f", max={(hi - r) // m}")
    note = "" if len(sizes) == 1 else f"  # only {text} run; a Dim cannot say it"
    base = f"_{name}"
    return [
        f'{base} = Dim("{base}"{bounds})',
        f"{name} = {m}*{base}" + (f" + {r}" if r else "") + note,
    ]


def never_below(big: Expr, small: Expr) -> bool:
    """Tell whether ``big >= small`` at every size of their one symbol (decided by isl).

    >>> from bcast.core.expressions import parse_expression as p
    >>> never_below(p("Max(8, s)"), p("s")), never_below(p("Min(8, s)"), p("s"))
    (True, False)
    """
    free = big.symbols | small.symbols
    if len(free) != 1 or big == small:
        return False
    if _plain(big) and _plain(small):  # Min(64, s) against s: no need to load isl
        if (small.op == "Min" and big in small.args) or (big.op == "Max" and small in big.args):
            return True
        (name,) = free
        for size in _near(big.constants + small.constants):
            low, high = big.evaluate({name: size}), small.evaluate({name: size})
            if low is not None and high is not None and low < high:
                return False  # a size where it is below
    space = space_of(tuple(free))
    try:
        below = space.sizes.subtract(space.compare(big, ">=", small))
    except (NotAffine, space.isl.Error):
        return False
    return bool(below.is_empty())


def _plain(expr: Expr) -> bool:
    """Tell whether ``expr`` is a constant, a symbol, or the Min or Max of those."""
    if expr.op in ("int", "sym"):
        return True
    return expr.op in ("Min", "Max") and all(a.op in ("int", "sym") for a in expr.args)


def _near(constants: Iterable[int]) -> list[int]:
    """Return the sizes (from 1) where the pieces of a `_plain` expression meet, and beside."""
    return sorted({1, *(c + k for c in constants for k in (-1, 0, 1, 2) if c + k >= 1)})


def pieces_text(pieces: Sequence[tuple[int, int | None, int, int]] | None) -> str:
    """Write sizes made of pieces ``(lo, hi, modulus, residue)`` (`Space.pieces`); "" for None.

    >>> pieces_text([(1, 1, 1, 0), (2, None, 2, 0)])
    '1; 2, 4, 6, ... (multiples of 2)'
    """
    if not pieces:
        return ""
    parts = []
    for lo, hi, m, r in pieces:
        if m > 1:
            parts.append(strided_text(((lo, hi),), (m, r)))
        else:
            parts.append(str(lo) if lo == hi else f"{lo}..{'' if hi is None else hi}")
    return "; ".join(parts)


def period(exprs: Iterable[Expr], most: int = _PERIOD) -> int:
    """Return a period of the expressions' sizes: the lcm, over each path, of its divisors.

    Past ``most``, ``most + 1`` (too long a period to say residue by residue).

    >>> from bcast.core.expressions import parse_expression as p
    >>> period([p("2*((h - 1)//2//2 + 1)"), p("(h - 1)//2 + 1")]), period([p("Min(64, s)")])
    (4, 1)
    """
    found = 1
    for e in exprs:
        found = min(math.lcm(found, _period(e, 1, most)), most + 1)
    return found


def _period(e: Expr, above: int, most: int) -> int:
    if e.op in _DIVIDES and not e.args[1].symbols:
        c = e.args[1].evaluate({})
        inner = _period(e.args[0], above * abs(c), most) if c else above
        return min(inner, most + 1)
    found = above
    for arg in e.args:
        found = math.lcm(found, _period(arg, above, most))
    return min(found, most + 1)


def periodic_text(name: str, residues: Sequence[tuple[int, Intervals]], modulus: int) -> str:
    """Say sizes given residue by residue (`Space.residues`): ``h % 4 ∈ {0, 3}``.

    A residue whose sizes run from its first size on is said by the residue alone; any
    other is said with its sizes.

    >>> periodic_text("h", [(0, ((4, None),)), (3, ((3, None),))], 4)
    'h % 4 ∈ {0, 3}'
    >>> periodic_text("h", [(0, ((4, None),)), (1, ((1, 1),))], 4)
    'h % 4 == 0 or h = 1'

    Where every residue's sizes run from one bound on, the bound is said once:

    >>> periodic_text("h", [(0, ((16, None),)), (1, ((17, None),)), (3, ((19, None),))], 16)
    'h >= 16 and h % 16 ∈ {0, 1, 3}'
    """
    low = min(spans[0][0] for _, spans in residues)
    whole = [r for r, spans in residues if spans == ((r or modulus, None),)]
    after = [r for r, spans in residues if spans == ((low + (r - low) % modulus, None),)]
    parts, kept = [], [r for r, _ in residues]
    if len(after) == len(residues) and len(whole) < len(residues) and len(kept) > 1:
        return f"{name} >= {low} and {name} % {modulus} ∈ {{{', '.join(map(str, kept))}}}"
    if len(whole) == 1:
        parts.append(f"{name} % {modulus} == {whole[0]}")
    elif whole:
        parts.append(f"{name} % {modulus} ∈ {{{', '.join(map(str, whole))}}}")
    for r, spans in residues:
        if r in whole:
            continue
        for lo, hi in spans:
            if lo == hi:
                parts.append(f"{name} = {lo}")
            elif hi is None:
                parts.append(f"{name} % {modulus} == {r} and {name} >= {lo}")
            else:
                parts.append(f"{name} % {modulus} == {r} and {lo} <= {name} <= {hi}")
    return " or ".join(parts)
