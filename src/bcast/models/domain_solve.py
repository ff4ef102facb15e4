"""Solve the requirements shape propagation finds into a `Domain` (issues 17 and 37).

The checker hands over, node by node in graph order, what it saw (`bcast.models.domain_collect`):
each broadcast's plan with its "fails unless" conditions, MatMul's, Concat's and Reshape's
requirements, windows, index bounds and the relations of a node's shape arithmetic
(`ArithmeticRecord`). Each becomes a `Requirement`, decidable at any point, with its
``region``: the set of input sizes that hold it, an isl set (`bcast.models.presburger`).
The domain is the intersection of the regions, decided exactly and without a bound; each
dim's sizes are its projection (with the congruence they share: ``height`` a multiple of
2), and the nodes that cut them are named.

A requirement that is not a Presburger set (a product of dims against another product, a
division by a dim) has no region: it is said as a relation that is not decided as a set,
and decided exactly at each point. Relations between plain dims (``a = b``, ``a = b or
either is 1``) are said from union-find over the dims (see docs/domain.md).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from bcast.core.arithmetic import factors, plus, product
from bcast.core.conditions import Condition, readable
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.modes import Mode
from bcast.core.polynomials import cancelled, expanded
from bcast.models.condition_sets import sizes_text
from bcast.models.domain import (
    ArithmeticRecord,
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
    WindowRecord,
)
from bcast.models.domain_answers import decided, emptied, implied, inexact_text
from bcast.models.domain_collect import NOT_COLLECTED, Record
from bcast.models.domain_terms import (
    ONE_WAY_TARGET,
    Dims,
    Solver,
    Test,
    column_of,
    column_test,
    imposers,
    product_test,
    said_relations,
)
from bcast.models.graph import Graph
from bcast.models.presburger import NotAffine, Space

__all__ = ["solve_domain"]

_PIECES: Final = 256  # pieces of the domain's set times a requirement's: more is kept apart


class _Work:
    """What solving collects: requirements, relations, and the isl space of the dims."""

    def __init__(self, dims: Dims) -> None:
        self.dims = dims
        self.space: Space | None = Space(dims.names) if dims.names else None
        self.solver = Solver(dims.names)
        self.relations: list[tuple[str, str, str, Imposed]] = []
        self.others: list[Relation] = []
        self.requirements: list[Requirement] = []
        self.failed: list[Imposed] = []
        self.regions: dict[object, Any] = {}  # a model repeats its requirements in every layer
        self.relation_regions: dict[object, Any] = {}

    def region(self, key: object, make: Callable[[Space], Any]) -> Any:
        """Return the isl set ``make`` builds (cached under ``key``); None where not affine."""
        if self.space is None:
            return None
        if key not in self.regions:
            try:
                self.regions[key] = make(self.space)
            except (NotAffine, self.space.isl.Error):  # isl's own limits: not decided as a set
                self.regions[key] = None
        return self.regions[key]

    def impose(
        self,
        by: Imposed,
        free: frozenset[str],
        test: Test,
        region: Any,
        text: str | None,
        formula: tuple[Any, ...] | None = None,
    ) -> None:
        """Record a requirement: it fails outright, cuts one dim, or relates several.

        Over several dims it is also said as a relation (``text``; None: not said), unless
        isl proves it holds at every size.
        """
        self.requirements.append(Requirement(by, free, test, region, formula))
        if not free:
            if test({}) is False:
                self.failed.append(by)
        elif len(free) > 1 and text is not None:
            if region is None or not self.space or not self.space.sizes.is_subset(region):
                self.relation(text, free, by, region)  # not when true everywhere
        elif region is None:  # over one dim, not a set: said, so the dim's sizes claim no more
            self.relation(text or by.reason, free, by, region)

    def relation(self, text: str, free: frozenset[str], by: Imposed, region: Any) -> None:
        """Say a requirement over several dims as a relation (its region kept for its boxes)."""
        names = tuple(sorted(free))
        self.relation_regions.setdefault((names, text), region)
        self.others.append(Relation("holds", names, text, (by,), decided=region is not None))


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
    work = _Work(Dims(graph, bound))
    for record in records:
        if not isinstance(record, PlanRecord):  # what an operator that carries dims requires
            _REQUIRES[type(record)](work, record)
            continue
        if record.plan is None:
            reason = readable(record.error, work.dims.expressions)
            at = Imposed(record.node, record.op, record.axis, reason)
            work.failed.append(at)
            work.requirements.append(Requirement(at, frozenset(), lambda _: False))
            continue
        for cond in record.conditions:
            _condition(work, record, cond)
    return _domain(graph, work)


def _condition(work: _Work, record: PlanRecord, cond: Condition) -> None:
    assert record.plan is not None
    dims = work.dims
    axis = cond.axis if record.axis is None or cond.axis < record.axis else cond.axis + 1
    by = Imposed(record.node, record.op, axis, readable(cond.text, dims.expressions))
    column = column_of(record.plan, cond.axis)
    mode = record.plan.mode
    kept = [(k, d, dims.symbols(d)) for k, d in column]
    values = tuple((k, dims.expr(d)) for k, d, s in kept if s is not None)
    free = frozenset().union(*(s for _, _, s in kept if s is not None))
    region = work.region((mode, values), lambda space: space.column(values, mode))
    test = column_test(dims, column, mode)
    work.requirements.append(Requirement(by, free, test, region, ("column", values, mode)))
    if not free:
        return
    exprs = any(d.name in dims.expressions for _, d, s in kept if s)
    if exprs and (len(free) > 1 or region is None):  # over several dims, or not a set
        # The same requirement at every layer: said once, without the value it was seen on.
        text = re.sub(r" \(axis \d+ of [^()]*\)$", "", cond.text.removeprefix("fails unless "))
        by = replace(by, reason=re.sub(r" \(axis \d+ of [^()]*\)$", "", by.reason))
        work.relation(text, free, by, region)
    elif not exprs:
        _plain(kept, mode, by, work.solver, work.relations)


def _plain(
    kept: list[tuple[int, Dim, frozenset[str] | None]],
    mode: Mode,
    by: Imposed,
    solver: Solver,
    relations: list[tuple[str, str, str, Imposed]],
) -> None:
    """Plain symbols at one axis: the relations between them, to be said."""
    target = ONE_WAY_TARGET.get(mode)
    dims = [(k, d) for k, d, s in kept if s is not None]
    if target is not None:
        into = [d for k, d in dims if k == target][:1]
        for k, b in dims:
            if k == target or not into or into[0].definitely_equal(b) or b.definitely_one():
                continue
            a = into[0]
            if a.name is not None and b.name is not None:
                relations.append(("1way", a.name, b.name, by))
        return
    if any(d.is_static and (mode is Mode.NONE or d.lo != 1) for _, d in dims):
        return  # a static size: each dim's own sizes say it
    named = list(dict.fromkeys(d.name for _, d in dims if d.name is not None))
    for i, first in enumerate(named):
        for second in named[i + 1 :]:
            if mode is Mode.NONE:
                solver.join(first, second, by)
            else:
                relations.append(("or1", first, second, by))


def _product(work: _Work, record: ProductRecord) -> None:
    dims = work.dims
    data = record.data.dims
    found = [dims.symbols(d) for d in data]
    if any(s is None for s in found):
        return
    free = frozenset().union(*(s for s in found if s is not None))
    kept = [i for i in range(len(data)) if not (i < len(record.target) and record.target[i] == 0)]
    rest = [data[i] for i in kept]  # a 0 copies the data's dim: it cancels
    statics = math.prod(d.lo for d in rest if d.is_static)
    wanted = math.prod(v for v in record.target if v > 0)
    open_ = -1 in record.target
    named = [d for d in rest if not d.is_static]
    if named and open_ and wanted and statics % wanted == 0:
        return  # a multiple whatever the dims
    verb = "be a multiple of" if open_ else "equal"
    exprs = tuple(dims.expr(d) for d in named)
    total = product([Expr("int", value=statics), *exprs])  # a sum's factor in parentheses
    text = f"Reshape to {list(record.target)}: {total} must {verb} {wanted}"
    by = Imposed(record.node, record.op, None, text)
    test = product_test(dims, record.data, record.target)
    if not named:  # the dims that decide cancel: the target's count is met or never
        work.requirements.append(Requirement(by, free, test))
        if test({}) is False:
            work.failed.append(by)
        return

    def make(space: Space) -> Any:
        if open_:
            if not wanted:
                return space.universe.subtract(space.universe)
            return space.product_multiple(exprs, wanted // math.gcd(wanted, statics))
        if wanted % statics:
            return space.universe.subtract(space.universe)
        return space.product_equals(exprs, wanted // statics)

    region = work.region(("product", exprs, statics, wanted, open_), make)
    left = Expr("%", (total, Expr("int", value=wanted or 1))) if open_ else total
    goal = Expr("int", value=0 if open_ else wanted)
    formula = ("compare", left, "==", goal)
    work.impose(by, free, test, region, f"{total} must {verb} {wanted}", formula)


def _count(work: _Work, record: CountRecord) -> None:
    """Require a Reshape to a computed target to keep the element count.

    Both sides are written as products of factors (``s70*s72`` is ``s70`` times ``s72``);
    factors on both sides cancel, and nothing is required when nothing is left.
    """
    dims = work.dims
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
    region = work.region(("==", left, right), lambda space: space.compare(left, "==", right))
    formula = ("compare", left, "==", right)
    work.impose(by, free, _compared(left, right, operator.eq), region, words, formula)


def _compared(left: Expr, right: Expr, holds: Callable[[int, int], bool]) -> Test:
    """Return the test that ``holds(left, right)`` at a point (None where a dim is unbound)."""

    def test(bindings: Mapping[str, int]) -> bool | None:
        a, b = left.evaluate(bindings), right.evaluate(bindings)
        return None if a is None or b is None else holds(a, b)

    return test


def _index(work: _Work, record: IndexRecord) -> None:
    """Require a Gather's computed indices to stay inside the data's rows.

    Both sides are expanded and divided by the dims every term shares (each at least 1):
    ``(batch - 1)*mask_seq + mask_seq`` rows of ``mask_batch*mask_seq`` is ``batch`` of
    ``mask_batch``.
    """
    dims = work.dims
    size = dims.expr(record.size)
    if not (record.rows.symbols | size.symbols) <= dims.inputs:
        return  # a dim the user does not control: not a requirement on inputs
    rows, room = cancelled(record.rows, size)
    if rows == room:
        return  # as many rows as indices, whatever the sizes
    free = rows.symbols | room.symbols
    words = f"{rows} must be at most {room}"
    reason = f"indices up to {expanded(plus(record.rows, -1))} read {size} rows: {words}"
    by = Imposed(record.node, record.op, None, reason)
    region = work.region(("<=", rows, room), lambda space: space.compare(rows, "<=", room))
    formula = ("compare", rows, "<=", room)
    work.impose(by, free, _compared(rows, room, operator.le), region, words, formula)


def _bound(work: _Work, record: BoundRecord) -> None:
    """Require a Gather's Range of positions to end inside its table."""
    dims = work.dims
    free = dims.symbols(record.count)
    if free is None:
        return
    room = Expr("int", value=record.size - record.start)
    shown = str(dims.expressions.get(record.count.name or "", record.count))
    last = f"{shown} - 1" if record.start == 0 else f"{record.start} + {shown} - 1"
    last = str(record.start + (record.count.lo or 0) - 1) if record.count.is_static else last
    reason = (
        f"positions {record.start}..{last} index a table of {record.size} rows: "
        f"fails when {shown} > {room}"
    )
    by = Imposed(record.node, record.op, None, reason)
    count = dims.expr(record.count)
    region = work.region(("<=", count, room), lambda space: space.compare(count, "<=", room))
    formula = ("compare", count, "<=", room)
    work.impose(by, free, _compared(count, room, operator.le), region, None, formula)


