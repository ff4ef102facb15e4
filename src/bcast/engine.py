"""The execution engine: the one place where operator kernels run.

An operator hands over a `Plan`, a `Kernel` and its operands. The engine reshapes each
operand to the plan's aligned shape (a view), checks the memory guard, allocates the
result once (or validates ``out=``), and lets the kernel write into it. NumPy kernels write
with ``out=``, without temporaries of the output's size for the plain element-wise
operators; other array libraries run the kernel's array-API form through their namespace.

Keeping every kernel call here is what lets a later version split the output into blocks
and run them on threads without touching the operators.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bcast.arrays import aligned_view, output_shape, shape_of
from bcast.plans import Plan

__all__ = ["Kernel", "execute"]


@dataclass(frozen=True, slots=True)
class Kernel:
    """One operator's computation, for NumPy and for any array-API namespace.

    Attributes
    ----------
    numpy : callable
        ``numpy(out, *operands)`` writes the result into ``out``; the operands are at the
        output's rank (aligned shapes), so NumPy's own broadcasting applies the plan.
    generic : callable
        ``generic(xp, *operands)`` returns the result, computed with namespace ``xp``.
    single_pass : bool
        True when ``numpy`` is one ufunc call, which NumPy makes safe when ``out`` overlaps
        an operand; otherwise the engine computes into a fresh array and copies.
    """

    numpy: Callable[..., None]
    generic: Callable[..., Any]
    single_pass: bool = False


def execute(
    op: str,
    plan: Plan,
    kernel: Kernel,
    operands: Sequence[Any],
    *,
    dtype: Any,
    out: Any,
    xp: Any,
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
    xp : namespace or None
        None for NumPy arrays, else the operands' array-API namespace.
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
    shape = output_shape(plan)
    indices = range(len(operands)) if slots is None else slots
    if xp is None:
        views = [
            aligned_view(x, plan, k, broadcast=False)
            for x, k in zip(operands, indices, strict=True)
        ]
        return _run_numpy(op, shape, kernel, views, np.dtype(dtype), out)
    views = [
        aligned_view(x, plan, k, broadcast=False, xp=xp)
        for x, k in zip(operands, indices, strict=True)
    ]
    return _run_generic(op, shape, kernel, views, dtype, out, xp)


def _run_numpy(
    op: str,
    shape: tuple[int, ...],
    kernel: Kernel,
    views: list[Any],
    dtype: np.dtype[Any],
    out: Any,
) -> Any:
    if out is not None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"{op}: out must be a NumPy array like the operands; got {type(out)}")
        _check_out(op, shape_of(out), shape, str(out.dtype), str(dtype))
        if not out.flags.writeable:
            raise ValueError(f"{op}: out is read-only")
        if not kernel.single_pass and any(np.may_share_memory(out, v) for v in views):
            result = _allocate(op, shape, dtype)
            _call(kernel, result, views)
            np.copyto(out, result)
            return out
        _call(kernel, out, views)
        return out
    result = _allocate(op, shape, dtype)
    _call(kernel, result, views)
    return result


def _allocate(op: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    from bcast.ops import _guard  # at call time: bcast.ops imports this module

    _guard.check(op, shape, dtype, dtype.itemsize)
    return np.empty(shape, dtype=dtype)


def _call(kernel: Kernel, out: Any, views: list[Any]) -> None:
    # ONNX arithmetic is IEEE / C arithmetic: 1/0 is inf, integers wrap; NumPy's warnings
    # about it are noise here.
    with np.errstate(all="ignore"):
        kernel.numpy(out, *views)


def _run_generic(
    op: str,
    shape: tuple[int, ...],
    kernel: Kernel,
    views: list[Any],
    dtype: Any,
    out: Any,
    xp: Any,
) -> Any:
    from array_api_compat import array_namespace, is_lazy_array

    from bcast.ops import _guard  # at call time: bcast.ops imports this module
    from bcast.ops._dtypes import ITEMSIZE, dtype_name

    name = dtype_name(dtype, xp)
    if out is not None:
        if not hasattr(out, "dtype") or array_namespace(out) is not xp:
            raise TypeError(f"{op}: out must be an array of the operands' library")
        _check_out(op, shape_of(out), shape, dtype_name(out.dtype, xp), name)
    elif not any(is_lazy_array(v) for v in views):
        _guard.check(op, shape, name, ITEMSIZE.get(name, 8))
    result = kernel.generic(xp, *views)
    if tuple(shape_of(result)) != shape:  # a kernel returning a view of lower rank
        result = xp.broadcast_to(result, shape)
    if result.dtype != dtype:
        result = xp.astype(result, dtype)
    if out is None:
        return result
    out[...] = result
    return out


def _check_out(op: str, got: tuple[int, ...], shape: tuple[int, ...], have: str, want: str) -> None:
    if got != shape:
        raise ValueError(f"{op}: out has shape {list(got)}; the result's is {list(shape)}")
    if have != want:
        raise TypeError(f"{op}: out has dtype {have}; the result's is {want}")
