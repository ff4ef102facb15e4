"""The conditions under which a broadcast of partial shapes succeeds: a rule run backwards.

The model checker reports them as "fails unless ..." findings; they are pure functions of a
`Plan` and the operands' names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from bcast.core.dim import Dim
from bcast.core.modes import Mode
from bcast.core.plans import Plan

__all__ = ["conditions", "is_open", "symbols_at"]

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


def _require(dim: Dim, allowed: set[int]) -> str:
    values = _possible(dim, allowed)
    if len(values) == 1:
        return f"{dim} = {values[0]}"
    return f"{dim} ∈ {{{', '.join(map(str, values))}}}"


def conditions(plan: Plan, names: Sequence[str]) -> list[tuple[int, str]]:
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
    found = []
    for out_axis, column in enumerate(columns):
        if target is None:
            parts = _two_way(column, names, exact=mode is Mode.NONE)
        else:
            parts = _one_way(column, names, target)
        if parts:
            found.append((out_axis, "fails unless " + " and ".join(parts)))
    return found


def _where(names: Sequence[str], k: int, i: int) -> str:
    return f"axis {i} of {names[k]}"


def _two_way(column: list[tuple[int, int, Dim]], names: Sequence[str], *, exact: bool) -> list[str]:
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
            f"{_require(d, allowed)} ({_where(names, k, i)})"
            for k, i, d in dims
            if not d.is_static and not _within(d, allowed)
        ]
    first = dims[0][2]
    if all(first.definitely_equal(d) for _, _, d in dims[1:]):
        return []
    listed = ", ".join(dict.fromkeys(str(d) for _, _, d in dims))
    return [f"{listed} are equal" + ("" if exact else " (or 1)")]


def _one_way(column: list[tuple[int, int, Dim]], names: Sequence[str], target: int) -> list[str]:
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
            parts.append(f"{a} = {b.lo} ({_where(names, target, ti)})")
        elif a.is_static:
            if _within(b, {1, a.lo}):
                continue
            parts.append(f"{_require(b, {1, a.lo})} ({_where(names, k, i)})")
        else:
            parts.append(f"{b} is 1 or equals {a} ({_where(names, k, i)})")
    return parts


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
