"""BroadcastError and TypeError: every invalid input gets its own message naming what was wrong.

Tests read the fields (``.mode``, ``.axis``, ``.operand``, ``.shapes``) and one stable fragment
of the text, never the whole message (STYLE B4).
"""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest

import bcast
from bcast import BroadcastError, Shape

TWO_OPERAND_MODES = ["pdpd", "unidirectional", "bidirectional", "explicit"]
NON_PDPD_MODES = ["numpy", "none", "unidirectional", "bidirectional", "explicit"]
NON_EXPLICIT_MODES = ["numpy", "none", "pdpd", "unidirectional", "bidirectional"]


def _extra(mode: str) -> dict[str, object]:
    """The parameters a mode needs to get past its own parameter checks."""
    return {"axes_mapping": [0]} if mode == "explicit" else {}


# -- operand count -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", TWO_OPERAND_MODES)
@pytest.mark.parametrize("count", [0, 1, 3])
def test_two_operand_modes_reject_other_operand_counts(mode: str, count: int) -> None:
    shapes = ["[3]"] * count
    with pytest.raises(BroadcastError, match="exactly 2 operands") as excinfo:
        bcast.broadcast_shapes(*shapes, mode=mode, **_extra(mode))  # type: ignore[arg-type]
    assert excinfo.value.mode == mode
    assert f"got {count}" in str(excinfo.value)
    assert excinfo.value.axis is None


def test_operand_count_message_names_the_roles() -> None:
    with pytest.raises(BroadcastError, match="A and B"):
        bcast.broadcast_shapes("[3]", mode="pdpd")
    with pytest.raises(BroadcastError, match="data and target"):
        bcast.broadcast_shapes("[3]", mode="bidirectional")


def test_numpy_with_zero_operands_gives_a_scalar() -> None:
    assert bcast.broadcast_shapes() == ()
    assert bcast.broadcast_shapes(mode="numpy") == Shape.parse("[]")


def test_none_with_zero_operands_raises() -> None:
    with pytest.raises(BroadcastError, match="at least one operand") as excinfo:
        bcast.broadcast_shapes(mode="none")
    assert excinfo.value.mode == "none"


def test_many_operands() -> None:
    shapes = [(1,) * i + (i + 1,) + (1,) * (7 - i) for i in range(8)]
    assert bcast.broadcast_shapes(*shapes) == (1, 2, 3, 4, 5, 6, 7, 8)
    assert bcast.broadcast_shapes(*([(3,)] * 100)) == (3,)


# -- mode --------------------------------------------------------------------------------


def test_unknown_mode_lists_the_valid_names() -> None:
    with pytest.raises(BroadcastError, match="unknown mode 'bogus'") as excinfo:
        bcast.broadcast_shapes("[2]", "[2]", mode="bogus")
    assert "numpy" in str(excinfo.value)
    assert "explicit" in str(excinfo.value)


@pytest.mark.parametrize("name", ["NUMPY", "PDPD", "NONE", "EXPLICIT", "BIDIRECTIONAL", "NumPy"])
def test_mode_names_are_case_insensitive(name: str) -> None:
    # OpenVINO writes its AutoBroadcastType and BroadcastType names in capitals.
    assert bcast.Mode.parse(name) is bcast.Mode(name.lower())


def test_mode_in_capitals_applies_the_rule() -> None:
    assert bcast.broadcast_shapes("[2,1]", "[3]", mode="NUMPY") == (2, 3)
    with pytest.raises(BroadcastError, match="unknown mode 'NUMPI'"):
        bcast.broadcast_shapes("[2]", "[2]", mode="NUMPI")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param(3, id="int"),
        # compares element-wise with "numpy": must not end in "truth value is ambiguous"
        pytest.param(np.array(["numpy", "none"]), id="array"),
    ],
)
@pytest.mark.parametrize("shapes", [("[2]", "[2]"), ((2,), (2,))], ids=["text", "ints"])
def test_mode_of_the_wrong_type_is_a_type_error(mode: object, shapes: tuple[object, ...]) -> None:
    with pytest.raises(TypeError, match="mode must be a str"):
        bcast.broadcast_shapes(*shapes, mode=mode)  # type: ignore[arg-type]


