"""The tiny fast path of the binary operators, and which kernel each one runs.

Small NumPy work is one call of the compiled tiny path (`bcast.ops._tinyc`, where the build
could compile it), else one dictionary lookup and one quiet ufunc call (`tiny_path`); a NumPy
array meeting a scalar that needs no check joins it. Everything else goes to the operator's
full path in `bcast.ops._binary`, which checks, plans and explains.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any, Final, TypeVar

import numpy as np

from bcast import engine
from bcast.arrays.targets import int_dims
from bcast.engine import Kernel
from bcast.engine import compiled as _compiled
from bcast.engine import guard as _guard
from bcast.ops import _kernels
from bcast.ops._dtypes import FLOAT, SIGNATURES, fixed_output
from bcast.ops._elementwise_kernels import KERNELS as ELEMENTWISE

__all__ = [
    "BROADCAST_CALLS",
    "CALLS",
    "EXPAND_CALLS",
    "WHERE_CALLS",
    "call_key",
    "dims_key",
    "kernel_for",
    "key_of",
    "tiny_path",
]

_NDARRAY: Final = np.ndarray
_DEFAULT_AXIS: Final = -1  # compared by identity: any other object takes the full path
_NUMPY: Final = "numpy"  # the default of ``broadcast``, likewise
_NO_ARG: Final = object()  # the default of the hidden third positional parameter (`tiny_path`)
_TINY_SIZE: Final = engine.TINY
_TINY_OUT: Final = engine.TINY // 2
"""The largest ``out=`` the tiny path fills (in elements). Above it the compiled entry,
which replays the call in one compiled call, is faster than NumPy's ufunc on a broadcast
operand: (64,64)+(64,) float32 took 1.53 us through it, 1.83 us through the ufunc."""
_WALKED: Final = engine.WALKED
_COMPILED_SIZE: Final = 8 * engine.TINY
"""The largest result (in elements, new or ``out=``) the compiled tiny path computes. Its
C loops (AVX2, two axes a call, the output's vector stores kept whole) beat the compiled
entry up to here: (512,64)+(64,) float64 into an ``out=`` 16 bytes off a vector boundary,
as NumPy allocates, 6.1 us against 7.0 us. At twice the size they trade places from one
case to the next (a float32 ``out=`` 7.8 against 6.8 us, a new float64 result 10.4 against
12.7 us), and the entry's threads come next."""
try:  # by name: an extension has no source for import-linter's graph to place
    _compiled_tiny: Any = importlib.import_module("bcast.ops._tinyc")
except ImportError:  # built without a C compiler: NumPy's ufuncs take the tiny calls
    _compiled_tiny = None
_F = TypeVar("_F", bound=Callable[..., Any])


def kernel_for(op: str, names: list[str]) -> Kernel:
    """Return the kernel of a binary operator for its operands' dtype names."""
    if op == "div":
        return _kernels.FLOAT_DIV if names[0] in FLOAT else _kernels.INT_DIV
    if op == "pow":
        if names[0] in FLOAT:
            return _kernels.FLOAT_POW
        return _kernels.INT_FLOAT_POW if names[1] in FLOAT else _kernels.INT_POW
    return _kernels.BINARY[op] if op in _kernels.BINARY else ELEMENTWISE[op]


def _tiny_ufuncs(op: str) -> dict[np.dtype[Any], Any]:
    """Map each NumPy dtype whose kernel for ``op`` (both operands of it) is one ufunc to it."""
    sig = SIGNATURES[op]
    found: dict[np.dtype[Any], Any] = {}
    for name in sorted(sig.allowed[sig.inputs[0]]):
        if name in ("string", "bfloat16"):
            continue
        kernel = kernel_for(op, [name, name])
        if name == "float16" and _compiled.float16_kernel(kernel.compiled):
            continue  # from 512 elements NumPy's float16 loop is slower than the kernel's
        if kernel.ufunc is not None:
            found[np.dtype(name)] = kernel.ufunc
    return found


_UFUNCS: Final = {
    op: _tiny_ufuncs(op)
    for op in (
        *("add", "sub", "mul", "div", "pow", "equal", "greater", "less", "and_", "or_", "xor"),
        *ELEMENTWISE,  # bitwise_and ... squared_difference: no attribute picks their kernel
    )
}
# NumPy's ufuncs run quietly only from NumPy 2 (`engine.quiet_run`); the compiled tiny path
# warns of nothing, so it takes `_UFUNCS`' dtypes with NumPy 1.x too.
_TINY: Final = {op: found if engine.quiet_run is not None else {} for op, found in _UFUNCS.items()}
_quiet_run: Any = engine.quiet_run

CALLS: Final = {op: engine.CallCache(limit=64) for op in _TINY}
"""Each binary operator's planned calls (`bcast.engine.Call`) by call-site key (`call_key`)."""
WHERE_CALLS: Final = engine.CallCache(limit=64)
"""Where's planned calls by call-site key (`key_of`)."""
EXPAND_CALLS: Final = engine.CallCache(limit=64)
"""Expand's planned calls by call-site key (`key_of` and the target's `dims_key`)."""
BROADCAST_CALLS: Final = engine.CallCache(limit=64)
"""Broadcast's planned calls by call-site key (`key_of`, the target's `dims_key`, the
mode, axis and axes mapping)."""


def call_key(a: Any, b: Any, out: Any) -> tuple[Any, ...] | None:
    """Return the key of a call on NumPy arrays ``a``, ``b`` (and ``out``), or None if none.

    The shapes, strides and dtypes of the operands and of ``out=`` (absent: none): all that
    an operator decides before its kernel runs depends on these alone.

    >>> import numpy as np
    >>> call_key(np.ones((2, 3)), np.ones(3), None)
    ((2, 3), (24, 8), dtype('float64'), (3,), (8,), dtype('float64'))
    >>> call_key(np.ones(3), 1.0, None) is None
    True
    """
    if type(a) is not _NDARRAY or type(b) is not _NDARRAY:
        return None
    key = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype)
    if out is None:
        return key
    if type(out) is not _NDARRAY:
        return None
    return (*key, out.shape, out.strides, out.dtype)


