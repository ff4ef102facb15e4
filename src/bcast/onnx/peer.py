"""ONNX's shape inference and onnxruntime, run in the worker process of `bcast.models.isolation`.

Models travel as bytes: the worker parses them, runs the peer and sends bytes back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import onnx

if TYPE_CHECKING:
    import numpy.typing as npt

from bcast.models.isolation import in_worker, run_isolated

__all__ = [
    "infer_isolated",
    "infer_serialized",
    "run_onnxruntime",
    "run_onnxruntime_serialized",
    "run_openvino",
]


def infer_serialized(data: bytes, data_prop: bool) -> bytes:
    """Run ``onnx.shape_inference.infer_shapes`` on a serialized model; return it serialized."""
    model = onnx.ModelProto()
    model.ParseFromString(data)
    return bytes(_infer(model, data_prop).SerializeToString())


def _infer(model: onnx.ModelProto, data_prop: bool) -> onnx.ModelProto:
    """``onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=...)``.

    Its C++ function, called as that function calls it: the model's worker reads models
    with onnx's protobuf classes and C++ inference only (`bcast._spawn.lean_onnx`), and
    ``onnx.shape_inference`` would load the rest of onnx to parse the answer.
    """
    from onnx.onnx_cpp2py_export import shape_inference

    inferred = shape_inference.infer_shapes(model.SerializeToString(), False, False, data_prop)
    found = onnx.ModelProto()
    found.ParseFromString(inferred)
    return found


def infer_isolated(model: onnx.ModelProto, *, data_prop: bool = True) -> onnx.ModelProto:
    """Run ONNX's shape inference on ``model`` in the worker process; return the result.

    Raises
    ------
    bcast.models.isolation.IsolationError
        If the inference crashed, ran out of memory or of time.
    Exception
        What the inference raised.
    """
    if in_worker():  # reading the model whole in the worker: no copy through bytes
        return run_isolated("ONNX shape inference", "on the model", _infer, model, data_prop)
    data = run_isolated(
        "ONNX shape inference",
        "on the model",
        infer_serialized,
        model.SerializeToString(),
        data_prop,
    )
    inferred = onnx.ModelProto()
    inferred.ParseFromString(data)
    return inferred


def run_onnxruntime_serialized(data: bytes, feeds: Mapping[str, Any]) -> npt.NDArray[Any]:
    """Run a serialized model in onnxruntime (CPU, one thread); return output 0."""
    import numpy as np
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)  # its own error log would duplicate ours
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, dict(feeds))[0])


def run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, Any]) -> npt.NDArray[Any]:
    """Run a one-node model in onnxruntime, in the worker process; return output 0."""
    data = model.SerializeToString()
    return run_isolated("onnxruntime", "running a node", run_onnxruntime_serialized, data, feeds)


def run_openvino(model: onnx.ModelProto, feeds: dict[str, Any]) -> npt.NDArray[Any]:
    """Run a one-node ONNX model in OpenVINO, in the worker process; return output 0."""
    from bcast.openvino.runtime import run_onnx_serialized

    data = model.SerializeToString()
    return run_isolated("OpenVINO", "running a node", run_onnx_serialized, data, feeds)