# -- axis --------------------------------------------------------------------------------


def test_axis_below_minus_one_is_rejected() -> None:
    with pytest.raises(BroadcastError, match="axis must be -1 or a non-negative integer") as e:
        bcast.broadcast_shapes("[2,3]", "[3]", mode="pdpd", axis=-2)
    assert e.value.mode == "pdpd"
    assert "got -2" in str(e.value)


@pytest.mark.parametrize(
    ("a", "b", "axis"),
    [
        pytest.param("[2,3]", "[3]", 5, id="far-beyond"),
        pytest.param("[2,3]", "[]", 3, id="scalar-b-beyond"),
        pytest.param("[2,3]", "[...]", 3, id="unknown-rank-b"),
    ],
)
def test_axis_beyond_the_rank_of_a_is_rejected(a: str, b: str, axis: int) -> None:
    with pytest.raises(BroadcastError, match=f"axis {axis}") as excinfo:
        bcast.broadcast_shapes(a, b, mode="pdpd", axis=axis)
    assert excinfo.value.mode == "pdpd"
    assert "beyond the rank" in str(excinfo.value)


@pytest.mark.parametrize("mode", NON_PDPD_MODES)
def test_axis_is_rejected_for_modes_other_than_pdpd(mode: str) -> None:
    with pytest.raises(BroadcastError, match="axis is only used by mode 'pdpd'") as excinfo:
        bcast.broadcast_shapes("[3]", "[3]", mode=mode, axis=0, **_extra(mode))  # type: ignore[arg-type]
    assert excinfo.value.mode == mode
    assert "axis=0" in str(excinfo.value)


@pytest.mark.parametrize(
    "axis",
    [
        pytest.param(1.0, id="float"),
        pytest.param("1", id="str"),
        pytest.param(None, id="none"),
        pytest.param(True, id="bool"),
        pytest.param(False, id="bool-false"),
    ],
)
def test_axis_of_the_wrong_type_is_a_type_error(axis: object) -> None:
    with pytest.raises(TypeError, match="axis must be an int"):
        bcast.broadcast_shapes("[2,3]", "[3]", mode="pdpd", axis=axis)  # type: ignore[arg-type]


@pytest.mark.parametrize("axis", [pytest.param(True, id="bool"), pytest.param(1.0, id="float")])
@pytest.mark.parametrize("function", [bcast.broadcast_shapes, bcast.plan])
def test_axis_of_the_wrong_type_is_rejected_even_after_an_equal_int_axis_was_seen(
    axis: object, function: object
) -> None:
    # True == 1 == 1.0 in Python: a result cache must not answer for the wrong type.
    assert bcast.broadcast_shapes((2, 3), (3,), mode="pdpd", axis=1) == (2, 3)
    with pytest.raises(TypeError, match="axis must be an int"):
        function((2, 3), (3,), mode="pdpd", axis=axis)  # type: ignore[operator]


# -- axes_mapping ------------------------------------------------------------------------


def test_axes_mapping_missing_for_explicit() -> None:
    with pytest.raises(BroadcastError, match="needs axes_mapping") as excinfo:
        bcast.broadcast_shapes("[3]", "[2,3]", mode="explicit")
    assert excinfo.value.mode == "explicit"


@pytest.mark.parametrize(
    ("data", "target", "mapping", "fragment", "shown"),
    [
        pytest.param("[3]", "[2,3]", [0, 1], "one entry per data axis", "[0, 1]", id="too-long"),
        pytest.param("[2,3]", "[2,3]", [0], "one entry per data axis", "[0]", id="too-short"),
        pytest.param("[2,3]", "[2,3,4]", [1, 0], "strictly increasing", "[1, 0]", id="decreasing"),
        pytest.param("[2,2]", "[2,2,3]", [1, 1], "strictly increasing", "[1, 1]", id="duplicate"),
        pytest.param("[3]", "[2,3]", [-1], "non-negative", "[-1]", id="negative"),
        pytest.param("[3]", "[2,3]", [2], "below the target rank 2", "[2]", id="out-of-range"),
        pytest.param(
            "[...]", "[3]", [0, 1], "below the target rank 1", "[0, 1]", id="unknown-rank-data"
        ),
        pytest.param("[...]", "[...]", [2, 1], "strictly increasing", "[2, 1]", id="unknown-ranks"),
    ],
)
def test_malformed_axes_mapping_is_named_with_its_value(
    data: str, target: str, mapping: list[int], fragment: str, shown: str
) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        bcast.broadcast_shapes(data, target, mode="explicit", axes_mapping=mapping)
    message = str(excinfo.value)
    assert "axes_mapping" in message
    assert shown in message
    assert excinfo.value.mode == "explicit"
    assert excinfo.value.axis is None


