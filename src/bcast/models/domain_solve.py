"""Solve the requirements shape propagation finds into a `Domain` (issue 17).

The checker hands over, node by node in graph order, what it saw (`bcast.models.domain_collect`):
each broadcast's plan with its "fails unless" conditions, MatMul's, Concat's and Reshape's
requirements. Each becomes a `Requirement` decidable at any point, and a readable part of
the domain:

- an expression of one input dim (``Min(64, s41)``): the sizes at which it holds, decided
  size by size (1 to 4096 or more, as `find_conditions` searches); where the last 64 sizes
  agree, their verdict stands for all larger ones;
- plain dims with static sizes: ``batch ∈ {1, 3}``, ``seq = 64``;
- plain dims with each other: ``a = b`` (exact), ``a = b or either is 1`` (two-way),
  ``b = a or 1`` (one-way);
- anything else (expressions over several dims): kept as a relation in the checker's words.

The solver is interval arithmetic over sizes with union-find for equalities, run to a fixed
point: a two-way relation whose dims cannot be 1 is an equality; ``b = a or 1`` narrows b to
a's sizes and 1. No general solver is needed for these forms (see docs/domain.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from bcast.core.conditions import SEARCHED, Condition, readable, sizes_broadcast
from bcast.core.dim import Dim
from bcast.core.modes import Mode
from bcast.core.plans import Plan
from bcast.core.shape import Shape
from bcast.models.domain import (
    ANY,
    DimDomain,
    Domain,
    Imposed,
    PlanRecord,
    ProductRecord,
    Relation,
    Requirement,
    Sizes,
    contains,
    intersect,
    union,
)
from bcast.models.domain_collect import NOT_COLLECTED, Record
from bcast.models.graph import Graph

__all__ = ["solve_domain"]

Test = Callable[[Mapping[str, int]], bool | None]

_MOST: Final = 1 << 15
_TAIL: Final = 64
_ONE: Final[Sizes] = ((1, 1),)
_ONE_WAY_TARGET: Final[dict[Mode, int]] = {Mode.UNIDIRECTIONAL: 0, Mode.PDPD: 0, Mode.EXPLICIT: 1}


# -- requirements --------------------------------------------------------------------------


class _Dims:
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

    def value(self, dim: Dim, bindings: Mapping[str, int]) -> int | None:
        if dim.is_static:
            return dim.lo
        assert dim.name is not None
        expr = self.expressions.get(dim.name)
        return expr.evaluate(bindings) if expr is not None else bindings.get(dim.name)


def _column(p: Plan, axis: int) -> list[tuple[int, Dim]]:
    column: list[tuple[int, Dim]] = []
    for k, (shape, axes) in enumerate(zip(p.shapes, p.alignment, strict=True)):
        if axes is None or shape.rank is None:
            continue
        column.extend((k, d) for d, a in zip(shape.dims, axes, strict=True) if a == axis)
    return column


def _column_test(dims: _Dims, column: list[tuple[int, Dim]], mode: Mode) -> Test:
    kept = [(k, d) for k, d in column if dims.symbols(d) is not None]
    target = _ONE_WAY_TARGET.get(mode)

    def test(bindings: Mapping[str, int]) -> bool | None:
        values = []
        for k, d in kept:
            v = dims.value(d, bindings)
            if v is None or v < 0:
                return None
            values.append((k, v))
        return sizes_broadcast(values, mode, target)

    return test


def _product_test(dims: _Dims, data: Shape, target: tuple[int, ...]) -> Test:
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


def _search(test: Test, symbol: str, constants: Sequence[int]) -> Sizes:
    """Decide ``test`` size by size up to a bound past the constants.

    Where the last `_TAIL` sizes decided agree, that verdict stands for all larger sizes;
    otherwise (a periodic set) the sizes stop at the bound (`Domain.first_failure` still
    decides any point exactly).
    """
    top = min(max(SEARCHED, 2 * max((abs(c) for c in constants), default=0) + 64), _MOST)
    verdicts = [test({symbol: value}) is not False for value in range(1, top + 1)]
    allowed: list[tuple[int, int | None]] = [(v, v) for v, ok in enumerate(verdicts, start=1) if ok]
    if all(verdicts[-_TAIL:]):
        allowed.append((top, None))
    return union((), tuple(allowed))


# -- solving -------------------------------------------------------------------------------


class _Solver:
    def __init__(self, names: list[str]) -> None:
        self.parent = {n: n for n in names}
        self.sizes: dict[str, Sizes] = {n: ANY for n in names}
        self.cuts: dict[str, list[Imposed]] = {n: [] for n in names}
        self.joins: list[tuple[str, str, Imposed]] = []

    def find(self, name: str) -> str:
        while self.parent[name] != name:
            name = self.parent[name]
        return name

    def cut(self, name: str, sizes: Sizes, by: Imposed) -> bool:
        root = self.find(name)
        narrowed = intersect(self.sizes[root], sizes)
        if narrowed == self.sizes[root]:
            return False
        self.sizes[root] = narrowed
        if by not in self.cuts[root]:
            self.cuts[root].append(by)
        return True

    def join(self, a: str, b: str, by: Imposed) -> bool:
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
            changed |= self.cut(b, union(da, _ONE), by)
        if kind == "or1" and not contains(db, 1):
            changed |= self.cut(a, union(db, _ONE), by)
        return changed


def solve_domain(graph: Graph, records: Sequence[Record], bound: Mapping[str, int]) -> Domain:
    """Turn the checker's records into the model's `Domain` (``bound``: dims given values).

    Examples
    --------
        >>> from bcast.core.planning import plan
        >>> from bcast.core.conditions import find_conditions
        >>> shapes = {"x": Shape.parse("[h,w]"), "y": Shape.parse("[32,w]")}
    >>> g = Graph("m.onnx", "onnx", shapes=shapes)
        >>> p = plan(Shape.parse("[h,w]"), Shape.parse("[32,w]"), mode="none")
        >>> rec = PlanRecord("add", "Add", p, tuple(find_conditions(p, ["x", "y"])))
        >>> [(d.name, d.text) for d in solve_domain(g, [rec], {}).dims]
        [('h', '32'), ('w', 'any')]
    """
    dims = _Dims(graph, bound)
    solver = _Solver(dims.names)
    relations: list[tuple[str, str, str, Imposed]] = []
    others: list[Relation] = []
    requirements: list[Requirement] = []
    failed: list[Imposed] = []
    searched: dict[object, Sizes] = {}
    for record in records:
        if isinstance(record, ProductRecord):
            _product(dims, record, solver, others, requirements, failed)
            continue
        if record.plan is None:
            at = Imposed(
                record.node, record.op, record.axis, readable(record.error, dims.expressions)
            )
            failed.append(at)
            requirements.append(Requirement(at, frozenset(), lambda _: False))
            continue
        for cond in record.conditions:
            _condition(dims, record, cond, solver, relations, others, requirements, searched)
    changed, rounds = True, 0
    while changed and rounds < 100:
        changed, rounds = False, rounds + 1
        for kind, a, b, by in relations:
            changed |= solver.relate(kind, a, b, by)
    return _domain(graph, dims, solver, relations, others, requirements, failed)


def _condition(
    dims: _Dims,
    record: PlanRecord,
    cond: Condition,
    solver: _Solver,
    relations: list[tuple[str, str, str, Imposed]],
    others: list[Relation],
    requirements: list[Requirement],
    searched: dict[object, Sizes],
) -> None:
    assert record.plan is not None
    axis = cond.axis if record.axis is None or cond.axis < record.axis else cond.axis + 1
    by = Imposed(record.node, record.op, axis, readable(cond.text, dims.expressions))
    column = _column(record.plan, cond.axis)
    mode = record.plan.mode
    test = _column_test(dims, column, mode)
    kept = [(k, d, dims.symbols(d)) for k, d in column]
    free = frozenset().union(*(s for _, _, s in kept if s is not None))
    requirements.append(Requirement(by, free, test))
    if not free:
        return
    exprs = any(d.name in dims.expressions for _, d, s in kept if s)
    if exprs and len(free) == 1:
        (symbol,) = free
        key = (mode, tuple((k, d) for k, d, s in kept if s is not None))
        if key not in searched:  # a model repeats its columns in every layer
            constants = [
                c
                for _, d, s in kept
                if s and d.name in dims.expressions
                for c in dims.expressions[d.name].constants
            ]
            constants += [d.lo for _, d, s in kept if s is not None and d.is_static]
            searched[key] = _search(test, symbol, constants)
        solver.cut(symbol, searched[key], by)
    elif exprs:
        text = cond.text.removeprefix("fails unless ")
        others.append(Relation("holds", tuple(sorted(free)), text, (by,)))
    else:
        _plain(kept, mode, by, solver, relations)


def _plain(
    kept: list[tuple[int, Dim, frozenset[str] | None]],
    mode: Mode,
    by: Imposed,
    solver: _Solver,
    relations: list[tuple[str, str, str, Imposed]],
) -> None:
    """Plain symbols and static sizes at one axis: per-dim cuts and pairwise relations."""
    target = _ONE_WAY_TARGET.get(mode)
    dims = [(k, d) for k, d, s in kept if s is not None]
    if target is not None:
        into = [d for k, d in dims if k == target][:1]
        for k, b in dims:
            if k == target or not into or into[0].definitely_equal(b) or b.definitely_one():
                continue
            a = into[0]
            if a.is_static and b.name is not None:
                solver.cut(b.name, union(_ONE, ((a.lo, a.lo),)), by)
            elif b.is_static and a.name is not None:
                solver.cut(a.name, ((b.lo, b.lo),), by)
            elif a.name is not None and b.name is not None:
                relations.append(("1way", a.name, b.name, by))
        return
    statics = {d.lo for _, d in dims if d.is_static and (mode is Mode.NONE or d.lo != 1)}
    named = list(dict.fromkeys(d.name for _, d in dims if d.name is not None))
    if statics:
        n = min(statics)
        allowed: Sizes = ((n, n),) if mode is Mode.NONE else union(_ONE, ((n, n),))
        for name in named:
            solver.cut(name, allowed, by)
        return
    for i, first in enumerate(named):
        for second in named[i + 1 :]:
            if mode is Mode.NONE:
                solver.join(first, second, by)
            else:
                relations.append(("or1", first, second, by))


def _product(
    dims: _Dims,
    record: ProductRecord,
    solver: _Solver,
    others: list[Relation],
    requirements: list[Requirement],
    failed: list[Imposed],
) -> None:
    data = record.data.dims
    found = [dims.symbols(d) for d in data]
    if any(s is None for s in found):
        return
    free = frozenset().union(*(s for s in found if s is not None))
    kept = list(range(len(data)))
    for i, v in enumerate(record.target):
        if v == 0 and i in kept:
            kept.remove(i)  # copies the data's dim: it cancels
    rest = [data[i] for i in kept]
    statics = math.prod(d.lo for d in rest if d.is_static)
    wanted = math.prod(v for v in record.target if v > 0)
    open_ = -1 in record.target
    named = [d for d in rest if not d.is_static]
    if named and open_ and wanted and statics % wanted == 0:
        return  # a multiple whatever the dims
    verb = "be a multiple of" if open_ else "equal"
    shown = "*".join(str(dims.expressions.get(d.name or "", d)) for d in rest) or "1"
    text = f"Reshape to {list(record.target)}: {shown} must {verb} {wanted}"
    by = Imposed(record.node, record.op, None, text)
    test = _product_test(dims, record.data, record.target)
    requirements.append(Requirement(by, free, test))
    if not free or not named:
        if test({}) is False:
            failed.append(by)
    elif len(free) == 1:
        (symbol,) = free
        solver.cut(symbol, _search(test, symbol, [wanted, statics]), by)
    else:
        others.append(
            Relation("holds", tuple(sorted(free)), f"{shown} must {verb} {wanted}", (by,))
        )


def _domain(
    graph: Graph,
    dims: _Dims,
    solver: _Solver,
    relations: list[tuple[str, str, str, Imposed]],
    others: list[Relation],
    requirements: list[Requirement],
    failed: list[Imposed],
) -> Domain:
    out = [
        DimDomain(n, solver.sizes[solver.find(n)], tuple(solver.cuts[solver.find(n)]))
        for n in dims.names
    ]
    parts: list[Relation] = []
    classes: dict[str, list[str]] = {}
    for n in dims.names:
        classes.setdefault(solver.find(n), []).append(n)
    for members in classes.values():
        if len(members) > 1:
            by = tuple(dict.fromkeys(i for a, _, i in solver.joins if a in members))
            parts.append(Relation("equal", tuple(members), " = ".join(members), by))
    seen = set()
    for kind, a, b, imposed in relations:
        ra, rb = solver.find(a), solver.find(b)
        da, db = solver.sizes[ra], solver.sizes[rb]
        if ra == rb or db == _ONE or (kind == "or1" and da == _ONE) or (ra, rb, kind) in seen:
            continue
        seen.add((ra, rb, kind))
        if kind == "or1":
            parts.append(
                Relation("equal-or-1", (ra, rb), f"{rb} = {ra} or either is 1", (imposed,))
            )
        else:
            parts.append(Relation("one-or-equal", (rb, ra), f"{rb} = {ra} or 1", (imposed,)))
    empty = ""
    at: tuple[Imposed, ...] = ()
    if failed:
        at = (failed[0],)
        empty = f"{failed[0]} fails for every size: {failed[0].reason}"
    else:
        for root, members in classes.items():
            if not solver.sizes[root]:
                at = tuple(solver.cuts[root])
                cuts = "; ".join(f"{i}: {i.reason}" for i in at)
                empty = f"{' = '.join(members)} has no size left ({cuts})"
                break
    inputs = tuple(
        (name, shape)
        for name, shape in graph.shapes.items()
        if shape.rank is not None and any(d.name is not None for d in shape.dims)
    )
    return Domain(
        tuple(out), tuple(parts + others), empty, inputs, tuple(requirements), NOT_COLLECTED, at
    )
