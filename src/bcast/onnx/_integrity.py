"""What protobuf parsing lets through: ONNX models that parse but are broken.

A truncated file often still parses. `check_integrity` refuses the two breakages that
onnxruntime refuses too and that a reader would otherwise take for a valid model, and
(`check_structure`) graphs with cycles and function calls that nest or expand past bounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Final

import onnx

from bcast.models import ModelError
from bcast.models.graph import topological_order
from bcast.onnx.protos import FIELDS, ITEM_SIZES

__all__ = ["MAX_EXPANDED_NODES", "MAX_NESTING", "check_integrity", "check_structure", "graphs"]

_SUB_BYTE: Final = frozenset(
    {"UINT4", "INT4", "FLOAT4E2M1", "UINT2", "INT2", "FLOAT6E2M3", "FLOAT6E3M2"}
)  # packed types: their raw size is not count * itemsize


def check_integrity(path: str, model: onnx.ModelProto) -> None:
    """Refuse a model that parses but is broken (a truncated file often still parses).

    ``onnx.checker.check_model`` would also refuse models that run (graph outputs without a
    shape, for one), so only two checks of its are made, both cheap and both fatal to
    onnxruntime: IR version 3 and later must import an operator set, and an initializer
    stored in the file must hold exactly the data its dims call for.
    """
    if model.ir_version >= 3 and not model.opset_import:
        raise ModelError(
            f"{path}: broken ONNX model: no opset_import (IR version {model.ir_version} "
            "requires one; a truncated file?)"
        )
    every = list(graphs(model.graph))
    check_structure(path, model, every)
    for graph in every:
        for tensor in graph.initializer:
            problem = _data_problem(tensor)
            if problem:
                raise ModelError(
                    f"{path}: broken ONNX model: initializer {tensor.name!r} {problem}"
                )


def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """Yield ``graph`` and every graph nested in its nodes' attributes."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from graphs(sub)


