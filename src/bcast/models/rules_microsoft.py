"""The ``com.microsoft`` operators that onnxruntime's optimizer and quantizer emit.

ONNX's shape inference knows none of them, so without these rules every value after one is of
unknown shape. Each rule is the shape function of onnxruntime's contrib operator definition
(``onnxruntime/core/graph/contrib_ops/bert_defs.cc``, ``contrib_defs.cc``,
``quantization_defs.cc``) and the checks of its CPU kernel: the broadcasts and equalities
whose failure makes onnxruntime refuse the node, and the output shape, so that the nodes
after it are checked too. A bias of 63 for a BiasGelu input of 64 is a finding at the
BiasGelu. An operator of this domain without a rule here is listed as not modelled.

Examples
--------
>>> from bcast import Shape
>>> from bcast.models.graph import Node
>>> node = Node("bg", "BiasGelu", ("x", "b"), ("y",), domain=MICROSOFT)
>>> outcome = MICROSOFT_RULES["BiasGelu"](node, [Shape.parse("[N,8,64]"), Shape((63,))])
>>> str(outcome.output), [str(s) for _, s in outcome.constraints[0].operands]
('[N,8,64]', ['[64]', '[63]'])
"""

from __future__ import annotations

from typing import Final

from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.planning import broadcast_shapes
from bcast.core.shape import Shape
from bcast.models.graph import Node
from bcast.models.rules_base import (
    Constraint,
    Limit,
    Operands,
    Outcome,
    RuleFunction,
    at,
    attr,
    ceil_div,
    dims_of,
    equal,
    ints,
    last,
    one_way,
    times,
)
from bcast.models.rules_quant import MICROSOFT_QUANT_RULES, QUANT_RULES, one_element

__all__ = ["MICROSOFT", "MICROSOFT_RULES", "OUTPUT_TYPE_FROM"]

MICROSOFT: Final = "com.microsoft"
_ORT: Final = "onnxruntime refuses the node: "


def _given(node: Node, shapes: Operands, index: int) -> Shape | None:
    """Return input ``index``'s shape when the node has it and its rank is known."""
    if index >= len(node.inputs) or not node.inputs[index]:
        return None
    shape = at(shapes, index)
    return shape if shape.rank is not None else None


def _static(dim: Dim | None) -> int | None:
    return dim.lo if dim is not None and dim.is_static else None


def _to_last(
    node: Node, shapes: Operands, x: int, roles: tuple[tuple[int, str], ...]
) -> list[Constraint]:
    """Each input of ``roles`` is a 1-D vector as long as input ``x``'s last dim."""
    width = last(at(shapes, x))
    found = []
    for index, role in roles:
        shape = _given(node, shapes, index)
        if width is not None and shape is not None:
            context = f"{node.op} {role} {shape} must be 1-D of the input's last dim ({width}); "
            found.append(equal("hidden", dims_of(width), role, shape, context + _ORT))
    return found


def _bias_last(node: Node, shapes: Operands) -> Outcome:
    """BiasGelu, FastGelu, BiasAdd: a bias as long as the input's last dim."""
    found = _to_last(node, shapes, 0, ((1, "bias"),))
    skip = _given(node, shapes, 2) if node.op == "BiasAdd" else None
    x = at(shapes, 0)
    if skip is not None and x.rank is not None:
        found.append(
            equal("input", x, "skip", skip, f"BiasAdd skip must have the input's shape; {_ORT}")
        )
    return Outcome(tuple(found), x if x.rank is not None else None)


def _same_shape(node: Node, shapes: Operands) -> Outcome:
    """Gelu, QuickGelu: element-wise, the output is the input's shape."""
    x = at(shapes, 0)
    return Outcome((), x if x.rank is not None else None)


def _skip_norm(node: Node, shapes: Operands) -> Outcome:
    """SkipLayerNormalization, SkipSimplifiedLayerNormalization."""
    x, skip = at(shapes, 0), _given(node, shapes, 1)
    roles: tuple[tuple[int, str], ...] = ((2, "gamma"), (3, "beta"), (4, "bias"))
    if node.op == "SkipSimplifiedLayerNormalization":
        roles = ((2, "gamma"), (3, "bias"))
    found = _to_last(node, shapes, 0, roles)
    if skip is not None and x.rank is not None:
        context = f"{node.op} skip {skip} must broadcast to the input {x}; {_ORT}"
        found.append(one_way("input", x, "skip", skip, context))
    out = x if x.rank is not None else None
    return Outcome(tuple(found), out, more=(None, None, out))  # 3: input + skip (+ bias)


