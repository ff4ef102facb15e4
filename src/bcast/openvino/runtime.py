"""Run an ONNX model file in OpenVINO (its ONNX frontend, CPU) for ``bcast verify``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["run_onnx_file"]


def run_onnx_file(path: str, feeds: Mapping[str, Any]) -> npt.NDArray[Any]:
    """Read ``path`` with ``ov.Core().read_model``, compile it on CPU, return output 0.

    Parameters
    ----------
    path : str
        An ONNX model file (OpenVINO converts it with its ONNX frontend).
    feeds : mapping of str to array
        The model's inputs by name.

    Returns
    -------
    numpy.ndarray
        The first output.
    """
    import openvino as ov

    core = ov.Core()
    # f32 on purpose: on CPUs with bf16 units OpenVINO would otherwise compute in bf16.
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    by_name = {}
    for port in compiled.inputs:
        for name in port.get_names():
            if name in feeds:
                by_name[port.get_any_name()] = np.ascontiguousarray(feeds[name])
    result = request.infer(by_name)
    return np.asarray(result[compiled.outputs[0]])
