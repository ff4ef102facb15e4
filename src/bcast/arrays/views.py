"""Views: a `Plan` applied to arrays, as read-only, zero-copy broadcasts.

Every rule set ends in the same two steps (see `bcast.core.lowering`): reshape each operand to its
*aligned shape* (``Plan.aligned_shape``: 1s where it has no axis, PDPD's dropped trailing
ones removed), then broadcast it multidirectionally to the output with the array library's
own ``broadcast_to``. Both steps only insert or remove axes of length 1 and set strides to 0,
so the result is a view whatever its size: O(1) time and memory.

Each entry asks `bcast.arrays.libraries.library_of` once which library the operands are of:
NumPy arrays take a direct path, any other array its array-API namespace, and Dask arrays
(alone or with NumPy ones) go to `bcast.arrays.dask` (lazy, chunk-aware views).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Union

from bcast.arrays.libraries import NUMPY, as_operands, shape_of
from bcast.arrays.targets import (
    check_result_shape,
    plan_to_target,
    static_shape,
)
from bcast.core.modes import Mode, ModeName
from bcast.core.planning import plan
from bcast.core.shape import ShapeLike

if TYPE_CHECKING:
    from bcast.core.plans import Plan

__all__ = ["Array", "ArrayT", "Scalar", "broadcast_arrays", "broadcast_to"]


class Array(Protocol):
    """What bcast needs of an array: a shape and a dtype (any array-API array has them)."""

    @property
    def shape(self) -> Sequence[int | None]:
        """The array's dims."""

    @property
    def dtype(self) -> Any:
        """The array's element type."""


ArrayT = TypeVar("ArrayT", bound=Array)
"""An array of one library: what a function takes in, it gives back (NumPy in, NumPy out)."""

Scalar = Union[bool, int, float]
"""A Python scalar operand: it takes the dtype of an array operand (the array API rule)."""


