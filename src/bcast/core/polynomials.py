"""Dim expressions multiplied out: comparing index bounds (``(b - 1)*s + s`` is ``b*s``).

`expanded` writes an expression as a sum of products of symbols; `cancelled` takes like
terms from both sides of a comparison and divides them by the symbols every term shares, so
that a requirement over three dims reads as one over two (``batch*mask_seq`` rows of
``mask_batch*mask_seq`` is ``batch`` of ``mask_batch``) and a KV cache's
``batch*total + past + seq - total`` rows of ``batch*total`` is ``past + seq`` of
``total``. Products that would multiply out past 256 terms stay as written.
"""

from __future__ import annotations

from typing import Final

from bcast.core.arithmetic import product, total
from bcast.core.expressions import Expr

__all__ = ["cancelled", "expanded"]

_MAX_TERMS: Final = 256  # terms of an expanded product (a crafted model could ask 2**32)
Polynomial = dict[tuple[str, ...], int]
"""A sum of products of symbols: each product (its symbols sorted, repeated) to its coefficient."""


def _polynomial(expr: Expr) -> Polynomial | None:
    """Return ``expr`` expanded into a polynomial; None where it holds ``//``, ``Min``..."""
    if expr.op == "int":
        return {(): expr.value} if expr.value else {}
    if expr.op == "sym":
        return {(expr.name,): 1}
    parts = [_polynomial(a) for a in expr.args]
    if any(p is None for p in parts):
        return None
    if expr.op == "neg" and len(parts) == 1 and parts[0] is not None:
        return {k: -v for k, v in parts[0].items()}
    if len(parts) != 2:
        return None
    a, b = parts[0] or {}, parts[1] or {}
    out: Polynomial = {}
    if expr.op in ("+", "-"):
        sign = 1 if expr.op == "+" else -1
        for k, v in [*a.items(), *((k, sign * v) for k, v in b.items())]:
            out[k] = out.get(k, 0) + v
    elif expr.op == "*":
        if len(a) * len(b) > _MAX_TERMS:
            return None  # a product that multiplies out too far: kept as it is written
        for (ka, va), (kb, vb) in ((x, y) for x in a.items() for y in b.items()):
            key = tuple(sorted(ka + kb))
            out[key] = out.get(key, 0) + va * vb
    else:
        return None
    return {k: v for k, v in out.items() if v}


def _from_polynomial(poly: Polynomial) -> Expr:
    terms = []
    for key, coefficient in sorted(poly.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        factors_ = [Expr("sym", name=n) for n in key]
        terms.append(product([Expr("int", value=coefficient), *factors_]))
    return total(terms) if terms else Expr("int", value=0)


def expanded(expr: Expr) -> Expr:
    """Return ``expr`` multiplied out and its like terms added, where it is a polynomial.

    >>> from bcast.core.expressions import parse_expression as p
    >>> str(expanded(p("s - 1 + (b - 1)*s + 1 - 1"))), str(expanded(p("Min(64, s) + 1")))
    ('b*s - 1', 'Min(64, s) + 1')
    """
    found = _polynomial(expr)
    return expr if found is None else _from_polynomial(found)


def cancelled(left: Expr, right: Expr) -> tuple[Expr, Expr]:
    """Return ``left`` and ``right`` expanded, like terms taken out and shared symbols divided.

    Every symbol all their terms share divides both. For comparing sizes of dims (each at
    least 1): ``(b - 1)*s + s`` against ``m*s`` is ``b`` against ``m``; ``b*t + p + s - t``
    against ``b*t`` is ``p + s`` against ``t`` (a term on both sides is subtracted from both,
    a negative one moves across). Where either is no polynomial (``//``, ``Min``) both come
    back as they are.

    >>> from bcast.core.expressions import parse_expression as p
    >>> [str(e) for e in cancelled(p("(b - 1)*s + s"), p("m*s"))]
    ['b', 'm']
    >>> [str(e) for e in cancelled(p("b*t + p + s - t"), p("b*t"))]
    ['p + s', 't']
    >>> [str(e) for e in cancelled(p("s + 2"), p("Min(64, s)"))]
    ['s + 2', 'Min(64, s)']
    """
    a, b = _polynomial(left), _polynomial(right)
    if a is None or b is None:
        return left, right
    difference = dict(a)
    for key, value in b.items():
        difference[key] = difference.get(key, 0) - value
    a = {k: v for k, v in difference.items() if v > 0}
    b = {k: -v for k, v in difference.items() if v < 0}
    while True:
        keys = [*a, *b]
        shared = set(keys[0]) if keys else set()
        for key in keys[1:]:
            shared &= set(key)
        if not shared:
            break
        symbol = min(shared)
        a = {_without(k, symbol): v for k, v in a.items()}
        b = {_without(k, symbol): v for k, v in b.items()}
    return _from_polynomial(a), _from_polynomial(b)


def _without(key: tuple[str, ...], symbol: str) -> tuple[str, ...]:
    at = key.index(symbol)
    return key[:at] + key[at + 1 :]