@pytest.mark.parametrize("mode", NON_EXPLICIT_MODES)
def test_axes_mapping_is_rejected_for_modes_other_than_explicit(mode: str) -> None:
    with pytest.raises(BroadcastError, match="axes_mapping is only used by mode 'explicit'") as e:
        bcast.broadcast_shapes("[3]", "[3]", mode=mode, axes_mapping=[0])
    assert e.value.mode == mode
    assert "[0]" in str(e.value)


@pytest.mark.parametrize(
    ("mapping", "fragment"),
    [
        pytest.param([0.0], "axes_mapping entries must be ints", id="float-entry"),
        pytest.param([True], "not bool", id="bool-entry"),
        pytest.param(["0"], "axes_mapping entries must be ints", id="str-entry"),
        pytest.param("0", "axes_mapping must be a sequence", id="str"),
        pytest.param(0, "axes_mapping must be a sequence", id="int"),
        # unordered: {2, 1} iterates as 1, 2 and a dict as its keys, silently reordered
        pytest.param({2, 1}, "ordered sequence", id="set"),
        pytest.param({1: 0, 2: 0}, "ordered sequence", id="dict"),
    ],
)
def test_axes_mapping_of_the_wrong_type_is_a_type_error(mapping: object, fragment: str) -> None:
    with pytest.raises(TypeError, match=re.escape(fragment)):
        bcast.broadcast_shapes("[3]", "[3]", mode="explicit", axes_mapping=mapping)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "mapping", [pytest.param((True,), id="bool"), pytest.param((1.0,), id="float")]
)
@pytest.mark.parametrize("function", [bcast.broadcast_shapes, bcast.plan])
def test_axes_mapping_of_the_wrong_type_is_rejected_even_after_an_equal_int_mapping_was_seen(
    mapping: tuple[object, ...], function: object
) -> None:
    assert bcast.broadcast_shapes((3,), (2, 3), mode="explicit", axes_mapping=(1,)) == (2, 3)
    with pytest.raises(TypeError, match="axes_mapping entries"):
        function((3,), (2, 3), mode="explicit", axes_mapping=mapping)  # type: ignore[operator]


def test_axes_mapping_accepts_a_tuple_and_numpy_integers() -> None:
    np = pytest.importorskip("numpy")
    expected = (2, 3)
    assert bcast.broadcast_shapes("[3]", "[2,3]", mode="explicit", axes_mapping=(1,)) == expected
    mapping = np.array([1], dtype=np.int64)
    assert bcast.broadcast_shapes("[3]", "[2,3]", mode="explicit", axes_mapping=mapping) == expected


# -- dims --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "fragment"),
    [
        pytest.param((True,), "bool", id="bool"),
        pytest.param((2, False), "bool", id="bool-second"),
        pytest.param((2.0,), "float", id="float"),
        pytest.param((2, 3.5), "float", id="float-second"),
    ],
)
def test_bool_and_float_dims_are_type_errors(shape: tuple[object, ...], fragment: str) -> None:
    with pytest.raises(TypeError, match=re.escape(fragment)):
        bcast.broadcast_shapes(shape, (1,))  # type: ignore[arg-type]


def test_bool_dims_are_rejected_even_after_an_equal_int_shape_was_seen() -> None:
    # (True,) == (1,) and (2.0,) == (2,) in Python: a cache must not answer for them.
    assert bcast.broadcast_shapes((1,), (2,)) == (2,)
    with pytest.raises(TypeError):
        bcast.broadcast_shapes((True,), (2,))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        bcast.broadcast_shapes((1,), (2.0,))  # type: ignore[arg-type]


