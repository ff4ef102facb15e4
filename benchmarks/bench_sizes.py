"""Add at every size, and the first call: bcast against its peers from 64 KiB to 1 GiB.

Usage::

    python benchmarks/bench_sizes.py [--quick] [--only sweep|first] [--families bias2d,...]
                                     [--json PATH]

*Sweep*: ``add`` of three shapes of operands, float32 and float64, at outputs of 64 KiB,
256 KiB, ... 1 GiB (``--quick``: 64 KiB, 1 MiB and 16 MiB): the 2-D bias add
``(n,64)+(64,)``, the 3-D bias add ``(n,256,64)+(64,)`` and the outer add ``(n,1)+(1,n)``.
Every peer of ``bench_ops.py`` (bcast, NumPy, numexpr, onnxruntime, OpenVINO, PyTorch; the
GPU peers where there is a device) is checked against NumPy, then timed interleaved as
``_harness`` does; the figure is each peer's median over the fastest peer's median at that
size. No STREAM probe here (``bench_ops.py`` has it): the ratios are the result. Sizes whose
arrays would not fit in the memory available are skipped and said so.

*First call*: a fresh process with an empty numba cache (``NUMBA_CACHE_DIR`` a new folder)
times the first ``bcast.ops.add`` of float32 ``(4096,4096)+(4096,)`` against the first
``np.add`` of the same operands in that process (NumPy first), its second call, and how long
after the first call the compiled kernel was ready; then again in a second process that finds
the cache filled. Both with bcast's default (the kernel compiles in the background while
NumPy's path computes) and with ``BCAST_COMPILED=wait`` (the first call compiles: what every
first call cost before the background compile). Full runs add Pow and Where and repeat each
process three times (medians).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as h
import bench_ops as b  # sets OMP_WAIT_POLICY and BCAST_NUM_THREADS before any import

SCHEMA = "bcast-bench-sizes/1"
KIB = 1 << 10
SIZES = [64 * KIB * 4**k for k in range(8)]  # 64 KiB ... 1 GiB
QUICK_SIZES = [64 * KIB, 1 << 20, 16 << 20]
FAMILIES = {
    "bias2d": "(n,64)+(64,)",
    "bias3d": "(n,256,64)+(64,)",
    "outer": "(n,1)+(1,n)",
}
DTYPES = ["float32", "float64"]


def shapes(family: str, out_bytes: int, itemsize: int) -> list[tuple[int, ...]] | None:
    """The operands' shapes whose output takes ``out_bytes`` (the nearest for ``outer``)."""
    elements = out_bytes // itemsize
    if family == "bias2d":
        return [(elements // 64, 64), (64,)]
    if family == "bias3d":
        n = elements // (256 * 64)
        return [(n, 256, 64), (64,)] if n >= 1 else None
    n = math.isqrt(elements)
    return [(n, 1), (1, n)]


def _inputs(shapes: list[tuple[int, ...]], dtype: str, rng: np.random.Generator) -> list[Any]:
    return [(rng.random(s, dtype=np.float32) * 2 - 1).astype(dtype) for s in shapes]


def _available_bytes() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * KIB
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 62


def sweep_case(
    family: str, dtype: str, out_bytes: int, settings: b.Settings
) -> dict[str, Any] | None:
    itemsize = np.dtype(dtype).itemsize
    found = shapes(family, out_bytes, itemsize)
    if found is None:
        return None
    name = f"{family}_{dtype}_{out_bytes // KIB}KiB"
    title = f"add {' + '.join(str(s) for s in found)} {dtype}"
    record: dict[str, Any] = {"name": name, "family": family, "dtype": dtype, "title": title}
    record["input_shapes"] = [list(s) for s in found]
    out_elements = math.prod(np.broadcast_shapes(*found))
    record["output_bytes"] = out_elements * itemsize
    # the output, NumPy's reference, a plain peer's result and the inputs at once, with room
    need = 4 * record["output_bytes"] + sum(math.prod(s) * itemsize for s in found)
    if need > 0.8 * _available_bytes():
        record["skipped"] = f"needs about {need / 2**30:.1f} GiB; less is available"
        return record
    spec = b.CaseSpec(name, title, "add", lambda r: _inputs(found, dtype, r))
    xs = spec.make_inputs(np.random.default_rng(settings.seed))
    expected = b.reference(spec, xs)
    out = np.empty_like(expected)
    peers = b.build_peers(spec, xs, out)
    results = []
    for peer in peers:
        b._poison(out)
        results.extend(h.check_peers([peer], expected, rtol=spec.rtol, atol=spec.atol))
    del expected
    b.kernels_ready()
    ok = {r.name for r in results if r.status == "ok"}
    fns = {p.name: p.fn for p in peers if p.fn is not None and p.name in ok}
    samples, numbers = h.time_interleaved(
        fns, samples=settings.samples, min_sample_s=settings.min_sample_s, seed=settings.seed
    )
    case = h.CaseResult(name, title, "add", record["input_shapes"], list(out.shape), dtype,
                        h.bytes_moved(xs, out.shape, itemsize), False, peers=results)  # fmt: skip
    for r in case.peers:
        if r.name in samples:
            r.samples_s, r.number = samples[r.name], numbers[r.name]
    h.summarize(case, None)
    record["peers"] = [
        {k: getattr(r, k) for k in ("name", "family", "status", "note", "median_s", "min_s",
                                    "ratio_to_fastest", "number")}
        for r in case.peers
    ]  # fmt: skip
    return record


def run_sweep(
    sizes: Sequence[int], settings: b.Settings, families: Sequence[str] = tuple(FAMILIES)
) -> list[dict[str, Any]]:
    records = []
    for family in families:
        for dtype in DTYPES:
            for size in sizes:
                record = sweep_case(family, dtype, size, settings)
                if record is None:
                    continue
                records.append(record)
                _print_sweep(record)
    return records


def _print_sweep(record: dict[str, Any]) -> None:
    if "skipped" in record:
        print(f"  {record['name']:28s} skipped: {record['skipped']}", file=sys.stderr)
        return
    ok = sorted(
        (p for p in record["peers"] if p["status"] == "ok"), key=lambda p: p["ratio_to_fastest"]
    )
    cells = ", ".join(f"{p['name']} x{p['ratio_to_fastest']:.2f}" for p in ok[:4])
    print(f"  {record['name']:28s} {cells}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# The first call, in fresh processes

FIRST_CALL = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    op, shapes = sys.argv[1], json.loads(sys.argv[2])
    rng = np.random.default_rng(0)
    xs = [rng.uniform(0.5, 2.0, s).astype(np.float32) for s in shapes]
    if op == "where":
        xs[0] = xs[0] > 1.25
    reference = {"add": np.add, "pow": np.power, "where": np.where}[op]
    import bcast.ops
    from bcast.engine import compiled, parallel
    ours = getattr(bcast.ops, op)
    t = time.perf_counter(); reference(*xs); numpy_first = time.perf_counter() - t
    start = time.perf_counter(); ours(*xs); first = time.perf_counter() - start
    t = time.perf_counter(); ours(*xs); second = time.perf_counter() - t
    compiled.wait_for_kernels()
    ready = time.perf_counter() - start
    t = time.perf_counter(); ours(*xs); steady = time.perf_counter() - t
    print(json.dumps({"numpy_first_s": numpy_first, "first_s": first, "second_s": second,
                      "ready_after_s": ready, "steady_s": steady,
                      "threads": parallel.threads(), "numba_loaded": "numba" in sys.modules}))
    """
)
FIRST_OPS = {
    "add": [[4096, 4096], [4096]],
    "pow": [[4096, 4096], [4096]],
    "where": [[4096, 4096], [4096, 1], [4096]],
}


def _fresh_process(op: str, cache: Path, mode: str) -> dict[str, Any]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    env.pop("BCAST_COMPILED", None)
    if mode == "wait":
        env["BCAST_COMPILED"] = "wait"
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALL, op, json.dumps(FIRST_OPS[op])],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or ["exit " + str(done.returncode)]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run_first_call(ops: Sequence[str], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for op in ops:
        for mode in ("background", "wait"):
            runs: dict[str, list[dict[str, Any]]] = {"empty": [], "filled": []}
            for _ in range(repeats):
                with tempfile.TemporaryDirectory(prefix="bcast-numba-") as folder:
                    runs["empty"].append(_fresh_process(op, Path(folder), mode))
                    runs["filled"].append(_fresh_process(op, Path(folder), mode))
            for cache, found in runs.items():
                row = {"op": op, "shapes": FIRST_OPS[op], "mode": mode, "cache": cache}
                good = [r for r in found if "error" not in r]
                if not good:
                    row["error"] = found[0].get("error")
                for key in ("numpy_first_s", "first_s", "second_s", "ready_after_s", "steady_s"):
                    if good:
                        row[key] = h.median([r[key] for r in good])
                if good:
                    row["ratio_to_numpy"] = row["first_s"] / row["numpy_first_s"]
                    row["threads"] = good[0]["threads"]
                    row["runs"] = len(good)
                rows.append(row)
                _print_first(row)
    return rows


def _print_first(row: dict[str, Any]) -> None:
    if "error" in row:
        print(f"  first call {row['op']} {row['mode']} {row['cache']}: {row['error']}",
              file=sys.stderr)  # fmt: skip
        return
    print(
        f"  first call {row['op']:5s} {row['mode']:10s} cache {row['cache']:6s} "
        f"{row['first_s'] * 1e3:8.1f} ms (NumPy {row['numpy_first_s'] * 1e3:6.1f} ms, "
        f"x{row['ratio_to_numpy']:.2f}); second {row['second_s'] * 1e3:7.1f} ms; "
        f"compiled ready after {row['ready_after_s']:.2f} s",
        file=sys.stderr,
        flush=True,
    )


QUICK = b.Settings(samples=3, min_sample_s=0.01, max_wait_s=5.0, quiet_cores=0.5)
FULL = b.Settings(samples=9, min_sample_s=0.1, max_wait_s=60.0, quiet_cores=0.25)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three sizes, few short samples")
    ap.add_argument("--only", choices=["sweep", "first"], help="run one part only")
    ap.add_argument("--json", type=Path, help="write the results here (default: stdout)")
    ap.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help=f"comma-separated shape families of the sweep (default: {','.join(FAMILIES)})",
    )
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        ap.error(f"unknown families {unknown}; choose from {sorted(FAMILIES)}")
    settings = QUICK if args.quick else FULL
    started = time.monotonic()
    load = h.wait_for_quiet(threshold_cores=settings.quiet_cores, max_wait_s=settings.max_wait_s)
    meter = h.LoadMeter()
    meter.start()
    sweep, first = [], []
    if args.only != "first":
        sweep = run_sweep(QUICK_SIZES if args.quick else SIZES, settings, families)
    if args.only != "sweep":
        first = run_first_call(["add"] if args.quick else list(FIRST_OPS), 1 if args.quick else 3)
    load["background_cores_during"] = meter.stop()
    load["seconds"] = round(time.monotonic() - started, 1)
    data = {
        "schema": SCHEMA,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "threads": b.THREADS,
        "bcast_threads": b.bcast_threads(),
        "settings": settings.__dict__,
        "machine": h.machine_info(b.library_versions()),
        "load": load,
        "families": FAMILIES,
        "sweep": sweep,
        "first_call": first,
    }
    text = json.dumps(data, indent=1) + "\n"
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
