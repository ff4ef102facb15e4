"""Measurement harness shared by the benchmark scripts.

Everything here is deliberately small and free of timing assumptions so that the logic that can
be checked without a clock (medians, ratios, bandwidth fractions, the correctness gate) is
unit-tested in ``tests/unit/test_bench_harness.py``.

Method, in one paragraph: every *case* builds its peers (one callable per library and variant),
runs each once and compares the result with NumPy's (shape, dtype, values) before any timing; a
peer that disagrees is reported as ``wrong`` and never timed. The remaining peers are timed
*interleaved*: each round visits every peer once, in a freshly shuffled order, together with a
2-thread STREAM bandwidth probe, so slow drifts of the machine (other jobs, memory bandwidth that
changes minute to minute) hit all peers alike. A sample is the mean of ``number`` back-to-back
calls, ``number`` calibrated so one sample lasts at least ``min_sample_s``; the reported figure
is the median over samples. Before each case the harness waits (up to a bound) for the machine to
go quiet and records the background load before and during the case.
"""

from __future__ import annotations

import itertools
import math
import os
import platform
import random
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

SCHEMA = "bcast-bench-ops/1"

# --------------------------------------------------------------------------------------------
# Records


@dataclass
class Peer:
    """One contender in a case: a library (``family``) and a variant of calling it."""

    name: str
    family: str
    fn: Callable[[], Any] | None
    to_numpy: Callable[[Any], np.ndarray] = np.asarray
    note: str = ""
    skip: str | None = None


@dataclass
class PeerResult:
    name: str
    family: str
    status: str = "ok"  # ok | skipped | wrong | error
    note: str = ""
    number: int = 0
    samples_s: list[float] = field(default_factory=list)
    median_s: float | None = None
    min_s: float | None = None
    ratio_to_fastest: float | None = None
    gbps: float | None = None
    fraction_of_stream: float | None = None


@dataclass
class CaseResult:
    name: str
    title: str
    op: str
    input_shapes: list[list[int]]
    output_shape: list[int]
    dtype: str
    bytes_moved: int
    bandwidth_bound: bool
    peers: list[PeerResult] = field(default_factory=list)
    stream: dict[str, Any] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------------
