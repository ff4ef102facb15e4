"""The element-wise operators of ONNX opset 10+ and OpenVINO's set, bcast against NumPy and PyTorch.

    python benchmarks/bench_new_ops.py [--quick] [--json PATH] [--markdown PATH]

Each operator on float32 (int32 for the bitwise ones), in the layouts of ``bench_ops.py``'s
add cases: cache-sized (256,256,64) with (64,), and large (64,1024,1024) with (1024,). Every
peer runs in this process on 2 threads (NumPy has none), a new result each call, median of
the timed samples, the peers interleaved (``_harness.time_interleaved``), after warm-up calls
(which also compile bcast's kernels: numba caches them). The table gives each peer's median
and its time over the fastest's; bcast's result is checked against NumPy's, bit for bit.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import _harness as h
import numpy as np

import bcast
from bcast import engine, ops

THREADS = 2
SHAPES = {"cache": ((256, 256, 64), (64,)), "large": ((64, 1024, 1024), (1024,))}
# operator: (bcast, NumPy, PyTorch name, dtype)
OPERATORS: dict[str, tuple[Callable[..., Any], Callable[..., Any], str | None, str]] = {
    "not_equal": (ops.not_equal, np.not_equal, "ne", "float32"),
    "greater_or_equal": (ops.greater_or_equal, np.greater_equal, "ge", "float32"),
    "less_or_equal": (ops.less_or_equal, np.less_equal, "le", "float32"),
    "squared_difference": (
        ops.squared_difference,
        lambda a, b: np.square(np.subtract(a, b)),
        None,  # PyTorch: (a - b) ** 2 below
        "float32",
    ),
    "bitwise_xor": (ops.bitwise_xor, np.bitwise_xor, "bitwise_xor", "int32"),
    "mod": (ops.mod, np.mod, "remainder", "int32"),
}


def _inputs(shape: tuple[tuple[int, ...], ...], dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    if dtype == "int32":
        return [rng.integers(1, 1000, s, dtype=np.int32) for s in shape]
    return [rng.standard_normal(s).astype(np.float32) for s in shape]


def _torch(name: str, torch_name: str | None) -> Callable[..., Any] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(THREADS)
    if torch_name is None:
        return lambda a, b: (a - b) ** 2
    return getattr(torch, torch_name)  # type: ignore[no-any-return]


def run(quick: bool) -> list[dict[str, Any]]:
    """Time every operator and layout; return one record per operator, layout and peer."""
    samples, min_sample_s = (7, 0.02) if quick else (21, 0.05)
    records = []
    for layout, shape in SHAPES.items():
        for name, (ours, numpy_op, torch_name, dtype) in OPERATORS.items():
            a, b = _inputs(shape, dtype)
            want = numpy_op(a, b)
            if ours(a, b).tobytes() != want.tobytes():
                raise SystemExit(f"{name} {layout}: bcast's result is not NumPy's")
            peers: dict[str, Callable[[], Any]] = {
                "bcast": functools.partial(ours, a, b),
                "numpy": functools.partial(numpy_op, a, b),
            }
            torch_op = _torch(name, torch_name)
            if torch_op is not None:
                import torch

                ta, tb = torch.from_numpy(a), torch.from_numpy(b)
                peers["torch"] = functools.partial(torch_op, ta, tb)
            for call in peers.values():  # warm-up: bcast's kernels compile (numba caches them)
                for _ in range(5):
                    call()
            with engine.settings(compiled_wait=True):
                ours(a, b)
            timed, _ = h.time_interleaved(peers, samples=samples, min_sample_s=min_sample_s)
            times = {peer: statistics.median(seconds) for peer, seconds in timed.items()}
            fastest = min(times.values())
            for peer, seconds in times.items():
                records.append(
                    {"op": name, "layout": layout, "dtype": dtype, "peer": peer,
                     "median_s": seconds, "over_fastest": seconds / fastest}
                )  # fmt: skip
            print(
                f"{name:20s} {layout:6s} "
                + "  ".join(
                    f"{p} {t * 1e3:8.3f} ms ({t / fastest:4.2f}x)" for p, t in times.items()
                ),
                file=sys.stderr,
                flush=True,
            )
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls: noisier")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--markdown", help="write the table here, with the machine it ran on")
    args = parser.parse_args(argv)
    with engine.settings(threads=THREADS):
        records = run(args.quick)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"bcast": bcast.__version__, "records": records}, file, indent=1)
    table = markdown(records)
    print(table)
    if args.markdown:
        info = h.machine_info({"numpy": np.__version__, "bcast": bcast.__version__})
        with open(args.markdown, "w") as file:
            file.write(
                "# Benchmarks: the newer element-wise operators\n\n"
                f"Run {time.strftime('%Y-%m-%dT%H:%M:%S%z')} of bcast commit {info['commit']} on "
                f"{info['cpu']}, {info['cpus']} CPUs, Python {info['python']}, NumPy "
                f"{np.__version__}. `python benchmarks/bench_new_ops.py --markdown "
                "docs/benchmarks-new-ops.md`: median time of a call making a new result, and "
                "its ratio to the fastest peer's; 2 threads for bcast and PyTorch.\n\n"
                f"{table}\n"
            )
    return 0


def markdown(records: list[dict[str, Any]]) -> str:
    """Return the records as a table: one row per operator and layout, a cell per peer."""
    peers = list(dict.fromkeys(r["peer"] for r in records))
    rows: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for r in records:
        rows.setdefault((r["op"], r["dtype"], r["layout"]), {})[r["peer"]] = r
    lines = [
        "| operator | dtype | layout | " + " | ".join(peers) + " |",
        "|:---|:---|:---|" + "---:|" * len(peers),
    ]
    for (op, dtype, layout), cells in rows.items():
        shown = [
            f"{cells[p]['median_s'] * 1e3:.3f} ms ({cells[p]['over_fastest']:.2f}x)"
            if p in cells
            else "skipped"
            for p in peers
        ]
        lines.append(f"| {op} | {dtype} | {layout} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
