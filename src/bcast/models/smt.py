"""Decide a requirement that multiplies dims over a box of sizes, with z3 (an SMT solver).

A product of dims is not a Presburger set, so isl (`bcast.models.presburger`) does not hold
it; over the box of ``--dim`` ranges (bounded or not) z3 decides whether some point fails:
unsat, the requirement holds at every point of the box where it is defined; sat, z3's
model is a failing point (checked again by evaluating the requirement); unknown (nonlinear
integer arithmetic is undecidable in general) or past the time limit, None: undecided.

A requirement is given as its `Formula`: a comparison ``left relation right`` of two dim
expressions, or a broadcast's column (its sizes and mode). z3 is imported on the first call.

Examples
--------
>>> from bcast.core.expressions import parse_expression as p
>>> count = ("compare", p("a*b*32"), "==", p("c*d"))
>>> point = failing(count, {"a": (1, 4), "b": (1, 4), "c": (1, 8), "d": (1, 8)}, {})
>>> point["a"] * point["b"] * 32 != point["c"] * point["d"]
True
>>> failing(("compare", p("a*b"), "<=", p("2*a*b")), {"a": (1, None), "b": (1, None)}, {})
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from bcast.core.expressions import Expr
from bcast.core.modes import Mode
from bcast.models.presburger import ONE_WAY_TARGET

__all__ = ["Formula", "failing"]

Formula = tuple[Any, ...]
"""``("compare", left, relation, right)`` or ``("column", ((operand, Expr), ...), Mode)``."""
_TIMEOUT_MS: Final = 2000


class _Unsupported(ValueError):
    """A form the translation does not know."""


def failing(
    formula: Formula,
    ranges: Mapping[str, tuple[int, int | None]],
    points: Mapping[str, int],
) -> dict[str, int] | bool | None:
    """Return a failing point of ``formula`` in the box of ``ranges`` (and ``points``).

    True where none fails; None where z3 cannot say (unknown, time limit, a form it does
    not know). Every dim is a size from 1.
    """
    try:
        import z3  # type: ignore[import-untyped]  # lazily: for products of dims
    except ImportError:  # pragma: no cover - z3-solver is a dependency
        return None
    sizes: dict[str, Any] = {}
    defined: list[Any] = []
    try:
        fails = _fails(z3, formula, sizes, defined)
    except _Unsupported:
        return None
    solver = z3.Solver()
    solver.set("timeout", _TIMEOUT_MS)
    for name, var in sizes.items():
        solver.add(var >= 1)
        if name in points:
            solver.add(var == points[name])
        elif name in ranges:
            lo, hi = ranges[name]
            solver.add(var >= lo)
            if hi is not None:
                solver.add(var <= hi)
    solver.add(*defined, fails)
    verdict = solver.check()
    if verdict == z3.unsat:
        return True
    if verdict != z3.sat:
        return None
    model = solver.model()
    found = {n: model.eval(v, model_completion=True).as_long() for n, v in sizes.items()}
    return {n: v for n, v in sorted(found.items()) if n not in points}


def _fails(z3: Any, formula: Formula, sizes: dict[str, Any], defined: list[Any]) -> Any:
    """Return the z3 condition under which ``formula`` fails (its sizes defined)."""
    if formula[0] == "compare":
        _, left, relation, right = formula
        a, b = _term(z3, left, sizes, defined), _term(z3, right, sizes, defined)
        holds = {"==": a == b, "<=": a <= b, ">=": a >= b}.get(relation)
        if holds is None:
            raise _Unsupported(relation)
        return z3.Not(holds)
    _, values, mode = formula
    terms = [(k, _term(z3, e, sizes, defined)) for k, e in values]
    defined.extend(t >= 0 for _, t in terms)  # a negative size: no tensor, no failure
    return _column_fails(z3, terms, mode)


def _column_fails(z3: Any, terms: Sequence[tuple[int, Any]], mode: Mode) -> Any:
    target = ONE_WAY_TARGET.get(mode)
    pairs = []
    if target is not None:
        into = [t for k, t in terms if k == target][:1]
        for k, b in terms:
            if into and k != target:
                pairs.append(z3.And(b != 1, b != into[0]))
        return z3.Or(*pairs) if pairs else z3.BoolVal(False)
    for i, (_, a) in enumerate(terms):
        for _, b in terms[i + 1 :]:
            if mode is Mode.NONE:
                pairs.append(a != b)
            else:
                pairs.append(z3.And(a != b, a != 1, b != 1))
    return z3.Or(*pairs) if pairs else z3.BoolVal(False)


def _term(z3: Any, e: Expr, sizes: dict[str, Any], defined: list[Any]) -> Any:
    """Translate ``e`` to a z3 integer term; side conditions (divisors) into ``defined``."""
    op = e.op
    if op == "int":
        return z3.IntVal(e.value)
    if op == "sym":
        if e.name not in sizes:
            sizes[e.name] = z3.Int(e.name)
        return sizes[e.name]
    if op in ("floor", "FloorToInt", "ceiling", "CeilToInt") and e.args[0].op == "/":
        a, b = (_term(z3, x, sizes, defined) for x in e.args[0].args)
        defined.append(b != 0)
        down = _floor_div(z3, a, b)
        return down if op in ("floor", "FloorToInt") else -_floor_div(z3, -a, b)
    args = [_term(z3, x, sizes, defined) for x in e.args]
    if op == "neg":
        return -args[0]
    if op in ("+", "-", "*"):
        a, b = args
        return a + b if op == "+" else a - b if op == "-" else a * b
    if op in ("//", "FloorDiv", "%", "Mod", "PythonMod", "/", "CleanDiv"):
        a, b = args
        defined.append(b != 0)
        q = _floor_div(z3, a, b)
        if op in ("/", "CleanDiv"):
            defined.append(a == q * b)  # exact: defined only where it divides
            return q
        return q if op in ("//", "FloorDiv") else a - b * q
    if op in ("Min", "Max"):
        out = args[0]
        for x in args[1:]:
            out = z3.If(x < out, x, out) if op == "Min" else z3.If(x > out, x, out)
        return out
    if op == "Abs":
        return z3.If(args[0] < 0, -args[0], args[0])
    if op in ("floor", "FloorToInt", "ceiling", "CeilToInt", "TruncToInt"):
        return args[0]  # of an integer: itself
    if op == "**" and e.args[1].op == "int" and 0 <= e.args[1].value <= 8:
        out = z3.IntVal(1)
        for _ in range(e.args[1].value):
            out = out * args[0]
        return out
    raise _Unsupported(op)


def _floor_div(z3: Any, a: Any, b: Any) -> Any:
    """Python's ``a // b`` (toward minus infinity); SMT's div rounds so the remainder is >= 0."""
    return z3.If(b > 0, a / b, (-a) / (-b))
