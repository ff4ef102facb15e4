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
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Final

from bcast.core.arithmetic import factors, plus, product
from bcast.core.conditions import Condition, readable
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.modes import Mode
from bcast.core.polynomials import cancelled, expanded
from bcast.models.domain import (
    BoundRecord,
    CountRecord,
    DimDomain,
    Domain,
    Imposed,
    IndexRecord,
    PlanRecord,
    ProductRecord,
    Relation,
    Requirement,
    Sizes,
    WindowRecord,
    union,
)
from bcast.models.domain_collect import NOT_COLLECTED, Record
from bcast.models.domain_terms import (
    ONE,
    ONE_WAY_TARGET,
    Dims,
    Solver,
    Test,
    column_of,
    column_test,
    grid_boxes,
    impose,
    product_test,
    projections,
    relation,
    search,
)
from bcast.models.graph import Graph

__all__ = ["solve_domain"]


def solve_domain(graph: Graph, records: Sequence[Record], bound: Mapping[str, int]) -> Domain:
    """Turn the checker's records into the model's `Domain` (``bound``: dims given values).

    Examples
    --------
        >>> from bcast.core.planning import plan
        >>> from bcast.core.conditions import find_conditions
        >>> from bcast.core.shape import Shape
        >>> shapes = {"x": Shape.parse("[h,w]"), "y": Shape.parse("[32,w]")}
    >>> g = Graph("m.onnx", "onnx", shapes=shapes)
        >>> p = plan(Shape.parse("[h,w]"), Shape.parse("[32,w]"), mode="none")
        >>> rec = PlanRecord("add", "Add", p, tuple(find_conditions(p, ["x", "y"])))
        >>> [(d.name, d.text) for d in solve_domain(g, [rec], {}).dims]
        [('h', '32'), ('w', 'any')]
    """
    dims = Dims(graph, bound)
    solver = Solver(dims.names)
    relations: list[tuple[str, str, str, Imposed]] = []
    others: list[Relation] = []
    requirements: list[Requirement] = []
    failed: list[Imposed] = []
    searched: dict[object, Sizes] = {}
    for record in records:
        if not isinstance(record, PlanRecord):  # what an operator that carries dims requires
            _REQUIRES[type(record)](dims, record, solver, others, requirements, failed)
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
    _settle(solver, relations)
    for (names, _), (test, constants, by) in solver.grids.items():
        allowed = [solver.sizes[solver.find(n)] for n in names]
        for name, sizes in zip(names, projections(test, names, constants, allowed), strict=True):
            if sizes is not None:
                solver.cut(name, sizes, by)
    _settle(solver, relations)
    return _domain(graph, dims, solver, relations, others, requirements, failed)


def _settle(solver: Solver, relations: list[tuple[str, str, str, Imposed]]) -> None:
    """Apply the relations between plain dims until nothing changes."""
    changed, rounds = True, 0
    while changed and rounds < 100:
        changed, rounds = False, rounds + 1
        for kind, a, b, by in relations:
            changed |= solver.relate(kind, a, b, by)


def _condition(
    dims: Dims,
    record: PlanRecord,
    cond: Condition,
    solver: Solver,
    relations: list[tuple[str, str, str, Imposed]],
    others: list[Relation],
    requirements: list[Requirement],
    searched: dict[object, Sizes],
) -> None:
    assert record.plan is not None
    axis = cond.axis if record.axis is None or cond.axis < record.axis else cond.axis + 1
    by = Imposed(record.node, record.op, axis, readable(cond.text, dims.expressions))
    column = column_of(record.plan, cond.axis)
    mode = record.plan.mode
    test = column_test(dims, column, mode)
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
            searched[key] = search(test, symbol, constants)
        solver.cut(symbol, searched[key], by)
    elif exprs:
        # The same requirement at every layer: said once, without the value it was seen on.
        text = re.sub(r" \(axis \d+ of [^()]*\)$", "", cond.text.removeprefix("fails unless "))
        by = replace(by, reason=re.sub(r" \(axis \d+ of [^()]*\)$", "", by.reason))
        constants = [c for _, d, s in kept if s for c in dims.expr(d).constants]
        others.append(relation(text, free, by, solver, test, constants))
    else:
        _plain(kept, mode, by, solver, relations)


