"""How ``bcast explain`` draws a `Plan` (or a `BroadcastError`): table, notes and JSON.

Everything here reads what the rule decided: the Plan's alignment, `Plan.stretched_axes` and
the output, or the error's fields. Placing each operand's dims in the column of the output
axis it pairs with is the only computation, and it follows the alignment as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, cast

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

import bcast
from bcast.core.dim import Dim
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.plans import Plan, labels_for
from bcast.core.shape import Shape

from ._output import broadcast_error_json, print_unclipped

__all__ = ["Request", "explain_error_json", "explain_json", "render_error", "render_plan"]

_ABSENT = "·"
"""Table cell for an output axis where an operand has no axis (it counts as 1)."""

# The operand whose axes a parameter places (B by --axis, data by --axes-mapping): its notes
# say which of its axes lands on each output axis.
_PLACED: dict[Mode, int] = {Mode.PDPD: 1, Mode.EXPLICIT: 0}


@dataclass(frozen=True)
class Request:
    """The parsed command line of ``shape`` / ``explain``."""

    shapes: tuple[Shape, ...]
    mode: Mode
    axis: int
    axes_mapping: tuple[int, ...] | None

    def apply(self) -> Plan | BroadcastError:
        """Run the rule once: the Plan, or the BroadcastError it raised (returned, not raised)."""
        try:
            return bcast.plan(
                *self.shapes, mode=self.mode, axis=self.axis, axes_mapping=self.axes_mapping
            )
        except BroadcastError as err:
            return err

    def title(self) -> str:
        """Return the request as a command line's arguments (a title for exported pictures).

        >>> Request((Shape.parse("[2,1]"), Shape.parse("[3]")), Mode.NUMPY, -1, None).title()
        '[2,1] [3] --mode numpy'
        """
        words = [*(str(s) for s in self.shapes), "--mode", self.mode.value]
        if self.mode is Mode.PDPD:
            words += ["--axis", str(self.axis)]
        if self.axes_mapping is not None:
            words += ["--axes-mapping", ",".join(str(a) for a in self.axes_mapping)]
        return " ".join(words)

    def payload(self) -> dict[str, Any]:
        """Return the keys every JSON answer of these commands starts with."""
        return {
            "mode": self.mode.value,
            "shapes": [str(s) for s in self.shapes],
            "axis": self.axis,
            "axes_mapping": None if self.axes_mapping is None else list(self.axes_mapping),
        }


# -- bcast explain: the layout both renderers read -----------------------------------------


@dataclass(frozen=True)
class _Layout:
    """Operands placed in output columns as an alignment says; nothing decided here."""

    labels: tuple[str, ...]
    shapes: tuple[Shape, ...]
    rank: int
    cells: tuple[tuple[Dim | None, ...] | None, ...]
    """Per operand, per column: its dim there, None where it has no axis; None: unknown rank."""
    sources: tuple[tuple[int | None, ...] | None, ...]
    """Per operand, per column: which of its axes lands there."""
    dropped: tuple[tuple[int, int, Dim], ...]
    """(operand, operand axis, dim) for every axis the mode drops (PDPD's trailing ones)."""


def _shapes(err: BroadcastError) -> Sequence[Shape]:
    """Return the error's operands (the rules put `Shape` values there; typed as drawable)."""
    return cast("Sequence[Shape]", err.shapes)


def _layout(
    shapes: Sequence[Shape],
    alignment: Sequence[tuple[int | None, ...] | None],
    rank: int,
    labels: Sequence[str] | None,
) -> _Layout:
    cells: list[tuple[Dim | None, ...] | None] = []
    sources: list[tuple[int | None, ...] | None] = []
    dropped: list[tuple[int, int, Dim]] = []
    for index, (shape, axes) in enumerate(zip(shapes, alignment, strict=True)):
        if axes is None or shape.rank is None:
            cells.append(None)
            sources.append(None)
            continue
        row: list[Dim | None] = [None] * rank
        source: list[int | None] = [None] * rank
        for k, (dim, out_axis) in enumerate(zip(shape, axes, strict=True)):
            if out_axis is None or out_axis >= rank:
                dropped.append((index, k, dim))
            else:
                row[out_axis], source[out_axis] = dim, k
        cells.append(tuple(row))
        sources.append(tuple(source))
    names = tuple(labels) if labels is not None else tuple(f"#{i}" for i in range(len(shapes)))
    return _Layout(names, tuple(shapes), rank, tuple(cells), tuple(sources), tuple(dropped))


def _plan_layout(plan: Plan) -> _Layout:
    rank = plan.output.rank
    if rank is None:  # unknown result rank: draw the known operands right-aligned, as picture()
        rank = max((s.rank for s in plan.shapes if s.rank is not None), default=0)
    return _layout(plan.shapes, plan.alignment, rank, plan.labels)


def _stretched(plan: Plan) -> set[tuple[int, int]]:
    """(operand, output axis) pairs along which the operand is (or may be) replicated."""
    if plan.output.rank is None:
        return set()
    return {
        (i, j)
        for i, axes in enumerate(plan.alignment)
        if axes is not None
        for j in plan.stretched_axes(i)
    }


def _join(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _axis_note(plan: Plan, layout: _Layout, stretched: set[tuple[int, int]], j: int) -> str:
    """One plain-language sentence: what each operand does on output axis ``j``."""
    result = plan.output.dims[j]
    same: list[str] = []
    absent: list[str] = []
    parts: list[str] = []
    others: list[str] = []
    for i, label in enumerate(layout.labels):
        row = layout.cells[i]
        if row is None:
            continue  # unknown rank: noted once, not per axis
        dim = row[j]
        if dim is None:
            absent.append(label)
        elif (i, j) in stretched:
            if dim.definitely_one():
                parts.append(f"{label} is 1, stretched to {result}")
            else:
                parts.append(f"{label} is {dim}, stretched to {result} where it is 1")
        elif str(dim) == str(result):
            same.append(label)
        else:
            others.append(f"{label} is {dim}")
    if others:
        parts.insert(0, f"{'; '.join(others)}; together {result}")
    if same:
        verb = "is" if len(same) == 1 else "are"
        parts.insert(0, f"{_join(same)} {verb} {result}")
    if absent:
        verb = "has" if len(absent) == 1 else "have"
        tail = "" if result.definitely_one() else f", stretched to {result}"
        parts.append(f"{_join(absent)} {verb} no axis here (counts as 1){tail}")
    lead = f"axis {j}"
    placed = _PLACED.get(plan.mode)
    if placed is not None:
        source = layout.sources[placed]
        if source is not None and source[j] is not None:
            lead += f" ← {layout.labels[placed]} axis {source[j]}"
    return f"{lead}: {'; '.join(parts)}"


def _general_notes(plan: Plan, layout: _Layout) -> list[str]:
    notes = [
        f"{label} has unknown rank [...]: it adds no information"
        for label, row in zip(layout.labels, layout.cells, strict=True)
        if row is None
    ]
    if plan.output.rank is None:
        notes.append("the result has unknown rank [...]: no axis can be explained")
    return notes


def _dropped_notes(layout: _Layout) -> list[str]:
    return [
        f"{layout.labels[i]} axis {k} ({dim}) lies past the last axis of {layout.labels[0]}: "
        "a trailing one, ignored"
        for i, k, dim in layout.dropped
    ]


def _unreachable(value: NoReturn) -> NoReturn:
    """``typing.assert_never`` (Python 3.11+): mypy flags a `Mode` no ``match`` handles."""
    raise AssertionError(f"unhandled value {value!r}")


def _rule_sentence(request: Request, start: int | None) -> str:
    """How the mode aligns and merges, in one sentence, with this call's parameters."""
    mode = request.mode
    match mode:
        case Mode.NUMPY:
            return (
                "numpy (multidirectional): the shapes are right-aligned, a missing axis counts "
                "as 1, and on each axis the dims must be equal or 1."
            )
        case Mode.NONE:
            return "none: the shapes must be identical; nothing is stretched."
        case Mode.PDPD:
            if request.axis != -1:
                where = f"at axis {request.axis}"
            elif start is None:
                where = "at axis rank(A) - rank(B) (axis -1)"
            else:
                where = f"at axis {start} (axis -1: rank(A) - rank(B))"
            return (
                f"pdpd: B is placed in A starting {where}; trailing ones of B past A's last "
                "axis are ignored; each dim of B must equal A's or be 1; the result is A."
            )
        case Mode.UNIDIRECTIONAL:
            return (
                "unidirectional: B is right-aligned under A and each of its dims must equal A's "
                "or be 1; the result is A."
            )
        case Mode.BIDIRECTIONAL:
            return (
                "bidirectional (ONNX Expand): data and target are right-aligned and broadcast "
                "both ways; the result can be larger than the target."
            )
        case Mode.EXPLICIT:
            mapping = ",".join(str(a) for a in request.axes_mapping or ())
            return (
                f"explicit: data axis i goes to target axis axes_mapping[i] ([{mapping}]); "
                "each data dim must equal the target's or be 1; the result is the target."
            )
        case _:
            _unreachable(mode)


def _axes_json(
    layout: _Layout, plan: Plan | None, stretched: set[tuple[int, int]]
) -> list[dict[str, Any]]:
    known = plan is not None and plan.output.rank is not None
    return [
        {
            "axis": j,
            "dims": [
                None if row is None or row[j] is None else str(row[j]) for row in layout.cells
            ],
            "result": str(plan.output.dims[j]) if plan is not None and known else None,
            "stretched": sorted(i for i, jj in stretched if jj == j),
            "note": _axis_note(plan, layout, stretched, j) if plan is not None and known else None,
        }
        for j in range(layout.rank)
    ]


def _table(
    layout: _Layout,
    *,
    result: Shape | None,
    stretched: set[tuple[int, int]],
    failing: int | None,
) -> Table:
    """One column per output axis, one row per operand; the result is the footer."""
    footer = result is not None
    table = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, show_footer=footer)
    result_dims = [str(d) for d in result] if result is not None and result.ranked else []
    table.add_column("axis", footer="result", style="bold", no_wrap=True)
    for j in range(layout.rank):
        header = Text(f"{j} ✗", style="bold red") if j == failing else Text(str(j))
        foot = result_dims[j] if j < len(result_dims) else ""
        table.add_column(header, footer=Text(foot, style="bold"), justify="right", no_wrap=True)
    if layout.dropped:
        table.add_column("ignored", justify="right", no_wrap=True, style="dim")
    table.add_column(
        "shape", footer=Text(str(result), style="bold green"), no_wrap=True, style="cyan"
    )
    for i, (label, shape_) in enumerate(zip(layout.labels, layout.shapes, strict=True)):
        row = layout.cells[i]
        cells: list[Text] = []
        for j in range(layout.rank):
            dim = None if row is None else row[j]
            if j == failing:
                style = "bold red"
            elif (i, j) in stretched:
                style = "yellow"
            else:
                style = "dim" if dim is None else ""
            if row is None:
                cells.append(Text(""))
            else:
                cells.append(Text(_ABSENT if dim is None else str(dim), style=style))
        if layout.dropped:
            cells.append(Text(" ".join(str(d) for o, _, d in layout.dropped if o == i)))
        table.add_row(Text(label), *cells, Text(str(shape_)))
    return table


def _legend(layout: _Layout, *, counts_as_one: bool = True) -> list[Text]:
    absent = any(row is not None and None in row for row in layout.cells)
    if not absent:
        return []
    # In a failed none or PDPD picture an empty cell is a rank mismatch, not a stretch.
    why = " (counts as 1)" if counts_as_one else ""
    return [Text(f"{_ABSENT} no axis there{why}", style="dim")]


def _heading(request: Request, result: str) -> Text:
    text = Text()
    text.append(request.mode.value, style="bold")
    labels = labels_for(request.mode, len(request.shapes))
    for label, shape_ in zip(labels, request.shapes, strict=True):
        text.append(f"  {label} ")
        text.append(str(shape_), style="cyan")
    if request.mode is Mode.PDPD:
        text.append(f"  axis={request.axis}")
    if request.axes_mapping is not None:
        text.append(f"  axes_mapping={','.join(str(a) for a in request.axes_mapping)}")
    text.append("  →  ")
    text.append(result, style="bold green" if result != "✗" else "bold red")
    return text


def render_plan(console: Console, request: Request, plan: Plan) -> None:
    """Print heading, rule, table, one note per output axis and the stretch summary."""
    layout = _plan_layout(plan)
    stretched = _stretched(plan)
    notes = _general_notes(plan, layout)
    if plan.output.rank is not None:
        notes.extend(_axis_note(plan, layout, stretched, j) for j in range(layout.rank))
    notes.extend(_dropped_notes(layout))
    moved = [
        f"{label} along axes {', '.join(str(j) for j in axes)}"
        if len(axes) > 1
        else f"{label} along axis {axes[0]}"
        for i, label in enumerate(layout.labels)
        if (axes := sorted(j for o, j in stretched if o == i))
    ]
    summary = "stretched: " + ("; ".join(moved) if moved else "nothing")
    console.print(_heading(request, str(plan.output)))
    console.print(Text(_rule_sentence(request, plan.axis), style="dim"))
    console.print()
    print_unclipped(console, _table(layout, result=plan.output, stretched=stretched, failing=None))
    console.print(Group(*_legend(layout), Text(""), *(Text(note) for note in notes)))
    console.print(Text(summary, style="bold"))


def render_error(console: Console, request: Request, err: BroadcastError) -> None:
    """Print heading, rule, the table with the failing axis marked, and the reason."""
    console.print(_heading(request, "✗"))
    console.print(Text(_rule_sentence(request, None), style="dim"))
    console.print()
    if err.alignment is not None and err.out_rank is not None:
        layout = _layout(_shapes(err), err.alignment, err.out_rank, err.labels)
        print_unclipped(console, _table(layout, result=None, stretched=set(), failing=err.axis))
        counts_as_one = err.mode not in (Mode.NONE.value, Mode.PDPD.value)
        console.print(Group(*_legend(layout, counts_as_one=counts_as_one), Text("")))
    console.print(Text(err.summary, style="bold red"))


def explain_json(request: Request, plan: Plan) -> dict[str, Any]:
    """Build the ``--json`` object of a successful explain."""
    layout = _plan_layout(plan)
    stretched = _stretched(plan)
    return {
        **request.payload(),
        "labels": list(layout.labels),
        "start_axis": plan.axis,
        "result": str(plan.output),
        "axes": _axes_json(layout, plan, stretched),
        "dropped": [{"operand": i, "axis": k, "dim": str(d)} for i, k, d in layout.dropped],
        "notes": _general_notes(plan, layout) + _dropped_notes(layout),
        "error": None,
    }


def explain_error_json(request: Request, err: BroadcastError) -> dict[str, Any]:
    """Build the ``--json`` object of a failed explain: same keys, ``error`` filled in."""
    labels = err.labels or labels_for(request.mode, len(request.shapes))
    axes: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    if err.alignment is not None and err.out_rank is not None:
        layout = _layout(_shapes(err), err.alignment, err.out_rank, err.labels)
        axes = _axes_json(layout, None, set())
        dropped = [{"operand": i, "axis": k, "dim": str(d)} for i, k, d in layout.dropped]
    return {
        **request.payload(),
        "labels": list(labels),
        "start_axis": None,
        "result": None,
        "axes": axes,
        "dropped": dropped,
        "notes": [],
        "error": broadcast_error_json(err, kind="incompatible"),
    }
