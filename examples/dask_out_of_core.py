"""Broadcast over data larger than the workers' memory: bcast on a Dask cluster.

The example writes a float64 matrix of ``--size-gib`` GiB (4 by default) to a NumPy memmap
file in a temporary directory, opens it as a Dask array whose blocks the *workers* read
from the file, and computes, on a ``distributed.LocalCluster`` whose workers are limited
to ``--memory-limit`` (1 GiB by default)::

    total = bcast.ops.add(big, row).sum()        # big: [rows, 4096] on disk; row: [4096]

``bcast.ops.add`` returns a lazy Dask array with ``big``'s chunks: each task reads one block
of ``big`` (64 MiB by default), adds the row (a single block that every task shares) and
hands its block to the sum, so each worker holds a few blocks at a time, whatever the size
of the data. The example then reports the wall time, the throughput (GB of ``big`` per
second), the peak memory of each worker (sampled every 50 ms, and the process's high-water
mark), whether a worker was restarted, and checks ``total`` against its closed form.

Usage::

    python examples/dask_out_of_core.py [--size-gib 4] [--memory-limit 1GiB] [--workers 2]
                                        [--threads 1] [--chunk-mib 64] [--dir DIR] [--json]

Needs ``dask[array]`` and ``distributed`` (bcast's ``dask`` extra). The file is deleted at
the end unless ``--dir`` is given (then it is kept and reused by the next run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster

import bcast

COLS = 4096
DTYPE = np.dtype(np.float64)
PATTERN = 1009  # big[i, j] = (i * COLS + j) % PATTERN: cheap to write, a closed-form sum


class MemmapBlocks:
    """A NumPy memmap file that Dask reads block by block, on the workers.

    ``da.from_array`` needs only ``shape``, ``dtype``, ``ndim`` and ``__getitem__``. The
    object pickles as its path (a memmap itself would pickle as its whole contents), and
    each read maps the file, copies the block out and unmaps it, so that no file pages stay
    counted in the worker's resident memory.
    """

    def __init__(self, path: str | Path, shape: tuple[int, ...], dtype: Any) -> None:
        self.path = str(path)
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        mapped = np.memmap(self.path, dtype=self.dtype, mode="r", shape=self.shape)
        try:
            return np.array(mapped[key])
        finally:
            del mapped

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return (self.path, self.shape, str(self.dtype), os.path.getmtime(self.path))


def write_matrix(path: Path, rows: int, *, chunk_rows: int) -> None:
    """Write the ``rows x COLS`` pattern matrix to ``path`` (a raw memmap file)."""
    out = np.memmap(path, dtype=DTYPE, mode="w+", shape=(rows, COLS))
    for start in range(0, rows, chunk_rows):
        stop = min(start + chunk_rows, rows)
        flat = np.arange(start * COLS, stop * COLS, dtype=np.int64) % PATTERN
        out[start:stop] = flat.reshape(stop - start, COLS)
    out.flush()
    del out


def expected_total(rows: int, row: np.ndarray) -> float:
    """The exact value of ``(big + row).sum()``: the pattern's sum plus ``rows * sum(row)``."""
    n = rows * COLS
    cycles, rest = divmod(n, PATTERN)
    pattern = cycles * (PATTERN * (PATTERN - 1) // 2) + rest * (rest - 1) // 2
    return float(pattern) + rows * float(row.sum())


def open_matrix(path: Path, rows: int, *, chunk_rows: int) -> Any:
    """Open the file as a Dask array of ``chunk_rows``-row blocks (nothing is read here)."""
    source = MemmapBlocks(path, (rows, COLS), DTYPE)
    return da.from_array(
        source, chunks=(chunk_rows, COLS), meta=np.empty((0, 0), DTYPE), name="big-" + path.stem
    )


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _peak_rss() -> int:
    """Return the process's peak resident memory in bytes: VmHWM (Linux).

    Not ``getrusage``'s ``ru_maxrss``: Linux carries it across ``exec``, so a worker
    spawned by a big parent would report the parent's peak.
    """
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> None:
    """Reset the process's VmHWM to its current RSS (Linux: ``5 > /proc/self/clear_refs``)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")


def _pid() -> int:
    return os.getpid()


class MemorySampler:
    """Sample every worker's resident memory (``client.run``) until stopped; keep the peak."""

    def __init__(self, client: Client, interval: float = 0.05) -> None:
        self.client = client
        self.interval = interval
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for worker, rss in self.client.run(_rss).items():
                self.peak[worker] = max(self.peak.get(worker, 0), rss)
            self._stop.wait(self.interval)


def measure(client: Client, expression: Any, nbytes: int) -> dict[str, Any]:
    """Compute ``expression`` on the cluster; return its value, time, throughput and memory."""
    pids = client.run(_pid)
    client.run(_reset_peak)
    with MemorySampler(client) as sampler:
        start = time.perf_counter()
        value = client.compute(expression, sync=True)
        seconds = time.perf_counter() - start
    return {
        "value": float(value),
        "seconds": seconds,
        "gb_per_s": nbytes / seconds / 1e9,
        "peak_rss_sampled": {w: sampler.peak.get(w, 0) for w in sorted(pids)},
        "peak_rss_high_water": dict(sorted(client.run(_peak_rss).items())),
        "workers_restarted": client.run(_pid) != pids,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gib", type=float, default=4.0, help="size of the data on disk")
    parser.add_argument("--memory-limit", default="1GiB", help="memory limit of each worker")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker")
    parser.add_argument("--chunk-mib", type=int, default=64, help="block size of the data")
    parser.add_argument("--dir", type=Path, default=None, help="keep the data file here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser.parse_args(argv)


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chunk_rows = max(args.chunk_mib * 2**20 // (COLS * DTYPE.itemsize), 1)
    rows = max(int(args.size_gib * 2**30) // (COLS * DTYPE.itemsize), 1)
    nbytes = rows * COLS * DTYPE.itemsize
    with tempfile.TemporaryDirectory(prefix="bcast-dask-") as scratch:
        folder = args.dir if args.dir is not None else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"big-{rows}x{COLS}.f64"
        if not path.exists() or path.stat().st_size != nbytes:
            started = time.perf_counter()
            write_matrix(path, rows, chunk_rows=chunk_rows)
            print(
                f"wrote {nbytes / 2**30:.2f} GiB to {path.name} in "
                f"{time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
        big = open_matrix(path, rows, chunk_rows=chunk_rows)
        row = np.arange(COLS, dtype=DTYPE) * 0.5
        total = bcast.ops.add(big, row).sum()  # lazy: nothing is read yet
        with (
            LocalCluster(
                n_workers=args.workers,
                threads_per_worker=args.threads,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                memory_limit=args.memory_limit,
            ) as cluster,
            Client(cluster) as client,
        ):
            limit = next(iter(cluster.workers.values())).memory_manager.memory_limit
            result = measure(client, total, nbytes)
    want = expected_total(rows, row)
    report = {
        "data_bytes": nbytes,
        "shape": [rows, COLS],
        "chunk_rows": chunk_rows,
        "workers": args.workers,
        "threads_per_worker": args.threads,
        "memory_limit_per_worker": limit,
        **result,
        "expected": want,
        "correct": abs(result["value"] - want) <= 1e-12 * abs(want),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"data: {nbytes / 2**30:.2f} GiB on disk, shape {rows}x{COLS} float64, ", end="")
        print(f"blocks of {chunk_rows} rows ({_mib(chunk_rows * COLS * DTYPE.itemsize)})")
        print(f"cluster: {args.workers} workers x {args.threads} thread, {_mib(limit)} each")
        print(f"bcast.ops.add(big, row).sum(): {result['seconds']:.2f} s, ", end="")
        print(f"{result['gb_per_s']:.2f} GB/s")
        for worker, peak in result["peak_rss_sampled"].items():
            high = result["peak_rss_high_water"].get(worker, 0)
            print(f"  {worker}: peak RSS {_mib(peak)} sampled, {_mib(high)} high-water mark")
        print(f"workers restarted: {result['workers_restarted']}; correct: {report['correct']}")
    return 0 if report["correct"] and not result["workers_restarted"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
