"""NumPy work: one quiet kernel call, the compiled walkers, or blocks on the engine's threads.

`run_numpy` validates ``out=`` and handles an output that overlaps its operands; `compute`
picks how the kernel writes the output: one call in the caller's thread (small work, or a
kernel that cannot be split), the compiled path (`bcast.engine.compiled`: a `Runner` planned
for the layout), or blocks of the arranged output (`bcast.engine.layout`) on threads
(`bcast.engine.parallel`). Every way computes the same values.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final

import numpy as np

from bcast.engine import compiled as _compiled
from bcast.engine import config, guard
from bcast.engine import layout as _layout
from bcast.engine import parallel as _parallel
from bcast.engine.kernel import Kernel
from bcast.engine.layout import same_elements
from bcast.engine.runner import Runner

__all__ = [
    "COPY",
    "allocate",
    "check_out",
    "compiled_runner",
    "compute",
    "quiet_run",
    "quietly",
    "run_numpy",
    "same_elements",
    "worker_setup",
]

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


def quietly(fn: Callable[..., Any], *args: Any) -> Any:
    """Return ``fn(*args)``, run with NumPy's floating-point warnings off.

    >>> import numpy as np
    >>> float(quietly(np.divide, np.float64(1.0), 0.0))
    inf
    """
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


def worker_setup(bufsize: int | None) -> Callable[[], AbstractContextManager[Any]]:
    """Each thread's context for its blocks: warnings off, NumPy's buffer matched to rows."""
    if bufsize is None or quiet_run is None:  # NumPy < 2: the buffer size is process-wide
        return _worker_quiet

    @contextmanager
    def setup() -> Iterator[None]:
        with np.errstate(all="ignore"):  # restores the buffer size too on exit
            np.setbufsize(bufsize)
            yield

    return setup


# -- running a kernel ----------------------------------------------------------------------


def run_numpy(
    op: str,
    shape: tuple[int, ...],
    kernel: Kernel,
    views: list[Any],
    dtype: np.dtype[Any],
    out: Any,
    *,
    compiled: bool = True,
) -> Any:
    """Compute into ``out`` (validated) or a new array; return it. ``compiled``: may use it."""
    if out is None:
        result = allocate(op, shape, dtype)
        compute(kernel, result, views, compiled=compiled)
        return result
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{op}: out must be a NumPy array like the operands; got {type(out)}")
    if out.shape != shape or (out.dtype != dtype and out.dtype.newbyteorder("=") != dtype):
        check_out(op, out.shape, shape, str(out.dtype), str(dtype))
    if not out.flags.writeable:
        raise ValueError(f"{op}: out is read-only")
    overlap = [v for v in views if np.may_share_memory(out, v)]
    if overlap and not (kernel.single_pass and all(same_elements(out, v) for v in overlap)):
        if kernel.single_pass:  # one ufunc call: NumPy makes overlap safe
            quietly(kernel.numpy, out, *views)
            return out
        result = allocate(op, shape, dtype)
        compute(kernel, result, views, compiled=compiled)
        compute(COPY, out, [result], compiled=compiled)
        return out
    compute(kernel, out, views, compiled=compiled)
    return out


HALF_COST: Final = 8.0
"""NumPy's ufuncs on float16 against float32, per element: they widen and round each element
in software ((n,256)+(256,) adds of 4 MiB: 6.7 ms in float16, 0.38 ms in float32, on the
2-core Xeon)."""

_FLOAT16: Final = np.dtype(np.float16)


def numpy_work(kernel: Kernel, out: Any, views: Sequence[Any]) -> float:
    """Return what the kernel's call costs on NumPy's path: the work `config.route` takes.

    Output elements times the kernel's cost, `HALF_COST` times more for a ufunc on float16,
    which so reaches the compiled path (whose float16 kernels cost what float32's do) and
    NumPy's threads sooner.

    >>> add = Kernel(lambda out, a, b: np.add(a, b, out=out), lambda xp, a, b: a + b, ufunc=np.add)
    >>> half, single = np.zeros(1000, np.float16), np.zeros(1000, np.float32)
    >>> numpy_work(add, half, [half, half]), numpy_work(add, single, [single, single])
    (8000.0, 1000.0)
    """
    work = float(out.size * kernel.cost)
    if kernel.ufunc is not None and views and views[0].dtype == _FLOAT16:
        work *= HALF_COST
    return work


def compute(
    kernel: Kernel, out: np.ndarray[Any, Any], views: list[Any], *, compiled: bool = True
) -> None:
    """Write the kernel's result into ``out``: one call, the compiled path, or blocks."""
    work = out.size * kernel.cost
    settings = config.get_settings()
    costed = numpy_work(kernel, out, views)
    try_compiled, split = config.route(kernel.blockwise, out.size, costed, settings)
    if compiled and try_compiled:
        runner = compiled_runner(kernel, out, views, work)
        if runner is not None and runner(out, views):
            return
    if not split:
        quietly(kernel.numpy, out, *views)
        return
    if kernel.precheck is not None:
        quietly(kernel.precheck, out, *views)
    threads = config.threads_for(costed)
    fn, operands = (kernel.numpy, views)
    if kernel.prepare is not None:
        fn, operands = quietly(kernel.prepare, out.dtype, views)
    arranged = _layout.arrange(out, operands, max_tile_bytes=settings.max_tile_bytes)
    if arranged is None:  # out overlaps itself: no split
        quietly(fn, out, *operands)
        return
    target, sources = arranged
    if kernel.passes > 1:
        per_block = max(1, settings.block_bytes // out.itemsize)
    else:
        per_block = -(-target.size // (threads * settings.blocks_per_thread))
    pieces = _layout.blocks(target.shape, per_block)

    def task(i: int) -> None:
        index = pieces[i]
        fn(target[index], *(s[index] for s in sources))

    inner = target.shape[-1] if target.ndim else 1
    _parallel.run_blocks(task, len(pieces), threads, worker_setup(_layout.buffer_size(inner)))


def compiled_runner(
    kernel: Kernel,
    out: np.ndarray[Any, Any],
    views: list[Any],
    work: float,
    operands: Sequence[Any] | None = None,
) -> Runner | None:
    """Return the compiled path's `Runner` for these arrays, or None where it does not apply.

    It takes the operands as they are (no ``prepare``: Where reads its condition as bool)
    and walks them as `bcast.engine.layout.walk_axes` arranges them. The threads are decided
    here, once, by the size of the work. ``operands``: the arrays the runner will be called
    with (default: ``views``, the operands aligned to the output's rank).
    """
    name = kernel.compiled
    settings = config.get_settings()
    if name is None or not settings.compiled or not _compiled.enabled():
        return None
    if not _compiled.accepts(name, out, views):
        return None
    stream, measure = config.stores(
        settings, out.nbytes + sum(v.nbytes for v in views), out.itemsize
    )
    return _compiled.prepare(
        name,
        out,
        views,
        operands=None if operands is None else list(operands),
        max_tile_bytes=settings.compiled_tile_bytes,
        threads=config.compiled_threads_for(work * out.itemsize),
        blocks_per_thread=settings.blocks_per_thread,
        stream=stream,
        measure_stores=measure,
        run_team=functools.partial(
            _parallel.run_team,
            spin=_parallel.spin_us() if settings.spin_us is None else settings.spin_us,
        ),
        wait=settings.compiled_wait,
    )


def _copy_numpy(out: Any, x: Any) -> None:
    np.copyto(out, x)


COPY: Final = Kernel(
    _copy_numpy, lambda xp, x: xp.asarray(x, copy=True), single_pass=True, compiled="copy"
)
"""Copy one operand into the output (the second step of an overlapping output)."""


def allocate(op: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """Return a new array of ``shape`` and ``dtype`` once the memory guard allows it."""
    guard.check(op, shape, dtype, dtype.itemsize)
    return np.empty(shape, dtype=dtype)


def check_out(op: str, got: tuple[int, ...], shape: tuple[int, ...], have: str, want: str) -> None:
    """Raise the error for an ``out=`` of the wrong shape or dtype (nothing if both fit)."""
    if got != shape:
        raise ValueError(f"{op}: out has shape {list(got)}; the result's is {list(shape)}")
    if have != want:
        raise TypeError(f"{op}: out has dtype {have}; the result's is {want}")
