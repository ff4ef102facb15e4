"""Small pieces of `bcast.models.presburger`: divisors, products, comparisons of isl functions."""

from __future__ import annotations

import math
from typing import Any, Final

from bcast.core.expressions import Expr

__all__ = ["RELATIONS", "divisors", "product_form"]


def divisors(n: int) -> list[int]:
    """Return the positive divisors of ``n`` (not 0), in increasing order.

    >>> divisors(16), divisors(-6)
    ([1, 2, 4, 8, 16], [1, 2, 3, 6])
    """
    n = abs(n)
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def product_form(e: Expr) -> tuple[int, list[Expr], int] | None:
    """Write ``e`` as ``scale*f1*f2*... + offset``, the factors not constant; None otherwise.

    >>> from bcast.core.expressions import parse_expression as p
    >>> scale, found, offset = product_form(p("(h//8)*(w//8) + 1"))
    >>> scale, [str(f) for f in found], offset
    (1, ['w//8', 'h//8'], 1)
    """
    offset = 0
    while e.op in ("+", "-") and not e.args[1].symbols and e.args[0].symbols:
        value = e.args[1].evaluate({})
        if value is None:
            return None
        offset += value if e.op == "+" else -value
        e = e.args[0]
    if e.op == "+" and not e.args[0].symbols:
        value = e.args[0].evaluate({})
        if value is None:
            return None
        offset, e = offset + value, e.args[1]
    scale, factors = 1, []
    stack = [e]
    while stack:
        f = stack.pop()
        if f.op == "*":
            stack.extend(f.args)
        elif f.op == "neg":
            scale, stack = -scale, [*stack, f.args[0]]
        elif not f.symbols:
            value = f.evaluate({})
            if value is None:
                return None
            scale *= value
        else:
            factors.append(f)
    if len(factors) < 2 or scale == 0:
        return None
    return scale, factors, offset


RELATIONS: Final[dict[str, Any]] = {
    "==": lambda a, b: a.eq_set(b),
    "<=": lambda a, b: a.le_set(b),
    ">=": lambda a, b: a.ge_set(b),
    "<": lambda a, b: a.lt_set(b),
    ">": lambda a, b: a.gt_set(b),
    "!=": lambda a, b: a.ne_set(b),
}
