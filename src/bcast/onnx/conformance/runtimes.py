"""The runtimes ``bcast conformance`` grades: built in, or plug-ins through an entry point.

A runtime is a class with a ``name``, ``version()``, ``configurations()`` (a list of
dicts of strings, each graded on its own; the first is the default) and
``run(model, inputs, *, config, path)``, which runs a serialized one-node ONNX model on its
graph inputs and returns the outputs as NumPy arrays; any exception means the runtime
refused the model. ``model`` is the serialized model and ``path`` a file holding the same
bytes, for runtimes that only read files. Constructing the class raises `ImportError`
when the runtime is not installed: it is then named and skipped.

Third parties register a runtime in the entry point group ``bcast.conformance_runtimes``::

    [project.entry-points."bcast.conformance_runtimes"]
    myruntime = "mypackage.conformance:MyRuntime"

Built-in names win over plug-ins of the same name. Runtimes are only ever constructed in
the worker processes of `bcast.onnx.conformance.workers`. Inputs and outputs of narrow
types are ``ml_dtypes`` arrays; `bcast.openvino.tensor_bits` turns them into the raw bytes
a runtime's tensor holds, for Python APIs that cannot take them as they are.
"""

from __future__ import annotations

import ctypes
import importlib
from collections.abc import Mapping
from importlib import metadata
from typing import Any, ClassVar, Final, Protocol

import numpy as np
import numpy.typing as npt

from bcast.openvino.tensor_bits import from_raw_bytes, is_narrow, raw_bytes

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "OnnxruntimeRuntime",
    "ReferenceRuntime",
    "Runtime",
    "TractRuntime",
    "known_runtimes",
    "load_runtime",
]

ENTRY_POINT_GROUP: Final = "bcast.conformance_runtimes"
Array = npt.NDArray[Any]


class Runtime(Protocol):
    """What a runtime of the kit provides (see the module's text)."""

    name: ClassVar[str]

    def version(self) -> str:
        """Return the runtime's version."""

    def configurations(self) -> list[dict[str, str]]:
        """Return the configurations to grade, the default first."""

    def run(
        self, model: bytes, inputs: Mapping[str, Array], *, config: Mapping[str, str], path: str
    ) -> list[Array]:
        """Run the model on its graph inputs; return its outputs (raise to refuse it)."""


class OnnxruntimeRuntime:
    """onnxruntime's CPU execution provider, one thread, default graph optimizations."""

    name: ClassVar[str] = "onnxruntime"

    def __init__(self) -> None:
        import onnxruntime

        onnxruntime.set_default_logger_severity(4)
        self._ort = onnxruntime

    def version(self) -> str:
        """Return onnxruntime's version."""
        return str(self._ort.__version__)

    def configurations(self) -> list[dict[str, str]]:
        """One configuration: CPU, one intra-op thread, graph optimizations on (the default).

        Narrow types (bfloat16, float8, 4-bit), which its NumPy interface lacks, are fed and
        fetched as the raw bytes of ``OrtValue`` s (`bcast.openvino.tensor_bits`).
        """
        return [{"provider": "CPUExecutionProvider", "intra_op_num_threads": "1"}]

    def run(
        self, model: bytes, inputs: Mapping[str, Array], *, config: Mapping[str, str], path: str
    ) -> list[Array]:
        """Create a session from ``model`` and run it."""
        options = self._ort.SessionOptions()
        options.log_severity_level = 4
        options.intra_op_num_threads = int(config.get("intra_op_num_threads", "1"))
        options.inter_op_num_threads = 1
        session = self._ort.InferenceSession(model, options, providers=[config["provider"]])
        feeds = {name: self._value(x) for name, x in inputs.items()}
        return [self._array(y) for y in session.run_with_ort_values(None, feeds)]

    def _value(self, x: Array) -> Any:
        """Return ``x`` as an ``OrtValue`` (a narrow type through its raw bytes)."""
        from onnx import helper

        x = np.asarray(x, order="C")
        if not is_narrow(x.dtype):
            return self._ort.OrtValue.ortvalue_from_numpy(x)
        elem = helper.np_dtype_to_tensor_dtype(x.dtype)
        value = self._ort.OrtValue.ortvalue_from_shape_and_type(list(x.shape), elem)
        raw = raw_bytes(x)
        if raw.size:
            ctypes.memmove(value.data_ptr(), raw.ctypes.data, raw.size)
        return value

    def _array(self, value: Any) -> Array:
        """Return an output ``OrtValue`` as a NumPy array (a narrow type from its bytes)."""
        from onnx import TensorProto, helper

        name = str(value.data_type())[len("tensor(") : -1]
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(TensorProto.DataType.Value(name.upper())))
        if not is_narrow(dtype):
            return np.asarray(value.numpy())
        size = int(value.tensor_size_in_bytes())
        raw = np.frombuffer(ctypes.string_at(value.data_ptr(), size), np.uint8)
        return from_raw_bytes(raw, dtype, tuple(value.shape()))


