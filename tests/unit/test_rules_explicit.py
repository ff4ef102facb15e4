"""Mode ``explicit`` (OpenVINO Broadcast explicit): data axis k goes to target axis axes_mapping[k].

Expected values: the Broadcast-1 spec examples, SEMANTICS.md 5.1 (O160-O191, O244-O250) where
DESIGN §3 agrees with OpenVINO, and DESIGN §3 (named tests) where it does not. The result is the
target. One-directional: no reversal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

import bcast
from bcast import BroadcastError, Shape


def _explicit(data: str, target: str, mapping: Sequence[int]) -> Shape:
    return bcast.broadcast_shapes(data, target, mode="explicit", axes_mapping=mapping)


CASES = [
    pytest.param("[16]", "[1,16,50,50]", [1], "[1,16,50,50]", id="seed-C-to-NCHW"),
    pytest.param("[50,50]", "[1,50,50,16]", [1, 2], "[1,50,50,16]", id="seed-HW-to-NHWC"),
    pytest.param("[16]", "[1,16,50,50]", [1], "[1,16,50,50]", id="O160"),
    pytest.param("[50,50]", "[1,50,50,16]", [1, 2], "[1,50,50,16]", id="O161"),
    pytest.param("[1]", "[2,3]", [0], "[2,3]", id="O166"),
    pytest.param("[]", "[2,3]", [], "[2,3]", id="O169"),
    pytest.param("[?]", "[2,3]", [1], "[2,3]", id="O174"),
    pytest.param("[16]", "[1,16,50,50]", [1], "[1,16,50,50]", id="O176"),
    pytest.param("[50,50]", "[1,50,50,16]", [1, 2], "[1,50,50,16]", id="O177"),
    pytest.param("[1]", "[2,3]", [0], "[2,3]", id="O182"),
    pytest.param("[]", "[2,3]", [], "[2,3]", id="O185"),
    pytest.param("[?]", "[2,3]", [1], "[2,3]", id="O190"),
    pytest.param("[2]", "[2,3]", [0], "[2,3]", id="O246"),
    pytest.param("[2,3]", "[2,3]", [0, 1], "[2,3]", id="O248"),
    pytest.param("[1,1]", "[2,3]", [0, 1], "[2,3]", id="O249"),
    pytest.param("[3]", "[3,3]", [0], "[3,3]", id="O250"),
    pytest.param("[]", "[]", [], "[]", id="scalar-to-scalar"),
    pytest.param("[0]", "[0,4]", [0], "[0,4]", id="zero-size"),
    pytest.param("[1]", "[0,4]", [0], "[0,4]", id="one-onto-zero"),
    pytest.param("[N]", "[2,N]", [1], "[2,N]", id="symbol"),
    pytest.param("[5]", "[2,?]", [1], "[2,5]", id="data-refines-unknown-target"),
    pytest.param("[...]", "[2,3]", [0], "[2,3]", id="unknown-rank-data-gives-target"),
    pytest.param("[3]", "[...]", [0], "[...]", id="unknown-rank-target"),
]

MISMATCHES = [
    pytest.param("[3]", "[2,4]", [1], 1, "3 vs 4", id="O167"),
    pytest.param("[4]", "[4,1]", [1], 1, "4 vs 1", id="O168"),
    pytest.param("[2,3]", "[2,3,4]", [0, 2], 2, "3 vs 4", id="O173"),
    pytest.param("[3]", "[2,4]", [1], 1, "3 vs 4", id="O183"),
    pytest.param("[4]", "[4,1]", [1], 1, "4 vs 1", id="O184"),
    pytest.param("[2,3]", "[2,3,4]", [0, 2], 2, "3 vs 4", id="O189"),
    pytest.param("[0]", "[1,3]", [0], 0, "0 vs 1", id="zero-onto-one"),
    pytest.param("[2..4]", "[2,5]", [1], 1, "2..4 vs 5", id="interval-cannot-fit"),
]

MAPPING_ERRORS = [
    pytest.param("[50,50]", "[50,50,16]", [1, 0], "strictly increasing", id="O162"),
    pytest.param("[50,50]", "[1,50,50,16]", [1], "one entry per data axis", id="O163"),
    pytest.param("[16]", "[1,16,50,50]", [4], "below the target rank", id="O164"),
    pytest.param("[]", "[2,3]", [0], "one entry per data axis", id="O171"),
    pytest.param("[3]", "[2,3]", [-1], "non-negative", id="O172"),
    pytest.param("[50,50]", "[50,50,16]", [1, 0], "strictly increasing", id="O178"),
    pytest.param("[50,50]", "[1,50,50,16]", [1], "one entry per data axis", id="O179"),
    pytest.param("[16]", "[1,16,50,50]", [4], "below the target rank", id="O180"),
    pytest.param("[]", "[2,3]", [0], "one entry per data axis", id="O187"),
    pytest.param("[3]", "[2,3]", [-1], "non-negative", id="O188"),
    pytest.param("[]", "[2,3]", [5], "one entry per data axis", id="O244"),
    pytest.param("[]", "[1,3]", [0, 1], "one entry per data axis", id="O245"),
]


@pytest.mark.parametrize(("data", "target", "mapping", "expected"), CASES)
def test_explicit_result_is_the_target(
    data: str, target: str, mapping: list[int], expected: str
) -> None:
    assert _explicit(data, target, mapping) == Shape.parse(expected)


@pytest.mark.parametrize(("data", "target", "mapping", "axis", "fragment"), MISMATCHES)
def test_explicit_rejects_data_dims_that_do_not_fit_the_mapped_target_dim(
    data: str, target: str, mapping: list[int], axis: int, fragment: str
) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        _explicit(data, target, mapping)
    assert excinfo.value.mode == "explicit"
    assert excinfo.value.axis == axis
    assert excinfo.value.operand == 0


@pytest.mark.parametrize(("data", "target", "mapping", "fragment"), MAPPING_ERRORS)
def test_explicit_rejects_malformed_axes_mapping(
    data: str, target: str, mapping: list[int], fragment: str
) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        _explicit(data, target, mapping)
    assert excinfo.value.mode == "explicit"
    assert excinfo.value.axis is None
    assert "axes_mapping" in str(excinfo.value)


def test_explicit_plan_places_data_axes_at_the_mapped_target_axes() -> None:
    plan = bcast.plan("[50,50]", "[1,50,50,16]", mode="explicit", axes_mapping=[1, 2])
    assert plan.aligned_shape(0) == (1, 50, 50, 1)
    assert plan.axes_mapping == (1, 2)


# -- where DESIGN §3 answers differently from a peer -------------------------------------


def test_explicit_rejects_duplicate_axes_that_openvino_lets_through() -> None:
    # O165 / O181: OpenVINO only checks "sorted" and the CPU plugin then computes garbage.
    with pytest.raises(BroadcastError, match="strictly increasing") as excinfo:
        _explicit("[16,16]", "[2,16,3]", [1, 1])
    assert excinfo.value.axis is None
    assert "[1, 1]" in str(excinfo.value)


def test_explicit_scalar_data_takes_an_empty_mapping_not_openvinos_one_entry() -> None:
    # O170 / O186: OpenVINO accepts a 1-entry mapping for scalar data if the target dim is 1.
    assert _explicit("[]", "[1,3]", []) == (1, 3)
    with pytest.raises(BroadcastError, match="one entry per data axis"):
        _explicit("[]", "[1,3]", [0])


def test_explicit_refines_an_unknown_target_dim_with_data_where_openvino_keeps_it() -> None:
    # O175 / O191 (non-constant target of length 2 is [?,?]) and O247 (target [2,-1] is
    # [2,?]): OpenVINO returns the target as is; data 3 mapped there forces it to 3.
    assert _explicit("[3]", "[?,?]", [1]) == Shape.parse("[?,3]")
    assert _explicit("[3]", "[2,?]", [1]) == Shape.parse("[2,3]")


def test_explicit_needs_axes_mapping() -> None:
    with pytest.raises(BroadcastError, match="needs axes_mapping"):
        bcast.broadcast_shapes("[3]", "[2,3]", mode="explicit")


@pytest.mark.parametrize(
    ("mapping", "fragment"),
    [
        pytest.param([1, 0], "strictly increasing", id="transposed"),
        pytest.param([1, 1], "strictly increasing", id="duplicate"),
        pytest.param([-1], "non-negative", id="negative"),
        pytest.param([5], "below the target rank", id="beyond-target"),
    ],
)
def test_explicit_validates_the_mapping_when_data_rank_is_unknown_unlike_openvino(
    mapping: list[int], fragment: str
) -> None:
    # OpenVINO skips every axes_mapping check when rank(data) is dynamic and returns the
    # target; the mapping is wrong whatever the data's rank.
    with pytest.raises(BroadcastError, match=fragment) as excinfo:
        _explicit("[...]", "[2,3]", mapping)
    assert excinfo.value.kind == "parameter"


@pytest.mark.parametrize(
    ("length", "mapping", "openvino", "fragment"),
    [
        pytest.param(None, [0, 2, 1], "[...]", "strictly increasing", id="unknown-length-order"),
        pytest.param(None, [0, 0, 1], "[...]", "strictly increasing", id="unknown-length-dup"),
        pytest.param(4, [0, 2, 1], "[?,?,?,?]", "strictly increasing", id="length-4-order"),
        pytest.param(4, [0, 1, 5], "[?,?,?,?]", "below the target rank 4", id="length-4-range"),
    ],
)
def test_explicit_validates_the_mapping_when_the_target_is_unknown_unlike_openvino(
    length: int | None, mapping: list[int], openvino: str, fragment: str
) -> None:
    # OpenVINO skips the order and range checks of axes_mapping when the target shape is not
    # a constant (only the count against rank(data) stays): data [?,?,?] with a target of
    # unknown length gives [...], with a target of length 4 [?,?,?,?]. Run it to see.
    np = pytest.importorskip("numpy")
    ov = pytest.importorskip("openvino")
    opset3 = ov.opset3
    data = opset3.parameter([-1, -1, -1], np.float32)
    target = opset3.parameter(ov.PartialShape([-1 if length is None else length]), np.int64)
    axes = opset3.constant(np.array(mapping, np.int64))
    node = opset3.broadcast(data, target, axes, "explicit")
    assert str(node.get_output_partial_shape(0)) == openvino
    shown = "[...]" if length is None else "[" + ",".join("?" * length) + "]"
    with pytest.raises(BroadcastError, match=fragment) as excinfo:
        _explicit("[?,?,?]", shown, mapping)
    assert excinfo.value.kind == "parameter"
