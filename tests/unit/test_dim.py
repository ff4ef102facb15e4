"""Dim: construction, validation, the text form, equality, hashing and the three-valued questions.

Expected values come from DESIGN §1 (text form) and §3 (partial-shape policy), never from bcast.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

import bcast
from bcast import BroadcastError, Dim
from bcast.core.dim import MAX_DIM, merge_dims, merge_into

# -- construction ------------------------------------------------------------------------


def test_static_dim_has_equal_bounds_and_no_symbol() -> None:
    dim = Dim(3)
    assert (dim.lo, dim.hi, dim.name) == (3, 3, None)
    assert dim.is_static
    assert not dim.is_symbol
    assert dim.value == 3


def test_interval_dim_keeps_both_bounds() -> None:
    dim = Dim(1, 10)
    assert (dim.lo, dim.hi, dim.name) == (1, 10, None)
    assert not dim.is_static


def test_interval_without_upper_bound_is_unbounded() -> None:
    dim = Dim(2, None)
    assert (dim.lo, dim.hi) == (2, None)
    assert str(dim) == "2.."


def test_zero_to_unbounded_is_the_unknown_dim() -> None:
    assert Dim(0, None) == Dim.unknown()
    assert str(Dim(0, None)) == "?"


def test_interval_whose_ends_meet_is_the_static_dim() -> None:
    assert Dim(3, 3) == Dim(3)
    assert Dim(3, 3).is_static
    assert str(Dim(3, 3)) == "3"


def test_symbol_has_a_name_and_no_value() -> None:
    dim = Dim.symbol("N")
    assert dim.is_symbol
    assert dim.name == "N"
    assert not dim.is_static
    with pytest.raises(ValueError, match="no single value"):
        _ = dim.value


def test_zero_is_a_valid_static_dim() -> None:
    assert Dim(0).value == 0


def test_largest_int64_is_accepted() -> None:
    assert Dim(2**63 - 1).value == MAX_DIM == 2**63 - 1
    assert Dim(0, 2**63 - 1).hi == 2**63 - 1


def test_dim_is_frozen() -> None:
    dim = Dim(3)
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError)):
        dim.lo = 4  # type: ignore[misc]


# -- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param((-1,), "non-negative", id="negative"),
        pytest.param((2, -1), "non-negative", id="negative-upper"),
        pytest.param((2**63,), "2**63-1", id="above-int64"),
        pytest.param((2**64,), "2**63-1", id="far-above-int64"),
        pytest.param((0, 2**63), "2**63-1", id="upper-above-int64"),
        pytest.param((5, 3), "exceeds", id="lo-above-hi"),
    ],
)
def test_dim_rejects_out_of_range_values(args: tuple[int, ...], fragment: str) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        Dim(*args)
    assert isinstance(excinfo.value, ValueError)
    assert excinfo.value.axis is None


@pytest.mark.parametrize(
    "args",
    [
        pytest.param((True,), id="bool"),
        pytest.param((False,), id="bool-false"),
        pytest.param((1, True), id="bool-upper"),
        pytest.param((1.0,), id="float"),
        pytest.param((1, 3.0), id="float-upper"),
        pytest.param(("3",), id="str"),
    ],
)
def test_dim_rejects_non_integers_with_type_error(args: tuple[object, ...]) -> None:
    with pytest.raises(TypeError, match="integer"):
        Dim(*args)  # type: ignore[arg-type]


def test_numpy_integers_are_accepted_as_dims() -> None:
    np = pytest.importorskip("numpy")
    assert Dim(np.int64(4)) == Dim(4)


@pytest.mark.parametrize("name", ["", "1N", "a b", "a..b", "N,M", "[N]", "N?"])
def test_symbol_rejects_malformed_names(name: str) -> None:
    with pytest.raises(BroadcastError, match="invalid symbol name"):
        Dim.symbol(name)


def test_symbol_name_must_be_a_str() -> None:
    with pytest.raises(TypeError, match="symbol name must be a str"):
        Dim.symbol(3)  # type: ignore[arg-type]


# -- text form ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lo", "hi", "name", "canonical"),
    [
        pytest.param("3", 3, 3, None, "3", id="static"),
        pytest.param("0", 0, 0, None, "0", id="zero"),
        pytest.param("?", 0, None, None, "?", id="unknown"),
        pytest.param("1..10", 1, 10, None, "1..10", id="interval"),
        pytest.param("0..5", 0, 5, None, "0..5", id="interval-from-zero"),
        pytest.param("..5", 0, 5, None, "0..5", id="openvino-upper-only"),
        pytest.param("1..", 1, None, None, "1..", id="no-upper-bound"),
        pytest.param("0..", 0, None, None, "?", id="zero-unbounded-is-unknown"),
        pytest.param("3..3", 3, 3, None, "3", id="meeting-ends-are-static"),
        pytest.param("N", 0, None, "N", "N", id="symbol"),
        pytest.param("batch_size", 0, None, "batch_size", "batch_size", id="long-symbol"),
        pytest.param("_x1", 0, None, "_x1", "_x1", id="underscore-symbol"),
        pytest.param(" 3 ", 3, 3, None, "3", id="surrounding-space"),
        pytest.param("9223372036854775807", 2**63 - 1, 2**63 - 1, None, str(2**63 - 1), id="int64"),
    ],
)
def test_dim_parse_reads_every_text_form(
    text: str, lo: int, hi: int | None, name: str | None, canonical: str
) -> None:
    dim = Dim.parse(text)
    assert (dim.lo, dim.hi, dim.name) == (lo, hi, name)
    assert str(dim) == canonical
    assert Dim.parse(canonical) == dim


@pytest.mark.parametrize(
    ("dim", "text"),
    [
        pytest.param(Dim(7), "7", id="static"),
        pytest.param(Dim(2, 9), "2..9", id="interval"),
        pytest.param(Dim(0, 4), "0..4", id="interval-from-zero"),
        pytest.param(Dim(5, None), "5..", id="unbounded"),
        pytest.param(Dim(0, None), "?", id="unknown"),
        pytest.param(Dim.symbol("M"), "M", id="symbol"),
    ],
)
def test_dim_str_round_trips_through_parse(dim: Dim, text: str) -> None:
    assert str(dim) == text
    assert Dim.parse(str(dim)) == dim


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("", "cannot parse dimension", id="empty"),
        pytest.param("2.5", "cannot parse dimension", id="float"),
        pytest.param("x y", "cannot parse dimension", id="space-inside"),
        pytest.param("N..", "cannot parse dimension", id="symbol-interval"),
        pytest.param("?1", "cannot parse dimension", id="question-digit"),
        pytest.param("[3]", "cannot parse dimension", id="bracketed"),
        pytest.param("3,4", "cannot parse dimension", id="two-dims"),
        pytest.param("+3", "cannot parse dimension", id="plus-sign"),
        pytest.param("²", "cannot parse dimension", id="superscript-digit"),
        pytest.param("٣", "cannot parse dimension", id="non-ascii-digit"),
        pytest.param("1..²", "cannot parse dimension", id="superscript-upper-bound"),
        pytest.param("1..٣", "cannot parse dimension", id="non-ascii-upper-bound"),
        pytest.param("-1", "non-negative", id="negative"),
        pytest.param("5..3", "exceeds", id="reversed-interval"),
        pytest.param("9223372036854775808", "2**63-1", id="above-int64"),
    ],
)
def test_dim_parse_rejects_malformed_text(text: str, fragment: str) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)):
        Dim.parse(text)


def test_dim_parse_requires_a_str() -> None:
    with pytest.raises(TypeError, match="must be a str"):
        Dim.parse(3)  # type: ignore[arg-type]


# -- equality and hashing ----------------------------------------------------------------


def test_static_dim_equals_and_hashes_as_its_int() -> None:
    assert Dim(3) == 3
    assert hash(Dim(3)) == hash(3)
    assert Dim(3) != 4


def test_static_dim_does_not_equal_a_bool() -> None:
    assert Dim(1) != True  # noqa: E712


def test_partial_dims_do_not_equal_ints() -> None:
    assert Dim(0, None) != 0
    assert Dim(3, 4) != 3
    assert Dim.symbol("N") != 0


def test_equality_is_structural_and_consistent_with_hash() -> None:
    assert Dim(1, 5) == Dim(1, 5)
    assert hash(Dim(1, 5)) == hash(Dim(1, 5))
    assert Dim.symbol("N") == Dim.symbol("N")
    assert Dim.symbol("N") != Dim.symbol("M")
    assert Dim.symbol("N") != Dim.unknown()
    assert len({Dim(1, 5), Dim(1, 5), Dim(2), Dim.parse("2..2")}) == 2


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param("3", "3", True, id="equal-static"),
        pytest.param("3", "4", False, id="different-static"),
        pytest.param("?", "?", False, id="unknown-not-definitely-unknown"),
        pytest.param("N", "N", True, id="same-symbol"),
        pytest.param("N", "M", False, id="different-symbols"),
        pytest.param("N", "?", False, id="symbol-vs-unknown"),
        pytest.param("N", "3", False, id="symbol-vs-static"),
        pytest.param("1..5", "1..5", False, id="same-interval"),
    ],
)
def test_definitely_equal(a: str, b: str, expected: bool) -> None:
    assert Dim.parse(a).definitely_equal(Dim.parse(b)) is expected
    assert Dim.parse(b).definitely_equal(Dim.parse(a)) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param("?", "3", True, id="unknown-vs-static"),
        pytest.param("2..4", "5", False, id="disjoint"),
        pytest.param("2..4", "4..9", True, id="touching"),
        pytest.param("N", "3", True, id="symbol-vs-static"),
        pytest.param("3", "4", False, id="different-static"),
    ],
)
def test_maybe_equal(a: str, b: str, expected: bool) -> None:
    assert Dim.parse(a).maybe_equal(Dim.parse(b)) is expected
    assert Dim.parse(b).maybe_equal(Dim.parse(a)) is expected


@pytest.mark.parametrize(
    ("text", "definitely", "maybe"),
    [
        pytest.param("1", True, True, id="one"),
        pytest.param("1..1", True, True, id="one-interval"),
        pytest.param("0..1", False, True, id="zero-or-one"),
        pytest.param("?", False, True, id="unknown"),
        pytest.param("N", False, True, id="symbol"),
        pytest.param("2..5", False, False, id="above-one"),
        pytest.param("0", False, False, id="zero"),
    ],
)
def test_one_questions(text: str, definitely: bool, maybe: bool) -> None:
    dim = Dim.parse(text)
    assert dim.definitely_one() is definitely
    assert dim.maybe_one() is maybe


# -- the merge (DESIGN §1 and §3 examples) -----------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param("?", "5", "5", id="unknown-vs-static"),
        pytest.param("N", "1", "N", id="sym-vs-one"),
        pytest.param("N", "N", "N", id="sym-vs-same-sym"),
        pytest.param("N", "3", "3", id="sym-vs-static"),
        pytest.param("N", "M", "?", id="sym-vs-other-sym"),
        pytest.param("N", "?", "?", id="sym-vs-unknown"),
        pytest.param("2..10", "3..5", "3..5", id="intersection"),
        pytest.param("0..3", "1..5", "0..5", id="hull"),
        pytest.param("1..3", "2..5", "2..5", id="only-one-side-may-be-one"),
        pytest.param("0", "1", "0", id="zero-vs-one"),
        pytest.param("0", "0", "0", id="zero-vs-zero"),
    ],
)
@pytest.mark.parametrize("order", ["given", "reversed"])
def test_merge_dims_gives_the_most_precise_sound_dim(
    a: str, b: str, expected: str, order: str
) -> None:
    x, y = (Dim.parse(a), Dim.parse(b)) if order == "given" else (Dim.parse(b), Dim.parse(a))
    assert merge_dims(x, y) == Dim.parse(expected)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param("3", "4", id="static"),
        pytest.param("0", "5", id="zero-vs-five"),
        pytest.param("2..4", "5", id="interval-vs-static"),
    ],
)
def test_merge_dims_reports_certain_failures(a: str, b: str) -> None:
    assert merge_dims(Dim.parse(a), Dim.parse(b)) is None
    assert merge_dims(Dim.parse(b), Dim.parse(a)) is None


@pytest.mark.parametrize(
    ("target", "source", "expected"),
    [
        pytest.param("0", "1", "0", id="b-one-onto-a-zero"),
        pytest.param("?", "5", "5", id="refines-unknown"),
        pytest.param("5", "?", "5", id="unknown-source"),
        pytest.param("N", "M", "N", id="symbols"),
        pytest.param("1", "0..3", "1", id="source-must-be-one"),
    ],
)
def test_merge_into_fits_source_onto_target(target: str, source: str, expected: str) -> None:
    assert merge_into(Dim.parse(target), Dim.parse(source)) == Dim.parse(expected)


def test_merge_into_rejects_zero_onto_one() -> None:
    assert merge_into(Dim(1), Dim(0)) is None


def test_dim_is_exported_from_the_package() -> None:
    assert bcast.Dim is Dim


def test_plans_of_shape_objects_are_cached_and_stay_exact() -> None:
    # A model checks the same symbolic broadcast ([batch,seq,64] + [64]) at every layer: the
    # rule runs once. A cached plan never answers for other dims or for a bool dim.
    a, b = bcast.Shape.parse("[batch,seq,64]"), bcast.Shape((64,))
    first = bcast.plan(a, b)
    assert bcast.plan(bcast.Shape.parse("[batch,seq,64]"), bcast.Shape((64,))) is first
    assert str(first.output) == "[batch,seq,64]"
    other = bcast.plan(bcast.Shape.parse("[batch,seq,1]"), bcast.Shape((64,)))
    assert other is not first and str(other.output) == "[batch,seq,64]"
    assert str(bcast.plan(bcast.Shape.parse("[N,1]"), bcast.Shape.parse("[M]")).output) == "[N,M]"
    with pytest.raises(BroadcastError):
        bcast.plan(bcast.Shape((3,)), bcast.Shape((4,)))
    with pytest.raises(BroadcastError):  # once more: an error is never cached as a plan
        bcast.plan(bcast.Shape((3,)), bcast.Shape((4,)))
    with pytest.raises(TypeError):
        bcast.plan((True,), (2,))
