"""Run each broadcasting node of an ONNX model in the runtimes and in bcast, and compare.

`verify_model` reads the model (`bcast.onnx.reader`), propagates its shapes
(`bcast.models.propagate_shapes`), and for every broadcasting node it can run (the operators
of `bcast.onnx.backend`) builds a model of that node alone, on concrete shapes: symbols
bound by ``dims``, otherwise the value that makes the node valid (the static size they meet
on their axis), else 2. The node then runs on the same random inputs in bcast
(`bcast.onnx.backend.run_node`, which calls `bcast.ops`), in onnxruntime and in OpenVINO
(through its ONNX frontend, `bcast.openvino.runtime`). Results are compared by shape and
value; an error on one side only is a disagreement too.

The operators `bcast.ops` lacks (GreaterOrEqual, LessOrEqual, Mod, BitShift, the Bitwise
ops, LayerNormalization, RMSNormalization) run on bcast's side through
`bcast.models.reference`: broadcast by bcast's rules, computed by NumPy. An Expand whose
target is computed in the graph runs on the target's values as propagation knows them
(``graph.shape_values``), its unknown entries chosen as unknown dims are; only a target of
unknown length cannot run. Each input is fed exactly as the one-node model declares it
(dtype and shape; a 0-d input stays 0-d); a request that is not (bcast's own bug) is a
harness error (`HarnessError`), never a runtime's rejection.

Inputs whose rank or unnamed dims shape inference leaves unknown (after ``ai.onnx.ml``
operators, a Concat after a computed Expand) take the shapes they really have: the part
of the model that computes them runs in onnxruntime first (`bcast.onnx.probe`), on
inputs of the same symbol values that the node's own symbols then take.

A broadcasting node that cannot be run is skipped with a note (`Verification.skip`): an
input of unknown rank that no probe measured, an Expand target of unknown length, or a
node whose inputs and outputs would exceed bcast's memory limit (checked before any input
is drawn).
Initializers stored as external data are read from the model file's folder only: a location
that is absolute, climbs out with ``..`` or resolves (through links) outside that folder is
refused, and so is external data in a ``ModelProto`` given without a file.
"""

from __future__ import annotations

import importlib.util
import math
import ntpath
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

from bcast.core.modes import Mode
from bcast.core.shape import Shape
from bcast.models import ModelError, Node, Rule, bind_dims, propagate_shapes
from bcast.models.dim_names import unused_dims
from bcast.models.inputs import (
    alignment_of,
    concrete_shapes,
    memory_problem,
    output_elements,
    pick,
    random_array,
)
from bcast.models.isolation import IsolationError
from bcast.models.rules_base import broadcasting
from bcast.models.verification import (
    NO_OPERATOR,
    Comparison,
    HarnessError,
    NodeRun,
    Result,
    Skip,
    Verification,
    attempt,
    compare,
)
from bcast.onnx._integrity import check_integrity
from bcast.onnx.backend import SUPPORTED_OPS, run_node
from bcast.onnx.coverage import OPERATOR, inlined
from bcast.onnx.one_node import REFERENCE_OPS, check_request, one_node_model, run_reference
from bcast.onnx.peer import run_onnxruntime, run_openvino
from bcast.onnx.probe import Probed, is_open, probe_inputs, with_probe
from bcast.onnx.reader import load_model, read_onnx
from bcast.onnx.verify_bodies import body_nodes, constant_tensors, elem_types
from bcast.onnx.verify_quant import QUANT_OPS, concrete_quant

__all__ = ["Comparison", "NodeRun", "Result", "Verification", "verify_model"]

