"""The key/value cache outputs of onnxruntime's attention operators: ``past + seq`` (issue 37).

A decoder exported for onnxruntime with a KV cache feeds ``past`` into ``com.microsoft``
Attention or MultiHeadAttention and reads ``present`` out; its length along the sequence is
``past_sequence_length + sequence_length`` (onnxruntime's contrib op definitions,
``bert_defs.cc``). `present_shapes` writes that sum as a dim expression, so that what reads
``present`` (the next step's cache, an Add with a mask of ``total`` positions) is checked
against ``past + seq``.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx

from bcast.core.arithmetic import expr_of, expression_dim, total
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.onnx.protos import attribute

__all__ = ["present_shapes"]


def _sum(a: Dim, b: Dim, expressions: dict[str, Expr]) -> Dim:
    parts = [expr_of(a, expressions), expr_of(b, expressions)]
    if any(p is None for p in parts):
        return Dim.unknown()
    return expression_dim(total([p for p in parts if p is not None]), expressions)


def _given(proto: onnx.NodeProto, inputs: Sequence[Shape], index: int) -> Shape | None:
    if index >= len(proto.input) or not proto.input[index] or index >= len(inputs):
        return None
    return inputs[index] if inputs[index].rank is not None else None


def present_shapes(
    proto: onnx.NodeProto, inputs: Sequence[Shape], expressions: dict[str, Expr]
) -> list[Shape | None] | None:
    """Return the ``present`` outputs of a ``com.microsoft`` attention node (None: none).

    Attention: ``present`` is ``[2, B, N, past + S, H]`` from ``past`` ``[2, B, N, past,
    H]`` and the input ``[B, S, D]`` (not with ``past_present_share_buffer``, whose cache
    has the buffer's length). MultiHeadAttention: ``present_key``/``present_value`` are
    ``[B, N, past + L, H]`` from ``past_key``/``past_value`` and the key's ``L`` rows.

    Examples
    --------
    >>> from onnx import helper
    >>> node = helper.make_node("Attention", ["x", "w", "b", "", "past"], ["y", "present"],
    ...                         domain="com.microsoft", num_heads=4)
    >>> found = {}
    >>> shapes = [Shape.parse("[B,S,32]"), Shape((32, 96)), Shape((96,)), Shape.dynamic(),
    ...           Shape.parse("[2,B,4,P,8]")]
    >>> out = present_shapes(node, shapes, found)[1]
    >>> str(Shape(out.dims[:3])), str(found[out.dims[3].name])
    ('[2,B,4]', 'P + S')
    """
    if proto.op_type == "Attention" and len(proto.output) > 1:
        x, past = _given(proto, inputs, 0), _given(proto, inputs, 4)
        if x is None or past is None or x.rank != 3 or past.rank != 5:
            return None
        if attribute(proto, "past_present_share_buffer", 0):
            return None
        length = _sum(past.dims[3], x.dims[1], expressions)
        return [None, Shape((*past.dims[:3], length, past.dims[4]))]
    if proto.op_type == "MultiHeadAttention" and len(proto.output) > 1:
        key = _given(proto, inputs, 1)
        if key is None or key.rank != 3:
            return None  # a BNSH key is the cache itself; a packed one: not modelled here
        found: list[Shape | None] = [None]
        for index in (6, 7):
            past = _given(proto, inputs, index)
            if past is None or past.rank != 4:
                found.append(None)
                continue
            length = _sum(past.dims[2], key.dims[1], expressions)
            found.append(Shape((*past.dims[:2], length, past.dims[3])))
        return found
    return None