def _plain(
    kept: list[tuple[int, Dim, frozenset[str] | None]],
    mode: Mode,
    by: Imposed,
    solver: Solver,
    relations: list[tuple[str, str, str, Imposed]],
) -> None:
    """Plain symbols and static sizes at one axis: per-dim cuts and pairwise relations."""
    target = ONE_WAY_TARGET.get(mode)
    dims = [(k, d) for k, d, s in kept if s is not None]
    if target is not None:
        into = [d for k, d in dims if k == target][:1]
        for k, b in dims:
            if k == target or not into or into[0].definitely_equal(b) or b.definitely_one():
                continue
            a = into[0]
            if a.is_static and b.name is not None:
                solver.cut(b.name, union(ONE, ((a.lo, a.lo),)), by)
            elif b.is_static and a.name is not None:
                solver.cut(a.name, ((b.lo, b.lo),), by)
            elif a.name is not None and b.name is not None:
                relations.append(("1way", a.name, b.name, by))
        return
    statics = {d.lo for _, d in dims if d.is_static and (mode is Mode.NONE or d.lo != 1)}
    named = list(dict.fromkeys(d.name for _, d in dims if d.name is not None))
    if statics:
        n = min(statics)
        allowed: Sizes = ((n, n),) if mode is Mode.NONE else union(ONE, ((n, n),))
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
    dims: Dims,
    record: ProductRecord,
    solver: Solver,
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
    test = product_test(dims, record.data, record.target)
    if not named:  # the dims that decide cancel: the target's count is met or never
        requirements.append(Requirement(by, free, test))
        if test({}) is False:
            failed.append(by)
        return
    words = f"{shown} must {verb} {wanted}"
    impose(by, free, test, [wanted, statics], words, solver, requirements, failed, others)


def _count(
    dims: Dims,
    record: CountRecord,
    solver: Solver,
    others: list[Relation],
    requirements: list[Requirement],
    failed: list[Imposed],
) -> None:
    """Require a Reshape to a computed target to keep the element count.

    Both sides are written as products of factors (``s70*s72`` is ``s70`` times ``s72``);
    factors on both sides cancel, and nothing is required when nothing is left.
    """
    data = [f for d in record.data.dims for f in factors(dims.expr(d))]
    output = [f for d in record.output.dims for f in factors(dims.expr(d))]
    for factor in list(data):
        if factor.op != "int" and factor in output:
            data.remove(factor)  # the same symbol or expression on both sides cancels
            output.remove(factor)
    left, right = product(data), product(output)
    if left == right:
        return
    free = left.symbols | right.symbols
    if not free <= dims.inputs:
        return  # a dim the user does not control (ONNX's unk__): not a requirement on inputs

    words = f"{left} must equal {right}"
    by = Imposed(record.node, record.op, None, f"Reshape: {words} (element counts)")
    test = _compared(left, right, operator.eq)
    constants = [*left.constants, *right.constants]
    impose(by, free, test, constants, words, solver, requirements, failed, others)


def _compared(left: Expr, right: Expr, holds: Callable[[int, int], bool]) -> Test:
    """Return the test that ``holds(left, right)`` at a point (None where a dim is unbound)."""

    def test(bindings: Mapping[str, int]) -> bool | None:
        a, b = left.evaluate(bindings), right.evaluate(bindings)
        return None if a is None or b is None else holds(a, b)

    return test


