"""Run each broadcasting node of an ONNX model in the runtimes and in bcast, and compare.

`verify_model` reads the model (`bcast.onnx.reader`), propagates its shapes
(`bcast.models.propagate_shapes`), and for every broadcasting node it can run (the operators
of `bcast.onnx.backend`) builds a model of that node alone, on concrete shapes: symbols
bound by ``dims``, otherwise the value that makes the node valid (the static size they meet
on their axis), else 2. The node then runs on the same random inputs in bcast
(`bcast.onnx.backend.run_node`, which calls `bcast.ops`), in onnxruntime and in OpenVINO
(through its ONNX frontend, `bcast.openvino.runtime`). Results are compared by shape and
value; an error on one side only is a disagreement too.

A broadcasting node that cannot be run is skipped with a note (`Verification.skip`): an
operator bcast does not implement (Mod, the Bitwise ops, GreaterOrEqual, LessOrEqual,
BitShift), an input of unknown rank or a non-constant Expand target, or a node whose inputs
and outputs would exceed bcast's memory limit (checked before any input is drawn).
Initializers stored as external data are read from the model file's folder only: a location
that is absolute, climbs out with ``..`` or resolves (through links) outside that folder is
refused, and so is external data in a ``ModelProto`` given without a file.
"""

from __future__ import annotations

import math
import ntpath
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

from bcast.core.modes import Mode
from bcast.core.shape import Shape
from bcast.models import ModelError, Node, Rule, propagate_shapes
from bcast.models.inputs import (
    alignment_of,
    concrete_shapes,
    memory_problem,
    output_elements,
    pick,
    random_array,
)
from bcast.models.verification import (
    NO_OPERATOR,
    Comparison,
    NodeRun,
    Result,
    Skip,
    Verification,
    attempt,
    compare,
    unused_dims,
)
from bcast.onnx.backend import SUPPORTED_OPS, run_node
from bcast.onnx.reader import load_model, read_onnx

__all__ = ["Comparison", "NodeRun", "Result", "Verification", "verify_model"]

_RULES: Final = frozenset({Rule.MULTIDIRECTIONAL, Rule.GEMM, Rule.PRELU, Rule.EXPAND})
_POSITIVE_SECOND: Final = frozenset({"Div", "Pow", "Mod"})
_LEGACY: Final = (
    "verify runs the broadcasting of opset 7 and later, not the legacy `broadcast` attribute"
)
_MAX_TARGET: Final = 4096
"""An Expand target with more values (an output of that rank) is not read."""


