"""Concrete shapes of values that shape inference leaves unknown, measured in onnxruntime.

Where ONNX shape inference and bcast's propagation give a broadcasting node's input no rank
(after ``ai.onnx.ml`` operators, for instance) or unnamed unknown dims (a Concat after a
computed Expand), ``bcast verify`` would otherwise skip the node or choose sizes that fit.
`probe_shapes` runs the part of the model that computes those values (the nodes they
depend on, nothing after) in onnxruntime on inputs drawn as the model declares them, and
returns the shapes they really have. A probe that fails (the model breaks before them)
gives nothing: the values stay unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper

from bcast.core.shape import Shape
from bcast.models import Node, Rule
from bcast.models.isolation import IsolationError, run_isolated

__all__ = ["Probed", "input_dims", "is_open", "probe_inputs", "probe_shapes", "with_probe"]

_DEFAULT: Final = 2
"""The size of an input dim that is neither static nor bound by ``dims``."""
_MAX_PROBES: Final = 64
"""Probes run one node at a time when the probe of all of them fails (a broken model)."""
Probed = tuple[dict[str, tuple[int, ...]], dict[str, int]]
"""Probed shapes by value name, and the values the input symbols took for them."""


def input_dims(model: onnx.ModelProto, dims: Mapping[str, int]) -> dict[str, int]:
    """Return the value each symbolic input dim takes in a probe: ``dims``, else 2.

    >>> x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", "seq", 4])
    >>> input_dims(helper.make_model(helper.make_graph([], "g", [x], [])), {"seq": 7})
    {'batch': 2, 'seq': 7}
    """
    chosen: dict[str, int] = {}
    for info in model.graph.input:
        for d in info.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param:
                chosen.setdefault(d.dim_param, int(dims.get(d.dim_param, _DEFAULT)))
    return chosen


def is_open(shape: Shape) -> bool:
    """Tell whether ``shape`` has unknown rank or an unnamed unknown dim (a probe fills it).

    >>> is_open(Shape.parse("[N,?]")), is_open(Shape.parse("[N,3]"))
    (True, False)
    """
    return shape.rank is None or any(not d.is_static and d.name is None for d in shape.dims)


def probe_inputs(
    model: onnx.ModelProto,
    nodes: Sequence[Node],
    shapes: Mapping[str, Shape],
    constants: Mapping[str, onnx.TensorProto],
    dims: Mapping[str, int],
    seed: int,
) -> Probed:
    """Measure the inputs of broadcasting nodes whose shapes are open (`is_open`).

    One probe of them all; if it fails (the model breaks before some), one per node, at
    most 64. Returns the shapes found and the input symbol values they were measured at.
    """
    groups = []
    for node in nodes:
        if node.rule is None:
            continue
        names = node.inputs[:1] if node.rule is Rule.EXPAND else node.inputs
        open_ = [n for n in names if n and n not in constants]
        open_ = [n for n in open_ if is_open(shapes.get(n, Shape.dynamic()))]
        if open_:
            groups.append(open_)
    if not groups:
        return {}, {}
    symbols = input_dims(model, dims)
    found = probe_shapes(model, [n for group in groups for n in group], symbols, seed)
    if not found:  # something between breaks the model: probe what runs, node by node
        for group in groups[:_MAX_PROBES]:
            found.update(probe_shapes(model, group, symbols, seed))
    return found, symbols


def with_probe(shape: Shape, probed: tuple[int, ...] | None) -> Shape:
    """Fill ``shape``'s unknown rank or unnamed unknown dims from a probe, if one fits.

    >>> str(with_probe(Shape.parse("[N,?]"), (2, 17))), str(with_probe(Shape.dynamic(), (4,)))
    ('[N,17]', '[4]')
    """
    if probed is None:
        return shape
    if shape.rank is None:
        return Shape(probed)
    if len(probed) != shape.rank or not all(
        d.contains(v) for d, v in zip(shape.dims, probed, strict=True)
    ):
        return shape
    filled = (
        v if not d.is_static and d.name is None else d
        for d, v in zip(shape.dims, probed, strict=True)
    )
    return Shape(filled)


def probe_shapes(
    model: onnx.ModelProto, names: Iterable[str], dims: Mapping[str, int], seed: int = 0
) -> dict[str, tuple[int, ...]]:
    """Run the nodes that compute ``names`` in onnxruntime; return the shapes they have.

    Parameters
    ----------
    model : onnx.ModelProto
    names : iterable of str
        Values of the graph (node outputs) whose shapes are wanted.
    dims : mapping of str to int
        Values of symbolic input dims (`input_dims`); other unknown dims take 2.
    seed : int
        Seed of the inputs drawn: integers in {0, 1} (valid token ids, masks, indices),
        floats in [-1, 1), random bools.

    Returns
    -------
    dict of str to tuple of int
        Empty when the probe fails.

    Examples
    --------
    >>> x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 3])
    >>> y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "g", [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> model.ir_version = 8
    >>> probe_shapes(model, ["r"], {"n": 5})
    {'r': (5, 3)}
    """
    wanted = [n for n in dict.fromkeys(names) if n]
    if not wanted:
        return {}
    try:
        pruned, fed = _pruned(model, wanted)
        rng = np.random.default_rng(seed)
        feeds = {info.name: _draw(info, dims, rng) for info in fed}
        # onnxruntime on the untrusted model: in the worker process, under the limits.
        return run_isolated(
            "onnxruntime", "measuring shapes", _run_shapes, pruned.SerializeToString(),
            wanted, feeds,
        )  # fmt: skip
    except IsolationError:  # it crashed, or ran out of time or memory: the model is unusable
        raise
    except Exception:  # the model breaks before these values, or the peer fails: nothing
        return {}


def _run_shapes(
    data: bytes, wanted: list[str], feeds: Mapping[str, npt.NDArray[Any]]
) -> dict[str, tuple[int, ...]]:
    """Run a serialized model in onnxruntime; return the shapes of the ``wanted`` values."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    values = session.run(wanted, dict(feeds))
    return {name: tuple(np.shape(v)) for name, v in zip(wanted, values, strict=True)}


def _pruned(model: onnx.ModelProto, wanted: list[str]) -> tuple[onnx.ModelProto, list[Any]]:
    """Cut the model to the nodes ``wanted`` depends on, with ``wanted`` as its outputs."""
    graph = model.graph
    needed = set(wanted)
    kept = []
    for node in reversed(graph.node):
        if any(out in needed for out in node.output):
            kept.append(node)
            needed.update(i for i in node.input if i)
            for attr in node.attribute:  # values If/Loop bodies read from this scope
                for sub in [attr.g, *attr.graphs]:
                    needed.update(i for n in sub.node for i in n.input if i)
    inits = [t for t in graph.initializer if t.name in needed]
    constant = {t.name for t in inits}
    fed = [i for i in graph.input if i.name in needed and i.name not in constant]
    outputs = [onnx.ValueInfoProto(name=n) for n in wanted]
    cut = helper.make_graph(list(reversed(kept)), "probe", fed, outputs, inits)
    probe = helper.make_model(cut, opset_imports=list(model.opset_import))
    probe.ir_version = model.ir_version
    probe.functions.extend(model.functions)
    return probe, fed


def _draw(info: Any, dims: Mapping[str, int], rng: np.random.Generator) -> npt.NDArray[Any]:
    tensor = info.type.tensor_type
    shape = tuple(
        d.dim_value if d.HasField("dim_value") else int(dims.get(d.dim_param, _DEFAULT))
        for d in tensor.shape.dim
    )
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 2, size=shape).astype(dtype)
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
