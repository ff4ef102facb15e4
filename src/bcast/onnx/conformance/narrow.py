"""Narrow element types across Python APIs that cannot take them, without changing a value.

onnxruntime's Python API cannot feed or fetch bfloat16, float8 or 4-bit arrays, and
OpenVINO's hands bfloat16 back as float16 and 4-bit types packed two to a byte. A runtime
configuration holding `WIDEN` gets, from the worker, a model whose narrow-typed graph
inputs are float32 (int8, uint8) inputs cast to their type before the node, and whose
narrow outputs are cast to the wide type after it; the worker casts the outputs back. Both
casts are exact for every value of the narrow type (``saturate=0`` keeps float8
infinities), so the node under test sees exactly the case's values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

__all__ = ["WIDEN", "narrow_back", "widen"]

Array = npt.NDArray[Any]

WIDEN: Final = {"narrow_types": "through lossless Cast nodes"}
"""The configuration entry that asks the worker for `widen` (shown in the report)."""

_WIDE: Final = {"int4": "int8", "int2": "int8", "uint4": "uint8", "uint2": "uint8"}


def widen(model: bytes, inputs: Mapping[str, Array]) -> tuple[bytes, dict[str, Array], list[Any]]:
    """Let narrow-typed graph inputs and outputs cross onnxruntime's Python API.

    Each bfloat16, float8, float4 or 4- and 2-bit input becomes a float32 (int8, uint8)
    input cast to its type before the node; each such output is cast to the wide type
    after it. The values are exact both ways (saturate=0 keeps float8 infinities).
    Returns the model, the feeds and, per output, the NumPy dtype to cast it back to
    (None when it was not widened).
    """
    proto = onnx.ModelProto()
    proto.ParseFromString(model)
    graph = proto.graph
    feeds = dict(inputs)

    def wide_of(elem: int) -> int | None:
        name = TensorProto.DataType.Name(elem).lower()
        if name in _WIDE:
            return int(TensorProto.DataType.Value(_WIDE[name].upper()))
        if name.startswith(("bfloat16", "float8", "float4")):
            return int(TensorProto.FLOAT)
        return None

    def cast(source: str, target: str, to: int) -> onnx.NodeProto:
        name = TensorProto.DataType.Name(to).lower()
        extra: dict[str, Any] = {"saturate": 0} if name.startswith(("float8", "float4")) else {}
        return helper.make_node("Cast", [source], [target], to=to, **extra)

    before, after = [], []
    for value in graph.input:
        elem = value.type.tensor_type.elem_type
        wide = wide_of(elem)
        if wide is None:
            continue
        before.append(cast(value.name + "__wide", value.name, elem))
        feeds[value.name + "__wide"] = feeds.pop(value.name).astype(
            helper.tensor_dtype_to_np_dtype(wide)
        )
        value.name += "__wide"
        value.type.tensor_type.elem_type = wide
    narrow: list[Any] = []
    for value in graph.output:
        elem = value.type.tensor_type.elem_type
        wide = wide_of(elem)
        narrow.append(None if wide is None else helper.tensor_dtype_to_np_dtype(elem))
        if wide is None:
            continue
        after.append(cast(value.name, value.name + "__wide", wide))
        value.name += "__wide"
        value.type.tensor_type.elem_type = wide
    if not before and not after:
        return model, feeds, narrow
    nodes = [*before, *graph.node, *after]
    del graph.node[:]
    graph.node.extend(nodes)
    return bytes(proto.SerializeToString()), feeds, narrow


def narrow_back(outputs: list[Array], narrow: list[Any]) -> list[Array]:
    """Cast each widened output back to its narrow type (exact: it came from that type).

    >>> import ml_dtypes
    >>> narrow_back([np.array([1.5], np.float32)], [ml_dtypes.bfloat16])[0].dtype
    dtype(bfloat16)
    """
    return [
        np.asarray(y) if n is None else np.asarray(y).astype(n)
        for y, n in zip(outputs, narrow, strict=False)
    ]
