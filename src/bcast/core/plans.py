"""`Plan`: what a broadcasting rule decided, in a form every later layer can apply.

A Plan records the operands, the output shape, and for every operand axis the output axis it
pairs with. Views (`bcast.arrays`), operators, ONNX lowering, ``explain`` and the model
checker read it; none of them re-derives broadcasting.
"""

from __future__ import annotations

from dataclasses import dataclass

from bcast.core.dim import Dim
from bcast.core.html import STYLE, alignment_html
from bcast.core.modes import Mode
from bcast.core.picture import format_alignment
from bcast.core.shape import Shape

__all__ = ["Plan"]

_ONE = Dim(1)


@dataclass(frozen=True, slots=True)
class Plan:
    """The result of a broadcasting rule: output shape and how each operand aligns.

    Attributes
    ----------
    mode : Mode
        The rule set that produced the plan.
    shapes : tuple of Shape
        The operands, normalised, in the order the mode names them.
    output : Shape
        The broadcast result.
    alignment : tuple
        One entry per operand: a tuple giving, for each operand axis, the output axis it pairs
        with, or None for an axis the mode drops (PDPD's trailing ones of B); None for an
        operand of unknown rank.
    axis : int or None
        PDPD only: the resolved start axis (``-1`` already replaced).
    axes_mapping : tuple of int or None
        Explicit mode only: the mapping of data axes to output axes.

    Examples
    --------
    >>> import bcast
    >>> p = bcast.plan("[2,3,4]", "[3,4,1]", mode="pdpd", axis=1)
    >>> str(p.output), p.alignment[1], p.aligned_shape(1)
    ('[2,3,4]', (1, 2, None), (1, 3, 4))
    >>> p.stretched_axes(1)
    (0,)
    """

    mode: Mode
    shapes: tuple[Shape, ...]
    output: Shape
    alignment: tuple[tuple[int | None, ...] | None, ...]
    axis: int | None = None
    axes_mapping: tuple[int, ...] | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        """Names of the operands by role: ``A, B``; ``data, target``; or ``#0, #1, ...``."""
        return labels_for(self.mode, len(self.shapes))

    @property
    def out_rank(self) -> int | None:
        """Rank of the output, None when unknown."""
        return self.output.rank

    def aligned_dims(self, operand: int) -> tuple[Dim, ...]:
        """Operand ``operand`` re-expressed at the output's rank, 1 where it has no axis.

        Dropped axes (always 1 in a valid instance) disappear. This is the reshape that a
        view or a lowering applies before a plain multidirectional broadcast.
        """
        rank = self.output.rank
        axes = self.alignment[operand]
        if rank is None or axes is None:
            raise ValueError("an operand or output of unknown rank has no aligned shape")
        dims = [_ONE] * rank
        for dim, out_axis in zip(self.shapes[operand], axes, strict=True):
            if out_axis is not None:
                dims[out_axis] = dim
        return tuple(dims)

    def aligned_shape(self, operand: int) -> tuple[int, ...]:
        """`aligned_dims` as ints, for a plan on static shapes."""
        return tuple(d.value for d in self.aligned_dims(operand))

    def stretched_axes(self, operand: int) -> tuple[int, ...]:
        """Return the output axes along which the operand is replicated.

        Those are the axes where its aligned dim is 1 and the output's is not; on partial
        shapes, the axes where it may be replicated.
        """
        aligned = self.aligned_dims(operand)
        return tuple(
            i
            for i, (dim, out) in enumerate(zip(aligned, self.output, strict=True))
            if not dim.definitely_equal(out) and dim.maybe_one()
        )

    def picture(self) -> list[str]:
        """Draw the operands and the result in aligned columns (see `format_alignment`)."""
        return format_alignment(
            self.shapes, self.alignment, self._rank(), labels=self.labels, result=self.output
        )

    def _rank(self) -> int:
        rank = self.output.rank
        if rank is None:  # unknown result rank: the known operands, right-aligned
            rank = max((s.rank for s in self.shapes if s.rank is not None), default=0)
        return rank

    def _heading(self) -> str:
        operands = ", ".join(str(s) for s in self.shapes)
        return f"{self.mode.value}: {operands} -> {self.output}"

    def __str__(self) -> str:
        """Write the heading and the aligned picture, as ``print(plan)`` shows it.

        >>> import bcast
        >>> print(bcast.plan("[2,1]", "[3]"))
        numpy: [2,1], [3] -> [2,3]
          #0  2  1
          #1     3
          =   2  3
        """
        return "\n".join([self._heading(), *("  " + row for row in self.picture())])

    def _repr_html_(self) -> str:
        """Draw the plan as an HTML table: a notebook's rich display of a Plan.

        >>> import bcast
        >>> '<td class="stretched">' in bcast.plan("[2,1]", "[3]")._repr_html_()
        True
        """
        stretched: set[tuple[int, int]] = set()
        if self.output.rank is not None:
            for i, axes in enumerate(self.alignment):
                if axes is not None:
                    stretched.update((i, j) for j in self.stretched_axes(i))
        table = alignment_html(
            self.shapes,
            self.alignment,
            self._rank(),
            labels=self.labels,
            result=self.output,
            stretched=stretched,
            caption=self._heading(),
        )
        return f"<style>{STYLE}</style>{table}"


def labels_for(mode: Mode, count: int) -> tuple[str, ...]:
    """Operand names for a mode: by role where the mode has roles."""
    if mode in (Mode.PDPD, Mode.UNIDIRECTIONAL) and count == 2:
        return ("A", "B")
    if mode in (Mode.BIDIRECTIONAL, Mode.EXPLICIT) and count == 2:
        return ("data", "target")
    return tuple(f"#{i}" for i in range(count))
