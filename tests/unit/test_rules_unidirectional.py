"""Mode ``unidirectional`` (ONNX Gemm C, PRelu slope; OpenVINO Broadcast numpy with A = target).

B must broadcast to A and the result is A (ONNX docs/Broadcasting.md). Expected values: the
seed texts, SEMANTICS.md 1.3 and 5.1 (Broadcast-1/-3 numpy rows O109-O137, O232, read as
A = target, B = data) and 5.2 (Gemm/PRelu rows) where DESIGN §3 agrees; named tests pin the
cases where it does not. One-directional: no reversal.
"""

from __future__ import annotations

import re

import pytest

import bcast
from bcast import BroadcastError, Shape


def _uni(a: str, b: str) -> Shape:
    return bcast.broadcast_shapes(a, b, mode="unidirectional")


SEED_CASES = [
    pytest.param("[2,3,4,5]", "[2,3,4,5]", "[2,3,4,5]", id="seed-same-shape"),
    pytest.param("[2,3,4,5]", "[]", "[2,3,4,5]", id="seed-scalar"),
    pytest.param("[2,3,4,5]", "[5]", "[2,3,4,5]", id="seed-vector"),
    pytest.param("[2,3,4,5]", "[2,1,1,5]", "[2,3,4,5]", id="seed-ones-inside"),
    pytest.param("[2,3,4,5]", "[1,3,1,5]", "[2,3,4,5]", id="seed-leading-one"),
    pytest.param("[]", "[]", "[]", id="scalar-scalar"),
    pytest.param("[0]", "[1]", "[0]", id="b-one-onto-a-zero"),
    pytest.param("[0]", "[0]", "[0]", id="zero-zero"),
]

PEER_CASES = [
    pytest.param("[1,16,50,50]", "[16,1,1]", "[1,16,50,50]", id="O109"),
    pytest.param("[2,3,4]", "[3,1]", "[2,3,4]", id="O110"),
    pytest.param("[0]", "[1]", "[0]", id="O113"),
    pytest.param("[2,3]", "[]", "[2,3]", id="O115"),
    pytest.param("[]", "[]", "[]", id="O116"),
    pytest.param("[5,3]", "[?,3]", "[5,3]", id="O117"),
    pytest.param("[...]", "[4]", "[...]", id="O120"),
    pytest.param("[2,1]", "[1,1]", "[2,1]", id="O121"),
    pytest.param("[1,16,50,50]", "[16,1,1]", "[1,16,50,50]", id="O122"),
    pytest.param("[2,3,4]", "[3,1]", "[2,3,4]", id="O123"),
    pytest.param("[0]", "[1]", "[0]", id="O126"),
    pytest.param("[2,3]", "[]", "[2,3]", id="O128"),
    pytest.param("[]", "[]", "[]", id="O129"),
    pytest.param("[5,3]", "[?,3]", "[5,3]", id="O130"),
    pytest.param("[...]", "[4]", "[...]", id="O133"),
    pytest.param("[2,1]", "[1,1]", "[2,1]", id="O134"),
    pytest.param("[1..10,4]", "[1,4]", "[1..10,4]", id="O135"),
    pytest.param("[1]", "[]", "[1]", id="O232"),
    pytest.param("[2,4]", "[4]", "[2,4]", id="X59"),
    pytest.param("[2,4]", "[1,4]", "[2,4]", id="X62"),
    pytest.param("[2,4]", "[2,1]", "[2,4]", id="X63"),
    pytest.param("[M,N]", "[N]", "[M,N]", id="X66"),
    pytest.param("[2,3,4,5]", "[3,1,1]", "[2,3,4,5]", id="X71"),
    pytest.param("[N,3]", "[3]", "[N,3]", id="X72"),
    # partial shapes: errors only where certain, the result is A narrowed (DESIGN §1, §3)
    pytest.param("[2]", "[?]", "[2]", id="unknown-b"),
    pytest.param("[?]", "[3]", "[3]", id="static-b-refines-unknown-a"),
    pytest.param("[N]", "[M]", "[N]", id="symbols"),
    pytest.param("[N]", "[3]", "[3]", id="static-b-refines-symbol"),
    pytest.param("[1]", "[0..1]", "[1]", id="b-must-be-one"),
    pytest.param("[2..4]", "[1..3]", "[2..4]", id="intervals"),
    pytest.param("[3]", "[...]", "[3]", id="unknown-rank-b-gives-a"),
]

