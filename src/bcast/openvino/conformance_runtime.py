"""OpenVINO (CPU plugin, ONNX frontend) as a runtime of ``bcast conformance``.

Three configurations: the defaults with the model read from memory; one inference thread
(``INFERENCE_NUM_THREADS=1``), since OpenVINO's kernels split work by thread count; and the
model read from a file, since the frontend reads constants differently from a file. Each
runs with ``INFERENCE_PRECISION_HINT=f32`` (no silent bf16 on CPUs that have it).
The class follows the runtime protocol of `bcast.onnx.conformance.runtimes` (duck-typed:
this layer cannot import that one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

__all__ = ["OpenVINORuntime"]


class OpenVINORuntime:
    """Run one-node ONNX models in OpenVINO's CPU plugin."""

    name: ClassVar[str] = "openvino"

    def __init__(self) -> None:
        import openvino

        self._ov = openvino
        self._core = openvino.Core()

    def version(self) -> str:
        """Return OpenVINO's version."""
        return str(self._ov.get_version())

    def configurations(self) -> list[dict[str, str]]:
        """Return the configurations the kit runs."""
        # Its Python API hands bfloat16 back as float16 and 4-bit types packed: narrow
        # types cross it through lossless Cast nodes (bcast.onnx.conformance.narrow).
        base = {
            "device": "CPU",
            "INFERENCE_PRECISION_HINT": "f32",
            "narrow_types": "through lossless Cast nodes",
        }
        return [
            {**base, "load": "memory"},
            {**base, "load": "memory", "INFERENCE_NUM_THREADS": "1"},
            {**base, "load": "file"},
        ]

    def run(
        self,
        model: bytes,
        inputs: Mapping[str, npt.NDArray[Any]],
        *,
        config: Mapping[str, str],
        path: str,
    ) -> list[npt.NDArray[Any]]:
        """Read, compile and run ``model``; return its outputs."""
        if config.get("load") == "file":
            read = self._core.read_model(path)
        else:
            read = self._core.read_model(model, b"")
        properties = {
            k: v for k, v in config.items() if k.isupper()
        }  # OpenVINO's own property names
        compiled = self._core.compile_model(read, config.get("device", "CPU"), properties)
        feeds = {}
        for port in compiled.inputs:
            for name in port.get_names():
                if name in inputs:
                    feeds[port.get_any_name()] = np.asarray(
                        inputs[name], order="C"
                    )  # 0-d stays 0-d
        result = compiled.create_infer_request().infer(feeds)
        return [np.asarray(result[out]).copy() for out in compiled.outputs]
