"""The compiled half of the engine's thread team: a hand-off that costs what OpenMP's does.

Imported with `bcast.engine.numba_kernels`, only when numba is installed. Waking a thread that
sleeps on a lock costs tens of microseconds on a virtual machine whose idle core has halted
(measured: 30-35 us a wake on this project's 2-core Xeon VM, 70 us a round trip), more than
a whole 1 MiB add. A worker of `bcast.engine.parallel` that has just finished a walk therefore
waits for the next one a while in `serve` (GIL released, ``pause`` between reads of its
slot), and the walker of the caller's thread posts the walk and joins the workers in compiled
code (`post`, `join`), so the hand-off is a few stores and loads of one shared board.

The board is an int64 array: ``board[TICKET]`` counts the walks posted; worker ``w`` (1, 2,
...) owns one cache line from ``LINE * w``: its box (the ticket posted to it, the ticket
negated once it took it, 0 when empty), the ticket it last finished, whether it sleeps in
Python (then its caller rings its bell), and a poke (Python work is waiting for it).
"""

from __future__ import annotations

import platform
from typing import Any, Final

import llvmlite.ir as ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from bcast.engine import numba_cache  # noqa: F401  (before any cache=True kernel)

__all__ = ["ASLEEP", "BOX", "DONE", "LINE", "POKE", "TICKET", "fetch_add", "join", "post", "serve"]

TICKET: Final = 0
LINE: Final = 8
"""Board entries per worker: one 64-byte cache line each, so workers never share a line."""
BOX: Final = 0
DONE: Final = 1
ASLEEP: Final = 2
POKE: Final = 3


def _slot(context: Any, builder: Any, signature: Any, args: Any) -> Any:
    view = context.make_array(signature.args[0])(context, builder, args[0])
    index = context.cast(builder, args[1], signature.args[1], types.intp)
    return builder.gep(view.data, [index])


def _int64_array(array: Any) -> bool:
    return isinstance(array, types.Array) and array.dtype == types.int64


@intrinsic
def fetch_add(typingctx: Any, board: Any, index: Any, value: Any) -> Any:
    """Add ``value`` to ``board[index]`` (int64) atomically; return the old value."""
    if not _int64_array(board):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        delta = context.cast(builder, args[2], signature.args[2], types.int64)
        return builder.atomic_rmw("add", _slot(context, builder, signature, args), delta, "acq_rel")

    return types.int64(board, index, value), codegen


@intrinsic
def _load(typingctx: Any, board: Any, index: Any) -> Any:
    """Read ``board[index]`` (int64) with acquire order: what was stored before it is seen."""
    if not _int64_array(board):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.load_atomic(_slot(context, builder, signature, args), "acquire", 8)

    return types.int64(board, index), codegen


@intrinsic
def _store(typingctx: Any, board: Any, index: Any, value: Any) -> Any:
    """Write ``board[index]`` (int64) with release order: what was stored before is seen."""
    if not _int64_array(board):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(value, _slot(context, builder, signature, args), "release", 8)
        return context.get_dummy_value()

    return types.void(board, index, value), codegen


@intrinsic
def _swap(typingctx: Any, board: Any, index: Any, expected: Any, value: Any) -> Any:
    """Set ``board[index]`` to ``value`` if it holds ``expected``; tell whether it did."""
    if not _int64_array(board):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        old = context.cast(builder, args[2], signature.args[2], types.int64)
        new = context.cast(builder, args[3], signature.args[3], types.int64)
        pair = builder.cmpxchg(
            _slot(context, builder, signature, args), old, new, "acq_rel", "acquire"
        )
        return builder.extract_value(pair, 1)

    return types.boolean(board, index, expected, value), codegen


_X86: Final = platform.machine().lower() in {"x86_64", "amd64", "i686", "x86"}


@intrinsic
def _pause(typingctx: Any) -> Any:
    """Tell the core this is a spin loop (x86 ``pause``: fewer wasted cycles, no mis-ordering)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        if _X86:
            hint = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause"
            )
            builder.call(hint, [])
        return context.get_dummy_value()

    return types.void(), codegen


@njit(nogil=True, cache=True)
def serve(board: Any, worker: int, done: int, spins: int) -> int:
    """Wait up to ``spins`` reads for a walk posted to ``worker``; return its ticket.

    Says first that the walk of ticket ``done`` is finished (the caller's `join` waits for
    it). Returns the ticket of a walk it took (its box now holds it negated), -1 when poked
    (Python work is waiting), or 0 when nothing came: the worker is then marked asleep and
    must sleep on its bell.
    """
    base = LINE * worker
    _store(board, base + DONE, done)
    for _ in range(spins):
        ticket: int = _load(board, base + BOX)
        if ticket > 0 and _swap(board, base + BOX, ticket, -ticket):
            return ticket
        if _load(board, base + POKE) != 0:
            _store(board, base + POKE, 0)
            return -1
        _pause()
    _store(board, base + ASLEEP, 1)
    ticket = _load(board, base + BOX)  # posted while it gave up: take it after all
    if ticket > 0 and _swap(board, base + BOX, ticket, -ticket):
        _store(board, base + ASLEEP, 0)
        return ticket
    return 0


@njit(inline="always")
def post(board: Any, helpers: int) -> int:
    """Post a walk to workers 1 to ``helpers``; return its ticket."""
    ticket: int = fetch_add(board, TICKET, 1) + 1
    for worker in range(1, helpers + 1):
        _store(board, LINE * worker + BOX, ticket)
    return ticket


@njit(inline="always")
def join(board: Any, helpers: int, ticket: int) -> None:
    """Withdraw the walk ``ticket`` from workers that did not take it; wait for the others."""
    for worker in range(1, helpers + 1):
        base = LINE * worker
        if not _swap(board, base + BOX, ticket, 0):  # taken: wait until its walk is done
            while _load(board, base + DONE) != ticket:
                _pause()
            _store(board, base + BOX, 0)
