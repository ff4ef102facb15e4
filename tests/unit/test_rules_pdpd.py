"""Mode ``pdpd`` (OpenVINO PDPD): B broadcast onto A starting at ``axis``; the result is A.

Expected values: the OpenVINO broadcast rules (PDPD rules 1-5 and the PDPD examples),
SEMANTICS.md 5.1 (O55-O98, O192-O235) where DESIGN §3 agrees with OpenVINO, and DESIGN §3 for
the cases where it does not (named tests at the end). PDPD is one-directional: no reversal.
"""

from __future__ import annotations

import re

import pytest

import bcast
from bcast import BroadcastError, Shape


def _pdpd(a: str, b: str, axis: int | None) -> Shape:
    if axis is None:
        return bcast.broadcast_shapes(a, b, mode="pdpd")
    return bcast.broadcast_shapes(a, b, mode="pdpd", axis=axis)


SEED_CASES = [
    pytest.param("[2,3,4,5]", "[3,4]", 1, "[2,3,4,5]", id="seed-window-at-axis-1"),
    pytest.param("[2,3,4,5]", "[3,1]", 1, "[2,3,4,5]", id="seed-trailing-one"),
    pytest.param("[2,3,4,5]", "[4,5]", -1, "[2,3,4,5]", id="seed-axis-minus-one"),
    pytest.param("[2,3,4,5]", "[4,5]", None, "[2,3,4,5]", id="seed-default-axis"),
    pytest.param("[2,3,4,5]", "[4,5]", 2, "[2,3,4,5]", id="seed-axis-2"),
    pytest.param("[2,3,4,5]", "[1,3]", 0, "[2,3,4,5]", id="seed-axis-0"),
    pytest.param("[2,3,4,5]", "[]", None, "[2,3,4,5]", id="seed-scalar"),
    pytest.param("[2,3,4,5]", "[5]", None, "[2,3,4,5]", id="seed-vector"),
    pytest.param("[2,3]", "[3,1]", 1, "[2,3]", id="seed-rule5-trailing-one-ignored"),
]

PEER_CASES = [
    pytest.param("[2,3,4,5]", "[3,4]", 1, "[2,3,4,5]", id="O55"),
    pytest.param("[2,3,4,5]", "[3,1]", 1, "[2,3,4,5]", id="O56"),
    pytest.param("[2,3,4,5]", "[4,5]", -1, "[2,3,4,5]", id="O57"),
    pytest.param("[2,3,4,5]", "[4,5]", 2, "[2,3,4,5]", id="O58"),
    pytest.param("[2,3,4,5]", "[1,3]", 0, "[2,3,4,5]", id="O59"),
    pytest.param("[2,3,4,5]", "[]", -1, "[2,3,4,5]", id="O60"),
    pytest.param("[2,3,4,5]", "[5]", -1, "[2,3,4,5]", id="O61"),
    pytest.param("[2,3,4,5]", "[5]", 3, "[2,3,4,5]", id="O62"),
    pytest.param("[?,3]", "[5]", 0, "[5,3]", id="O73"),
    pytest.param("[1..10,3]", "[5,3]", 0, "[5,3]", id="O74"),
    pytest.param("[2,3]", "[?]", 1, "[2,3]", id="O76"),
    pytest.param("[2,0]", "[0]", 1, "[2,0]", id="O78"),
    pytest.param("[...]", "[3]", -1, "[...]", id="O80"),
    pytest.param("[2,3]", "[2,3]", 0, "[2,3]", id="O82"),
    pytest.param("[]", "[]", -1, "[]", id="O83"),
    pytest.param("[2,3]", "[1,1]", -1, "[2,3]", id="O86"),
    pytest.param("[2,3]", "[1,1]", 0, "[2,3]", id="O87"),
    pytest.param("[2,3,4]", "[1,4]", 1, "[2,3,4]", id="O88"),
    pytest.param("[2,3,4]", "[3,1]", 1, "[2,3,4]", id="O89"),
    pytest.param("[2..8,3]", "[4..10]", 0, "[4..8,3]", id="O90"),
    pytest.param("[2..8]", "[0..3]", 0, "[2..8]", id="O92"),
    pytest.param("[2,3,4,5]", "[]", None, "[2,3,4,5]", id="O98"),
    pytest.param("[2,3]", "[]", 2, "[2,3]", id="O224"),
    # OpenVINO Broadcast pdpd with data as B and the target as A (DESIGN §3)
    pytest.param("[2,3]", "[3]", -1, "[2,3]", id="O192"),
    pytest.param("[2,3]", "[3]", 1, "[2,3]", id="O193"),
    pytest.param("[2,3,4]", "[3,4]", -1, "[2,3,4]", id="O199"),
    pytest.param("[2,3,4]", "[3,1]", -1, "[2,3,4]", id="O200"),
    pytest.param("[2,3,4]", "[?,4]", 1, "[2,3,4]", id="O202"),
    pytest.param("[2,3]", "[3]", -1, "[2,3]", id="O203"),
    pytest.param("[2,3]", "[3]", 1, "[2,3]", id="O204"),
    pytest.param("[2,3,4]", "[3,4]", -1, "[2,3,4]", id="O210"),
    pytest.param("[2,3,4]", "[3,1]", -1, "[2,3,4]", id="O211"),
    pytest.param("[2,3,4]", "[?,4]", 1, "[2,3,4]", id="O213"),
    pytest.param("[2,3]", "[]", -1, "[2,3]", id="O233"),
    pytest.param("[]", "[]", -1, "[]", id="O235"),
    # partial shapes: the most precise sound answer (DESIGN §1)
    pytest.param("[N,3]", "[N]", 0, "[N,3]", id="symbol-onto-same-symbol"),
    pytest.param("[N,3]", "[1]", 0, "[N,3]", id="one-onto-symbol"),
    pytest.param("[N,3]", "[5]", 0, "[5,3]", id="static-refines-symbol"),
    pytest.param("[N,3]", "[M]", 0, "[N,3]", id="other-symbol-keeps-a"),
]

