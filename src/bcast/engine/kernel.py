"""`Kernel`: one operator's computation, as the engine runs it (NumPy, array API, compiled)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Kernel"]


@dataclass(frozen=True, slots=True)
class Kernel:
    """One operator's computation, for NumPy and for any array-API namespace.

    Attributes
    ----------
    numpy : callable
        ``numpy(out, *operands)`` writes the result into ``out``; the operands are at the
        output's rank (aligned shapes), so NumPy's own broadcasting applies the plan.
    generic : callable
        ``generic(xp, *operands)`` returns the result, computed with namespace ``xp``. It
        may return an operand itself, below the output's shape (Copy): the engine then
        makes the new array of the output's shape, so results are never views.
    single_pass : bool
        True when ``numpy`` is one ufunc call, which NumPy makes safe when ``out`` overlaps
        an operand; otherwise the engine computes into a fresh array and copies.
    ufunc : numpy.ufunc or None
        Set when ``numpy`` is exactly ``ufunc(*operands, out=out)`` for operands of one
        dtype (the tiny fast path calls it directly).
    blockwise : bool
        True when any block of the output is computed from the same block of the operands
        alone (every kernel but Gemm's): the engine may then split the work.
    precheck : callable or None
        ``precheck(out, *operands)``, run once on the whole operands before anything is
        written, for errors a block could otherwise find after others were written
        (integer division by zero).
    prepare : callable or None
        ``prepare(dtype, operands) -> (block_kernel, operands)``: a faster form of the
        kernel for large work, with operands converted once at their own size (Where's
        condition as a bit mask). Its results are those of ``numpy``, bit for bit.
    cost : float
        Work per output element relative to an addition (for the threading threshold).
    passes : int
        How many times ``numpy`` walks its output (more than one: cache-sized blocks).
    compiled : str or None
        The operation of `bcast.engine.compiled.OPERATIONS` that computes exactly what ``numpy``
        does, for large work when numba is installed; None: NumPy only.
    """

    numpy: Callable[..., None]
    generic: Callable[..., Any]
    single_pass: bool = False
    ufunc: Any = None
    blockwise: bool = True
    precheck: Callable[..., None] | None = None
    prepare: Callable[..., tuple[Callable[..., None], list[Any]]] | None = None
    cost: float = 1.0
    passes: int = 1
    compiled: str | None = None
