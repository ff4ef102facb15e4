"""The ONNX adapter: the backend that runs ONNX models on `bcast.ops`, and lowering to ONNX.

``onnx`` is imported only inside this package (ruff TID251 enforces it), so ``import bcast``
stays light.

- `bcast.onnx.backend`: the module is an ``onnx.backend.base.Backend`` (CPU), so ONNX's
  backend node tests run against bcast.
- `bcast.onnx.lower`: any broadcasting `bcast.Plan` as standard ONNX nodes (Squeeze,
  Unsqueeze, Expand) that every ONNX runtime executes.

>>> import bcast.onnx
>>> bcast.onnx.backend.supports_device("CPU"), bcast.onnx.backend.supports_device("CUDA")
(True, False)
"""

from __future__ import annotations

import importlib
from types import ModuleType

from bcast.onnx.lower import MIN_OPSET, OnnxLowering, lower

__all__ = ["MIN_OPSET", "OnnxLowering", "backend", "lower"]


def __getattr__(name: str) -> ModuleType:
    """Import `bcast.onnx.backend` (the operators and the engine) when it is first asked for.

    Reading a model for ``bcast check`` needs neither, so the package does not import them.
    """
    if name == "backend":
        return importlib.import_module("bcast.onnx.backend")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