ERRORS = [
    pytest.param("[8,1,6,1]", "[7,1,5]", 1, 1, "7 vs 1", id="O63"),
    pytest.param("[2,3,4]", "[3,4,1]", -1, 0, "3 vs 2", id="O65"),
    pytest.param("[2,3,4]", "[3]", 0, 0, "3 vs 2", id="O70"),
    pytest.param("[2,3,4]", "[2]", 1, 1, "2 vs 3", id="O71"),
    pytest.param("[2,1,4]", "[3]", 1, 1, "3 vs 1", id="O72"),
    pytest.param("[2..10,3]", "[12,3]", 0, 0, "12 vs 2..10", id="O75"),
    pytest.param("[4,5]", "[5]", 0, 0, "5 vs 4", id="O94"),
    pytest.param("[4,5]", "[2]", 1, 1, "2 vs 5", id="O95"),
    pytest.param("[3]", "[0]", -1, 0, "0 vs 3", id="O229"),
    pytest.param("[2,3,4]", "[3,4,5]", 1, None, "does not fit", id="trailing-non-one-past-a"),
]

PARAMETER_ERRORS = [
    pytest.param("[2,3]", "[2,3,4]", -1, "more than A", id="O66"),
    pytest.param("[2,3]", "[3]", -2, "axis must be -1 or a non-negative integer", id="O67"),
    pytest.param("[2,3]", "[3]", 5, "axis 5", id="O68"),
    pytest.param("[2,3]", "[3]", 2, "axis 2", id="O69"),
    pytest.param("[]", "[1]", -1, "more than A", id="O84"),
    pytest.param("[3]", "[1,1]", -1, "more than A", id="O85"),
    pytest.param("[2,3]", "[]", 3, "axis 3", id="O225"),
    pytest.param("[]", "[]", 1, "axis 1", id="O226"),
    pytest.param("[2,3]", "[2,3,4]", -1, "more than A", id="O198"),
    pytest.param("[2,3]", "[2,3,4]", -1, "more than A", id="O209"),
]


@pytest.mark.parametrize(("a", "b", "axis", "expected"), SEED_CASES + PEER_CASES)
def test_pdpd_broadcasts_b_onto_a(a: str, b: str, axis: int | None, expected: str) -> None:
    assert _pdpd(a, b, axis) == Shape.parse(expected)


@pytest.mark.parametrize(("a", "b", "axis", "failing_axis", "fragment"), ERRORS)
def test_pdpd_rejects_b_that_does_not_fit_a(
    a: str, b: str, axis: int, failing_axis: int | None, fragment: str
) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        _pdpd(a, b, axis)
    assert excinfo.value.mode == "pdpd"
    assert excinfo.value.axis == failing_axis
    assert excinfo.value.operand == 1


@pytest.mark.parametrize(("a", "b", "axis", "fragment"), PARAMETER_ERRORS)
def test_pdpd_rejects_rank_and_axis_errors(a: str, b: str, axis: int, fragment: str) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        _pdpd(a, b, axis)
    assert excinfo.value.mode == "pdpd"
    assert excinfo.value.axis is None