def verify_model(
    source: str | os.PathLike[str] | onnx.ModelProto,
    *,
    runtimes: Sequence[str] = ("onnxruntime", "openvino"),
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
) -> Verification:
    """Run every broadcasting node of the ONNX model at ``path`` and compare with bcast.

    Parameters
    ----------
    source : str, path or onnx.ModelProto
        An ONNX model file; its external data is read from the file's folder. A
        ``ModelProto`` has no folder: external data in it is refused.
    runtimes : sequence of str
        ``"onnxruntime"`` and/or ``"openvino"``; those not installed are noted and skipped.
    dims : mapping of str to int, optional
        Values of symbolic dims.
    seed : int
        Seed of the random inputs (each node draws from ``(seed, node index)``).

    Returns
    -------
    Verification

    Raises
    ------
    ModelError
        If the file is not a readable ONNX model, has a cycle, or keeps the data of a
        tensor it needs outside its folder (or in a ``ModelProto`` given without a file).
    """
    if isinstance(source, onnx.ModelProto):
        path, folder, model = "<ModelProto>", None, source
    else:
        path = os.fspath(source)
        if path.lower().endswith(".xml"):
            raise ModelError(
                f"{path}: verify_model runs ONNX models; OpenVINO IR goes to "
                "bcast.openvino.verify.verify_ir"
            )
        folder = os.path.dirname(os.path.abspath(path))
        model = load_model(path)
    graph = read_onnx(model)
    graph.path = path  # read from the proto: messages (a cycle) name the file
    shapes = propagate_shapes(graph, dims=dims)
    usable, notes = _runners(runtimes)
    outcome = Verification(path, list(usable), seed, notes=notes)
    outcome.unused_dims = unused_dims([graph], dims or {})
    protos = list(model.graph.node)
    types = _elem_types(model)
    tensors = _Tensors(_constant_tensors(model), folder, path)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    for index, node in enumerate(graph.nodes):
        if node.rule is None:  # not a broadcasting node
            continue
        if node.op not in SUPPORTED_OPS:
            outcome.skip(node.name, node.op, Skip.UNSUPPORTED, NO_OPERATOR)
            continue
        if node.rule not in _RULES:  # Add & co. before opset 7: the `broadcast` attribute
            outcome.skip(node.name, node.op, Skip.UNSUPPORTED, _LEGACY)
            continue
        operands = [shapes.get(name, Shape.dynamic()) if name else None for name in node.inputs]
        planned = _concrete(node, operands, tensors)
        if isinstance(planned, str):
            outcome.skip(node.name, node.op, Skip.UNKNOWN_SHAPE, planned)
            continue
        concrete, outputs = planned
        itemsizes = [_itemsize(node, i, tensors, types) for i in range(len(node.inputs))]
        problem = memory_problem(
            zip(concrete, itemsizes, strict=True),
            outputs,
            max(itemsizes, default=1),
            runtimes=len(usable),
        )
        if problem is not None:
            outcome.skip(node.name, node.op, Skip.TOO_LARGE, problem)
            continue
        rng = np.random.default_rng([seed, index])
        feeds = _inputs(node, concrete, tensors, types, rng)
        shown = tuple((name, Shape(concrete[i])) for i, name in enumerate(node.inputs) if name)
        run = NodeRun(node.name, node.op, shown)
        args = [feeds[name] for name in node.inputs if name]
        run.results["bcast"] = attempt(run_node, protos[index], args, opset_version=opset)
        one = _one_node_model(model, protos[index], feeds, tensors.protos, types, opset)
        runtime_feeds = {k: v for k, v in feeds.items() if k not in tensors.protos}
        for name, runner in usable.items():
            result = attempt(runner, one, runtime_feeds)
            run.results[name] = result
            run.comparisons[name] = compare(run.results["bcast"], result, name)
        outcome.record(run)
    return outcome


# -- runtimes ------------------------------------------------------------------------------

_Runner = Any  # Callable[[onnx.ModelProto, dict[str, ndarray]], ndarray]


def _runners(wanted: Sequence[str]) -> tuple[dict[str, _Runner], list[str]]:
    found: dict[str, _Runner] = {}
    notes: list[str] = []
    for name in wanted:
        if name == "onnxruntime":
            try:
                import onnxruntime  # noqa: F401 (the verifier runs onnxruntime)
            except ImportError:
                notes.append(
                    'onnxruntime is not installed (pip install "bcast[onnxruntime]"); skipped'
                )
                continue
            found[name] = _run_onnxruntime
        elif name == "openvino":
            try:
                from bcast.openvino.runtime import run_onnx_file
            except ImportError:
                notes.append('openvino is not installed (pip install "bcast[openvino]"); skipped')
                continue
            found[name] = _openvino_runner(run_onnx_file)
    return found, notes


def _run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, Any]) -> npt.NDArray[Any]:
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)  # its own error log would duplicate ours
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return np.asarray(session.run(None, feeds)[0])


def _openvino_runner(run_onnx_file: Any) -> _Runner:
    def run(model: onnx.ModelProto, feeds: dict[str, Any]) -> npt.NDArray[Any]:
        with tempfile.TemporaryDirectory(prefix="bcast-verify-") as directory:
            path = os.path.join(directory, "node.onnx")
            onnx.save(model, path)
            return np.asarray(run_onnx_file(path, feeds))

    return run


# -- concrete shapes and inputs ------------------------------------------------------------


