"""Small pieces of `bcast.models.presburger`: divisors, products, comparisons of isl functions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

from bcast.core.expressions import Expr

__all__ = ["RELATIONS", "divisors", "hulls", "interval_set", "product_form", "rebuilt", "unit"]


def divisors(n: int) -> list[int]:
    """Return the positive divisors of ``n`` (not 0), in increasing order.

    >>> divisors(16), divisors(-6)
    ([1, 2, 4, 8, 16], [1, 2, 3, 6])
    """
    n = abs(n)
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def product_form(e: Expr, least: int = 2) -> tuple[int, list[Expr], int] | None:
    """Write ``e`` as ``scale*f1*f2*... + offset``, the factors not constant; None otherwise.

    None too where fewer than ``least`` factors are found (a product of dims is two).

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
    if len(factors) < least or scale == 0:
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


def unit(isl: Any, point: Any) -> tuple[tuple[int, int], tuple[tuple[int, int | None], ...]]:
    """Return an isl point of two dims as a box of one size by one (`Space.boxes`).

    >>> import islpy as isl
    >>> unit(isl, isl.Set("{ [3, 4] }").sample_point())
    ((3, 3), ((4, 4),))
    """
    x, y = (int(point.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(2))
    return (x, x), ((y, y),)


def hulls(line: Any) -> tuple[tuple[int, int | None], ...]:
    """Return the interval each piece of a one-dim isl set spans, merged where they touch.

    >>> import islpy as isl
    >>> hulls(isl.Set("{ [x] : 1 <= x <= 3 or (x >= 8 and x mod 2 = 0) }"))
    ((1, 3), (8, None))
    """
    parts: list[tuple[int, int | None]] = []
    for basic in line.get_basic_sets():
        piece = type(line).from_basic_set(basic)
        lo = int(piece.dim_min_val(0).to_python())
        top = piece.dim_max_val(0)
        parts.append((lo, None if top.is_infty() else int(top.to_python())))
    parts.sort(key=lambda p: (p[0], p[1] is None, p[1] or 0))
    out: list[tuple[int, int | None]] = []
    for lo, hi in parts:
        if out and (out[-1][1] is None or out[-1][1] + 1 >= lo):
            last = out[-1][1]
            out[-1] = (out[-1][0], None if last is None or hi is None else max(last, hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def interval_set(isl: Any, intervals: Sequence[tuple[int, int | None]]) -> Any:
    """Return a union of intervals as a one-dim isl set (``hi`` None: no bound).

    >>> import islpy as isl
    >>> interval_set(isl, [(1, 3), (8, None)]).is_equal(isl.Set("{ [x] : 1 <= x <= 3 or x >= 8 }"))
    True
    """
    text = " or ".join(
        f"x >= {lo}" + ("" if hi is None else f" and x <= {hi}") for lo, hi in intervals
    )
    return isl.Set("{ [x] : " + (text or "false") + " }")


def rebuilt(
    isl: Any,
    line: Any,
    intervals: Sequence[tuple[int, int | None]],
    congruence: tuple[int, int] | None,
) -> bool:
    """Tell whether ``line`` is exactly its intervals (with the congruence, if any).

    >>> import islpy as isl
    >>> evens = isl.Set("{ [x] : x >= 2 and x mod 2 = 0 }")
    >>> rebuilt(isl, evens, [(2, None)], (2, 0)), rebuilt(isl, evens, [(2, None)], None)
    (True, False)
    """
    rebuilt = interval_set(isl, intervals)
    if congruence is not None:
        m, r = congruence
        rebuilt = rebuilt.intersect(isl.Set(f"{{ [x] : x mod {m} = {r} }}"))
    return bool(rebuilt.is_equal(line))
