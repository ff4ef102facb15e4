"""Mode ``numpy`` (ONNX multidirectional, OpenVINO auto_broadcast numpy): n-ary, right-aligned.

Expected values: the seed texts (ONNX Broadcasting.md, OpenVINO broadcast rules), SEMANTICS.md
tables 5.1 (O*) and 5.2 (X*) where DESIGN §3 agrees with the peer, and NumPy. Every case also
runs with the operands reversed: multidirectional broadcasting is symmetric.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import bcast
from bcast import BroadcastError, Shape


def _run(shapes: tuple[str, ...], order: str, **kwargs: object) -> Shape:
    operands = shapes if order == "given" else tuple(reversed(shapes))
    return bcast.broadcast_shapes(*operands, **kwargs)  # type: ignore[arg-type]


ORDERS = pytest.mark.parametrize("order", ["given", "reversed"])

# -- the seed texts ----------------------------------------------------------------------

SEED_CASES = [
    # ONNX docs/Broadcasting.md, multidirectional examples
    pytest.param(("[2,3,4,5]", "[]"), "[2,3,4,5]", id="onnx-scalar"),
    pytest.param(("[2,3,4,5]", "[5]"), "[2,3,4,5]", id="onnx-vector"),
    pytest.param(("[4,5]", "[2,3,4,5]"), "[2,3,4,5]", id="onnx-lower-rank-first"),
    pytest.param(("[1,4,5]", "[2,3,1,1]"), "[2,3,4,5]", id="onnx-both-stretch"),
    pytest.param(("[3,4,5]", "[2,1,1,1]"), "[2,3,4,5]", id="onnx-leading-ones"),
    # OpenVINO broadcast rules, numpy examples
    pytest.param(("[]", "[]"), "[]", id="ov-scalar-scalar"),
    pytest.param(("[2,3]", "[1]"), "[2,3]", id="ov-one"),
    pytest.param(("[3]", "[2,3]"), "[2,3]", id="ov-prepend"),
    pytest.param(("[2,3,5]", "[]"), "[2,3,5]", id="ov-scalar"),
    pytest.param(("[2,1,5]", "[1,4,5]"), "[2,4,5]", id="ov-cross"),
    pytest.param(("[6,5]", "[2,1,5]"), "[2,6,5]", id="ov-prepend-and-stretch"),
    pytest.param(("[2,1,5]", "[4,1]"), "[2,4,5]", id="ov-interleaved"),
    pytest.param(("[3,2,1,4]", "[5,4]"), "[3,2,5,4]", id="ov-rank4-rank2"),
    pytest.param(("[1,5,3]", "[5,2,1,3]"), "[5,2,5,3]", id="ov-rank3-rank4"),
]

SEED_ERRORS = [
    pytest.param(("[3]", "[2]"), 0, id="ov-dimension-mismatch"),
    pytest.param(("[3,1,5]", "[4,4,5]"), 0, id="ov-mismatch-on-leftmost-axis"),
]

# -- SEMANTICS.md 5.1 / 5.2 rows where DESIGN §3 agrees with the peer --------------------

PEER_CASES = [
    pytest.param(("[2,3]", "[3]"), "[2,3]", id="O1"),
    pytest.param(("[]", "[]"), "[]", id="O2"),
    pytest.param(("[2,3,5]", "[]"), "[2,3,5]", id="O3"),
    pytest.param(("[2,1,5]", "[1,4,5]"), "[2,4,5]", id="O4"),
    pytest.param(("[6,5]", "[2,1,5]"), "[2,6,5]", id="O5"),
    pytest.param(("[0]", "[1]"), "[0]", id="O8"),
    pytest.param(("[0]", "[0]"), "[0]", id="O10"),
    pytest.param(("[2,0,3]", "[1,3]"), "[2,0,3]", id="O11"),
    pytest.param(("[1]", "[0]"), "[0]", id="O12"),
    pytest.param(("[1..10]", "[5]"), "[5]", id="O13"),
    pytest.param(("[2..10]", "[3..5]"), "[3..5]", id="O14"),
    pytest.param(("[?]", "[1]"), "[?]", id="O15"),
    pytest.param(("[?]", "[5]"), "[5]", id="O16"),
    pytest.param(("[0..]", "[5]"), "[5]", id="O17"),
    pytest.param(("[1..]", "[5]"), "[5]", id="O18"),
    pytest.param(("[2..]", "[5]"), "[5]", id="O19"),
    pytest.param(("[0..3]", "[1..5]"), "[0..5]", id="O21"),
    pytest.param(("[1..3]", "[2..5]"), "[2..5]", id="O22"),
    pytest.param(("[1]", "[2..5]"), "[2..5]", id="O23"),
    pytest.param(("[0..1]", "[3]"), "[3]", id="O24"),
    pytest.param(("[0..1]", "[0]"), "[0]", id="O25"),
    pytest.param(("[?]", "[0]"), "[0]", id="O27"),
    pytest.param(("[...]", "[2,3]"), "[...]", id="O28"),
    pytest.param(("[...]", "[]"), "[...]", id="O29"),
    pytest.param(("[2,3]", "[...]"), "[...]", id="O30"),
    pytest.param(("[1..10]", "[1..10]"), "[1..10]", id="O32"),
    pytest.param(("[1..10]", "[1]"), "[1..10]", id="O33"),
    pytest.param(("[0..5]", "[3..8]"), "[3..8]", id="O34"),
    pytest.param(("[2..5]", "[3..8]"), "[3..5]", id="O35"),
    pytest.param(("[?]", "[?]"), "[?]", id="O36"),
    pytest.param(("[0..10]", "[20..30]"), "[20..30]", id="O37"),
    pytest.param(("[1]", "[1]"), "[1]", id="O39"),
    pytest.param(("[1..1]", "[?]"), "[?]", id="O40"),
    pytest.param(("[0..0]", "[0..5]"), "[0]", id="O41"),
    pytest.param(("[2,3]", "[3]"), "[2,3]", id="O42"),
    pytest.param(("[2,1,1]", "[1,3,1]", "[1,1,4]"), "[2,3,4]", id="O100"),
    pytest.param(("[2]", "[3,1]", "[]"), "[3,2]", id="O101"),
    pytest.param(("[1..5]", "[?]", "[3]"), "[3]", id="O103"),
    pytest.param(("[?]", "[2..5]"), "[2..5]", id="O214"),
    pytest.param(("[0..1]", "[0..1]"), "[0..1]", id="O215"),
    pytest.param(("[1..5]", "[0..3]"), "[0..5]", id="O216"),
    pytest.param(("[1..3]", "[1..5]"), "[1..5]", id="O217"),
    pytest.param(("[3..3]", "[1..1]"), "[3]", id="O218"),
    pytest.param(("[5..]", "[1..7]"), "[5..]", id="O219"),
    pytest.param(("[0..3]", "[2..5]", "[4..6]"), "[4..5]", id="O220"),
    pytest.param(("[4..6]", "[2..5]", "[0..3]"), "[4..5]", id="O221"),
    pytest.param(("[0..2]", "[1..3]", "[2..2]"), "[2]", id="O222"),
    pytest.param(("[1..2]", "[1..3]", "[0..5]"), "[0..5]", id="O223"),
    pytest.param(("[N]", "[N]"), "[N]", id="O236"),
    pytest.param(("[N]", "[1]"), "[N]", id="O237"),
    pytest.param(("[1]", "[N]"), "[N]", id="O238"),
    pytest.param(("[N]", "[M]"), "[?]", id="O239"),
    pytest.param(("[N]", "[3]"), "[3]", id="O240"),
    pytest.param(("[N]", "[1]"), "[N]", id="X1"),
    pytest.param(("[N]", "[N]"), "[N]", id="X2"),
    pytest.param(("[N]", "[M]"), "[?]", id="X3"),
    pytest.param(("[N]", "[3]"), "[3]", id="X4"),
    pytest.param(("[?]", "[3]"), "[3]", id="X5"),
    pytest.param(("[?]", "[1]"), "[?]", id="X6"),
    pytest.param(("[?]", "[?]"), "[?]", id="X7"),
    pytest.param(("[N]", "[?]"), "[?]", id="X8"),
    pytest.param(("[?]", "[N]"), "[?]", id="X9"),
    pytest.param(("[2,3]", "[3]"), "[2,3]", id="X10"),
    pytest.param(("[0]", "[1]"), "[0]", id="X12"),
    pytest.param(("[0]", "[0]"), "[0]", id="X14"),
    pytest.param(("[]", "[]"), "[]", id="X15"),
    pytest.param(("[2,3]", "[]"), "[2,3]", id="X16"),
    pytest.param(("[...]", "[2]"), "[...]", id="X17"),
    pytest.param(("[N,1]", "[1,M]"), "[N,M]", id="X18"),
    pytest.param(("[N]", "[0]"), "[0]", id="X19"),
    pytest.param(("[1]", "[1]"), "[1]", id="X20"),
    pytest.param(("[2,1,5]", "[1,4,5]"), "[2,4,5]", id="X22"),
    pytest.param(("[N,N]", "[N]"), "[N,N]", id="X24"),
    pytest.param(("[1,N]", "[M,1]"), "[M,N]", id="X25"),
    pytest.param(("[N]", "[2]"), "[2]", id="X27"),
    pytest.param(("[N]", "[N]", "[M]"), "[?]", id="X28"),
    pytest.param(("[N]", "[M]", "[N]"), "[?]", id="X29"),
    pytest.param(("[N]", "[1]", "[N]"), "[N]", id="X30"),
    pytest.param(("[2,1]", "[3]", "[1,1,1]"), "[1,2,3]", id="X31"),
    pytest.param(("[N]", "[1]", "[3]"), "[3]", id="X33"),
    pytest.param(("[2,3]",), "[2,3]", id="X34"),
    pytest.param(("[2,3]", "[...]"), "[...]", id="X35"),
    pytest.param(("[?]", "[?]", "[1]"), "[?]", id="X36"),
    pytest.param(("[N]", "[?]", "[N]"), "[?]", id="X37"),
    pytest.param(("[0]", "[1]", "[1]"), "[0]", id="X38"),
    pytest.param(("[]", "[]", "[]"), "[]", id="X39"),
    pytest.param(("[2,1]", "[3]", "[]"), "[2,3]", id="X40"),
    pytest.param(("[N,1]", "[1,M]"), "[N,M]", id="X41"),
    pytest.param(("[2,1]", "[3]", "[]"), "[2,3]", id="X43"),
    pytest.param(("[N,1]", "[1,M]", "[1]"), "[N,M]", id="X44"),
    pytest.param(("[1]", "[N]", "[M]"), "[?]", id="X46"),
    pytest.param(("[0,1]", "[1,3]", "[1]"), "[0,3]", id="X47"),
    pytest.param(("[2,1]", "[3]"), "[2,3]", id="X75"),  # And: same rule as Add
]

PEER_ERRORS = [
    pytest.param(("[3]", "[2]"), 0, id="O6"),
    pytest.param(("[3,1,5]", "[4,4,5]"), 0, id="O7"),
    pytest.param(("[0]", "[5]"), 0, id="O9"),
    pytest.param(("[2..4]", "[5]"), 0, id="O20"),
    pytest.param(("[2..3]", "[0]"), 0, id="O26"),
    pytest.param(("[?,3]", "[4]"), 1, id="O31"),
    pytest.param(("[2..10]", "[20..30]"), 0, id="O38"),
    pytest.param(("[2,3]", "[4]"), 1, id="O43"),
    pytest.param(("[2,3]", "[4]"), 1, id="O44"),  # LogicalAnd: same rule as Add
    pytest.param(("[2]", "[3]", "[1]"), 0, id="O102"),
    pytest.param(("[3]", "[2]"), 0, id="X11"),
    pytest.param(("[0]", "[5]"), 0, id="X13"),
    pytest.param(("[N,3]", "[4]"), 1, id="X21"),
    pytest.param(("[3,1,5]", "[4,4,5]"), 0, id="X23"),
    pytest.param(("[2]", "[3]", "[2]"), 0, id="X32"),
    pytest.param(("[2]", "[3]", "[1]"), 0, id="X45"),
]


@pytest.mark.parametrize(("shapes", "expected"), SEED_CASES + PEER_CASES)
@ORDERS
def test_numpy_broadcasts(shapes: tuple[str, ...], expected: str, order: str) -> None:
    assert _run(shapes, order) == Shape.parse(expected)


@pytest.mark.parametrize(("shapes", "axis"), SEED_ERRORS + PEER_ERRORS)
@ORDERS
def test_numpy_rejects_incompatible_shapes(shapes: tuple[str, ...], axis: int, order: str) -> None:
    with pytest.raises(BroadcastError, match="cannot broadcast") as excinfo:
        _run(shapes, order)
    assert excinfo.value.mode == "numpy"
    assert excinfo.value.axis == axis
    assert excinfo.value.operand is not None


# -- NumPy as the oracle on static shapes ------------------------------------------------

STATIC_CASES = [
    pytest.param(((8, 1, 6, 1), (7, 1, 5)), id="numpy-docs-4d-3d"),
    pytest.param(((5, 4), (1,)), id="numpy-docs-one"),
    pytest.param(((15, 3, 5), (15, 1, 5)), id="numpy-docs-same-rank"),
    pytest.param(((15, 3, 5), (3, 1)), id="numpy-docs-lower-rank"),
    pytest.param(((1,), (0, 0)), id="zero-size"),
    pytest.param(((0, 1), (1, 0)), id="zero-both-ways"),
    pytest.param(((2, 1, 3), (1, 4, 1), (5, 1, 1, 1)), id="three-operands"),
    pytest.param(((), (1,), (1, 1)), id="scalar-and-ones"),
]


@pytest.mark.parametrize("shapes", STATIC_CASES)
@ORDERS
def test_numpy_matches_numpy_broadcast_shapes(
    shapes: tuple[tuple[int, ...], ...], order: str
) -> None:
    expected = np.broadcast_shapes(*shapes)
    operands = shapes if order == "given" else tuple(reversed(shapes))
    assert bcast.broadcast_shapes(*operands) == expected


def test_numpy_alias_multidirectional_is_the_same_rule() -> None:
    assert bcast.broadcast_shapes("[2,1]", "[3]", mode="multidirectional") == (2, 3)
    assert bcast.broadcast_shapes("[2,1]", "[3]", mode=bcast.Mode.NUMPY) == (2, 3)


def test_numpy_with_no_operands_gives_a_scalar_as_numpy_does() -> None:
    assert bcast.broadcast_shapes() == np.broadcast_shapes() == ()


def test_numpy_with_one_operand_returns_it() -> None:
    assert bcast.broadcast_shapes("[N,1..5]") == Shape.parse("[N,1..5]")


def test_numpy_accepts_every_shape_like_form() -> None:
    assert bcast.broadcast_shapes((2, 1), [1], "[1,N]", Shape([None, 1])) == Shape.parse("[2,N]")


# -- where DESIGN §3 answers differently from a peer -------------------------------------


@ORDERS
def test_symbol_against_unknown_gives_unknown_not_openvinos_symbol(order: str) -> None:
    # O241: OpenVINO keeps N for N with ?; that is unsound (? may be 5 while N is 1).
    assert _run(("[N]", "[?]"), order) == Shape.parse("[?]")


@ORDERS
def test_unknown_outputs_stay_unknown_where_onnx_names_them_unk(order: str) -> None:
    # X3, X6, X7: ONNX shape inference names these output dims unk__0, unk__1, ...
    result = _run(("[N,?,?]", "[M,1,?]"), order)
    assert str(result) == "[?,?,?]"
    assert not any(d.is_symbol for d in result)


@ORDERS
def test_numpy_raises_where_onnx_non_strict_inference_drops_the_shape(order: str) -> None:
    # X26: infer_shapes without strict_mode swallows the error and leaves no shape.
    with pytest.raises(BroadcastError, match=re.escape("3 vs 2") + "|" + re.escape("2 vs 3")):
        _run(("[3]", "[2]"), order)


@pytest.mark.parametrize(
    ("shapes", "axis"),
    [
        pytest.param(("[...]", "[3]", "[4]"), 0, id="unknown-first"),
        pytest.param(("[3]", "[...]", "[4]"), 0, id="unknown-middle"),
        pytest.param(("[2,3]", "[4]", "[...]"), 1, id="unknown-last"),
    ],
)
@ORDERS
def test_unknown_rank_operand_does_not_hide_a_conflict_between_known_operands(
    shapes: tuple[str, ...], axis: int, order: str
) -> None:
    # X35: ONNX infers no shape (and reports nothing) once any input has unknown rank.
    with pytest.raises(BroadcastError, match="cannot broadcast") as excinfo:
        _run(shapes, order)
    assert excinfo.value.axis == axis


def test_select_output_takes_no_operands_symbol_where_openvino_keeps_the_conditions() -> None:
    # OpenVINO's Select (numpy) gives its output the condition's symbol: cond [A], then [B],
    # else [C] gives [A], though A may be 1 while B = C = 5 (the result is then 5). Its binary
    # ops drop differing symbols; this is Select's own. bcast (numpy rule, n-ary): [?].
    ov = pytest.importorskip("openvino")
    a, b, c = ov.Symbol(), ov.Symbol(), ov.Symbol()

    def param(symbol: object, dtype: type) -> object:
        dim = ov.Dimension(-1)
        dim.set_symbol(symbol)
        return ov.opset1.parameter(ov.PartialShape([dim]), dtype)

    node = ov.opset1.select(param(a, np.bool_), param(b, np.float32), param(c, np.float32))
    assert node.get_output_partial_shape(0)[0].get_symbol() == a
    add = ov.opset1.add(param(b, np.float32), param(c, np.float32))
    assert not add.get_output_partial_shape(0)[0].has_symbol()
    assert bcast.broadcast_shapes("[A]", "[B]", "[C]") == Shape.parse("[?]")
