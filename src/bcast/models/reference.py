"""NumPy references of broadcasting operators that `bcast.ops` does not implement.

``bcast verify`` compares every broadcasting node it can run with the runtimes. For the
operators bcast has no kernel of (ONNX GreaterOrEqual, LessOrEqual, Mod, BitShift, the
Bitwise ops, LayerNormalization, RMSNormalization; OpenVINO GreaterEqual, LessEqual,
NotEqual, FloorMod, Mod, SquaredDifference, the Bitwise ops) bcast's side is computed here:
the operands are broadcast by bcast's own rules (`bcast.broadcast_arrays`,
`bcast.broadcast_to`, which read the `Plan`), and only the arithmetic is NumPy's. So the
broadcasting decision, and the error when the shapes fail, are bcast's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from bcast.arrays.views import broadcast_arrays, broadcast_to
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.planning import plan

__all__ = ["ELEMENTWISE", "elementwise", "normalization"]

Array = npt.NDArray[Any]


def _squared_difference(a: Array, b: Array) -> Array:
    return np.asarray(np.square(a - b))


ELEMENTWISE: Final[dict[str, Callable[[Array, Array], Array]]] = {
    "greater_equal": np.greater_equal,
    "less_equal": np.less_equal,
    "not_equal": np.not_equal,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
    "floor_mod": np.mod,  # the result takes the divisor's sign (ONNX Mod fmod=0)
    "truncated_mod": np.fmod,  # the result takes the dividend's sign (C fmod)
    "squared_difference": _squared_difference,
}
"""The element-wise kernels by name; broadcasting is bcast's (`elementwise`)."""


def elementwise(
    kind: str, a: Array, b: Array, *, mode: str = "numpy", axis: int = -1
) -> npt.NDArray[Any]:
    """Broadcast ``a`` and ``b`` by bcast's rule ``mode``, then apply the kernel ``kind``.

    Parameters
    ----------
    kind : str
        A key of `ELEMENTWISE` (``"greater_equal"``, ``"bitwise_and"``, ``"floor_mod"``...).
    a, b : numpy.ndarray
        The operands (A and B of the mode).
    mode : str
        ``"numpy"``, ``"none"`` or ``"pdpd"`` (OpenVINO's auto_broadcast).
    axis : int
        The PDPD axis.

    Returns
    -------
    numpy.ndarray
        A new array of the broadcast shape.

    Raises
    ------
    BroadcastError
        If the shapes do not broadcast by ``mode``.

    Examples
    --------
    >>> import numpy as np
    >>> elementwise("greater_equal", np.array([[1], [3]]), np.array([2, 3]))
    array([[False, False],
           [ True,  True]])
    >>> elementwise("floor_mod", np.array([-3, 3]), np.array([2]))
    array([1, 1])
    >>> elementwise("bitwise_and", np.ones(3, np.int8), np.ones(2, np.int8))
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: numpy: cannot broadcast [3] and [2] at axis 0: 3 vs 2...
    """
    kernel = ELEMENTWISE[kind]
    x, y = broadcast_arrays(a, b, mode=Mode.parse(mode), axis=axis)
    return np.asarray(kernel(np.asarray(x), np.asarray(y)))


def normalization(
    x: Array,
    scale: Array,
    bias: Array | None = None,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    rms: bool = False,
    stash_float32: bool = True,
) -> npt.NDArray[Any]:
    """ONNX LayerNormalization-17 (``rms=False``) or RMSNormalization-23 (``rms=True``).

    ``x`` is normalised over its axes from ``axis`` on; ``scale`` (and ``bias``) then
    broadcast *unidirectionally* to ``x``, as the operator texts say ("unidirectional
    broadcastable to tensor X"), by bcast's rule. The statistics are computed in float32
    when ``stash_float32`` (``stash_type=1``, the default) and the result has ``x``'s dtype.

    Parameters
    ----------
    x, scale : numpy.ndarray
    bias : numpy.ndarray, optional
        LayerNormalization's B.
    axis : int
        The first normalised axis (negative: from the end).
    epsilon : float
    rms : bool
        RMSNormalization: divide by the root mean square, no mean subtracted, no bias.
    stash_float32 : bool
        Compute the statistics in float32 (``stash_type=1``) rather than in ``x``'s dtype.

    Returns
    -------
    numpy.ndarray
        Y, of ``x``'s shape and dtype.

    Raises
    ------
    BroadcastError
        If ``scale`` or ``bias`` does not broadcast unidirectionally to ``x``; the message
        names them by their roles (``Scale``, ``B``).
    ValueError
        If ``axis`` is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0, 3.0], [2.0, 4.0]], np.float32)
    >>> normalization(x, np.array([2.0, 1.0], np.float32), epsilon=0.0)
    array([[-2.,  1.],
           [-2.,  1.]], dtype=float32)
    >>> normalization(x, np.ones(3, np.float32))
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: unidirectional: cannot broadcast [2,2] and [3] at axis 1: ...
    """
    rank = x.ndim
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"normalization: axis {axis} is out of range for X of rank {rank}")
    axes = tuple(range(axis % rank if rank else 0, rank))
    roles = ("Scale", "B") if not rms else ("scale", "B")
    operands = [(scale, roles[0])] + ([] if bias is None else [(bias, roles[1])])
    placed = [_unidirectional(x, operand, role) for operand, role in operands]
    work = x.astype(np.float32) if stash_float32 and x.dtype != np.float64 else x
    if rms:
        mean_square = np.mean(np.square(work), axis=axes, keepdims=True)
        normalised = work / np.sqrt(mean_square + epsilon)
    else:
        centred = work - np.mean(work, axis=axes, keepdims=True)
        variance = np.mean(np.square(centred), axis=axes, keepdims=True)
        normalised = centred / np.sqrt(variance + epsilon)
    result = normalised * placed[0]
    if len(placed) > 1:
        result = result + placed[1]
    return np.asarray(result).astype(x.dtype, copy=False)


def _unidirectional(x: Array, operand: Array, role: str) -> Array:
    """View ``operand`` as ``x``'s shape by bcast's unidirectional rule; errors name roles."""
    try:
        return np.asarray(broadcast_to(operand, x.shape, mode="unidirectional"))
    except BroadcastError:
        pass  # planned again below with the roles, outside this handler
    plan(x.shape, operand.shape, mode="unidirectional", labels=("X", role))
    raise AssertionError("unreachable: the labelled plan fails as the plain one did")
