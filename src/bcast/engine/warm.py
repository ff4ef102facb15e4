"""Compile the engine's kernels ahead of time: ``python -m bcast.engine.warm``.

The compiled path (`bcast.engine.compiled`, the ``fast`` extra) compiles each operation and
dtype on first use, in the background, and numba caches the machine code on disk for every
later process. Running this once per machine (after installing, in a container image's
build) compiles them all up front, so that no process ever computes on NumPy's path while
a kernel compiles::

    python -m bcast.engine.warm                 # every kernel (a few minutes)
    python -m bcast.engine.warm --ops add,pow   # only these operations
    python -m bcast.engine.warm --list          # what there is to compile
    python -m bcast.engine.warm --quiet         # one line at the end (and any failure)
    python -m bcast.engine.warm --jobs 1        # in this process only (default: a process
                                                # per core, at most 4)

An operation NumPy computes faster on this machine has no kernel (float32 Pow where NumPy's
own float32 power is vector code: AVX-512; float16 Pow is compiled everywhere). The entry
that replays a call site in one compiled call (`bcast.engine.numba_entry`) is not compiled
here: there is one per itemsizes and ranks of the arrays, too many to compile up front;
each compiles on its first use (about 1 s, in the background: meanwhile Python prepares
each walk, with the walker compiled here). numba's cache is per machine (it holds code for
this CPU) and per user and bcast version: `bcast.engine.numba_cache` keeps it in the user's
cache folder (``BCAST_CACHE_DIR`` moves it), so a second clone or environment compiles nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from bcast.engine import compiled, operations

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Compile (or load from numba's cache) the kernels named; return the exit status.

    0 when every kernel is ready; 1 when some could not be compiled or the compiled path is
    off (numba missing, ``BCAST_COMPILED=0``); 2 for an unknown operation.

    >>> main(["--list", "--ops", "xor"])
    xor(bool,bool,bool,bool)
    0
    >>> main(["--list", "--ops", "less_or_equal,greater_or_equal"])  # one set: operands swapped
    greater_or_equal(bool,uint8,uint8,uint8)
    ...
    0
    """
    parser = argparse.ArgumentParser(
        prog="python -m bcast.engine.warm", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--ops", help="comma-separated operations (default: all)")
    parser.add_argument("--list", action="store_true", help="list the kernels; compile none")
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print only failures and the last line"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(os.cpu_count() or 1, 4),
        help="processes that compile at once (default: one per core, at most 4)",
    )
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except BrokenPipeError:  # `warm --list | head`: the reader left; nothing is wrong here
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit finds no pipe
        return 0


def _run(args: argparse.Namespace) -> int:
    names = None if args.ops is None else [n.strip() for n in args.ops.split(",") if n.strip()]
    if names is not None:  # Less is Greater's kernel, its operands swapped: that one
        names = list(dict.fromkeys(operations.SWAPPED.get(n, n) for n in names))
    unknown = sorted(set(names or ()) - set(compiled.OPERATIONS))
    if unknown:
        known = ", ".join([*compiled.OPERATIONS, *operations.SWAPPED])
        print(f"unknown operation(s) {', '.join(unknown)}; known: {known}", file=sys.stderr)
        return 2
    kernels = compiled.signatures(names)
    if "pow" in (names or ()) and operations.numpy_power_vectorised():
        print("pow: no float32 kernel on this machine, NumPy computes it (its own float32")
        print("     power is vector code on this CPU)")
    if args.list:
        for name, dtypes in kernels:
            print(f"{name}({','.join(str(d) for d in dtypes)})")
        return 0
    if not compiled.available():
        print("the compiled path is off (numba missing, or BCAST_COMPILED=0)", file=sys.stderr)
        return 1

    def report(kernel: str, ready: bool, seconds: float) -> None:
        if not (args.quiet and ready):
            print(f"{kernel:48s} {'ready' if ready else 'FAILED'} {seconds:6.2f} s", flush=True)

    started = time.perf_counter()
    shares = _shares(kernels, max(args.jobs, 1))
    helpers = [
        subprocess.Popen(
            [sys.executable, "-m", "bcast.engine.warm", "--jobs", "1", "--ops", ",".join(share)]
            + (["--quiet"] if args.quiet else []),
            stdout=subprocess.PIPE,
            text=True,
        )
        for share in shares[1:]
    ]
    ready = compiled.warm(shares[0] if helpers else names, report)
    for helper in helpers:  # each ends with "N of M kernels ready (...)"
        lines = (helper.communicate()[0] or "").splitlines()
        for line in lines[:-1]:
            print(line)
        done = lines[-1].split(" of ", 1)[0] if lines else ""
        ready += int(done) if helper.returncode in (0, 1) and done.isdigit() else 0
    took = time.perf_counter() - started
    print(f"{ready} of {len(kernels)} kernels ready ({took:.0f} s)")
    return 0 if ready == len(kernels) else 1


def _shares(kernels: Sequence[tuple[str, Any]], jobs: int) -> list[list[str]]:
    """Split the operations among ``jobs`` processes, about as many kernels to each.

    >>> _shares([("add", 1), ("add", 2), ("xor", 3), ("pow", 4)], 2)
    [['add'], ['pow', 'xor']]
    >>> _shares([("add", 1)], 4)
    [['add']]
    """
    counts: dict[str, int] = {}
    for name, _ in kernels:
        counts[name] = counts.get(name, 0) + 1
    shares: list[list[str]] = [[] for _ in range(min(jobs, len(counts)) or 1)]
    loads = [0] * len(shares)
    for name in sorted(counts, key=lambda n: (-counts[n], n)):
        least = loads.index(min(loads))
        shares[least].append(name)
        loads[least] += counts[name]
    return [sorted(share) for share in shares]


if __name__ == "__main__":
    raise SystemExit(main())
