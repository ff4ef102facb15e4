"""The operators ``bcast conformance`` grades, and the shapes each is tried on.

Each `OpSpec` names an ONNX operator, its attribute variants, the role of each input (for
`bcast.onnx.conformance.values`) and its shape table. A shape row is ``(pattern, shapes...)``:
the pattern (``scalar``, ``same``, ``stretch``, ``zero-size``, ``high-rank``, ``per-axis``,
``blocked``, ``mismatch``) groups the disagreements of the report. Rows marked ``mismatch``
must be refused; bcast decides (``bcast.ops``), the table only says why the row is there.
The element types are not listed here: they are the type constraints of each operator's
schema (``onnx.defs.get_schema``), read by `bcast.onnx.conformance.cases`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["OPS", "REDUCED", "OpSpec", "op_names"]

Row = tuple[Any, ...]


def _ones(rank: int, first: int, last: int) -> str:
    return "[" + ",".join(str(d) for d in [first, *([1] * (rank - 2)), last]) + "]"


BINARY: Final[tuple[Row, ...]] = (
    ("scalar", "[]", "[]"),
    ("scalar", "[3]", "[]"),
    ("scalar", "[]", "[2,3]"),
    ("same", "[2,3]", "[2,3]"),
    ("stretch", "[2,3]", "[3]"),
    ("stretch", "[2,1]", "[1,3]"),
    ("stretch", "[4,1,3]", "[2,1]"),
    ("zero-size", "[0]", "[1]"),
    ("zero-size", "[2,0]", "[2,1]"),
    ("zero-size", "[1,0]", "[3,1]"),
    ("zero-size", "[0,3]", "[]"),
    ("high-rank", _ones(8, 2, 1), _ones(8, 1, 3)),
    ("high-rank", _ones(12, 2, 3), "[3]"),
    ("high-rank", _ones(20, 2, 1), _ones(20, 1, 2)),
    ("mismatch", "[3]", "[2]"),
    ("mismatch", "[2,3]", "[2]"),
    ("mismatch", "[0]", "[2]"),
    ("mismatch", "[2,3,4]", "[5,4]"),
    ("mismatch", "[2,1]", "[0,3]"),
)
VARIADIC3: Final[tuple[Row, ...]] = (
    ("same", "[2,3]", "[2,3]", "[2,3]"),
    ("stretch", "[2,3]", "[3]", "[1,3]"),  # the first input has the output's shape
    ("stretch", "[2,1,3]", "[1,4,1]", "[3]"),
    ("scalar", "[]", "[2]", "[1,2]"),
    ("stretch", "[2]", "[1]", "[2,1]"),  # the first input is not the output's shape
    ("zero-size", "[0,1]", "[1,3]", "[1]"),
    ("high-rank", _ones(10, 2, 1), "[3]", _ones(10, 1, 1)),
    ("mismatch", "[2]", "[3]", "[1]"),
)
WHERE: Final[tuple[Row, ...]] = (
    ("same", "[2,3]", "[2,3]", "[2,3]"),
    ("stretch", "[2,1]", "[3]", "[1,3]"),
    ("stretch", "[1,3]", "[2,1]", "[]"),
    ("scalar", "[]", "[]", "[]"),
    ("zero-size", "[0,1]", "[1,3]", "[1]"),
    ("high-rank", _ones(9, 2, 1), "[3]", "[1]"),
    ("mismatch", "[2]", "[3]", "[1]"),
    ("mismatch", "[2,3]", "[3]", "[2]"),
)
EXPAND: Final[tuple[Row, ...]] = (  # data shape, target (the values of the shape input)
    ("stretch", "[3,1]", (2, 1, 4)),
    ("stretch", "[2,1]", (2, 3)),
    ("same", "[2,3]", (2, 3)),
    ("stretch", "[2,3]", (1,)),  # a target of lower rank, made of 1s
    ("scalar", "[]", ()),
    ("scalar", "[]", (2, 3)),
    ("zero-size", "[1]", (0,)),
    ("zero-size", "[2,1]", (2, 0)),
    ("high-rank", "[1]", (1, 1, 1, 1, 1, 1, 1, 2)),
    ("mismatch", "[3]", (2,)),
    ("mismatch", "[2,3]", (3, 1)),
    ("mismatch", "[3]", (0,)),
)
PRELU: Final[tuple[Row, ...]] = (
    ("stretch", "[2,3]", "[3]"),
    ("scalar", "[2,3]", "[]"),
    ("stretch", "[2,3,4]", "[3,1]"),
    ("same", "[2,3]", "[2,3]"),
    ("zero-size", "[0,3]", "[3]"),
    ("zero-size", "[2,0]", "[1]"),
    ("high-rank", _ones(8, 2, 3), "[3]"),
    ("mismatch", "[3]", "[2,3]"),  # the slope larger than X
    ("mismatch", "[2,3,4]", "[3]"),  # a channel slope: not unidirectional
    ("mismatch", "[2,3]", "[2,1,3]"),
)
QUANT: Final[tuple[Row, ...]] = (  # x, scale (zero point alike), attributes
    ("scalar", "[2,3]", "[]", {}),
    ("per-axis", "[2,3,4]", "[3]", {"axis": 1}),
    ("per-axis", "[2,3,4]", "[4]", {"axis": -1}),
    ("blocked", "[4,6]", "[2,6]", {"axis": 0, "block_size": 2}),
    ("blocked", "[5,2]", "[3,2]", {"axis": 0, "block_size": 2}),  # a last block of 1
    ("zero-size", "[0,3]", "[3]", {"axis": 1}),
    ("mismatch", "[2,3,4]", "[4]", {"axis": 1}),
    ("mismatch", "[4,6]", "[3,6]", {"axis": 0, "block_size": 2}),
)

REDUCED: Final = frozenset({1, 5, 9, 11, 15})
"""Rows of `BINARY` tried on element types other than the representative ones (one a
pattern: scalar, stretch, zero-size, high-rank, mismatch); the others get every row."""


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One operator of the kit: how its cases are made."""

    name: str
    family: str  # binary, variadic, where, expand, prelu, quant
    rows: tuple[Row, ...]
    roles: tuple[str, ...] = ("any", "any")
    variants: tuple[dict[str, Any], ...] = field(default_factory=lambda: ({},))
    kinds: tuple[str, ...] = ()  # per variant: "i" integers only, "f" floats only, "" any