class _Tensors:
    """The model's constants (initializers, ``Constant`` nodes), read as arrays on demand.

    External data is read from ``folder`` (the model file's) and nowhere else; ``folder``
    None (a ``ModelProto`` without a file) refuses it.
    """

    def __init__(
        self, protos: Mapping[str, onnx.TensorProto], folder: str | None, path: str
    ) -> None:
        self.protos = protos
        self.folder = folder
        self.path = path

    def __contains__(self, name: object) -> bool:
        return name in self.protos

    def elements(self, name: str) -> int:
        """Return the element count its dims declare (nothing is read)."""
        return math.prod(max(int(d), 0) for d in self.protos[name].dims)

    def array(self, name: str) -> npt.NDArray[Any]:
        """Read the tensor ``name``; `ModelError` for external data bcast must not read."""
        tensor = self.protos[name]
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            return numpy_helper.to_array(tensor)
        return numpy_helper.to_array(tensor, base_dir=self._external_folder(tensor))

    def _external_folder(self, tensor: onnx.TensorProto) -> str:
        where = f"{self.path}: tensor {tensor.name!r} keeps its data in an external file"
        if self.folder is None:
            raise ModelError(
                f"{where}, and a ModelProto has no folder to read it from; "
                "verify the model's file instead"
            )
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        parts = location.replace("\\", "/").split("/")
        drive = ntpath.splitdrive(location)[0]
        if (
            not location
            or os.path.isabs(location)
            or ntpath.isabs(location)
            or drive
            or ".." in parts
        ):
            raise ModelError(
                f"{where} at {location!r}; bcast reads external data only from files inside "
                "the model's folder, named by a relative path without '..'"
            )
        root = os.path.realpath(self.folder)
        target = os.path.realpath(os.path.join(root, location))
        if os.path.commonpath([root, target]) != root:
            raise ModelError(
                f"{where} at {location!r}, which resolves outside the model's folder; refused"
            )
        if not os.path.isfile(target):
            raise ModelError(f"{where} at {location!r}, which is not a file in the model's folder")
        return root


def _concrete(
    node: Node, operands: Sequence[Shape | None], tensors: _Tensors
) -> tuple[list[tuple[int, ...]], int] | str:
    """Choose a concrete shape per input (unknown dims take a value that fits).

    Returns the shapes and a bound of the output's elements (`output_elements`), or why
    there are none.
    """
    shapes: list[Shape] = []
    for name, shape in zip(node.inputs, operands, strict=True):
        if name in tensors:
            shapes.append(Shape(max(int(d), 0) for d in tensors.protos[name].dims))
        elif shape is None:
            shapes.append(Shape(()))
        elif shape.rank is None:
            return "an input of unknown rank"
        else:
            shapes.append(shape)
    if node.rule is Rule.GEMM:
        gemm = _concrete_gemm(node, shapes)
        if gemm is None:
            return "an input of Gemm is not of rank 2"
        return gemm
    if node.rule is Rule.EXPAND:
        # The second input is the target's values, not an operand: align data with them.
        target = node.inputs[1] if len(node.inputs) > 1 else ""
        if target not in tensors:
            return "a non-constant target shape"
        if tensors.elements(target) > _MAX_TARGET:
            return f"a target shape of {tensors.elements(target)} values"
        values = Shape(max(int(v), 0) for v in tensors.array(target).reshape(-1))
        data = concrete_shapes([shapes[0], values], alignment_of([shapes[0], values]), {})[0]
        return [data, shapes[1].to_tuple()], output_elements([data, values.to_tuple()])
    alignment = alignment_of(shapes)
    concrete = concrete_shapes(shapes, alignment, {})
    return concrete, output_elements(concrete, alignment)


