"""A broadcast of one array onto a target shape, planned: the target normalised, roles set.

`bcast.broadcast_to`, the materialising operators (Expand, Broadcast) and the Dask views
all plan "this array onto that shape" the same way, here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.planning import plan
from bcast.core.plans import Plan
from bcast.core.shape import ShapeLike, as_shape

__all__ = [
    "MAX_RANK",
    "check_array_shape",
    "check_result_shape",
    "int_dims",
    "plan_to_target",
    "static_shape",
]

MAX_RANK: Final = 64
"""The most dimensions a NumPy array has (NumPy 2; 32 before it)."""
_MAX_BYTES: Final = 2**63 - 1  # NumPy's intp: sizes and byte counts must fit in it

# x plays B / data, the target shape plays A / target: the order `plan` takes them in, and
# the index of x among them.
_TARGET_FIRST: Final = (Mode.NUMPY, Mode.UNIDIRECTIONAL, Mode.PDPD, Mode.NONE)


def int_dims(dims: object) -> tuple[int, ...] | None:
    """Return ``dims`` as a tuple if it is a tuple or list of Python ints (no bools), else None.

    A tuple's subclass (``torch.Size``) counts as a tuple.

    >>> int_dims([2, 3]), int_dims((2.0, 3)), int_dims([True]), int_dims("[2,3]")
    ((2, 3), None, None, None)
    """
    if not isinstance(dims, (tuple, list)):
        return None
    for d in dims:
        if type(d) is not int:
            return None
    return tuple(dims)


def static_shape(shape: ShapeLike, what: str) -> tuple[int, ...]:
    """Normalise a target shape to a tuple of ints (the form `plan` caches).

    >>> static_shape([2, 3], "shape"), static_shape("[4]", "shape")
    ((2, 3), (4,))
    """
    dims = int_dims(shape)
    if dims is not None:
        if any(d < 0 for d in dims):
            as_shape(dims)  # raises the shape layer's error for negative dims
        return dims
    normal = as_shape(shape)
    if not normal.is_static:
        raise BroadcastError(f"{what} must be static to broadcast an array; got {normal}")
    return normal.to_tuple()


def check_array_shape(
    shape: Sequence[int], itemsize: int, what: str, max_rank: int = MAX_RANK
) -> None:
    """Raise `BroadcastError` if an array of ``shape`` cannot exist: rank or size too large.

    NumPy refuses more than 64 dimensions, and sizes whose bytes (the non-zero dims
    multiplied, as NumPy counts them even for an empty array) exceed its intp.

    >>> check_array_shape((1,) * 65, 8, "the result")
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: the result would have rank 65; arrays have at most 64 dimensions
    >>> check_array_shape((0, 2**62), 8, "the result")
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: the result [0,4611686018427387904] is too large for an array: ...
    """
    if len(shape) > max_rank:
        raise BroadcastError(
            f"{what} would have rank {len(shape)}; arrays have at most {max_rank} dimensions"
        )
    nbytes = max(itemsize, 1)
    for d in shape:
        if d:
            nbytes *= d
    if nbytes > _MAX_BYTES:
        shown = "[" + ",".join(str(d) for d in shape) + "]"
        raise BroadcastError(
            f"{what} {shown} is too large for an array: more than 2**63-1 bytes, which "
            "NumPy's intp cannot index"
        )


def plan_to_target(
    x_shape: tuple[int | None, ...],
    target: tuple[int, ...],
    *,
    mode: str | Mode,
    axis: int = -1,
    axes_mapping: Sequence[int] | None = None,
) -> tuple[Plan, int]:
    """Plan a broadcast of an array of shape ``x_shape`` onto ``target``.

    Returns the plan and the index of the array among its operands: modes with roles
    ``A, B`` take the target first, ``data, target`` modes take the array first. Mode
    ``numpy`` is NumPy's one-directional ``broadcast_to``, i.e. the unidirectional rule.

    >>> p, k = plan_to_target((3,), (2, 3), mode="numpy")
    >>> str(p.mode), k, p.aligned_shape(k)
    ('unidirectional', 1, (1, 3))
    """
    parsed = Mode.parse(mode)
    if isinstance(axes_mapping, list):
        axes_mapping = tuple(axes_mapping)  # hashable: the plan cache can hold it
    check_array_shape(target, 1, "the target")
    if parsed in _TARGET_FIRST:
        rule = Mode.UNIDIRECTIONAL if parsed is Mode.NUMPY else parsed
        return plan(target, x_shape, mode=rule, axis=axis, axes_mapping=axes_mapping), 1
    return plan(x_shape, target, mode=parsed, axis=axis, axes_mapping=axes_mapping), 0


_FITS: set[tuple[tuple[int, ...], int]] = set()


def check_result_shape(op: str, shape: tuple[int, ...], itemsize: int) -> None:
    """`check_array_shape` for an operator's result, once per shape (the hot path skips it).

    >>> check_result_shape("add", (2, 3), 8)
    """
    if (shape, itemsize) in _FITS:
        return
    check_array_shape(shape, itemsize, f"{op}: the result")
    if len(_FITS) >= 4096:
        _FITS.clear()  # O(1) amortised, like the plan cache
    _FITS.add((shape, itemsize))