def test_list_shapes_are_answered_like_tuples_and_checked_like_them() -> None:
    # lists of plain ints are looked up as the equal tuples; anything else is not
    assert bcast.broadcast_shapes((1,), (2,)) == (2,)
    assert bcast.broadcast_shapes([1], [2]) == (2,)
    assert bcast.broadcast_shapes([1], (2,)) == (2,)
    with pytest.raises(TypeError):
        bcast.broadcast_shapes([True], [2])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        bcast.broadcast_shapes([1], [2.0])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        bcast.broadcast_shapes([[1]], [2])  # type: ignore[list-item]
    for _ in range(2):  # failures are never cached
        with pytest.raises(BroadcastError, match="cannot broadcast"):
            bcast.broadcast_shapes([2, 3], [4])


def test_negative_dims_are_rejected() -> None:
    with pytest.raises(BroadcastError, match="non-negative") as excinfo:
        bcast.broadcast_shapes((2, -3), (3,))
    assert "-3" in str(excinfo.value)


@pytest.mark.parametrize(
    ("shapes", "kwargs", "fragment"),
    [
        pytest.param(((2, 3), (4, -1)), {}, "operand #1: dimension 1 must be non-negative"),
        pytest.param(((2, 3), (4, 2**63)), {}, "operand #1: dimension 1 must be at most"),
        pytest.param(("[2,3]", "[4,-1]"), {}, "operand #1: cannot parse shape '[4,-1]'"),
        pytest.param(
            ((-2, 3), (3,)), {"mode": "pdpd"}, "operand A: dimension 0 must be non-negative"
        ),
        pytest.param(
            ((3,), ("N", 2**64)),
            {"mode": "explicit", "axes_mapping": [1]},
            "operand target: dimension 1 must be at most",
        ),
    ],
)
def test_a_bad_dim_names_its_operand_position_and_mode(
    shapes: tuple[object, ...], kwargs: dict[str, object], fragment: str
) -> None:
    with pytest.raises(BroadcastError) as excinfo:
        bcast.broadcast_shapes(*shapes, **kwargs)  # type: ignore[arg-type]
    assert fragment in str(excinfo.value)
    assert excinfo.value.mode == kwargs.get("mode", "numpy")
    assert excinfo.value.kind == "input"


def test_an_operand_count_error_keeps_the_shapes() -> None:
    with pytest.raises(BroadcastError, match="exactly 2 operands") as excinfo:
        bcast.broadcast_shapes((3,), (3,), (3,), mode="pdpd")
    assert excinfo.value.shapes == (Shape((3,)),) * 3


# Python refuses to write an int of more than 4300 digits as text (int_max_str_digits): a
# message that tries raises a plain ValueError in place of ours.
HUGE = 10**5000


@pytest.mark.parametrize(
    ("call", "error"),
    [
        pytest.param(lambda: bcast.Dim(HUGE), BroadcastError, id="Dim"),
        pytest.param(lambda: bcast.Dim(1, HUGE), BroadcastError, id="Dim-hi"),
        pytest.param(lambda: bcast.broadcast_shapes((HUGE,)), BroadcastError, id="dim"),
        pytest.param(lambda: bcast.broadcast_shapes((-HUGE,)), BroadcastError, id="neg-dim"),
        pytest.param(lambda: bcast.Shape.parse("[" + "9" * 5000 + "]"), BroadcastError, id="text"),
        pytest.param(lambda: bcast.Dim.parse("1.." + "9" * 5000), BroadcastError, id="interval"),
        pytest.param(lambda: bcast.Dim.parse("-" + "9" * 5000), BroadcastError, id="neg-text"),
        pytest.param(
            lambda: bcast.broadcast_shapes((2, 3), (3,), mode="pdpd", axis=HUGE),
            BroadcastError,
            id="axis",
        ),
        pytest.param(
            lambda: bcast.broadcast_shapes((2, 3), (3,), axis=-HUGE), BroadcastError, id="axis-np"
        ),
        pytest.param(
            lambda: bcast.broadcast_shapes((3,), (2, 3), mode="explicit", axes_mapping=[HUGE]),
            BroadcastError,
            id="mapping",
        ),
        pytest.param(
            lambda: bcast.broadcast_shapes((3,), (2, 3), axes_mapping=[HUGE]),
            BroadcastError,
            id="mapping-np",
        ),
        pytest.param(
            lambda: bcast.broadcast_shapes((3,), (2, 3), mode="explicit", axes_mapping=HUGE),
            TypeError,
            id="mapping-int",
        ),
    ],
)
def test_numbers_too_long_to_print_still_get_our_errors(
    call: object, error: type[Exception]
) -> None:
    with pytest.raises(error) as excinfo:
        call()  # type: ignore[operator]
    message = str(excinfo.value)
    assert len(message) < 500  # shortened, not the whole number