def _window(work: _Work, record: WindowRecord) -> None:
    """Require a Conv's or pooling's window to fit: each spatial output dim at least 1."""
    dims = work.dims
    free = dims.symbols(record.size)
    if not free:
        return
    shown = dims.expr(record.size)
    reason = f"output size {shown} must be at least 1: the window must fit the input"
    by = Imposed(record.node, record.op, record.axis, reason)
    one = Expr("int", value=1)
    region = work.region((">=", shown, one), lambda space: space.compare(shown, ">=", one))
    formula = ("compare", shown, ">=", one)
    work.impose(by, free, _compared(shown, one, operator.ge), region, f"{shown} >= 1", formula)


_WORDS: Final = {"==": "must equal", "<=": "must be at most", ">=": "must be at least"}
_HOLDS: Final[dict[str, Callable[[int, int], bool]]] = {
    "==": operator.eq,
    "<=": operator.le,
    ">=": operator.ge,
}


def _arithmetic(work: _Work, record: ArithmeticRecord) -> None:
    """Require a relation of a node's shape arithmetic (``total == past + seq``)."""
    dims = work.dims
    left, right, relation = record.left, record.right, record.relation
    free = left.symbols | right.symbols
    if relation not in _HOLDS or not free <= dims.inputs:
        return  # a dim the user does not control: not a requirement on inputs
    words = f"{left} {_WORDS[relation]} {right}"
    by = Imposed(record.node, record.op, None, record.reason or words)
    region = work.region(
        (relation, left, right), lambda space: space.compare(left, relation, right)
    )
    formula = ("compare", left, relation, right)
    work.impose(by, free, _compared(left, right, _HOLDS[relation]), region, words, formula)


