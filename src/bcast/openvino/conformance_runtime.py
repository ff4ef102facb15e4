"""OpenVINO (CPU plugin, ONNX frontend) as a runtime of ``bcast conformance``.

Three configurations: the defaults with the model read from memory; one inference thread
(``INFERENCE_NUM_THREADS=1``), since OpenVINO's kernels split work by thread count; and the
model read from a file, since the frontend reads constants differently from a file. Each
runs with ``INFERENCE_PRECISION_HINT=f32`` (no silent bf16 on CPUs that have it). Narrow
types (bfloat16, float8, 4-bit) are fed and fetched as their tensors' raw bytes
(`bcast.openvino.tensor_bits`): the Python API shows bfloat16 as float16 and packs 4-bit
types. The class follows the runtime protocol of `bcast.onnx.conformance.runtimes`
(duck-typed: this layer cannot import that one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from bcast.openvino.tensor_bits import from_raw_bytes, is_narrow, raw_bytes

__all__ = ["OpenVINORuntime"]

_NARROW: Final = {
    "bf16": "bfloat16",
    "f8e4m3": "float8_e4m3fn",
    "f8e5m2": "float8_e5m2",
    "f4e2m1": "float4_e2m1fn",
    "i4": "int4",
    "u4": "uint4",
    "i2": "int2",
    "u2": "uint2",
}
"""OpenVINO's names of the narrow element types, and their ``ml_dtypes`` names."""


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
        base = {"device": "CPU", "INFERENCE_PRECISION_HINT": "f32"}
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
        properties = {k: v for k, v in config.items() if k.isupper()}  # OpenVINO's own names
        compiled = self._core.compile_model(read, config.get("device", "CPU"), properties)
        feeds = {}
        for port in compiled.inputs:
            for name in port.get_names():
                if name in inputs:
                    feeds[port.get_any_name()] = self._tensor(port, inputs[name])
        request = compiled.create_infer_request()
        request.infer(feeds)
        return [self._array(request.get_output_tensor(i)) for i in range(len(compiled.outputs))]

    def _tensor(self, port: Any, x: npt.NDArray[Any]) -> Any:
        """Return ``x`` for ``port``: as it is (0-d stays 0-d), a narrow type as raw bytes."""
        x = np.asarray(x, order="C")
        if not is_narrow(x.dtype):
            return x
        tensor = self._ov.Tensor(port.get_element_type(), self._ov.Shape(list(x.shape)))
        raw = raw_bytes(x)
        np.asarray(tensor.data).reshape(-1).view(np.uint8)[: raw.size] = raw
        return tensor

    def _array(self, tensor: Any) -> npt.NDArray[Any]:
        """Return an output tensor as a NumPy array (a narrow type from its raw bytes)."""
        import ml_dtypes

        name = _NARROW.get(str(tensor.element_type.get_type_name()))
        data: npt.NDArray[Any] = np.array(tensor.data, copy=True)
        if name is None:
            return data
        raw = data.reshape(-1).view(np.uint8)
        shape = tuple(int(d) for d in tensor.shape)
        return from_raw_bytes(raw, np.dtype(getattr(ml_dtypes, name)), shape)
