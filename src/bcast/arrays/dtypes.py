"""Dtype names the same for every array library, and their sizes.

One name per dtype (``"float32"``, ``"bool"``, ``"string"``) for NumPy and every array-API
namespace, so that the operators' dtype table (`bcast.ops`) and the engine's memory guard
ask one question whatever the library.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any, Final

__all__ = ["ITEMSIZE", "dtype_name"]

_XP_NAMES: Final = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
_XP_CACHE: dict[tuple[int, object], str] = {}
_NP_CACHE: dict[Any, str] = {}

ITEMSIZE: Final[Mapping[str, int]] = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
}
"""Bytes per element of each dtype of an array-API namespace (for the memory guard)."""


def dtype_name(dtype: Any, xp: Any = None) -> str:
    """Name a dtype the way the table does.

    For NumPy (``xp`` None) that is ``dtype.name``, with every string-holding kind (``U``,
    ``S``, ``T``, ``O``) named ``"string"``, as ONNX maps tensor(string) to ``object``. For
    another namespace it is the attribute of ``xp`` the dtype equals (``xp.float32`` is
    ``"float32"``).

    >>> import numpy as np
    >>> dtype_name(np.dtype("float32")), dtype_name(np.dtype("<U3")), dtype_name(np.dtype("O"))
    ('float32', 'string', 'string')
    """
    if xp is None:
        try:
            return _NP_CACHE[dtype]
        except KeyError:
            name = "string" if dtype.kind in "USTO" else str(dtype.name)
            _NP_CACHE[dtype] = name
            return name
    key = (id(xp), dtype)
    try:
        return _XP_CACHE[key]
    except (KeyError, TypeError):
        pass
    for name in _XP_NAMES:
        candidate = getattr(xp, name, None)
        if candidate is not None and candidate == dtype:
            with suppress(TypeError):  # an unhashable dtype: just don't cache
                _XP_CACHE[key] = name
            return name
    return str(dtype)