@pytest.mark.parametrize(
    ("cond", "then", "otherwise", "expected"),
    [
        pytest.param("[2,3,4]", "[2,3,4]", "[3,4]", "[2,3,4]", id="O106"),
        pytest.param("[3,4]", "[2,3,4]", "[3,4]", "[2,3,4]", id="O107"),
        pytest.param("[2,3,4]", "[3,4]", "[3,4]", None, id="O108"),
    ],
)
def test_pdpd_applied_twice_as_openvino_select_does(
    cond: str, then: str, otherwise: str, expected: str | None
) -> None:
    # OpenVINO Select pdpd: the result starts as `then`; `else`, then `cond`, are PDPD-merged in.
    step = _pdpd(then, otherwise, -1)
    if expected is None:
        with pytest.raises(BroadcastError, match="more than A"):
            _pdpd(str(step), cond, -1)
    else:
        assert _pdpd(str(step), cond, -1) == Shape.parse(expected)


def test_pdpd_is_one_directional() -> None:
    # rule 1: B has rank <= rank(A); swapping the operands of a valid case fails
    assert _pdpd("[2,3,4,5]", "[3,4]", 1) == (2, 3, 4, 5)
    with pytest.raises(BroadcastError, match="more than A"):
        _pdpd("[3,4]", "[2,3,4,5]", 1)


def test_pdpd_plan_reports_the_resolved_axis() -> None:
    assert bcast.plan("[2,3,4,5]", "[4,5]", mode="pdpd").axis == 2
    assert bcast.plan("[2,3,4,5]", "[3,1]", mode="pdpd", axis=1).axis == 1


# -- where DESIGN §3 answers differently from a peer -------------------------------------


def test_pdpd_trims_trailing_ones_that_openvino_shape_inference_rejects() -> None:
    # O64: OpenVINO shape inference fails (axis + rank(B) > rank(A)); the seed's rule 5 and
    # OpenVINO's reference kernel ignore B's trailing 1.
    assert _pdpd("[2,3,4]", "[3,4,1]", 1) == (2, 3, 4)
    plan = bcast.plan("[2,3,4]", "[3,4,1]", mode="pdpd", axis=1)
    assert plan.alignment[1] == (1, 2, None)


def test_pdpd_default_axis_is_minus_one_not_openvinos_ir_default_zero() -> None:
    # O96 / O99 / O201 / O212: OpenVINO's Python API and IR reader default the axis to 0.
    assert _pdpd("[2,3,4,5]", "[4,5]", None) == (2, 3, 4, 5)
    assert _pdpd("[2,3]", "[3]", None) == (2, 3)


def test_pdpd_default_axis_rejects_a_leading_window_that_openvino_axis_zero_accepts() -> None:
    # O97: OpenVINO (axis 0 by default) accepts [2,3] at the front; with -1 B sits at the end.
    with pytest.raises(BroadcastError, match="2 vs 4") as excinfo:
        _pdpd("[2,3,4,5]", "[2,3]", None)
    assert excinfo.value.axis == 2
    assert _pdpd("[2,3,4,5]", "[2,3]", 0) == (2, 3, 4, 5)


def test_pdpd_accepts_b_one_against_a_zero_that_openvino_rejects() -> None:
    # O77 / O228: OpenVINO's static pre-check B > A rejects 1 > 0; B=1 broadcasts to anything.
    assert _pdpd("[2,0]", "[1]", 1) == (2, 0)
    assert _pdpd("[0]", "[1]", -1) == (0,)


def test_pdpd_rejects_b_zero_against_a_one_that_openvino_accepts() -> None:
    # O79 / O227: OpenVINO gives [2,0] / [0]; B -> A is one-directional and the result is A.
    with pytest.raises(BroadcastError, match="0 vs 1") as excinfo:
        _pdpd("[2,1]", "[0]", 1)
    assert excinfo.value.axis == 1
    with pytest.raises(BroadcastError, match="0 vs 1") as excinfo:
        _pdpd("[1]", "[0]", -1)
    assert excinfo.value.axis == 0


def test_pdpd_interval_of_a_narrowed_to_what_b_allows_where_openvino_returns_b() -> None:
    # O91: OpenVINO gives [2..5]; A is 0..3 and B (2..5, never 1) must equal it: 2..3.
    assert _pdpd("[0..3]", "[2..5]", 0) == Shape.parse("[2..3]")


def test_pdpd_keeps_a_one_where_openvino_widens_it_to_b_interval() -> None:
    # O93: OpenVINO gives [..3]; B 0 onto A 1 is an error, so only B = 1 is valid: result 1.
    assert _pdpd("[1]", "[0..3]", 0) == (1,)


