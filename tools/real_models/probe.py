"""Run a model at sizes of its dims; print one JSON list: does the runtime run there?

    python probe.py MODEL INPUTS_JSON DEFAULTS_JSON POINTS_JSON

INPUTS_JSON is the manifest's ``inputs`` (each input's dims: ints, or names of dynamic
dims), DEFAULTS_JSON the sizes of the named dims, POINTS_JSON a list of bindings that
override some of them.  ONNX files run in onnxruntime (CPU), OpenVINO IR in OpenVINO (CPU,
a fresh ``compile_model`` for every point: OpenVINO 2026.4 CPU keeps failing once a
compiled model has failed, see docs/real-models.md).  Each point gives ``{"point",
"runs", "message"}``; meant to run in a child process with a timeout.
"""

from __future__ import annotations

import json
import sys
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])

from peers import _short, random_inputs


def concrete(inputs: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any]:
    """The inputs' specs with every named dim replaced by its size."""
    return {
        name: {**spec, "shape": [sizes[d] if isinstance(d, str) else d for d in spec["shape"]]}
        for name, spec in inputs.items()
    }


_SESSIONS: dict[str, Any] = {}


def _session(path: str) -> Any:
    """One onnxruntime session a file (it runs any input sizes; a failed run leaves it usable)."""
    import onnxruntime as ort

    if path not in _SESSIONS:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        _SESSIONS[path] = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return _SESSIONS[path]


def run_point(path: str, specs: dict[str, Any]) -> str | None:
    """Run once; None when it runs, else the runtime's message."""
    feeds = random_inputs(specs)
    try:
        if path.endswith(".onnx"):
            _session(path).run(None, feeds)
        else:
            import openvino as ov

            core = ov.Core()
            compiled = core.compile_model(core.read_model(path), "CPU")
            by_port = {}
            for port in compiled.inputs:
                by_port[port] = feeds[next(n for n in port.get_names() if n in feeds)]
            compiled.create_infer_request().infer(by_port)
    except Exception as exc:
        return _short(exc)
    return None


def main(argv: list[str]) -> int:
    """Entry point."""
    path, inputs, defaults, points = argv[0], *(json.loads(a) for a in argv[1:])
    out = []
    for point in points:
        message = run_point(path, concrete(inputs, {**defaults, **point}))
        out.append({"point": point, "runs": message is None, "message": message})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