_RULES: Final = frozenset(
    {Rule.MULTIDIRECTIONAL, Rule.GEMM, Rule.PRELU, Rule.EXPAND, Rule.NORMALIZATION}
)
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
        check_integrity(path, model)  # messages name the file (read_onnx has only the proto)
    model = inlined(model)  # a model-local function's nodes run as the main graph's
    graph = read_onnx(model)
    graph.path = path  # read from the proto: messages (a cycle) name the file
    shapes = propagate_shapes(graph, dims=dims)
    computed = {k: bind_dims(v, dims or {}) for k, v in graph.shape_values.items()}
    probed = probe_inputs(model, graph.nodes, shapes, constant_tensors(model), dims or {}, seed)
    usable, notes = _runners(runtimes)
    outcome = Verification(path, list(usable), seed, notes=notes)
    outcome.unused_dims = unused_dims([graph], dims or {})
    protos = list(model.graph.node)
    types = elem_types(model)
    tensors = _Tensors(constant_tensors(model), folder, path)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    # (seed index, node, proto, its values' shapes, shape values, probed shapes)
    jobs: list[tuple[int, Node, onnx.NodeProto, Mapping[str, Shape], Mapping[str, Shape], Probed]]
    jobs = [
        (index, node, protos[index], shapes, computed, probed)
        for index, node in enumerate(graph.nodes)
        if broadcasting(node)
    ]
    for body in body_nodes(graph, protos, shapes, dims or {}):  # If/Loop/Scan bodies
        if body.why:  # listed, never left out silently
            outcome.skip(body.node.name, body.node.op, Skip.IN_BODY, body.why)
            continue
        body_computed = {k: bind_dims(v, dims or {}) for k, v in body.computed.items()}
        index = len(graph.nodes) + len(jobs)  # its own seed, after every main-graph node's
        jobs.append((index, body.node, body.proto, body.shapes, body_computed, ({}, {})))
    for index, node, proto, known, targets, measured in jobs:
        quant = node.op in QUANT_OPS  # an operator rule in check; run here through bcast.ops
        if node.rule is Rule.OPERATOR and not quant:
            outcome.skip(node.name, node.op, Skip.UNSUPPORTED, OPERATOR)
            continue
        if node.op not in SUPPORTED_OPS and node.op not in REFERENCE_OPS:
            outcome.skip(node.name, node.op, Skip.UNSUPPORTED, NO_OPERATOR)
            continue
        if node.rule not in _RULES and not quant:  # Add & co. before opset 7: `broadcast`
            outcome.skip(node.name, node.op, Skip.UNSUPPORTED, _LEGACY)
            continue
        operands = [known.get(name, Shape.dynamic()) if name else None for name in node.inputs]
        if quant:
            planned: _Concrete | str = concrete_quant(node, operands, tensors.protos)
        else:
            planned = _concrete(node, operands, tensors, targets, measured)
        if isinstance(planned, str):
            outcome.skip(node.name, node.op, Skip.UNKNOWN_SHAPE, planned)
            continue
        concrete, outputs, fixed = planned
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
        try:
            feeds = _inputs(node, concrete, tensors, types, rng, fixed)
        except ModelError as err:
            raise ModelError(f"{path}: {err}") from None
        shown = tuple((name, Shape(concrete[i])) for i, name in enumerate(node.inputs) if name)
        run = NodeRun(node.name, node.op, shown)
        args = [feeds[name] for name in node.inputs if name]
        ours = run_node if node.op in SUPPORTED_OPS else run_reference
        run.results["bcast"] = attempt(ours, proto, args, opset_version=opset)
        try:
            one: onnx.ModelProto | HarnessError = one_node_model(
                model, proto, feeds, tensors.protos, opset
            )
        except Exception as err:  # bcast's own failure: no runtime is blamed for it
            one = HarnessError(f"cannot build the one-node model: {err}")
        runtime_feeds = {k: v for k, v in feeds.items() if k not in tensors.protos}
        for name, runner in usable.items():
            try:
                result = attempt(_request, runner, one, runtime_feeds)
            except IsolationError as err:  # it crashed, or ran out of time or memory
                raise IsolationError(f"{path}: {err} {node.name!r:.80}") from None
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
            if importlib.util.find_spec("onnxruntime") is None:
                notes.append(
                    'onnxruntime is not installed (pip install "bcast[onnxruntime]"); skipped'
                )
                continue
            found[name] = run_onnxruntime
        elif name == "openvino":
            if importlib.util.find_spec("openvino") is None:
                notes.append('openvino is not installed (pip install "bcast[openvino]"); skipped')
                continue
            found[name] = run_openvino
    return found, notes


def _request(runner: _Runner, model: onnx.ModelProto | HarnessError, feeds: Any) -> Any:
    """Run ``runner`` on a request checked first to be well formed (else `HarnessError`)."""
    if isinstance(model, HarnessError):
        raise model
    check_request(model, feeds)
    return runner(model, feeds)


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
        if not isinstance(location, str) or "\0" in location:
            raise ModelError(f"{where} at {location!r:.80}, which is not a file name (a NUL byte)")
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


_Concrete = tuple[list[tuple[int, ...]], int, dict[int, npt.NDArray[Any]]]


