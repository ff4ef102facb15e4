"""The rule sets: one pure function per mode, each returning a `Plan`, and their dispatch.

Each rule is "validate the operand count → validate parameters → align → merge pairwise →
build the Plan". A mode is only an *alignment* (right-aligned, offset by ``axis``, mapped by
``axes_mapping``); the per-dimension decision is always `bcast.core.dim.merge_dims` (two-way)
or `bcast.core.dim.merge_into` (one-way, which is `merge_dims` narrowed to the target).
`bcast.core.planning` puts the plan cache in front of `apply_rule`.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Final

from bcast.core.dim import Dim, intersect_dims, merge_dims, merge_into
from bcast.core.errors import BroadcastError, show_int, show_ints
from bcast.core.modes import Mode
from bcast.core.plans import Plan, labels_for
from bcast.core.shape import Shape, ShapeLike, as_shape

__all__ = ["RuleFn", "apply_rule"]

_DYNAMIC: Final = Shape.dynamic()

Shapes = tuple[Shape, ...]
Mapping_ = tuple[int, ...] | None
Names = tuple[str, ...]


def apply_rule(
    raw: tuple[ShapeLike, ...],
    mode_arg: str | Mode,
    axis: int,
    axes_mapping: Sequence[int] | None,
    labels: Sequence[str] | None = None,
) -> Plan:
    """Validate the mode and the parameters, then run the mode's rule (no cache).

    ``labels`` names the operands in messages and pictures (default: by the mode's roles,
    `labels_for`), so that a caller such as the model checker can speak its own words.

    >>> import bcast
    >>> str(apply_rule(((2, 1), (3,)), "numpy", -1, None).output)
    '[2,3]'
    """
    mode = Mode.parse(mode_arg)
    shapes = _operands(mode, raw)
    _check_count(mode, shapes)
    if isinstance(axis, bool):
        raise TypeError(f"axis must be an int, not bool; got {axis!r}")
    try:
        axis = operator.index(axis)  # plain ints and NumPy integers
    except TypeError:
        raise TypeError(f"axis must be an int; got {type(axis).__name__} {axis!r}") from None
    if mode is not Mode.PDPD and axis != -1:
        raise BroadcastError(
            f"axis is only used by mode 'pdpd'; got axis={show_int(axis)}",
            mode=mode.value,
            shapes=shapes,
            kind="parameter",
        )
    mapping = _check_mapping_type(axes_mapping)
    if mode is not Mode.EXPLICIT and mapping is not None:
        raise BroadcastError(
            f"axes_mapping is only used by mode 'explicit'; got axes_mapping={show_ints(mapping)}",
            mode=mode.value,
            shapes=shapes,
            kind="parameter",
        )
    names = labels_for(mode, len(shapes)) if labels is None else tuple(labels)
    if len(names) != len(shapes):
        raise ValueError(f"labels must name each of the {len(shapes)} operands; got {names}")
    return _RULES[mode](shapes, int(axis), mapping, names)


def _operands(mode: Mode, raw: tuple[ShapeLike, ...]) -> tuple[Shape, ...]:
    """Normalise each operand; a malformed one is named by its role in the message."""
    shapes = []
    for index, value in enumerate(raw):
        try:
            shapes.append(as_shape(value))
        except BroadcastError as err:
            label = labels_for(mode, len(raw))[index]  # only now: the happy path needs none
            raise BroadcastError(
                f"operand {label}: {err.reason}", mode=mode.value, kind="input"
            ) from None
    return tuple(shapes)


def _check_count(mode: Mode, shapes: tuple[Shape, ...]) -> None:
    count = len(shapes)
    if mode is Mode.NUMPY:
        return
    if mode is Mode.NONE:
        if count < 1:
            raise BroadcastError(
                "mode 'none' needs at least one operand; got 0", mode="none", kind="parameter"
            )
        return
    if count != 2:
        roles = " and ".join(labels_for(mode, 2))
        raise BroadcastError(
            f"mode {mode.value!r} takes exactly 2 operands ({roles}); got {count}",
            mode=mode.value,
            shapes=shapes,
            kind="parameter",
        )


def _check_mapping_type(axes_mapping: object) -> tuple[int, ...] | None:
    if axes_mapping is None:
        return None
    if isinstance(axes_mapping, (Set, Mapping)):
        raise TypeError(
            "axes_mapping must be an ordered sequence of ints (list, tuple, range or 1-D "
            f"array), one target axis per data axis; got a {type(axes_mapping).__name__}"
        )
    if isinstance(axes_mapping, (str, bytes)) or not hasattr(axes_mapping, "__iter__"):
        shown = show_int(axes_mapping) if isinstance(axes_mapping, int) else repr(axes_mapping)
        raise TypeError(
            f"axes_mapping must be a sequence of ints; got {type(axes_mapping).__name__} {shown}"
        )
    items = list(axes_mapping)  # type: ignore[call-overload, unused-ignore]
    for item in items:
        if isinstance(item, bool):
            raise TypeError(f"axes_mapping entries must be ints, not bool; got {item!r}")
        try:
            operator.index(item)
        except TypeError:
            raise TypeError(
                f"axes_mapping entries must be ints; got {type(item).__name__} {item!r}"
            ) from None
    return tuple(operator.index(i) for i in items)


# -- shared pieces -----------------------------------------------------------------------


def _fail(
    reason: str,
    mode: Mode,
    shapes: tuple[Shape, ...],
    alignment: Sequence[tuple[int | None, ...] | None] | None = None,
    out_rank: int | None = None,
    *,
    axis: int | None = None,
    operand: int | None = None,
    kind: str = "shapes",
    labels: Sequence[str] | None = None,
) -> BroadcastError:
    return BroadcastError(
        reason,
        kind=kind,
        mode=mode.value,
        shapes=shapes,
        axis=axis,
        operand=operand,
        alignment=alignment,
        out_rank=out_rank,
        labels=labels_for(mode, len(shapes)) if labels is None else labels,
    )


def _joined(shapes: Sequence[Shape]) -> str:
    texts = [str(s) for s in shapes]
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]


def _right_aligned(shape: Shape, out_rank: int) -> tuple[int, ...] | None:
    return _last_axes(len(shape.dims), out_rank) if shape.ranked else None


@functools.lru_cache(maxsize=1024)
def _last_axes(rank: int, out_rank: int) -> tuple[int, ...]:
    """Return the output axes of an operand of ``rank`` right-aligned in ``out_rank``."""
    return tuple(range(out_rank - rank, out_rank))


def _merge_right_aligned(mode: Mode, shapes: tuple[Shape, ...], names: Names) -> Plan:
    """Multidirectional broadcasting of any number of operands (NumPy's rule)."""
    ranked = [s for s in shapes if s.ranked]
    out_rank = max((len(s.dims) for s in ranked), default=0)
    alignment = tuple(_right_aligned(s, out_rank) for s in shapes)
    out: list[Dim | None] = [None] * out_rank
    for index, shape in enumerate(shapes):
        if not shape.ranked:
            continue
        for axis, dim in enumerate(shape.dims, out_rank - len(shape.dims)):
            merged = out[axis]
            step = dim if merged is None else merge_dims(merged, dim)
            if step is None:
                present = [
                    s.dims[axis - (out_rank - len(s.dims))]
                    for s in shapes
                    if s.ranked and axis - (out_rank - len(s.dims)) >= 0
                ]
                shown = [str(d) for d in present if not d.definitely_one()]
                values = " vs ".join(dict.fromkeys(shown))
                raise _fail(
                    f"cannot broadcast {_joined(shapes)} at axis {axis}: {values}",
                    mode,
                    shapes,
                    alignment,
                    out_rank,
                    axis=axis,
                    operand=index,
                    labels=names,
                )
            out[axis] = step
    if len(ranked) < len(shapes):
        return Plan(mode, shapes, _DYNAMIC, alignment)
    return Plan(mode, shapes, Shape.of_dims(tuple(d for d in out if d is not None)), alignment)


def _merge_one_way(
    mode: Mode,
    shapes: tuple[Shape, ...],
    target: Shape,
    pairs: Sequence[tuple[int, int]],
    source: Shape,
    alignment: tuple[tuple[int | None, ...] | None, ...],
    why: str,
    names: Names,
    operand: int = 1,
) -> tuple[Dim, ...]:
    """Fit ``source`` axis ``i`` onto ``target`` axis ``j`` for each pair ``(i, j)``."""
    dims = list(target.dims)
    for i, j in pairs:
        merged = merge_into(dims[j], source.dims[i])
        if merged is None:
            raise _fail(
                f"cannot broadcast {_joined(shapes)} at axis {j}: "
                f"{source.dims[i]} vs {target.dims[j]} ({why})",
                mode,
                shapes,
                alignment,
                len(dims),
                axis=j,
                operand=operand,
                labels=names,
            )
        dims[j] = merged
    return tuple(dims)


# -- one function per mode ---------------------------------------------------------------


def _rule_numpy(shapes: Shapes, axis: int, mapping: Mapping_, names: Names) -> Plan:
    return _merge_right_aligned(Mode.NUMPY, shapes, names)


def _rule_bidirectional(shapes: Shapes, axis: int, mapping: Mapping_, names: Names) -> Plan:
    return _merge_right_aligned(Mode.BIDIRECTIONAL, shapes, names)


def _rule_none(shapes: Shapes, axis: int, mapping: Mapping_, names: Names) -> Plan:
    mode = Mode.NONE
    ranked = [s for s in shapes if s.ranked]
    out_rank = max((len(s.dims) for s in ranked), default=0)
    # Right-aligned, as the shapes would be compared if they were allowed to broadcast.
    alignment = tuple(_right_aligned(s, out_rank) for s in shapes)
    if not ranked:
        return Plan(mode, shapes, _DYNAMIC, alignment)
    ranks = {len(s.dims) for s in ranked}
    if len(ranks) > 1:
        raise _fail(
            f"shapes must be identical; {_joined(shapes)} differ in rank",
            mode,
            shapes,
            alignment,
            out_rank,
            labels=names,
        )
    out = list(ranked[0].dims)
    for index, shape in enumerate(shapes):
        if not shape.ranked:
            continue
        for i, dim in enumerate(shape.dims):
            merged = intersect_dims(out[i], dim)
            if merged is None:
                raise _fail(
                    f"shapes must be identical; {_joined(shapes)} differ at axis {i}: "
                    f"{out[i]} vs {dim}",
                    mode,
                    shapes,
                    alignment,
                    out_rank,
                    axis=i,
                    operand=index,
                    labels=names,
                )
            out[i] = merged
    return Plan(mode, shapes, Shape.of_dims(tuple(out)), alignment)


def _rule_unidirectional(shapes: Shapes, axis: int, mapping: Mapping_, names: Names) -> Plan:
    mode = Mode.UNIDIRECTIONAL
    a, b = shapes
    la, lb = names
    if a.rank is None:
        return Plan(mode, shapes, _DYNAMIC, (None, _right_aligned(b, b.rank or 0)))
    alignment = (tuple(range(a.rank)), _right_aligned(b, a.rank))
    if b.rank is None:
        return Plan(mode, shapes, a, alignment)
    if b.rank > a.rank:
        raise _fail(
            f"{lb} {b} has rank {b.rank}, more than {la} {a} (rank {a.rank}); "
            f"{lb} must broadcast to {la}",
            mode,
            shapes,
            (tuple(range(b.rank - a.rank, b.rank)), tuple(range(b.rank))),
            b.rank,
            operand=1,
            labels=names,
        )
    offset = a.rank - b.rank
    pairs = [(i, offset + i) for i in range(b.rank)]
    dims = _merge_one_way(
        mode, shapes, a, pairs, b, alignment, f"{lb} must equal {la} or be 1", names
    )
    return Plan(mode, shapes, Shape.of_dims(dims), alignment)


def _rule_pdpd(shapes: Shapes, axis: int, mapping: Mapping_, names: Names) -> Plan:
    mode = Mode.PDPD
    a, b = shapes
    la, lb = names
    if axis < -1:
        raise _fail(
            f"axis must be -1 or a non-negative integer; got {show_int(axis)}",
            mode,
            shapes,
            kind="parameter",
            labels=names,
        )
    if a.rank is None:
        return Plan(mode, shapes, _DYNAMIC, (None, None), axis=None)
    if b.rank is None:
        if axis > a.rank:
            raise _fail(
                f"axis {show_int(axis)} is beyond the rank of {la} {a} (at most {a.rank})",
                mode,
                shapes,
                kind="parameter",
                labels=names,
            )
        return Plan(mode, shapes, a, (tuple(range(a.rank)), None), axis=None)
    ra, rb = a.rank, b.rank
    if rb > ra:
        raise _fail(
            f"{lb} {b} has rank {rb}, more than {la} {a} (rank {ra}); "
            f"PDPD needs rank({lb}) <= rank({la})",
            mode,
            shapes,
            (tuple(range(rb - ra, rb)), tuple(range(rb))),
            rb,
            operand=1,
            labels=names,
        )
    start = ra - rb if axis == -1 else axis
    # B's trailing ones are ignored (OpenVINO broadcast rules, PDPD rule 5): dims of B past
    # the end of A are allowed when they may be 1, and are dropped from the alignment.
    fit = ra - start
    if fit < 0:
        raise _fail(
            f"axis {show_int(axis)} is beyond the rank of {la} {a} (at most {ra})",
            mode,
            shapes,
            kind="parameter",
            labels=names,
        )
    overhang = [i for i in range(fit, rb) if not b.dims[i].maybe_one()]
    if overhang:
        # Drawn with B overhanging A: the columns past A's last axis are no output axes.
        shown = ", ".join(f"{b.dims[i]} ({lb} axis {i})" for i in overhang)
        raise _fail(
            f"{lb} {b} starting at axis {start} does not fit in {la} {a}: {shown} would lie "
            f"past {la}'s last axis, where only trailing 1s of {lb} are allowed",
            mode,
            shapes,
            (tuple(range(ra)), tuple(range(start, start + rb))),
            start + rb,
            operand=1,
            labels=names,
        )
    alignment = (
        tuple(range(ra)),
        tuple(start + i if i < fit else None for i in range(rb)),
    )
    pairs = [(i, start + i) for i in range(min(rb, fit))]
    dims = _merge_one_way(
        mode, shapes, a, pairs, b, alignment, f"{lb} must equal {la} or be 1", names
    )
    return Plan(mode, shapes, Shape.of_dims(dims), alignment, axis=start)


def _rule_explicit(shapes: Shapes, axis: int, mapping: Mapping_, names: Names) -> Plan:
    mode = Mode.EXPLICIT
    data, target = shapes
    if mapping is None:
        raise _fail(
            "mode 'explicit' needs axes_mapping (one target axis per data axis)",
            mode,
            shapes,
            kind="parameter",
            labels=names,
        )
    listed = show_ints(mapping)
    if data.rank is not None and len(mapping) != data.rank:
        raise _fail(
            f"axes_mapping must have one entry per data axis ({data.rank} for data {data}); "
            f"got {listed}",
            mode,
            shapes,
            kind="parameter",
            labels=names,
        )
    for value in mapping:
        if value < 0:
            raise _fail(
                f"axes_mapping entries must be non-negative target axes; got {listed}",
                mode,
                shapes,
                kind="parameter",
                labels=names,
            )
    for first, second in itertools.pairwise(mapping):
        if second <= first:
            raise _fail(
                f"axes_mapping must be strictly increasing; got {listed}",
                mode,
                shapes,
                kind="parameter",
                labels=names,
            )
    if target.rank is not None and mapping and mapping[-1] >= target.rank:
        raise _fail(
            f"axes_mapping entries must be below the target rank {target.rank}; got {listed}",
            mode,
            shapes,
            kind="parameter",
            labels=names,
        )
    data_axes = tuple(mapping) if data.rank is not None else None
    if target.rank is None:
        return Plan(mode, shapes, _DYNAMIC, (data_axes, None), axes_mapping=mapping)
    alignment = (data_axes, tuple(range(target.rank)))
    if data.rank is None:
        return Plan(mode, shapes, target, alignment, axes_mapping=mapping)
    pairs = list(enumerate(mapping))
    dims = _merge_one_way(
        mode, shapes, target, pairs, data, alignment, "data must equal the target or be 1", names, 0
    )
    return Plan(mode, shapes, Shape.of_dims(dims), alignment, axes_mapping=mapping)


RuleFn = Callable[[Shapes, int, Mapping_, Names], Plan]
"""A mode's rule: operands, PDPD's axis, the explicit axes_mapping, the operands' labels."""

_RULES: Final[dict[Mode, RuleFn]] = {
    Mode.NUMPY: _rule_numpy,
    Mode.NONE: _rule_none,
    Mode.PDPD: _rule_pdpd,
    Mode.UNIDIRECTIONAL: _rule_unidirectional,
    Mode.BIDIRECTIONAL: _rule_bidirectional,
    Mode.EXPLICIT: _rule_explicit,
}
