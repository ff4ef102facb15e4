"""Dim expressions built from operators' arithmetic: windows, sums, products.

bcast writes the dims that Conv, Concat, Flatten and Reshape compute from symbolic inputs
as `bcast.core.expressions.Expr` trees (``(height - 1)//2 + 1``, ``h*w + 1``), folding
literals so that chains stay short: a window's ``- 1`` after a ``+ 1`` cancels. The ONNX
and the OpenVINO IR readers both build their operators' shapes from these
(`bcast.onnx.own_shapes`, `bcast.openvino.ir_shapes`); `expression_dim` names an
expression as a dim and records it in a graph's ``expressions``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

from bcast.core.dim import Dim, named_dim
from bcast.core.expressions import Expr
from bcast.core.shape import Shape

__all__ = [
    "ceiling_div",
    "concat_output",
    "expr_of",
    "expression_dim",
    "factors",
    "floor_div",
    "named_dim",
    "plus",
    "product",
    "register_expression",
    "reshape_output",
    "total",
    "transposed",
    "window_dim",
    "windowed_shape",
]


def expr_of(dim: Dim, expressions: Mapping[str, Expr]) -> Expr | None:
    """Return ``dim`` as an expression: its size, its expression or its symbol; None if unknown.

    >>> from bcast.core.dim import Dim, named_dim
    >>> str(expr_of(Dim(3), {})), str(expr_of(Dim.symbol("h"), {})), expr_of(Dim.unknown(), {})
    ('3', 'h', None)
    """
    if dim.is_static:
        return Expr("int", value=dim.lo)
    if dim.name is None:
        return None
    found = expressions.get(dim.name)
    return found if found is not None else Expr("sym", name=dim.name)


def plus(expr: Expr, number: int) -> Expr:
    """Return ``expr + number``, a trailing literal folded in.

    >>> from bcast.core.expressions import parse_expression
    >>> str(plus(parse_expression("h - 8"), 9)), str(plus(parse_expression("h"), 0))
    ('h + 1', 'h')
    """
    if expr.op == "int":
        return Expr("int", value=expr.value + number)
    if expr.op in ("+", "-") and expr.args[1].op == "int":
        sign = 1 if expr.op == "+" else -1
        return plus(expr.args[0], sign * expr.args[1].value + number)
    if number == 0:
        return expr
    if number > 0:
        return Expr("+", (expr, Expr("int", value=number)))
    return Expr("-", (expr, Expr("int", value=-number)))


def floor_div(expr: Expr, number: int) -> Expr:
    """Return ``expr//number`` (``number`` > 0); ``expr`` itself for 1.

    >>> from bcast.core.expressions import parse_expression
    >>> str(floor_div(parse_expression("h - 8"), 8)), str(floor_div(Expr("int", value=9), 2))
    ('(h - 8)//8', '4')
    """
    if number == 1:
        return expr
    if expr.op == "int":
        return Expr("int", value=expr.value // number)
    return Expr("//", (expr, Expr("int", value=number)))


def ceiling_div(expr: Expr, number: int) -> Expr:
    """Return ``ceiling(expr/number)`` (``number`` > 0); ``expr`` itself for 1.

    >>> from bcast.core.expressions import parse_expression
    >>> str(ceiling_div(parse_expression("h"), 2))
    'ceiling(h/2)'
    """
    if number == 1:
        return expr
    if expr.op == "int":
        return Expr("int", value=-(-expr.value // number))
    return Expr("ceiling", (Expr("/", (expr, Expr("int", value=number))),))


def total(items: list[Expr]) -> Expr:
    """Return the sum of ``items``, their literals added into one, last.

    >>> from bcast.core.expressions import parse_expression
    >>> str(total([Expr("int", value=1), parse_expression("h*w")]))
    'h*w + 1'
    """
    number = sum(i.value for i in items if i.op == "int")
    rest = [i for i in items if i.op != "int"]
    out: Expr | None = None
    for item in rest:
        out = item if out is None else Expr("+", (out, item))
    return Expr("int", value=number) if out is None else plus(out, number)


def factors(expr: Expr) -> list[Expr]:
    """Return the factors of a product (``a*b*4`` gives ``a``, ``b``, ``4``); else ``[expr]``.

    >>> from bcast.core.expressions import parse_expression
    >>> [str(f) for f in factors(parse_expression("s0*(s1//2)*4"))]
    ['s0', 's1//2', '4']
    """
    found: list[Expr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if node.op == "*":
            stack.extend(reversed(node.args))
        else:
            found.append(node)
    return found


def product(items: list[Expr]) -> Expr:
    """Return the product of ``items``, their integer literals multiplied into one, first.

    >>> str(product([Expr("sym", name="h"), Expr("int", value=2), Expr("int", value=3)]))
    '6*h'
    >>> str(product([]))
    '1'
    """
    number = 1
    rest = []
    for item in items:
        if item.op == "int":
            number *= item.value
        else:
            rest.append(item)
    out = Expr("int", value=number) if number != 1 or not rest else None
    for item in rest:
        out = item if out is None else Expr("*", (out, item))
    assert out is not None
    return out


def window_dim(
    size: Expr, kernel: int, stride: int, dilation: int, pads: int, same: bool = False
) -> Expr | None:
    """One spatial output dim of a convolution or pooling window (floor rounding).

    ``(size + pads - ((kernel - 1)*dilation + 1))//stride + 1``, or ``ceiling(size/stride)``
    for ``same`` padding (ONNX ``SAME_UPPER``/``SAME_LOWER``, OpenVINO ``same_upper``...).
    None for a stride, dilation or kernel below 1.

    >>> str(window_dim(Expr("sym", name="h"), 8, 8, 1, 0))
    '(h - 8)//8 + 1'
    >>> str(window_dim(Expr("sym", name="h"), 3, 2, 1, 2, same=True))
    'ceiling(h/2)'
    """
    if stride < 1 or dilation < 1 or kernel < 1:
        return None
    if same:
        return ceiling_div(size, stride)
    span = (kernel - 1) * dilation + 1
    return plus(floor_div(plus(size, pads - span), stride), 1)


def windowed_shape(
    x: Shape,
    channels: Dim,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int],
    same: bool,
    expressions: dict[str, Expr],
) -> Shape:
    """Return a Conv's or pooling's output ``[N, channels, spatial...]`` (``x`` of rank 3+).

    Each spatial dim is `window_dim` of the input's, written as an expression (recorded in
    ``expressions``); ``pads`` are each axis's total; ``?`` where it cannot be written.

    >>> found = {}
    >>> out = windowed_shape(Shape.parse("[N,3,h]"), Dim(8), [2], [2], [1], [0], False, found)
    >>> str(out.dims[1]), str(found[out.dims[2].name])
    ('8', '(h - 2)//2 + 1')
    """
    out = [x.dims[0], channels]
    for i, dim in enumerate(x.dims[2:]):
        size = expr_of(dim, expressions)
        found = (
            None
            if size is None
            else window_dim(size, kernel[i], strides[i], dilations[i], pads[i], same=same)
        )
        out.append(Dim.unknown() if found is None else expression_dim(found, expressions))
    return Shape(out)


def transposed(data: Shape, perm: Sequence[int] | None) -> Shape | None:
    """Return ``data`` with its axes in ``perm``'s order (reversed where ``perm`` is empty).

    None where the rank is unknown or ``perm`` is no permutation of the axes.

    >>> str(transposed(Shape.parse("[b,s,4]"), [0, 2, 1]))
    '[b,4,s]'
    >>> str(transposed(Shape.parse("[a,b]"), []))
    '[b,a]'
    >>> transposed(Shape.parse("[a,b]"), [0, 0]) is None
    True
    """
    if data.rank is None or perm is None:
        return None
    order = [int(p) for p in perm] if perm else list(range(data.rank))[::-1]
    if sorted(order) != list(range(data.rank)):
        return None
    return Shape(data.dims[p] for p in order)


def register_expression(expr: Expr, base: str, expressions: dict[str, Expr]) -> Dim:
    """Record ``expr`` in ``expressions`` under ``base`` (or ``base_2``... if that is taken).

    >>> found = {}
    >>> str(register_expression(Expr("sym", name="h"), "h2", found)), list(found)
    ('h2', ['h2'])
    """
    chosen, count = base, 1
    while chosen in expressions and expressions[chosen] != expr:
        count += 1  # another expression cleans to the same text: keep them apart
        chosen = f"{base}_{count}"
    expressions[chosen] = expr
    return Dim.symbol(chosen)


def expression_dim(expr: Expr, expressions: dict[str, Expr]) -> Dim:
    """Return the dim that stands for ``expr`` (a size, a symbol or a new named expression).

    The expression is recorded in ``expressions`` under its name, as the readers record the
    ones exporters write.

    >>> from bcast.core.expressions import parse_expression
    >>> found = {}
    >>> dim = expression_dim(parse_expression("(h - 8)//8 + 1"), found)
    >>> [str(found[dim.name]) for dim in [dim]]
    ['(h - 8)//8 + 1']
    """
    if expr.op == "int":
        return Dim(expr.value) if expr.value >= 0 else Dim.unknown()
    if expr.op == "sym":
        return named_dim(expr.name)
    named = named_dim(str(expr)).name
    return Dim.unknown() if named is None else register_expression(expr, named, expressions)


def reshape_output(
    data: Shape,
    target: Sequence[Dim | int],
    allowzero: bool,
    expressions: dict[str, Expr] | None = None,
) -> Shape | None:
    """Return Reshape's output shape, resolving ``-1`` by the element count, or None.

    ``allowzero`` False (ONNX's default, OpenVINO's ``special_zero="true"``): a 0 copies
    the data's dim. Symbols cancel: ``[batch,32,4,4]`` to ``[batch,32,-1]`` gives
    ``[batch,32,16]``. With ``expressions``, symbols left over make a product
    (``[b,32,h,w]`` to ``[b,32,-1]`` gives ``h*w``), recorded there.

    >>> str(reshape_output(Shape.parse("[batch,32,4,4]"), [Dim.symbol("batch"), 32, -1], False))
    '[batch,32,16]'
    >>> reshape_output(Shape.parse("[batch,8]"), [-1, 3], False) is None
    True
    """
    if data.rank is None:
        return None
    out: list[Dim | None] = []
    for i, value in enumerate(target):
        if isinstance(value, Dim):
            out.append(value)
        elif value == 0 and not allowzero:
            out.append(data.dims[i] if i < len(data.dims) else None)
        elif value == -1:
            out.append(None)
        elif value >= 0:
            out.append(Dim(value))
        else:
            return None
    if out.count(None) > 1:
        return None
    if None in out:
        missing = _quotient(list(data.dims), [d for d in out if d is not None], expressions)
        if missing is None:
            return None
        out[out.index(None)] = missing
    return Shape(d for d in out if d is not None)


_LARGEST_DIVISOR = 2**31  # a -1's rows over more than this: not written (hostile targets)


def _quotient(
    have: list[Dim], taken: list[Dim], expressions: dict[str, Expr] | None = None
) -> Dim | None:
    """Return the dim that makes ``taken`` hold as many elements as ``have``, if it is sure."""
    rest = list(have)
    static_taken = 1
    for dim in taken:
        if dim.is_static:
            static_taken *= dim.lo
        elif dim.name is not None and dim in rest:
            rest.remove(dim)
        else:
            return None
    statics = math.prod(d.lo for d in rest if d.is_static)
    named = [d for d in rest if not d.is_static]
    if static_taken == 0 or (statics % static_taken and not named):
        return None  # not a whole number of rows: the Reshape fails (or is not sure)
    ratio = Fraction(statics, static_taken)
    if ratio.denominator > _LARGEST_DIVISOR:
        return None  # no dims of sizes a tensor has make that many elements
    if not named:
        return Dim(int(ratio))
    if ratio == 1 and len(named) == 1:
        return named[0]  # [batch,seq] to [-1,seq]: the -1 is batch
    found = [expr_of(d, expressions) for d in named] if expressions is not None else [None]
    if expressions is None or any(f is None for f in found):
        return None
    factors = [Expr("int", value=ratio.numerator), *(f for f in found if f is not None)]
    whole = product(factors)
    if ratio.denominator > 1:  # [b,h] to [-1,7]: b*h/7 rows, where 7 divides (else it fails)
        whole = Expr("/", (whole, Expr("int", value=ratio.denominator)))
    return expression_dim(whole, expressions)


def concat_output(axis: int, inputs: Sequence[Shape], expressions: dict[str, Expr]) -> Shape | None:
    """Concat's output where its axis holds symbols: the sum, recorded in ``expressions``.

    The other axes are the first input's. None where a rank, the axis or a part is unknown.

    >>> found = {}
    >>> shape = concat_output(1, [Shape.parse("[b,1,32]"), Shape.parse("[b,n,32]")], found)
    >>> str(found[shape.dims[1].name])
    'n + 1'
    """
    if not inputs or any(s.rank is None for s in inputs):
        return None
    rank = inputs[0].rank
    if not rank or any(s.rank != rank for s in inputs):
        return None
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        return None
    parts = [expr_of(s.dims[axis], expressions) for s in inputs]
    if any(p is None for p in parts):
        return None
    summed = expression_dim(total([p for p in parts if p is not None]), expressions)
    first = inputs[0].dims
    return Shape((*first[:axis], summed, *first[axis + 1 :]))