# Pure computations (unit-tested)


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence (the mean of the two middle values for even lengths)."""
    if not values:
        raise ValueError("median of no samples")
    return float(statistics.median(values))


def bytes_moved(inputs: Sequence[np.ndarray], output_shape: Sequence[int], itemsize: int) -> int:
    """Bytes an ideal kernel must move: every input read once (a broadcast operand counts once,
    at its own size, not at the broadcast size) plus the output written once."""
    out = math.prod(output_shape) * itemsize
    return int(sum(int(np.asarray(a).nbytes) for a in inputs) + out)


def summarize(case: CaseResult, stream_gbps: float | None) -> CaseResult:
    """Fill medians, the ratio to the fastest peer, effective bandwidth and its STREAM fraction.

    Only peers with status ``ok`` and samples take part; the fastest is the smallest median.
    """
    timed = [p for p in case.peers if p.status == "ok" and p.samples_s]
    for p in timed:
        p.median_s = median(p.samples_s)
        p.min_s = float(min(p.samples_s))
    if not timed:
        return case
    fastest = min(p.median_s for p in timed if p.median_s is not None)
    for p in timed:
        assert p.median_s is not None
        p.ratio_to_fastest = p.median_s / fastest if fastest > 0 else None
        if case.bandwidth_bound and p.median_s > 0:
            p.gbps = case.bytes_moved / p.median_s / 1e9
            if stream_gbps:
                p.fraction_of_stream = p.gbps / stream_gbps
    return case


def check_result(got: Any, expected: np.ndarray, *, rtol: float, atol: float) -> tuple[bool, str]:
    """Compare a peer's result with NumPy's: same shape, same dtype, values within tolerance."""
    try:
        arr = np.asarray(got)
    except Exception as exc:  # a peer returning something that is not an array at all
        return False, f"result is not an array: {exc!r}"
    if arr.shape != expected.shape:
        return False, f"shape {arr.shape} != expected {expected.shape}"
    if arr.dtype != expected.dtype:
        return False, f"dtype {arr.dtype} != expected {expected.dtype}"
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        bad = int(np.count_nonzero(arr != expected))
    else:
        close = np.isclose(arr, expected, rtol=rtol, atol=atol, equal_nan=True)
        bad = int(close.size - np.count_nonzero(close))
    if bad:
        return False, f"{bad} of {expected.size} elements differ from NumPy"
    return True, ""


def check_peers(
    peers: Sequence[Peer], expected: np.ndarray, *, rtol: float = 1e-6, atol: float = 0.0
) -> list[PeerResult]:
    """Run every peer once and gate it on agreement with ``expected`` (NumPy's result).

    Skipped peers are recorded as such; a peer that raises is ``error``, one that disagrees is
    ``wrong``; both keep the reason in ``note`` and are never timed.
    """
    results = []
    for peer in peers:
        res = PeerResult(name=peer.name, family=peer.family, note=peer.note)
        if peer.skip is not None or peer.fn is None:
            res.status = "skipped"
            res.note = peer.skip or "not available"
        else:
            try:
                got = peer.to_numpy(peer.fn())
            except Exception as exc:
                res.status = "error"
                res.note = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            else:
                ok, why = check_result(got, expected, rtol=rtol, atol=atol)
                if not ok:
                    res.status = "wrong"
                    res.note = why
                del got
        results.append(res)
    return results


# --------------------------------------------------------------------------------------------
# Timing


def calibrate(fn: Callable[[], Any], min_sample_s: float, max_number: int = 1_000_000) -> int:
    """Calls per sample so that one sample lasts at least ``min_sample_s``."""
    fn()  # warm-up (allocator, lazy initialisation, caches)
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_sample_s or number >= max_number:
            return number
        if dt <= 0:
            number *= 10
        else:
            number = min(max_number, max(number * 2, math.ceil(number * min_sample_s / dt * 1.2)))


def time_once(fn: Callable[[], Any], number: int) -> float:
    """Mean seconds per call over ``number`` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def time_interleaved(
    fns: dict[str, Callable[[], Any]],
    *,
    samples: int,
    min_sample_s: float,
    seed: int = 0,
    probe: Callable[[], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Time every callable ``samples`` times, visiting all of them once per round in a shuffled
    order. ``probe`` (the bandwidth probe) takes part in every round at a random position."""
    numbers = {name: calibrate(fn, min_sample_s) for name, fn in fns.items()}
    out: dict[str, list[float]] = {name: [] for name in fns}
    rng = random.Random(seed)
    order: list[str | None] = [*fns, None]
    for _ in range(samples):
        rng.shuffle(order)
        for name in order:
            if name is None:
                if probe is not None:
                    probe()
                continue
            out[name].append(time_once(fns[name], numbers[name]))
    return out, numbers


# --------------------------------------------------------------------------------------------
# STREAM-like bandwidth probe


class StreamProbe:
    """2-thread memory bandwidth probe: STREAM *Copy* (``b = a``) and *Add* (``c = a + b``) on
    float32 buffers far larger than the last-level cache, each half done by one thread of a
    2-thread pool (NumPy releases the GIL in both). Bytes counted as STREAM counts them: Copy
    moves 2 words per element, Add 3 (write-allocate traffic is not counted, as in STREAM).

    Every call to the object takes one Copy and one Add sample; ``summary()`` reports medians
    and the reference bandwidth, the better of the two medians.
    """

    def __init__(self, n_bytes: int = 256 * 2**20, threads: int = 2) -> None:
        n = n_bytes // 4
        self.n = n
        self.threads = threads
        self.a = np.ones(n, np.float32)
        self.b = np.full(n, 2.0, np.float32)
        self.c = np.empty(n, np.float32)
        self.pool = ThreadPoolExecutor(threads)
        bounds = np.linspace(0, n, threads + 1).astype(int)
        self.parts = [slice(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds)]
        self.copy_gbps: list[float] = []
        self.add_gbps: list[float] = []

    def _copy(self, s: slice) -> None:
        np.copyto(self.c[s], self.a[s])

    def _add(self, s: slice) -> None:
        np.add(self.a[s], self.b[s], out=self.c[s])

    def _run(self, kernel: Callable[[slice], None]) -> float:
        t0 = time.perf_counter()
        list(self.pool.map(kernel, self.parts))
        return time.perf_counter() - t0

    def __call__(self) -> None:
        self.copy_gbps.append(2 * 4 * self.n / self._run(self._copy) / 1e9)
        self.add_gbps.append(3 * 4 * self.n / self._run(self._add) / 1e9)

    def reset(self) -> None:
        self.copy_gbps = []
        self.add_gbps = []

    def summary(self) -> dict[str, Any]:
        if not self.copy_gbps:
            return {"gbps": None, "copy_gbps": None, "add_gbps": None, "samples": 0}
        copy = median(self.copy_gbps)
        add = median(self.add_gbps)
        return {
            "gbps": max(copy, add),
            "copy_gbps": copy,
            "add_gbps": add,
            "samples": len(self.copy_gbps),
            "threads": self.threads,
            "buffer_mib": 4 * self.n // 2**20,
        }

    def close(self) -> None:
        self.pool.shutdown()


# --------------------------------------------------------------------------------------------
# Machine load


def _read_cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs from /proc/stat; (0, 0) where it cannot be read."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()[1:]
    except OSError:
        return 0, 0
    vals = [int(v) for v in fields[:8]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    total = sum(vals)
    return total - idle, total


def _read_self_ticks() -> int:
    """utime + stime of this process (all its threads) in jiffies."""
    try:
        with open("/proc/self/stat") as fh:
            text = fh.read()
    except OSError:
        return 0
    rest = text.rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])  # fields 14 and 15 of proc(5)


def loadavg() -> float | None:
    try:
        with open("/proc/loadavg") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def ncpu() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class LoadMeter:
    """Background CPU load (in busy cores, this process excluded) between ``start`` and ``stop``."""

    def __init__(self) -> None:
        self._t0 = (0, 0, 0)

    def start(self) -> None:
        busy, total = _read_cpu_ticks()
        self._t0 = (busy, total, _read_self_ticks())

    def stop(self) -> float | None:
        busy, total = _read_cpu_ticks()
        mine = _read_self_ticks()
        d_busy, d_total, d_mine = busy - self._t0[0], total - self._t0[1], mine - self._t0[2]
        return background_cores(d_busy, d_total, d_mine, ncpu_total=os.cpu_count() or 1)


def background_cores(d_busy: int, d_total: int, d_mine: int, *, ncpu_total: int) -> float | None:
    """Busy cores not accounted for by this process, from jiffy deltas over all CPUs."""
    if d_total <= 0:
        return None
    return max(0.0, (d_busy - d_mine) / d_total * ncpu_total)


def wait_for_quiet(
    *, threshold_cores: float = 0.25, max_wait_s: float = 60.0, interval_s: float = 1.0
) -> dict[str, Any]:
    """Sample background load every ``interval_s`` until it is below ``threshold_cores`` busy
    cores or ``max_wait_s`` has passed. Returns what was seen, for the record."""
    meter = LoadMeter()
    t0 = time.monotonic()
    seen: list[float] = []
    while True:
        meter.start()
        time.sleep(interval_s)
        cores = meter.stop()
        if cores is None:  # no /proc: nothing to wait for
            return {"quiet": None, "waited_s": 0.0, "background_cores_before": None}
        seen.append(cores)
        waited = time.monotonic() - t0
        if cores < threshold_cores or waited >= max_wait_s:
            return {
                "quiet": cores < threshold_cores,
                "waited_s": round(waited, 1),
                "background_cores_before": round(cores, 2),
                "threshold_cores": threshold_cores,
                "loadavg_1m": loadavg(),
            }


# --------------------------------------------------------------------------------------------
# Machine description


def simd_features() -> list[str]:
    """The vector extensions NumPy found on this CPU (its dispatch picks kernels by them).

    They change the figures more than the CPU name says: NumPy's float32 ``power`` runs a
    vectorised (SVML) loop with AVX-512 and a scalar ``powf`` without it, about 6x slower.
    """
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # NumPy < 2 or a future layout: unknown
        return []
    wanted = ("AVX2", "FMA3", "AVX512F", "AVX512_SKX", "AVX512_ICL", "ASIMD", "SVE")
    return [name for name in wanted if features.get(name)]


def source_commit() -> str | None:
    """The git commit the benchmarked bcast comes from (``+changes`` when its tree differs).

    ``None`` outside a git checkout (an installed wheel): the version alone then names it.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "src", "benchmarks"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+changes" if changed else head or None


def machine_info(versions: dict[str, str | None]) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo") as fh:
            mem_gib = round(int(fh.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu,
        "simd": simd_features(),
        "cpus": ncpu(),
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
        "commit": source_commit(),
    }
