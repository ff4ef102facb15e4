"""The public face of the rules: `plan` and `broadcast_shapes`, with the plan cache.

A plan of static shapes given as tuples of plain ints is computed once per distinct call and
kept (up to 4096 of them); everything else goes straight to `bcast.core.rules.apply_rule`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from bcast.core.modes import Mode, ModeName
from bcast.core.plans import Plan
from bcast.core.rules import apply_rule
from bcast.core.shape import Shape, ShapeLike

__all__ = ["broadcast_shapes", "plan"]

_CACHE: dict[object, Plan] = {}
_CACHE_SIZE: Final = 4096
_NUMPY: Final = "numpy"  # the default of ``mode``; compared by identity
_DEFAULT_AXIS: Final = -1  # likewise (CPython keeps one -1)


def plan(
    *shapes: ShapeLike,
    mode: ModeName | Mode = _NUMPY,
    axis: int = _DEFAULT_AXIS,
    axes_mapping: Sequence[int] | None = None,
    labels: Sequence[str] | None = None,
) -> Plan:
    """Apply a broadcasting rule and return the full `Plan` (output and alignment).

    Same arguments as `broadcast_shapes`, and ``labels``: the operands' names in the
    messages and pictures of a `BroadcastError` (default: by role, ``A``/``B``,
    ``data``/``target`` or ``#0``, ``#1``...). Plans of shapes given as tuples of ints or
    as `Shape` objects are cached, so the rule runs once per distinct call.

    Examples
    --------
    >>> import bcast
    >>> p = bcast.plan((16,), (1, 16, 50, 50), mode="explicit", axes_mapping=[1])
    >>> p.aligned_shape(0), str(p.output)
    ((1, 16, 1, 1), '[1,16,50,50]')
    """
    if labels is not None:
        return apply_rule(shapes, mode, axis, axes_mapping, labels)
    key = _key(shapes, mode, axis, axes_mapping)
    try:
        found = _CACHE.get(key)  # get: a miss raises nothing (raising costs more)
    except TypeError:  # unhashable (lists): take the slow path
        found = None
    cacheable = _cacheable(shapes, axis, axes_mapping)
    if found is not None and cacheable:
        return found
    result = apply_rule(shapes, mode, axis, axes_mapping)
    if cacheable:
        if len(_CACHE) >= _CACHE_SIZE:
            # Clearing is O(1) amortised; deleting the oldest key of a dict scans past the
            # slots of earlier deletions, on every call.
            _CACHE.clear()
        _CACHE[key] = result
    return result


def _key(shapes: tuple[object, ...], mode: object, axis: object, axes_mapping: object) -> object:
    """Return the plan cache's key: the shapes alone for the default arguments.

    The two forms never meet: a cached default key is a tuple of tuples of ints, a full key
    holds the mode (a str or Mode) second. The short one saves building and hashing a
    4-tuple on the hot path of repeated calls (``benchmarks/bench_shapes.py`` times it).
    """
    if mode is _NUMPY and axis is _DEFAULT_AXIS and axes_mapping is None:
        return shapes
    return (shapes, mode, axis, axes_mapping)


def _cacheable(shapes: tuple[object, ...], axis: object, axes_mapping: object) -> bool:
    """Return True when a call may be answered from, or stored in, the cache.

    A cache hit alone is not enough: ``(True,)`` and ``(2.0,)`` hash and compare equal to
    ``(1,)`` and ``(2,)``, ``axis=True`` or ``axis=1.0`` to ``axis=1``, and ``(True,)`` to
    ``(1,)`` as ``axes_mapping``; they must raise TypeError, not return a cached plan. So
    only shapes that are tuples of plain ints or `Shape` objects (and a plain int axis, a
    tuple of them as axes_mapping) are cached. This runs on every repeated call: one
    function, plain loops.
    """
    if type(axis) is not int:
        return False
    if axes_mapping is not None and (
        type(axes_mapping) is not tuple or any(type(i) is not int for i in axes_mapping)
    ):
        return False
    for s in shapes:
        if type(s) is Shape:
            continue  # immutable, its dims checked when it was made (a model's [batch,seq,64])
        if type(s) is not tuple:
            return False
        for d in s:
            if type(d) is not int:
                return False
    return True


def broadcast_shapes(
    *shapes: ShapeLike,
    mode: ModeName | Mode = _NUMPY,
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
    bcast.BroadcastError: numpy: cannot broadcast [2,3] and [4] at axis 1: 3 vs 4
      #0  2  3
      #1     4
             ^ axis 1
    """
    if mode is _NUMPY and axis is _DEFAULT_AXIS and axes_mapping is None:
        # The hot path: `_key` and `_cacheable` inlined for the default arguments (two calls
        # saved; ``benchmarks/bench_shapes.py`` times it).
        try:
            found = _CACHE.get(shapes)
        except TypeError:  # lists: as tuples, when they hold plain ints (cached too)
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
        return apply_rule(shapes, mode, axis, axes_mapping).output
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
        return apply_rule(shapes, _NUMPY, _DEFAULT_AXIS, None).output
    if not _cacheable(key, _DEFAULT_AXIS, None):
        return apply_rule(shapes, _NUMPY, _DEFAULT_AXIS, None).output
    if found is None:
        found = plan(*key)
    return found.output