def _concrete(
    node: Node,
    operands: Sequence[Shape | None],
    tensors: _Tensors,
    computed: Mapping[str, Shape],
    probe: Probed = ({}, {}),
) -> _Concrete | str:
    """Choose a concrete shape per input (unknown dims take a value that fits).

    Returns the shapes, a bound of the output's elements (`output_elements`) and the
    values chosen for inputs that are not drawn at random (a computed Expand target), or
    why there are none.
    """
    shapes: list[Shape] = []
    probed, symbols = probe
    chosen: dict[str, int] = {}
    for index, (name, shape) in enumerate(zip(node.inputs, operands, strict=True)):
        if shape is not None and name in probed and is_open(shape):
            shape = with_probe(shape, probed[name])
            chosen = dict(symbols)  # the node's symbols take the probe's values
        if name in tensors:
            shapes.append(Shape(max(int(d), 0) for d in tensors.protos[name].dims))
        elif shape is None:
            shapes.append(Shape(()))
        elif shape.rank is None and not (node.rule is Rule.EXPAND and index == 1):
            return (
                f"no rank is known for input {name!r}: shape inference gives none, and "
                "running the model up to it in onnxruntime failed"
            )
        else:
            shapes.append(shape)
    if node.rule is Rule.GEMM:
        gemm = _concrete_gemm(node, shapes)
        if gemm is None:
            return "an input of Gemm is not of rank 2"
        return (*gemm, {})
    if node.rule is Rule.EXPAND:
        return _concrete_expand(node, shapes, tensors, computed)
    if node.rule is Rule.NORMALIZATION:  # Scale and B placed unidirectionally against X
        x = shapes[0]
        alignment: list[tuple[int | None, ...] | None] = [tuple(range(len(x.dims)))]
        alignment += [alignment_of([x, s], Mode.UNIDIRECTIONAL)[1] for s in shapes[1:]]
    else:
        alignment = list(alignment_of(shapes))
    concrete = concrete_shapes(shapes, alignment, chosen)
    return concrete, output_elements(concrete, alignment), {}


def _concrete_expand(
    node: Node, shapes: Sequence[Shape], tensors: _Tensors, computed: Mapping[str, Shape]
) -> _Concrete | str:
    """Expand: data aligned with the target's values (constant, else as propagated)."""
    target = node.inputs[1] if len(node.inputs) > 1 else ""
    if target in tensors:
        if tensors.elements(target) > _MAX_TARGET:
            return f"a target shape of {tensors.elements(target)} values"
        values = Shape(max(int(v), 0) for v in tensors.array(target).reshape(-1))
        data = concrete_shapes([shapes[0], values], alignment_of([shapes[0], values]), {})[0]
        return [data, shapes[1].to_tuple()], output_elements([data, values.to_tuple()]), {}
    values = computed.get(target, Shape.dynamic())
    if values.rank is None:  # values unknown: the target's length still gives the rank
        length = shapes[1].dims[0] if shapes[1].rank == 1 else None
        if length is None or not length.is_static:
            return f"the computed target shape {target!r} has unknown length"
        values = Shape([None] * length.lo)
    if values.rank is None or values.rank > _MAX_TARGET:
        return f"a target shape of {values.rank} values"
    pair = [shapes[0], values]
    data, chosen = concrete_shapes(pair, alignment_of(pair), {})
    fixed = {1: np.asarray(chosen, dtype=np.int64)}
    return [data, (len(chosen),)], output_elements([data, chosen]), fixed


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


def _elem_type(node: Node, index: int, types: Mapping[str, int]) -> int:
    """Return the input's ONNX element type as the model declares it.

    Where the model does not know it: bool for Where's condition and And/Or/Xor, int64 for
    Expand's target, else the known type of another input of the same type, else float.
    """
    known = types.get(node.inputs[index])
    if known:
        return known
    if (node.op == "Where" and index == 0) or node.op in ("And", "Or", "Xor"):
        return onnx.TensorProto.BOOL
    if node.rule is Rule.EXPAND and index == 1:
        return onnx.TensorProto.INT64
    skip = 0 if node.op == "Where" else (1 if node.rule is Rule.EXPAND else -1)
    for i, name in enumerate(node.inputs):
        if i != skip and i != index and types.get(name):
            return types[name]
    return onnx.TensorProto.FLOAT


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
    fixed: Mapping[int, npt.NDArray[Any]],
) -> dict[str, npt.NDArray[Any]]:
    feeds: dict[str, npt.NDArray[Any]] = {}
    for index, name in enumerate(node.inputs):
        if not name or name in feeds:
            continue
        if name in tensors:
            feeds[name] = tensors.array(name)
            continue
        if index in fixed:
            feeds[name] = fixed[index]
            continue
        positive = (node.op in _POSITIVE_SECOND and index == 1) or (node.op == "Pow" and index == 0)
        elem = _elem_type(node, index, types)
        try:
            dtype = helper.tensor_dtype_to_np_dtype(elem)
        except (KeyError, ValueError, TypeError):
            raise ModelError(
                f"input {name!r:.80} of node {node.name!r:.80} ({node.op}) has element type "
                f"{elem}, which ONNX does not define (or NumPy cannot hold)"
            ) from None
        feeds[name] = random_array(concrete[index], dtype, rng, positive=positive)
    return feeds
