"""What an operator's own shape rule says: the broadcasts it requires and its output shape.

A rule (`bcast.models.rules_quant`, `bcast.models.rules_microsoft`) is a pure function of
a node and its operand shapes. It returns an `Outcome`: `Constraint` objects, each a
broadcast that must hold (a per-channel scale against the channel dim is the exact, ``none``
broadcast of ``[scale]`` with ``[x.shape[axis]]``), limits (`Limit`: a sequence at most as
long as a position table), other errors, and the output shape. The checker runs each
constraint through the one broadcasting rule (`bcast.plan`), so its findings, conditions
and domain requirements are those of every other broadcast; `check`, `domain` and
`verify` read the same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from bcast.core.dim import Dim
from bcast.core.modes import Mode
from bcast.core.shape import Shape
from bcast.models.graph import Node

__all__ = [
    "NOT_BROADCASTING",
    "Constraint",
    "attr",
    "broadcasting",
    "ints",
    "Limit",
    "Operands",
    "Outcome",
    "RuleFunction",
    "at",
    "ceil_div",
    "dims_of",
    "equal",
    "last",
    "one_way",
    "times",
]

Operands = Sequence[Shape]
"""The node's input shapes (``[...]`` for an absent or unknown one)."""


@dataclass(frozen=True, slots=True)
class Constraint:
    """A broadcast the operator requires: ``operands`` under ``mode``.

    ``roles`` name the operands in the message (as ``("X", "slope")`` for PRelu) and
    ``context`` says what the operator requires, in the words of its definition.
    """

    operands: tuple[tuple[str, Shape], ...]
    mode: Mode
    context: str
    kind: str = "incompatible"
    roles: tuple[str, ...] | None = None
    axis: int = -1  # pdpd's


@dataclass(frozen=True, slots=True)
class Limit:
    """A dim that must not exceed a static size (positions in a table of ``size`` rows)."""

    label: str
    dim: Dim
    size: int
    reason: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a rule says about one node: its constraints, limits, errors and output shape.

    ``output`` None leaves the output to the peer's inference (ONNX knows QLinearConv's),
    ``more`` gives the other outputs' (SkipLayerNormalization's sum of input and skip);
    ``errors`` are definite failures the rule decided itself, as ``(axis, reason)``.
    """

    constraints: tuple[Constraint, ...] = ()
    output: Shape | None = None
    limits: tuple[Limit, ...] = ()
    errors: tuple[tuple[int | None, str], ...] = ()
    more: tuple[Shape | None, ...] = ()  # the shapes of outputs 1, 2, ... (None: unknown)


NOT_BROADCASTING: Final = frozenset(
    {
        "Conv", "ConvTranspose", "InstanceNormalization", "BatchNormalization",
        "GroupNormalization", "GridSample",
    }
)  # fmt: skip
"""Operators with a rule (a parameter's length, a batch) that are no broadcasting node."""


def broadcasting(node: Node) -> bool:
    """Tell whether ``node`` broadcasts: a rule of its own, not only a bias's length.

    Quantization scales and ``com.microsoft`` operators count; Conv does not.

    >>> from bcast.models.graph import Rule
    >>> broadcasting(Node("c", "Conv", ("x", "w", "b"), ("y",), rule=Rule.OPERATOR))
    False
    """
    return node.rule is not None and node.op not in NOT_BROADCASTING


RuleFunction = Callable[[Node, Operands], Outcome]
"""An operator's rule: the node and its input shapes to its `Outcome`."""


_DYNAMIC: Final = Shape.dynamic()


def at(shapes: Operands, index: int) -> Shape:
    """Return input ``index``'s shape (unknown rank when the node has fewer inputs)."""
    return shapes[index] if index < len(shapes) else _DYNAMIC


def attr(node: Node, name: str, default: int) -> int:
    """Return the node's integer attribute ``name`` (``default`` when absent or a list).

    >>> attr(Node("q", "QuantizeLinear", ("x",), ("y",), attrs=(("axis", 0),)), "axis", 1)
    0
    """
    value = dict(node.attrs).get(name, default)
    return value if isinstance(value, int) else default


def ints(node: Node, name: str) -> tuple[int, ...]:
    """Return the node's integer-list attribute ``name`` (``()`` when absent)."""
    value = dict(node.attrs).get(name, ())
    return value if isinstance(value, tuple) else (value,)


def dims_of(*dims: Dim | int | None) -> Shape:
    """Return a 1-D list of dims as a shape, to hold one dim against another.

    >>> str(dims_of(Dim.symbol("C"), 3, None))
    '[C,3,?]'
    """
    return Shape(dims)


def equal(label_a: str, a: Shape, label_b: str, b: Shape, context: str) -> Constraint:
    """Require ``a`` and ``b`` to be the same shape (the ``none`` broadcast).

    >>> c = equal("C", dims_of(16), "scale", Shape((15,)), "per-axis: ")
    >>> c.mode.value, [str(s) for _, s in c.operands]
    ('none', ['[16]', '[15]'])
    """
    return Constraint(((label_a, a), (label_b, b)), Mode.NONE, context, roles=(label_a, label_b))


def one_way(label_a: str, a: Shape, label_b: str, b: Shape, context: str) -> Constraint:
    """Require ``b`` to broadcast unidirectionally to ``a`` (``[1]`` or ``a``'s own dims)."""
    return Constraint(
        ((label_a, a), (label_b, b)),
        Mode.UNIDIRECTIONAL,
        context,
        kind="unidirectional",
        roles=(label_a, label_b),
    )


def ceil_div(dim: Dim, by: int) -> Dim:
    """Return ``ceil(dim / by)``: exact for a static dim, else unknown.

    >>> ceil_div(Dim(33), 16), ceil_div(Dim.symbol("K"), 16)
    (Dim(3), Dim(0, None))
    """
    if dim.is_static and dim.lo is not None and by > 0:
        return Dim(-(-dim.lo // by))
    return Dim.unknown()


def times(k: int, dim: Dim) -> Dim:
    """Return ``k * dim``: exact for a static dim and ``k > 0``, else unknown.

    >>> times(4, Dim(8)), times(4, Dim.symbol("H"))
    (Dim(32), Dim(0, None))
    """
    return Dim(k * dim.lo) if k > 0 and dim.is_static and dim.lo is not None else Dim.unknown()


def last(shape: Shape, back: int = 1) -> Dim | None:
    """Return the dim ``back`` from the end (None: unknown rank or too short)."""
    if shape.rank is None or shape.rank < back:
        return None
    return shape.dims[shape.rank - back]