def broadcast_to(
    x: ArrayT,
    /,
    shape: ShapeLike,
    *,
    mode: ModeName | Mode = "numpy",
    axis: int = -1,
    axes_mapping: Sequence[int] | None = None,
) -> ArrayT:
    """Broadcast ``x`` to ``shape`` as a zero-copy view (read-only where the library can say so).

    ``x`` plays B (the data) and ``shape`` plays A (the target), as in OpenVINO's Broadcast
    op. The view is computed from `bcast.plan` only: ``x`` is reshaped to the plan's aligned
    shape and handed to its own library's ``broadcast_to``.

    ==================  =========================================================================
    ``numpy``           NumPy's ``np.broadcast_to``: one-directional, the result is exactly
                        ``shape`` (ONNX unidirectional with A = ``shape``; OpenVINO Broadcast
                        numpy mode). ``unidirectional`` is the same rule.
    ``bidirectional``   ONNX Expand / OpenVINO Broadcast-3 bidirectional: the result is the
                        NumPy broadcast of both and may exceed ``shape``.
    ``pdpd``            OpenVINO PDPD: ``x`` placed in ``shape`` from ``axis`` (-1: right-aligned).
    ``explicit``        OpenVINO explicit: ``axes_mapping`` gives the target axis of each axis of
                        ``x``.
    ``none``            ``shape`` must be the shape of ``x``.
    ==================  =========================================================================

    Parameters
    ----------
    x : array
        A NumPy array or any array-API array (PyTorch, CuPy, JAX, Dask, array-api-strict).
    shape : Shape, str or sequence of int
        The target shape; it must be static.
    mode : str or Mode, default "numpy"
        One of the rule sets above (``multidirectional`` is an alias of ``numpy``).
    axis : int, default -1
        PDPD only: the axis of ``shape`` where ``x`` starts.
    axes_mapping : sequence of int, optional
        Explicit only: the target axis of each axis of ``x``, strictly increasing.

    Returns
    -------
    array
        A view of ``x``, of ``x``'s library, with the broadcast shape. Stretched axes have
        stride 0. NumPy views (and array-api-strict's, NumPy underneath) are read-only;
        write to a copy (``np.array(view)``). Libraries without a read-only flag
        (PyTorch, CuPy) return a *writable* view that writes through to ``x``: writing
        one element changes it in ``x`` and along every stretched axis, and in-place
        operations on it fail (PyTorch: "more than one element of the written-to tensor
        refers to a single memory location"). JAX arrays are immutable. For a new,
        writable array use `bcast.ops.expand` or `bcast.ops.broadcast`.

    Raises
    ------
    BroadcastError
        If ``x`` cannot be broadcast to ``shape`` under ``mode``, a parameter is invalid, or
        ``shape`` is not static.
    TypeError
        If ``x`` is not an array or ``shape`` is not shape-like.

    See Also
    --------
    broadcast_arrays : views of several arrays broadcast against each other.
    bcast.ops.expand, bcast.ops.broadcast : the same broadcasts, materialised.

    Notes
    -----
    Mode ``numpy`` means NumPy's ``broadcast_to``, which is one-directional; the n-ary
    multidirectional rule is what `broadcast_arrays` applies. Use ``bidirectional`` to let the
    result grow past ``shape``.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> x = np.arange(3)
    >>> v = bcast.broadcast_to(x, (2, 3))
    >>> v.shape, v.strides[0], v.flags.writeable
    ((2, 3), 0, False)
    >>> bcast.broadcast_to(np.arange(3), shape=(2, 3)).shape
    (2, 3)
    >>> bcast.broadcast_to(np.ones((3, 1)), (2, 1, 6), mode="bidirectional").shape
    (2, 3, 6)
    >>> bcast.broadcast_to(np.ones((3, 1)), (2, 3, 4), mode="pdpd", axis=1).shape
    (2, 3, 4)
    >>> bcast.broadcast_to(np.ones(16), (1, 16, 50, 50), mode="explicit", axes_mapping=[1]).shape
    (1, 16, 50, 50)
    >>> bcast.broadcast_to(np.ones((2, 3)), (3,))
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: unidirectional: B [2,3] has rank 2, more than A [3] (rank 1); ...
    """
    lib, (x,) = as_operands((x,))
    if lib.dask:
        from bcast.arrays import dask

        lazy: ArrayT = dask.broadcast_to(x, shape, mode=mode, axis=axis, axes_mapping=axes_mapping)
        return lazy
    target = static_shape(shape, "shape")
    the_plan, index = plan_to_target(
        shape_of(x), target, mode=mode, axis=axis, axes_mapping=axes_mapping
    )
    view: ArrayT = aligned_view(x, the_plan, index, broadcast=True, xp=lib.xp)
    return view


