"""``bcast check`` on a large model: a 30,000-node transformer-like ONNX graph.

The model is built here (no file is committed): ``--layers`` blocks of MatMul + bias Add,
a decomposed LayerNorm (ReduceMean, Sub, Mul, Sqrt, Div, Mul by a scale, Add a bias) and a
residual Add, over inputs of symbolic ``[batch,seq,64]``. It times, in one run, the whole
``bcast.check`` (read, ONNX shape inference, bcast's own propagation and checks) against
ONNX's shape inference alone and onnxruntime's session creation, the peers a user would
otherwise run on the file.

Target (issue 14): under 2 s for 30,000 nodes on the reference machine.

    python benchmarks/bench_check.py [--layers 2500] [--repeat 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NODES_PER_LAYER = 12


def build(layers: int, width: int = 64) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def const(name: str, shape: tuple[int, ...]) -> str:
        inits.append(numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name))
        return name

    x = "x"
    weight = const("w", (width, width))
    for i in range(layers):
        p = f"l{i}_"
        nodes += [
            helper.make_node("MatMul", [x, weight], [p + "mm"]),
            helper.make_node("Add", [p + "mm", const(p + "b", (width,))], [p + "h"]),
            helper.make_node("ReduceMean", [p + "h"], [p + "mean"], axes=[-1]),
            helper.make_node("Sub", [p + "h", p + "mean"], [p + "c"]),
            helper.make_node("Mul", [p + "c", p + "c"], [p + "sq"]),
            helper.make_node("ReduceMean", [p + "sq"], [p + "var"], axes=[-1]),
            helper.make_node("Sqrt", [p + "var"], [p + "std"]),
            helper.make_node("Div", [p + "c", p + "std"], [p + "n"]),
            helper.make_node("Mul", [p + "n", const(p + "g", (width,))], [p + "s"]),
            helper.make_node("Add", [p + "s", const(p + "beta", (width,))], [p + "o"]),
            helper.make_node("Relu", [p + "o"], [p + "r"]),
            helper.make_node("Add", [p + "r", x], [p + "out"]),  # the residual
        ]
        x = p + "out"
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the rows here (run_all.py reads it)")
    args = parser.parse_args(argv)
    import bcast

    model = build(args.layers)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.onnx"
        onnx.save(model, path)
        report = bcast.check(path)  # once, and checked: the model is clean
        assert report.ok and report.unchecked == (), report.findings[:3]
        rows = [
            ("bcast.check (read + infer + check)", timed(lambda: bcast.check(path), args.repeat))
        ]
        rows.append(
            (
                "onnx.shape_inference.infer_shapes",
                timed(lambda: onnx.shape_inference.infer_shapes(onnx.load(path)), args.repeat),
            )
        )
        try:
            import onnxruntime as ort

            rows.append(
                (
                    "onnxruntime.InferenceSession",
                    timed(
                        lambda: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]),
                        args.repeat,
                    ),
                )
            )
        except ImportError:
            pass
    nodes = len(model.graph.node)
    print(f"{nodes} nodes, {args.repeat} runs each (median):")
    for name, seconds in rows:
        print(f"  {name:<40} {seconds:7.3f} s   ({seconds / rows[0][1]:.2f}x bcast.check)")
    if args.json:
        result = {
            "nodes": nodes,
            "repeat": args.repeat,
            "rows": [{"name": name, "seconds": round(seconds, 4)} for name, seconds in rows],
        }
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