def _data_problem(tensor: onnx.TensorProto) -> str:
    """Say how a stored tensor's data disagrees with its dims ("" when it does not)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.HasField("segment"):
        return ""
    if any(d < 0 for d in tensor.dims):
        return f"has a negative dim in {list(tensor.dims)}"
    count = math.prod(int(d) for d in tensor.dims)
    itemsize, field = ITEM_SIZES.get(tensor.data_type), FIELDS.get(tensor.data_type)
    if itemsize is None or field is None:
        return ""  # an undefined or unknown type: nothing to measure against
    type_name = onnx.TensorProto.DataType.Name(tensor.data_type)
    dims = list(tensor.dims)
    if tensor.HasField("raw_data"):
        if type_name in _SUB_BYTE or tensor.data_type == onnx.TensorProto.STRING:
            held, wanted = len(tensor.raw_data), None if count else 0
        else:
            held, wanted = len(tensor.raw_data), count * itemsize
        unit = "bytes"
    else:
        held = len(getattr(tensor, field))
        per = 2 if type_name.startswith("COMPLEX") else 1
        wanted = None if type_name in _SUB_BYTE else count * per
        unit = "values"
    if wanted is None:  # packed sub-byte types: only "no data at all" is certain
        return f"has dims {dims} but holds no data" if count and not held else ""
    if held != wanted:
        return f"has dims {dims} ({wanted:,} {unit} of {type_name}) but holds {held:,} {unit}"
    return ""


MAX_NESTING: Final = 64
"""Bodies and function calls nested deeper than this make a model unreadable."""
MAX_OPSET: Final = 2**31 - 1
"""Operator set versions above this are refused (ONNX's own lookups take a 32-bit int)."""
MAX_EXPANDED_NODES: Final = 200_000
"""Nodes a model may hold with every function call expanded (ONNX's inference inlines them)."""


def check_structure(path: str, model: onnx.ModelProto, every: list[onnx.GraphProto]) -> None:
    """Refuse, before any expansion, a model whose graphs cycle or whose functions explode.

    A node that reads (directly or through other nodes) a value it writes itself makes
    ONNX's shape inference grow without bound; so do model-local functions that call each
    other in a chain that doubles at each level. The expanded size is counted from the
    call graph, each function once: nothing is expanded. ``every``: the model's graph and
    its bodies (`graphs`).
    """
    functions = {(f.domain, f.name, f.overload): f for f in model.functions}
    sizes: dict[tuple[str, str, str], tuple[int, int]] = {}
    visiting: set[tuple[str, str, str]] = set()

    def measure(nodes: Any, depth: int) -> tuple[int, int]:
        """Return (expanded nodes, nesting depth) of a list of nodes."""
        if depth > MAX_NESTING:
            raise ModelError(
                f"{path}: unreadable ONNX model: bodies and function calls nest deeper than "
                f"{MAX_NESTING} levels"
            )
        total, deepest = 0, depth
        for node in nodes:
            total += 1
            for attr in node.attribute:
                bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs
                for body in bodies:
                    _check_acyclic(path, body.node, f"a body of node {node.name!r}")
                    count, level = measure(body.node, depth + 1)
                    total, deepest = total + count, max(deepest, level)
            key = (node.domain, node.op_type, node.overload)
            function = functions.get(key)
            if function is not None and key not in visiting:  # recursion: reported later
                if key not in sizes:
                    visiting.add(key)
                    _check_acyclic(path, function.node, f"function {node.domain}.{node.op_type}")
                    count, level = measure(function.node, 0)
                    visiting.discard(key)
                    sizes[key] = (count, level)
                count, level = sizes[key]
                total, deepest = total + count, max(deepest, depth + 1 + level)
                if deepest > MAX_NESTING:
                    measure((), deepest)
            if total > MAX_EXPANDED_NODES:
                raise ModelError(
                    f"{path}: unreadable ONNX model: its model-local functions expand to more "
                    f"than {MAX_EXPANDED_NODES:,} nodes"
                )
        return total, deepest

    _check_text(path, model, every)
    for imports in [model.opset_import, *(f.opset_import for f in model.functions)]:
        for entry in imports:
            if not 0 <= entry.version <= MAX_OPSET:
                raise ModelError(
                    f"{path}: unreadable ONNX model: it imports version {entry.version} of "
                    f"operator set {entry.domain or 'ai.onnx'!r:.60}, which is no version"
                )
    _check_acyclic(path, model.graph.node, "the graph")
    measure(model.graph.node, 0)


def _check_text(path: str, model: onnx.ModelProto, every: list[onnx.GraphProto]) -> None:
    """Refuse names that are not UTF-8 text (protobuf hands them over as bytes).

    ``every`` is the model's graph and the bodies in it (`graphs`).
    """
    bodies: list[Any] = [*every]
    for function in model.functions:
        bodies.append(function)
        for node in function.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    bodies.extend(graphs(attr.g))
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for sub in attr.graphs:
                        bodies.extend(graphs(sub))
    for body in bodies:
        texts: list[object] = [body.name]
        for node in body.node:
            texts.extend((node.name, node.op_type, node.domain, *node.input, *node.output))
        for info in [*getattr(body, "value_info", ()), *body.input, *body.output]:
            if isinstance(info, str):
                texts.append(info)
                continue
            texts.append(info.name)
            if info.type.HasField("tensor_type"):
                texts.extend(d.dim_param for d in info.type.tensor_type.shape.dim)
        texts.extend(t.name for t in getattr(body, "initializer", ()))
        bad = next((t for t in texts if not isinstance(t, str)), None)
        if bad is not None:
            raise ModelError(
                f"{path}: unreadable ONNX model: a name is not UTF-8 text ({bad!r:.60})"
            )


def _check_acyclic(path: str, nodes: Any, where: str) -> None:
    """Raise `ModelError` if a node of ``nodes`` depends on its own output."""
    _, stuck = topological_order([n.input for n in nodes], [n.output for n in nodes])
    if stuck is not None:
        node = nodes[stuck]
        name = node.name or node.op_type
        raise ModelError(
            f"{path}: unreadable ONNX model: {where} has a cycle through node {name!r} "
            f"({node.op_type})"
        )
