"""The conditions under which a broadcast of partial shapes succeeds: a rule run backwards.

The model checker reports them as "fails unless ..." findings; they are pure functions of a
`Plan` and the operands' names. Where a dim is a symbol that stands for an expression of the
user's input dims (``Min_64__s41_`` for ``Min(64, s41)``), the condition is written with the
expressions' text; `requirement_text` says what the sizes must satisfy, and the models layer
decides it as a set of integers (`bcast.models.condition_sets`: "fails when s41 > 64").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from bcast.core.dim import Dim, merge_dims, merge_into
from bcast.core.expressions import Expr
from bcast.core.modes import Mode
from bcast.core.picture import Drawable
from bcast.core.plans import Plan
from bcast.core.shape import Shape

__all__ = [
    "Condition",
    "conditions",
    "find_conditions",
    "is_open",
    "readable",
    "requirement_text",
    "dim_texts",
    "shown",
    "shown_shape",
    "sizes_broadcast",
    "symbols_at",
]

Show = Callable[[Dim], str]


@dataclass(frozen=True, slots=True)
class Condition:
    """What one output axis needs to broadcast, as `find_conditions` finds it.

    Attributes
    ----------
    axis : int
        The output axis.
    text : str
        The condition as the checker reports it (``fails unless ...``, ``fails when ...``).
    symbols : frozenset of str
        The user's symbols it is about: plain symbols and the free symbols of expressions.
    failing : tuple of (int, int or None), or None
        Where it was decided as a set (one free symbol, `bcast.models.condition_sets`): the
        closed intervals of the symbol's sizes at which the axis fails (``hi`` None: no
        bound), ``()`` when it never fails; None otherwise.
    """

    axis: int
    text: str
    symbols: frozenset[str]
    failing: tuple[tuple[int, int | None], ...] | None = None


@dataclass(frozen=True, slots=True)
class _Shown:
    """A shape drawn with expression text in place of the symbols that stand for them."""

    rank: int | None
    texts: tuple[str, ...]

    def __iter__(self) -> Iterator[object]:
        return iter(self.texts)


def shown(shape: Drawable, expressions: Mapping[str, Expr]) -> Drawable:
    """Return ``shape`` for `bcast.core.picture.format_alignment`, expressions as their text.

    >>> from bcast import Shape
    >>> from bcast.core.expressions import parse_expression
    >>> list(shown(Shape.parse("[1,M,4]"), {"M": parse_expression("Min(64, s)")}))
    ['1', 'Min(64, s)', '4']
    """
    if not expressions or shape.rank is None:
        return shape
    return _Shown(shape.rank, tuple(_show_with(expressions)(d) for d in _dims(shape)))


class _ShownShape(Shape):
    """A `Shape` whose text writes expressions where its symbols stand for them.

    Its dims, equality and hash are the shape's own; only ``str`` and ``repr`` differ, so
    that every output made from a finding's shapes (text, JSON, SARIF, HTML, ``print``)
    writes ``Min(64, s41)`` and not the symbol ``Min_64__s41_`` standing for it.
    """

    __slots__ = ("texts",)
    texts: tuple[str, ...]

    def __str__(self) -> str:
        return "[" + ",".join(self.texts) + "]"


def shown_shape(shape: Shape, expressions: Mapping[str, Expr]) -> Shape:
    """Return ``shape``, written with the expressions its symbols stand for.

    The dims stay the same (the result equals ``shape``); a shape without such a symbol is
    returned as it is.

    >>> from bcast import Shape
    >>> from bcast.core.expressions import parse_expression
    >>> s = shown_shape(Shape.parse("[1,M,4]"), {"M": parse_expression("Min(64, s)")})
    >>> str(s), s == Shape.parse("[1,M,4]"), s
    ('[1,Min(64, s),4]', True, Shape.parse('[1,Min(64, s),4]'))
    """
    if not expressions or shape.rank is None or isinstance(shape, _ShownShape):
        return shape
    if not any(d.name is not None and d.name in expressions for d in shape.dims):
        return shape
    show = _show_with(expressions)
    result = object.__new__(_ShownShape)
    object.__setattr__(result, "dims", shape.dims)
    object.__setattr__(result, "ranked", True)
    object.__setattr__(result, "texts", tuple(show(d) for d in shape.dims))
    return result


def dim_texts(shape: Shape) -> tuple[str, ...]:
    """Return the text of each dim as the shape writes it (expressions as `shown_shape` does).

    >>> from bcast import Shape
    >>> from bcast.core.expressions import parse_expression
    >>> dim_texts(shown_shape(Shape.parse("[M,4]"), {"M": parse_expression("Min(64, s)")}))
    ('Min(64, s)', '4')
    """
    if isinstance(shape, _ShownShape):
        return shape.texts
    return tuple(str(d) for d in shape.dims)


def readable(text: str, expressions: Mapping[str, Expr]) -> str:
    """Write each expression's text in ``text`` where the symbol standing for it appears.

    >>> from bcast.core.expressions import parse_expression
    >>> readable("cannot broadcast [s,4] and [M,3]", {"M": parse_expression("Min(64, s)")})
    'cannot broadcast [s,4] and [Min(64, s),3]'
    """
    names = [n for n in expressions if n in text]
    if not names:
        return text
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    token = re.compile(rf"(?<![^\s,\[(])({alternatives})(?![^\s,\]):;])")
    return token.sub(lambda m: str(expressions[m.group(1)]), text)


def _dims(shape: Drawable) -> Iterator[Dim]:
    for dim in shape:
        assert isinstance(dim, Dim)
        yield dim


def _show_with(expressions: Mapping[str, Expr] | None) -> Show:
    if not expressions:
        return str

    def show(dim: Dim) -> str:
        expr = expressions.get(dim.name) if dim.name is not None else None
        return str(dim) if expr is None else str(expr)

    return show


# The operand the one-way modes broadcast into (A, or the target of explicit).
_ONE_WAY_TARGET: Final[dict[Mode, int]] = {Mode.UNIDIRECTIONAL: 0, Mode.PDPD: 0, Mode.EXPLICIT: 1}


def is_open(dim: Dim) -> bool:
    """Tell whether ``dim`` is ``?``: no name, no bound at all."""
    return dim.name is None and dim.lo == 0 and dim.hi is None


def _uninformative(dim: Dim) -> bool:
    """Tell whether a condition on ``dim`` would name nothing a user can act on.

    An unnamed dim without an upper bound (``?``, and OpenVINO's ``1..`` for a dynamic dim
    that is at least 1) carries the same information: none that a user controls. Conditions
    are phrased in named symbols, bounded intervals and static sizes only; two unknowns of
    one model (a residual connection's two operands) are never reported against each other.

    >>> _uninformative(Dim(1, None)), _uninformative(Dim(1, 64)), _uninformative(Dim.symbol("N"))
    (True, False, False)
    """
    return dim.name is None and dim.hi is None


def _possible(dim: Dim, allowed: Iterable[int]) -> list[int]:
    return sorted(v for v in set(allowed) if dim.contains(v))


def _within(dim: Dim, allowed: set[int]) -> bool:
    """Return True when every value of ``dim`` is in ``allowed`` (a small bounded interval)."""
    if dim.name is not None or dim.hi is None or dim.hi - dim.lo > len(allowed):
        return False
    return all(v in allowed for v in range(dim.lo, dim.hi + 1))


def _require(dim: Dim, allowed: set[int], show: Show = str) -> str:
    values = _possible(dim, allowed)
    if len(values) == 1:
        return f"{show(dim)} = {values[0]}"
    return f"{show(dim)} ∈ {{{', '.join(map(str, values))}}}"


def conditions(
    plan: Plan, names: Sequence[str], *, expressions: Mapping[str, Expr] | None = None
) -> list[tuple[int, str]]:
    """For each output axis of ``plan`` that may fail, the condition under which it does not.

    A plan of partial shapes holds every result the concrete shapes could give; this runs
    the rule backwards and says, axis by axis, what the symbols and intervals must satisfy
    for the broadcast to succeed. A ``?`` constrains nothing and is never named.

    Examples
    --------
    >>> import bcast
    >>> p = bcast.plan("[batch,4]", "[3,1]")
    >>> conditions(p, ["x", "y"])
    [(0, 'fails unless batch ∈ {1, 3} (axis 0 of x)')]
    >>> conditions(bcast.plan("[seq]", "[kv]"), ["q", "k"])
    [(0, 'fails unless seq, kv are equal (or 1)')]
    """
    return [(c.axis, c.text) for c in find_conditions(plan, names, expressions=expressions)]


def find_conditions(
    plan: Plan, names: Sequence[str], *, expressions: Mapping[str, Expr] | None = None
) -> list[Condition]:
    """Like `conditions`, with what each condition is about; expressions in input dims.

    ``expressions`` maps symbols to the expressions they stand for (`bcast.models.Graph`'s
    ``expressions``). A condition on such a symbol is written with the expressions' text,
    its ``symbols`` the expressions' free symbols; `bcast.models.condition_sets` decides it.

    Examples
    --------
    >>> import bcast
    >>> from bcast.core.expressions import parse_expression
    >>> p = bcast.plan("[s41,8]", "[M,8]")
    >>> [c.text for c in find_conditions(p, ["x", "y"],
    ...                                  expressions={"M": parse_expression("Min(64, s41)")})]
    ['fails unless s41, Min(64, s41) are equal (or 1)']
    """
    shapes, alignment, rank, mode = plan.shapes, plan.alignment, plan.output.rank, plan.mode
    target = _ONE_WAY_TARGET.get(mode)
    if rank is None:
        return []
    columns: list[list[tuple[int, int, Dim]]] = [[] for _ in range(rank)]
    for k, (shape, axes) in enumerate(zip(shapes, alignment, strict=True)):
        if axes is None or shape.rank is None:
            continue
        for i, (dim, out_axis) in enumerate(zip(shape.dims, axes, strict=True)):
            if out_axis is not None and out_axis < rank:
                columns[out_axis].append((k, i, dim))
    show = _show_with(expressions)
    found = []
    for out_axis, column in enumerate(columns):
        if target is None:
            parts = _two_way(column, names, exact=mode is Mode.NONE, show=show)
        else:
            parts = _one_way(column, names, target, show=show)
        if not parts:
            continue
        free = _free_symbols(column, expressions or {})
        text = "fails unless " + " and ".join(parts)
        found.append(Condition(out_axis, text, frozenset(free)))
    return found


def _where(names: Sequence[str], k: int, i: int) -> str:
    return f"axis {i} of {names[k]}"


def _two_way(
    column: list[tuple[int, int, Dim]], names: Sequence[str], *, exact: bool, show: Show = str
) -> list[str]:
    dims = [(k, i, d) for k, i, d in column if not _uninformative(d)]
    if not exact:
        dims = [(k, i, d) for k, i, d in dims if not d.definitely_one()]
    if len(dims) < 2:
        return []
    statics = sorted({d.lo for _, _, d in dims if d.is_static})
    if len(statics) > 1:
        return []  # the rule has already failed; nothing conditional about it
    if statics:
        allowed = {statics[0]} if exact else {1, statics[0]}
        return [
            f"{_require(d, allowed, show)} ({_where(names, k, i)})"
            for k, i, d in dims
            if not d.is_static and not _within(d, allowed)
        ]
    first = dims[0][2]
    if all(first.definitely_equal(d) for _, _, d in dims[1:]):
        return []
    listed = ", ".join(dict.fromkeys(show(d) for _, _, d in dims))
    return [f"{listed} are equal" + ("" if exact else " (or 1)")]


def _one_way(
    column: list[tuple[int, int, Dim]], names: Sequence[str], target: int, show: Show = str
) -> list[str]:
    into = [(k, i, d) for k, i, d in column if k == target]
    if not into:
        return []
    _, ti, a = into[0]
    parts = []
    for k, i, b in column:
        if k == target or b.definitely_one() or a.definitely_equal(b):
            continue
        if _uninformative(a) or _uninformative(b):
            continue
        if b.is_static:
            if a.is_static or _within(a, {b.lo}):
                continue
            parts.append(f"{show(a)} = {b.lo} ({_where(names, target, ti)})")
        elif a.is_static:
            if _within(b, {1, a.lo}):
                continue
            parts.append(f"{_require(b, {1, a.lo}, show)} ({_where(names, k, i)})")
        else:
            parts.append(f"{show(b)} is 1 or equals {show(a)} ({_where(names, k, i)})")
    return parts


# -- conditions in the user's input dims ----------------------------------------------------


def _free_symbols(column: list[tuple[int, int, Dim]], expressions: Mapping[str, Expr]) -> set[str]:
    free: set[str] = set()
    for _, _, dim in column:
        if dim.name is not None:
            expr = expressions.get(dim.name)
            free |= expr.symbols if expr is not None else {dim.name}
    return free


def sizes_broadcast(
    values: Sequence[tuple[int, int | None]], mode: Mode, target: int | None
) -> bool:
    """Tell whether sizes ``values`` (operand index, size) broadcast at one axis.

    The per-dimension merge decides (`merge_dims` both ways, `merge_into` one way into
    operand ``target``); a size of None is an operand without that axis.

    >>> sizes_broadcast([(0, 3), (1, 1)], Mode.NUMPY, None)
    True
    >>> sizes_broadcast([(0, 1), (1, 3)], Mode.UNIDIRECTIONAL, 0)  # 3 into 1: no
    False
    """
    dims = [(k, Dim(v)) for k, v in values if v is not None]
    if mode is Mode.NONE:
        return len({d for _, d in dims}) <= 1
    if target is None:
        merged: Dim | None = Dim(1)
        for _, dim in dims:
            merged = merge_dims(merged, dim) if merged is not None else None
        return merged is not None
    into = [d for k, d in dims if k == target]
    return not into or all(merge_into(into[0], d) is not None for k, d in dims if k != target)


def requirement_text(
    column: Sequence[tuple[int, Dim]], mode: Mode, expressions: Mapping[str, Expr] | None = None
) -> str:
    """Say what the sizes at one axis must satisfy, expressions written as their text.

    ``column`` holds (operand, dim) pairs; ``?`` and other unnamed unbounded dims are left out.

    >>> from bcast.core.expressions import parse_expression
    >>> m = {"M": parse_expression("Min(64, s41)")}
    >>> requirement_text([(0, Dim.symbol("s41")), (1, Dim.symbol("M"))], Mode.NUMPY, m)
    's41, Min(64, s41) must be equal (or 1)'
    """
    show = _show_with(expressions)
    kept = [(k, d) for k, d in column if not _uninformative(d)]
    target = _ONE_WAY_TARGET.get(mode)
    if target is None:
        shown_dims = (show(d) for _, d in kept if mode is Mode.NONE or not d.definitely_one())
        listed = ", ".join(dict.fromkeys(shown_dims))
        return f"{listed} must be equal" + ("" if mode is Mode.NONE else " (or 1)")
    into = ", ".join(dict.fromkeys(show(d) for k, d in kept if k == target))
    others = ", ".join(dict.fromkeys(show(d) for k, d in kept if k != target))
    return f"{others} must be 1 or equal {into}"


def symbols_at(plan: Plan, out_axis: int) -> frozenset[str]:
    """Return the names of the symbols the operands place at output axis ``out_axis``.

    >>> import bcast
    >>> sorted(symbols_at(bcast.plan("[N,4]", "[M,1]", "[3,4]"), 0))
    ['M', 'N']
    """
    names = set()
    for shape, axes in zip(plan.shapes, plan.alignment, strict=True):
        if axes is None or shape.rank is None:
            continue
        for dim, axis in zip(shape.dims, axes, strict=True):
            if axis == out_axis and dim.name is not None:
                names.add(dim.name)
    return frozenset(names)
