"""Views: a `Plan` applied to arrays, as read-only, zero-copy broadcasts.

Every rule set ends in the same two steps (see `bcast.lowering`): reshape each operand to its
*aligned shape* (``Plan.aligned_shape``: 1s where it has no axis, PDPD's dropped trailing
ones removed), then broadcast it multidirectionally to the output with the array library's
own ``broadcast_to``. Both steps only insert or remove axes of length 1 and set strides to 0,
so the result is a view whatever its size: O(1) time and memory.

NumPy arrays take a direct path. Any other array goes through the namespace that
`array_api_compat` gives it (PyTorch, CuPy, JAX, array-api-strict), imported only
then, so ``import bcast`` loads neither NumPy nor array-api-compat. Dask arrays, alone or
with NumPy ones, go to ``bcast._dask`` (lazy, chunk-aware views; imported only then).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from bcast.errors import BroadcastError
from bcast.modes import Mode
from bcast.rules import plan
from bcast.shape import ShapeLike, as_shape

if TYPE_CHECKING:
    from bcast.plans import Plan

__all__ = ["Array", "broadcast_arrays", "broadcast_to"]


class Array(Protocol):
    """What bcast needs of an array: a shape and a dtype (any array-API array has them)."""

    @property
    def shape(self) -> Sequence[int | None]:
        """The array's dims."""

    @property
    def dtype(self) -> Any:
        """The array's element type."""


ArrayT = TypeVar("ArrayT", bound=Array)

_DASK_CORE = "dask.array.core"  # the module of dask.array.Array (see `is_dask`)

# x plays B / data, the target shape plays A / target: the order `plan` takes them in, and
# the index of x among them.
_TARGET_FIRST = (Mode.NUMPY, Mode.UNIDIRECTIONAL, Mode.PDPD, Mode.NONE)


