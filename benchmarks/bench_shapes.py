"""Time `bcast.broadcast_shapes` against NumPy, ONNX and OpenVINO shape inference.

Cases (per-call time of answering "what shape do these broadcast to?"):

- ``static``: ``(8,1,6,1)`` with ``(1,7,1,5)``, two rank-4 shapes as tuples of ints. Peers:
  bcast (its plan cache answers repeated tuple calls), ``numpy.broadcast_shapes``, ONNX
  ``onnx.shape_inference.infer_shapes(model, strict_mode=True)`` on a prebuilt one-node ``Add``
  model, and OpenVINO shape inference: two ``Parameter`` nodes and an ``Add`` built per call,
  then ``get_output_partial_shape(0)`` (OpenVINO infers shapes at node construction).
- ``static_cold``: the same shapes as lists (bcast's uncached path: the rule runs every call),
  and bcast on a fresh pair of distinct tuples every call (a pool larger than the cache).
- ``partial``: bcast alone on partial shapes, pre-parsed ``Shape`` objects and text.

Method: every peer first runs once and its answer is checked; then the peers of a case are
timed interleaved, each round visiting every peer once in a freshly shuffled order. A sample
is ``timeit`` over ``number`` calls (``number`` calibrated so that a sample lasts at least
``min_sample_s``); the figure is the median over the samples, in µs per call, and the ratio is
to NumPy's median in the same case (``static`` for the cold and partial cases).

Usage: ``python benchmarks/bench_shapes.py [--quick] [--json PATH]``; prints a Markdown table
and writes JSON (default ``benchmarks/results/shapes.json``).
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import platform
import random
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import bcast

SCHEMA = "bcast-bench-shapes/1"
HERE = Path(__file__).resolve().parent
A, B = (8, 1, 6, 1), (1, 7, 1, 5)
EXPECTED = (8, 7, 6, 5)


@dataclass
class Peer:
    name: str
    fn: Callable[[], Any] | None
    check: Callable[[Any], bool]
    skip: str | None = None


@dataclass
class Record:
    case: str
    peer: str
    status: str = "ok"  # ok | skipped | wrong
    note: str = ""
    number: int = 0
    us_per_call: float | None = None
    min_us: float | None = None
    ratio_to_numpy: float | None = None
    samples_us: list[float] = field(default_factory=list)


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _is_expected(result: Any) -> bool:
    return tuple(result) == EXPECTED


# -- peers -------------------------------------------------------------------------------


def onnx_peer() -> Peer:
    onnx = _optional("onnx")
    if onnx is None:
        return Peer("ONNX infer_shapes", None, _is_expected, skip="onnx is not installed")
    helper, tp = onnx.helper, onnx.TensorProto
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])],
        "add",
        [
            helper.make_tensor_value_info("a", tp.FLOAT, A),
            helper.make_tensor_value_info("b", tp.FLOAT, B),
        ],
        [helper.make_tensor_value_info("y", tp.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])

    def infer() -> Any:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True)

    def check(inferred: Any) -> bool:
        dims = inferred.graph.output[0].type.tensor_type.shape.dim
        return tuple(d.dim_value for d in dims) == EXPECTED

    return Peer("ONNX infer_shapes", infer, check)


def openvino_peer() -> Peer:
    ov = _optional("openvino")
    if ov is None:
        return Peer("OpenVINO Add", None, _is_expected, skip="openvino is not installed")
    ops = ov.opset13
    shape_a, shape_b = ov.PartialShape(list(A)), ov.PartialShape(list(B))

    def infer() -> Any:
        node = ops.add(ops.parameter(shape_a), ops.parameter(shape_b))
        return node.get_output_partial_shape(0)

    def check(partial: Any) -> bool:
        return tuple(partial.to_shape()) == EXPECTED

    return Peer("OpenVINO Add", infer, check)


def cases() -> dict[str, list[Peer]]:
    list_a, list_b = list(A), list(B)
    rng = random.Random(0)
    # Distinct pairs, more than the plan cache holds, each broadcasting to a known shape.
    pool = []
    for _ in range(20000):
        out = tuple(rng.randint(2, 9) for _ in range(4))
        a = tuple(d if rng.random() < 0.5 else 1 for d in out)
        b = tuple(d if rng.random() < 0.5 else 1 for d in out)
        pool.append((a, b, np.broadcast_shapes(a, b)))
    cycle = itertools.cycle(pool)

    def cold_distinct() -> tuple[Any, Any]:
        a, b, expected = next(cycle)
        return bcast.broadcast_shapes(a, b), expected

    partial_a = bcast.Shape.parse("[N,1,6..8,?]")
    partial_b = bcast.Shape.parse("[7,1..,5]")
    expected_partial = "[N,7,6..8,5]"
    return {
        "static": [
            Peer("bcast", lambda: bcast.broadcast_shapes(A, B), _is_expected),
            Peer("numpy", lambda: np.broadcast_shapes(A, B), _is_expected),
            onnx_peer(),
            openvino_peer(),
        ],
        "static_cold": [
            Peer("bcast (lists)", lambda: bcast.broadcast_shapes(list_a, list_b), _is_expected),
            Peer("bcast (distinct tuples)", cold_distinct, lambda r: tuple(r[0]) == r[1]),
            Peer("numpy (lists)", lambda: np.broadcast_shapes(list_a, list_b), _is_expected),
        ],
        "partial": [
            Peer(
                "bcast (Shape)",
                lambda: bcast.broadcast_shapes(partial_a, partial_b),
                lambda r: str(r) == expected_partial,
            ),
            Peer(
                "bcast (text)",
                lambda: bcast.broadcast_shapes("[N,1,6..8,?]", "[7,1..,5]"),
                lambda r: str(r) == expected_partial,
            ),
        ],
    }


# -- timing ------------------------------------------------------------------------------


def calibrate(fn: Callable[[], Any], min_sample_s: float) -> int:
    number = 1
    while True:
        elapsed = timeit.timeit(fn, number=number)
        if elapsed >= min_sample_s:
            return number
        number *= 2 if elapsed > min_sample_s / 10 else 10


def run_case(name: str, peers: list[Peer], samples: int, min_sample_s: float) -> list[Record]:
    records: dict[str, Record] = {}
    timers: dict[str, timeit.Timer] = {}
    for peer in peers:
        record = records[peer.name] = Record(name, peer.name)
        if peer.fn is None:
            record.status, record.note = "skipped", peer.skip or ""
            continue
        if not peer.check(peer.fn()):
            record.status, record.note = "wrong", "answer differs from the expected shape"
            continue
        record.number = calibrate(peer.fn, min_sample_s)
        timers[peer.name] = timeit.Timer(peer.fn)
    order = list(timers)
    rng = random.Random(1)
    for _ in range(samples):
        rng.shuffle(order)
        for peer_name in order:
            record = records[peer_name]
            elapsed = timers[peer_name].timeit(number=record.number)
            record.samples_us.append(elapsed / record.number * 1e6)
    for record in records.values():
        if record.samples_us:
            record.us_per_call = statistics.median(record.samples_us)
            record.min_us = min(record.samples_us)
    return list(records.values())


def add_ratios(records: list[Record]) -> None:
    numpy_us: dict[str, float] = {}
    for r in records:
        if r.peer.startswith("numpy") and r.us_per_call is not None:
            numpy_us[r.case] = r.us_per_call
    for r in records:
        base = numpy_us.get(r.case, numpy_us.get("static"))
        if r.us_per_call is not None and base:
            r.ratio_to_numpy = r.us_per_call / base


def markdown(records: list[Record]) -> str:
    lines = [
        "| case | peer | µs per call (median) | min µs | ratio to numpy |",
        "|---|---|---:|---:|---:|",
    ]
    for r in records:
        if r.us_per_call is None:
            lines.append(f"| {r.case} | {r.peer} | {r.status}: {r.note} | | |")
            continue
        ratio = f"{r.ratio_to_numpy:.2f}" if r.ratio_to_numpy is not None else ""
        lines.append(f"| {r.case} | {r.peer} | {r.us_per_call:.2f} | {r.min_us:.2f} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    ap.add_argument(
        "--json", type=Path, default=HERE / "results" / "shapes.json", help="where to write JSON"
    )
    args = ap.parse_args(argv)
    samples, min_sample_s = (5, 0.005) if args.quick else (25, 0.05)
    records: list[Record] = []
    start = time.perf_counter()
    for name, peers in cases().items():
        records += run_case(name, peers, samples, min_sample_s)
    add_ratios(records)
    table = markdown(records)
    print(table)
    versions = {
        name: getattr(_optional(name), "__version__", None)
        for name in ("numpy", "onnx", "openvino")
    }
    versions["bcast"] = bcast.__version__
    data = {
        "schema": SCHEMA,
        "quick": args.quick,
        "samples": samples,
        "min_sample_s": min_sample_s,
        "elapsed_s": round(time.perf_counter() - start, 2),
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "processor": platform.processor(),
        },
        "versions": versions,
        "records": [asdict(r) for r in records],
        "markdown": table,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
