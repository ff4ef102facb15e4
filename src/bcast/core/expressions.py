"""Dim expressions: the arithmetic exporters write into a ``dim_param`` (``Min(64, seq)``).

torch's dynamo exporter names a dim by the sympy expression it computed (``s0 + 1``,
``2*s0``, ``Min(64, s41)``, ``(((s53 - 1)//4)) + 1``). `parse_expression` reads that text
into a small immutable `Expr` with its free symbols, its value under integer bindings and a
canonical text. The semantics are sympy's, as the exporter meant them: ``//`` and ``floor``
round toward minus infinity, ``/`` is exact rational division (an integer only where it
divides), ``Mod`` is Python's ``%`` (the sign of the divisor). A form this module does not
know is not an error: `parse_expression` returns None and the dim stays an opaque symbol.

The parser is safe on hostile text: no ``eval``, a bounded length, nesting depth, literal
size and exponent; evaluation gives None rather than raising or building huge numbers.

Examples
--------
>>> e = parse_expression("Min(64, s41)")
>>> str(e), sorted(e.symbols), e.evaluate({"s41": 65}), e.evaluate({"s41": 7})
('Min(64, s41)', ['s41'], 64, 7)
>>> str(parse_expression("(((s53 - 1)//4)) + 1"))
'(s53 - 1)//4 + 1'
>>> parse_expression("Unknown(s0)") is None
True
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

__all__ = ["MAX_TEXT", "Expr", "parse_expression"]

MAX_TEXT: Final = 1000
"""Longer texts are not parsed (they stay opaque symbols)."""
_MAX_DEPTH: Final = 40  # nesting of parentheses, calls and unary signs
_MAX_HEIGHT: Final = 100  # of the tree, chains of operators included
_MAX_DIGITS: Final = 19
_MAX_EXPONENT: Final = 64
_MAX_MAGNITUDE: Final = 2**63
_TOKEN: Final = re.compile(r"\s*(?:([0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|(//|\*\*|[-+*/%(),]))")

Number = int | Fraction

# Binary operators: precedence (higher binds tighter) and canonical spelling.
_PRECEDENCE: Final[dict[str, int]] = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2, "**": 4}
_NEGATE_PRECEDENCE: Final = 3


def _floor(x: Number) -> Number:
    return x if isinstance(x, int) else x.numerator // x.denominator


def _ceiling(x: Number) -> Number:
    return x if isinstance(x, int) else -(-x.numerator // x.denominator)


def _trunc(x: Number) -> Number:
    return _floor(x) if x >= 0 else _ceiling(x)


def _abs(x: Number) -> Number:
    return -x if x < 0 else x


def _divide(a: Number, b: Number) -> Number | None:
    if b == 0:
        return None
    q = Fraction(a) / Fraction(b)
    return q.numerator if q.denominator == 1 else q


def _floor_divide(a: Number, b: Number) -> Number | None:
    return None if b == 0 else _floor(Fraction(a) / Fraction(b))


def _modulo(a: Number, b: Number) -> Number | None:
    return None if b == 0 else a % b


def _clean_divide(a: Number, b: Number) -> Number | None:
    q = _divide(a, b)
    return q if isinstance(q, int) else None  # torch's CleanDiv: exact by construction


def _power(a: Number, b: Number) -> Number | None:
    if not isinstance(b, int) or not 0 <= b <= _MAX_EXPONENT:
        return None
    if _abs(a) > 1 and _abs(a) ** b > _MAX_MAGNITUDE:
        return None  # bounded before it is built
    return a**b


_BINARY: Final[dict[str, Callable[[Number, Number], Number | None]]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _divide,
    "//": _floor_divide,
    "%": _modulo,
    "**": _power,
}

# Functions: name -> (arity, None for 2+ args; implementation over the argument values).
_FUNCTIONS: Final[dict[str, tuple[int | None, Callable[[list[Number]], Number | None]]]] = {
    "Min": (None, min),
    "Max": (None, max),
    "Mod": (2, lambda v: _modulo(v[0], v[1])),
    "PythonMod": (2, lambda v: _modulo(v[0], v[1])),
    "FloorDiv": (2, lambda v: _floor_divide(v[0], v[1])),
    "CleanDiv": (2, lambda v: _clean_divide(v[0], v[1])),
    "floor": (1, lambda v: _floor(v[0])),
    "FloorToInt": (1, lambda v: _floor(v[0])),
    "ceiling": (1, lambda v: _ceiling(v[0])),
    "CeilToInt": (1, lambda v: _ceiling(v[0])),
    "TruncToInt": (1, lambda v: _trunc(v[0])),
    "Abs": (1, lambda v: _abs(v[0])),
}


@dataclass(frozen=True, slots=True)
class Expr:
    """An integer expression over symbols: a literal, a symbol, an operator or a function.

    Attributes
    ----------
    op : str
        ``"int"``, ``"sym"``, ``"neg"``, a binary operator (``+ - * / // % **``) or a
        function name (``Min``, ``Max``, ``Mod``, ``floor``, ``ceiling``, ...).
    args : tuple of Expr
        The operands (empty for a literal or a symbol).
    value : int
        The literal's value (``op == "int"``).
    name : str
        The symbol's name (``op == "sym"``).

    Examples
    --------
    >>> e = parse_expression("2*s0 + Mod(s1, 3)")
    >>> str(e), sorted(e.symbols), e.evaluate({"s0": 4, "s1": -1})
    ('2*s0 + Mod(s1, 3)', ['s0', 's1'], 10)
    >>> e.evaluate({"s0": 4}) is None
    True
    """

    op: str
    args: tuple[Expr, ...] = ()
    value: int = 0
    name: str = ""

    @property
    def symbols(self) -> frozenset[str]:
        """The free symbols, by name."""
        if self.op == "sym":
            return frozenset((self.name,))
        found: frozenset[str] = frozenset()
        for arg in self.args:
            found |= arg.symbols
        return found

    @property
    def constants(self) -> tuple[int, ...]:
        """The integer literals written in the expression, in order.

        >>> parse_expression("Min(64, s0 - 1)").constants
        (64, 1)
        """
        if self.op == "int":
            return (self.value,)
        return tuple(c for arg in self.args for c in arg.constants)

    def evaluate(self, bindings: Mapping[str, int]) -> int | None:
        """Return the integer value under ``bindings``; None where it has none.

        None when a free symbol is unbound, a division by zero, a non-integer result (``s0/2``
        at an odd ``s0``), or a value beyond 2**63.

        >>> parse_expression("floor(s0/2)").evaluate({"s0": -3})
        -2
        >>> parse_expression("s0/2").evaluate({"s0": 3}) is None
        True
        """
        result = self._number(bindings)
        return result if isinstance(result, int) else None

    def _number(self, bindings: Mapping[str, int]) -> Number | None:
        if self.op == "int":
            return self.value
        if self.op == "sym":
            return bindings.get(self.name)
        values: list[Number] = []
        for arg in self.args:
            v = arg._number(bindings)
            if v is None:
                return None
            values.append(v)
        if self.op == "neg":
            result: Number | None = -values[0]
        elif self.op in _BINARY:
            result = _BINARY[self.op](values[0], values[1])
        else:
            result = _FUNCTIONS[self.op][1](values)
        if result is None or _abs(result) > _MAX_MAGNITUDE:
            return None
        return result

    def __str__(self) -> str:
        return self._text()

    def _text(self) -> str:
        if self.op == "int":
            return str(self.value)
        if self.op == "sym":
            return self.name
        if self.op == "neg":
            return "-" + _wrap(self.args[0], _NEGATE_PRECEDENCE, right=False)
        if self.op in _BINARY:
            level = _PRECEDENCE[self.op]
            left = _wrap(self.args[0], level, right=self.op == "**")
            right = _wrap(self.args[1], level, right=self.op != "**")
            return f"{left} {self.op} {right}" if level == 1 else f"{left}{self.op}{right}"
        return f"{self.op}({', '.join(a._text() for a in self.args)})"

    @property
    def _level(self) -> int:
        if self.op in _PRECEDENCE:
            return _PRECEDENCE[self.op]
        if self.op == "neg" or (self.op == "int" and self.value < 0):
            return _NEGATE_PRECEDENCE
        return 9


def _wrap(arg: Expr, level: int, *, right: bool) -> str:
    """Write ``arg`` as an operand at ``level``, parenthesised where precedence needs it."""
    inner = arg._level
    if inner < level or (right and inner == level):
        return f"({arg._text()})"
    return arg._text()


def parse_expression(text: str) -> Expr | None:
    """Parse a ``dim_param`` written as an expression; None for any form not understood.

    Accepts integers, symbols, ``+ - * / // % **``, unary minus, parentheses and the
    functions ``Min Max Mod PythonMod FloorDiv CleanDiv floor ceiling FloorToInt CeilToInt
    TruncToInt Abs``. Never raises on any ``str``.

    Examples
    --------
    >>> str(parse_expression("s0 + 1")), str(parse_expression("CeilToInt(s0/2)"))
    ('s0 + 1', 'CeilToInt(s0/2)')
    >>> parse_expression("__import__('os')") is None, parse_expression("s0 +") is None
    (True, True)
    """
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        return None
    return _parse(text)


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Expr | None:
    """Parse ``text`` (cached: a model repeats its dims in every value info)."""
    tokens: list[str] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            if text[position:].strip():
                return None
            break
        number, word, symbol = match.groups()
        if number is not None and len(number) > _MAX_DIGITS:
            return None
        tokens.append(number or word or symbol or "")
        position = match.end()
    parser = _Parser(tokens)
    try:
        expr = parser.sum(0)
    except _NotUnderstood:
        return None
    if parser.index != len(tokens) or _height(expr) > _MAX_HEIGHT:
        return None
    return expr


def _height(expr: Expr) -> int:
    """Measure the tree's height without recursion (a long chain is a deep tree)."""
    tallest = 0
    stack = [(expr, 1)]
    while stack:
        node, level = stack.pop()
        tallest = max(tallest, level)
        if level <= _MAX_HEIGHT:
            stack.extend((arg, level + 1) for arg in node.args)
    return tallest


class _NotUnderstood(Exception):
    """A form the parser does not read (caught in `parse_expression`)."""


class _Parser:
    """Recursive descent over the tokens; depth-bounded."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.index = 0

    def peek(self) -> str:
        return self.tokens[self.index] if self.index < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or (expected is not None and token != expected):
            raise _NotUnderstood
        self.index += 1
        return token

    def sum(self, depth: int) -> Expr:
        if depth > _MAX_DEPTH:
            raise _NotUnderstood
        expr = self.product(depth)
        while self.peek() in ("+", "-"):
            op = self.take()
            expr = Expr(op, (expr, self.product(depth)))
        return expr

    def product(self, depth: int) -> Expr:
        expr = self.unary(depth)
        while self.peek() in ("*", "/", "//", "%"):
            op = self.take()
            expr = Expr(op, (expr, self.unary(depth)))
        return expr

    def unary(self, depth: int) -> Expr:
        if depth > _MAX_DEPTH:
            raise _NotUnderstood
        if self.peek() == "-":
            self.take()
            operand = self.unary(depth + 1)
            if operand.op == "int":
                return Expr("int", value=-operand.value)
            return Expr("neg", (operand,))
        if self.peek() == "+":
            self.take()
            return self.unary(depth + 1)
        return self.power(depth)

    def power(self, depth: int) -> Expr:
        base = self.atom(depth)
        if self.peek() == "**":
            self.take()
            return Expr("**", (base, self.unary(depth + 1)))
        return base

    def atom(self, depth: int) -> Expr:
        token = self.take()
        if token.isdigit():
            return Expr("int", value=int(token))
        if token == "(":
            inner = self.sum(depth + 1)
            self.take(")")
            return inner
        if token[0].isalpha() or token[0] == "_":
            if self.peek() != "(":
                return Expr("sym", name=token)
            if token not in _FUNCTIONS:
                raise _NotUnderstood
            self.take("(")
            args = [self.sum(depth + 1)]
            while self.peek() == ",":
                self.take()
                args.append(self.sum(depth + 1))
            self.take(")")
            arity = _FUNCTIONS[token][0]
            if (arity is None and len(args) < 2) or (arity is not None and len(args) != arity):
                raise _NotUnderstood
            return Expr(token, tuple(args))
        raise _NotUnderstood
