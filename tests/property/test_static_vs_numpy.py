"""Static shapes: every rule set against an oracle that is not bcast.

- ``numpy`` and ``bidirectional``: `numpy.broadcast_shapes` is the oracle, errors included.
- ``unidirectional``: `numpy.broadcast_to` (one-way) on a zero-itemsize array is the oracle.
- ``pdpd``, ``explicit`` and ``none``: small oracles written in this file straight from the
  specification texts (OpenVINO "Broadcast Rules For Elementwise Operations", PDPD rules 1-5;
  Broadcast-1/3 explicit mode) plus the decisions of DESIGN §3 where the texts are silent. They
  are deliberately naive (loops over the definition) and share no code with ``bcast.core.rules``.

Shapes come from `hypothesis.extra.numpy` strategies (so that most cases broadcast) and from
free random small shapes with dims 0..4 (so that failures are generated too).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bcast

Shape = tuple[int, ...]

# -- strategies --------------------------------------------------------------------------

small_dims = st.integers(min_value=0, max_value=4)
free_shapes = st.lists(small_dims, min_size=0, max_size=4).map(tuple)


@st.composite
def operand_lists(draw: st.DrawFn, min_count: int = 0, max_count: int = 5) -> list[Shape]:
    """Operands that mostly broadcast (hypothesis.extra.numpy) or are random (may fail)."""
    count = draw(st.integers(min_count, max_count))
    if count == 0:
        return []
    if draw(st.booleans()):
        shapes = draw(
            hnp.mutually_broadcastable_shapes(
                num_shapes=count, min_dims=0, max_dims=4, min_side=0, max_side=4
            )
        )
        return [tuple(s) for s in shapes.input_shapes]
    if draw(st.booleans()):
        base = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
        return [tuple(base[draw(st.integers(0, len(base))) :]) for _ in range(count)]
    return [draw(free_shapes) for _ in range(count)]


def _numpy(shapes: list[Shape]) -> Shape | None:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _ours(*shapes: Shape, **kwargs: object) -> Shape | None:
    try:
        result = bcast.broadcast_shapes(*shapes, **kwargs)  # type: ignore[arg-type]
    except bcast.BroadcastError:
        return None
    assert result.is_static, result
    return result.to_tuple()


def _as_lists(shapes: list[Shape]) -> list[list[int]]:
    # The uncached path: bcast caches plans of tuples of ints, lists take the full rule.
    return [list(s) for s in shapes]


# -- numpy / multidirectional ------------------------------------------------------------


@given(operand_lists())
def test_numpy_mode_equals_numpy_broadcast_shapes(shapes: list[Shape]) -> None:
    expected = _numpy(shapes)
    note(f"numpy: {expected}")
    assert _ours(*shapes) == expected
    assert _ours(*shapes, mode="multidirectional") == expected
    # The same answer through the uncached path (lists) and the text form.
    try:
        via_lists = bcast.broadcast_shapes(*_as_lists(shapes)).to_tuple()
    except bcast.BroadcastError:
        via_lists = None
    assert via_lists == expected
    texts = ["[" + ",".join(map(str, s)) + "]" for s in shapes]
    try:
        via_text: Shape | None = bcast.broadcast_shapes(*texts).to_tuple()
    except bcast.BroadcastError:
        via_text = None
    assert via_text == expected


@given(operand_lists(min_count=2, max_count=5))
def test_numpy_mode_is_order_independent(shapes: list[Shape]) -> None:
    assert _ours(*shapes) == _ours(*reversed(shapes))


@given(operand_lists(min_count=1, max_count=5))
def test_numpy_mode_error_names_a_failing_output_axis(shapes: list[Shape]) -> None:
    if _numpy(shapes) is not None:
        return
    with pytest.raises(bcast.BroadcastError) as excinfo:
        bcast.broadcast_shapes(*shapes)
    err = excinfo.value
    assert isinstance(err, ValueError)
    assert err.mode == "numpy"
    rank = max(len(s) for s in shapes)
    assert err.axis is not None and 0 <= err.axis < rank
    # The named axis really fails: its non-1 values differ.
    column = {s[err.axis - (rank - len(s))] for s in shapes if err.axis >= rank - len(s)}
    assert len(column - {1}) > 1


# -- bidirectional: numpy.array(data) * numpy.ones(target) -------------------------------


@given(operand_lists(min_count=2, max_count=2))
def test_bidirectional_equals_numpy_of_data_and_target(shapes: list[Shape]) -> None:
    data, target = shapes
    assert _ours(data, target, mode="bidirectional") == _numpy([data, target])


# -- unidirectional: B broadcasts to A (numpy.broadcast_to) ------------------------------


def _broadcast_to_accepts(a: Shape, b: Shape) -> bool:
    # A zero-itemsize array: no memory whatever the shape.
    source = np.empty(b, dtype=np.dtype([]))
    try:
        np.broadcast_to(source, a)
    except ValueError:
        return False
    return True


@given(operand_lists(min_count=2, max_count=2))
def test_unidirectional_succeeds_exactly_when_numpy_broadcast_to_does(
    shapes: list[Shape],
) -> None:
    a, b = shapes
    accepted = _broadcast_to_accepts(a, b)
    ours = _ours(a, b, mode="unidirectional")
    assert (ours is not None) == accepted
    if accepted:
        assert ours == a


# -- pdpd: the OpenVINO rules, read from the text ----------------------------------------


def pdpd_oracle(a: Shape, b: Shape, axis: int) -> Shape | None:
    """OpenVINO PDPD rules 1-5 plus DESIGN §3; None when the rule rejects the shapes.

    1. rank(B) <= rank(A).  4. axis -1 means rank(A) - rank(B) (B's rank before trimming).
    5. B's trailing 1s are ignored.  2/3. the trimmed B is a contiguous run of A starting at
    ``axis``, each of its dims equal to A's or 1 (B broadcasts onto A, not back).  The result
    is A.
    """
    if len(b) > len(a) or axis < -1:
        return None
    start = len(a) - len(b) if axis == -1 else axis
    if start < 0 or start > len(a):
        return None
    trimmed = list(b)
    while trimmed and trimmed[-1] == 1:
        trimmed.pop()
    if start + len(trimmed) > len(a):
        return None
    for i, dim in enumerate(trimmed):
        if dim != 1 and dim != a[start + i]:
            return None
    return a


@st.composite
def pdpd_cases(draw: st.DrawFn) -> tuple[Shape, Shape, int]:
    a = draw(free_shapes)
    if draw(st.booleans()) and a:
        # B is a window of A with some dims replaced by 1 and maybe trailing 1s appended.
        start = draw(st.integers(0, len(a)))
        stop = draw(st.integers(start, len(a)))
        b = [1 if draw(st.integers(0, 3)) == 0 else d for d in a[start:stop]]
        b += [1] * draw(st.integers(0, 2))
        axis = draw(st.sampled_from([start, -1]))
        return a, tuple(b), axis
    return a, draw(free_shapes), draw(st.integers(-2, 5))


@given(pdpd_cases())
def test_pdpd_matches_the_spec_rules(case: tuple[Shape, Shape, int]) -> None:
    a, b, axis = case
    expected = pdpd_oracle(a, b, axis)
    note(f"oracle: {expected}")
    assert _ours(a, b, mode="pdpd", axis=axis) == expected


@pytest.mark.parametrize(
    ("a", "b", "axis", "expected"),
    [
        pytest.param((2, 3, 4, 5), (3, 4), 1, (2, 3, 4, 5), id="spec-example-window"),
        pytest.param((2, 3, 4, 5), (3, 1), 1, (2, 3, 4, 5), id="spec-example-one-in-window"),
        pytest.param((2, 3, 4, 5), (4, 5), -1, (2, 3, 4, 5), id="spec-example-default-axis"),
        pytest.param((2, 3, 4, 5), (1, 3), 0, (2, 3, 4, 5), id="spec-example-leading-one"),
        pytest.param((2, 3, 4, 5), (), -1, (2, 3, 4, 5), id="spec-example-scalar"),
        pytest.param((2, 3, 4), (3, 4, 1), 1, (2, 3, 4), id="trailing-one-trimmed"),
        pytest.param((0,), (1,), -1, (0,), id="b-one-onto-a-zero"),
        pytest.param((1,), (0,), -1, None, id="b-zero-onto-a-one-fails"),
        pytest.param((3,), (1, 1), -1, None, id="rank-b-above-rank-a"),
        pytest.param((2, 3, 4), (3,), 0, None, id="no-subsequence-search"),
    ],
)
def test_pdpd_oracle_agrees_with_the_spec_examples(
    a: Shape, b: Shape, axis: int, expected: Shape | None
) -> None:
    # Pins the oracle itself to the spec's examples and DESIGN §3, then bcast to the oracle.
    assert pdpd_oracle(a, b, axis) == expected
    assert _ours(a, b, mode="pdpd", axis=axis) == expected


# -- explicit: Broadcast-1/3 with axes_mapping -------------------------------------------


def explicit_oracle(data: Shape, target: Shape, axes_mapping: list[int]) -> Shape | None:
    """Broadcast explicit mode: data axis k goes to output axis ``axes_mapping[k]``.

    The mapping has one entry per data axis, is sorted (DESIGN §3: strictly increasing) and
    within the target's rank; each data dim equals the mapped target dim or is 1. The result
    is the target shape.
    """
    if len(axes_mapping) != len(data):
        return None
    previous = -1
    for axis in axes_mapping:
        if axis <= previous or axis >= len(target):
            return None
        previous = axis
    for dim, axis in zip(data, axes_mapping, strict=True):
        if dim != 1 and dim != target[axis]:
            return None
    return target


@st.composite
def explicit_cases(draw: st.DrawFn) -> tuple[Shape, Shape, list[int]]:
    target = draw(free_shapes)
    if draw(st.booleans()):
        # A valid mapping, data taken from the mapped target dims (sometimes 1 or changed).
        axes = sorted(draw(st.sets(st.integers(0, max(len(target) - 1, 0)), max_size=4)))
        axes = [a for a in axes if a < len(target)]
        data = tuple(
            draw(st.sampled_from([target[a], target[a], 1, draw(small_dims)])) for a in axes
        )
        return data, target, axes
    data = draw(free_shapes)
    axes = draw(st.lists(st.integers(-1, 5), min_size=len(data), max_size=len(data)))
    if draw(st.integers(0, 4)) == 0:
        axes = draw(st.lists(st.integers(-1, 5), max_size=5))
    return data, target, axes


@given(explicit_cases())
def test_explicit_matches_the_spec_rules(case: tuple[Shape, Shape, list[int]]) -> None:
    data, target, axes = case
    expected = explicit_oracle(data, target, axes)
    note(f"oracle: {expected}")
    assert _ours(data, target, mode="explicit", axes_mapping=axes) == expected
    assert _ours(data, target, mode="explicit", axes_mapping=tuple(axes)) == expected


# -- none: identical shapes only ---------------------------------------------------------


@st.composite
def none_cases(draw: st.DrawFn) -> list[Shape]:
    count = draw(st.integers(1, 4))
    if draw(st.booleans()):
        shape = draw(free_shapes)
        return [shape] * count
    return [draw(free_shapes) for _ in range(count)]


@given(none_cases())
def test_none_mode_accepts_exactly_identical_shapes(shapes: list[Shape]) -> None:
    identical = all(s == shapes[0] for s in shapes)
    assert _ours(*shapes, mode="none") == (shapes[0] if identical else None)


def test_none_mode_rejects_zero_operands() -> None:
    with pytest.raises(bcast.BroadcastError):
        bcast.broadcast_shapes(mode="none")


@pytest.mark.parametrize("mode", ["pdpd", "unidirectional", "bidirectional", "explicit"])
@pytest.mark.parametrize("count", [0, 1, 3])
def test_two_operand_modes_reject_other_counts(mode: str, count: int) -> None:
    with pytest.raises(bcast.BroadcastError):
        bcast.broadcast_shapes(*[(2,)] * count, mode=mode, axes_mapping=None)


@given(operand_lists(), st.sampled_from([tuple, list]))
def test_shapes_of_plain_ints_build_the_plan_that_shape_objects_build(
    shapes: list[Shape], kind: type
) -> None:
    # Tuples and lists of plain ints become shared Shapes (bcast.core.shape._small_static, cached
    # per tuple); Shape objects are taken as they are. Both must give the same Plan
    # (operands, output, alignment), or both the same error.
    fast = general = None
    try:
        fast = bcast.core.rules.apply_rule(tuple(kind(s) for s in shapes), "numpy", -1, None)
    except bcast.BroadcastError as err:
        fast_error = err
    try:
        general = bcast.core.rules.apply_rule(
            tuple(bcast.Shape(s) for s in shapes), "numpy", -1, None
        )
    except bcast.BroadcastError as err:
        general_error = err
    if general is None:
        assert fast is None
        assert (fast_error.axis, str(fast_error)) == (general_error.axis, str(general_error))
    else:
        assert fast == general