def _embed_norm(node: Node, shapes: Operands) -> Outcome:
    """EmbedLayerNormalization: ids [B,S], embeddings [*, H], the sequence within positions."""
    ids, word, position = at(shapes, 0), at(shapes, 2), at(shapes, 3)
    found: list[Constraint] = []
    limits = []
    hidden = last(word)
    for index, role in ((1, "segment_ids"), (7, "mask")):
        shape = _given(node, shapes, index)
        if shape is not None and ids.rank is not None:
            context = f"EmbedLayerNormalization {role} {shape} must have input_ids' shape {ids}; "
            found.append(equal("input_ids", ids, role, shape, context + _ORT))
    for index, role in ((3, "position_embedding"), (4, "segment_embedding")):
        shape = _given(node, shapes, index)
        if hidden is not None and shape is not None and shape.rank == 2:
            context = (
                f"EmbedLayerNormalization {role} {shape} must be as wide as word_embedding {word}; "
            )
            found.append(
                equal("hidden", dims_of(hidden), role, dims_of(shape.dims[1]), context + _ORT)
            )
    found += _to_last(node, shapes, 2, ((5, "gamma"), (6, "beta")))
    rows = _static(position.dims[0]) if position.rank == 2 else None
    if ids.rank == 2 and rows is not None and _given(node, shapes, 8) is None:
        why = f"EmbedLayerNormalization reads one position_embedding row of {rows} per position"
        limits.append(Limit("the sequence (input_ids' dim 1)", ids.dims[1], rows, why))
    out = Shape((*ids.dims, hidden)) if ids.rank == 2 and hidden is not None else None
    mask = Shape(ids.dims[:1]) if ids.rank == 2 else None
    return Outcome(tuple(found), out, tuple(limits), more=(mask, out))  # mask_index, sum


def _heads(node: Node, hidden: Dim | None, what: str) -> list[tuple[int | None, str]]:
    heads, size = attr(node, "num_heads", 0), _static(hidden)
    if heads > 0 and size is not None and size % heads:
        return [(None, f"{node.op}: {what} {size} is not divisible by num_heads={heads}")]
    return []