def _index(
    dims: Dims,
    record: IndexRecord,
    solver: Solver,
    others: list[Relation],
    requirements: list[Requirement],
    failed: list[Imposed],
) -> None:
    """Require a Gather's computed indices to stay inside the data's rows.

    Both sides are expanded and divided by the dims every term shares (each at least 1):
    ``(batch - 1)*mask_seq + mask_seq`` rows of ``mask_batch*mask_seq`` is ``batch`` of
    ``mask_batch``.
    """
    size = dims.expr(record.size)
    if not (record.rows.symbols | size.symbols) <= dims.inputs:
        return  # a dim the user does not control: not a requirement on inputs
    rows, room = cancelled(record.rows, size)
    free = rows.symbols | room.symbols
    words = f"{rows} must be at most {room}"
    reason = f"indices up to {expanded(plus(record.rows, -1))} read {size} rows: {words}"
    by = Imposed(record.node, record.op, None, reason)
    test = _compared(rows, room, operator.le)
    constants = [*rows.constants, *room.constants]
    impose(by, free, test, constants, words, solver, requirements, failed, others)


def _bound(
    dims: Dims,
    record: BoundRecord,
    solver: Solver,
    others: list[Relation],
    requirements: list[Requirement],
    failed: list[Imposed],
) -> None:
    """Require a Gather's Range of positions to end inside its table."""
    free = dims.symbols(record.count)
    if free is None:
        return
    room = record.size - record.start
    shown = str(dims.expressions.get(record.count.name or "", record.count))
    last = f"{shown} - 1" if record.start == 0 else f"{record.start} + {shown} - 1"
    reason = (
        f"positions {record.start}..{last} index a table of {record.size} rows: "
        f"fails when {shown} > {room}"
    )
    by = Imposed(record.node, record.op, None, reason)
    test = _compared(dims.expr(record.count), Expr("int", value=room), operator.le)
    impose(by, free, test, [room], reason, solver, requirements, failed, None)  # one dim


def _window(
    dims: Dims,
    record: WindowRecord,
    solver: Solver,
    others: list[Relation],
    requirements: list[Requirement],
    failed: list[Imposed],
) -> None:
    """Require a Conv's or pooling's window to fit: each spatial output dim at least 1."""
    free = dims.symbols(record.size)
    if not free:
        return
    shown = dims.expr(record.size)
    by = Imposed(
        record.node,
        record.op,
        record.axis,
        f"output size {shown} must be at least 1: the window must fit the input",
    )

    test = _compared(shown, Expr("int", value=1), operator.ge)
    impose(by, free, test, shown.constants, f"{shown} >= 1", solver, requirements, failed, others)


_REQUIRES: Final[dict[type, Callable[..., None]]] = {
    ProductRecord: _product,
    CountRecord: _count,
    BoundRecord: _bound,
    IndexRecord: _index,
    WindowRecord: _window,
}
"""How each record of an operator that carries dims becomes requirements."""


def _with_boxes(relations: list[Relation], solver: Solver) -> list[Relation]:
    """Give each requirement over two dims the sizes that hold it, within each dim's own."""
    out = []
    for r in relations:
        grid = solver.grids.get((r.dims, r.text)) if len(r.dims) == 2 else None
        if grid is not None:
            allowed = [solver.sizes[solver.find(n)] for n in r.dims]
            top, boxes = grid_boxes(grid[0], r.dims, grid[1], allowed)
            r = replace(r, boxes=boxes, searched=top)
        out.append(r)
    return out


def _merged(relations: Sequence[Relation]) -> list[Relation]:
    """One relation per requirement: the nodes that impose the same one are listed together."""
    out: dict[tuple[str, tuple[str, ...], str], Relation] = {}
    for r in relations:
        key = (r.kind, r.dims, r.text)
        found = out.get(key)
        out[key] = r if found is None else replace(found, imposed=found.imposed + r.imposed)
    return list(out.values())


def _domain(
    graph: Graph,
    dims: Dims,
    solver: Solver,
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
        if ra == rb or db == ONE or (kind == "or1" and da == ONE) or (ra, rb, kind) in seen:
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
        tuple(out),
        tuple(_with_boxes(_merged(parts + others), solver)),
        empty,
        inputs,
        tuple(requirements),
        NOT_COLLECTED,
        at,
    )
