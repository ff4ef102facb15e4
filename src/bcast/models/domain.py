"""The validity domain of a model: for which sizes of its input dims it runs (issue 17).

These are the values only: sets of sizes (`Sizes`, unions of closed intervals of integers
from 1), what a node imposes (`Imposed`), the domain of one input dim (`DimDomain`), a
relation between dims (`Relation`) and the whole `Domain`, with its JSON form and its hand-back
to the tools users export with (torch.export ``Dim`` lines, OpenVINO ``model.reshape`` partial
shapes). `bcast.models.domain_solve` collects the requirements and solves them. Sizes start
at 1: a dim of 0 (an empty tensor) is out of the domain's scope.

Examples
--------
>>> values_text(((1, 64),)), values_text(ANY), values_text(((1, 1), (32, 32)))
('1..64', 'any', '{1, 32}')
>>> values_text(intersect(((1, 64),), ((32, None),)))
'32..64'
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from bcast.core.shape import Shape
from bcast.core.text import safe_text
from bcast.models.condition_sets import derived_dim, strided_text
from bcast.models.domain_records import (
    ArithmeticRecord,
    BoundRecord,
    CountRecord,
    IndexRecord,
    PlanRecord,
    ProductRecord,
    Record,
    WindowRecord,
)

__all__ = [
    "ANY",
    "ArithmeticRecord",
    "BoundRecord",
    "CountRecord",
    "DimDomain",
    "Domain",
    "Imposed",
    "IndexRecord",
    "NONE",
    "PlanRecord",
    "ProductRecord",
    "Record",
    "Relation",
    "Requirement",
    "Sizes",
    "WindowRecord",
    "contains",
    "intersect",
    "python_name",
    "union",
    "values_text",
]

Sizes = tuple[tuple[int, int | None], ...]
"""Sorted, disjoint, non-adjacent closed intervals ``(lo, hi)``; ``hi`` None: unbounded."""
ANY: Final[Sizes] = ((1, None),)
NONE: Final[Sizes] = ()
_LISTED: Final = 6  # single values written as a set up to this many
_BOXES: Final = 8  # boxes of a two-dim relation written out


def _normal(parts: list[tuple[int, int | None]]) -> Sizes:
    parts = sorted(
        ((max(lo, 1), hi) for lo, hi in parts if hi is None or hi >= max(lo, 1)),
        key=lambda p: (p[0], p[1] is None, p[1] or 0),
    )
    out: list[tuple[int, int | None]] = []
    for lo, hi in parts:
        if out and (out[-1][1] is None or out[-1][1] + 1 >= lo):
            last_lo, last_hi = out[-1]
            top = None if last_hi is None or hi is None else max(last_hi, hi)
            out[-1] = (last_lo, top)
        else:
            out.append((lo, hi))
    return tuple(out)


def intersect(a: Sizes, b: Sizes) -> Sizes:
    """Return the sizes in both ``a`` and ``b``.

    >>> intersect(((1, 1), (4, 10)), ((3, 5),))
    ((4, 5),)
    """
    parts: list[tuple[int, int | None]] = []
    for alo, ahi in a:
        for blo, bhi in b:
            lo = max(alo, blo)
            hi = bhi if ahi is None else ahi if bhi is None else min(ahi, bhi)
            if hi is None or hi >= lo:
                parts.append((lo, hi))
    return _normal(parts)


def union(a: Sizes, b: Sizes) -> Sizes:
    """Return the sizes in ``a`` or ``b``.

    >>> union(((1, 1),), ((2, 5),))
    ((1, 5),)
    """
    return _normal([*a, *b])


def contains(sizes: Sizes, value: int) -> bool:
    """Tell whether ``value`` is one of ``sizes``.

    >>> contains(((1, 64),), 65), contains(ANY, 10**9)
    (False, True)
    """
    return any(lo <= value and (hi is None or value <= hi) for lo, hi in sizes)


def values_text(sizes: Sizes, congruence: tuple[int, int] | None = None) -> str:
    """Write ``sizes`` for people: ``any``, ``32``, ``1..64``, ``{1, 32}``, ``none``.

    With a ``congruence`` ``(m, r)`` only the sizes ``n % m == r`` of the intervals are
    meant: the first of them are written, then the rule.

    >>> values_text(((2, None),)), values_text(((1, 1), (8, 16)))
    ('2..', '1, 8..16')
    >>> values_text(((2, None),), (2, 0)), values_text(((8, 64),), (8, 0))
    ('2, 4, 6, ... (multiples of 2)', '8, 16, 24, ..., 64 (multiples of 8)')
    """
    if not sizes:
        return "none"
    if congruence is not None:
        return strided_text(sizes, congruence)
    if sizes == ANY:
        return "any"
    if all(lo == hi for lo, hi in sizes) and len(sizes) <= _LISTED:
        inner = ", ".join(str(lo) for lo, _ in sizes)
        return inner if len(sizes) == 1 else "{" + inner + "}"
    parts = [_interval_text(lo, hi) for lo, hi in sizes]
    if len(parts) > _LISTED:  # a periodic set (``n*4`` a multiple of 32): the start and the end
        parts = [*parts[:4], f"... ({len(parts)} intervals)", parts[-1]]
    return ", ".join(parts)


def _interval_text(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"{lo}.."
    return str(lo) if lo == hi else f"{lo}..{hi}"


@dataclass(frozen=True, slots=True)
class Imposed:
    """A node that imposes part of the domain, and what it requires (the checker's words)."""

    node: str
    op: str
    axis: int | None
    reason: str

    def __str__(self) -> str:
        where = "" if self.axis is None else f", axis {self.axis}"
        return f"{self.node} ({self.op}{where})"

    def to_json(self) -> dict[str, object]:
        """Return plain JSON data."""
        return {"node": self.node, "op": self.op, "axis": self.axis, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class DimDomain:
    """The sizes one input dim may take, and the nodes that cut them."""

    name: str
    sizes: Sizes
    imposed: tuple[Imposed, ...] = ()
    congruence: tuple[int, int] | None = None
    """``(m, r)``: only the sizes ``n % m == r`` of `sizes` (``height`` a multiple of 2)."""
    condition: str = ""
    """The sizes as a condition, as isl decided them (``height is a multiple of 2``)."""
    exact: bool = True
    """False where `sizes` (and `congruence`) are only the hull: `condition` says them."""

    @property
    def text(self) -> str:
        """The sizes written for people (`values_text`; the `condition` where not `exact`)."""
        return values_text(self.sizes, self.congruence) if self.exact else self.condition

    def to_json(self) -> dict[str, object]:
        """Return plain JSON data: intervals as ``[lo, hi]`` (``hi`` null: unbounded)."""
        out: dict[str, object] = {
            "name": self.name,
            "values": self.text,
            "intervals": [[lo, hi] for lo, hi in self.sizes],
            "imposed_by": [i.to_json() for i in self.imposed],
        }
        if self.congruence is not None:
            out["congruence"] = {"modulus": self.congruence[0], "residue": self.congruence[1]}
        if self.condition:
            out["condition"] = self.condition
        if not self.exact:
            out["exact"] = False
        return out


@dataclass(frozen=True, slots=True)
class Relation:
    """A requirement between dims that their own sizes do not say.

    ``kind``: ``equal`` (``a = b``), ``equal-or-1`` (two-way: equal unless one is 1),
    ``one-or-equal`` (one-way: ``dims[0]`` is 1 or equals ``dims[1]``) or ``holds`` (any
    other requirement, said in the expressions' text). ``decided`` is False for a
    requirement that is not a Presburger set (a product of dims against another product),
    or one whose set would make the domain's too large (its ``condition`` is then said):
    the dims' own sizes do not take it into account; each point is still decided exactly.
    """

    kind: str
    dims: tuple[str, ...]
    text: str
    imposed: tuple[Imposed, ...] = ()
    boxes: tuple[tuple[tuple[int, int], Sizes], ...] = ()
    decided: bool = True
    condition: str = ""
    """The relation's sizes as isl's constraints, in the dims' names."""

    @property
    def region(self) -> str:
        """Say which sizes of two dims hold the relation, as boxes (``32..39 x 32..39``).

        Only where the sizes that hold it are bounded boxes (`boxes`), decided by isl.
        """
        if not self.boxes:
            return ""
        shown = [
            f"{_interval_text(lo, hi)} x "
            + (values_text(second) if len(second) == 1 else "{" + values_text(second) + "}")
            for (lo, hi), second in self.boxes[:_BOXES]
        ]
        more = f" and {len(self.boxes) - _BOXES} more" if len(self.boxes) > _BOXES else ""
        return f"{' x '.join(self.dims)}: " + ", ".join(shown) + more

    def to_json(self) -> dict[str, object]:
        """Return plain JSON data."""
        out: dict[str, object] = {
            "kind": self.kind,
            "dims": list(self.dims),
            "text": self.text,
            "imposed_by": [i.to_json() for i in self.imposed],
        }
        out["decided_as_set"] = self.decided
        if self.condition:
            out["condition"] = self.condition
        if self.boxes:
            out["boxes"] = [
                [[lo, hi], [[a, b] for a, b in second]] for (lo, hi), second in self.boxes
            ]
        return out


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement, decidable at a point: ``test`` gives True, False or None (undecided)."""

    imposed: Imposed
    symbols: frozenset[str]
    test: Callable[[Mapping[str, int]], bool | None] = field(compare=False)
    region: Any = field(default=None, compare=False)
    """The sizes that hold it, an isl set of `Domain.space` (None: not a Presburger set)."""
    formula: Any = field(default=None, compare=False)
    """It as `bcast.models.smt.Formula`, for z3 where it is not a Presburger set."""


@dataclass(frozen=True, slots=True)
class Domain:
    """For which sizes of its input dims a model runs, with the node imposing each part.

    Attributes
    ----------
    dims : tuple of DimDomain
        Every input dim, in the order the inputs name them (``any`` where nothing cuts it).
    relations : tuple of Relation
        Requirements between dims (``height = width``, ``kv = seq or 1``).
    empty : str
        Why no input sizes make the model run; ``""`` when some do.
    inputs : tuple of (str, Shape)
        The model's inputs with symbolic dims, for the OpenVINO partial shapes.
    requirements : tuple of Requirement
        Every requirement collected, in graph order: `first_failure` decides a point by them.
    not_collected : tuple of str
        What the collection leaves out (said in ``bcast domain``'s output).
    empty_at : tuple of Imposed
        Where the domain is empty: the nodes whose requirements leave no size.
    undecided : tuple of Imposed
        Nodes not modelled or not collected (If/Loop/Scan bodies): not decided past them.
    space : Space or None
        The input dims as isl parameters, for the requirements' ``region`` sets.
    """

    dims: tuple[DimDomain, ...] = ()
    relations: tuple[Relation, ...] = ()
    empty: str = ""
    inputs: tuple[tuple[str, Shape], ...] = ()
    requirements: tuple[Requirement, ...] = field(default=(), compare=False)
    not_collected: tuple[str, ...] = ()
    empty_at: tuple[Imposed, ...] = ()
    undecided: tuple[Imposed, ...] = ()
    space: Any = field(default=None, compare=False)
    """The `bcast.models.presburger.Space` of the input dims (None: no input dims)."""

    @property
    def is_empty(self) -> bool:
        """True when no input sizes make the model run."""
        return bool(self.empty)

    def dim(self, name: str) -> DimDomain | None:
        """Return the domain of the input dim ``name`` (None: the model has no such dim)."""
        return next((d for d in self.dims if d.name == name), None)

    def first_failure(self, bindings: Mapping[str, int]) -> Imposed | None:
        """Return the first node (in graph order) that fails at ``bindings``; None if none does.

        Requirements on dims left unbound are not decided.

        >>> r = Requirement(Imposed("add", "Add", 1, "s <= 64"), frozenset({"s"}),
        ...                 lambda b: b["s"] <= 64 if "s" in b else None)
        >>> d = Domain(requirements=(r,))
        >>> str(d.first_failure({"s": 65})), d.first_failure({"s": 3}), d.first_failure({})
        ('add (Add, axis 1)', None, None)
        """
        for requirement in self.requirements:
            if requirement.test(bindings) is False:
                return requirement.imposed
        return None

    def failures(self, bindings: Mapping[str, int]) -> tuple[Imposed, ...]:
        """Return every node whose requirement fails at ``bindings``, in graph order.

        Where two failing nodes do not depend on each other, a runtime may reach either
        first (its execution order is its own): the point fails at one of these.

        >>> r = Requirement(Imposed("add", "Add", 1, "s <= 64"), frozenset({"s"}),
        ...                 lambda b: b["s"] <= 64 if "s" in b else None)
        >>> [str(i) for i in Domain(requirements=(r, r)).failures({"s": 65})]
        ['add (Add, axis 1)', 'add (Add, axis 1)']
        """
        return tuple(r.imposed for r in self.requirements if r.test(bindings) is False)

    def to_json(self) -> dict[str, object]:
        """Return the domain as plain JSON data."""
        return {
            "empty": self.is_empty,
            "empty_reason": self.empty or None,
            "dims": [d.to_json() for d in self.dims],
            "relations": [r.to_json() for r in self.relations],
            "torch_export": self.torch_lines(),
            "openvino_reshape": self.openvino_shapes(),
            "not_collected": list(self.not_collected),
            "undecided": [i.to_json() for i in self.undecided],
        }

    def __str__(self) -> str:
        """Return the domain as `lines`, model text made safe (`bcast.core.text.safe_text`)."""
        return "\n".join(map(safe_text, self.lines())) or "(no symbolic input dims)"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython, Jupyter
        printer.text(str(self))

    def _repr_html_(self) -> str:  # Jupyter
        return f"<pre>{html.escape(str(self))}</pre>"

    def lines(self) -> list[str]:
        """Return the domain for people: a line per dim and per relation, with the nodes."""
        if self.empty:
            return [f"no input sizes make this model run: {self.empty}"]
        width = max((len(d.name) for d in self.dims), default=0)
        out = []
        for d in self.dims:
            by = _by(d.imposed)
            out.append(f"{d.name.ljust(width)}  {d.text}" + (f"    <- {by}" if by else ""))
        for r in self.relations:
            by = _by(r.imposed, said=r.text)
            out.append(f"{r.text}" + (f"    <- {by}" if by else ""))
            if r.region:
                out.append(f"  ({r.region})")
            if not r.decided and r.condition:
                out.append(
                    f"  (decided on its own: {r.condition}; not together with the sizes above,"
                    " whose set it would make too large; each point is decided exactly)"
                )
            elif not r.decided:
                out.append(
                    "  (not decided as a set: it multiplies dims, which isl cannot hold; the "
                    "sizes above do not take it into account; each point is decided exactly, "
                    "--dim ranges by z3)"
                )
        out += [f"not decided beyond node {i}: {i.reason}" for i in self.undecided[:_LISTED]]
        if len(self.undecided) > _LISTED:
            out.append(f"not decided beyond {len(self.undecided) - _LISTED} more nodes (--json)")
        return out

    def torch_lines(self) -> list[str]:
        """Return the domain as torch.export ``Dim`` lines (``seq = Dim("seq", max=64)``)."""
        equal = {m: r.dims[0] for r in self.relations if r.kind == "equal" for m in r.dims[1:]}
        out = []
        for d in self.dims:
            name = python_name(d.name)
            if d.name in equal:
                out.append(f"{name} = {python_name(equal[d.name])}")
                continue
            if not d.sizes:
                out.append(f"# {name}: no size runs")
                continue
            lo, hi = d.sizes[0][0], d.sizes[-1][1]
            if len(d.sizes) == 1 and lo == hi:
                out.append(f"{name} = {lo}  # static: None in dynamic_shapes, size {lo}")
                continue
            if not d.exact:
                hull = f", min={lo}" + ("" if hi is None else f", max={hi}")
                out.append(
                    f'{name} = Dim("{name}"{hull})  # only {d.text} run; a Dim cannot say it'
                )
                continue
            if d.congruence is not None:  # a derived Dim: name = m*_name + r
                out.extend(derived_dim(name, d.sizes, d.congruence, d.text))
                continue
            bounds = f", min={lo}" + ("" if hi is None else f", max={hi}")
            note = "" if len(d.sizes) == 1 else f"  # only {d.text} run; a Dim cannot say it"
            out.append(f'{name} = Dim("{name}"{bounds}){note}')
        out.extend(f"# and: {r.text}" for r in self.relations if r.kind != "equal")
        return out

    def openvino_shapes(self) -> dict[str, str]:
        """Return the inputs' partial shapes for OpenVINO's ``model.reshape`` (``[?,1..64]``)."""
        sizes = {d.name: d.sizes for d in self.dims}
        shapes = {}
        for name, shape in self.inputs:
            if shape.rank is None:
                continue
            texts = []
            for dim in shape.dims:
                found = sizes.get(dim.name) if dim.name is not None else None
                if found is None:
                    texts.append("?" if dim.name is not None else str(dim))
                elif not found or found == ANY:
                    texts.append("?")
                else:
                    texts.append(_interval_text(found[0][0], found[-1][1]))
            shapes[name] = "[" + ",".join(texts) + "]"
        return shapes


def _by(imposed: tuple[Imposed, ...], said: str = "") -> str:
    """Say which nodes impose a part: nodes giving the same reason are named together.

    A reason that repeats what the part ``said`` already is left out.

    >>> at = [Imposed(f"add_{i}", "Add", 3, "s, t are equal (or 1)") for i in range(6)]
    >>> _by(tuple(at))
    'add_0 (Add, axis 3) and 5 more (add_1, add_2, add_3, ...): s, t are equal (or 1)'
    """
    groups: dict[str, list[Imposed]] = {}
    for i in imposed:
        groups.setdefault(i.reason, []).append(i)
    parts = []
    for reason, at in groups.items():
        more = [a.node for a in at[1:]]
        named = ", ".join(more[:3]) + (", ..." if len(more) > 3 else "")
        also = f" and {len(more)} more ({named})" if more else ""
        parts.append(f"{at[0]}{also}" + ("" if said and said in reason else f": {reason}"))
    return "; ".join(parts)


def python_name(name: str) -> str:
    """Make a dim's name a Python identifier (``input_ids.0`` -> ``input_ids_0``).

    >>> python_name("input_ids.0"), python_name("0x")
    ('input_ids_0', '_0x')
    """
    text = re.sub(r"\W", "_", name)
    return "_" + text if not text or text[0].isdigit() else text