def test_pdpd_with_unknown_rank_b_returns_a_where_openvino_returns_unknown_rank() -> None:
    # O81: OpenVINO gives [...]; the result of PDPD is always A.
    assert _pdpd("[2,3]", "[...]", -1) == (2, 3)


def test_pdpd_with_unknown_rank_still_validates_the_axis() -> None:
    with pytest.raises(BroadcastError, match="axis must be -1"):
        _pdpd("[...]", "[3]", -2)
    with pytest.raises(BroadcastError, match="axis 5"):
        _pdpd("[2,3]", "[...]", 5)


def test_pdpd_b_wider_than_target_is_an_error_not_openvino_broadcast_bidirectional_dim() -> None:
    # O194 / O205: OpenVINO Broadcast pdpd gives [2,3] for data [2,3], target [2,1], axis 0.
    with pytest.raises(BroadcastError, match="3 vs 1") as excinfo:
        _pdpd("[2,1]", "[2,3]", 0)
    assert excinfo.value.axis == 1


def test_pdpd_short_b_fits_where_openvino_broadcast_reports_out_of_range() -> None:
    # O195 / O206, O196 / O207, O234: OpenVINO Broadcast pdpd needs data to reach the end of
    # the target; the element-wise rule only needs B to fit inside A.
    assert _pdpd("[2,3,4]", "[1,3]", 0) == (2, 3, 4)
    assert _pdpd("[2,3,4]", "[3]", 1) == (2, 3, 4)
    assert _pdpd("[2,3]", "[]", 0) == (2, 3)


def test_pdpd_b_longer_than_target_is_an_error_where_openvino_broadcast_drops_dims() -> None:
    # O197 / O208: OpenVINO Broadcast pdpd silently ignores data dims past the target.
    with pytest.raises(BroadcastError, match="more than A"):
        _pdpd("[2,3]", "[2,3,4]", 0)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param("[0..1]", "[3]", id="a-zero-or-one-b-three"),
        pytest.param("[1..2]", "[0]", id="a-one-or-two-b-zero"),
    ],
)
def test_pdpd_rejects_intervals_where_no_instance_fits_though_openvino_merges_them(
    a: str, b: str
) -> None:
    # OpenVINO's two-way Dimension::broadcast_merge answers [3] and [0]; one-way B -> A has
    # no valid instance (B must equal A or be 1).
    with pytest.raises(BroadcastError) as excinfo:
        _pdpd(a, b, 0)
    assert excinfo.value.axis == 0
    assert excinfo.value.kind == "shapes"


@pytest.mark.parametrize(
    ("a", "b", "axis"),
    [
        pytest.param("[...]", "[3]", -2, id="unknown-rank-a"),
        pytest.param("[2,3]", "[...]", -2, id="unknown-rank-b-negative"),
        pytest.param("[2,3]", "[...]", 3, id="unknown-rank-b-beyond-rank"),
    ],
)
def test_pdpd_rejects_an_invalid_axis_even_with_unknown_rank_where_openvino_returns_dynamic(
    a: str, b: str, axis: int
) -> None:
    with pytest.raises(BroadcastError, match="axis") as excinfo:
        _pdpd(a, b, axis)
    assert excinfo.value.kind == "parameter"


@pytest.mark.parametrize(("else_", "expected"), [("B", "[B]"), ("C", "[B]")])
def test_select_pdpd_output_keeps_thens_symbol_where_openvino_takes_the_conditions(
    else_: str, expected: str
) -> None:
    # OpenVINO Select pdpd: 'else' goes into 'then', then 'cond' into the result; cond [A],
    # then [B] gives OpenVINO's output A's symbol, whatever 'else' is. Unsound: A may be 1
    # while B is 5, and the result is then 5. bcast (the two PDPD steps of the checker): B.
    np = pytest.importorskip("numpy")
    ov = pytest.importorskip("openvino")
    symbols = {"A": ov.Symbol(), "B": ov.Symbol(), "C": ov.Symbol()}

    def param(name: str, dtype: type) -> object:
        dim = ov.Dimension(-1)
        dim.set_symbol(symbols[name])
        return ov.opset1.parameter(ov.PartialShape([dim]), dtype)

    node = ov.opset1.select(
        param("A", np.bool_), param("B", np.float32), param(else_, np.float32), "pdpd"
    )
    assert node.get_output_partial_shape(0)[0].get_symbol() == symbols["A"]
    then_else = bcast.broadcast_shapes("[B]", f"[{else_}]", mode="pdpd")
    assert bcast.broadcast_shapes(then_else, "[A]", mode="pdpd") == Shape.parse(expected)