def test_huge_dims_up_to_int64_work() -> None:
    assert bcast.broadcast_shapes((2**62,), (1,)) == (2**62,)
    assert bcast.broadcast_shapes((2**62, 1), (2**62,)) == (2**62, 2**62)
    assert bcast.broadcast_shapes((2**63 - 1,), (1,)) == (2**63 - 1,)


@pytest.mark.parametrize("value", [2**63, 2**64])
def test_dims_beyond_int64_fail_cleanly(value: int) -> None:
    with pytest.raises(BroadcastError, match=re.escape("2**63-1")) as excinfo:
        bcast.broadcast_shapes((value,), (1,))
    assert str(value) in str(excinfo.value)


def test_huge_dims_that_differ_are_reported() -> None:
    with pytest.raises(BroadcastError, match="cannot broadcast") as excinfo:
        bcast.broadcast_shapes((2**62,), (2**62 + 1,))
    assert excinfo.value.axis == 0


def test_rank_100_shapes_broadcast() -> None:
    ones = (1,) * 100
    assert bcast.broadcast_shapes(ones, (5,)) == (1,) * 99 + (5,)
    big = tuple(range(1, 101))
    assert bcast.broadcast_shapes(big, ones) == big
    assert bcast.broadcast_shapes(big, ones, mode="unidirectional") == big


def test_rank_100_mismatch_names_the_axis() -> None:
    a = (1,) * 57 + (2,) + (1,) * 42
    b = (1,) * 57 + (3,) + (1,) * 42
    with pytest.raises(BroadcastError, match="at axis 57") as excinfo:
        bcast.broadcast_shapes(a, b)
    assert excinfo.value.axis == 57
    assert "^ axis 57" in str(excinfo.value)


def test_malformed_shape_text_is_a_broadcast_error() -> None:
    with pytest.raises(BroadcastError, match="cannot parse shape"):
        bcast.broadcast_shapes("[2,,3]", "[3]")


def test_a_bare_int_is_not_a_shape() -> None:
    with pytest.raises(TypeError, match="a shape must be"):
        bcast.broadcast_shapes(3, (3,))  # type: ignore[arg-type]


# -- unknown rank (DESIGN §3: it adds no information) ------------------------------------


@pytest.mark.parametrize(
    ("shapes", "mode", "kwargs", "expected"),
    [
        pytest.param(("[...]", "[2,3]"), "numpy", {}, "[...]", id="numpy"),
        pytest.param(("[...]", "[...]"), "numpy", {}, "[...]", id="numpy-both"),
        pytest.param(("[2,3]", "[...]"), "bidirectional", {}, "[...]", id="bidirectional"),
        pytest.param(("[...]", "[2,3]"), "none", {}, "[2,3]", id="none-known-operand"),
        pytest.param(("[2,?]", "[...]", "[?,3]"), "none", {}, "[2,3]", id="none-known-merged"),
        pytest.param(("[...]", "[...]"), "none", {}, "[...]", id="none-both"),
        pytest.param(("[2,3]", "[...]"), "pdpd", {}, "[2,3]", id="pdpd-unknown-b"),
        pytest.param(("[...]", "[3]"), "pdpd", {}, "[...]", id="pdpd-unknown-a"),
        pytest.param(("[2,3]", "[...]"), "unidirectional", {}, "[2,3]", id="uni-unknown-b"),
        pytest.param(("[...]", "[3]"), "unidirectional", {}, "[...]", id="uni-unknown-a"),
        pytest.param(
            ("[...]", "[2,3]"), "explicit", {"axes_mapping": [1]}, "[2,3]", id="explicit-data"
        ),
        pytest.param(
            ("[3]", "[...]"), "explicit", {"axes_mapping": [0]}, "[...]", id="explicit-target"
        ),
    ],
)
def test_unknown_rank_gives_what_the_known_operands_force(
    shapes: tuple[str, ...], mode: str, kwargs: dict[str, object], expected: str
) -> None:
    result = bcast.broadcast_shapes(*shapes, mode=mode, **kwargs)  # type: ignore[arg-type]
    assert result == Shape.parse(expected)


