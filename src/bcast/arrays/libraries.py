"""The one module that knows array libraries: which library a call's operands belong to.

Every entry point (the views, each operator) asks `library_of` once and hands the answer, a
`Library`, down to the rules, the engine and Dask: nothing below asks again. NumPy arrays are
answered without importing anything; any other array goes through the namespace that
`array_api_compat` gives it (PyTorch, CuPy, JAX, array-api-strict, Dask), imported only then,
so ``import bcast`` loads neither NumPy nor array-api-compat.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["NUMPY", "Library", "is_dask", "library_of", "shape_of"]

_DASK_CORE: Final = "dask.array.core"  # the module of dask.array.Array (see `is_dask`)
_DASK_NAMESPACE: Final = "array_api_compat.dask.array"


@dataclass(frozen=True, slots=True)
class Library:
    """The array library of one call's operands.

    Attributes
    ----------
    xp : namespace or None
        None for NumPy arrays (bcast's own NumPy path), else the operands' array-API
        namespace.
    dask : bool
        True for Dask arrays (alone or with NumPy ones): lazy, block by block.

    Examples
    --------
    >>> import numpy as np
    >>> library_of(np.ones(2), np.ones(3)) is NUMPY
    True
    """

    xp: Any
    dask: bool = False

    def dims(self, x: object) -> tuple[int | None, ...]:
        """Return an operand's dims for planning; a Dask dim of unknown length is None (``?``).

        >>> import numpy as np
        >>> NUMPY.dims(np.ones((2, 3)))
        (2, 3)
        """
        if self.dask:
            from bcast.arrays.dask import dims_of

            return dims_of(x)
        return shape_of(x)


NUMPY: Final = Library(None)
"""The answer for NumPy arrays."""


def library_of(*arrays: object) -> Library:
    """Return the library of the operands: `NUMPY`, or their array-API namespace.

    Raises TypeError for an operand that is not an array, and for operands of different
    libraries (from `array_api_compat.array_namespace`); NumPy operands may join Dask ones.
    """
    np = sys.modules.get("numpy")
    if np is not None and all(isinstance(x, np.ndarray) for x in arrays):
        return NUMPY
    for x in arrays:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(f"expected an array (with shape and dtype); got {type(x).__name__}")
    from array_api_compat import array_namespace

    if (
        np is not None
        and any(is_dask(x) for x in arrays)
        and all(is_dask(x) or isinstance(x, (np.ndarray, np.generic)) for x in arrays)
    ):
        return Library(array_namespace(*(x for x in arrays if is_dask(x))), dask=True)
    xp = array_namespace(*arrays)
    return Library(xp, dask=getattr(xp, "__name__", None) == _DASK_NAMESPACE)


def is_dask(x: object) -> bool:
    """Tell whether ``x`` is a Dask array, without importing Dask.

    A Dask array can only exist once ``dask.array`` is imported, so this is one dictionary
    lookup when it is not.
    """
    core = sys.modules.get(_DASK_CORE)
    return core is not None and isinstance(x, core.Array)


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
