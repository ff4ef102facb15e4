"""Partial shapes: our answer is sound (contains every concrete result) and precise.

A partial shape is concretised by choosing a value for every dim: a static dim keeps its
value, an interval or ``?`` takes each of its values in ``VALUES``, a symbol takes one value
per name (the same everywhere it appears), and an operand of unknown rank ``[...]`` becomes
every shape of rank ``UNKNOWN_RANKS`` over ``VALUES``. The *static* rule of the same mode
decides each concretisation (its correctness is established against NumPy and the spec
oracles in ``test_static_vs_numpy.py``).

SOUNDNESS: for every concretisation the static rule accepts, its result lies in ours (rank
equal; each value within our interval, or equal to the symbol's value where our dim is a
symbol). If we raise `bcast.BroadcastError`, the static rule accepts no concretisation: we
fail only when failure is certain.

PRECISION: when we do not raise, some concretisation is accepted; for each output dim, an
interval's lower bound and (when finite and within ``VALUES``) its upper bound are results
of accepted concretisations, and a symbol output dim is the result of some accepted one.

Bounds: values 0..4, unknown rank as ranks 0..3, at most ``BUDGET`` concretisations per
example (the generator makes dims static once the budget would be exceeded). Interval lower
bounds are at most 4, so every dim has a value in ``VALUES``. Explicit axes_mapping entries
are below 3 where the target's rank is unknown, and PDPD axes at most 3 (less when A has
unknown rank and B does not), so that an unknown-rank operand can be concretised at a rank
that accepts them.

Precision is a per-axis property: when one symbol appears at two different output axes
(``[N,N]`` against ``[2,3]`` in mode ``none``) the axes are no longer independent and a
per-dimension merge cannot see that no concretisation exists. Such examples are checked for
soundness only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

import bcast
from bcast import Dim, Shape

VALUES = range(5)
UNKNOWN_RANKS = range(4)
SYMBOLS = ("N", "M")
BUDGET = 2000
MAX_VALUE = max(VALUES)
_FREE_COUNT = sum(len(VALUES) ** r for r in UNKNOWN_RANKS)

MODES = ("numpy", "none", "pdpd", "unidirectional", "bidirectional", "explicit")


@dataclass
class Case:
    mode: str
    shapes: list[Shape]
    axis: int = -1
    axes_mapping: tuple[int, ...] | None = None
    kwargs: dict[str, object] = field(default_factory=dict)

    def __str__(self) -> str:
        extra = f" axis={self.axis}" if self.mode == "pdpd" else ""
        if self.axes_mapping is not None:
            extra += f" axes_mapping={list(self.axes_mapping)}"
        return f"{self.mode}: {' '.join(str(s) for s in self.shapes)}{extra}"


# -- generation --------------------------------------------------------------------------


class _Budget:
    """Keeps the number of concretisations of one example at most BUDGET."""

    def __init__(self) -> None:
        self.count = 1
        self.symbols: set[str] = set()

    def allows(self, factor: int) -> bool:
        return self.count * factor <= BUDGET

    def spend(self, factor: int) -> None:
        self.count *= factor


def _choices(dim: Dim) -> int:
    return sum(1 for v in VALUES if dim.contains(v))


@st.composite
def partial_dim(draw: st.DrawFn, budget: _Budget) -> Dim:
    kind = draw(st.sampled_from(["static"] * 4 + ["interval", "interval", "unknown", "symbol"]))
    if kind == "symbol":
        name = draw(st.sampled_from(SYMBOLS))
        if name in budget.symbols or budget.allows(len(VALUES)):
            if name not in budget.symbols:
                budget.symbols.add(name)
                budget.spend(len(VALUES))
            return Dim.symbol(name)
    elif kind != "static":
        if kind == "unknown":
            dim = Dim.unknown()
        else:
            lo = draw(st.integers(0, MAX_VALUE))
            hi = draw(st.one_of(st.none(), st.integers(lo + 1, MAX_VALUE + 2)))
            dim = Dim(lo, hi)
        if budget.allows(_choices(dim)):
            budget.spend(_choices(dim))
            return dim
    return Dim(draw(st.integers(0, MAX_VALUE)))


@st.composite
def partial_shape(draw: st.DrawFn, budget: _Budget, max_rank: int = 3) -> Shape:
    if draw(st.integers(0, 9)) == 0 and budget.allows(_FREE_COUNT):
        budget.spend(_FREE_COUNT)
        return Shape.dynamic()
    rank = draw(st.integers(0, max_rank))
    return Shape([draw(partial_dim(budget)) for _ in range(rank)])


@st.composite
def cases(draw: st.DrawFn, mode: str) -> Case:
    budget = _Budget()
    if mode == "numpy":
        count = draw(st.integers(0, 3))
    elif mode == "none":
        count = draw(st.integers(1, 3))
    else:
        count = 2
    shapes = [draw(partial_shape(budget)) for _ in range(count)]
    if mode == "none" and count > 1 and draw(st.booleans()):
        # Identical operands, so that mode none accepts something (when within the budget).
        copies = [shapes[0]] * count
        if count_concretisations(copies) <= BUDGET:
            shapes = copies
    case = Case(mode, shapes)
    if mode == "pdpd":
        case.axis = draw(st.integers(-2, max(UNKNOWN_RANKS)))
        a, b = shapes
        if a.rank is None and b.rank is not None:
            # Keep a concretisation of A within the enumerated ranks able to hold B.
            case.axis = min(case.axis, max(UNKNOWN_RANKS) - b.rank)
        case.kwargs = {"axis": case.axis}
    elif mode == "explicit":
        data = shapes[0]
        rank = data.rank if data.rank is not None else draw(st.integers(0, 3))
        if draw(st.integers(0, 4)) > 0:
            pool = (
                draw(st.sets(st.integers(0, 2), min_size=rank, max_size=rank))
                if rank <= 3
                else set()
            )
            mapping = tuple(sorted(pool))
        else:
            # Out of range too (an error), but within the ranks an unknown target can take.
            top = 3 if shapes[1].rank is not None else max(UNKNOWN_RANKS) - 1
            mapping = tuple(draw(st.lists(st.integers(-1, top), max_size=3)))
        case.axes_mapping = mapping
        case.kwargs = {"axes_mapping": mapping}
    return case


# -- enumeration and the properties ------------------------------------------------------


def concretisations(
    shapes: Sequence[Shape],
) -> Iterator[tuple[dict[str, int], list[tuple[int, ...]]]]:
    """Every concrete instance of the operands, with the value of each symbol."""
    names = sorted({d.name for s in shapes if s.rank is not None for d in s if d.name})
    free = [t for r in UNKNOWN_RANKS for t in itertools.product(VALUES, repeat=r)]
    for values in itertools.product(VALUES, repeat=len(names)):
        env = dict(zip(names, values, strict=True))
        options: list[list[tuple[int, ...]]] = []
        for shape in shapes:
            if shape.rank is None:
                options.append(free)
                continue
            per_dim = [
                [env[d.name]] if d.name else [v for v in VALUES if d.contains(v)] for d in shape
            ]
            options.append(list(itertools.product(*per_dim)))
        for combo in itertools.product(*options):
            yield env, list(combo)


def count_concretisations(shapes: Sequence[Shape]) -> int:
    names = {d.name for s in shapes if s.rank is not None for d in s if d.name}
    total = len(VALUES) ** len(names)
    for shape in shapes:
        if shape.rank is None:
            total *= _FREE_COUNT
        else:
            total *= math.prod(_choices(d) for d in shape if not d.name)
    return total


def _static_result(case: Case, shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    try:
        result = bcast.broadcast_shapes(*shapes, mode=case.mode, **case.kwargs)  # type: ignore[arg-type]
    except bcast.BroadcastError:
        return None
    return result.to_tuple()


def _output_axes(case: Case) -> dict[str, set[object]]:
    """For each symbol, the output axes (as the mode aligns operands) where it appears."""
    where: dict[str, set[object]] = {}
    ranked = [s for s in case.shapes if s.rank is not None]
    out_rank = max((len(s) for s in ranked), default=0)
    for index, shape in enumerate(case.shapes):
        if shape.rank is None:
            continue
        for j, dim in enumerate(shape):
            if not dim.name:
                continue
            key: object
            if case.mode == "explicit" and index == 0:
                mapping = case.axes_mapping or ()
                key = mapping[j] if j < len(mapping) else ("data", j)
            elif case.mode == "pdpd" and index == 1:
                a_rank = case.shapes[0].rank or 0
                start = a_rank - len(shape) if case.axis == -1 else case.axis
                key = start + j if start + j < a_rank else ("dropped", j)
            elif case.mode in ("explicit", "pdpd", "none") or (
                case.mode == "unidirectional" and index == 0
            ):
                key = j
            else:
                rank = out_rank if case.mode != "unidirectional" else (case.shapes[0].rank or 0)
                key = rank - len(shape) + j
            where.setdefault(dim.name, set()).add(key)
    return where


def _note(text: str) -> None:
    if currently_in_test_context():
        note(text)


def check(case: Case) -> None:
    _note(str(case))
    assert count_concretisations(case.shapes) <= BUDGET
    try:
        ours: Shape | None = bcast.broadcast_shapes(*case.shapes, mode=case.mode, **case.kwargs)  # type: ignore[arg-type]
    except bcast.BroadcastError as err:
        ours = None
        _note(f"ours: error {err.summary}")
    else:
        _note(f"ours: {ours}")
    attained: list[set[int]] = []
    accepted = 0
    for env, shapes in concretisations(case.shapes):
        result = _static_result(case, shapes)
        if result is None:
            continue
        accepted += 1
        where = f"{shapes} (symbols {env}) gives {list(result)}"
        assert ours is not None, f"we raise, but {where}"
        if ours.rank is None:
            continue
        assert len(result) == ours.rank, f"unsound rank: {where}, ours {ours}"
        if not attained:
            attained = [set() for _ in result]
        for i, (value, dim) in enumerate(zip(result, ours, strict=True)):
            if dim.name:
                assert value == env[dim.name], f"unsound axis {i}: {where}, ours {ours}"
            else:
                assert dim.contains(value), f"unsound axis {i}: {where}, ours {ours}"
            attained[i].add(value)
    if ours is None:
        return
    if any(len(axes) > 1 for axes in _output_axes(case).values()):
        return  # correlated axes: soundness only (see the module docstring)
    assert accepted > 0, f"imprecise: no concretisation of {case} is accepted, but ours is {ours}"
    if ours.rank is None:
        return
    for i, dim in enumerate(ours):
        if dim.name:
            assert attained[i], f"imprecise axis {i}: symbol {dim} never attained"
            continue
        assert dim.lo in attained[i], f"imprecise axis {i}: {dim} but results {attained[i]}"
        if dim.hi is not None and dim.hi <= MAX_VALUE:
            assert dim.hi in attained[i], f"imprecise axis {i}: {dim} but results {attained[i]}"


@pytest.mark.parametrize("mode", MODES)
@given(data=st.data())
def test_partial_result_is_sound_and_precise(mode: str, data: st.DataObject) -> None:
    check(data.draw(cases(mode)))


def _case(mode: str, *texts: str, **kwargs: object) -> Case:
    case = Case(mode, [Shape.parse(t) for t in texts], kwargs=dict(kwargs))
    if mode == "pdpd":
        case.axis = int(kwargs.get("axis", -1))  # type: ignore[call-overload]
    if mode == "explicit":
        case.axes_mapping = tuple(kwargs["axes_mapping"])  # type: ignore[call-overload]
    return case


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(_case("numpy", "[N,1]", "[1,M]"), id="numpy-symbols"),
        pytest.param(_case("numpy", "[N]", "[?]"), id="numpy-symbol-vs-unknown"),
        pytest.param(_case("numpy", "[2..4]", "[0..1]", "[3..]"), id="numpy-intervals-3"),
        pytest.param(_case("numpy", "[0..3]", "[1..5]"), id="numpy-hull"),
        pytest.param(_case("numpy", "[2..3]", "[0]"), id="numpy-certain-error"),
        pytest.param(_case("none", "[N,?]", "[M,3]"), id="none-symbols"),
        pytest.param(_case("pdpd", "[1,?]", "[0..2]", axis=0), id="pdpd-one-way"),
        pytest.param(_case("pdpd", "[2,3]", "[...]", axis=2), id="pdpd-unknown-b"),
        pytest.param(_case("unidirectional", "[0..2]", "[N]"), id="uni-symbol-b"),
        pytest.param(_case("unidirectional", "[0..3]", "[2..5]"), id="uni-narrows-a"),
        pytest.param(_case("bidirectional", "[N,1]", "[3,N]"), id="bidir-symbols"),
        pytest.param(
            _case("explicit", "[?]", "[2,3,4]", axes_mapping=[1]), id="explicit-unknown-data"
        ),
        pytest.param(
            _case("explicit", "[...]", "[2,0..3]", axes_mapping=[0, 1]), id="explicit-any-rank"
        ),
    ],
)
def test_examples_are_sound_and_precise(case: Case) -> None:
    check(case)


def test_enumeration_respects_the_budget() -> None:
    # The documented bound: a maximal example stays within BUDGET concretisations.
    shapes = [Shape.parse("[?,N,0..2]"), Shape.parse("[M,1..3]")]
    count = sum(1 for _ in concretisations(shapes))
    assert count == len(VALUES) ** 3 * 3 * 3 == count_concretisations(shapes)
    assert count <= BUDGET
    assert count_concretisations([Shape.dynamic()]) == 1 + 5 + 25 + 125
