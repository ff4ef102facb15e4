"""The execution engine: the one place where operator kernels run.

An operator hands over a `Plan`, a `Kernel`, its operands and their `Library`. The engine
reshapes each operand to the plan's aligned shape (a view), checks the memory guard,
allocates the result once (or validates ``out=``) and lets the kernel write into it. NumPy
work runs in `bcast.engine.numpy_path` (one call, compiled walkers, or blocks on threads); a
NumPy call can also be planned once and replayed (`bcast.engine.calls`); other libraries
run the kernel's array-API form on their own device; Dask runs per block
(`bcast.engine.dask`). ``docs/architecture.md`` tells the whole path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from bcast.arrays.dtypes import ITEMSIZE, dtype_name
from bcast.arrays.libraries import Library, shape_of
from bcast.arrays.targets import check_result_shape
from bcast.arrays.views import aligned_view, output_shape
from bcast.core.plans import Plan
from bcast.engine import guard
from bcast.engine.config import Settings, get_settings, settings
from bcast.engine.kernel import Kernel
from bcast.engine.numpy_path import check_out, quiet_run, run_numpy

__all__ = ["TINY", "Kernel", "Settings", "execute", "get_settings", "quiet_run", "settings"]


# -- execute -------------------------------------------------------------------------------


def execute(
    op: str,
    plan: Plan,
    kernel: Kernel,
    operands: Sequence[Any],
    *,
    dtype: Any,
    out: Any,
    lib: Library,
    slots: Sequence[int] | None = None,
) -> Any:
    """Run ``kernel`` on the operands as ``plan`` aligns them; return the result.

    Parameters
    ----------
    op : str
        The operator's name, for messages.
    plan : Plan
        A plan on static shapes; its output is the result's shape.
    kernel : Kernel
        What to compute.
    operands : sequence of array
        The arrays the kernel reads, in the kernel's order.
    dtype : dtype
        The result's dtype (a NumPy dtype, or a dtype of ``xp``).
    out : array or None
        Where to write the result; None allocates it.
    lib : Library
        The operands' library, as the operator's entry asked it (`bcast.arrays.library_of`).
    slots : sequence of int, optional
        The plan operand of each operand (default: the same index).

    Returns
    -------
    array
        ``out``, or the new result.

    Raises
    ------
    MemoryLimitError
        If the result must be allocated and would exceed the memory limit.
    TypeError
        If ``out`` is not an array of the operands' library or has the wrong dtype.
    ValueError
        If ``out`` has the wrong shape or is read-only.
    """
    if lib.dask:  # lazy, per block (bcast.engine.dask, which imports Dask)
        from bcast.engine import dask

        return dask.execute(op, plan, kernel, operands, dtype=dtype, out=out, slots=slots)
    xp = lib.xp
    shape = output_shape(plan)
    check_result_shape(op, shape, np.dtype(dtype).itemsize if xp is None else 1)
    if xp is None and not all(x.dtype.isnative for x in operands):  # '>u8' on little-endian
        operands = [
            x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("=")) for x in operands
        ]
    indices = range(len(operands)) if slots is None else slots
    views = [
        aligned_view(x, plan, k, broadcast=False, xp=xp)
        for x, k in zip(operands, indices, strict=True)
    ]
    if xp is None:
        return run_numpy(op, shape, kernel, views, np.dtype(dtype), out)
    return _run_generic(op, shape, kernel, views, dtype, out, xp)


def _run_generic(
    op: str,
    shape: tuple[int, ...],
    kernel: Kernel,
    views: list[Any],
    dtype: Any,
    out: Any,
    xp: Any,
) -> Any:
    # Everything here stays in ``xp`` and on the operands' device (CuPy, torch CUDA): no
    # np.asarray, no host copies. Dask never comes here (`execute` hands it to bcast.arrays.dask),
    # so the output shape is static and the memory guard always applies, JAX arrays (traced
    # under jit or not) included.
    from array_api_compat import array_namespace, is_writeable_array

    name = dtype_name(dtype, xp)
    if out is not None:
        if not hasattr(out, "dtype") or array_namespace(out) is not xp:
            raise TypeError(f"{op}: out must be an array of the operands' library")
        check_out(op, shape_of(out), shape, dtype_name(out.dtype, xp), name)
        if not is_writeable_array(out):  # before computing anything
            raise ValueError(f"{op}: out is read-only (or of a library of immutable arrays)")
    else:
        guard.check(op, shape, name, ITEMSIZE.get(name, 8))
    try:
        result = kernel.generic(xp, *views)
    except NotImplementedError as err:  # PyTorch's uint16..uint64 hold data, nothing more
        library = getattr(xp, "__name__", "the operands' library").rsplit(".", 1)[-1]
        raise TypeError(
            f"{op}: {library} does not compute this operator on {name} ({err})"
        ) from None
    if result.dtype != dtype:
        result = xp.astype(result, dtype)  # a new array (the array API's default copy=True)
    if out is not None:
        out[...] = result  # broadcasts a result below the output's shape
        return out
    if tuple(shape_of(result)) != shape or any(result is v for v in views):
        return _materialise(xp, result, shape)
    return result


def _materialise(xp: Any, x: Any, shape: tuple[int, ...]) -> Any:
    """Return a new, writable, C-contiguous array of ``shape`` holding ``x`` broadcast.

    For kernels that return an operand itself (Copy: Expand, Broadcast), below the output's
    shape. ``xp.broadcast_to`` alone would give a stride-0 view that writes through to the
    operand (PyTorch) or is read-only (array-api-strict), and ``xp.asarray(view, copy=True)``
    keeps NumPy's order "K", which turns a stride-0 view into a Fortran-ordered copy
    (array-api-strict). So: allocate on the operand's device and assign. JAX arrays are
    immutable and have no strides: there ``broadcast_to`` gives the new array.
    """
    from array_api_compat import device, is_jax_namespace, is_writeable_array

    if is_jax_namespace(xp):
        return xp.broadcast_to(x, shape)
    fresh = xp.empty(shape, dtype=x.dtype, device=device(x))
    if not is_writeable_array(fresh):  # another library of immutable arrays
        return xp.asarray(xp.broadcast_to(x, shape), copy=True)
    fresh[...] = x
    return fresh


# -- the tiny fast path --------------------------------------------------------------------

TINY: Final = 4096
"""Binary calls whose operand sizes multiply to at most this take the tiny path."""
