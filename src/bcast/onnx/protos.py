"""Values read off ONNX protos: shapes and symbols, small integer constants, attributes.

The reader (`bcast.onnx.reader`) builds its graph with these; each takes a proto and
returns bcast's values, never raising on what an exporter may write (an attribute of the
wrong type is the one `ModelError`: no exporter writes that).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

import numpy as np
import onnx
from onnx import numpy_helper

from bcast.core.arithmetic import expression_dim, named_dim, register_expression
from bcast.core.dim import Dim
from bcast.core.expressions import Expr, parse_expression
from bcast.core.shape import Shape
from bcast.models import Graph, ModelError

__all__ = [
    "DEFAULT_DOMAINS",
    "expression_dim",
    "invented",
    "attribute",
    "constant_node_ints",
    "item_size",
    "read_opsets",
    "shape_of",
    "small_values",
    "symbol",
    "tensor_ints",
]

DEFAULT_DOMAINS: Final = frozenset({"", "ai.onnx"})
_MAX_CONSTANT: Final = 64  # elements: shape-like constants only
_CACHED_BYTES: Final = 1 << 16  # a larger proto of a small tensor is decoded, not cached
_UNK: Final = re.compile(r"unk__\d+")
_ATTRIBUTE_TYPE: Final = {
    int: onnx.AttributeProto.INT,
    bool: onnx.AttributeProto.INT,
    float: onnx.AttributeProto.FLOAT,
    str: onnx.AttributeProto.STRING,
}
_NAMES: Final = frozenset(onnx.AttributeProto.AttributeType.values())


def read_opsets(imports: Any) -> dict[str, int]:
    """Return ``{domain: version}``, with ``ai.onnx`` read as the default domain ``""``."""
    found: dict[str, int] = {}
    for entry in imports:
        domain = "" if entry.domain in DEFAULT_DOMAINS else entry.domain
        found.setdefault(domain, int(entry.version))
    return found


def item_size(graph: Graph, name: str, elem_type: int) -> None:
    """Record the bytes per element of value ``name`` (nothing for an unknown elem_type)."""
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError, TypeError):
        return
    graph.item_sizes[name] = int(np.dtype(dtype).itemsize)


def invented(name: str) -> bool:
    """Tell whether ``name`` is one ONNX shape inference invents (``unk__3``), not a model's.

    >>> invented("unk__3"), invented("batch")
    (True, False)
    """
    return _UNK.fullmatch(name) is not None


def symbol(
    name: str,
    params: set[str] | frozenset[str],
    expressions: dict[str, Expr] | None = None,
) -> Dim:
    """Return the dim of a ``dim_param``: its symbol, cleaned where bcast's text cannot hold it.

    ``unk__N`` names that ONNX shape inference invented (not in ``params``, the model's own)
    are plain ``?``. A ``dim_param`` written as an expression (``Min(64, s41)``, as torch's
    dynamo exporter writes) is named by its canonical text, cleaned (``Min_64__s41_``), and
    recorded in ``expressions`` under that name, when ``expressions`` is given. One without
    a symbol (``-1``, ``2*4``) is a plain ``?``: a runtime binds such a name to any size.

    >>> str(symbol("batch", set())), str(symbol("unk__3", set())), str(symbol("a b", set()))
    ('batch', '?', 'a_b')
    >>> found = {}
    >>> str(symbol("Min(64,  s41)", set(), found)), {k: str(v) for k, v in found.items()}
    ('Min_64__s41_', {'Min_64__s41_': 'Min(64, s41)'})
    >>> str(symbol("2*4", set(), found)), str(symbol("-1", set(), found)), len(found)
    ('?', '?', 1)
    """
    if _UNK.fullmatch(name) and name not in params:
        return Dim.unknown()  # invented by ONNX shape inference: no identity worth keeping
    found = _expression(name) if expressions is not None else None
    if expressions is None or found is None:
        return named_dim(name)
    if not found[0].symbols:  # "-1", "2*4": a name runtimes bind to any size, as "?"
        return Dim.unknown()
    return register_expression(*found, expressions)


@functools.lru_cache(maxsize=4096)
def _expression(text: str) -> tuple[Expr, str] | None:
    """Return the expression ``text`` writes and its symbol's name; None for a plain name."""
    expr = parse_expression(text)
    if expr is None or expr.op == "sym":
        return None
    named = named_dim(str(expr)).name
    return None if named is None else (expr, named)


def shape_of(
    info: onnx.ValueInfoProto,
    params: set[str] | frozenset[str],
    expressions: dict[str, Expr] | None = None,
    seen: dict[bytes, Shape] | None = None,
) -> Shape:
    """Return the shape a value info declares (``[...]`` when it declares none).

    Dims written as expressions are recorded in ``expressions`` (see `symbol`). ``seen``
    remembers the shapes read for one graph (with one ``params`` and ``expressions``): a
    large graph declares the same few shapes thousands of times.
    """
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return Shape.dynamic()
    key = tensor.shape.SerializeToString() if seen is not None else b""
    if seen is not None and key in seen:
        return seen[key]
    dims: list[Dim] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value >= 0:
            dims.append(Dim.static(int(dim.dim_value)))
        elif dim.HasField("dim_param") and dim.dim_param:
            dims.append(symbol(dim.dim_param, params, expressions))
        else:
            dims.append(Dim.unknown())
    shape = Shape.of_dims(tuple(dims))
    if seen is not None:
        seen[key] = shape
    return shape


def attribute(proto: onnx.NodeProto, name: str, default: Any) -> Any:
    """Return the value of a node's attribute ``name``, or ``default``."""
    for attr in proto.attribute:
        if attr.name == name:
            wanted = _ATTRIBUTE_TYPE.get(type(default))
            if wanted is not None and attr.type != wanted:
                given = (
                    onnx.AttributeProto.AttributeType.Name(attr.type)
                    if attr.type in _NAMES
                    else attr.type
                )
                raise ModelError(
                    f"node {proto.name or proto.op_type!r:.80} ({proto.op_type}): attribute "
                    f"{name!r} must be an {onnx.AttributeProto.AttributeType.Name(wanted)}; "
                    f"it holds {given}"
                )
            return onnx.helper.get_attribute_value(attr)
    return default


def small_values(tensor: onnx.TensorProto) -> tuple[str, tuple[Any, ...]] | None:
    """Return NumPy's kind of a small tensor's type and its values, flat, as Python scalars.

    None for a tensor of more than one axis or more than 64 elements, external data, strings
    or data that does not decode. The reader asks for the same constants round after round
    (`bcast.onnx.reader`), and a model repeats them: a tensor is decoded once per content.

    >>> from onnx import helper, TensorProto
    >>> small_values(helper.make_tensor("t", TensorProto.INT64, [3], [2, -1, 5]))
    ('i', (2, -1, 5))
    >>> small_values(helper.make_tensor("t", TensorProto.FLOAT, [2, 2], [0.0] * 4)) is None
    True
    """
    if len(tensor.dims) > 1 or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return None
    if tensor.data_type == onnx.TensorProto.STRING:
        return None
    count = int(tensor.dims[0]) if tensor.dims else 1
    if not 0 <= count <= _MAX_CONSTANT:
        return None
    if tensor.ByteSize() > _CACHED_BYTES:  # more data than its dims hold: it will not decode
        return _decode(tensor)
    return _decoded(tensor.SerializeToString())


@functools.lru_cache(maxsize=4096)
def _decoded(data: bytes) -> tuple[str, tuple[Any, ...]] | None:
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return _decode(tensor)


def _decode(tensor: onnx.TensorProto) -> tuple[str, tuple[Any, ...]] | None:
    try:
        array = np.asarray(numpy_helper.to_array(tensor)).reshape(-1)
    except (ValueError, TypeError, RuntimeError):
        return None
    return array.dtype.kind, tuple(array.tolist())


def tensor_ints(tensor: onnx.TensorProto) -> tuple[int, ...] | None:
    """Return the values of a small integer tensor, or None (large, non-integer, external)."""
    if tensor.data_type not in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        return None
    found = small_values(tensor)
    return found[1] if found is not None else None


def constant_node_ints(proto: onnx.NodeProto) -> tuple[int, ...] | None:
    """Return the values of a small integer Constant node, or None."""
    for attr in proto.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
            return tensor_ints(attr.t)
        if attr.name == "value_ints":
            return tuple(int(v) for v in attr.ints) if len(attr.ints) <= _MAX_CONSTANT else None
        if attr.name == "value_int":
            return (int(attr.i),)
    return None