def _binary(name: str, roles: tuple[str, ...] = ("any", "any")) -> OpSpec:
    return OpSpec(name, "binary", BINARY, roles)


OPS: Final[tuple[OpSpec, ...]] = (
    _binary("Add"),
    _binary("Sub"),
    _binary("Mul"),
    _binary("Div", ("any", "divisor")),
    _binary("Pow", ("any", "exponent")),
    OpSpec("Mod", "binary", BINARY, ("any", "divisor"), ({"fmod": 0}, {"fmod": 1}), ("i", "f")),
    OpSpec(
        "BitShift",
        "binary",
        BINARY,
        ("any", "count"),
        ({"direction": "LEFT"}, {"direction": "RIGHT"}),
    ),
    _binary("BitwiseAnd"),
    _binary("BitwiseOr"),
    _binary("BitwiseXor"),
    _binary("And"),
    _binary("Or"),
    _binary("Xor"),
    _binary("Equal"),
    _binary("Greater"),
    _binary("Less"),
    _binary("GreaterOrEqual"),
    _binary("LessOrEqual"),
    OpSpec("Max", "variadic", VARIADIC3, ("any", "any", "any")),
    OpSpec("Min", "variadic", VARIADIC3, ("any", "any", "any")),
    OpSpec("Mean", "variadic", VARIADIC3, ("any", "any", "any")),
    OpSpec("Sum", "variadic", VARIADIC3, ("any", "any", "any")),
    OpSpec("Where", "where", WHERE, ("cond", "any", "any")),
    OpSpec("Expand", "expand", EXPAND, ("any", "shape")),
    OpSpec("PRelu", "prelu", PRELU),
    OpSpec("QuantizeLinear", "quant", QUANT, ("any", "scale", "zero_point")),
    OpSpec("DequantizeLinear", "quant", QUANT, ("any", "scale", "zero_point")),
)
"""Every broadcasting operator of the kit, in the order of the report."""


def op_names() -> list[str]:
    """Return the names of the operators of the kit.

    >>> "BitShift" in op_names() and "QuantizeLinear" in op_names()
    True
    """
    return [spec.name for spec in OPS]
