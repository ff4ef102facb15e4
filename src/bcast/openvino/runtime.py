"""Run models in OpenVINO (CPU, f32 inference) for ``bcast verify``.

The verifiers call these in the worker process of `bcast.models.isolation`.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = ["run_model", "run_node", "run_onnx_file", "run_onnx_serialized"]

_INTEGER: Final = re.compile(r"-?\d+")
_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
"""f32 on purpose: on CPUs with bf16 units OpenVINO would otherwise compute in bf16."""


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
    compiled = core.compile_model(core.read_model(path), "CPU", _CONFIG)
    request = compiled.create_infer_request()
    by_name = {}
    for port in compiled.inputs:
        for name in port.get_names():
            if name in feeds:
                by_name[port.get_any_name()] = _contiguous(feeds[name])
    result = request.infer(by_name)
    return np.asarray(result[compiled.outputs[0]])


def run_onnx_serialized(data: bytes, feeds: Mapping[str, Any]) -> npt.NDArray[Any]:
    """Write a serialized ONNX model to a temporary folder and run it (`run_onnx_file`)."""
    with tempfile.TemporaryDirectory(prefix="bcast-verify-") as directory:
        path = os.path.join(directory, "node.onnx")
        with open(path, "wb") as handle:
            handle.write(data)
        return run_onnx_file(path, feeds)


def run_model(model: Any, inputs: Sequence[npt.NDArray[Any]]) -> npt.NDArray[Any]:
    """Compile an ``openvino.Model`` on CPU and return output 0 for ``inputs``.

    Parameters
    ----------
    model : openvino.Model
        A model built in memory.
    inputs : sequence of array
        One array per parameter, in the model's parameter order.

    Returns
    -------
    numpy.ndarray
        The first output.
    """
    import openvino as ov

    compiled = ov.Core().compile_model(model, "CPU", _CONFIG)
    result = compiled.create_infer_request().infer([_contiguous(x) for x in inputs])
    return np.asarray(result[compiled.outputs[0]])


def run_node(
    op: str,
    version: str,
    attributes: Mapping[str, str],
    inputs: Sequence[npt.NDArray[Any]],
    constant: Sequence[bool],
) -> npt.NDArray[Any]:
    """Build a one-node model of ``op`` as an IR writes it, run it on CPU, return output 0.

    Parameters
    ----------
    op, version : str
        The layer's ``type`` and ``version`` (``opset1``...), as written in the IR.
    attributes : mapping of str to str
        The layer's ``<data>`` attributes as written; an absent one stays absent (OpenVINO
        then uses its own default, e.g. PDPD axis 0).
    inputs : sequence of array
        The node's inputs, with their concrete shapes.
    constant : sequence of bool
        Which inputs are constants of the model (a Broadcast's target and axes_mapping);
        the others are parameters fed with their values.

    Returns
    -------
    numpy.ndarray
        The node's first output, from OpenVINO's CPU plugin.
    """
    import openvino as ov
    from openvino.utils.node_factory import NodeFactory

    params = []
    ports = []
    fed = []
    for value, is_constant in zip(inputs, constant, strict=True):
        if is_constant:
            ports.append(ov.opset13.constant(value).output(0))
            continue
        param = ov.opset13.parameter(list(value.shape), value.dtype)
        params.append(param)
        ports.append(param.output(0))
        fed.append(value)
    opset = version if version.startswith("opset") else "opset13"
    typed = {key: _typed(text) for key, text in attributes.items()}
    node = NodeFactory(opset).create(op, ports, typed)
    return run_model(ov.Model([node], params, "one_node"), fed)


def _typed(text: str) -> Any:
    """Return an IR attribute's value as NodeFactory takes it: int, bool or the text."""
    if _INTEGER.fullmatch(text.strip()):
        return int(text)
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    return text


def _contiguous(x: Any) -> npt.NDArray[Any]:
    """Return ``x`` as a C-contiguous array of its own shape: a 0-d input stays 0-d.

    (``np.ascontiguousarray`` returns at least 1-d: OpenVINO then gets ``[1]`` for ``[]``.)

    >>> _contiguous(np.float32(2.0)).shape
    ()
    """
    return np.asarray(x, order="C")
