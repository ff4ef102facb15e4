"""The one-node requests of ``bcast verify`` for ONNX models, and bcast's reference side.

`one_node_model` builds a model of one node alone whose inputs are declared exactly as
they are fed (dtype and shape: a 0-d input stays 0-d) and whose outputs have the element
types the operator's definition gives. `check_request` holds a request against that
declaration before a runtime sees it: a request that is not well formed is bcast's own
bug, raised as `bcast.models.verification.HarnessError` and reported as such, never as
the runtime rejecting the node. `run_reference` is bcast's side of the broadcasting
operators `bcast.ops` lacks (`bcast.models.reference`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

from bcast.models.reference import elementwise, normalization
from bcast.models.verification import HarnessError
from bcast.onnx.node_kinds import NORMALIZATION_OPS

__all__ = ["REFERENCE_OPS", "check_request", "one_node_model", "output_type", "run_reference"]

REFERENCE_OPS: Final = {
    "GreaterOrEqual": "greater_equal", "LessOrEqual": "less_equal", "Mod": "floor_mod",
    "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
    "BitShift": "left_shift", "LayerNormalization": "", "RMSNormalization": "",
}  # fmt: skip
"""Operators `bcast.ops` lacks, run by `run_reference` (the `elementwise` kernel names)."""
_BOOL_OUT: Final = frozenset(
    {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor"}
)


def one_node_model(
    model: onnx.ModelProto,
    proto: onnx.NodeProto,
    feeds: Mapping[str, npt.NDArray[Any]],
    constants: Mapping[str, onnx.TensorProto],
    opset: int,
) -> onnx.ModelProto:
    """Build a model of ``proto`` alone: each fed input declared exactly as it is fed.

    Inputs named in ``constants`` become initializers; the others are graph inputs of the
    dtype and shape of their feed. Outputs take `output_type`.

    Examples
    --------
    >>> import numpy as np
    >>> node = helper.make_node("Less", ["x", "s"], ["y"])
    >>> feeds = {"x": np.zeros((2, 3), np.int64), "s": np.array(1, np.int64)}
    >>> empty = helper.make_model(helper.make_graph([], "g", [], []))
    >>> m = one_node_model(empty, node, feeds, {}, 17)
    >>> [(i.name, len(i.type.tensor_type.shape.dim)) for i in m.graph.input]
    [('x', 2), ('s', 0)]
    >>> m.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.BOOL
    True
    """
    inputs, inits = [], []
    for name, value in feeds.items():
        if name in constants:
            inits.append(numpy_helper.from_array(value, name))
        else:
            elem = helper.np_dtype_to_tensor_dtype(value.dtype)
            inputs.append(helper.make_tensor_value_info(name, elem, list(value.shape)))
    outputs = [
        helper.make_tensor_value_info(out, output_type(proto, i, feeds), None)
        for i, out in enumerate(proto.output)
        if out
    ]
    graph = helper.make_graph([proto], "one_node", inputs, outputs, inits)
    single = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    single.ir_version = model.ir_version
    return single


def output_type(proto: onnx.NodeProto, index: int, feeds: Mapping[str, Any]) -> int:
    """Return the element type of output ``index`` by the operator's definition.

    From the operator and the fed inputs, not from the model's inference: that has no
    type for a value after a node it could not infer, and an UNDEFINED (0) output makes
    onnxruntime refuse the model ("Invalid tensor data type 0.") for a reason of bcast's
    own making.

    Examples
    --------
    >>> import numpy as np
    >>> node = helper.make_node("Add", ["a", "b"], ["y"])
    >>> output_type(node, 0, {"a": np.zeros(2, np.float16)}) == onnx.TensorProto.FLOAT16
    True
    """
    if proto.op_type in _BOOL_OUT:
        return int(onnx.TensorProto.BOOL)
    if proto.op_type in NORMALIZATION_OPS and index > 0:
        return int(onnx.TensorProto.FLOAT)  # Mean, InvStdDev: stash_type float32
    if proto.op_type in ("QuantizeLinear", "DequantizeLinear"):
        attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        if attrs.get("output_dtype"):
            return int(attrs["output_dtype"])
        if proto.op_type == "DequantizeLinear":  # the scale's type
            return int(helper.np_dtype_to_tensor_dtype(np.asarray(feeds[proto.input[1]]).dtype))
        if len(proto.input) < 3 or not proto.input[2]:
            return int(onnx.TensorProto.UINT8)  # QuantizeLinear without a zero point
        return int(helper.np_dtype_to_tensor_dtype(np.asarray(feeds[proto.input[2]]).dtype))
    source = proto.input[1] if proto.op_type == "Where" else proto.input[0]
    return int(helper.np_dtype_to_tensor_dtype(np.asarray(feeds[source]).dtype))


def check_request(model: onnx.ModelProto, feeds: Mapping[str, Any]) -> None:
    """Raise `HarnessError` unless ``feeds`` match ``model``'s inputs exactly.

    Every output has an element type; every input is fed an ndarray of its declared
    dtype and shape (a NumPy scalar, a ``[1]`` for a ``[]`` is bcast's own bug).

    Examples
    --------
    >>> import numpy as np
    >>> x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [])
    >>> y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    >>> m = helper.make_model(helper.make_graph([], "g", [x], [y]))
    >>> check_request(m, {"x": np.zeros((), np.float32)})
    >>> check_request(m, {"x": np.zeros((1,), np.float32)})
    Traceback (most recent call last):
    ...
    bcast.models.verification.HarnessError: input 'x' is declared float32[] but fed float32[1]
    """
    for info in model.graph.output:
        if not info.type.tensor_type.elem_type:
            raise HarnessError(f"output {info.name!r} of the one-node model has no element type")
    for info in model.graph.input:
        declared = info.type.tensor_type
        value = feeds.get(info.name)
        if not isinstance(value, np.ndarray):
            raise HarnessError(f"input {info.name!r} is fed {type(value).__name__}, not an array")
        shape = tuple(d.dim_value for d in declared.shape.dim)
        dtype = helper.tensor_dtype_to_np_dtype(declared.elem_type)
        if value.dtype != dtype or value.shape != shape:
            raise HarnessError(
                f"input {info.name!r} is declared {dtype}{list(shape)} but fed "
                f"{value.dtype}{list(value.shape)}"
            )


def run_reference(proto: onnx.NodeProto, args: Sequence[Any], opset_version: int = 0) -> Any:
    """Run a node of `REFERENCE_OPS` on bcast's side (broadcast by bcast, NumPy kernels).

    Parameters
    ----------
    proto : onnx.NodeProto
    args : sequence of numpy.ndarray
        The node's present inputs, in order.
    opset_version : int
        Accepted for symmetry with `bcast.onnx.backend.run_node`; unused.

    Examples
    --------
    >>> import numpy as np
    >>> node = helper.make_node("GreaterOrEqual", ["a", "b"], ["y"])
    >>> run_reference(node, [np.array([[1], [2]]), np.array([2, 1])])
    array([[False,  True],
           [ True,  True]])
    """
    attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
    op = proto.op_type
    if op in NORMALIZATION_OPS:
        return normalization(
            args[0],
            args[1],
            args[2] if op == "LayerNormalization" and len(args) > 2 else None,
            axis=int(attrs.get("axis", -1)),
            epsilon=float(attrs.get("epsilon", 1e-5)),
            rms=op == "RMSNormalization",
            stash_float32=int(attrs.get("stash_type", 1)) == 1,
        )
    kind = REFERENCE_OPS[op]
    if op == "Mod" and attrs.get("fmod", 0):
        kind = "truncated_mod"
    if op == "BitShift" and attrs.get("direction") == b"RIGHT":
        kind = "right_shift"
    return elementwise(kind, args[0], args[1])
