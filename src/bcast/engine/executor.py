"""The execution engine: the one place where operator kernels run.

An operator hands over a `Plan`, a `Kernel`, its operands and their `Library`. The engine
reshapes each operand to the plan's aligned shape (a view), checks the memory guard,
allocates the result once (or validates ``out=``) and lets the kernel write into it. Large
NumPy work is arranged (`bcast.engine.layout`), cut into blocks and run on threads
(`bcast.engine.parallel`), or on compiled walkers (`bcast.engine.compiled`); other libraries
run the kernel's array-API form on their own device; Dask runs per block
(`bcast.engine.dask`). ``docs/architecture.md`` tells the whole path.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np

from bcast.arrays.dtypes import ITEMSIZE, dtype_name
from bcast.arrays.libraries import Library, shape_of
from bcast.arrays.targets import check_result_shape
from bcast.arrays.views import aligned_view, output_shape
from bcast.core.plans import Plan
from bcast.engine import compiled as _compiled
from bcast.engine import guard
from bcast.engine import layout as _layout
from bcast.engine import parallel as _parallel

__all__ = ["Kernel", "Settings", "execute", "get_settings", "settings"]


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


# -- settings ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settings:
    """The engine's knobs (see `settings`).

    Attributes
    ----------
    threads : int or None
        Threads for large work; None: `bcast.engine.parallel.threads` (``BCAST_NUM_THREADS``,
        else the cores this process may use, at most ``OMP_NUM_THREADS``).
    parallel_min : int
        Work (output elements times the kernel's cost) below which one call does it all.
    block_bytes : int
        Output bytes per block for kernels that pass over their output several times.
    blocks_per_thread : int
        Blocks per thread for one-pass kernels (more balance the load on a busy machine).
    max_tile_bytes : int
        Bytes that tiles of small operands may take, per call (and at most 1/32 of the
        output's).
    compiled_tile_bytes : int
        ``max_tile_bytes`` for the compiled path, whose rows need not be as long as NumPy's
        inner loops: tiles that stay in the core's own cache are faster there (the benchmark
        ``add_midrank`` measures it).
    compiled_thread_work : int
        Work each thread of the compiled path must have (output elements times the kernel's
        cost); less work takes fewer threads. Waking a sleeping core costs more than the
        compiled kernels gain from it on small work (``benchmarks/bench_ops.py`` measures
        where two threads start to win).
    compiled : bool
        Run the kernels that have a compiled form (`bcast.engine.compiled`) with it when numba is
        installed (``BCAST_COMPILED=0`` turns it off as well).
    compiled_wait : bool
        Wait for a kernel to compile (or load from numba's cache) on its first use, as
        ``BCAST_COMPILED=wait`` does; False: NumPy computes until the background has it.
    stream_min_bytes : int or None
        Work whose output and operands together take at least this many bytes writes its
        output with streaming stores on the compiled path (the data cannot all stay in the
        cache anyway); None: the size of the last-level cache (the benchmark ``add_cache``
        measures the case at that size).
    """

    threads: int | None = None
    parallel_min: int = 1 << 18
    block_bytes: int = 1 << 20
    blocks_per_thread: int = 4
    max_tile_bytes: int = 1 << 22
    compiled_tile_bytes: int = 1 << 18
    compiled_thread_work: int = 1 << 20
    compiled: bool = True
    compiled_wait: bool = False
    stream_min_bytes: int | None = None


_settings = Settings()


def get_settings() -> Settings:
    """Return the settings in force."""
    return _settings


@contextmanager
def settings(**changes: Any) -> Iterator[Settings]:
    """Change the engine's `Settings` for a ``with`` block (process-wide), then restore them.

    >>> import bcast.engine
    >>> with bcast.engine.settings(threads=1) as s:
    ...     s.threads
    1
    """
    global _settings
    saved = _settings
    _settings = replace(saved, **changes)
    try:
        yield _settings
    finally:
        _settings = saved


def _threads(work: float) -> int:
    chosen = _settings.threads
    if chosen is None:
        chosen = _parallel.threads()
    return max(1, min(chosen, int(work // max(1, _settings.parallel_min)) or 1))


# -- NumPy's error state -------------------------------------------------------------------
# ONNX arithmetic is IEEE / C arithmetic: 1/0 is inf, integers wrap; NumPy's warnings about
# it are noise here. ``with np.errstate(...)`` costs more than a tiny ufunc call; with NumPy
# 2 the error state is a context variable, so a Context holding "ignore" runs a call quietly
# for the price of entering it.


def _make_quiet_context() -> contextvars.Context | None:
    before = np.geterr()
    context = contextvars.Context()
    context.run(np.errstate(all="ignore").__enter__)
    if np.geterr() != before:  # NumPy < 2: the error state is process-wide; undo
        np.seterr(**before)
        return None
    return context


_QUIET: Final = _make_quiet_context()
quiet_run: Callable[..., Any] | None = None if _QUIET is None else _QUIET.run
"""``quiet_run(fn, *args)``: ``fn(*args)`` with NumPy's floating-point warnings off (None
before NumPy 2). Raises RuntimeError (before calling ``fn``) when another thread is inside."""


def _quietly(fn: Callable[..., Any], *args: Any) -> Any:
    if quiet_run is not None:
        try:
            return quiet_run(fn, *args)
        except RuntimeError as exc:  # another thread holds the context: use the slow way
            if "cannot enter context" not in str(exc):
                raise
    with np.errstate(all="ignore"):
        return fn(*args)


def _worker_quiet() -> AbstractContextManager[Any]:
    return np.errstate(all="ignore")


def _worker_setup(bufsize: int | None) -> Callable[[], AbstractContextManager[Any]]:
    """Each thread's context for its blocks: warnings off, NumPy's buffer matched to rows."""
    if bufsize is None or quiet_run is None:  # NumPy < 2: the buffer size is process-wide
        return _worker_quiet

    @contextmanager
    def setup() -> Iterator[None]:
        with np.errstate(all="ignore"):  # restores the buffer size too on exit
            np.setbufsize(bufsize)
            yield

    return setup


# -- execute -------------------------------------------------------------------------------


def execute(
    op: str,
    plan: Plan,
    kernel: Kernel,
    operands: Sequence[Any],
    *,
    dtype: Any,
    out: Any,
    lib: Library,
    slots: Sequence[int] | None = None,
) -> Any:
    """Run ``kernel`` on the operands as ``plan`` aligns them; return the result.

    Parameters
    ----------
    op : str
        The operator's name, for messages.
    plan : Plan
        A plan on static shapes; its output is the result's shape.
    kernel : Kernel
        What to compute.
    operands : sequence of array
        The arrays the kernel reads, in the kernel's order.
    dtype : dtype
        The result's dtype (a NumPy dtype, or a dtype of ``xp``).
    out : array or None
        Where to write the result; None allocates it.
    lib : Library
        The operands' library, as the operator's entry asked it (`bcast.arrays.library_of`).
    slots : sequence of int, optional
        The plan operand of each operand (default: the same index).

    Returns
    -------
    array
        ``out``, or the new result.

    Raises
    ------
    MemoryLimitError
        If the result must be allocated and would exceed the memory limit.
    TypeError
        If ``out`` is not an array of the operands' library or has the wrong dtype.
    ValueError
        If ``out`` has the wrong shape or is read-only.
    """
    if lib.dask:  # lazy, per block (bcast.engine.dask, which imports Dask)
        from bcast.engine import dask

        return dask.execute(op, plan, kernel, operands, dtype=dtype, out=out, slots=slots)
    xp = lib.xp
    shape = output_shape(plan)
    check_result_shape(op, shape, np.dtype(dtype).itemsize if xp is None else 1)
    if xp is None and not all(x.dtype.isnative for x in operands):  # '>u8' on little-endian
        operands = [
            x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("=")) for x in operands
        ]
    indices = range(len(operands)) if slots is None else slots
    views = [
        aligned_view(x, plan, k, broadcast=False, xp=xp)
        for x, k in zip(operands, indices, strict=True)
    ]
    if xp is None:
        return _run_numpy(op, shape, kernel, views, np.dtype(dtype), out)
    return _run_generic(op, shape, kernel, views, dtype, out, xp)


def _run_numpy(
    op: str,
    shape: tuple[int, ...],
    kernel: Kernel,
    views: list[Any],
    dtype: np.dtype[Any],
    out: Any,
) -> Any:
    if out is None:
        result = _allocate(op, shape, dtype)
        _compute(kernel, result, views)
        return result
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{op}: out must be a NumPy array like the operands; got {type(out)}")
    if out.shape != shape or (out.dtype != dtype and out.dtype.newbyteorder("=") != dtype):
        _check_out(op, out.shape, shape, str(out.dtype), str(dtype))
    if not out.flags.writeable:
        raise ValueError(f"{op}: out is read-only")
    overlap = [v for v in views if np.may_share_memory(out, v)]
    if overlap and not (kernel.single_pass and all(_same_elements(out, v) for v in overlap)):
        if kernel.single_pass:  # one ufunc call: NumPy makes overlap safe
            _quietly(kernel.numpy, out, *views)
            return out
        result = _allocate(op, shape, dtype)
        _compute(kernel, result, views)
        _compute(_COPY, out, [result])
        return out
    _compute(kernel, out, views)
    return out


def _same_elements(out: np.ndarray[Any, Any], view: np.ndarray[Any, Any]) -> bool:
    """Tell whether ``view`` reads, for each output element, exactly that element of ``out``.

    Then a block reads only what it writes itself, and splitting is safe.
    """
    return (
        view.shape == out.shape
        and view.strides == out.strides
        and view.dtype == out.dtype
        and view.__array_interface__["data"][0] == out.__array_interface__["data"][0]
    )


def _compute(kernel: Kernel, out: np.ndarray[Any, Any], views: list[Any]) -> None:
    """Write the kernel's result into ``out``: one call for small work, else blocks on threads."""
    work = out.size * kernel.cost
    if work < _settings.parallel_min or not kernel.blockwise:
        _quietly(kernel.numpy, out, *views)
        return
    if kernel.precheck is not None:
        _quietly(kernel.precheck, out, *views)
    threads = _threads(work)
    if _run_compiled(kernel, out, views, min(threads, _work_threads(work))):
        return
    fn, operands = (kernel.numpy, views)
    if kernel.prepare is not None:
        fn, operands = _quietly(kernel.prepare, out.dtype, views)
    arranged = _layout.arrange(out, operands, max_tile_bytes=_settings.max_tile_bytes)
    if arranged is None:  # out overlaps itself: no split
        _quietly(fn, out, *operands)
        return
    target, sources = arranged
    if kernel.passes > 1:
        per_block = max(1, _settings.block_bytes // out.itemsize)
    else:
        per_block = -(-target.size // (threads * _settings.blocks_per_thread))
    pieces = _layout.blocks(target.shape, per_block)

    def task(i: int) -> None:
        index = pieces[i]
        fn(target[index], *(s[index] for s in sources))

    inner = target.shape[-1] if target.ndim else 1
    _parallel.run_blocks(task, len(pieces), threads, _worker_setup(_layout.buffer_size(inner)))


def _work_threads(work: float) -> int:
    return max(1, int(work // max(1, _settings.compiled_thread_work)))


def _run_compiled(
    kernel: Kernel, out: np.ndarray[Any, Any], views: list[Any], threads: int
) -> bool:
    """Compute on the compiled path when it applies (see `bcast.engine.compiled`); tell if it did.

    It takes the operands as they are (no ``prepare``: Where reads its condition as bool)
    and walks them as `bcast.engine.layout.walk_axes` arranges them.
    """
    name = kernel.compiled
    if name is None or not _settings.compiled or not _compiled.enabled():
        return False
    if not _compiled.accepts(name, out, views):
        return False
    stream_min = _settings.stream_min_bytes
    if stream_min is None:
        stream_min = _parallel.cache_bytes()

    def run_blocks(task: Callable[[int], None], count: int, threads: int) -> None:
        _parallel.run_blocks(task, count, threads, contextlib.nullcontext)

    return _compiled.run(
        name,
        out,
        views,
        max_tile_bytes=_settings.compiled_tile_bytes,
        threads=threads,
        blocks_per_thread=_settings.blocks_per_thread,
        stream=out.nbytes + sum(v.nbytes for v in views) >= stream_min,
        run_blocks=run_blocks,
        wait=_settings.compiled_wait,
    )


def _copy_numpy(out: Any, x: Any) -> None:
    np.copyto(out, x)


_COPY: Final = Kernel(
    _copy_numpy, lambda xp, x: xp.asarray(x, copy=True), single_pass=True, compiled="copy"
)


def _allocate(op: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    guard.check(op, shape, dtype, dtype.itemsize)
    return np.empty(shape, dtype=dtype)


def _run_generic(
    op: str,
    shape: tuple[int, ...],
    kernel: Kernel,
    views: list[Any],
    dtype: Any,
    out: Any,
    xp: Any,
) -> Any:
    # Everything here stays in ``xp`` and on the operands' device (CuPy, torch CUDA): no
    # np.asarray, no host copies. Dask never comes here (`execute` hands it to bcast.arrays.dask),
    # so the output shape is static and the memory guard always applies, JAX arrays (traced
    # under jit or not) included.
    from array_api_compat import array_namespace, is_writeable_array

    name = dtype_name(dtype, xp)
    if out is not None:
        if not hasattr(out, "dtype") or array_namespace(out) is not xp:
            raise TypeError(f"{op}: out must be an array of the operands' library")
        _check_out(op, shape_of(out), shape, dtype_name(out.dtype, xp), name)
        if not is_writeable_array(out):  # before computing anything
            raise ValueError(f"{op}: out is read-only (or of a library of immutable arrays)")
    else:
        guard.check(op, shape, name, ITEMSIZE.get(name, 8))
    try:
        result = kernel.generic(xp, *views)
    except NotImplementedError as err:  # PyTorch's uint16..uint64 hold data, nothing more
        library = getattr(xp, "__name__", "the operands' library").rsplit(".", 1)[-1]
        raise TypeError(
            f"{op}: {library} does not compute this operator on {name} ({err})"
        ) from None
    if result.dtype != dtype:
        result = xp.astype(result, dtype)  # a new array (the array API's default copy=True)
    if out is not None:
        out[...] = result  # broadcasts a result below the output's shape
        return out
    if tuple(shape_of(result)) != shape or any(result is v for v in views):
        return _materialise(xp, result, shape)
    return result


def _materialise(xp: Any, x: Any, shape: tuple[int, ...]) -> Any:
    """Return a new, writable, C-contiguous array of ``shape`` holding ``x`` broadcast.

    For kernels that return an operand itself (Copy: Expand, Broadcast), below the output's
    shape. ``xp.broadcast_to`` alone would give a stride-0 view that writes through to the
    operand (PyTorch) or is read-only (array-api-strict), and ``xp.asarray(view, copy=True)``
    keeps NumPy's order "K", which turns a stride-0 view into a Fortran-ordered copy
    (array-api-strict). So: allocate on the operand's device and assign. JAX arrays are
    immutable and have no strides: there ``broadcast_to`` gives the new array.
    """
    from array_api_compat import device, is_jax_namespace, is_writeable_array

    if is_jax_namespace(xp):
        return xp.broadcast_to(x, shape)
    fresh = xp.empty(shape, dtype=x.dtype, device=device(x))
    if not is_writeable_array(fresh):  # another library of immutable arrays
        return xp.asarray(xp.broadcast_to(x, shape), copy=True)
    fresh[...] = x
    return fresh


def _check_out(op: str, got: tuple[int, ...], shape: tuple[int, ...], have: str, want: str) -> None:
    if got != shape:
        raise ValueError(f"{op}: out has shape {list(got)}; the result's is {list(shape)}")
    if have != want:
        raise TypeError(f"{op}: out has dtype {have}; the result's is {want}")


# -- the tiny fast path --------------------------------------------------------------------

TINY: Final = 4096
"""Binary calls whose operand sizes multiply to at most this take the tiny path."""
