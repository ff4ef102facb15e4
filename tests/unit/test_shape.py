"""Shape: construction, validation, the text form of DESIGN §1, equality and hashing."""

from __future__ import annotations

import dataclasses
import re

import pytest

from bcast import BroadcastError, Dim, Shape
from bcast.core.shape import as_shape

# -- construction ------------------------------------------------------------------------


def test_shape_from_ints_is_static() -> None:
    shape = Shape((2, 3, 4))
    assert shape.rank == 3
    assert shape.is_static
    assert shape.to_tuple() == (2, 3, 4)
    assert shape.size() == 24


def test_shape_from_mixed_items() -> None:
    shape = Shape([2, None, "N", "1..5", Dim(0, 3)])
    assert str(shape) == "[2,?,N,1..5,0..3]"
    assert shape.rank == 5
    assert not shape.is_static
    assert shape.size() is None


def test_iteration_yields_dims() -> None:
    dims = list(Shape.parse("[2,N]"))
    assert all(isinstance(d, Dim) for d in dims)
    assert dims == [Dim(2), Dim.symbol("N")]


def test_indexing_and_slicing() -> None:
    shape = Shape.parse("[2,3,4]")
    assert shape[0] == Dim(2)
    assert shape[-1] == Dim(4)
    assert shape[1:] == Shape((3, 4))
    assert isinstance(shape[1:], Shape)
    assert len(shape) == 3


def test_scalar_shape_has_rank_zero() -> None:
    scalar = Shape(())
    assert scalar.rank == 0
    assert scalar.is_static
    assert scalar == ()
    assert str(scalar) == "[]"
    assert scalar.size() == 1


def test_zero_size_shape() -> None:
    assert Shape((2, 0)).size() == 0


def test_unknown_rank_shape() -> None:
    shape = Shape.dynamic()
    assert shape.rank is None
    assert not shape.is_static
    assert str(shape) == "[...]"
    assert shape == Shape.parse("[...]")
    assert shape != Shape(())
    assert shape != ()
    assert hash(shape) == hash(Shape.parse("[...]"))
    assert shape.size() is None


@pytest.mark.parametrize("use", [pytest.param(list, id="iter"), pytest.param(len, id="len")])
def test_unknown_rank_shape_has_no_dims(use: object) -> None:
    with pytest.raises(TypeError, match="unknown rank"):
        use(Shape.dynamic())  # type: ignore[operator]


def test_partial_shape_has_no_tuple() -> None:
    with pytest.raises(ValueError, match="not static"):
        Shape.parse("[2,?]").to_tuple()


def test_shape_is_frozen() -> None:
    shape = Shape((2, 3))
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError)):
        shape.dims = ()  # type: ignore[misc]


def test_shape_of_a_shape_is_the_same_shape() -> None:
    assert Shape(Shape.parse("[N,2]")) == Shape.parse("[N,2]")
    assert Shape(Shape.dynamic()).rank is None


def test_numpy_array_is_a_shape_like() -> None:
    np = pytest.importorskip("numpy")
    assert as_shape(np.array([2, 3], dtype=np.int64)) == (2, 3)


def test_numpy_scalars_follow_the_python_types() -> None:
    np = pytest.importorskip("numpy")
    assert Shape([np.int64(2), np.uint8(3)]) == (2, 3)
    with pytest.raises(TypeError, match="bool"):
        Shape([np.True_])
    with pytest.raises(TypeError, match="float"):
        Shape([np.float64(2.0)])
    with pytest.raises(TypeError, match="bool"):
        as_shape(np.array([True]))
    with pytest.raises(TypeError, match="1-D"):
        as_shape(np.array([[2, 3]]))


def test_huge_dims_up_to_int64_are_accepted() -> None:
    assert Shape((2**62, 2**63 - 1)).to_tuple() == (2**62, 2**63 - 1)


def test_rank_100_shape() -> None:
    shape = Shape((1,) * 99 + (7,))
    assert shape.rank == 100
    assert Shape.parse(str(shape)) == shape


# -- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        pytest.param([True], "bool", id="bool"),
        pytest.param([2, False], "bool", id="bool-second"),
        pytest.param([2.0], "float", id="float"),
        pytest.param([[2]], "list", id="nested"),
        pytest.param([...], "ellipsis", id="ellipsis"),
    ],
)
def test_shape_rejects_non_dims_with_type_error(items: list[object], fragment: str) -> None:
    with pytest.raises(TypeError, match=re.escape(fragment)):
        Shape(items)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        pytest.param([-1], "non-negative", id="negative"),
        pytest.param([2, -3], "non-negative", id="negative-second"),
        pytest.param([2**64], "2**63-1", id="above-int64"),
        pytest.param(["5..3"], "exceeds", id="reversed-interval"),
    ],
)
def test_shape_rejects_invalid_dims(items: list[object], fragment: str) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)):
        Shape(items)  # type: ignore[arg-type]


def test_shape_constructor_refuses_text() -> None:
    with pytest.raises(TypeError, match=re.escape("Shape.parse")):
        Shape("23")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [pytest.param(3, id="int"), pytest.param(2.0, id="float"), pytest.param(None, id="none")],
)
def test_as_shape_refuses_a_bare_scalar(value: object) -> None:
    with pytest.raises(TypeError, match="a shape must be"):
        as_shape(value)  # type: ignore[arg-type]


def test_shape_parse_requires_a_str() -> None:
    with pytest.raises(TypeError, match="must be a str"):
        Shape.parse(["2"])  # type: ignore[arg-type]