def broadcast_to(
    x: ArrayT,
    shape: ShapeLike,
    /,
    *,
    mode: str | Mode = "numpy",
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
    >>> bcast.broadcast_to(np.ones((3, 1)), (2, 1, 6), mode="bidirectional").shape
    (2, 3, 6)
    >>> bcast.broadcast_to(np.ones((3, 1)), (2, 3, 4), mode="pdpd", axis=1).shape
    (2, 3, 4)
    >>> bcast.broadcast_to(np.ones(16), (1, 16, 50, 50), mode="explicit", axes_mapping=[1]).shape
    (1, 16, 50, 50)
    >>> bcast.broadcast_to(np.ones((2, 3)), (3,))
    Traceback (most recent call last):
    ...
    bcast.errors.BroadcastError: unidirectional: B [2,3] has rank 2, more than A [3] (rank 1); ...
    """
    if is_dask(x):  # Dask hook: lazy, chunk-aware views (bcast._dask, imported only now)
        from bcast import _dask

        lazy: ArrayT = _dask.broadcast_to(x, shape, mode=mode, axis=axis, axes_mapping=axes_mapping)
        return lazy
    target = static_shape(shape, "shape")
    the_plan, index = plan_to_target(
        shape_of(x), target, mode=mode, axis=axis, axes_mapping=axes_mapping
    )
    view: ArrayT = aligned_view(x, the_plan, index, broadcast=True)
    return view


def broadcast_arrays(
    *arrays: ArrayT, mode: str | Mode = "numpy", axis: int = -1
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
    if _DASK_CORE in sys.modules and any(is_dask(x) for x in arrays):  # Dask hook (bcast._dask)
        namespace_of(*arrays)  # Dask and NumPy only, or TypeError
        from bcast import _dask

        lazy: tuple[ArrayT, ...] = _dask.broadcast_arrays(*arrays, mode=mode, axis=axis)
        return lazy
    the_plan = plan(*(shape_of(x) for x in arrays), mode=mode, axis=axis)
    if arrays:
        namespace_of(*arrays)  # one library for all, or TypeError
    return tuple(aligned_view(x, the_plan, k, broadcast=True) for k, x in enumerate(arrays))


# -- shared with bcast.ops and bcast.engine ------------------------------------------------


def static_shape(shape: ShapeLike, what: str) -> tuple[int, ...]:
    """Normalise a target shape to a tuple of ints (the form `plan` caches).

    >>> static_shape([2, 3], "shape"), static_shape("[4]", "shape")
    ((2, 3), (4,))
    """
    if isinstance(shape, (tuple, list)) and all(type(d) is int for d in shape):
        if any(d < 0 for d in shape):
            as_shape(tuple(shape))  # raises the shape layer's error for negative dims
        return tuple(shape)
    normal = as_shape(shape)
    if not normal.is_static:
        raise BroadcastError(f"{what} must be static to broadcast an array; got {normal}")
    return normal.to_tuple()


def shape_of(x: object) -> tuple[int, ...]:
    """Return the shape of an array as a tuple of ints, or raise for a non-array or unknown dims.

    >>> import numpy as np
    >>> shape_of(np.ones((2, 3)))
    (2, 3)
    """
    shape = getattr(x, "shape", None)
    if shape is None or not hasattr(x, "dtype"):
        raise TypeError(f"expected an array (with shape and dtype); got {type(x).__name__}")
    if type(shape) is tuple and all(type(d) is int for d in shape):
        return shape
    dims = tuple(shape)
    for d in dims:
        if d is None or d != d:  # None (array API) or NaN (Dask's unknown chunks)
            raise ValueError(f"the array's shape must be known to broadcast it; got {dims}")
    return tuple(int(d) for d in dims)


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
    if parsed in _TARGET_FIRST:
        rule = Mode.UNIDIRECTIONAL if parsed is Mode.NUMPY else parsed
        return plan(target, x_shape, mode=rule, axis=axis, axes_mapping=axes_mapping), 1
    return plan(x_shape, target, mode=parsed, axis=axis, axes_mapping=axes_mapping), 0


def namespace_of(*arrays: object) -> Any:
    """Return None when every operand is a NumPy array, else their array-API namespace.

    `array_api_compat` is imported here, the first time a non-NumPy array arrives. Operands
    of different libraries raise TypeError (from `array_api_compat.array_namespace`).
    """
    np = sys.modules.get("numpy")
    if np is not None and all(isinstance(x, np.ndarray) for x in arrays):
        return None
    for x in arrays:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(f"expected an array (with shape and dtype); got {type(x).__name__}")
    from array_api_compat import array_namespace

    # Dask hook: NumPy operands may join Dask ones (bcast._dask wraps them lazily).
    if (
        np is not None
        and any(is_dask(x) for x in arrays)
        and all(is_dask(x) or isinstance(x, (np.ndarray, np.generic)) for x in arrays)
    ):
        return array_namespace(*(x for x in arrays if is_dask(x)))
    return array_namespace(*arrays)


def is_dask(x: object) -> bool:
    """Tell whether ``x`` is a Dask array, without importing Dask.

    A Dask array can only exist once ``dask.array`` is imported, so this is one dictionary
    lookup when it is not.
    """
    core = sys.modules.get(_DASK_CORE)
    return core is not None and isinstance(x, core.Array)


def is_dask_namespace(xp: object) -> bool:
    """Tell whether ``xp`` is array-api-compat's namespace for Dask arrays."""
    return getattr(xp, "__name__", None) == "array_api_compat.dask.array"


def dims_of(x: object) -> tuple[int | None, ...]:
    """Return an array's dims for planning: `shape_of`, with a Dask dim of unknown length as None.

    None is ``?`` in the Shape the rules get, so the checks that the known dims decide still
    run. Other arrays go through `shape_of` (which rejects unknown dims).

    >>> import numpy as np
    >>> dims_of(np.ones((2, 3)))
    (2, 3)
    """
    shape = getattr(x, "shape", None)
    if type(shape) is tuple and all(type(d) is int for d in shape):
        return shape
    if is_dask(x):
        from bcast import _dask

        return _dask.dims_of(x)
    return shape_of(x)


def aligned_view(x: Any, the_plan: Plan, index: int, *, broadcast: bool, xp: Any = None) -> Any:
    """Reshape ``x`` to the plan's aligned shape of operand ``index``; broadcast it if asked.

    The reshape only inserts or removes axes of length 1, which every library does as a
    view. With ``broadcast=False`` the result is left for the kernel's own broadcasting
    (which, on aligned shapes, is exactly what the plan says).
    """
    aligned = _aligned_shape(the_plan, index)
    np = sys.modules.get("numpy")
    if xp is None and np is not None and isinstance(x, np.ndarray):
        if not broadcast:
            return x if x.shape == aligned else x.reshape(aligned)
        return np.broadcast_to(x.reshape(aligned), output_shape(the_plan))
    if xp is None:
        xp = namespace_of(x)
    if tuple(shape_of(x)) != aligned:
        x = xp.reshape(x, aligned)
    if not broadcast:
        return x
    return xp.broadcast_to(x, output_shape(the_plan))


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
