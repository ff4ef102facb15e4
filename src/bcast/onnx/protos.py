"""Values read off ONNX protos: shapes and symbols, small integer constants, attributes.

The reader (`bcast.onnx.reader`) builds its graph with these; each takes a proto and
returns bcast's values, never raising on what an exporter may write (an attribute of the
wrong type is the one `ModelError`: no exporter writes that).
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Callable, Sequence
from typing import Any, Final

import onnx

from bcast.core.arithmetic import expression_dim, named_dim, register_expression
from bcast.core.dim import Dim
from bcast.core.expressions import Expr, parse_expression
from bcast.core.shape import Shape
from bcast.models import Graph, ModelError

__all__ = [
    "DEFAULT_DOMAINS",
    "FIELDS",
    "ITEM_SIZES",
    "expression_dim",
    "invented",
    "attribute",
    "attribute_value",
    "constant_node_ints",
    "item_size",
    "read_opsets",
    "shape_of",
    "small_values",
    "symbol",
    "tensor_ints",
    "tensor_type",
    "value_info",
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

# What ONNX's helpers say of each element type (onnx.helper.tensor_dtype_to_np_dtype's
# itemsize, tensor_dtype_to_field), written out: the model's worker reads a model without
# loading NumPy or onnx.helper (bcast._spawn.lean_onnx). Tests hold them to ONNX's own.
_T = onnx.TensorProto
ITEM_SIZES: Final[dict[int, int]] = {
    _T.FLOAT: 4, _T.UINT8: 1, _T.INT8: 1, _T.UINT16: 2, _T.INT16: 2, _T.INT32: 4,
    _T.INT64: 8, _T.STRING: 8, _T.BOOL: 1, _T.FLOAT16: 2, _T.DOUBLE: 8, _T.UINT32: 4,
    _T.UINT64: 8, _T.COMPLEX64: 8, _T.COMPLEX128: 16, _T.BFLOAT16: 2,
    **dict.fromkeys(range(17, 29), 1),  # FLOAT8E4M3FN .. FLOAT6E3M2: one byte each
}  # fmt: skip
"""Bytes per element (NumPy's itemsize) of each ONNX element type."""
FIELDS: Final[dict[int, str]] = {
    **dict.fromkeys(ITEM_SIZES, "int32_data"),
    _T.FLOAT: "float_data", _T.COMPLEX64: "float_data", _T.DOUBLE: "double_data",
    _T.COMPLEX128: "double_data", _T.INT64: "int64_data", _T.STRING: "string_data",
    _T.UINT32: "uint64_data", _T.UINT64: "uint64_data",
}  # fmt: skip
"""The field of a TensorProto that holds each element type's values when not raw."""
# (struct format, kind, how a value stored in int32_data/uint64_data becomes the element)
_DECODED: Final[dict[int, tuple[str, str, Callable[[int], Any] | None]]] = {
    _T.FLOAT: ("<f", "f", None),
    _T.DOUBLE: ("<d", "f", None),
    _T.FLOAT16: ("<e", "f", lambda v: struct.unpack("<e", struct.pack("<H", v & 0xFFFF))[0]),
    _T.FLOAT8E5M2: ("<B", "f", lambda v: _e5m2(v & 0xFF)),  # a float16's top byte
    _T.INT8: ("<b", "i", lambda v: ((v & 0xFF) ^ 0x80) - 0x80),
    _T.UINT8: ("<B", "u", lambda v: v & 0xFF),
    _T.INT16: ("<h", "i", lambda v: ((v & 0xFFFF) ^ 0x8000) - 0x8000),
    _T.UINT16: ("<H", "u", lambda v: v & 0xFFFF),
    _T.INT32: ("<i", "i", None),
    _T.UINT32: ("<I", "u", lambda v: v & 0xFFFFFFFF),
    _T.INT64: ("<q", "i", None),
    _T.UINT64: ("<Q", "u", None),
    _T.BOOL: ("<B", "b", lambda v: v & 0xFF != 0),
}


def _e5m2(byte: int) -> float:
    value: float = struct.unpack("<e", bytes((0, byte)))[0]
    return value


def read_opsets(imports: Any) -> dict[str, int]:
    """Return ``{domain: version}``, with ``ai.onnx`` read as the default domain ``""``."""
    found: dict[str, int] = {}
    for entry in imports:
        domain = "" if entry.domain in DEFAULT_DOMAINS else entry.domain
        found.setdefault(domain, int(entry.version))
    return found


def item_size(graph: Graph, name: str, elem_type: int) -> None:
    """Record the bytes per element of value ``name`` (nothing for an unknown elem_type)."""
    size = ITEM_SIZES.get(elem_type)
    if size is not None:
        graph.item_sizes[name] = size


def tensor_type(elem_type: int, dims: Sequence[int | str | None]) -> onnx.TypeProto:
    """Return the type of a tensor, as ``onnx.helper.make_tensor_type_proto`` makes it.

    >>> tensor_type(1, [2, "n", None]).tensor_type.shape.dim[1].dim_param
    'n'
    """
    found = onnx.TypeProto()
    tensor = found.tensor_type
    tensor.elem_type = elem_type
    shape = tensor.shape
    shape.dim.extend([])  # an empty shape is a shape (rank 0), as ONNX's helper writes it
    for d in dims:
        dim = shape.dim.add()
        if isinstance(d, int):
            dim.dim_value = d
        elif isinstance(d, str):
            dim.dim_param = d
    return found


def value_info(name: str, elem_type: int, dims: Sequence[int | str | None]) -> onnx.ValueInfoProto:
    """Return a value's ``ValueInfoProto``, as ``onnx.helper.make_tensor_value_info`` does."""
    found = onnx.ValueInfoProto()
    found.name = name
    found.type.CopyFrom(tensor_type(elem_type, dims))
    return found


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
            return attribute_value(attr)
    return default


_VALUES: Final[dict[int, Callable[[onnx.AttributeProto], Any]]] = {
    onnx.AttributeProto.FLOAT: lambda a: a.f,
    onnx.AttributeProto.INT: lambda a: a.i,
    onnx.AttributeProto.STRING: lambda a: a.s,
    onnx.AttributeProto.TENSOR: lambda a: a.t,
    onnx.AttributeProto.SPARSE_TENSOR: lambda a: a.sparse_tensor,
    onnx.AttributeProto.GRAPH: lambda a: a.g,
    onnx.AttributeProto.TYPE_PROTO: lambda a: a.tp,
    onnx.AttributeProto.FLOATS: lambda a: list(a.floats),
    onnx.AttributeProto.INTS: lambda a: list(a.ints),
    onnx.AttributeProto.STRINGS: lambda a: list(a.strings),
    onnx.AttributeProto.TENSORS: lambda a: list(a.tensors),
    onnx.AttributeProto.SPARSE_TENSORS: lambda a: list(a.sparse_tensors),
    onnx.AttributeProto.GRAPHS: lambda a: list(a.graphs),
    onnx.AttributeProto.TYPE_PROTOS: lambda a: list(a.type_protos),
    onnx.AttributeProto.UNDEFINED: lambda a: None,
}


def attribute_value(attr: onnx.AttributeProto) -> Any:
    """Return an attribute's value as ``onnx.helper.get_attribute_value`` does.

    >>> from onnx import helper
    >>> attribute_value(helper.make_attribute("perm", [1, 0]))
    [1, 0]
    """
    if attr.ref_attr_name:
        raise ValueError(f"Cannot get value of reference attribute: {attr}")
    read = _VALUES.get(attr.type)
    if read is None:
        raise ValueError(f"Unsupported ONNX attribute: {attr}")
    return read(attr)


def small_values(tensor: onnx.TensorProto) -> tuple[str, tuple[Any, ...]] | None:
    """Return NumPy's kind of a small tensor's type and its values, flat, as Python scalars.

    Integer, bool and real types, read as ``onnx.numpy_helper.to_array`` reads them (raw
    data little-endian; the typed fields cast as NumPy casts them). None for a tensor of
    more than one axis or more than 64 elements, external data, any other type or data
    that does not match its dims. The reader asks for the same constants round after round
    (`bcast.onnx.reader`), and a model repeats them: a tensor is decoded once per content.

    >>> from onnx import helper, TensorProto
    >>> small_values(helper.make_tensor("t", TensorProto.INT64, [3], [2, -1, 5]))
    ('i', (2, -1, 5))
    >>> small_values(helper.make_tensor("t", TensorProto.FLOAT, [2, 2], [0.0] * 4)) is None
    True
    """
    if len(tensor.dims) > 1 or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return None
    if tensor.data_type not in _DECODED:
        return None
    count = int(tensor.dims[0]) if tensor.dims else 1
    if not 0 <= count <= _MAX_CONSTANT:
        return None
    if tensor.ByteSize() > _CACHED_BYTES:  # a long name, or more data than its dims hold
        return _decode(tensor)
    return _decoded(tensor.SerializeToString())


@functools.lru_cache(maxsize=4096)
def _decoded(data: bytes) -> tuple[str, tuple[Any, ...]] | None:
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return _decode(tensor)


def _decode(tensor: onnx.TensorProto) -> tuple[str, tuple[Any, ...]] | None:
    if tensor.HasField("segment"):
        return None
    form, kind, cast = _DECODED[tensor.data_type]
    count = math.prod(tensor.dims)
    if tensor.HasField("raw_data"):
        raw = tensor.raw_data
        size = struct.calcsize(form)
        if len(raw) != count * size:
            return None
        values = [v for (v,) in struct.iter_unpack(form, raw)]
        if tensor.data_type == onnx.TensorProto.BOOL:
            return kind, tuple(v != 0 for v in values)
        if tensor.data_type == onnx.TensorProto.FLOAT8E5M2:
            return kind, tuple(_e5m2(v) for v in values)
        return kind, tuple(values)
    stored = getattr(tensor, FIELDS[tensor.data_type])
    if len(stored) != count:
        return None
    return kind, tuple(stored) if cast is None else tuple(cast(v) for v in stored)


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
