"""``bcast.onnx.backend``: an ONNX backend (``onnx.backend.base.Backend``) that runs `bcast.ops`.

The module itself is the backend, as ``onnxruntime.backend`` is: it has ``prepare``,
``run_model``, ``run_node``, ``supports_device`` and ``is_compatible``, so ONNX's own node
tests run against bcast with ``onnx.backend.test.BackendTest(bcast.onnx.backend, __name__)``.

It executes models made of the operators bcast implements (`SUPPORTED_OPS`), one node after the
other in graph order: Add Sub Mul Div Pow Equal Greater Less And Or Xor Max Min Mean Sum Where
Gemm PRelu Expand, and Mod BitShift BitwiseAnd BitwiseOr BitwiseXor GreaterOrEqual LessOrEqual
QuantizeLinear DequantizeLinear (narrow types as ``ml_dtypes`` arrays). Any other operator
makes `prepare` raise `UnsupportedOperatorError`.
The operators of opsets before 7, whose ``broadcast``/``axis`` attributes describe the
legacy (Caffe2/PDPD-style) broadcast, run as ``broadcast="pdpd"`` (``broadcast=1``) or
``broadcast="none"`` (no ``broadcast`` attribute).

Examples
--------
>>> import numpy as np, onnx, bcast.onnx
>>> node = onnx.helper.make_node("Add", ["a", "b"], ["y"])
>>> bcast.onnx.backend.run_node(node, [np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32)])
(array([[1., 2., 3.],
       [1., 2., 3.]], dtype=float32),)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from bcast import ops
from bcast.onnx import backend_ops

__all__ = [
    "SUPPORTED_OPS",
    "BcastBackend",
    "BcastBackendRep",
    "UnsupportedOperatorError",
    "is_compatible",
    "prepare",
    "run_model",
    "run_node",
    "supports_device",
]

Array = npt.NDArray[Any]
_Handler = Callable[[list[Array | None], dict[str, Any], int], Array]

_ONNX_DOMAINS: Final = ("", "ai.onnx")


class UnsupportedOperatorError(NotImplementedError):
    """An operator (or domain) that the bcast backend does not implement.

    Attributes
    ----------
    op_type : str
        The node's operator.
    domain : str
        The node's domain (``""`` is ``ai.onnx``).
    """

    def __init__(self, op_type: str, domain: str = "") -> None:
        self.op_type = op_type
        self.domain = domain
        where = f" in domain {domain!r}" if domain not in _ONNX_DOMAINS else ""
        super().__init__(
            f"bcast.onnx.backend does not implement operator {op_type!r}{where}; "
            f"it runs {', '.join(sorted(SUPPORTED_OPS))}"
        )


# -- operators -----------------------------------------------------------------------------


def _legacy_broadcast(attrs: Mapping[str, Any], opset: int) -> dict[str, Any]:
    """Opsets before 7 broadcast only with ``broadcast=1``, B onto A from ``axis``.

    That rule (Caffe2's, which PaddlePaddle kept) is OpenVINO's PDPD rule; without the
    attribute the shapes must be identical, which is mode ``none``.
    """
    if opset >= 7 and "broadcast" not in attrs:
        return {}
    if int(attrs.get("broadcast", 0)):
        return {"broadcast": "pdpd", "axis": int(attrs.get("axis", -1))}
    return {"broadcast": "none"}


def _binary(fn: Callable[..., Any]) -> _Handler:
    def run(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
        a, b = _required(inputs, 2)
        return np.asarray(fn(a, b, **_legacy_broadcast(attrs, opset)))

    return run


def _variadic(fn: Callable[..., Any]) -> _Handler:
    def run(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
        return np.asarray(fn(*_required(inputs, len(inputs))))

    return run


def _where(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
    condition, x, y = _required(inputs, 3)
    return np.asarray(ops.where(condition, x, y))


def _gemm(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
    a, b = _required(inputs[:2], 2)
    c = inputs[2] if len(inputs) > 2 else None
    return np.asarray(
        ops.gemm(
            a,
            b,
            c,
            alpha=float(attrs.get("alpha", 1.0)),
            beta=float(attrs.get("beta", 1.0)),
            trans_a=bool(attrs.get("transA", 0)),
            trans_b=bool(attrs.get("transB", 0)),
        )
    )


def _prelu(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
    x, slope = _required(inputs, 2)
    return np.asarray(ops.prelu(x, slope))


def _expand(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
    x, shape = _required(inputs, 2)
    return np.asarray(ops.expand(x, tuple(int(v) for v in np.asarray(shape).reshape(-1))))


def _required(inputs: Sequence[Array | None], count: int) -> list[Array]:
    """Return exactly ``count`` inputs, all present (ONNX marks a missing one with "")."""
    if len(inputs) != count or any(x is None for x in inputs):
        raise ValueError(f"expected {count} inputs; got {len(inputs)} ({_describe(inputs)})")
    return [x for x in inputs if x is not None]


def _describe(inputs: Sequence[Array | None]) -> str:
    return ", ".join("missing" if x is None else f"{x.dtype}{list(x.shape)}" for x in inputs)


_OPS: Final[dict[str, _Handler]] = {
    "Add": _binary(ops.add),
    "Sub": _binary(ops.sub),
    "Mul": _binary(ops.mul),
    "Div": _binary(ops.div),
    "Pow": _binary(ops.pow),
    "Equal": _binary(ops.equal),
    "Greater": _binary(ops.greater),
    "Less": _binary(ops.less),
    "And": _binary(ops.and_),
    "Or": _binary(ops.or_),
    "Xor": _binary(ops.xor),
    "Max": _variadic(ops.max),
    "Min": _variadic(ops.min),
    "Mean": _variadic(ops.mean),
    "Sum": _variadic(ops.sum),
    "Where": _where,
    "Gemm": _gemm,
    "PRelu": _prelu,
    "Expand": _expand,
    "Mod": backend_ops.mod,
    "BitShift": backend_ops.bit_shift,
    "BitwiseAnd": _binary(ops.bitwise_and),
    "BitwiseOr": _binary(ops.bitwise_or),
    "BitwiseXor": _binary(ops.bitwise_xor),
    "GreaterOrEqual": _binary(ops.greater_or_equal),
    "LessOrEqual": _binary(ops.less_or_equal),
    "QuantizeLinear": backend_ops.quantize_linear,
    "DequantizeLinear": backend_ops.dequantize_linear,
}

SUPPORTED_OPS: Final[frozenset[str]] = frozenset(_OPS)
"""The ``ai.onnx`` operators the backend runs."""


# -- the prepared model --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Step:
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any]
    opset: int
    run: _Handler


@dataclass(frozen=True, slots=True)
class _InputSpec:
    name: str
    dtype: np.dtype[Any] | None


class BcastBackendRep(BackendRep):
    """A prepared model: its nodes in order, initializers, and declared inputs.

    Call `run` with the graph inputs (those that are not initializers), positionally or by
    name; it returns the graph outputs as a tuple of NumPy arrays.
    """

    def __init__(
        self,
        steps: Sequence[_Step],
        inputs: Sequence[_InputSpec],
        outputs: Sequence[str],
        constants: Mapping[str, Array],
    ) -> None:
        self._steps = tuple(steps)
        self._inputs = tuple(inputs)
        self._outputs = tuple(outputs)
        self._constants = dict(constants)

    @property
    def input_names(self) -> tuple[str, ...]:
        """Names of the inputs `run` expects, in order."""
        return tuple(spec.name for spec in self._inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        """Names of the outputs `run` returns, in order."""
        return self._outputs

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Array, ...]:
        """Run the model.

        Parameters
        ----------
        inputs : sequence of array_like, mapping of str to array_like, or array_like
            The graph inputs in order, or by name; a single array for a one-input model.
        **kwargs
            Accepted for the backend protocol and ignored.

        Returns
        -------
        tuple of numpy.ndarray
            The graph outputs, in order.

        Raises
        ------
        TypeError
            If an input array's dtype is not the declared element type.
        ValueError
            If inputs are missing or extra, or an operator rejects its operands
            (`bcast.BroadcastError` for incompatible shapes).
        """
        env: dict[str, Array | None] = dict(self._constants)
        env[""] = None
        env.update(self._bind(inputs))
        for step in self._steps:
            args: list[Array | None] = []
            for name in step.inputs:
                if name not in env:
                    raise ValueError(f"{step.op_type} reads {name!r}, which no node produced")
                args.append(env[name])
            env[step.outputs[0]] = step.run(args, step.attrs, step.opset)
        results = []
        for name in self._outputs:
            value = env.get(name)
            if value is None:
                raise ValueError(f"graph output {name!r} was not produced")
            results.append(value)
        return tuple(results)

    def _bind(self, inputs: Any) -> dict[str, Array]:
        specs = self._inputs
        if isinstance(inputs, Mapping):
            unknown = set(inputs) - {s.name for s in specs}
            missing = [s.name for s in specs if s.name not in inputs]
            if unknown or missing:
                raise ValueError(
                    f"inputs by name must be exactly {list(self.input_names)}; "
                    f"missing {missing}, unknown {sorted(unknown)}"
                )
            pairs = [(s, inputs[s.name]) for s in specs]
        else:
            values = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(values) != len(specs):
                raise ValueError(
                    f"the model takes {len(specs)} inputs {list(self.input_names)}; "
                    f"got {len(values)}"
                )
            pairs = list(zip(specs, values, strict=True))
        return {spec.name: _as_input(spec, value) for spec, value in pairs}


def _as_input(spec: _InputSpec, value: Any) -> Array:
    """Convert one input to the declared element type; a wrong array dtype is an error."""
    if spec.dtype is None:
        return np.asarray(value)
    if isinstance(value, np.ndarray):
        if value.dtype == spec.dtype:
            return value
        if spec.dtype == np.dtype(object) and value.dtype.kind in "US":
            return value.astype(object)
        raise TypeError(f"input {spec.name!r} must be {spec.dtype}; got an array of {value.dtype}")
    return np.asarray(value, dtype=spec.dtype)


def _elem_dtype(value_info: onnx.ValueInfoProto) -> np.dtype[Any] | None:
    if not value_info.type.HasField("tensor_type"):
        kind = value_info.type.WhichOneof("value")
        raise NotImplementedError(
            f"bcast.onnx.backend takes tensors only; input {value_info.name!r} is a {kind}"
        )
    elem = value_info.type.tensor_type.elem_type
    if elem == onnx.TensorProto.UNDEFINED:
        return None
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem))


def _opset(model: onnx.ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in _ONNX_DOMAINS:
            return int(entry.version)
    return int(onnx.defs.onnx_opset_version())


def _step(node: onnx.NodeProto, opset: int) -> _Step:
    if node.domain not in _ONNX_DOMAINS or node.op_type not in _OPS:
        raise UnsupportedOperatorError(node.op_type, node.domain)
    if len(node.output) != 1:
        raise ValueError(f"{node.op_type} has one output; the node lists {list(node.output)}")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return _Step(
        op_type=node.op_type,
        inputs=tuple(node.input),
        outputs=tuple(node.output),
        attrs=attrs,
        opset=opset,
        run=_OPS[node.op_type],
    )


# -- the backend ---------------------------------------------------------------------------


class BcastBackend(Backend):
    """The ONNX backend protocol over `bcast.ops` (CPU only).

    The module-level functions of ``bcast.onnx.backend`` are this class's methods.
    """

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        """Return whether every node of ``model`` is an operator bcast runs, on ``device``."""
        return cls.supports_device(device) and all(
            node.domain in _ONNX_DOMAINS and node.op_type in _OPS for node in model.graph.node
        )

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Return True for ``"CPU"`` (bcast computes with NumPy on the host), else False."""
        try:
            return bool(Device(device).type == DeviceType.CPU)
        except (ValueError, AttributeError):
            return False

    @classmethod
    def prepare(
        cls,
        model: onnx.ModelProto | str | bytes | os.PathLike[str],
        device: str = "CPU",
        **kwargs: Any,
    ) -> BcastBackendRep:
        """Check ``model`` and prepare it to run.

        Parameters
        ----------
        model : onnx.ModelProto, bytes, or path
            The model, serialized bytes, or a file to load.
        device : str, default "CPU"
            Only ``"CPU"`` is supported.
        **kwargs
            Accepted for the backend protocol and ignored.

        Returns
        -------
        BcastBackendRep
            The prepared model.

        Raises
        ------
        UnsupportedOperatorError
            If a node's operator is not in `SUPPORTED_OPS` (the message names it).
        NotImplementedError
            If a graph input is not a tensor (a sequence, map or optional).
        ValueError
            If ``device`` is not the CPU.
        onnx.checker.ValidationError
            If the model is not valid ONNX.
        """
        if isinstance(model, bytes):
            model = onnx.load_model_from_string(model)
        elif isinstance(model, (str, os.PathLike)):
            model = onnx.load(os.fspath(model))
        if not cls.supports_device(device):
            raise ValueError(f"bcast.onnx.backend runs on CPU only; got device {device!r}")
        onnx.checker.check_model(model)
        graph = model.graph
        opset = _opset(model)
        steps = [_step(node, opset) for node in graph.node]
        constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        inputs = [
            _InputSpec(vi.name, _elem_dtype(vi)) for vi in graph.input if vi.name not in constants
        ]
        return BcastBackendRep(steps, inputs, [vi.name for vi in graph.output], constants)

    @classmethod
    def run_model(
        cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[Array, ...]:
        """Prepare ``model`` and run it once on ``inputs``."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[Any, tuple[int, ...]]] | None = None,
        **kwargs: Any,
    ) -> tuple[Array, ...]:
        """Run one node on ``inputs`` (in the node's input order) and return its outputs.

        ``opset_version`` in ``kwargs`` selects the opset (default: the newest); it matters
        for the legacy ``broadcast`` attribute of opsets before 7.
        """
        if not cls.supports_device(device):
            raise ValueError(f"bcast.onnx.backend runs on CPU only; got device {device!r}")
        opset = int(kwargs.get("opset_version", onnx.defs.onnx_opset_version()))
        step = _step(node, opset)
        values = list(inputs.values()) if isinstance(inputs, Mapping) else list(inputs)
        present = [name for name in node.input if name]
        if len(values) != len(present):
            raise ValueError(f"{node.op_type} node takes {len(present)} inputs; got {len(values)}")
        supplied = iter(values)
        args: list[Array | None] = [
            np.asarray(next(supplied)) if name else None for name in node.input
        ]
        return (step.run(args, step.attrs, opset),)


is_compatible = BcastBackend.is_compatible
supports_device = BcastBackend.supports_device
prepare = BcastBackend.prepare
run_model = BcastBackend.run_model
run_node = BcastBackend.run_node