_REQUIRES: Final[dict[type, Callable[[_Work, Any], None]]] = {
    ProductRecord: _product,
    CountRecord: _count,
    BoundRecord: _bound,
    IndexRecord: _index,
    WindowRecord: _window,
    ArithmeticRecord: _arithmetic,
}
"""How each record of an operator that carries dims becomes requirements."""


def _merged(relations: Sequence[Relation]) -> list[Relation]:
    """One relation per requirement: the nodes that impose the same one are listed together."""
    out: dict[tuple[str, tuple[str, ...], str], Relation] = {}
    for r in relations:
        key = (r.kind, r.dims, r.text)
        found = out.get(key)
        out[key] = r if found is None else replace(found, imposed=found.imposed + r.imposed)
    return list(out.values())


def _domain(graph: Graph, work: _Work) -> Domain:
    dims, solver, space = work.dims, work.solver, work.space
    inputs = tuple(
        (name, shape)
        for name, shape in graph.shapes.items()
        if shape.rank is not None and any(d.name is not None for d in shape.dims)
    )
    common: dict[str, Any] = {
        "inputs": inputs,
        "requirements": tuple(work.requirements),
        "not_collected": NOT_COLLECTED,
        "space": space,
    }
    if work.failed:
        at = work.failed[0]
        empty = f"{at} fails for every size: {at.reason}"
        none = tuple(DimDomain(n, ()) for n in dims.names)
        return Domain(none, (), empty, empty_at=(at,), **common)
    if space is None:
        return Domain((), tuple(_merged(work.others)), "", **common)
    regions = [r for r in work.requirements if r.region is not None]
    whole, apart = space.sizes, set()
    for key, region in {id(r.region): r.region for r in regions}.items():
        if whole.n_basic_set() * region.n_basic_set() > _PIECES:
            apart.add(key)  # isl's sets grow with each product's split: decided on its own
            continue
        whole = whole.intersect(region).coalesce()
    regions = [r for r in regions if id(r.region) not in apart]
    if whole.is_empty():
        return emptied(space, dims.names, regions, common)
    out = []
    for name in dims.names:
        sizes, congruence = space.one_dim(whole, name)
        exact = space.exactly(whole, name)
        condition = sizes_text(name, sizes, congruence) if exact else ""
        shown = "" if exact else inexact_text(space, whole, name, regions)
        imposed = imposers(space, name, regions, whole)
        congruence = congruence if exact else None
        out.append(DimDomain(name, sizes, imposed, congruence, condition or shown, exact=exact))
        solver.sizes[name] = sizes
    parts = said_relations(dims.names, solver, work.relations)
    merged = _merged(parts + work.others)
    others = [decided(space, whole, r, work.relation_regions, apart) for r in merged]
    by_name = {d.name: d for d in out}
    kept = [
        r for r in others if not implied(space, whole, by_name, r, work.relation_regions, apart)
    ]
    return Domain(tuple(out), tuple(kept), "", **common)