def _concrete_gemm(node: Node, shapes: Sequence[Shape]) -> tuple[list[tuple[int, ...]], int] | None:
    a, b = shapes[0], shapes[1]
    if a.rank != 2 or b.rank != 2:
        return None
    chosen: dict[str, int] = {}
    ai = (1, 0) if node.trans_a else (0, 1)  # positions of M and K in A
    bi = (1, 0) if node.trans_b else (0, 1)  # positions of K and N in B
    k_ref = next((d.lo for d in (a.dims[ai[1]], b.dims[bi[0]]) if d.is_static), None)
    m = pick(a.dims[ai[0]], None, chosen)
    k = pick(a.dims[ai[1]], k_ref, chosen)
    kb = pick(b.dims[bi[0]], k, chosen)
    n = pick(b.dims[bi[1]], None, chosen)
    a_shape = [0, 0]
    a_shape[ai[0]], a_shape[ai[1]] = m, k
    b_shape = [0, 0]
    b_shape[bi[0]], b_shape[bi[1]] = kb, n
    result = [tuple(a_shape), tuple(b_shape)]
    if len(shapes) > 2:
        pair = [Shape((m, n)), shapes[2]]
        c = concrete_shapes(pair, alignment_of(pair, Mode.UNIDIRECTIONAL), chosen)[1]
        result.append(c)
        return result, output_elements([(m, n), c])
    return result, m * n


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    types: dict[str, int] = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # the peer giving up only costs us the types: float32 then
        inferred = model
    graph = inferred.graph
    for info in [*graph.input, *graph.value_info, *graph.output]:
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            types[info.name] = info.type.tensor_type.elem_type
    for init in graph.initializer:
        types[init.name] = init.data_type
    return types


def _constant_tensors(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    found = {init.name: init for init in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                    found[node.output[0]] = attr.t
    return found


def _elem_type(node: Node, index: int, types: Mapping[str, int]) -> int:
    """Return the input's ONNX element type: the model's, else bool (Where's condition), float."""
    default = onnx.TensorProto.BOOL if node.op == "Where" and index == 0 else 1
    return types.get(node.inputs[index], default)


def _itemsize(node: Node, index: int, tensors: _Tensors, types: Mapping[str, int]) -> int:
    name = node.inputs[index]
    if not name:
        return 0
    elem = tensors.protos[name].data_type if name in tensors else _elem_type(node, index, types)
    try:
        return int(helper.tensor_dtype_to_np_dtype(elem).itemsize)
    except (KeyError, ValueError, TypeError):  # an unknown type code: count 8 bytes
        return 8


def _inputs(
    node: Node,
    concrete: Sequence[tuple[int, ...]],
    tensors: _Tensors,
    types: Mapping[str, int],
    rng: np.random.Generator,
) -> dict[str, npt.NDArray[Any]]:
    feeds: dict[str, npt.NDArray[Any]] = {}
    for index, name in enumerate(node.inputs):
        if not name or name in feeds:
            continue
        if name in tensors:
            feeds[name] = tensors.array(name)
            continue
        positive = (node.op in _POSITIVE_SECOND and index == 1) or (node.op == "Pow" and index == 0)
        dtype = helper.tensor_dtype_to_np_dtype(_elem_type(node, index, types))
        feeds[name] = random_array(concrete[index], dtype, rng, positive=positive)
    return feeds


def _one_node_model(
    model: onnx.ModelProto,
    proto: onnx.NodeProto,
    feeds: Mapping[str, npt.NDArray[Any]],
    constants: Mapping[str, onnx.TensorProto],
    types: Mapping[str, int],
    opset: int,
) -> onnx.ModelProto:
    inputs, inits = [], []
    for name, value in feeds.items():
        if name in constants:
            inits.append(numpy_helper.from_array(value, name))
        else:
            elem = helper.np_dtype_to_tensor_dtype(value.dtype)
            inputs.append(helper.make_tensor_value_info(name, elem, list(value.shape)))
    outputs = [
        helper.make_tensor_value_info(out, types.get(out, 0), None) for out in proto.output if out
    ]
    graph = helper.make_graph([proto], "one_node", inputs, outputs, inits)
    single = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    single.ir_version = model.ir_version
    return single
