"""What the domain solver works with: the user's dims, and tests of a requirement at a point.

`Dims` says which dims the user controls and evaluates dims (and their expressions) at a
point; `column_test` and `product_test` decide a requirement at one point (what
`Domain.first_failure` runs); `Solver` holds union-find over dims known equal and the
relations between plain dims, for saying the domain (`bcast.models.domain_solve` decides the
sizes themselves as integer sets, `bcast.models.presburger`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from bcast.core.conditions import sizes_broadcast
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.modes import Mode
from bcast.core.plans import Plan
from bcast.core.shape import Shape
from bcast.models.domain import (
    ANY,
    Imposed,
    Relation,
    Requirement,
    Sizes,
    contains,
    intersect,
    union,
)
from bcast.models.graph import Graph

__all__ = [
    "ONE",
    "ONE_WAY_TARGET",
    "Dims",
    "Solver",
    "Test",
    "column_of",
    "column_test",
    "imposers",
    "product_test",
    "said_relations",
]

Test = Callable[[Mapping[str, int]], bool | None]

ONE: Final[Sizes] = ((1, 1),)
ONE_WAY_TARGET: Final[dict[Mode, int]] = {Mode.UNIDIRECTIONAL: 0, Mode.PDPD: 0, Mode.EXPLICIT: 1}


# -- requirements --------------------------------------------------------------------------


class Dims:
    """Which dims the user controls, and their values at a point."""

    def __init__(self, graph: Graph, bound: Mapping[str, int]) -> None:
        self.expressions = graph.expressions
        self.names: list[str] = []
        for shape in graph.shapes.values():
            for dim in shape.dims if shape.rank is not None else ():
                if dim.name is None:
                    continue
                expr = self.expressions.get(dim.name)
                for name in sorted(expr.symbols) if expr is not None else (dim.name,):
                    if name not in bound and name not in self.names:
                        self.names.append(name)
        self.inputs = frozenset(self.names)

    def symbols(self, dim: Dim) -> frozenset[str] | None:
        """Return the input dims ``dim`` is a function of; None where it is none's (``unk__1``)."""
        if dim.is_static:
            return frozenset()
        if dim.name is None:
            return None
        expr = self.expressions.get(dim.name)
        found = expr.symbols if expr is not None else frozenset((dim.name,))
        return found if found <= self.inputs else None

    def expr(self, dim: Dim) -> Expr:
        """Return ``dim`` as an expression: its size, its expression or its symbol."""
        if dim.is_static:
            return Expr("int", value=dim.lo)
        found = self.expressions.get(dim.name or "")
        return found if found is not None else Expr("sym", name=dim.name or "?")

    def value(self, dim: Dim, bindings: Mapping[str, int]) -> int | None:
        """Return ``dim``'s size at ``bindings``; None where a symbol is unbound."""
        if dim.is_static:
            return dim.lo
        assert dim.name is not None
        expr = self.expressions.get(dim.name)
        return expr.evaluate(bindings) if expr is not None else bindings.get(dim.name)


def column_of(p: Plan, axis: int) -> list[tuple[int, Dim]]:
    """Return the (operand, dim) pairs the plan aligns at output ``axis``."""
    column: list[tuple[int, Dim]] = []
    for k, (shape, axes) in enumerate(zip(p.shapes, p.alignment, strict=True)):
        if axes is None or shape.rank is None:
            continue
        column.extend((k, d) for d, a in zip(shape.dims, axes, strict=True) if a == axis)
    return column


def column_test(dims: Dims, column: list[tuple[int, Dim]], mode: Mode) -> Test:
    """Return the test that a column of dims broadcasts under ``mode`` at a point."""
    kept = [(k, d) for k, d in column if dims.symbols(d) is not None]
    target = ONE_WAY_TARGET.get(mode)

    def test(bindings: Mapping[str, int]) -> bool | None:
        values = []
        for k, d in kept:
            v = dims.value(d, bindings)
            if v is None or v < 0:
                return None
            values.append((k, v))
        return sizes_broadcast(values, mode, target)

    return test


def product_test(dims: Dims, data: Shape, target: tuple[int, ...]) -> Test:
    """Return the test that ``data`` reshapes to a constant ``target`` at a point."""

    def test(bindings: Mapping[str, int]) -> bool | None:
        sizes = [dims.value(d, bindings) for d in data.dims]
        if any(v is None for v in sizes):
            return None
        have = math.prod(v for v in sizes if v is not None)
        wanted = [sizes[i] if v == 0 and i < len(sizes) else v for i, v in enumerate(target)]
        known = math.prod(v for v in wanted if v is not None and v != -1)
        if -1 in wanted:
            return known != 0 and have % known == 0
        return have == known

    return test