def key_of(operands: tuple[Any, ...], out: Any) -> tuple[Any, ...] | None:
    """Return the key of a call on NumPy arrays ``operands`` (and ``out``), or None if none.

    As `call_key`, for any number of operands.

    >>> import numpy as np
    >>> key_of((np.ones(2, bool), np.ones(2), np.ones(1)), None)[-3:]
    ((1,), (8,), dtype('float64'))
    """
    key: tuple[Any, ...] = ()
    for x in operands:
        if type(x) is not _NDARRAY:
            return None
        key += (x.shape, x.strides, x.dtype)
    if out is None:
        return key
    if type(out) is not _NDARRAY:
        return None
    return (*key, out.shape, out.strides, out.dtype)


def dims_key(dims: Any) -> tuple[int, ...] | None:
    """Return a target shape given as Python ints (a tuple, list or 1-D integer array) as a key.

    None for anything else (a `bcast.Shape`, a string, floats, bools, NumPy scalars): those
    take the operator's full path, which explains what is wrong with them. Only exact
    ``int`` entries make a key (`bcast.arrays.targets.int_dims`, the rule `static_shape`
    takes them by), so a key never stands for a value the full path refuses.

    >>> import numpy as np
    >>> dims_key([2, 3]), dims_key(np.array([2, 3])), dims_key([2.0, 3]), dims_key([True])
    ((2, 3), (2, 3), None, None)
    """
    if type(dims) is _NDARRAY:
        if dims.ndim != 1 or dims.dtype.kind not in "iu":
            return None
        dims = dims.tolist()  # Python ints
    return int_dims(dims)


