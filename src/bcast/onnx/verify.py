"""Run each broadcasting node of an ONNX model in the runtimes and in bcast, and compare.

`verify_model` reads the model (`bcast.onnx.reader`), propagates its shapes
(`bcast.check.propagate_shapes`), and for every broadcasting node it can run (the operators
of `bcast.onnx.backend`) builds a model of that node alone, on concrete shapes: symbols
bound by ``dims``, otherwise the value that makes the node valid (the static size they meet
on their axis), else 2. The node then runs on the same random inputs in bcast
(`bcast.onnx.backend.run_node`, which calls `bcast.ops`), in onnxruntime and in OpenVINO
(through its ONNX frontend, `bcast.openvino.runtime`). Results are compared by shape and
value; an error on one side only is a disagreement too.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

from bcast._verify_common import (
    Comparison,
    NodeRun,
    Result,
    Verification,
    attempt,
    compare,
    pick,
    random_array,
    right_aligned,
)
from bcast.check import ModelError, Node, Rule, propagate_shapes
from bcast.onnx.backend import SUPPORTED_OPS, run_node
from bcast.onnx.reader import load_model, read_onnx
from bcast.shape import Shape

__all__ = ["Comparison", "NodeRun", "Result", "Verification", "verify_model"]

_RULES: Final = frozenset({Rule.MULTIDIRECTIONAL, Rule.GEMM, Rule.PRELU, Rule.EXPAND})
_POSITIVE_SECOND: Final = frozenset({"Div", "Pow", "Mod"})


def verify_model(
    path: str,
    *,
    runtimes: Sequence[str] = ("onnxruntime", "openvino"),
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
) -> Verification:
    """Run every broadcasting node of the ONNX model at ``path`` and compare with bcast.

    Parameters
    ----------
    path : str
        An ONNX model file.
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
        If the file is not a readable ONNX model.
    """
    if path.lower().endswith(".xml"):
        raise ModelError(
            f"{path}: verify_model runs ONNX models; OpenVINO IR goes to "
            "bcast.openvino.verify.verify_ir"
        )
    model = load_model(path)
    graph = read_onnx(model)
    shapes = propagate_shapes(graph, dims=dims)
    usable, notes = _runners(runtimes)
    outcome = Verification(path, list(usable), seed, notes=notes)
    protos = list(model.graph.node)
    types = _elem_types(model)
    constants = _constant_tensors(model)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    for index, node in enumerate(graph.nodes):
        if node.rule not in _RULES or node.op not in SUPPORTED_OPS:
            continue
        operands = [shapes.get(name, Shape.dynamic()) if name else None for name in node.inputs]
        concrete = _concrete(node, operands, constants)
        if concrete is None:
            outcome.notes.append(
                f"{node.name} ({node.op}): an input of unknown rank or a non-constant "
                "target shape; skipped"
            )
            continue
        rng = np.random.default_rng([seed, index])
        feeds = _inputs(node, concrete, constants, types, rng)
        shown = tuple((name, Shape(concrete[i])) for i, name in enumerate(node.inputs) if name)
        run = NodeRun(node.name, node.op, shown)
        args = [feeds[name] for name in node.inputs if name]
        run.results["bcast"] = attempt(run_node, protos[index], args, opset_version=opset)
        one = _one_node_model(model, protos[index], feeds, constants, types, opset)
        runtime_feeds = {k: v for k, v in feeds.items() if k not in constants}
        for name, runner in usable.items():
            result = attempt(runner, one, runtime_feeds)
            run.results[name] = result
            run.comparisons[name] = compare(run.results["bcast"], result, name)
        outcome.nodes.append(run)
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
                notes.append("onnxruntime is not installed; skipped")
                continue
            found[name] = _run_onnxruntime
        elif name == "openvino":
            try:
                from bcast.openvino.runtime import run_onnx_file
            except ImportError:
                notes.append("openvino is not installed; skipped")
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


def _concrete(
    node: Node, operands: Sequence[Shape | None], constants: Mapping[str, onnx.TensorProto]
) -> list[tuple[int, ...]] | None:
    """Choose a concrete shape per input: symbols and unknowns take a value that fits."""
    shapes: list[Shape] = []
    for name, shape in zip(node.inputs, operands, strict=True):
        if name in constants:
            shapes.append(Shape(int(d) for d in constants[name].dims))
        elif shape is None:
            shapes.append(Shape(()))
        elif shape.rank is None:
            return None
        else:
            shapes.append(shape)
    if node.rule is Rule.GEMM:
        return _concrete_gemm(node, shapes)
    if node.rule is Rule.EXPAND:
        # The second input is the target's values, not an operand: align data with them.
        target = node.inputs[1] if len(node.inputs) > 1 else ""
        if target not in constants:
            return None
        values = Shape(max(int(v), 0) for v in numpy_helper.to_array(constants[target]))
        return [right_aligned([shapes[0], values], {})[0], shapes[1].to_tuple()]
    return right_aligned(shapes, {})


def _concrete_gemm(node: Node, shapes: Sequence[Shape]) -> list[tuple[int, ...]] | None:
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
        c = right_aligned([Shape((m, n)), shapes[2]], chosen)[1]
        result.append(c)
    return result


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


def _inputs(
    node: Node,
    concrete: Sequence[tuple[int, ...]],
    constants: Mapping[str, onnx.TensorProto],
    types: Mapping[str, int],
    rng: np.random.Generator,
) -> dict[str, npt.NDArray[Any]]:
    feeds: dict[str, npt.NDArray[Any]] = {}
    for index, name in enumerate(node.inputs):
        if not name or name in feeds:
            continue
        if name in constants:
            feeds[name] = numpy_helper.to_array(constants[name])
            continue
        default = onnx.TensorProto.BOOL if node.op == "Where" and index == 0 else 1
        elem = types.get(name, default)
        positive = (node.op in _POSITIVE_SECOND and index == 1) or (node.op == "Pow" and index == 0)
        dtype = helper.tensor_dtype_to_np_dtype(elem)
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
