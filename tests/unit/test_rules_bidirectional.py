"""Mode ``bidirectional`` (OpenVINO Broadcast-3 bidirectional = ONNX Expand): data, target.

The rule is ``numpy.array(input) * numpy.ones(target_shape)`` (OpenVINO bidirectional broadcast
rules), so the result can differ from the target. Expected values: the seed examples,
SEMANTICS.md 5.1 (O138-O159, O230-O231) and 5.2 (Expand rows X48-X58), and NumPy. Symmetric in
its result: every case also runs with data and target swapped.
"""

from __future__ import annotations

import numpy as np
import pytest

import bcast
from bcast import BroadcastError, Shape


def _bidi(shapes: tuple[str, str], order: str) -> Shape:
    data, target = shapes if order == "given" else (shapes[1], shapes[0])
    return bcast.broadcast_shapes(data, target, mode="bidirectional")


ORDERS = pytest.mark.parametrize("order", ["given", "reversed"])

CASES = [
    pytest.param(("[5]", "[1]"), "[5]", id="seed-target-one"),
    pytest.param(("[2,3]", "[3]"), "[2,3]", id="seed-target-lower-rank"),
    pytest.param(("[3,1]", "[3,4]"), "[3,4]", id="seed-data-stretches"),
    pytest.param(("[3,4]", "[]"), "[3,4]", id="seed-scalar-target"),
    pytest.param(("[3,1]", "[2,1,6]"), "[2,3,6]", id="seed-both-stretch"),
    pytest.param(("[5]", "[1]"), "[5]", id="O138"),
    pytest.param(("[2,3]", "[3]"), "[2,3]", id="O139"),
    pytest.param(("[3,1]", "[3,4]"), "[3,4]", id="O140"),
    pytest.param(("[3,4]", "[]"), "[3,4]", id="O141"),
    pytest.param(("[3,1]", "[2,1,6]"), "[2,3,6]", id="O142"),
    pytest.param(("[0]", "[1]"), "[0]", id="O144"),
    pytest.param(("[1]", "[0]"), "[0]", id="O145"),
    pytest.param(("[16,1,1]", "[1,1,50,50]"), "[1,16,50,50]", id="O147"),
    pytest.param(("[1..10]", "[5]"), "[5]", id="O148"),
    pytest.param(("[?]", "[1]"), "[?]", id="O149"),
    pytest.param(("[?]", "[5]"), "[5]", id="O150"),
    pytest.param(("[3]", "[?,?]"), "[?,3]", id="O152"),
    pytest.param(("[3,4,5]", "[?,?]"), "[3,4,5]", id="O153"),
    pytest.param(("[3,1]", "[?,?]"), "[3,?]", id="O154"),
    pytest.param(("[...]", "[2,3]"), "[...]", id="O155"),
    pytest.param(("[2]", "[...]"), "[...]", id="O156"),
    pytest.param(("[3,1]", "[?,2..5]"), "[3,2..5]", id="O157"),
    pytest.param(("[3,1]", "[1..10,?]"), "[3,?]", id="O158"),
    pytest.param(("[1..4]", "[2..6]"), "[2..6]", id="O159"),
    pytest.param(("[]", "[]"), "[]", id="O230"),
    pytest.param(("[]", "[2,3]"), "[2,3]", id="O231"),
    pytest.param(("[3,1]", "[2,1,6]"), "[2,3,6]", id="X48"),
    pytest.param(("[3]", "[1]"), "[3]", id="X49"),
    pytest.param(("[2,3]", "[3]"), "[2,3]", id="X51"),
    pytest.param(("[3,4]", "[]"), "[3,4]", id="X52"),
    pytest.param(("[1]", "[0]"), "[0]", id="X53"),
    pytest.param(("[N]", "[3]"), "[3]", id="X55"),
    pytest.param(("[N]", "[1]"), "[N]", id="X56"),
    pytest.param(("[3,1]", "[1,1]"), "[3,1]", id="X57"),
    pytest.param(("[3]", "[?,?]"), "[?,3]", id="X58"),
]

ERRORS = [
    pytest.param(("[3]", "[2]"), 0, id="O143"),
    pytest.param(("[0]", "[5]"), 0, id="O146"),
    pytest.param(("[2..4]", "[5]"), 0, id="O151"),
    pytest.param(("[3]", "[2]"), 0, id="X50"),
    pytest.param(("[0]", "[5]"), 0, id="X54"),
    pytest.param(("[2,3]", "[4,1]"), 0, id="leading-axis"),
]


@pytest.mark.parametrize(("shapes", "expected"), CASES)
@ORDERS
def test_bidirectional_broadcasts_data_and_target(
    shapes: tuple[str, str], expected: str, order: str
) -> None:
    assert _bidi(shapes, order) == Shape.parse(expected)


@pytest.mark.parametrize(("shapes", "axis"), ERRORS)
@ORDERS
def test_bidirectional_rejects_incompatible_target(
    shapes: tuple[str, str], axis: int, order: str
) -> None:
    with pytest.raises(BroadcastError, match="cannot broadcast") as excinfo:
        _bidi(shapes, order)
    assert excinfo.value.mode == "bidirectional"
    assert excinfo.value.axis == axis


@pytest.mark.parametrize(
    ("data", "target"),
    [
        pytest.param((16, 1, 1), (1, 1, 50, 50), id="target-ones"),
        pytest.param((2, 3), (3,), id="target-lower-rank"),
        pytest.param((3, 1), (2, 1, 6), id="both"),
        pytest.param((1,), (0, 3), id="zero-size"),
    ],
)
def test_bidirectional_is_data_times_ones_of_target(
    data: tuple[int, ...], target: tuple[int, ...]
) -> None:
    # the seed's rule 2, evaluated with NumPy
    expected = (np.ones(data) * np.ones(target)).shape
    assert bcast.broadcast_shapes(data, target, mode="bidirectional") == expected


def test_bidirectional_result_can_differ_from_the_target() -> None:
    # seed rule 4: target 1s and a lower target rank
    result = bcast.broadcast_shapes("[16,1,1]", "[1,1,50,50]", mode="bidirectional")
    assert result != Shape.parse("[1,1,50,50]")


# -- where DESIGN §3 answers differently from a peer -------------------------------------


def test_bidirectional_rejects_a_negative_target_dim_that_openvino_reads_as_unknown() -> None:
    # SEMANTICS 1.8 / D16: OpenVINO reads a constant -1 as ?, ONNX keeps the literal -1.
    with pytest.raises(BroadcastError, match="non-negative"):
        bcast.broadcast_shapes("[3]", (-1,), mode="bidirectional")
