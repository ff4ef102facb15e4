"""Dim expressions built from operators' arithmetic: windows, sums, products.

bcast writes the dims that Conv, Concat, Flatten and Reshape compute from symbolic inputs
as `bcast.core.expressions.Expr` trees (``(height - 1)//2 + 1``, ``h*w + 1``), folding
literals so that chains stay short: a window's ``- 1`` after a ``+ 1`` cancels.
"""

from __future__ import annotations

from collections.abc import Mapping

from bcast.core.dim import Dim
from bcast.core.expressions import Expr

__all__ = ["ceiling_div", "expr_of", "factors", "floor_div", "plus", "product", "total"]


def expr_of(dim: Dim, expressions: Mapping[str, Expr]) -> Expr | None:
    """Return ``dim`` as an expression: its size, its expression or its symbol; None if unknown.

    >>> from bcast.core.dim import Dim
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
