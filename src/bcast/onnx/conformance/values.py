"""The values of the conformance cases: seeded random draws and edge values per element type.

Every array is drawn from a generator seeded by the case (`case_rng`), so one seed gives the
same suite on every machine. A *role* says what the operator does with an input: a divisor
is never zero in a random draw, an exponent or a shift count stays small, a scale is
positive; edge values (NaN, infinities, -0, the extremes of the type, shift counts at and
past the width) come from `edge_values`.
"""

from __future__ import annotations

import zlib
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from onnx import TensorProto, helper

__all__ = [
    "case_rng",
    "draw",
    "edge_values",
    "finfo",
    "iinfo",
    "is_float",
    "np_dtype",
    "onnx_elem",
]

Array = npt.NDArray[Any]

_FLOAT_GRID: Final = np.arange(-16, 17, dtype=np.float32) / 4  # exact in every float type


def onnx_elem(name: str) -> int:
    """Return the ``TensorProto`` element type of an ONNX type name (``float``, ``int8``...).

    >>> onnx_elem("float") == TensorProto.FLOAT
    True
    """
    return int(TensorProto.DataType.Value(name.upper()))


def np_dtype(name: str) -> np.dtype[Any]:
    """Return the NumPy (or ``ml_dtypes``) dtype of an ONNX type name.

    >>> str(np_dtype("bfloat16"))
    'bfloat16'
    """
    return np.dtype(helper.tensor_dtype_to_np_dtype(onnx_elem(name)))


def finfo(dtype: np.dtype[Any]) -> Any:
    """Return ``ml_dtypes.finfo`` of ``dtype`` (NumPy's floats and the narrow ones alike)."""
    import ml_dtypes

    return ml_dtypes.finfo(dtype)  # type: ignore[no-untyped-call]


def iinfo(dtype: np.dtype[Any]) -> Any:
    """Return ``ml_dtypes.iinfo`` of ``dtype`` (int4, uint2... and NumPy's integers).

    >>> int(iinfo(np.dtype(np.int8)).min)
    -128
    """
    import ml_dtypes

    return ml_dtypes.iinfo(dtype)  # type: ignore[no-untyped-call]


def is_float(dtype: np.dtype[Any]) -> bool:
    """Tell whether ``dtype`` is a floating type, the ``ml_dtypes`` ones included.

    >>> is_float(np.dtype(np.float16)), is_float(np.dtype(np.int8))
    (True, False)
    """
    if dtype.kind in "iub":
        return False
    try:
        finfo(dtype)
    except ValueError:
        return False
    return True


def _int_range(dtype: np.dtype[Any]) -> tuple[int, int]:
    info = iinfo(dtype)
    return int(info.min), int(info.max)


def case_rng(seed: int, case_id: str) -> np.random.Generator:
    """Return the generator of one case: the suite's seed and the case's name, nothing else.

    >>> int(case_rng(0, "a").integers(100)) == int(case_rng(0, "a").integers(100))
    True
    """
    return np.random.default_rng([seed, zlib.crc32(case_id.encode())])


def draw(
    rng: np.random.Generator, dtype: np.dtype[Any], shape: tuple[int, ...], role: str
) -> Array:
    """Draw a random array of ``dtype`` and ``shape`` for an input of the given ``role``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The case's generator.
    dtype : numpy.dtype
        The element type.
    shape : tuple of int
        The shape.
    role : {"any", "divisor", "exponent", "count", "scale", "zero_point", "cond"}
        What the operator does with the input.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> x = draw(np.random.default_rng(0), np.dtype(np.int32), (50,), "divisor")
    >>> bool((x != 0).all())
    True
    """
    if dtype.kind == "b":
        return np.asarray(rng.integers(0, 2, shape).astype(bool))
    if is_float(dtype):
        if role == "scale":
            values = rng.choice(np.array([0.25, 0.5, 1.0, 2.0], np.float32), shape)
        elif role == "exponent":
            values = rng.choice(np.array([0.0, 1.0, 2.0, 0.5, -1.0], np.float32), shape)
        elif role == "divisor":
            values = rng.choice(_FLOAT_GRID[_FLOAT_GRID != 0], shape)
        elif role == "zero_point":
            values = np.zeros(shape, np.float32)
        else:
            values = rng.choice(_FLOAT_GRID, shape)
        return np.asarray(np.asarray(values, np.float32).astype(dtype))
    lo, hi = _int_range(dtype)
    if role == "scale":  # an integer scale (QuantizeLinear-21 on int32 x): 1 to 4
        lo, hi = 1, min(hi, 4)
    elif role == "zero_point":
        lo, hi = max(lo, -2), min(hi, 2)
    elif role in {"exponent", "count"}:
        lo, hi = 0, min(hi, 3)
    else:
        lo, hi = max(lo, -8), min(hi, 8)
    values = rng.integers(lo, hi + 1, shape)
    if role == "divisor":
        values = np.where(values == 0, 1, values)
    return np.asarray(values.astype(np.int64).astype(dtype))


def edge_values(dtype: np.dtype[Any], role: str) -> Array:
    """Return the edge values of ``dtype`` for an input of ``role``, as a 1-D array.

    Floats: NaN, ±inf, ±0, ±1, 0.5, 2.5 (a tie), the largest finite values, the smallest
    normal and subnormal. Integers: the extremes, 0, ±1, 2. Shift counts: 0, 1, the width
    less 1, the width, the width and 1, twice the width. Exponents: -1, 0, 1, 2, the width.

    >>> edge_values(np.dtype(np.uint8), "count").tolist()
    [0, 1, 7, 8, 9, 16]
    """
    if dtype.kind == "b":
        return np.array([False, True])
    if is_float(dtype):
        info = finfo(dtype)
        values = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, 2.5]
        values += [float(info.max), -float(info.max), float(info.tiny)]
        values += [float(info.smallest_subnormal)]
        if role == "scale":
            values = [0.5, 2.0, float(info.tiny), float(info.max), np.inf]
        with np.errstate(all="ignore"):
            return np.asarray(np.array(values, np.float64).astype(dtype))
    lo, hi = _int_range(dtype)
    bits = iinfo(dtype).bits
    if role == "count":
        ints = [0, 1, bits - 1, bits, bits + 1, 2 * bits]
    elif role == "exponent":
        ints = [-1, 0, 1, 2, bits]
    else:
        ints = [lo, hi, 0, 1, -1, 2, lo + 1]
    kept = sorted({v for v in ints if lo <= v <= hi}, key=ints.index)
    return np.asarray(np.array(kept, object).astype(dtype))
