"""Run one peer on one model file; print one JSON object.  Meant to run in a child process.

    python peers.py PEER MODEL RUN_INPUTS_JSON

PEER is one of ``onnx_checker``, ``onnx_shape_inference``, ``onnxruntime``, ``openvino``.
Each stage gives a verdict: ``pass``, ``fail`` (the peer rejected the model, with its
message's first line) or ``n/a`` (the peer does not read this format).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

PEERS = ("onnx_checker", "onnx_shape_inference", "onnxruntime", "openvino")

# stage names, in the order the manifest and the docs table show them
STAGES = {
    "onnx_checker": ["onnx.checker"],
    "onnx_shape_inference": ["onnx.shape_inference"],
    "onnxruntime": ["ort.session", "ort.run"],
    "openvino": ["ov.read_model", "ov.compile_model", "ov.infer"],
}


_BOILERPLATE = (
    "Exception from src/",
    "Check 'false' failed",
    "FrontEnd API failed",
    "Model wasn't fully converted",
    "Summary:",
    "Stack trace",
    "File ",
)


_ROOT = Path(__file__).resolve().parents[2]


def _short(exc: BaseException) -> str:
    """The lines of a peer's error that say what failed (OpenVINO's are long), cut to 700."""
    text = f"{type(exc).__name__}: {exc}".strip()
    # Paths in a peer's message are written relative to the repository (no machine paths).
    text = text.replace(str(_ROOT) + os.sep, "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keep = [ln for ln in lines[1:] if not ln.startswith(_BOILERPLATE)]
    msg = " | ".join([lines[0], *keep][:8]) if lines else type(exc).__name__
    return msg[:700]


def random_inputs(run_inputs: dict[str, dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """Concrete random inputs: floats ~ N(0, 1); ints in [0, high)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for name, spec in run_inputs.items():
        shape = tuple(spec["shape"])
        if spec["dtype"].startswith("int"):
            out[name] = rng.integers(0, spec["high"], size=shape).astype(spec["dtype"])
        else:
            out[name] = rng.standard_normal(shape).astype(spec["dtype"])
    return out


def onnx_checker(path: str, _: Any) -> dict[str, Any]:
    import onnx

    if not path.endswith(".onnx"):
        return {"onnx.checker": {"verdict": "n/a"}}
    try:
        onnx.checker.check_model(onnx.load(path), full_check=True)
    except Exception as exc:
        return {"onnx.checker": {"verdict": "fail", "message": _short(exc)}}
    return {"onnx.checker": {"verdict": "pass"}}


def onnx_shape_inference(path: str, _: Any) -> dict[str, Any]:
    import onnx

    if not path.endswith(".onnx"):
        return {"onnx.shape_inference": {"verdict": "n/a"}}
    try:
        onnx.shape_inference.infer_shapes(onnx.load(path), strict_mode=True)
    except Exception as exc:
        return {"onnx.shape_inference": {"verdict": "fail", "message": _short(exc)}}
    return {"onnx.shape_inference": {"verdict": "pass"}}


def onnxruntime(path: str, run_inputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    import onnxruntime as ort

    if not path.endswith(".onnx"):
        return {"ort.session": {"verdict": "n/a"}, "ort.run": {"verdict": "n/a"}}
    res: dict[str, Any] = {}
    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as exc:
        res["ort.session"] = {"verdict": "fail", "message": _short(exc)}
        res["ort.run"] = {"verdict": "not run"}
        return res
    res["ort.session"] = {"verdict": "pass"}
    try:
        sess.run(None, random_inputs(run_inputs))
    except Exception as exc:
        res["ort.run"] = {"verdict": "fail", "message": _short(exc)}
    else:
        res["ort.run"] = {"verdict": "pass"}
    return res


def openvino(path: str, run_inputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    import openvino as ov

    core = ov.Core()
    res: dict[str, Any] = {}
    stages = STAGES["openvino"]
    try:
        model = core.read_model(path)
        res[stages[0]] = {"verdict": "pass"}
        compiled = core.compile_model(model, "CPU")
        res[stages[1]] = {"verdict": "pass"}
        inputs = random_inputs(run_inputs)
        by_port = {}
        for port in compiled.inputs:
            name = next(n for n in port.get_names() if n in inputs)
            by_port[port] = inputs[name]
        compiled.create_infer_request().infer(by_port)
        res[stages[2]] = {"verdict": "pass"}
    except Exception as exc:
        failed = next(s for s in stages if s not in res)
        res[failed] = {"verdict": "fail", "message": _short(exc)}
        for s in stages:
            res.setdefault(s, {"verdict": "not run"})
    return res


def main(argv: list[str]) -> int:
    """Entry point: peer, model path, JSON of run inputs."""
    peer, path, run_json = argv
    fn = {
        "onnx_checker": onnx_checker,
        "onnx_shape_inference": onnx_shape_inference,
        "onnxruntime": onnxruntime,
        "openvino": openvino,
    }[peer]
    print(json.dumps(fn(path, json.loads(run_json))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
