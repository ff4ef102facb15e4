"""The bytes a runtime's tensor holds for a NumPy array of a narrow ONNX type, and back.

The Python APIs of onnxruntime and OpenVINO cannot take ``ml_dtypes`` arrays (bfloat16,
float8, 4- and 2-bit types) as they are: onnxruntime has no NumPy type for them, OpenVINO
shows bfloat16 as float16 and packs 4-bit types. Both take and give the raw bytes,
though, laid out as ONNX lays them out: one or two bytes an element, or elements of fewer
than 8 bits packed, the first in the lowest bits. `raw_bytes` and `from_raw_bytes` convert,
bit for bit, so a runtime sees exactly the values of the case. They need NumPy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["bits_of", "from_raw_bytes", "is_narrow", "raw_bytes"]


def is_narrow(dtype: np.dtype[Any]) -> bool:
    """Tell whether ``dtype`` is one of ``ml_dtypes``' (not a NumPy type).

    >>> import ml_dtypes
    >>> is_narrow(np.dtype(ml_dtypes.bfloat16)), is_narrow(np.dtype(np.float16))
    (True, False)
    """
    return str(dtype.type.__module__).startswith("ml_dtypes")


def bits_of(dtype: np.dtype[Any]) -> int:
    """Return the width of ``dtype`` in bits (4 for int4, 16 for bfloat16).

    >>> import ml_dtypes
    >>> bits_of(np.dtype(ml_dtypes.int4)), bits_of(np.dtype(ml_dtypes.bfloat16))
    (4, 16)
    """
    import ml_dtypes

    try:
        return int(ml_dtypes.finfo(dtype).bits)  # type: ignore[no-untyped-call]
    except ValueError:
        return int(ml_dtypes.iinfo(dtype).bits)  # type: ignore[no-untyped-call]


def raw_bytes(x: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    """Return ``x`` as the bytes of its tensor: packed where elements are under 8 bits.

    >>> import ml_dtypes
    >>> raw_bytes(np.array([-8, 7, 1], ml_dtypes.int4)).tolist()
    [120, 1]
    """
    bits = bits_of(x.dtype)
    flat = np.ascontiguousarray(x).reshape(-1)
    if bits >= 8:
        whole: npt.NDArray[np.uint8] = np.frombuffer(flat.tobytes(), np.uint8).copy()
        return whole
    per = 8 // bits
    values = flat.view(np.uint8) & ((1 << bits) - 1)
    values = np.concatenate([values, np.zeros((-values.size) % per, np.uint8)])
    packed = np.zeros(values.size // per, np.uint8)
    for k in range(per):
        packed |= (values[k::per] << (bits * k)).astype(np.uint8)
    return packed


def from_raw_bytes(
    raw: npt.NDArray[np.uint8], dtype: np.dtype[Any], shape: tuple[int, ...]
) -> npt.NDArray[Any]:
    """Return the array of ``dtype`` and ``shape`` whose tensor bytes are ``raw``.

    >>> import ml_dtypes
    >>> from_raw_bytes(np.array([120, 1], np.uint8), np.dtype(ml_dtypes.int4), (3,)).tolist()
    [-8, 7, 1]
    """
    bits = bits_of(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.asarray(raw, np.uint8).reshape(-1)
    if bits >= 8:
        out: npt.NDArray[Any] = np.frombuffer(raw[: count * dtype.itemsize].tobytes(), dtype)
        shaped: npt.NDArray[Any] = out.reshape(shape).copy()
        return shaped
    per = 8 // bits
    mask = (1 << bits) - 1
    values = np.stack([(raw >> (bits * k)) & mask for k in range(per)], axis=1).reshape(-1)
    values = values[:count].astype(np.int16)
    if dtype.name in {"int4", "int2"}:
        values = np.where(values >= 1 << (bits - 1), values - (1 << bits), values)
        return values.astype(np.int8).astype(dtype).reshape(shape)
    if dtype.name in {"uint4", "uint2"}:
        return values.astype(np.uint8).astype(dtype).reshape(shape)
    small: npt.NDArray[Any] = np.frombuffer(values.astype(np.uint8).tobytes(), dtype)
    result: npt.NDArray[Any] = small.reshape(shape).copy()
    return result
