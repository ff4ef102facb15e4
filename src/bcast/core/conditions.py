"""The conditions under which a broadcast of partial shapes succeeds: a rule run backwards.

The model checker reports them as "fails unless ..." findings; they are pure functions of a
`Plan` and the operands' names. Where a dim is a symbol that stands for an expression of the
user's input dims (``Min_64__s41_`` for ``Min(64, s41)``), the condition is said in those
input dims: with one free symbol, the rule is decided value by value over a bounded range
and the failing values summarised ("fails when s41 > 64"); otherwise the plain condition is
written with the expressions' text.
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
    "SEARCHED",
    "Condition",
    "conditions",
    "find_conditions",
    "is_open",
    "readable",
    "dim_texts",
    "shown",
    "shown_shape",
    "sizes_broadcast",
    "symbols_at",
]

SEARCHED: Final = 4096
"""A one-symbol condition is decided for each value from 0 to at least this (more where the
expression's constants are larger, up to `_MOST`)."""
_MOST: Final = 1 << 15
_LISTED: Final = 4  # failing intervals written out; more are counted

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
    failing : tuple of (int, int), or None
        Where it was decided value by value (one free symbol): the closed intervals of the
        symbol's values at which the axis fails, within ``searched``; None otherwise.
    searched : (int, int) or None
        The range of values decided; None when the condition was not searched.
    """

    axis: int
    text: str
    symbols: frozenset[str]
    failing: tuple[tuple[int, int], ...] | None = None
    searched: tuple[int, int] | None = None


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
    ``expressions``). A condition on such a symbol is said in the expression's free symbols:
    with one free symbol, the axis is decided for each of its values from 0 to `SEARCHED`
    (or further, for larger constants) and the failing values summarised, the range said;
    with several, the plain condition is written with the expressions' text.

    Examples
    --------
    >>> import bcast
    >>> from bcast.core.expressions import parse_expression
    >>> p = bcast.plan("[s41,8]", "[M,8]")
    >>> [c.text for c in find_conditions(p, ["x", "y"],
    ...                                  expressions={"M": parse_expression("Min(64, s41)")})]
    ['fails when s41 > 64 (each s41 in 0..4096 checked): s41, Min(64, s41) must be equal (or 1)']
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
        searched = None
        if expressions and len(free) == 1 and any(d.name in expressions for _, _, d in column):
            searched = _search(out_axis, column, mode, target, expressions, show)
        text = "fails unless " + " and ".join(parts)
        found.append(searched or Condition(out_axis, text, frozenset(free)))
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


def _value(dim: Dim, symbol: str, value: int, expressions: Mapping[str, Expr]) -> int | None:
    if dim.is_static:
        return dim.lo
    if dim.name is None:
        return None
    expr = expressions.get(dim.name)
    return expr.evaluate({symbol: value}) if expr is not None else value


def _search(
    out_axis: int,
    column: list[tuple[int, int, Dim]],
    mode: Mode,
    target: int | None,
    expressions: Mapping[str, Expr],
    show: Show,
) -> Condition | None:
    """Decide the axis for each value of its one free symbol; None where it cannot."""
    kept = [(k, d) for k, _, d in column if not _uninformative(d)]
    if any(d.name is None and not d.is_static for _, d in kept):
        return None  # a bounded unnamed interval: not a function of the symbol
    (symbol,) = _free_symbols(column, expressions)
    constants = [
        abs(c) for _, d in kept if d.name in expressions for c in _constants(d, expressions)
    ]
    top = max(SEARCHED, 2 * max(constants, default=0) + 64)
    if top > _MOST:
        return None  # the constants reach further than a search: the plain condition
    failing: list[tuple[int, int]] = []
    decided = 0
    for value in range(top + 1):
        values = [(k, _value(d, symbol, value, expressions)) for k, d in kept]
        if any(v is None or v < 0 for _, v in values):
            continue  # no size there: neither runs nor fails
        decided += 1
        if not sizes_broadcast(values, mode, target):
            if failing and failing[-1][1] == value - 1:
                failing[-1] = (failing[-1][0], value)
            else:
                failing.append((value, value))
    if not decided:
        return None
    text = _failing_text(symbol, failing, top) + ": " + _requirement(kept, target, mode, show)
    return Condition(out_axis, text, frozenset((symbol,)), tuple(failing), (0, top))


def _constants(dim: Dim, expressions: Mapping[str, Expr]) -> tuple[int, ...]:
    return expressions[dim.name].constants if dim.name is not None else ()


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


def _failing_text(symbol: str, failing: list[tuple[int, int]], top: int) -> str:
    checked = f"(each {symbol} in 0..{top} checked)"
    if not failing:
        return f"never fails {checked}"
    if failing == [(0, top)]:
        return f"fails for every {symbol} {checked}"
    if len(failing) > _LISTED:
        count = sum(hi - lo + 1 for lo, hi in failing)
        return f"fails for {count} values of {symbol}, from {symbol} = {failing[0][0]} {checked}"
    parts = []
    for lo, hi in failing:
        if hi == top:
            parts.append(f"{symbol} > {lo - 1}")
        elif lo == 0:
            parts.append(f"{symbol} < {hi + 1}")
        elif lo == hi:
            parts.append(f"{symbol} = {lo}")
        else:
            parts.append(f"{symbol} ∈ {lo}..{hi}")
    return f"fails when {' or '.join(parts)} {checked}"


def _requirement(kept: list[tuple[int, Dim]], target: int | None, mode: Mode, show: Show) -> str:
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