@pytest.mark.parametrize(
    ("shapes", "mode", "kwargs", "fragment"),
    [
        pytest.param(("[...]", "[3]", "[4]"), "numpy", {}, "cannot broadcast", id="numpy"),
        pytest.param(("[2]", "[...]", "[3]"), "none", {}, "differ at axis 0", id="none"),
        pytest.param(("[2,3]", "[...]", "[3]"), "none", {}, "differ in rank", id="none-rank"),
        pytest.param(("[...]", "[3]"), "pdpd", {"axis": -3}, "axis must be -1", id="pdpd-axis"),
        pytest.param(
            ("[...]", "[2,3]"),
            "explicit",
            {"axes_mapping": [1, 0]},
            "strictly increasing",
            id="explicit-mapping",
        ),
        pytest.param(
            ("[3]", "[...]"),
            "explicit",
            {"axes_mapping": [0, 1]},
            "one entry per data axis",
            id="explicit-length",
        ),
    ],
)
def test_unknown_rank_does_not_hide_errors_the_known_operands_show(
    shapes: tuple[str, ...], mode: str, kwargs: dict[str, object], fragment: str
) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        bcast.broadcast_shapes(*shapes, mode=mode, **kwargs)  # type: ignore[arg-type]
    assert excinfo.value.mode == mode


# -- the picture: a caret under the failing axis -----------------------------------------


def _row(lines: list[str], label: str) -> str:
    (row,) = [line for line in lines if line.split() and line.split()[0] == label]
    return row


@pytest.mark.parametrize(
    ("shapes", "kwargs", "axis", "cells"),
    [
        pytest.param(("[12345,3]", "[7]"), {}, 1, {"#0": "3", "#1": "7"}, id="numpy"),
        pytest.param(
            ("[2,300]", "[2,4]"), {"mode": "none"}, 1, {"#0": "300", "#1": "4"}, id="none"
        ),
        pytest.param(
            ("[20,3,4]", "[2]"), {"mode": "pdpd", "axis": 1}, 1, {"A": "3", "B": "2"}, id="pdpd"
        ),
        pytest.param(
            ("[200,1]", "[3]"), {"mode": "unidirectional"}, 1, {"A": "1", "B": "3"}, id="uni"
        ),
        pytest.param(
            ("[100,3]", "[100,4]"),
            {"mode": "bidirectional"},
            1,
            {"data": "3", "target": "4"},
            id="bidirectional",
        ),
        pytest.param(
            ("[20,3]", "[20,30,4]"),
            {"mode": "explicit", "axes_mapping": [0, 2]},
            2,
            {"data": "3", "target": "4"},
            id="explicit",
        ),
    ],
)
def test_caret_sits_under_the_failing_axis(
    shapes: tuple[str, ...], kwargs: dict[str, object], axis: int, cells: dict[str, str]
) -> None:
    with pytest.raises(BroadcastError) as excinfo:
        bcast.broadcast_shapes(*shapes, **kwargs)  # type: ignore[arg-type]
    assert excinfo.value.axis == axis
    lines = str(excinfo.value).splitlines()
    (caret_line,) = [line for line in lines if "^" in line]
    assert caret_line.strip() == f"^ axis {axis}"
    column = caret_line.index("^")
    for label, text in cells.items():
        row = _row(lines, label)
        # dims are right-aligned in their column: the caret is under the last character
        assert row[column - len(text) + 1 : column + 1] == text, (label, row, caret_line)
        assert column + 1 == len(row) or row[column + 1] == " "


def test_first_line_is_a_summary_with_mode_and_shapes() -> None:
    with pytest.raises(BroadcastError) as excinfo:
        bcast.broadcast_shapes("[2,3]", "[4]")
    first = str(excinfo.value).splitlines()[0]
    assert first.startswith("numpy: ")
    assert "[2,3]" in first
    assert "[4]" in first
    assert "axis 1" in first
    assert excinfo.value.shapes == (Shape((2, 3)), Shape((4,)))
    assert excinfo.value.operand == 1


