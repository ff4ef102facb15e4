"""Dim expressions (`bcast.core.expressions`): parsing, evaluation and canonical text.

Expected values come from sympy (the semantics the dynamo exporter writes its dims in) and,
for torch's own functions that sympy does not know, from Python's integer arithmetic.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction
from pathlib import Path

import onnx
import pytest

from bcast.core.expressions import MAX_TEXT, Expr, parse_expression

sympy = pytest.importorskip("sympy")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real"

# Forms the dynamo exporter writes (the first ones are from tests/fixtures/real), and more.
SYMPY_TEXTS = [
    "(((s0 - 1)//16)) + 1",
    "(((s53 - 1)//4)) + 1",
    "((s43*s53)//s72)",
    "Min(64, s41)",
    "s70*s72",
    "s0 + 1",
    "2*s0",
    "s0 - 1",
    "Max(1, s0)",
    "Max(s0, s1, 3)",
    "Min(s0, s1)",
    "floor(s0/2)",
    "ceiling(s0/3)",
    "s0//2",
    "Mod(s0, 3)",
    "Mod(s0 + s1, 4)",
    "s0**2",
    "-s0 + 10",
    "-(s0 + 1)*2",
    "2*s0 - s1 - 1",
    "s0 - (s1 - 3)",
    "floor((s0 - 1)/4) + 1",
    "Max(0, s0 - 64) + Min(s0, 64)",
    "(s0*s1)//(s1 + 1)",
    "Mod(s0, s1 + 1)",
    "-3**2 + s0",
    "2**3**2 - s0",
]
VALUES = [0, 1, 2, 3, 7, 16, 63, 64, 65, 100, -1, -5]


def _sympy_value(text, bindings):
    """Evaluate ``text`` in sympy with the values in place of the symbols (not ``subs``,
    which simplifies ``0/s`` to 0 before ``s`` is known to be 0)."""
    numbers = {k: sympy.Integer(v) for k, v in bindings.items()}
    try:
        value = sympy.parse_expr(text, local_dict=numbers)
    except ZeroDivisionError:
        return None
    if not value.is_number or not value.is_finite:
        return None  # zoo / nan: a division by zero
    return int(value) if value.is_integer else None


@pytest.mark.parametrize("text", SYMPY_TEXTS)
def test_evaluation_agrees_with_sympy(text):
    expr = parse_expression(text)
    assert expr is not None
    names = sorted(str(s) for s in sympy.sympify(text).free_symbols)
    assert sorted(expr.symbols) == names
    for values in itertools.product(VALUES, repeat=len(names)):
        bindings = dict(zip(names, values, strict=True))
        assert expr.evaluate(bindings) == _sympy_value(text, bindings), bindings


@pytest.mark.parametrize("text", SYMPY_TEXTS)
def test_canonical_text_means_the_same_and_parses_back(text):
    expr = parse_expression(text)
    canonical = str(expr)
    assert parse_expression(canonical) == expr
    assert sympy.simplify(sympy.sympify(canonical) - sympy.sympify(text)) == 0


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("Min(64, s41)", "Min(64, s41)"),
        ("Min(64,s41)", "Min(64, s41)"),
        ("(((s53 - 1)//4)) + 1", "(s53 - 1)//4 + 1"),
        ("((s43*s53)//s72)", "s43*s53//s72"),
        ("s0 +1", "s0 + 1"),
        ("2 * s0", "2*s0"),
        ("floor(s0 / 2)", "floor(s0/2)"),
        ("s0 - (s1 + s2)", "s0 - (s1 + s2)"),
    ],
)
def test_canonical_text(text, canonical):
    assert str(parse_expression(text)) == canonical


def test_an_expression_evaluates_only_with_all_its_symbols_bound():
    expr = parse_expression("Min(64, s41) + s1")
    assert expr.evaluate({"s41": 3}) is None
    assert expr.evaluate({"s41": 3, "s1": 2}) == 5


def test_true_division_is_an_integer_only_where_it_divides():
    expr = parse_expression("s0/2")
    assert [expr.evaluate({"s0": v}) for v in (4, 5)] == [2, None]


@pytest.mark.parametrize(
    ("name", "python"),
    [
        ("CeilToInt", lambda a: math.ceil(Fraction(a, 3))),
        ("FloorToInt", lambda a: math.floor(Fraction(a, 3))),
        ("TruncToInt", lambda a: math.trunc(Fraction(a, 3))),
    ],
)
def test_torch_rounding_functions(name, python):
    expr = parse_expression(f"{name}(s0/3)")
    for a in range(-10, 11):
        assert expr.evaluate({"s0": a}) == python(a)


def test_torch_division_and_modulo_functions():
    floor_div = parse_expression("FloorDiv(s0, s1)")
    python_mod = parse_expression("PythonMod(s0, s1)")
    clean_div = parse_expression("CleanDiv(s0, s1)")
    for a, b in itertools.product(range(-7, 8), range(-3, 4)):
        bindings = {"s0": a, "s1": b}
        assert floor_div.evaluate(bindings) == (a // b if b else None)
        assert python_mod.evaluate(bindings) == (a % b if b else None)
        assert clean_div.evaluate(bindings) == (a // b if b and a % b == 0 else None)


def _fixture_dim_params():
    found = set()
    for path in sorted(FIXTURES.glob("*.onnx")):
        model = onnx.load(str(path), load_external_data=False)
        for info in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
            for dim in info.type.tensor_type.shape.dim:
                if dim.dim_param:
                    found.add(dim.dim_param)
    return sorted(found)


def test_every_dim_param_of_the_real_fixtures_parses_and_agrees_with_sympy():
    params = _fixture_dim_params()
    assert "Min(64, s41)" in params  # the scan sees the dynamo exports
    rng = random.Random(14)
    for text in params:
        expr = parse_expression(text)
        assert expr is not None, text
        names = sorted(expr.symbols)
        assert names == sorted(str(s) for s in sympy.sympify(text).free_symbols)
        for _ in range(20):
            bindings = {n: rng.randrange(1, 200) for n in names}
            assert expr.evaluate(bindings) == _sympy_value(text, bindings), (text, bindings)


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "s0.__class__",
        "lambda: 0",
        "s0; import os",
        "s0[0]",
        "1e5",
        "'s0'",
        "s0 +",
        "Min()",
        "Min(1)",
        "Mod(1, 2, 3)",
        "floor(1, 2)",
        "Unknown(s0)",
        "sqrt(s0)",
        "(s0",
        "s0)",
        "",
        "   ",
        "\x00",
        "٣ + s0",  # a non-ASCII digit
        "1" * 40,  # a literal too long to be a dim
        "(" * 60 + "s0" + ")" * 60,
        "-" * 200 + "s0",
        "+".join(["s0"] * 300),
        "s0 + " * (MAX_TEXT // 5) + "s0",
    ],
)
def test_hostile_or_unknown_text_is_not_an_expression(text):
    assert parse_expression(text) is None


@pytest.mark.parametrize("text", ["9**9**9**9", "s0**99999", "2**64*s0", "s0*s0*s0*s0*s0*s0"])
def test_huge_values_are_no_values(text):
    expr = parse_expression(text)
    assert expr is not None
    assert expr.evaluate({"s0": 10**6}) is None


def test_parse_never_raises_on_random_text():
    rng = random.Random(17)
    alphabet = "s01234 +-*/%(),MinaxMdflorcei_\t"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        expr = parse_expression(text)
        if expr is not None:
            assert isinstance(expr, Expr)
            expr.evaluate(dict.fromkeys(expr.symbols, 3))
            assert parse_expression(str(expr)) == expr