class ReferenceRuntime:
    """The ONNX reference evaluator (``onnx.reference.ReferenceEvaluator``)."""

    name: ClassVar[str] = "reference"

    def __init__(self) -> None:
        import onnx
        from onnx.reference import ReferenceEvaluator

        self._onnx = onnx
        self._evaluator = ReferenceEvaluator

    def version(self) -> str:
        """Return onnx's version."""
        return str(self._onnx.__version__)

    def configurations(self) -> list[dict[str, str]]:
        """One configuration: the evaluator as it comes."""
        return [{"evaluator": "onnx.reference.ReferenceEvaluator"}]

    def run(
        self, model: bytes, inputs: Mapping[str, Array], *, config: Mapping[str, str], path: str
    ) -> list[Array]:
        """Evaluate ``model``."""
        proto = self._onnx.ModelProto()
        proto.ParseFromString(model)
        return [np.asarray(y) for y in self._evaluator(proto).run(None, dict(inputs))]


class TractRuntime:
    """tract (``pip install tract``): its ONNX loader, optimized model, read from a file."""

    name: ClassVar[str] = "tract"

    def __init__(self) -> None:
        import tract

        self._tract = tract

    def version(self) -> str:
        """Return tract's version."""
        return str(self._tract.version())

    def configurations(self) -> list[dict[str, str]]:
        """One configuration: ``onnx().load(path).into_model()`` (optimized), then run."""
        return [{"load": "file", "model": "into_model (optimized)"}]

    def run(
        self, model: bytes, inputs: Mapping[str, Array], *, config: Mapping[str, str], path: str
    ) -> list[Array]:
        """Load ``path`` and run it on the inputs in the model's input order."""
        inference = self._tract.onnx().load(path)
        names = [inference.input_name(i) for i in range(inference.input_count())]
        runnable = inference.into_model().into_runnable()
        outputs = runnable.run([np.asarray(inputs[n], order="C") for n in names])  # 0-d stays
        return [np.asarray(y.to_numpy()) for y in outputs]


BUILTIN: Final = {
    "onnxruntime": "bcast.onnx.conformance.runtimes:OnnxruntimeRuntime",
    "openvino": "bcast.openvino.conformance_runtime:OpenVINORuntime",
    "reference": "bcast.onnx.conformance.runtimes:ReferenceRuntime",
    "tract": "bcast.onnx.conformance.runtimes:TractRuntime",
}
"""The built-in runtimes, by name: ``module:Class``."""


def known_runtimes() -> dict[str, str]:
    """Return every runtime name the kit knows, built in and plug-in: ``module:Class``.

    >>> list(known_runtimes())[:4]
    ['onnxruntime', 'openvino', 'reference', 'tract']
    """
    found = dict(BUILTIN)
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry.name, entry.value)
    return found


def load_runtime(target: str) -> Any:
    """Import ``module:Class`` and construct it (`ImportError` when not installed)."""
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    return cls()