def test_error_axis_is_never_negative() -> None:
    with pytest.raises(BroadcastError) as excinfo:
        bcast.broadcast_shapes((2, 3, 4), (5, 4))
    assert excinfo.value.axis == 1
    assert "-" not in str(excinfo.value).splitlines()[0].split("axis")[1]


# -- the exception itself ----------------------------------------------------------------


def test_broadcast_error_is_a_value_error() -> None:
    assert issubclass(BroadcastError, ValueError)
    with pytest.raises(ValueError):
        bcast.broadcast_shapes("[2]", "[3]")


@pytest.mark.parametrize(
    ("shapes", "kwargs"),
    [
        pytest.param(("[2,3]", "[4]"), {}, id="incompatible"),
        pytest.param(("[2,3]", "[3]"), {"mode": "pdpd", "axis": -2}, id="parameter"),
        pytest.param(
            ("[2,3]", "[2,3,4]"), {"mode": "explicit", "axes_mapping": [0, 2]}, id="explicit"
        ),
    ],
)
def test_broadcast_error_survives_pickling(
    shapes: tuple[str, ...], kwargs: dict[str, object]
) -> None:
    with pytest.raises(BroadcastError) as excinfo:
        bcast.broadcast_shapes(*shapes, **kwargs)  # type: ignore[arg-type]
    original = excinfo.value
    copy = pickle.loads(pickle.dumps(original))
    assert type(copy) is BroadcastError
    assert (copy.kind, copy.mode, copy.shapes, copy.axis, copy.operand, copy.reason) == (
        original.kind,
        original.mode,
        original.shapes,
        original.axis,
        original.operand,
        original.reason,
    )
    assert str(copy) == str(original)


@pytest.mark.parametrize(
    ("shapes", "kwargs", "kind"),
    [
        pytest.param(("[2,3]", "[4]"), {}, "shapes", id="incompatible"),
        pytest.param(("[2,3]", "[2,3,4]"), {"mode": "pdpd"}, "shapes", id="pdpd-rank"),
        pytest.param(("[2,3]", "[3]"), {"mode": "none"}, "shapes", id="none-rank"),
        pytest.param(("[...]", "[3]", "[4]"), {}, "shapes", id="unknown-rank-and-clash"),
        pytest.param(("[3]",), {"mode": "pdpd"}, "parameter", id="operand-count"),
        pytest.param((), {"mode": "none"}, "parameter", id="no-operands"),
        pytest.param(("[2]", "[2]"), {"mode": "bogus"}, "parameter", id="unknown-mode"),
        pytest.param(("[2,3]", "[3]"), {"mode": "pdpd", "axis": -2}, "parameter", id="axis-low"),
        pytest.param(("[2,3]", "[3]"), {"mode": "pdpd", "axis": 5}, "parameter", id="axis-high"),
        pytest.param(("[3]", "[3]"), {"axis": 0}, "parameter", id="axis-not-pdpd"),
        pytest.param(("[3]", "[2,3]"), {"mode": "explicit"}, "parameter", id="mapping-missing"),
        pytest.param(
            ("[3,3]", "[2,3,3]"),
            {"mode": "explicit", "axes_mapping": [1, 1]},
            "parameter",
            id="mapping-duplicate",
        ),
        pytest.param(("[3]", "[3]"), {"axes_mapping": [0]}, "parameter", id="mapping-not-explicit"),
        pytest.param(((-1,), (1,)), {}, "input", id="negative-dim"),
        pytest.param(((2**64,), (1,)), {}, "input", id="huge-dim"),
        pytest.param(("[2,,3]", "[1]"), {}, "input", id="malformed-text"),
    ],
)
def test_error_kind_says_what_is_wrong(
    shapes: tuple[object, ...], kwargs: dict[str, object], kind: str
) -> None:
    with pytest.raises(BroadcastError) as excinfo:
        bcast.broadcast_shapes(*shapes, **kwargs)  # type: ignore[arg-type]
    assert excinfo.value.kind == kind
