"""What the checker records for the domain, node by node (`bcast.models.domain_solve` decides).

Each record is one node's requirement on the model's input dims, kept as the node stated it:
a broadcast's plan with its conditions, a Reshape's element counts, a table a Range indexes,
a window that must keep a size, a relation the node's shape arithmetic needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from bcast.core.conditions import Condition
from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.plans import Plan
from bcast.core.shape import Shape

__all__ = [
    "ArithmeticRecord",
    "BoundRecord",
    "CountRecord",
    "IndexRecord",
    "PlanRecord",
    "ProductRecord",
    "Record",
    "WindowRecord",
]


@dataclass(frozen=True, slots=True)
class PlanRecord:
    """What the checker saw at one broadcast: the plan and its conditions, or its error."""

    node: str
    op: str
    plan: Plan | None
    conditions: tuple[Condition, ...] = ()
    error: str = ""
    axis: int | None = None


@dataclass(frozen=True, slots=True)
class ProductRecord:
    """A Reshape with a constant target: the element counts must agree."""

    node: str
    op: str
    data: Shape
    target: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CountRecord:
    """A Reshape whose output holds symbols: data and output hold as many elements.

    Its target is computed in the graph (``[batch, -1]`` from a ``Shape``).
    """

    node: str
    op: str
    data: Shape
    output: Shape


@dataclass(frozen=True, slots=True)
class BoundRecord:
    """Gather's indices from a ``Range``: positions that must fit in a table.

    ``count`` positions from ``start`` index the ``size`` rows of the data's axis (a
    position-embedding table caps the sequence).
    """

    node: str
    op: str
    count: Dim
    start: int
    size: int


@dataclass(frozen=True, slots=True)
class WindowRecord:
    """A Conv or pooling window: its output dim ``size`` at ``axis`` must be at least 1."""

    node: str
    op: str
    axis: int
    size: Dim


@dataclass(frozen=True, slots=True)
class IndexRecord:
    """A Gather whose indices are computed from the input's dims (a mask read row by row).

    Its largest index plus one, ``rows``, must not pass the ``size`` rows of the data's
    axis (``(batch - 1)*mask_seq + mask_seq`` rows of ``mask_batch*mask_seq``).
    """

    node: str
    op: str
    rows: Expr
    size: Dim


@dataclass(frozen=True, slots=True)
class ArithmeticRecord:
    """A relation a node's shape arithmetic needs between input dims: ``left relation right``.

    ``relation`` is ``"=="``, ``"<="`` or ``">="``; ``left`` and ``right`` are expressions
    over input dims (floor division, modulo, Min and Max included). ``reason`` says it in the
    node's words: ``SpaceToDepth needs H % 2 == 0``, ``Concat needs total == past + seq``.
    """

    node: str
    op: str
    left: Expr
    relation: str
    right: Expr
    reason: str = ""


Record = (
    PlanRecord
    | ProductRecord
    | CountRecord
    | BoundRecord
    | WindowRecord
    | IndexRecord
    | ArithmeticRecord
)
"""What the checker records for the domain, node by node."""
