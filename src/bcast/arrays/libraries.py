"""The one module that knows array libraries: which library a call's operands belong to.

Every entry point (the views, each operator) asks `library_of` once and hands the answer, a
`Library`, down to the rules, the engine and Dask: nothing below asks again. NumPy arrays are
answered without importing anything; any other array goes through the namespace that
`array_api_compat` gives it (PyTorch, CuPy, JAX, array-api-strict, Dask), imported only then,
so ``import bcast`` loads neither NumPy nor array-api-compat.

Operands are normalised here too, once per call (`as_operands`): a NumPy scalar
(``x.max()``) is a 0-d NumPy array, and a Python ``bool``/``int``/``float`` follows the array
API rule: at least one operand is an array, and the scalar takes an array operand's dtype.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from bcast.arrays.dtypes import dtype_name

__all__ = ["NUMPY", "Library", "as_operands", "is_dask", "library_of", "shape_of"]

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
    libraries (naming both); NumPy operands may join Dask ones.
    """
    np = sys.modules.get("numpy")
    if np is not None and all(isinstance(x, np.ndarray) for x in arrays):
        return NUMPY
    for x in arrays:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(f"expected an array (with shape and dtype); got {type(x).__name__}")
    array_namespace = _array_api_compat(arrays).array_namespace
    if (
        np is not None
        and any(is_dask(x) for x in arrays)
        and all(is_dask(x) or isinstance(x, (np.ndarray, np.generic)) for x in arrays)
    ):
        return Library(array_namespace(*(x for x in arrays if is_dask(x))), dask=True)
    try:
        xp = array_namespace(*arrays)
    except TypeError:
        _mixed_libraries(arrays, array_namespace)
        raise
    return Library(xp, dask=getattr(xp, "__name__", None) == _DASK_NAMESPACE)


def _mixed_libraries(arrays: Sequence[object], array_namespace: Callable[..., Any]) -> None:
    """Raise bcast's TypeError when the operands are arrays of different libraries.

    array-api-compat says "Multiple namespaces for array inputs" with the modules' file
    paths; the user wants the two libraries named, and what to do. Returns when each
    operand alone has one namespace and they are the same (the error was another one).
    """
    seen: dict[str, tuple[int, str]] = {}
    for index, x in enumerate(arrays):
        try:
            name = str(getattr(array_namespace(x), "__name__", "?"))
        except TypeError:
            return
        library = name.removeprefix("array_api_compat.").removesuffix(".array")
        seen.setdefault(library, (index, f"{type(x).__module__}.{type(x).__qualname__}"))
    if len(seen) < 2:
        return
    said = [f"{lib} (operand {i}: {kind})" for lib, (i, kind) in seen.items()]
    raise TypeError(
        f"operands of different array libraries: {' and '.join(said)}; "
        "bcast does not convert between them: make them arrays of one library first"
    ) from None


def _array_api_compat(arrays: Sequence[object]) -> Any:
    """Import array-api-compat, or say which extra installs it (the `arrays` extra)."""
    try:
        import array_api_compat
    except ModuleNotFoundError:
        kinds = sorted({f"{type(x).__module__}.{type(x).__qualname__}" for x in arrays})
        raise ModuleNotFoundError(
            f"arrays of type {', '.join(kinds)} need the array-api-compat package; "
            'install it with: pip install "bcast[arrays]"',
            name="array_api_compat",
        ) from None
    return array_api_compat


_SCALARS: Final = (bool, int, float)


def as_operands(
    operands: Sequence[Any],
    like: Callable[[int, list[int]], int] | None = None,
    labels: Sequence[str] | None = None,
) -> tuple[Library, tuple[Any, ...]]:
    """Return the operands' library and the operands as arrays of it.

    NumPy arrays are returned as they are (one check). A NumPy scalar becomes a 0-d NumPy
    array. A Python ``bool``, ``int`` or ``float`` becomes a 0-d array of an array operand's
    dtype, library and device, as the array API standard says: ``like(i, arrays)`` picks
    which array operand scalar ``i`` follows (the first one by default). A scalar that
    cannot take that dtype (a float with an integer array, a bool with a numeric one, an
    int outside its range) is an error; so are operands that are all scalars. ``labels``
    name the operands in messages (default ``operand 0``, ``operand 1``...).

    Raises
    ------
    TypeError
        For an operand that is not an array or a scalar, operands of different libraries,
        no array among the operands, or a scalar whose kind the dtype cannot hold.
    OverflowError
        For an int outside the range of the dtype it takes.

    Examples
    --------
    >>> import numpy as np
    >>> lib, (a, b) = as_operands([np.ones(2, np.float32), 2])
    >>> lib is NUMPY, b.dtype, b.shape
    (True, dtype('float32'), ())
    >>> as_operands([np.ones(2, np.uint8), 300])
    Traceback (most recent call last):
    ...
    OverflowError: operand 1: the Python int 300 does not fit in uint8, the dtype it takes ...
    """
    np = sys.modules.get("numpy")
    if np is not None:
        ndarray = np.ndarray
        if all(type(x) is ndarray for x in operands):
            return NUMPY, tuple(operands)
        generic = np.generic
        operands = [np.asarray(x) if isinstance(x, generic) else x for x in operands]
    scalars = [i for i, x in enumerate(operands) if type(x) in _SCALARS]
    if not scalars:
        return library_of(*operands), tuple(operands)
    arrays = [i for i, x in enumerate(operands) if type(x) not in _SCALARS]
    if not arrays:
        raise TypeError(
            "at least one operand must be an array (the array API rule for Python scalars); "
            f"got {', '.join(type(x).__name__ for x in operands)}"
        )
    lib = library_of(*(operands[i] for i in arrays))
    result = list(operands)
    for i in scalars:
        j = like(i, arrays) if like is not None else arrays[0]
        label = labels[i] if labels is not None else f"operand {i}"
        result[i] = _scalar_array(operands[i], operands[j], lib, label)
    return lib, tuple(result)


_KINDS: Final = {
    bool: ("bool",),
    int: ("int", "uint", "float", "bfloat", "complex"),
    float: ("float", "bfloat", "complex"),
}


def _scalar_array(value: bool | int | float, like: Any, lib: Library, label: str) -> Any:
    """Make ``value`` a 0-d array of ``like``'s dtype, library and device (the array API rule)."""
    np = sys.modules.get("numpy")
    xp = None if lib.dask or (np is not None and isinstance(like, np.ndarray)) else lib.xp
    name = dtype_name(like.dtype, xp)
    kind = type(value)
    if not name.rstrip("0123456789").startswith(_KINDS[kind]):
        raise TypeError(
            f"{label}: a Python {kind.__name__} cannot take the dtype {name} of the "
            "array it meets (the array API rule); pass an array of the dtype you mean"
        )
    if kind is int:
        ns: Any = np if xp is None else xp
        if name.startswith(("int", "uint")):
            info = ns.iinfo(like.dtype)
            low, high = int(info.min), int(info.max)
        else:  # an int into a float (or complex) dtype: within its finite range
            info = ns.finfo(like.dtype)
            low, high = float(info.min), float(info.max)  # type: ignore[assignment]
        if not low <= value <= high:
            raise OverflowError(
                f"{label}: the Python int {value} does not fit in {name}, the dtype it "
                f"takes from the array it meets (range {info.min}..{info.max})"
            )
    if xp is None:
        assert np is not None  # a NumPy or Dask array exists, so NumPy is loaded
        return np.asarray(value, dtype=like.dtype)
    device = _array_api_compat((like,)).device(like)
    return xp.asarray(value, dtype=like.dtype, device=device)


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
