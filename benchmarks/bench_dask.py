"""Out-of-core broadcasting on a Dask cluster: bcast against Dask's own operator and NumPy.

Usage::

    python benchmarks/bench_dask.py [--quick] [--size-gib 4] [--memory-limit 1GiB]
                                    [--repeats 3] [--json PATH]

The data and the cluster are those of ``examples/dask_out_of_core.py``: a float64 matrix of
``--size-gib`` GiB (4096 columns) written to a NumPy memmap file, read block by block (64 MiB)
by a ``distributed.LocalCluster`` of 2 worker processes with 1 thread each and
``--memory-limit`` of memory each. Peers, interleaved round by round, each computing
``(big + row).sum()`` over a ``[4096]`` row:

- **bcast**: ``bcast.ops.add(big, row).sum()`` on the cluster;
- **dask**: ``(big + row).sum()``, Dask's own broadcasting, on the same cluster;
- **numpy-stream**: one process, one thread, the same blocks read from the file in a loop
  (``np.add(block, row).sum()``): the single-core baseline.

For each peer: median wall time and throughput (GB of data per second), and, on the
cluster, each worker's peak resident memory (sampled every 50 ms, and the kernel's
high-water mark, reset before each run), whether a worker was restarted, and whether the
result equals its closed form. JSON goes to ``benchmarks/results/dask.json``. The file is
in the page cache after it is written (the machine has more memory than the data), so the
figures measure the computation and the cluster, not the disk.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cloudpickle
import dask
import distributed
import numpy as np
from distributed import Client, LocalCluster

import bcast

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as h

HERE = Path(__file__).resolve().parent


def _load_example() -> Any:
    path = HERE.parent / "examples" / "dask_out_of_core.py"
    spec = importlib.util.spec_from_file_location("dask_out_of_core", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    # The workers cannot import the example by name: ship its classes and functions by value.
    cloudpickle.register_pickle_by_value(module)
    return module


ex = _load_example()


def numpy_stream(path: Path, rows: int, chunk_rows: int, row: np.ndarray) -> float:
    source = ex.MemmapBlocks(path, (rows, ex.COLS), ex.DTYPE)
    total = 0.0
    for start in range(0, rows, chunk_rows):
        block = source[start : start + chunk_rows]
        total += float(np.add(block, row).sum())
    return total


def run(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    chunk_rows = args.chunk_mib * 2**20 // (ex.COLS * ex.DTYPE.itemsize)
    rows = int(args.size_gib * 2**30) // (ex.COLS * ex.DTYPE.itemsize)
    nbytes = rows * ex.COLS * ex.DTYPE.itemsize
    path = folder / f"big-{rows}x{ex.COLS}.f64"
    ex.write_matrix(path, rows, chunk_rows=chunk_rows)
    big = ex.open_matrix(path, rows, chunk_rows=chunk_rows)
    row = np.arange(ex.COLS, dtype=ex.DTYPE) * 0.5
    want = ex.expected_total(rows, row)
    expressions = {"bcast": bcast.ops.add(big, row).sum(), "dask": (big + row).sum()}
    samples: dict[str, list[dict[str, Any]]] = {"bcast": [], "dask": [], "numpy-stream": []}
    with (
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            memory_limit=args.memory_limit,
        ) as cluster,
        Client(cluster) as client,
    ):
        limit = next(iter(cluster.workers.values())).memory_manager.memory_limit
        client.compute(expressions["bcast"], sync=True)  # warm-up: imports, page cache
        for _ in range(args.repeats):
            for peer, expression in expressions.items():
                samples[peer].append(ex.measure(client, expression, nbytes))
            start = time.perf_counter()
            value = numpy_stream(path, rows, chunk_rows, row)
            seconds = time.perf_counter() - start
            samples["numpy-stream"].append(
                {"value": value, "seconds": seconds, "gb_per_s": nbytes / seconds / 1e9}
            )
    records = []
    for peer, runs in samples.items():
        seconds = h.median([r["seconds"] for r in runs])
        record: dict[str, Any] = {
            "peer": peer,
            "seconds_median": seconds,
            "seconds": [r["seconds"] for r in runs],
            "gb_per_s": nbytes / seconds / 1e9,
            "correct": all(abs(r["value"] - want) <= 1e-12 * abs(want) for r in runs),
        }
        if peer != "numpy-stream":
            workers = sorted(runs[0]["peak_rss_sampled"])
            record["peak_rss_mib_sampled"] = [
                max(r["peak_rss_sampled"][w] for r in runs) / 2**20 for w in workers
            ]
            record["peak_rss_mib_high_water"] = [
                max(r["peak_rss_high_water"][w] for r in runs) / 2**20 for w in workers
            ]
            record["workers_restarted"] = any(r["workers_restarted"] for r in runs)
        records.append(record)
    return {
        "data_gib": nbytes / 2**30,
        "shape": [rows, ex.COLS],
        "chunk_mib": args.chunk_mib,
        "workers": args.workers,
        "threads_per_worker": 1,
        "memory_limit_mib": limit / 2**20,
        "repeats": args.repeats,
        "records": records,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"{result['data_gib']:.2f} GiB float64 on disk, {result['workers']} workers x 1 thread, "
        f"{result['memory_limit_mib']:.0f} MiB each; median of {result['repeats']}",
        "",
        "| peer | s | GB/s | peak RSS per worker, MiB (sampled / high-water) | correct |",
        "|---|---:|---:|---|---|",
    ]
    for r in result["records"]:
        peaks = ""
        if "peak_rss_mib_sampled" in r:
            peaks = ", ".join(
                f"{s:.0f} / {w:.0f}"
                for s, w in zip(
                    r["peak_rss_mib_sampled"], r["peak_rss_mib_high_water"], strict=True
                )
            )
        lines.append(
            f"| {r['peer']} | {r['seconds_median']:.2f} | {r['gb_per_s']:.2f} | {peaks} "
            f"| {r['correct']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="0.5 GiB, workers of 384 MiB, 1 run")
    ap.add_argument("--size-gib", type=float, default=None, help="data size (default 4)")
    ap.add_argument("--memory-limit", default=None, help="per worker (default 1GiB)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk-mib", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=None, help="runs per peer (default 3)")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the data file")
    ap.add_argument(
        "--json", type=Path, default=HERE / "results" / "dask.json", help="where to write JSON"
    )
    args = ap.parse_args(argv)
    quick = (0.5, "384MiB", 1) if args.quick else (4.0, "1GiB", 3)
    args.size_gib = args.size_gib if args.size_gib is not None else quick[0]
    args.memory_limit = args.memory_limit or quick[1]
    args.repeats = args.repeats if args.repeats is not None else quick[2]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bcast-bench-dask-", dir=args.dir) as folder:
        result = run(args, Path(folder))
    table = markdown(result)
    print(table)
    versions = {
        "numpy": np.__version__,
        "dask": dask.__version__,
        "distributed": distributed.__version__,
        "bcast": bcast.__version__,
    }
    data = {
        "schema": "bcast-bench-dask/1",
        "quick": args.quick,
        "elapsed_s": round(time.perf_counter() - start, 2),
        "machine": h.machine_info(dict(versions)),
        **result,
        "markdown": table,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.json}", file=sys.stderr)
    ok = all(r["correct"] and not r.get("workers_restarted", False) for r in result["records"])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