# -- text form ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical", "rank"),
    [
        pytest.param("[2,3,4,5]", "[2,3,4,5]", 4, id="static"),
        pytest.param("[]", "[]", 0, id="scalar"),
        pytest.param("[?]", "[?]", 1, id="unknown-dim"),
        pytest.param("[1..10]", "[1..10]", 1, id="interval"),
        pytest.param("[0..5]", "[0..5]", 1, id="interval-from-zero"),
        pytest.param("[..5]", "[0..5]", 1, id="openvino-upper-only"),
        pytest.param("[1..]", "[1..]", 1, id="no-upper-bound"),
        pytest.param("[3..3]", "[3]", 1, id="meeting-ends"),
        pytest.param("[N,M]", "[N,M]", 2, id="symbols"),
        pytest.param("[...]", "[...]", None, id="unknown-rank"),
        pytest.param("2,3,?", "[2,3,?]", 3, id="bracketless"),
        pytest.param("4", "[4]", 1, id="bracketless-single"),
        pytest.param("...", "[...]", None, id="bracketless-unknown-rank"),
        pytest.param("[ 2 , 3 ]", "[2,3]", 2, id="spaces"),
        pytest.param(" [2, 3] ", "[2,3]", 2, id="outer-spaces"),
        pytest.param("[ ]", "[]", 0, id="scalar-with-space"),
        pytest.param("[ ... ]", "[...]", None, id="unknown-rank-with-spaces"),
        pytest.param("[N,?,1..,..5,3..3,0]", "[N,?,1..,0..5,3,0]", 6, id="every-dim-form"),
    ],
)
def test_shape_parse_reads_every_text_form(text: str, canonical: str, rank: int | None) -> None:
    shape = Shape.parse(text)
    assert str(shape) == canonical
    assert shape.rank == rank
    assert Shape.parse(canonical) == shape


@pytest.mark.parametrize(
    ("shape", "text"),
    [
        pytest.param(Shape((2, 3)), "[2,3]", id="static"),
        pytest.param(Shape(()), "[]", id="scalar"),
        pytest.param(Shape([None, "N", Dim(1, None), Dim(0, 5)]), "[?,N,1..,0..5]", id="partial"),
        pytest.param(Shape.dynamic(), "[...]", id="unknown-rank"),
    ],
)
def test_shape_str_round_trips_through_parse(shape: Shape, text: str) -> None:
    assert str(shape) == text
    assert Shape.parse(str(shape)) == shape


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("[2,3", "unbalanced brackets", id="missing-close"),
        pytest.param("2,3]", "unbalanced brackets", id="missing-open"),
        pytest.param("[2,,3]", "empty dimension", id="empty-middle"),
        pytest.param("[,]", "empty dimension", id="only-comma"),
        pytest.param("[2,3,]", "empty dimension", id="trailing-comma"),
        pytest.param("[...,2]", "cannot parse dimension", id="ellipsis-and-dims"),
        pytest.param("[[2]]", "cannot parse dimension", id="nested"),
        pytest.param("[-1]", "non-negative", id="negative"),
        pytest.param("[2.0]", "cannot parse dimension", id="float"),
        pytest.param("(2,3)", "cannot parse dimension", id="parentheses"),
        pytest.param("[2;3]", "cannot parse dimension", id="semicolon"),
        pytest.param("[5..3]", "exceeds", id="reversed-interval"),
        pytest.param("[2 3]", "cannot parse dimension", id="space-between-digits"),
        pytest.param("2 3", "cannot parse dimension", id="bracketless-space-between-digits"),
        pytest.param("[N M]", "cannot parse dimension", id="space-between-symbols"),
        pytest.param("[1,²]", "cannot parse dimension", id="superscript-digit"),
    ],
)
def test_shape_parse_rejects_malformed_text(text: str, fragment: str) -> None:
    with pytest.raises(BroadcastError, match=re.escape(fragment)) as excinfo:
        Shape.parse(text)
    assert "cannot parse shape" in str(excinfo.value)


# -- equality and hashing ----------------------------------------------------------------


@pytest.mark.parametrize(
    "dims",
    [
        pytest.param((2, 3), id="matrix"),
        pytest.param((), id="scalar"),
        pytest.param((0, 1, 7), id="with-zero"),
    ],
)
def test_static_shape_equals_and_hashes_as_its_tuple(dims: tuple[int, ...]) -> None:
    shape = Shape(dims)
    assert shape == dims
    assert hash(shape) == hash(dims)
    assert {shape: "x"}[dims] == "x"


def test_static_shape_differs_from_other_tuples() -> None:
    assert Shape((2, 3)) != (2, 3, 1)
    assert Shape((2, 3)) != (3, 2)
    assert Shape((2, 3)) != (2,)


def test_shape_equality_is_structural() -> None:
    assert Shape.parse("[?,N]") == Shape.parse("[?,N]")
    assert Shape.parse("[?]") != Shape.parse("[N]")
    assert Shape.parse("[1..5]") != Shape.parse("[1..6]")
    assert len({Shape.parse("[?,N]"), Shape.parse("[?,N]"), Shape.parse("[N,?]")}) == 2


def test_unknown_dims_are_not_definitely_equal_but_symbols_are() -> None:
    (unknown_a,) = Shape.parse("[?]")
    (unknown_b,) = Shape.parse("[?]")
    assert not unknown_a.definitely_equal(unknown_b)
    (n_a,) = Shape.parse("[N]")
    (n_b,) = Shape.parse("[N]")
    assert n_a.definitely_equal(n_b)
