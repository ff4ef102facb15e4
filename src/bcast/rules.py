"""The rule sets: one pure function per mode, each returning a `Plan`.

Each rule is "validate the operand count → validate parameters → align → merge pairwise →
build the Plan". A mode is only an *alignment* (right-aligned, offset by ``axis``, mapped by
``axes_mapping``); the per-dimension decision is always `bcast.dim.merge_dims` (two-way) or
`bcast.dim.merge_into` (one-way, which is `merge_dims` narrowed to the target).
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any, Final

from bcast.dim import Dim, intersect_dims, merge_dims, merge_into
from bcast.errors import BroadcastError, show_int, show_ints
from bcast.modes import Mode
from bcast.plans import Plan, labels_for
from bcast.shape import Shape, ShapeLike, as_shape

__all__ = ["broadcast_shapes", "plan"]

_DYNAMIC: Final = Shape.dynamic()
_CACHE: dict[object, Plan] = {}
_CACHE_SIZE: Final = 4096
_NUMPY: Final = "numpy"  # the default of ``mode``; compared by identity
_DEFAULT_AXIS: Final = -1  # likewise (CPython keeps one -1)


def plan(
    *shapes: ShapeLike,
    mode: str | Mode = _NUMPY,
    axis: int = _DEFAULT_AXIS,
    axes_mapping: Sequence[int] | None = None,
) -> Plan:
    """Apply a broadcasting rule and return the full `Plan` (output and alignment).

    Same arguments as `broadcast_shapes`. Plans of static shapes given as tuples of ints
    are cached, so the rule runs once per distinct call.

    Examples
    --------
    >>> import bcast
    >>> p = bcast.plan((16,), (1, 16, 50, 50), mode="explicit", axes_mapping=[1])
    >>> p.aligned_shape(0), str(p.output)
    ((1, 16, 1, 1), '[1,16,50,50]')
    """
    key = _key(shapes, mode, axis, axes_mapping)
    try:
        found = _CACHE.get(key)  # get: a miss raises nothing (raising costs ~0.5 us)
    except TypeError:  # unhashable (lists): take the slow path
        found = None
    cacheable = _cacheable(shapes, axis, axes_mapping)
    if found is not None and cacheable:
        return found
    result = _plan(shapes, mode, axis, axes_mapping)
    if cacheable:
        if len(_CACHE) >= _CACHE_SIZE:
            # Clearing is O(1) amortised; deleting the oldest key of a dict scans past the
            # slots of earlier deletions (3-6 us a call, measured).
            _CACHE.clear()
        _CACHE[key] = result
    return result


def _key(shapes: tuple[object, ...], mode: object, axis: object, axes_mapping: object) -> object:
    """Return the plan cache's key: the shapes alone for the default arguments.

    The two forms never meet: a cached default key is a tuple of tuples of ints, a full key
    holds the mode (a str or Mode) second. The short one saves building and hashing a
    4-tuple on the hot path of repeated calls (about 60 ns of 650, measured).
    """
    if mode is _NUMPY and axis is _DEFAULT_AXIS and axes_mapping is None:
        return shapes
    return (shapes, mode, axis, axes_mapping)


def _cacheable(shapes: tuple[object, ...], axis: object, axes_mapping: object) -> bool:
    """Return True when a call may be answered from, or stored in, the cache.

    A cache hit alone is not enough: ``(True,)`` and ``(2.0,)`` hash and compare equal to
    ``(1,)`` and ``(2,)``, ``axis=True`` or ``axis=1.0`` to ``axis=1``, and ``(True,)`` to
    ``(1,)`` as ``axes_mapping``; they must raise TypeError, not return a cached plan. So
    only shapes that are tuples of plain ints (and a plain int axis, a tuple of them as
    axes_mapping) are cached. This runs on every repeated call: one function, plain loops.
    """
    if type(axis) is not int:
        return False
    if axes_mapping is not None and (
        type(axes_mapping) is not tuple or any(type(i) is not int for i in axes_mapping)
    ):
        return False
    for s in shapes:
        if type(s) is not tuple:
            return False
        for d in s:
            if type(d) is not int:
                return False
    return True


def broadcast_shapes(
    *shapes: ShapeLike,
    mode: str | Mode = _NUMPY,
    axis: int = _DEFAULT_AXIS,
    axes_mapping: Sequence[int] | None = None,
) -> Shape:
    """Return the shape that ``shapes`` broadcast to under ``mode``.

    Implements ONNX ``docs/Broadcasting.md`` (multidirectional, unidirectional) and the
    OpenVINO broadcast rules (``none``, ``numpy``, ``pdpd``, bidirectional, explicit).

    Parameters
    ----------
    *shapes : Shape, str or sequence of dims
        The operands: any number for ``numpy`` (none gives ``[]``), one or more for ``none``,
        exactly two (``A, B`` or ``data, target``) for the other modes.
    mode : str or Mode, default "numpy"
        ``numpy`` (alias ``multidirectional``), ``none``, ``pdpd``, ``unidirectional``,
        ``bidirectional`` or ``explicit``.
    axis : int, default -1
        PDPD only: the axis of A where B starts; -1 means ``rank(A) - rank(B)``.
    axes_mapping : sequence of int, optional
        Explicit only: the output axis of each data axis, strictly increasing.

    Returns
    -------
    Shape
        The most precise sound result: on partial shapes, the narrowest dims that contain
        every result the concrete shapes could produce.

    Raises
    ------
    BroadcastError
        If the shapes cannot broadcast (``.axis`` is the failing output axis) or a parameter
        is invalid (operand count, axis, axes_mapping, negative dims).
    TypeError
        For arguments of the wrong Python type (a bool or float dim, a non-int axis).

    See Also
    --------
    plan : the same rule, returning the alignment as well.

    Notes
    -----
    Where ONNX shape inference or OpenVINO answer differently on partial shapes, the
    project's ``docs/peer-differences.md`` lists the case.

    Examples
    --------
    >>> import bcast
    >>> str(bcast.broadcast_shapes((2, 3, 4, 5), (5,)))
    '[2,3,4,5]'
    >>> str(bcast.broadcast_shapes("[N,1,8]", "[1,4,?]"))
    '[N,4,8]'
    >>> str(bcast.broadcast_shapes("[2,3,4,5]", "[3,1]", mode="pdpd", axis=1))
    '[2,3,4,5]'
    >>> bcast.broadcast_shapes((2, 3), (4,))
    Traceback (most recent call last):
    ...
    bcast.errors.BroadcastError: numpy: cannot broadcast [2,3] and [4] at axis 1: 3 vs 4
      #0  2  3
      #1     4
             ^ axis 1
    """
    if mode is _NUMPY and axis is _DEFAULT_AXIS and axes_mapping is None:
        # The hot path: `_key` and `_cacheable` inlined for the default arguments (two calls
        # of about 60 ns each, of 780 ns in all, measured).
        try:
            found = _CACHE.get(shapes)
        except TypeError:  # lists: as tuples, when they hold plain ints (12 us -> 2 us)
            return _from_lists(shapes)
        if found is not None:
            for s in shapes:
                if type(s) is not tuple:
                    break
                for d in s:
                    if type(d) is not int:
                        break
                else:
                    continue
                break
            else:
                return found.output
        return plan(*shapes).output
    try:
        found = _CACHE.get((shapes, mode, axis, axes_mapping))
    except TypeError:
        return _plan(shapes, mode, axis, axes_mapping).output
    if found is not None and _cacheable(shapes, axis, axes_mapping):
        return found.output
    return plan(*shapes, mode=mode, axis=axis, axes_mapping=axes_mapping).output


def _from_lists(shapes: tuple[Any, ...]) -> Shape:
    """`broadcast_shapes` of shapes given as lists, through the cache where they allow it.

    Lists of plain ints are looked up (and planned) as the tuples they equal; anything else
    takes the full path with the shapes as given, so its errors name them as they came.
    """
    key = tuple(tuple(s) if type(s) is list else s for s in shapes)
    try:
        found = _CACHE.get(key)
    except TypeError:  # nested lists, or other unhashable things: the full path explains
        return _plan(shapes, _NUMPY, _DEFAULT_AXIS, None).output
    if not _cacheable(key, _DEFAULT_AXIS, None):
        return _plan(shapes, _NUMPY, _DEFAULT_AXIS, None).output
    if found is None:
        found = plan(*key)
    return found.output


# -- the boundary ------------------------------------------------------------------------


def _plan(
    raw: tuple[ShapeLike, ...],
    mode_arg: str | Mode,
    axis: int,
    axes_mapping: Sequence[int] | None,
) -> Plan:
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
    return _RULES[mode](shapes, int(axis), mapping)


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
        labels=labels_for(mode, len(shapes)),
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


def _merge_right_aligned(mode: Mode, shapes: tuple[Shape, ...]) -> Plan:
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
                )
            out[axis] = step
    if len(ranked) < len(shapes):
        return Plan(mode, shapes, _DYNAMIC, alignment)
    return Plan(mode, shapes, Shape._of_dims(tuple(d for d in out if d is not None)), alignment)


def _merge_one_way(
    mode: Mode,
    shapes: tuple[Shape, ...],
    target: Shape,
    pairs: Sequence[tuple[int, int]],
    source: Shape,
    alignment: tuple[tuple[int | None, ...] | None, ...],
    why: str,
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
            )
        dims[j] = merged
    return tuple(dims)


# -- one function per mode ---------------------------------------------------------------


def _rule_numpy(shapes: tuple[Shape, ...], axis: int, mapping: tuple[int, ...] | None) -> Plan:
    return _merge_right_aligned(Mode.NUMPY, shapes)


def _rule_bidirectional(
    shapes: tuple[Shape, ...], axis: int, mapping: tuple[int, ...] | None
) -> Plan:
    return _merge_right_aligned(Mode.BIDIRECTIONAL, shapes)


def _rule_none(shapes: tuple[Shape, ...], axis: int, mapping: tuple[int, ...] | None) -> Plan:
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
                )
            out[i] = merged
    return Plan(mode, shapes, Shape._of_dims(tuple(out)), alignment)


def _rule_unidirectional(
    shapes: tuple[Shape, ...], axis: int, mapping: tuple[int, ...] | None
) -> Plan:
    mode = Mode.UNIDIRECTIONAL
    a, b = shapes
    if a.rank is None:
        return Plan(mode, shapes, _DYNAMIC, (None, _right_aligned(b, b.rank or 0)))
    alignment = (tuple(range(a.rank)), _right_aligned(b, a.rank))
    if b.rank is None:
        return Plan(mode, shapes, a, alignment)
    if b.rank > a.rank:
        raise _fail(
            f"B {b} has rank {b.rank}, more than A {a} (rank {a.rank}); B must broadcast to A",
            mode,
            shapes,
            (tuple(range(b.rank - a.rank, b.rank)), tuple(range(b.rank))),
            b.rank,
            operand=1,
        )
    offset = a.rank - b.rank
    pairs = [(i, offset + i) for i in range(b.rank)]
    dims = _merge_one_way(mode, shapes, a, pairs, b, alignment, "B must equal A or be 1")
    return Plan(mode, shapes, Shape._of_dims(dims), alignment)


def _rule_pdpd(shapes: tuple[Shape, ...], axis: int, mapping: tuple[int, ...] | None) -> Plan:
    mode = Mode.PDPD
    a, b = shapes
    if axis < -1:
        raise _fail(
            f"axis must be -1 or a non-negative integer; got {show_int(axis)}",
            mode,
            shapes,
            kind="parameter",
        )
    if a.rank is None:
        return Plan(mode, shapes, _DYNAMIC, (None, None), axis=None)
    if b.rank is None:
        if axis > a.rank:
            raise _fail(
                f"axis {show_int(axis)} is beyond the rank of A {a} (at most {a.rank})",
                mode,
                shapes,
                kind="parameter",
            )
        return Plan(mode, shapes, a, (tuple(range(a.rank)), None), axis=None)
    ra, rb = a.rank, b.rank
    if rb > ra:
        raise _fail(
            f"B {b} has rank {rb}, more than A {a} (rank {ra}); PDPD needs rank(B) <= rank(A)",
            mode,
            shapes,
            (tuple(range(rb - ra, rb)), tuple(range(rb))),
            rb,
            operand=1,
        )
    start = ra - rb if axis == -1 else axis
    # B's trailing ones are ignored (OpenVINO broadcast rules, PDPD rule 5): dims of B past
    # the end of A are allowed when they may be 1, and are dropped from the alignment.
    fit = ra - start
    if fit < 0:
        raise _fail(
            f"axis {show_int(axis)} is beyond the rank of A {a} (at most {ra})",
            mode,
            shapes,
            kind="parameter",
        )
    overhang = [i for i in range(fit, rb) if not b.dims[i].maybe_one()]
    if overhang:
        # Drawn with B overhanging A: the columns past A's last axis are no output axes.
        shown = ", ".join(f"{b.dims[i]} (B axis {i})" for i in overhang)
        raise _fail(
            f"B {b} starting at axis {start} does not fit in A {a}: {shown} would lie past "
            f"A's last axis, where only trailing 1s of B are allowed",
            mode,
            shapes,
            (tuple(range(ra)), tuple(range(start, start + rb))),
            start + rb,
            operand=1,
        )
    alignment = (
        tuple(range(ra)),
        tuple(start + i if i < fit else None for i in range(rb)),
    )
    pairs = [(i, start + i) for i in range(min(rb, fit))]
    dims = _merge_one_way(mode, shapes, a, pairs, b, alignment, "B must equal A or be 1")
    return Plan(mode, shapes, Shape._of_dims(dims), alignment, axis=start)


def _rule_explicit(shapes: tuple[Shape, ...], axis: int, mapping: tuple[int, ...] | None) -> Plan:
    mode = Mode.EXPLICIT
    data, target = shapes
    if mapping is None:
        raise _fail(
            "mode 'explicit' needs axes_mapping (one target axis per data axis)",
            mode,
            shapes,
            kind="parameter",
        )
    listed = show_ints(mapping)
    if data.rank is not None and len(mapping) != data.rank:
        raise _fail(
            f"axes_mapping must have one entry per data axis ({data.rank} for data {data}); "
            f"got {listed}",
            mode,
            shapes,
            kind="parameter",
        )
    for value in mapping:
        if value < 0:
            raise _fail(
                f"axes_mapping entries must be non-negative target axes; got {listed}",
                mode,
                shapes,
                kind="parameter",
            )
    for first, second in itertools.pairwise(mapping):
        if second <= first:
            raise _fail(
                f"axes_mapping must be strictly increasing; got {listed}",
                mode,
                shapes,
                kind="parameter",
            )
    if target.rank is not None and mapping and mapping[-1] >= target.rank:
        raise _fail(
            f"axes_mapping entries must be below the target rank {target.rank}; got {listed}",
            mode,
            shapes,
            kind="parameter",
        )
    data_axes = tuple(mapping) if data.rank is not None else None
    if target.rank is None:
        return Plan(mode, shapes, _DYNAMIC, (data_axes, None), axes_mapping=mapping)
    alignment = (data_axes, tuple(range(target.rank)))
    if data.rank is None:
        return Plan(mode, shapes, target, alignment, axes_mapping=mapping)
    pairs = list(enumerate(mapping))
    dims = _merge_one_way(
        mode, shapes, target, pairs, data, alignment, "data must equal the target or be 1", 0
    )
    return Plan(mode, shapes, Shape._of_dims(dims), alignment, axes_mapping=mapping)


RuleFn = Callable[[tuple[Shape, ...], int, "tuple[int, ...] | None"], Plan]

_RULES: Final[dict[Mode, RuleFn]] = {
    Mode.NUMPY: _rule_numpy,
    Mode.NONE: _rule_none,
    Mode.PDPD: _rule_pdpd,
    Mode.UNIDIRECTIONAL: _rule_unidirectional,
    Mode.BIDIRECTIONAL: _rule_bidirectional,
    Mode.EXPLICIT: _rule_explicit,
}
