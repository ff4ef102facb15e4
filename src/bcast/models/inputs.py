"""A broadcasting node's concrete inputs, for the verifiers: shapes, sizes, random values.

Operands are placed as bcast's rules align them (`alignment_of`, from `Plan.alignment`);
an unknown dim takes the size it meets on its output axis (`concrete_shapes`); the memory
needed is checked before any input is drawn (`memory_problem`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from bcast.arrays.targets import MAX_RANK
from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError, show_bytes
from bcast.core.modes import Mode
from bcast.core.planning import plan
from bcast.core.shape import Shape
from bcast.engine.guard import get_memory_limit
from bcast.models.isolation import current_limits, tree_resident

_COMPARE_BYTES: Final = 40
"""Bytes per output element that the verifiers' comparison allocates (float64 copies, masks)."""

__all__ = [
    "alignment_of",
    "concrete_shapes",
    "memory_problem",
    "output_elements",
    "pick",
    "random_array",
]


def output_elements(
    shapes: Sequence[Sequence[int]],
    alignment: Sequence[tuple[int | None, ...] | None] | None = None,
) -> int:
    """Return an upper bound of a node's output elements: the largest size on each axis.

    Parameters
    ----------
    shapes : sequence of sequence of int
        Concrete input shapes (an Expand's or a Broadcast's target values count as one).
    alignment : sequence of tuple of (int or None), optional
        The output axis of each axis of each shape (`alignment_of`); right-aligned when
        omitted. An axis placed nowhere (None) adds nothing.

    Returns
    -------
    int
        The product over the output axes of the largest dim placed there: at least the
        output's size whenever the node is valid, computed without allocating anything.

    Examples
    --------
    >>> output_elements([(2**31, 1), (1, 2)])
    4294967296
    >>> output_elements([(4, 1), (4,)], alignment=[(0, 1), (0,)])  # PDPD: B from axis 0
    4
    """
    if alignment is None:
        rank = max((len(s) for s in shapes), default=0)
        alignment = [tuple(range(rank - len(s), rank)) for s in shapes]
    largest: dict[int, int] = {}
    for shape, axes in zip(shapes, alignment, strict=True):
        for size, out_axis in zip(shape, axes or (), strict=False):
            if out_axis is not None:
                largest[out_axis] = max(largest.get(out_axis, 0), max(int(size), 0))
    return math.prod(largest.values())


