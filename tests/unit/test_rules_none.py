"""Mode ``none`` (OpenVINO auto_broadcast none): all shapes must be identical.

Expected values: the OpenVINO broadcast rules ("Input tensors dimensions must match. No implicit
broadcast rule is applied.") and SEMANTICS.md 5.1 (O45-O54, O104-O105). Symmetric: every case
also runs reversed.
"""

from __future__ import annotations

import re

import pytest

import bcast
from bcast import BroadcastError, Shape


def _run(shapes: tuple[str, ...], order: str) -> Shape:
    operands = shapes if order == "given" else tuple(reversed(shapes))
    return bcast.broadcast_shapes(*operands, mode="none")


ORDERS = pytest.mark.parametrize("order", ["given", "reversed"])

CASES = [
    pytest.param(("[2,3]", "[2,3]"), "[2,3]", id="seed-dimensions-match"),
    pytest.param(("[2,3]",), "[2,3]", id="one-operand"),
    pytest.param(("[2,3]", "[2,3]"), "[2,3]", id="O45"),
    pytest.param(("[?,3]", "[2,?]"), "[2,3]", id="O48"),
    pytest.param(("[1..10]", "[5..20]"), "[5..10]", id="O49"),
    pytest.param(("[...]", "[2]"), "[2]", id="O50"),
    pytest.param(("[]", "[]"), "[]", id="O51"),
    pytest.param(("[0]", "[0]"), "[0]", id="O52"),
    pytest.param(("[2,3]", "[2,3]", "[2,3]"), "[2,3]", id="O104"),
    pytest.param(("[N]", "[3]"), "[3]", id="O243"),
    pytest.param(("[N,?]", "[N,4]"), "[N,4]", id="symbol-and-unknown"),
    pytest.param(("[N]", "[?]"), "[N]", id="symbol-survives-unknown"),
    pytest.param(("[...]", "[...]"), "[...]", id="only-unknown-rank"),
    pytest.param(("[...]", "[2..6,3]", "[4..9,?]"), "[4..6,3]", id="unknown-rank-and-intervals"),
]

ERRORS = [
    pytest.param(("[2,3]", "[3]"), None, "differ in rank", id="O46"),
    pytest.param(("[2,1]", "[2,3]"), 1, "differ at axis 1", id="O47"),
    pytest.param(("[1]", "[0]"), 0, "differ at axis 0", id="O53"),
    pytest.param(("[1..4]", "[5..9]"), 0, "differ at axis 0", id="O54"),
    pytest.param(("[2,3]", "[2,3]", "[3]"), None, "differ in rank", id="O105"),
    pytest.param(("[]", "[1]"), None, "differ in rank", id="scalar-vs-one"),
    pytest.param(("[...]", "[2]", "[3]"), 0, "differ at axis 0", id="unknown-rank-known-clash"),
]


@pytest.mark.parametrize(("shapes", "expected"), CASES)
@ORDERS
def test_none_merges_identical_shapes(shapes: tuple[str, ...], expected: str, order: str) -> None:
    assert _run(shapes, order) == Shape.parse(expected)


@pytest.mark.parametrize(("shapes", "axis", "fragment"), ERRORS)
@ORDERS
def test_none_rejects_shapes_that_differ(
    shapes: tuple[str, ...], axis: int | None, fragment: str, order: str
) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        _run(shapes, order)
    assert excinfo.value.mode == "none"
    assert excinfo.value.axis == axis


@pytest.mark.parametrize(
    ("shapes", "expected"),
    [
        pytest.param(("[2,3]", "[1]"), (2, 3), id="one"),
        pytest.param(("[2,1]", "[2,3]"), (2, 3), id="stretch"),
        pytest.param(("[0]", "[1]"), (0,), id="zero-vs-one"),
    ],
)
def test_none_does_not_broadcast_what_numpy_would(
    shapes: tuple[str, str], expected: tuple[int, ...]
) -> None:
    assert bcast.broadcast_shapes(*shapes) == expected  # numpy mode would
    with pytest.raises(BroadcastError):
        bcast.broadcast_shapes(*shapes, mode="none")


def test_none_needs_at_least_one_operand() -> None:
    with pytest.raises(BroadcastError, match="at least one operand") as excinfo:
        bcast.broadcast_shapes(mode="none")
    assert excinfo.value.mode == "none"


# -- where DESIGN §3 answers differently from a peer -------------------------------------


def test_none_keeps_the_first_symbol_and_binds_nothing_where_openvino_unifies_symbols() -> None:
    # O242: OpenVINO answers ?<N> and records N == M globally; bcast rules are pure.
    assert bcast.broadcast_shapes("[N]", "[M]", mode="none") == Shape.parse("[N]")
    assert bcast.broadcast_shapes("[M]", "[N]", mode="none") == Shape.parse("[M]")
    # nothing was recorded: N and M still broadcast to ? in numpy mode
    assert bcast.broadcast_shapes("[N]", "[M]") == Shape.parse("[?]")