ERRORS = [
    pytest.param("[2,1]", "[3]", 1, "3 vs 1", id="O111"),
    pytest.param("[5]", "[0]", 0, "0 vs 5", id="O114"),
    pytest.param("[2,1]", "[3]", 1, "3 vs 1", id="O124"),
    pytest.param("[5]", "[0]", 0, "0 vs 5", id="O127"),
    pytest.param("[1]", "[0]", 0, "0 vs 1", id="b-zero-onto-a-one"),
    pytest.param("[2,4]", "[1,3]", 1, "3 vs 4", id="b-differs"),
    pytest.param("[2,4]", "[2,4,1]", None, "more than A", id="b-rank-above-a"),
    pytest.param("[]", "[1]", None, "more than A", id="a-scalar-b-one"),
    pytest.param("[3]", "[2,3]", None, "more than A", id="O112"),
    pytest.param("[3]", "[2,3]", None, "more than A", id="O125"),
]


@pytest.mark.parametrize(("a", "b", "expected"), SEED_CASES + PEER_CASES)
def test_unidirectional_result_is_a(a: str, b: str, expected: str) -> None:
    assert _uni(a, b) == Shape.parse(expected)


@pytest.mark.parametrize(("a", "b", "axis", "fragment"), ERRORS)
def test_unidirectional_rejects_b_that_does_not_broadcast_to_a(
    a: str, b: str, axis: int | None, fragment: str
) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        _uni(a, b)
    assert excinfo.value.mode == "unidirectional"
    assert excinfo.value.axis == axis
    assert excinfo.value.operand == 1


def test_unidirectional_is_not_numpy() -> None:
    # numpy gives [2,3]; B -> A is one-directional, so [3] -> [2,1] fails
    assert bcast.broadcast_shapes("[2,1]", "[3]") == (2, 3)
    with pytest.raises(BroadcastError):
        _uni("[2,1]", "[3]")


def test_unidirectional_with_unknown_rank_a_is_unknown_rank() -> None:
    assert _uni("[...]", "[...]").rank is None


# -- where DESIGN §3 answers differently from a peer -------------------------------------


def test_unidirectional_b_zero_against_a_one_is_an_error_though_numpy_gives_zero() -> None:
    # SEMANTICS 1.3 / D9: NumPy would give 0; B -> A cannot change A.
    assert bcast.broadcast_shapes("[1]", "[0]") == (0,)
    with pytest.raises(BroadcastError, match="0 vs 1"):
        _uni("[1]", "[0]")


def test_broadcast_numpy_validates_dynamic_dims_that_openvino_skips() -> None:
    # O118 / O131: OpenVINO skips pairs with a dynamic dim and answers [5]; no [2..4] equals 5.
    with pytest.raises(BroadcastError, match=re.escape("2..4")) as excinfo:
        _uni("[5]", "[2..4]")
    assert excinfo.value.axis == 0


def test_broadcast_numpy_rejects_a_target_interval_no_data_dim_fits() -> None:
    # O137: OpenVINO answers [1..4] for data [5]; B = 5 can never equal A in 1..4.
    with pytest.raises(BroadcastError, match=re.escape("5 vs 1..4")):
        _uni("[1..4]", "[5]")


def test_broadcast_numpy_refines_the_target_with_data_where_openvino_does_not() -> None:
    # O136: OpenVINO answers [1..10,?]; B = 3 (not 1) forces A's last dim to 3.
    assert _uni("[1..10,?]", "[3]") == Shape.parse("[1..10,3]")
    # O119 / O132: a non-constant target of length 3 is [?,?,?]; data [4] fixes the last dim.
    assert _uni("[?,?,?]", "[4]") == Shape.parse("[?,?,4]")


def test_unidirectional_rejects_gemm_bias_that_onnx_shape_inference_lets_through() -> None:
    # X60 / X61: ONNX shape inference never checks Gemm's C against (M, N).
    with pytest.raises(BroadcastError, match="5 vs 4") as excinfo:
        _uni("[2,4]", "[5]")
    assert excinfo.value.axis == 1
    with pytest.raises(BroadcastError, match="more than A"):
        _uni("[2,4]", "[2,4,1]")


def test_unidirectional_rejects_prelu_slope_that_onnx_and_runtimes_accept() -> None:
    # X68: ONNX shape inference does not check the slope; the ReferenceEvaluator places a 1-D
    # slope on the matching channel (R38). Unidirectional [3] -> [2,3,4] fails at axis 2.
    with pytest.raises(BroadcastError, match="3 vs 4") as excinfo:
        _uni("[2,3,4]", "[3]")
    assert excinfo.value.axis == 2
    # X69
    with pytest.raises(BroadcastError, match="4 vs 3"):
        _uni("[2,3]", "[4]")
    # X70 / R40: onnxruntime broadcasts the slope both ways and returns [2,3].
    with pytest.raises(BroadcastError, match="more than A"):
        _uni("[3]", "[2,3]")