def memory_problem(
    inputs: Iterable[tuple[Sequence[int], int]],
    outputs: int,
    itemsize: int,
    *,
    runtimes: int,
) -> str | None:
    """Return why a node is too large to run here (a one-line reason), or None if it fits.

    The estimate: each implementation (bcast and every runtime) holds the inputs and an
    output, and `compare` makes float64 copies of two outputs. It is checked against the
    smaller of bcast's memory limit (`bcast.ops.get_memory_limit`) and half the memory limit
    of the model's work (`bcast.models.isolation.current_limits`: ``--max-memory``, by
    default a quarter of the available memory, at most 4 GiB), and against what that limit
    leaves once this process and its worker are counted (`isolation.tree_resident`:
    ``--max-memory`` bounds the two together), so that no input is drawn for a node that
    could only exhaust the machine or pass the limit.

    Parameters
    ----------
    inputs : iterable of (shape, itemsize)
        Concrete input shapes and their bytes per element.
    outputs : int
        The output's elements (`output_elements`).
    itemsize : int
        The output's bytes per element.
    runtimes : int
        How many runtimes run the node besides bcast.

    Returns
    -------
    str or None

    Examples
    --------
    >>> from bcast.ops import memory_limit
    >>> with memory_limit(2**20):
    ...     print(memory_problem([((1024, 1), 4), ((1, 1024), 4)], 1024 * 1024, 4, runtimes=1))
    too large to run: about 50348032 bytes (48.0 MiB) of inputs, results and comparison, ...
    """
    inputs = list(inputs)
    deepest = max((len(shape) for shape, _ in inputs), default=0)
    if deepest > MAX_RANK:
        return f"an input of rank {deepest}: arrays have at most {MAX_RANK} dimensions"
    copies = 1 + runtimes
    needed = sum(math.prod(max(int(d), 0) for d in shape) * size for shape, size in inputs)
    needed = copies * (needed + outputs * itemsize) + outputs * _COMPARE_BYTES
    limit = get_memory_limit()
    source = "see bcast.ops.set_memory_limit"
    budget = current_limits().memory()
    if budget is not None and (limit is None or budget // 2 < limit):
        limit = budget // 2  # the rest: the interpreters, the libraries, the estimate's error
        source = "half of --max-memory"
    used = tree_resident() if budget is not None else None
    if budget is not None and used is not None and (limit is None or budget - used < limit):
        limit = max(budget - used, 0)  # --max-memory bounds bcast and its worker together
        source = f"what --max-memory leaves: {show_bytes(used)} already resident"
    if limit is None or needed <= limit:
        return None
    return (
        f"too large to run: about {needed} bytes ({show_bytes(needed)}) of inputs, results and "
        f"comparison, more than the memory limit of {limit} bytes ({show_bytes(limit)}; "
        f"{source})"
    )


def alignment_of(
    shapes: Sequence[Shape],
    mode: Mode = Mode.NUMPY,
    *,
    axis: int = -1,
    axes_mapping: Sequence[int] | None = None,
) -> tuple[tuple[int | None, ...] | None, ...]:
    """Return the output axis of each operand axis, as bcast's rules align the operands.

    The verifier places the operands of a node by this (`Plan.alignment`), also where the
    shapes fail: then by the alignment the `BroadcastError` carries, so that the runtimes
    get the very shapes bcast rejects. A parameter error carries none; the operands are then
    right-aligned (both sides must reject the node anyway).

    Examples
    --------
    >>> from bcast import Shape
    >>> alignment_of([Shape((2, 3, 4)), Shape((4, 1))], Mode.PDPD, axis=2)  # trailing 1 dropped
    ((0, 1, 2), (2, None))
    >>> alignment_of([Shape((2, 3)), Shape((4,))])  # fails at axis 1: still placed
    ((0, 1), (1,))
    """
    try:
        return plan(*shapes, mode=mode, axis=axis, axes_mapping=axes_mapping).alignment
    except BroadcastError as err:
        if err.alignment is not None and len(err.alignment) == len(shapes):
            return tuple(err.alignment)
    if mode is Mode.NUMPY:  # pragma: no cover (numpy failures always carry an alignment)
        raise AssertionError("the numpy rule gave no alignment")
    return alignment_of(shapes)


def concrete_shapes(
    shapes: Sequence[Shape],
    alignment: Sequence[tuple[int | None, ...] | None],
    chosen: dict[str, int],
) -> list[tuple[int, ...]]:
    """Concrete shapes of operands placed by ``alignment``: unknown dims take what they meet.

    Parameters
    ----------
    shapes : sequence of Shape
        Operands of known rank.
    alignment : sequence of tuple of (int or None)
        The output axis of each operand axis (`alignment_of`); None for an axis the mode
        drops (PDPD's trailing ones), which is given 1.
    chosen : dict of str to int
        The values already given to symbols (shared by a node's operands); updated.

    Returns
    -------
    list of tuple of int

    Examples
    --------
    >>> from bcast import Shape
    >>> shapes = [Shape.parse("[N,?]"), Shape.parse("[3]")]
    >>> concrete_shapes(shapes, alignment_of(shapes), {})
    [(2, 3), (3,)]
    """
    reference: dict[int, int] = {}
    for shape, axes in zip(shapes, alignment, strict=True):
        for d, out_axis in zip(shape.dims, axes or (), strict=False):
            if out_axis is not None and d.is_static and d.lo != 1:
                reference.setdefault(out_axis, d.lo)
    result = []
    for shape, axes in zip(shapes, alignment, strict=True):
        placed = axes if axes is not None else (None,) * len(shape.dims)
        result.append(
            tuple(
                pick(d, reference.get(out_axis) if out_axis is not None else 1, chosen)
                for d, out_axis in zip(shape.dims, placed, strict=True)
            )
        )
    return result


def pick(dim: Dim, reference: int | None, chosen: dict[str, int]) -> int:
    """Choose a value for ``dim``: its own, a symbol's earlier choice, ``reference``, else 2."""
    if dim.is_static:
        return dim.lo
    if dim.name is not None and dim.name in chosen:
        return chosen[dim.name]
    value = 2
    if reference is not None and dim.contains(reference):
        value = reference
    elif not dim.contains(2):
        value = dim.lo if dim.lo >= 1 else 1
    if dim.name is not None:
        chosen[dim.name] = value
    return value


def random_array(
    shape: tuple[int, ...], dtype: npt.DTypeLike, rng: np.random.Generator, *, positive: bool
) -> npt.NDArray[Any]:
    """Draw an input: bools, small integers (from 1 when ``positive``) or floats.

    Parameters
    ----------
    shape : tuple of int
    dtype : dtype
    rng : numpy.random.Generator
    positive : bool
        Keep the values above 0 (a divisor, a power's base or exponent).

    Returns
    -------
    numpy.ndarray
        Always an array of exactly ``shape``: a 0-d array for ``()``, never a NumPy scalar
        (onnxruntime refuses ``numpy.bool`` scalars as inputs).

    Examples
    --------
    >>> import numpy as np
    >>> x = random_array((), np.bool_, np.random.default_rng(0), positive=False)
    >>> type(x).__name__, x.shape, x.dtype
    ('ndarray', (), dtype('bool'))
    """
    kind = np.dtype(dtype)
    if kind == np.bool_:
        drawn: Any = rng.random(shape) < 0.5
    elif np.issubdtype(kind, np.integer):
        low = 1 if positive else (0 if np.issubdtype(kind, np.unsignedinteger) else -5)
        drawn = rng.integers(low, 6, size=shape)
    else:
        drawn = rng.uniform(0.5 if positive else -2.0, 2.0, size=shape)
    return np.asarray(drawn, dtype=kind).reshape(shape)
