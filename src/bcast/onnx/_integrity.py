"""What protobuf parsing lets through: ONNX models that parse but are broken.

A truncated file often still parses. `check_integrity` refuses the two breakages that
onnxruntime refuses too and that a reader would otherwise take for a valid model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import numpy as np
import onnx

from bcast.models import ModelError

__all__ = ["check_integrity", "graphs"]

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
    for graph in graphs(model.graph):
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
    count = int(np.prod([int(d) for d in tensor.dims], dtype=object))
    try:
        itemsize = int(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize)
        field = onnx.helper.tensor_dtype_to_field(tensor.data_type)
    except (KeyError, ValueError, TypeError):
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
