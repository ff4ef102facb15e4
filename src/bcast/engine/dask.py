"""Operators on Dask arrays: the operator's own NumPy kernel, run lazily on each block.

`bcast.engine.executor.execute` hands Dask operands (alone or mixed with NumPy arrays) here.
The layout of the blocks is `bcast.arrays.dask.Layout`'s; on each output block the
operator's NumPy kernel (`bcast.engine.Kernel.numpy`) writes the result, so integer Div
truncation, Pow's dtypes and the other value rules hold on Dask exactly as on NumPy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dask.array
import numpy as np

from bcast.arrays.dask import Layout, aligned_operand, as_dask
from bcast.core.plans import Plan

__all__ = ["execute"]

# Dask's functions are untyped; one Any-typed handle keeps mypy --strict quiet about them.
da: Any = dask.array


def execute(
    op: str,
    the_plan: Plan,
    kernel: Any,
    operands: Sequence[Any],
    *,
    dtype: Any,
    out: Any,
    slots: Sequence[int] | None,
) -> Any:
    """Build the lazy result of an operator (the Dask branch of `bcast.engine.execute`).

    Parameters
    ----------
    op : str
        The operator's name, for messages and the graph's layer name.
    the_plan : Plan
        The operator's plan (its output may have ``?`` dims).
    kernel : Kernel
        The operator's kernel; its NumPy form runs on each output block.
    operands : sequence of array
        Dask or NumPy arrays, in the kernel's order.
    dtype : dtype
        The result's dtype (a NumPy dtype: Dask's dtypes are NumPy's).
    out : Dask array or None
        Where to write the result (lazily, with ``out[...] = result``).
    slots : sequence of int or None
        The plan operand of each operand (default: the same index).

    Returns
    -------
    dask.array.Array
        The lazy result, with the plan's output shape (NaN where it is unknown).

    Raises
    ------
    TypeError, ValueError
        If ``out`` is not a Dask array of the result's shape and dtype.
    """
    dtype = np.dtype(dtype)
    indices = list(range(len(operands))) if slots is None else list(slots)
    if op == "gemm" or not getattr(kernel, "blockwise", True):
        # Gemm's kernel is not element-wise (it closes over A and B): its array-API form
        # runs on Dask (da.matmul), with C aligned by the plan.
        result = _gemm(the_plan, kernel, operands, indices, dtype)
    else:
        layout = Layout(the_plan, list(operands), indices, dtype)
        exact = layout.exact_positions(indices)
        compute = _Kernel(kernel.numpy, getattr(kernel, "precheck", None), dtype, len(operands))
        result = layout.blockwise(op, compute, layout.arrays, exact, dtype)
    return _write_out(op, result, out, dtype)


class _Kernel:
    """Allocate an output block and let the operator's NumPy kernel write into it.

    The kernel's ``precheck`` (integer division by zero, ...) runs on each block first, so a
    block raises the error the NumPy engine raises for the whole array.
    """

    def __init__(
        self,
        numpy_kernel: Callable[..., None],
        precheck: Callable[..., None] | None,
        dtype: Any,
        count: int,
    ) -> None:
        self.numpy_kernel = numpy_kernel
        self.precheck = precheck
        self.dtype = dtype
        self.count = count

    def __call__(self, shape: tuple[int, ...], blocks: Sequence[Any]) -> Any:
        out = np.empty(shape, dtype=self.dtype)
        operands = blocks[: self.count]
        if self.precheck is not None:
            self.precheck(out, *operands)
        # ONNX arithmetic is IEEE / C arithmetic (as in bcast.engine): no warnings.
        with np.errstate(all="ignore"):
            self.numpy_kernel(out, *operands)
        return out


def _gemm(
    the_plan: Plan, kernel: Any, operands: Sequence[Any], indices: list[int], dtype: Any
) -> Any:
    from array_api_compat import array_namespace

    xp = array_namespace(da.ones(1))
    pairs = zip(operands, indices, strict=True)
    views = [aligned_operand(as_dask(x), the_plan, k) for x, k in pairs]
    result = da.asarray(kernel.generic(xp, *views))
    shape = the_plan.output.to_tuple()
    if tuple(result.shape) != shape:
        result = da.broadcast_to(result, shape)
    return result if result.dtype == dtype else result.astype(dtype)


def _write_out(op: str, result: Any, out: Any, dtype: Any) -> Any:
    """Return ``result``, or write it into the Dask array ``out`` (lazily) and return ``out``."""
    if out is None:
        return result
    if not isinstance(out, da.Array):
        raise TypeError(f"{op}: out must be a Dask array like the operands; got {type(out)}")
    if tuple(out.shape) != tuple(result.shape):
        raise ValueError(
            f"{op}: out has shape {list(out.shape)}; the result's is {list(result.shape)}"
        )
    if np.dtype(out.dtype) != dtype:
        raise TypeError(f"{op}: out has dtype {out.dtype}; the result's is {dtype}")
    out[...] = result
    return out