# A Python int of these ranges fits every dtype of the kind, so no exact check is needed.
_SMALL_INTS: Final = {"i": (-128, 127), "u": (0, 255), "f": (-65504, 65504), "c": (-65504, 65504)}


def _tiny_scalar(x: Any, dtype: np.dtype[Any]) -> Any:
    """Return a scalar operand as a 0-d array of ``dtype`` if that needs no check, else None.

    A NumPy scalar of ``dtype``, a float meeting a float array, a small int, a bool meeting a
    bool array: the array API rule gives them ``dtype`` at once. Anything else (an int that
    may not fit, a kind that does not match) is left to the full path, which explains.
    """
    kind = type(x)
    if kind is float:
        fits = dtype.kind in "fc"
    elif kind is int:
        bounds = _SMALL_INTS.get(dtype.kind)
        fits = bounds is not None and bounds[0] <= x <= bounds[1]
    elif kind is bool:
        fits = dtype.kind == "b"
    else:
        fits = kind is dtype.type
    return np.asarray(x, dtype) if fits else None


def _scalar_pair(a: Any, b: Any) -> tuple[Any, Any] | None:
    """Return ``(a, b)`` with a scalar one as a 0-d array of the other's dtype, or None."""
    if type(a) is _NDARRAY:
        other = _tiny_scalar(b, a.dtype)
        return None if other is None else (a, other)
    if type(b) is _NDARRAY:
        other = _tiny_scalar(a, b.dtype)
        return None if other is None else (other, b)
    return None


def compiled_tiny(op: str) -> Any:
    """Return the compiled tiny call of ``op`` (`bcast.ops._tinyc`), or None if there is none.

    It takes the dtypes whose kernel for ``op`` is the ufunc it has loops of, and returns
    None for any call it does not take (the caller goes on as without it).

    >>> import numpy as np
    >>> fast = compiled_tiny("add")
    >>> fast is None or fast(np.ones(2, np.float32), np.ones(1, np.float32)).tolist() == [2, 2]
    True
    """
    table = _UFUNCS[op]
    if _compiled_tiny is None or not table:
        return None
    name = next(iter(table.values())).__name__
    numbers = [dtype.num for dtype, ufunc in table.items() if ufunc.__name__ == name]
    return _compiled_tiny.binary(name, numbers, _COMPILED_SIZE)