def broadcast_arrays(
    *arrays: ArrayT | Scalar, mode: ModeName | Mode = "numpy", axis: int = -1
) -> tuple[ArrayT, ...]:
    """Broadcast arrays against each other, as zero-copy views (read-only where possible).

    Parameters
    ----------
    *arrays : array
        Arrays of one library. ``numpy`` (multidirectional) takes any number, ``none`` one
        or more, ``pdpd`` exactly two (``A, B``: B is broadcast onto A).
    mode : str or Mode, default "numpy"
        The rule set (any mode but ``explicit``, which needs ``axes_mapping``: use
        `broadcast_to`).
    axis : int, default -1
        PDPD only: the axis of A where B starts.

    Returns
    -------
    tuple of array
        One view per operand, all with the broadcast shape. As for `broadcast_to`: NumPy
        (and array-api-strict) views are read-only; PyTorch and CuPy views are writable and
        write through to their operand, every stretched axis included.

    Raises
    ------
    BroadcastError
        If the shapes cannot be broadcast under ``mode`` or a parameter is invalid.
    TypeError
        If an operand is not an array, or the operands come from different libraries.

    See Also
    --------
    broadcast_to : one array onto a target shape.

    Notes
    -----
    NumPy's ``np.broadcast_arrays`` returns *writeable* views (writing to them is
    deprecated, not forbidden: a ``DeprecationWarning``, and reading the flag a
    ``FutureWarning``); bcast's NumPy views are read-only, as ``np.broadcast_to``'s. A
    write to a stretched axis lands on every element that shares the memory, which is
    never what the caller means, and the views of `broadcast_to` and `broadcast_arrays`
    should not differ. Write to a copy (``np.array(view)``).

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> a, b = bcast.broadcast_arrays(np.ones((2, 1)), np.arange(3))
    >>> a.shape, b.shape, b.strides
    ((2, 3), (2, 3), (0, 8))
    >>> a, b = bcast.broadcast_arrays(np.ones((2, 3, 4)), np.ones((3, 1)), mode="pdpd", axis=1)
    >>> b.shape
    (2, 3, 4)
    """
    lib, arrays = as_operands(arrays) if arrays else (NUMPY, arrays)  # one library, or TypeError
    if lib.dask:
        from bcast.arrays import dask

        lazy: tuple[ArrayT, ...] = dask.broadcast_arrays(*arrays, mode=mode, axis=axis)
        return lazy
    the_plan = plan(*(shape_of(x) for x in arrays), mode=mode, axis=axis)
    return tuple(  # each view checks the result's size with its own item size
        aligned_view(x, the_plan, k, broadcast=True, xp=lib.xp) for k, x in enumerate(arrays)
    )


# -- shared with bcast.ops and bcast.engine ------------------------------------------------


def aligned_view(x: Any, the_plan: Plan, index: int, *, broadcast: bool, xp: Any) -> Any:
    """Reshape ``x`` to the plan's aligned shape of operand ``index``; broadcast it if asked.

    ``xp`` is the operands' `Library.xp`: None for NumPy arrays. The reshape only inserts or
    removes axes of length 1, which every library does as a view. With ``broadcast=False``
    the result is left for the kernel's own broadcasting (which, on aligned shapes, is
    exactly what the plan says).
    """
    aligned = _aligned_shape(the_plan, index)
    if not broadcast:
        if xp is None:  # NumPy: x is an ndarray, so NumPy is loaded
            return x if x.shape == aligned else x.reshape(aligned)
        return x if tuple(shape_of(x)) == aligned else xp.reshape(x, aligned)
    shape = output_shape(the_plan)
    # a view NumPy (or another library) could not index: bcast's error, before any view
    itemsize = getattr(getattr(x, "dtype", None), "itemsize", 1)
    check_result_shape("broadcast", shape, int(itemsize or 1))
    if xp is None:
        return _numpy().broadcast_to(x.reshape(aligned), shape)
    if tuple(shape_of(x)) != aligned:
        x = xp.reshape(x, aligned)
    return xp.broadcast_to(x, shape)


def _numpy() -> Any:
    return sys.modules["numpy"]


_ALIGNED: dict[tuple[int, int], tuple[Plan, tuple[int, ...]]] = {}


def _aligned_shape(the_plan: Plan, index: int) -> tuple[int, ...]:
    """`Plan.aligned_shape` (index -1: the output), remembered for the plans `bcast.plan` caches.

    This is the hot path of every operator call. The entry keeps its plan alive and is
    checked by identity, so a recycled ``id`` never returns another plan's shape.
    """
    key = (id(the_plan), index)
    found = _ALIGNED.get(key)
    if found is not None and found[0] is the_plan:
        return found[1]
    aligned = the_plan.output.to_tuple() if index < 0 else the_plan.aligned_shape(index)
    if len(_ALIGNED) >= 4096:
        _ALIGNED.clear()
    _ALIGNED[key] = (the_plan, aligned)
    return aligned


def output_shape(the_plan: Plan) -> tuple[int, ...]:
    """Return the output shape of a plan on static shapes, as ints."""
    return _aligned_shape(the_plan, -1)
