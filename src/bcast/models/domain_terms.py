"""What the domain solver works with: the user's dims, tests at a point, size searches.

`Dims` says which dims the user controls and evaluates dims (and their expressions) at a
point; `search` and `grid_boxes` decide a requirement size by size over one dim or a grid
of two; `Solver` holds each dim's sizes, with union-find for equal dims
(`bcast.models.domain_solve` turns the checker's records into these).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from bcast.core.conditions import SEARCHED, sizes_broadcast
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
    "MAX_GRIDS",
    "ONE_WAY_TARGET",
    "Dims",
    "Solver",
    "Test",
    "column_of",
    "column_test",
    "grid_boxes",
    "impose",
    "projections",
    "relation",
    "product_test",
    "search",
]

Test = Callable[[Mapping[str, int]], bool | None]

_MOST: Final = 1 << 15
_TAIL: Final = 64
_GRID_LEAST: Final = 160  # a two-dim requirement is decided up to this size at least ...
_GRID: Final = 256  # ... and at most (256 x 256 points)
MAX_GRIDS: Final = 16  # two-dim relations decided on a grid per model (each up to 65,536 points)
_GRID_TAIL: Final = 32  # a grid's last sizes that must agree for its verdict to go on
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


def search(test: Test, symbol: str, constants: Sequence[int]) -> Sizes:
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


def impose(
    by: Imposed,
    free: frozenset[str],
    test: Test,
    constants: Sequence[int],
    text: str,
    solver: Solver,
    requirements: list[Requirement],
    failed: list[Imposed],
    others: list[Relation] | None,
) -> None:
    """Record a requirement and apply it: fails outright, cuts one dim, or relates several.

    Over several dims it becomes a relation in ``others`` (None: left to `first_failure`).
    """
    requirements.append(Requirement(by, free, test))
    if not free:
        if test({}) is False:
            failed.append(by)
    elif len(free) == 1:
        (symbol,) = free
        solver.cut(symbol, search(test, symbol, constants), by)
    elif others is not None:
        others.append(relation(text, free, by, solver, test, constants))


def relation(
    text: str,
    free: frozenset[str],
    by: Imposed,
    solver: Solver,
    test: Test,
    constants: Sequence[int],
) -> Relation:
    """Make the relation of a requirement over several dims (over two: `grid_boxes` at the end)."""
    names = tuple(sorted(free))
    if len(names) == 2 and len(solver.grids) < MAX_GRIDS:
        solver.grids.setdefault((names, text), (test, tuple(constants), by))
    return Relation("holds", names, text, (by,))


class Solver:
    """Each dim's sizes and the nodes cutting them; union-find over dims known equal."""

    def __init__(self, names: list[str]) -> None:
        self.parent = {n: n for n in names}
        self.sizes: dict[str, Sizes] = {n: ANY for n in names}
        self.cuts: dict[str, list[Imposed]] = {n: [] for n in names}
        self.joins: list[tuple[str, str, Imposed]] = []
        # requirements over two dims, decided on a grid once the dims' own sizes are known
        self.grids: dict[tuple[tuple[str, ...], str], tuple[Test, tuple[int, ...], Imposed]] = {}

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


def grid_boxes(
    test: Test, names: tuple[str, ...], constants: Sequence[int], allowed: Sequence[Sizes]
) -> tuple[int, tuple[tuple[tuple[int, int], Sizes], ...]]:
    """Decide a two-dim requirement at every pair of sizes up to a bound past the constants.

    Only the sizes each dim is ``allowed`` on its own are tried. Consecutive sizes of the
    first dim with the same sizes of the second make one box:
    ``(h//8)*(w//8) = 16`` holds in ``32..39 x 32..39``, ``16..23 x 64..71``, ...
    """
    top, rows = _grid(test, names, constants, allowed)
    boxes: list[tuple[tuple[int, int], Sizes]] = []
    start = 1
    for x in range(2, top + 2):
        if x == top + 1 or rows[x - 1] != rows[start - 1]:
            if rows[start - 1]:
                boxes.append(((start, x - 1), rows[start - 1]))
            start = x
    return top, tuple(boxes)


def _grid(
    test: Test,
    names: tuple[str, ...],
    constants: Sequence[int],
    allowed: Sequence[Sizes],
    top: int | None = None,
) -> tuple[int, list[Sizes]]:
    """Return the grid's bound and, for each size of the first dim, the second's that hold."""
    first, second = names
    if top is None:
        top = min(max(_GRID_LEAST, 2 * max((abs(c) for c in constants), default=0) + 64), _GRID)
    rows: list[Sizes] = []
    xs, ys = allowed
    for x in range(1, top + 1):
        if not contains(xs, x):
            rows.append(())
            continue
        held = [
            y
            for y in range(1, top + 1)
            if contains(ys, y) and test({first: x, second: y}) is not False
        ]
        rows.append(union((), tuple((y, y) for y in held)))
    return top, rows


def projections(
    test: Test, names: tuple[str, ...], constants: Sequence[int], allowed: Sequence[Sizes]
) -> tuple[Sizes | None, Sizes | None]:
    """Return, for each of two dims, the sizes at which some size of the other holds ``test``.

    Decided on the grid of `grid_boxes`. Past the grid, the verdict of its last sizes goes
    on where they agree (none holds: the sizes stop; all hold: every larger size is kept);
    where they disagree, the grid grows to its largest once more, then None (it cannot
    say). A ViT's ``(h//8)*(w//8) + 1 = 17`` gives ``h`` in ``8..23, 32..39, 64..71,
    128..135``.
    """
    top, rows = _grid(test, names, constants, allowed)
    while True:
        firsts = [bool(row) for row in rows]
        seconds = [any(contains(row, y) for row in rows) for y in range(1, top + 1)]
        found = _beyond(firsts, top), _beyond(seconds, top)
        if top >= _GRID or None not in found:
            return found
        top, rows = _grid(test, names, constants, allowed, _GRID)  # a larger grid may say


def _beyond(held: list[bool], top: int) -> Sizes | None:
    found = union((), tuple((v, v) for v, ok in enumerate(held, start=1) if ok))
    tail = held[-_GRID_TAIL:]
    if not any(tail):
        return found
    return union(found, ((top, None),)) if all(tail) else None