def tiny_path(op: str, *, compiled: bool = True) -> Callable[[_F], _F]:
    """Give a binary operator the tiny fast path in front of its full path.

    First, where ``compiled`` and the build compiled it, the C tiny path (`compiled_tiny`):
    C-contiguous NumPy operands of one dtype it has a loop for, the default broadcast, a
    result (or ``out=``, not overlapping an operand but as itself) of at most
    `_COMPILED_SIZE` elements, no memory limit below `bcast.engine.guard.SMALL_BYTES`: one C
    call, a third of a NumPy ufunc call's time. Then NumPy's ufunc:
    NumPy operands of one dtype whose kernel is one ufunc, the default multidirectional
    broadcast (NumPy's own: the ufunc applies exactly the plan), a result too small for the
    memory guard or for threads (or an ``out=`` of an operand's shape and the result's
    dtype): one lookup and one quiet ufunc call. A NumPy array with a scalar that needs no
    check (`_tiny_scalar`) takes it too. Larger NumPy calls of the default broadcast replay
    the call their call site planned before (`CALLS`). Anything else, shapes that do not
    broadcast included, takes the operator's full path, which explains (and plans).

    The options are keyword-only as `bcast.ops` documents them, but the wrapper declares
    them positional-or-keyword behind a hidden third positional parameter: CPython 3.11
    runs a call of a function with keyword-only defaults through its slow generic path, and
    this saves about 30 ns of a 650 ns tiny call. A third positional argument lands in the
    hidden parameter and is refused, so every call that the documented signature refuses
    is still a TypeError; `inspect.signature` shows the documented one (``__wrapped__``).
    """
    table = _TINY[op]
    calls = CALLS[op].lookup
    fast = compiled_tiny(op) if compiled else None
    fixed = None if fixed_output(op) is None else np.dtype(fixed_output(op))

    def decorate(full: _F) -> _F:
        @functools.wraps(full)
        def run(
            a: Any,
            b: Any,
            extra: Any = _NO_ARG,
            /,
            broadcast: Any = _NUMPY,
            axis: Any = _DEFAULT_AXIS,
            out: Any = None,
        ) -> Any:
            if (
                fast is not None
                and broadcast is _NUMPY
                and axis is _DEFAULT_AXIS
                and extra is _NO_ARG
                and (_guard.small_fits or out is not None or _guard.small_fits_here())
            ):
                result = fast(a, b, out)
                if result is not None:
                    return result
            if extra is not _NO_ARG:
                raise TypeError(
                    f"{op}() takes 2 positional arguments (a, b); pass broadcast=, axis= "
                    "and out= by keyword"
                )
            if (
                type(a) is _NDARRAY
                and type(b) is _NDARRAY
                and broadcast is _NUMPY
                and axis is _DEFAULT_AXIS
            ):
                dt = a.dtype
                ufunc = table.get(dt)
                if ufunc is not None and b.dtype is dt:
                    if out is None:
                        if a.size * b.size <= _TINY_SIZE and (
                            _guard.small_fits or _guard.small_fits_here()
                        ):
                            try:
                                result = _quiet_run(ufunc, a, b)
                            except (ValueError, RuntimeError):
                                pass  # no broadcast, or the quiet context is busy
                            else:
                                return result if type(result) is _NDARRAY else np.asarray(result)
                    elif (
                        type(out) is _NDARRAY
                        and out.size <= _TINY_OUT
                        and out.dtype is (fixed or dt)
                        and (out.shape == a.shape or out.shape == b.shape)
                    ):
                        # out has the shape of an operand; the other one must broadcast to
                        # it (else NumPy raises ValueError before writing), so it is the
                        # result's shape, and out's size the work's. NumPy makes an out
                        # overlapping an operand safe.
                        try:
                            _quiet_run(ufunc, a, b, out)  # positional: no keyword dict
                        except (ValueError, RuntimeError):
                            pass  # no broadcast, read-only out, or a busy context
                        else:
                            return out
                if out is None:
                    call = calls((a.shape, a.strides, dt, b.shape, b.strides, b.dtype))
                elif type(out) is _NDARRAY:
                    call = calls(
                        (a.shape, a.strides, dt, b.shape, b.strides, b.dtype,
                         out.shape, out.strides, out.dtype)
                    )  # fmt: skip
                else:
                    call = None
                if call is not None:  # planned by an earlier call of this call site
                    ufunc = call.ufunc  # one ufunc call on this thread: as the tiny path
                    if ufunc is not None and (
                        out is not None or (call.small and _guard.small_fits)
                    ):
                        try:
                            if out is None:
                                result = _quiet_run(ufunc, a, b)
                            else:
                                result = _quiet_run(ufunc, a, b, out)
                        except (ValueError, RuntimeError):
                            pass  # a read-only out, or a busy context: the call explains
                        else:
                            call.calls += 1
                            return result
                    runner = call.runner
                    if out is not None and runner is not None:
                        lane = runner.lane  # the compiled entry, walking on this thread
                        if lane is not None and out.flags.writeable:
                            call.calls += 1
                            if lane(out, a, b) == _WALKED:
                                return out
                            return call.numpy((a, b), out)  # declined: NumPy's path
                    return call((a, b), out)
            elif broadcast is _NUMPY and axis is _DEFAULT_AXIS and out is None:
                pair = _scalar_pair(a, b)
                if pair is not None:
                    return run(*pair)
            return full(a, b, broadcast=broadcast, axis=axis, out=out)

        return run  # type: ignore[return-value]

    return decorate
