"""The answers `bcast.models.domain_solve` gives once every requirement is a set (issue 37).

Where no size holds them all, where the domain empties and why (`emptied`); a dim's sizes
that no single congruence says, said piece by piece or residue by residue (`inexact_text`);
a relation over several dims with its condition and boxes (`decided`), or left unsaid where
the dims' own sizes imply it (`implied`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, cast

from bcast.models.condition_sets import period, periodic_text, pieces_text
from bcast.models.domain import DimDomain, Domain, Imposed, Relation, Requirement
from bcast.models.presburger import Space
from bcast.models.presburger_terms import divisors

__all__ = ["decided", "emptied", "implied", "inexact_text"]

_BOXES: Final = 16  # pieces of a two-dim relation written as boxes; more: its condition only
_LONGEST: Final = 1 << 16  # a period whose divisors are tried, to say sizes residue by residue


def emptied(
    space: Space, names: Sequence[str], regions: Sequence[Requirement], common: dict[str, Any]
) -> Domain:
    """Return the domain when no sizes hold every requirement: where it empties, and why."""
    running = space.sizes
    seen: list[Requirement] = []
    empty, at = "no sizes hold every requirement", cast("tuple[Imposed, ...]", ())
    for r in regions:
        narrowed = running.intersect(r.region)
        if narrowed.is_empty():
            if space.sizes.intersect(r.region).is_empty():
                at = (r.imposed,)
                empty = f"{r.imposed} fails for every size: {r.imposed.reason}"
            else:
                before = [q for q in seen if q.symbols & r.symbols][:3]
                at = (*(q.imposed for q in before), r.imposed)
                cuts = "; ".join(f"{i}: {i.reason}" for i in at)
                empty = f"{' and '.join(sorted(r.symbols))}: no size left ({cuts})"
            break
        if not narrowed.is_equal(running):
            seen.append(r)
        running = narrowed
    return Domain(tuple(DimDomain(n, ()) for n in names), (), empty, empty_at=at, **common)


def implied(
    space: Space,
    whole: Any,
    dims: Mapping[str, DimDomain],
    r: Relation,
    regions: Mapping[object, Any],
    apart: set[int],
) -> bool:
    """Tell whether a relation follows from the dims' own sizes (it is then not said).

    Dims whose sizes are said exactly (intervals and a congruence) are held to those; the
    others to their projection of ``whole``.
    """
    region = regions.get((r.dims, r.text))
    if r.kind != "holds" or region is None or id(region) in apart:
        return False
    exact = {n: d for n in r.dims if (d := dims.get(n)) is not None and d.exact}
    if len(exact) < len(r.dims) and region.n_basic_set() > _BOXES:
        return False  # a case split over many divisors, held to a projection: too dear
    said = {n: (d.sizes, d.congruence) for n, d in exact.items()}
    return space.implied(whole, region, r.dims, said)


def decided(
    space: Space, whole: Any, r: Relation, regions: Mapping[object, Any], apart: set[int]
) -> Relation:
    """Give a relation its condition (isl's constraints) and, over two dims, its boxes.

    A relation kept ``apart`` (its set would have made the intersection too large) is
    decided on its own: its condition is said, the dims' sizes do not take it into account.
    """
    region = regions.get((r.dims, r.text))
    if r.kind != "holds" or region is None:
        return r
    if id(region) in apart:
        return replace(r, decided=False, condition=space.text(region, only=r.dims))
    few = len(r.dims) == 2 and whole.n_basic_set() <= _BOXES
    boxes = space.boxes(whole, r.dims, _BOXES) if few else ()
    return replace(r, condition=space.text(region, only=r.dims), boxes=boxes)


def inexact_text(space: Space, whole: Any, name: str, regions: Sequence[Requirement]) -> str:
    """Say sizes that are no single congruence: pieces, residues, or isl's constraints."""
    said = pieces_text(space.pieces(whole, name))
    if said:
        return said
    exprs = [
        e
        for r in regions
        if name in r.symbols and r.formula is not None
        for e in (
            [r.formula[1], r.formula[3]]
            if r.formula[0] == "compare"
            else [e for _, e in r.formula[1]]
        )
    ]
    longest = period(exprs, _LONGEST)  # nested Mods overstate it: its divisors may do
    for modulus in [m for m in divisors(longest) if 1 < m <= 64] if longest <= _LONGEST else ():
        found = space.residues(whole, name, modulus)
        if found:
            return periodic_text(name, found, modulus)
    return space.text(whole, (name,))