class Solver:
    """Each dim's sizes and the nodes cutting them; union-find over dims known equal."""

    def __init__(self, names: list[str]) -> None:
        self.parent = {n: n for n in names}
        self.sizes: dict[str, Sizes] = {n: ANY for n in names}
        self.cuts: dict[str, list[Imposed]] = {n: [] for n in names}
        self.joins: list[tuple[str, str, Imposed]] = []

    def find(self, name: str) -> str:
        """Return the dim standing for ``name``'s class of equal dims."""
        while self.parent[name] != name:
            name = self.parent[name]
        return name

    def cut(self, name: str, sizes: Sizes, by: Imposed) -> bool:
        """Narrow ``name`` to ``sizes`` (``by`` imposes it); tell whether anything changed."""
        root = self.find(name)
        narrowed = intersect(self.sizes[root], sizes)
        if narrowed == self.sizes[root]:
            return False
        self.sizes[root] = narrowed
        if by not in self.cuts[root]:
            self.cuts[root].append(by)
        return True

    def join(self, a: str, b: str, by: Imposed) -> bool:
        """Make ``a`` and ``b`` equal (``by`` imposes it); tell whether anything changed."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self.names_order(rb) < self.names_order(ra):
            ra, rb = rb, ra
        self.parent[rb] = ra
        before = self.sizes[ra]
        self.sizes[ra] = intersect(before, self.sizes[rb])
        self.cuts[ra].extend(c for c in self.cuts[rb] if c not in self.cuts[ra])
        self.joins.append((a, b, by))
        return True

    def names_order(self, name: str) -> int:
        """Return where ``name`` stands among the dims (inputs' order)."""
        return list(self.parent).index(name)

    def relate(self, kind: str, a: str, b: str, by: Imposed) -> bool:
        """Apply one relation; True when it changed anything (``or1``: two-way, ``1way``)."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        da, db = self.sizes[ra], self.sizes[rb]
        if kind == "or1" and not contains(da, 1) and not contains(db, 1):
            return self.join(a, b, by)
        if kind == "1way" and not contains(db, 1):
            return self.join(a, b, by)
        changed = False
        if not contains(da, 1):
            changed |= self.cut(b, union(da, ONE), by)
        if kind == "or1" and not contains(db, 1):
            changed |= self.cut(a, union(db, ONE), by)
        return changed


def imposers(
    space: Any, name: str, regions: Sequence[Requirement], whole: Any
) -> tuple[Imposed, ...]:
    """Name the nodes that cut ``name``'s sizes: each requirement that narrows them, in order.

    Where relations with other dims cut further, the first of them are named too.

    >>> from bcast.core.expressions import parse_expression as p
    >>> from bcast.models.presburger import Space
    >>> space = Space(["s"])
    >>> at = Imposed("g", "Gather", None, "s <= 64")
    >>> below = space.compare(p("s"), "<=", p("64"))
    >>> cap = Requirement(at, frozenset({"s"}), lambda b: None, below)
    >>> [i.node for i in imposers(space, "s", [cap, cap], cap.region)]  # said once
    ['g']
    """
    running = space.line(space.sizes, name)
    out: list[Imposed] = []
    lines: dict[int, Any] = {}
    for r in regions:
        if name not in r.symbols:
            continue
        key = id(r.region)
        if key not in lines:
            lines[key] = space.line(r.region, name)
        narrowed = running.intersect(lines[key])
        if not narrowed.is_equal(running):
            out.append(r.imposed)
            running = narrowed
    if not space.line(whole, name).is_equal(running):
        reasons = {i.reason for i in out}
        for r in regions:
            if name in r.symbols and len(r.symbols) > 1 and r.imposed.reason not in reasons:
                out.append(r.imposed)
                reasons.add(r.imposed.reason)
                if len(reasons) > 3:
                    break
    return tuple(out)


def _settle(solver: Solver, relations: list[tuple[str, str, str, Imposed]]) -> None:
    """Apply the relations between plain dims until nothing changes."""
    changed, rounds = True, 0
    while changed and rounds < 100:
        changed, rounds = False, rounds + 1
        for kind, a, b, by in relations:
            changed |= solver.relate(kind, a, b, by)


def said_relations(
    names: Sequence[str], solver: Solver, relations: list[tuple[str, str, str, Imposed]]
) -> list[Relation]:
    """Say the relations between plain dims: classes of equal dims, then the rest.

    >>> by = Imposed("add", "Add", 0, "a, b are equal (or 1)")
    >>> [r.text for r in said_relations(["a", "b"], Solver(["a", "b"]), [("or1", "a", "b", by)])]
    ['b = a or either is 1']
    """
    _settle(solver, relations)
    parts: list[Relation] = []
    classes: dict[str, list[str]] = {}
    for n in names:
        classes.setdefault(solver.find(n), []).append(n)
    for members in classes.values():
        if len(members) > 1:
            by = tuple(dict.fromkeys(i for a, _, i in solver.joins if a in members))
            parts.append(Relation("equal", tuple(members), " = ".join(members), by))
    seen = set()
    for kind, a, b, imposed in relations:
        ra, rb = solver.find(a), solver.find(b)
        da, db = solver.sizes[ra], solver.sizes[rb]
        if ra == rb or db == ONE or (kind == "or1" and da == ONE) or (ra, rb, kind) in seen:
            continue
        seen.add((ra, rb, kind))
        if kind == "or1":
            text = f"{rb} = {ra} or either is 1"
            parts.append(Relation("equal-or-1", (ra, rb), text, (imposed,)))
        else:
            parts.append(Relation("one-or-equal", (rb, ra), f"{rb} = {ra} or 1", (imposed,)))
    return parts
