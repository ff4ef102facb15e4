"""Run each broadcasting node of an OpenVINO IR in OpenVINO and in bcast, and compare.

`verify_ir` reads the IR (`bcast.openvino.reader`), propagates its shapes
(`bcast.models.propagate_shapes`), and for every broadcasting node (the element-wise ops
with ``auto_broadcast``, Select, Broadcast-1/-3, PRelu) builds a model of
that node alone (`bcast.openvino.runtime.run_node`): the same operator version and the same
``<data>`` attributes as written in the file, an absent PDPD axis left absent (OpenVINO then
reads 0), on concrete input shapes chosen as `bcast.onnx.verify` does. The node runs on
random inputs in OpenVINO's CPU plugin and through `bcast.ops`, which reads an absent axis
as the specification's -1, and places PRelu's slope per channel where it fits
(`bcast.core.channels.channel_plan`). Every input but a Broadcast's target and ``axes_mapping`` is a
parameter of the one-node model (an IR constant is replaced by random values of its shape).
GreaterEqual, LessEqual, NotEqual, FloorMod, Mod, SquaredDifference, the Bitwise ops and
Select run through their `bcast.ops` functions with the node's ``auto_broadcast``. A Broadcast whose
target is computed in the IR (ShapeOf -> Concat) runs on a target of the length its port
declares, whose values are the output dims OpenVINO infers for the node (numpy mode: the
output is the target; bidirectional: a target of the output's shape gives that output),
unknown entries chosen as unknown dims are. Nodes that cannot be run are skipped with a
note, as in `bcast.onnx.verify`: no concrete shapes (an input of unknown rank, a target
of unknown length, explicit mode without a constant axes_mapping), or inputs and outputs
over bcast's memory limit (checked before any input is drawn).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from bcast import ops
from bcast.arrays.views import broadcast_arrays
from bcast.core.channels import channel_plan
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.shape import Shape
from bcast.models import Graph, ModelError, Node, Rule, propagate_shapes
from bcast.models.dim_names import unused_dims
from bcast.models.inputs import (
    alignment_of,
    concrete_shapes,
    memory_problem,
    output_elements,
    pick,
    random_array,
)
from bcast.models.isolation import run_isolated
from bcast.models.lost_dims import is_lost
from bcast.models.verification import (
    NO_OPERATOR,
    NodeRun,
    Skip,
    Verification,
    attempt,
    compare,
)

__all__ = ["verify_ir"]

_BINARY: Final = {
    "Add": "add", "Subtract": "sub", "Multiply": "mul", "Divide": "div", "Power": "pow",
    "Equal": "equal", "Greater": "greater", "Less": "less",
    "LogicalAnd": "and_", "LogicalOr": "or_", "LogicalXor": "xor",
}  # fmt: skip
"""OpenVINO element-wise operators and the `bcast.ops` function of each."""
_EXTREMA: Final = {"Maximum": "max", "Minimum": "min"}
_REFERENCE: Final = {
    "GreaterEqual": "greater_or_equal", "LessEqual": "less_or_equal", "NotEqual": "not_equal",
    "FloorMod": "mod", "Mod": "mod", "SquaredDifference": "squared_difference",
    "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
}  # fmt: skip
"""OpenVINO's other element-wise operators and the `bcast.ops` function of each (Mod: C
fmod, ``fmod=1``; the Bitwise ops of bool: the logical ones, bit for bit)."""
_LOGICAL_OF: Final = {"BitwiseAnd": "and_", "BitwiseOr": "or_", "BitwiseXor": "xor"}
_FAKE: Final = "FakeQuantize"  # its four limits broadcast onto X (bcast.ops.fake_quantize)
_SUPPORTED: Final = frozenset(
    {*_BINARY, *_EXTREMA, *_REFERENCE, "Select", "Broadcast", "PReLU", "PRelu", _FAKE}
)
_OPERATOR: Final = (
    "verify runs the broadcasting operators bcast.ops implements; this operator's rule "
    "is checked by bcast check only"
)
_RULES: Final = frozenset({Rule.ELEMENTWISE, Rule.SELECT, Rule.BROADCAST, Rule.PRELU_CHANNEL})
_LOGICAL: Final = frozenset({"LogicalAnd", "LogicalOr", "LogicalXor"})
_INTEGERS: Final = {
    "I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64,
    "U8": np.uint8, "U16": np.uint16, "U32": np.uint32, "U64": np.uint64,
}  # fmt: skip
RUNTIME: Final = "openvino"


def verify_ir(
    path: str,
    *,
    runtimes: Sequence[str] = ("openvino",),
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
) -> Verification:
    """Run every broadcasting node of the OpenVINO IR at ``path`` and compare with bcast.

    Parameters
    ----------
    path : str
        An OpenVINO IR ``.xml`` file (its weights are the ``.bin`` beside it).
    runtimes : sequence of str
        The runtimes asked for: only ``"openvino"`` runs IR; ``"onnxruntime"`` is noted
        and skipped.
    dims : mapping of str to int, optional
        Values of the inputs' dims, named ``input.axis`` (``input_ids.1``) as the IR reader
        names them; a name no input dim has is reported as unused.
    seed : int
        Seed of the random inputs (each node draws from ``(seed, node index)``).

    Returns
    -------
    Verification

    Raises
    ------
    ModelError
        If the file is not a readable IR, openvino is not installed, or onnxruntime is the
        only runtime asked for.
    """
    if "openvino" not in runtimes:
        raise ModelError(
            f"{path}: onnxruntime cannot run OpenVINO IR; verify it with --runtime openvino"
        )
    if importlib.util.find_spec("openvino") is None:  # read and run in the worker process
        raise ModelError(f"{path}: verifying OpenVINO IR needs openvino (not installed)")
    try:
        from bcast.openvino.reader import layer_details, read_ir
    except ImportError as err:
        raise ModelError(
            f"{path}: verifying OpenVINO IR needs defusedxml ({err}); "
            'install it with: pip install "bcast[openvino]"'
        ) from None
    from bcast.openvino.reader import AXIS_KEY, ELEMENTWISE_AXIS_KEY
    from bcast.openvino.runtime import run_node

    graph = read_ir(path)
    layers, precisions = layer_details(path)
    shapes = propagate_shapes(graph, dims=dims)
    outcome = Verification(path, [RUNTIME], seed)
    outcome.unused_dims = unused_dims([graph], dims or {})
    if "onnxruntime" in runtimes:
        outcome.notes.append("onnxruntime cannot run OpenVINO IR; compared with openvino only")
    for index, (node, (version, data)) in enumerate(zip(graph.nodes, layers, strict=True)):
        if node.unmodelled and not is_lost(node):  # a TensorIterator/Loop/If: its bodies
            outcome.skip(node.name, node.op, Skip.IN_BODY, node.unmodelled)
        fake = node.rule is Rule.OPERATOR and node.op == _FAKE
        if node.rule is Rule.OPERATOR and not fake:
            outcome.skip(node.name, node.op, Skip.UNSUPPORTED, _OPERATOR)
        if node.rule not in _RULES and not fake:
            continue
        label = f"{node.name} ({node.op})"
        if node.op not in _SUPPORTED:
            outcome.skip(node.name, node.op, Skip.UNSUPPORTED, NO_OPERATOR)
            continue
        operands = [shapes.get(name, Shape.dynamic()) for name in node.inputs]
        planned = _concrete(node, operands, graph)
        if isinstance(planned, str):
            outcome.skip(node.name, node.op, Skip.UNKNOWN_SHAPE, planned)
            continue
        concrete, targets = planned
        itemsizes = [np.dtype(_dtype(node, i, precisions)).itemsize for i in range(len(concrete))]
        if node.rule is Rule.BROADCAST:
            itemsizes[1:] = [8] * (len(concrete) - 1)  # target and axes_mapping: int64
        problem = memory_problem(
            zip(concrete, itemsizes, strict=True),
            _output_elements(node, concrete, targets),
            itemsizes[0] if node.rule is Rule.BROADCAST else max(itemsizes),
            runtimes=1,
        )
        if problem is not None:
            outcome.skip(node.name, node.op, Skip.TOO_LARGE, problem)
            continue
        if node.mode is Mode.PDPD and not node.axis_written:
            key = AXIS_KEY.get((node.op, version), ELEMENTWISE_AXIS_KEY)
            outcome.notes.append(
                f"{label}: no {key} attribute: OpenVINO reads axis 0, bcast the spec's -1"
            )
        rng = np.random.default_rng([seed, index])
        levels = _levels(data) if fake else 0
        if fake:
            arrays = _fake_quantize_inputs(node, concrete, levels, rng)
        else:
            arrays = _inputs(node, concrete, targets, precisions, rng)
        shown = tuple((n, Shape(a.shape)) for n, a in zip(node.inputs, arrays, strict=True))
        written = node.axis if node.mode is Mode.PDPD and node.axis_written else None
        attribute = "mode" if node.rule is Rule.BROADCAST else "auto_broadcast"
        # As written (Broadcast-1 "none"); PRelu has no broadcast attribute.
        mode = None if node.mode is None else data.get(attribute, str(node.mode))
        run = NodeRun(node.name, node.op, shown, mode=mode, axis=written)
        run.results["bcast"] = attempt(_run_bcast, node, arrays, levels)
        constant = [node.rule is Rule.BROADCAST and i > 0 for i in range(len(arrays))]
        op = "PRelu" if node.op == "PReLU" else node.op  # IR's spelling; the op's type name
        result = attempt(
            run_isolated, "OpenVINO", f"running node {node.name!r:.80}", run_node,
            op, version, data, arrays, constant, where=path,
        )  # fmt: skip
        run.results[RUNTIME] = result
        run.comparisons[RUNTIME] = compare(run.results["bcast"], result, RUNTIME)
        outcome.record(run)
    return outcome


# -- bcast's side --------------------------------------------------------------------------


def _spec_axis(node: Node) -> dict[str, Any]:
    """Return the PDPD axis as bcast reads it (as written, else the spec's -1) as kwargs."""
    if node.mode is not Mode.PDPD:
        return {}
    return {"axis": node.axis if node.axis_written else -1}


def _run_bcast(node: Node, arrays: Sequence[npt.NDArray[Any]], levels: int) -> Any:
    mode = node.mode or Mode.NUMPY
    axis = _spec_axis(node)
    if node.op == _FAKE:  # the levels as the IR writes them; bcast places the limits itself
        return ops.fake_quantize(*arrays, levels=levels, broadcast=mode)
    if node.op in _BINARY:
        return getattr(ops, _BINARY[node.op])(arrays[0], arrays[1], broadcast=mode, **axis)
    if node.rule is Rule.PRELU_CHANNEL:  # the slope at X's channel axis where it fits
        x, slope = arrays
        placed = channel_plan(Shape(x.shape), Shape(slope.shape))
        return ops.prelu(x, slope.reshape(placed.aligned_shape(1)))
    if node.op in _EXTREMA:
        a, b = broadcast_arrays(arrays[0], arrays[1], mode=mode, **axis)
        return getattr(ops, _EXTREMA[node.op])(a, b)
    if node.op in _REFERENCE:
        a, b = arrays[0], arrays[1]
        name = _REFERENCE[node.op]
        if node.op in _LOGICAL_OF and a.dtype == np.bool_:
            name = _LOGICAL_OF[node.op]
        extra = {"fmod": 1} if node.op == "Mod" else {}
        return getattr(ops, name)(a, b, broadcast=mode, **axis, **extra)
    if node.op == "Select":  # pdpd: 'else' goes into 'then', then 'cond' into the result
        return ops.select(*arrays, broadcast=mode, **axis)
    target = tuple(int(v) for v in arrays[1])
    mapping = tuple(int(v) for v in arrays[2]) if node.mode is Mode.EXPLICIT else None
    return ops.broadcast(arrays[0], target, mapping, mode=mode, **axis)


# -- concrete shapes and inputs ------------------------------------------------------------


_Targets = dict[int, tuple[int, ...]]
"""The values of a Broadcast's target (1) and axes_mapping (2) inputs."""


def _concrete(
    node: Node, operands: Sequence[Shape], graph: Graph
) -> tuple[list[tuple[int, ...]], _Targets] | str:
    """Choose a concrete shape per input (unknown dims take the size they meet), or why not."""
    if node.rule is Rule.BROADCAST:
        return _concrete_broadcast(node, operands, graph)
    unknown = [
        name for name, shape in zip(node.inputs, operands, strict=True) if shape.rank is None
    ]
    if unknown:
        return f"no rank is known for input {unknown[0]!r}"
    return concrete_shapes(operands, _alignment(node, operands), {}), {}


def _alignment(node: Node, operands: Sequence[Shape]) -> list[tuple[int | None, ...] | None]:
    """Place each operand as bcast's rules align the node (right-aligned but for PDPD).

    PDPD places B (Select: 'else', then 'cond') into A (Select: 'then') from the axis: each
    is aligned by the rule against A. PRelu's slope goes where `channel_plan` places it.
    """
    if node.rule is Rule.PRELU_CHANNEL:
        try:
            placed = channel_plan(*operands).alignment
        except BroadcastError as err:
            placed = err.alignment or (None, None)
        if placed[1] is None:  # not decided by partial shapes: right-aligned
            return list(alignment_of(operands, Mode.UNIDIRECTIONAL))
        return list(placed)
    if node.mode is not Mode.PDPD:
        return list(alignment_of(operands))
    main = 1 if node.rule is Rule.SELECT else 0
    axis = _spec_axis(node)["axis"]
    result: list[tuple[int | None, ...] | None] = []
    for i, shape in enumerate(operands):
        if i == main:
            result.append(tuple(range(len(shape.dims))))
        else:
            pair = [operands[main], shape]
            result.append(alignment_of(pair, Mode.PDPD, axis=axis)[1])
    return result


def _output_elements(node: Node, concrete: Sequence[tuple[int, ...]], targets: _Targets) -> int:
    """Bound the output's elements: the target's (bidirectional: with data), else aligned."""
    if node.rule is not Rule.BROADCAST:
        shapes = [Shape(s) for s in concrete]
        return output_elements(concrete, _alignment(node, shapes))
    target = targets[1]
    if node.mode is Mode.BIDIRECTIONAL:
        return output_elements([concrete[0], target])
    return math.prod(max(int(v), 0) for v in target)


def _concrete_broadcast(
    node: Node, operands: Sequence[Shape], graph: Graph
) -> tuple[list[tuple[int, ...]], _Targets] | str:
    names = node.inputs
    data = operands[0]
    if data.rank is None:
        return f"no rank is known for input {names[0]!r}"
    if node.mode is Mode.EXPLICIT and node.axes_mapping is None:
        return "explicit mode without a constant axes_mapping"
    chosen: dict[str, int] = {}
    target = graph.constants.get(names[1]) if len(names) > 1 else None
    if target is None:
        target_or_why = _computed_target(node, operands, chosen)
        if isinstance(target_or_why, str):
            return target_or_why
        target = target_or_why
    values = Shape(max(int(v), 0) for v in target)
    placed = _data_axes(node, data, values)
    dims = []
    for i, dim in enumerate(data.dims):
        position = placed[i] if placed is not None and i < len(placed) else None
        meets = target[position] if position is not None and 0 <= position < len(target) else None
        dims.append(pick(dim, meets if meets != 1 else None, chosen))
    result = [tuple(dims), (len(target),)]
    targets: _Targets = {1: tuple(target)}
    if len(names) > 2 and names[2]:
        mapping_values = graph.constants.get(names[2])
        if mapping_values is None:
            return "explicit mode without a constant axes_mapping"
        result.append((len(mapping_values),))
        targets[2] = tuple(mapping_values)
    return result, targets


def _computed_target(
    node: Node, operands: Sequence[Shape], chosen: dict[str, int]
) -> tuple[int, ...] | str:
    """Choose the values of a target computed in the IR.

    Its length is its port's; its values are the output dims OpenVINO infers, unknown ones
    chosen as unknown dims are (symbols shared with the data).
    """
    name = node.inputs[1] if len(node.inputs) > 1 else ""
    length = operands[1] if len(operands) > 1 else Shape.dynamic()
    if length.rank != 1 or not length.dims[0].is_static:
        return f"the computed target shape {name!r} has unknown length"
    size = length.dims[0].lo
    out = node.output_shapes[0] if node.output_shapes else Shape.dynamic()
    if out.rank != size or node.mode is Mode.PDPD:
        out = Shape([None] * size)
    data = operands[0]
    reference = {}  # a target dim OpenVINO leaves open meets the data's static dim
    for axis, dim in zip(_data_axes(node, data, out) or (), data.dims, strict=False):
        if axis is not None and dim.is_static and dim.lo != 1:
            reference[axis] = dim.lo
    return tuple(pick(d, reference.get(i), chosen) for i, d in enumerate(out.dims))


def _data_axes(node: Node, data: Shape, target: Shape) -> tuple[int | None, ...] | None:
    """Return the target axis of each data axis, as bcast's rules align Broadcast's mode.

    The roles are those of `bcast.ops.broadcast`: numpy is unidirectional and pdpd places
    data (B) into the target (A); explicit and bidirectional take data first.
    """
    if node.mode is Mode.EXPLICIT:
        mapping = node.axes_mapping or ()
        return alignment_of([data, target], Mode.EXPLICIT, axes_mapping=mapping)[0]
    if node.mode is Mode.BIDIRECTIONAL:
        return alignment_of([data, target])[0]
    axis = _spec_axis(node).get("axis", -1)
    rule = Mode.PDPD if node.mode is Mode.PDPD else Mode.UNIDIRECTIONAL
    return alignment_of([target, data], rule, axis=axis)[1]


def _dtype(node: Node, index: int, precisions: Mapping[str, str]) -> npt.DTypeLike:
    """float32 for arithmetic, bool for logic and conditions, an integer the IR names."""
    if node.op in _LOGICAL or (node.op == "Select" and index == 0):
        return np.bool_
    # Both operands of a binary op share one type: the first's (Select: 'then').
    source = node.inputs[1 if node.op == "Select" else 0]
    precision = precisions.get(source, "").upper()
    if precision in ("BOOL", "BOOLEAN"):
        return np.bool_
    return _INTEGERS.get(precision, np.float32)


def _inputs(
    node: Node,
    concrete: Sequence[tuple[int, ...]],
    targets: _Targets,
    precisions: Mapping[str, str],
    rng: np.random.Generator,
) -> list[npt.NDArray[Any]]:
    arrays = []
    for index, shape in enumerate(concrete):
        if node.rule is Rule.BROADCAST and index > 0:
            arrays.append(np.asarray(targets[index], np.int64))
            continue
        positive = (node.op in ("Divide", "Power", "FloorMod", "Mod") and index == 1) or (
            node.op == "Power" and index == 0
        )
        dtype = _dtype(node, index, precisions)
        arrays.append(random_array(shape, dtype, rng, positive=positive))
    return arrays


def _levels(data: Mapping[str, str]) -> int:
    """Return a FakeQuantize's ``levels`` as the IR writes them (0 where it is no integer).

    >>> _levels({"levels": "256"}), _levels({"levels": "x"}), _levels({})
    (256, 0, 0)
    """
    text = data.get("levels", "").strip()
    return int(text) if text.lstrip("-").isdigit() else 0


def _fake_quantize_inputs(
    node: Node, concrete: Sequence[tuple[int, ...]], levels: int, rng: np.random.Generator
) -> list[npt.NDArray[Any]]:
    """Draw FakeQuantize's inputs: ordered limits, and X on the levels the limits make.

    X is drawn as ``in_low + k / (levels - 1) * (in_high - in_low)`` for a whole ``k`` from
    -1 to ``levels`` (below and above the range too), with the limits placed onto X as
    bcast places them. Each quotient then sits on a level, half a level from any rounding
    boundary: a runtime that places a limit elsewhere lands on other levels, and two
    correct ones agree to float32 rounding. Where the limits do not fit onto X as drawn
    (they broadcast past it), or ``levels`` is below 2, X is drawn at random.
    """
    shapes = [tuple(s) for s in concrete]
    low = rng.uniform(-2.0, -0.5, shapes[1]).astype(np.float32)
    high = rng.uniform(0.5, 2.0, shapes[2]).astype(np.float32)
    out_low = rng.uniform(-3.0, -1.0, shapes[3]).astype(np.float32)
    out_high = rng.uniform(1.0, 3.0, shapes[4]).astype(np.float32)
    placed = None
    if levels >= 2:  # else no levels to draw X on (bcast refuses it; the runtime may not)
        step = rng.integers(-1, levels + 1, shapes[0]).astype(np.float32)
        step /= np.float32(levels - 1)
        mode = node.mode or Mode.NUMPY
        try:
            placed = broadcast_arrays(step, low, high, mode=mode, **_spec_axis(node))
        except BroadcastError:
            placed = None
    if placed is None or placed[0].shape != shapes[0]:
        x = rng.uniform(-3.0, 3.0, shapes[0]).astype(np.float32)
    else:
        x = (placed[1] + placed[0] * (placed[2] - placed[1])).astype(np.float32)
    return [x, low, high, out_low, out_high]