def _attention(node: Node, shapes: Operands) -> Outcome:
    """Attention and QAttention: input [B,S,H_in] times weights [H_in, q+k+v] plus bias."""
    x, weights, bias = at(shapes, 0), at(shapes, 1), _given(node, shapes, 2)
    if x.rank != 3 or weights.rank != 2:
        why = f"{node.op} needs an input of rank 3 and weights of rank 2, not {x} and {weights}"
        known = x.rank is not None and weights.rank is not None
        return Outcome(errors=((None, why),) if known else ())
    context = f"{node.op} input {x} and weights {weights}: the hidden sizes must be equal; "
    found = [
        equal("input", dims_of(x.dims[2]), "weights", dims_of(weights.dims[0]), context + _ORT)
    ]
    if bias is not None:
        context = (
            f"{node.op} bias {bias} must be 1-D as long as weights' dim 1 ({weights.dims[1]}); "
        )
        found.append(equal("weights", dims_of(weights.dims[1]), "bias", bias, context + _ORT))
    errors: list[tuple[int | None, str]] = []
    sizes = ints(node, "qkv_hidden_sizes")
    total = _static(weights.dims[1])
    if len(sizes) == 3:
        v_hidden: Dim = Dim(sizes[2])
        if total is not None and sum(sizes) != total:
            errors.append(
                (
                    None,
                    f"{node.op}: qkv_hidden_sizes {list(sizes)} do not add up to weights' {total}",
                )
            )
        errors += _heads(node, Dim(sizes[0]), "the query hidden size")
    elif total is not None and total % 3:
        errors.append((None, f"{node.op}: weights' dim 1 ({total}) is not 3 * hidden"))
        v_hidden = Dim.unknown()
    else:
        v_hidden = Dim(total // 3) if total is not None else Dim.unknown()
        errors += _heads(node, v_hidden, "the hidden size")
    if node.op == "QAttention":
        for index, role in ((3, "input_scale"), (6, "input_zero_point")):
            shape = _given(node, shapes, index)
            if shape is not None and one_element(shape) is False:
                errors.append((None, f"QAttention {role} {shape} must hold one element"))
    return Outcome(tuple(found), Shape((x.dims[0], x.dims[1], v_hidden)), errors=tuple(errors))


def _multi_head(node: Node, shapes: Operands) -> Outcome:
    """MultiHeadAttention: query [B,S,D]; key, value [B,L,D] and [B,L,D_v] or BNSH [B,N,L,H].

    The packed layouts are modelled too: query [B,S,N,3,H] (q, k and v packed, no key) and
    key [B,L,N,2,H] (k and v packed, no value). The output is [B,S,D_v].
    """
    q, k, v = at(shapes, 0), _given(node, shapes, 1), _given(node, shapes, 2)
    heads = attr(node, "num_heads", 0)
    errors = _heads(node, last(q), "the query hidden size") if q.rank == 3 else []
    if q.rank == 5 and k is None:  # packed q, k, v: [B,S,N,3,H]
        width = times(heads, q.dims[4])
        return Outcome((), Shape((q.dims[0], q.dims[1], width)), errors=tuple(errors))
    if q.rank != 3 or k is None:
        return Outcome(errors=tuple(errors))
    b, d = q.dims[0], q.dims[2]
    if k.rank == 5 and v is None:  # packed k, v: [B,L,N,2,H]
        context = f"MultiHeadAttention query {q}, packed key {k}: batch sizes must be equal; "
        found = [equal("query", dims_of(b), "key", dims_of(k.dims[0]), context + _ORT)]
        return Outcome(tuple(found), Shape((b, q.dims[1], times(heads, k.dims[4]))), ())
    if v is None or k.rank != v.rank or k.rank not in (3, 4):
        return Outcome(errors=tuple(errors))
    if k.rank == 4:  # BNSH: [B,N,L,H], the cross attention's cached key and value
        context = f"MultiHeadAttention query {q}, key {k}: batch sizes must be equal; "
        found = [
            equal("query", dims_of(b), "key", dims_of(k.dims[0]), context + _ORT),
            equal("key", dims_of(*k.dims[:3]), "value", dims_of(*v.dims[:3]), "MultiHeadAttention "
                  f"key {k} and value {v} must agree on batch, heads and sequence; " + _ORT),
        ]  # fmt: skip
        if heads > 0:
            context = f"MultiHeadAttention key {k} must have num_heads={heads}; " + _ORT
            found.append(equal("num_heads", dims_of(heads), "heads", dims_of(k.dims[1]), context))
        return Outcome(tuple(found), Shape((b, q.dims[1], times(heads, v.dims[3]))), ())
    dv = v.dims[2]
    context = f"MultiHeadAttention query {q}, key {k}: batch and hidden sizes must be equal; "
    found = [
        equal("query", dims_of(b, d), "key", dims_of(k.dims[0], k.dims[2]), context + _ORT),
        equal("key", dims_of(*k.dims[:2]), "value", dims_of(*v.dims[:2]), "MultiHeadAttention "
              f"key {k} and value {v} must agree on batch and sequence; " + _ORT),
    ]  # fmt: skip
    bias = _given(node, shapes, 3)
    if bias is not None and all(x.is_static for x in (d, dv)):
        width = Dim(2 * (d.lo or 0) + (dv.lo or 0))
        context = f"MultiHeadAttention bias {bias} must be 1-D of query + key + value widths; "
        found.append(equal("q+k+v", dims_of(width), "bias", bias, context + _ORT))
    return Outcome(tuple(found), Shape((b, q.dims[1], dv)), errors=tuple(errors))


def _group_query(node: Node, shapes: Operands) -> Outcome:
    """GroupQueryAttention: query [B,S,N*H], key and value [B,S,N_kv*H], past [B,N_kv,P,H]."""
    q = at(shapes, 0)
    heads, kv_heads = attr(node, "num_heads", 0), attr(node, "kv_num_heads", 0)
    errors: list[tuple[int | None, str]] = []
    if heads > 0 and kv_heads > 0 and heads % kv_heads:
        errors.append(
            (
                None,
                f"GroupQueryAttention: num_heads={heads} is not a multiple of "
                f"kv_num_heads={kv_heads}",
            )
        )
    if q.rank != 3 or heads <= 0 or kv_heads <= 0:
        return Outcome(errors=tuple(errors))
    key, value = _given(node, shapes, 1), _given(node, shapes, 2)
    width = _static(q.dims[2])
    packed = key is None
    parts = heads + 2 * kv_heads if packed else heads
    if width is not None and width % parts:
        errors.append(
            (None, f"GroupQueryAttention: query width {width} is not divisible into {parts} heads")
        )
        return Outcome(errors=tuple(errors))
    head = Dim(width // parts) if width is not None else Dim.unknown()
    kv_width = Dim(kv_heads * head.lo) if head.is_static and head.lo is not None else Dim.unknown()
    found = []
    for shape, role in ((key, "key"), (value, "value")):
        if shape is not None:
            context = (
                f"GroupQueryAttention {role} {shape} must be "
                "[batch, seq, kv_num_heads * head_size]; "
            )
            found.append(
                equal("expected", Shape((*q.dims[:2], kv_width)), role, shape, context + _ORT)
            )
    for index, role in ((3, "past_key"), (4, "past_value")):
        shape = _given(node, shapes, index)
        if shape is not None:
            context = (
                f"GroupQueryAttention {role} {shape} must be "
                "[batch, kv_num_heads, past, head_size]; "
            )
            expected = dims_of(q.dims[0], kv_heads, head)
            found.append(
                equal(
                    "expected",
                    expected,
                    role,
                    Shape((*shape.dims[:2], shape.dims[-1])) if shape.rank == 4 else shape,
                    context + _ORT,
                )
            )
    out_width = Dim(heads * head.lo) if head.is_static and head.lo is not None else q.dims[2]
    return Outcome(tuple(found), Shape((q.dims[0], q.dims[1], out_width)), errors=tuple(errors))


def _nbits(node: Node, shapes: Operands) -> Outcome:
    """MatMulNBits: A [..., K] times B quantized in blocks [N, K/block, block*bits/8]."""
    a, b = at(shapes, 0), at(shapes, 1)
    k, n = attr(node, "K", 0), attr(node, "N", 0)
    bits, block = attr(node, "bits", 4), attr(node, "block_size", 0)
    if a.rank is None or a.rank < 1 or k <= 0 or n <= 0 or block <= 0:
        return Outcome()
    blocks = ceil_div(Dim(k), block)
    found = [
        equal(
            "K",
            dims_of(k),
            "A[-1]",
            dims_of(a.dims[-1]),
            f"MatMulNBits A {a} must end in K={k}; " + _ORT,
        )
    ]
    if b.rank == 3:
        expected = dims_of(n, blocks, block * bits // 8)
        context = (
            f"MatMulNBits B {b} must be [N, ceil(K/block_size), block_size*bits/8] = {expected}; "
        )
        found.append(equal("expected", expected, "B", b, context + _ORT))
    errors = []
    scales = _given(node, shapes, 2)
    count = n * (blocks.lo or 0)
    held = scales.size() if scales is not None else None
    if held is not None and held != count:
        errors.append(
            (
                None,
                f"MatMulNBits scales {scales} must hold N*ceil(K/block_size) = {count} elements",
            )
        )
    bias = _given(node, shapes, 5)
    if bias is not None:
        found.append(
            equal(
                "N",
                dims_of(n),
                "bias",
                bias,
                f"MatMulNBits bias {bias} must be 1-D of N={n}; " + _ORT,
            )
        )
    return Outcome(tuple(found), Shape((*a.dims[:-1], Dim(n))), errors=tuple(errors))


def _rotary(node: Node, shapes: Operands) -> Outcome:
    """RotaryEmbedding (com.microsoft): cos and sin caches alike, half a head wide."""
    x, cos, sin = at(shapes, 0), _given(node, shapes, 2), _given(node, shapes, 3)
    found = []
    if cos is not None and sin is not None:
        found.append(
            equal(
                "cos_cache",
                cos,
                "sin_cache",
                sin,
                f"RotaryEmbedding cos_cache and sin_cache must have one shape; {_ORT}",
            )
        )
    heads, rotary = attr(node, "num_heads", 0), attr(node, "rotary_embedding_dim", 0)
    head: Dim | None = None
    if x.rank == 4:
        head = x.dims[3]
    elif x.rank == 3 and heads > 0 and _static(x.dims[2]) is not None:
        head = Dim((x.dims[2].lo or 0) // heads)
    half = Dim(rotary // 2) if rotary > 0 else ceil_div(head, 2) if head is not None else None
    if cos is not None and cos.rank == 2 and half is not None and half.is_static:
        context = (
            f"RotaryEmbedding cos_cache {cos} must be [max_position, rotary_dim / 2 = {half}]; "
        )
        found.append(
            equal("half", dims_of(half), "cos_cache[1]", dims_of(cos.dims[1]), context + _ORT)
        )
    return Outcome(tuple(found), x if x.rank is not None else None)


def _qlinear_binary(node: Node, shapes: Operands) -> Outcome:
    """QLinearAdd, QLinearMul: A and B broadcast as numpy's; scales of one element."""
    a, b = at(shapes, 0), at(shapes, 3)
    errors = []
    for index, role in ((1, "A_scale"), (4, "B_scale"), (6, "C_scale")):
        shape = _given(node, shapes, index)
        if shape is not None and one_element(shape) is False:
            errors.append((None, f"{node.op} {role} {shape} must hold one element"))
    operands = ((node.inputs[0] or "A", a), ((node.inputs[3:4] or ("B",))[0] or "B", b))
    try:
        out: Shape | None = (
            broadcast_shapes(a, b) if a.rank is not None and b.rank is not None else None
        )
    except BroadcastError:
        out = None
    constraint = Constraint(operands, Mode.NUMPY, f"{node.op}: ")
    return Outcome((constraint,), out, errors=tuple(errors))


def _matmul(node: Node, shapes: Operands) -> Outcome:
    """FusedMatMul (transA, transB) and DynamicQuantizeMatMul: MatMul's shape rule."""
    a, b = at(shapes, 0), at(shapes, 1)
    if attr(node, "transBatchA", 0) or attr(node, "transBatchB", 0):
        return Outcome()
    if a.rank is None or b.rank is None or a.rank < 2 or b.rank < 2:
        return Outcome()
    if attr(node, "transA", 0):
        a = Shape((*a.dims[:-2], a.dims[-1], a.dims[-2]))
    if attr(node, "transB", 0):
        b = Shape((*b.dims[:-2], b.dims[-1], b.dims[-2]))
    context = f"{node.op}: A's last dim and B's second to last must be equal ({a} x {b}); "
    found = [equal("A[-1]", dims_of(a.dims[-1]), "B[-2]", dims_of(b.dims[-2]), context + _ORT)]
    batch_a, batch_b = Shape(a.dims[:-2]), Shape(b.dims[:-2])
    found.append(
        Constraint(
            (("A batch", batch_a), ("B batch", batch_b)), Mode.NUMPY, f"{node.op} batch dims: "
        )
    )
    if node.op == "DynamicQuantizeMatMul":
        for index, role in ((2, "b_scale"), (3, "b_zero_point")):
            shape = _given(node, shapes, index)
            if shape is not None:
                context = (
                    f"DynamicQuantizeMatMul {role} {shape} must hold one element or "
                    "one per column of B; "
                )
                found.append(one_way("N", dims_of(b.dims[-1]), role, shape, context + _ORT))
        bias = _given(node, shapes, 4)
        if bias is not None:
            found.append(
                equal(
                    "N",
                    dims_of(b.dims[-1]),
                    "bias",
                    bias,
                    f"DynamicQuantizeMatMul bias {bias} must be 1-D of B's columns; " + _ORT,
                )
            )
    try:
        batch: Shape | None = broadcast_shapes(batch_a, batch_b)
    except BroadcastError:
        batch = None
    out = None if batch is None else Shape((*batch.dims, a.dims[-2], b.dims[-1]))
    return Outcome(tuple(found), out)


MICROSOFT_RULES: Final[dict[str, RuleFunction]] = {
    "Attention": _attention,
    "BiasAdd": _bias_last,
    "BiasGelu": _bias_last,
    "DequantizeLinear": QUANT_RULES["DequantizeLinear"],
    "DynamicQuantizeMatMul": _matmul,
    "EmbedLayerNormalization": _embed_norm,
    "FastGelu": _bias_last,
    "FusedMatMul": _matmul,
    "Gelu": _same_shape,
    "GroupQueryAttention": _group_query,
    "MatMulNBits": _nbits,
    "MultiHeadAttention": _multi_head,
    "QAttention": _attention,
    "QLinearAdd": _qlinear_binary,
    "QLinearMul": _qlinear_binary,
    "QuantizeLinear": QUANT_RULES["QuantizeLinear"],
    "QuickGelu": _same_shape,
    "RotaryEmbedding": _rotary,
    "SkipLayerNormalization": _skip_norm,
    "SkipSimplifiedLayerNormalization": _skip_norm,
    **MICROSOFT_QUANT_RULES,
}
"""The ``com.microsoft`` operators with a rule, by op type."""

OUTPUT_TYPE_FROM: Final[dict[str, int]] = {
    "EmbedLayerNormalization": 2,  # the word embedding's (the ids are integers)
    "QAttention": 2,  # the bias's (float; the input is quantized)
    "DequantizeLinear": 1,  # the scale's
    "QuantizeLinear": 2,  # the zero point's (none: not known here)
}
"""The input whose element type an operator's first output has, where it is not input 0."""
