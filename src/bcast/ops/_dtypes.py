"""The dtype rules of every operator, in one table, written as the ONNX schemas write them.

Each operator has a `Signature`: the type parameter of each input (``T``, ``T1``, ``B``),
the parameter of the output, and the dtypes each parameter allows. The allowed sets are
those of the ONNX operator schemas (onnx 1.23: Add-14, Pow-15, Equal-19, Where-16, ...)
restricted to the dtypes an array library can hold; ``tests/unit/test_ops.py`` checks them
against ``onnx.defs.get_schema(op).type_constraints``. OpenVINO's Broadcast, which has no
ONNX schema, takes every dtype.

Dtypes are named by strings (``"float32"``, ``"bool"``, ``"string"``), the same for every
array library, so that one check serves NumPy and every array-API namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from bcast.arrays.dtypes import dtype_name

__all__ = ["SIGNATURES", "Signature", "bind", "dtype_name", "fixed_output"]

FLOAT: Final = frozenset({"float16", "bfloat16", "float32", "float64"})
SIGNED: Final = frozenset({"int8", "int16", "int32", "int64"})
UNSIGNED: Final = frozenset({"uint8", "uint16", "uint32", "uint64"})
NUMERIC: Final = FLOAT | SIGNED | UNSIGNED
COMPLEX: Final = frozenset({"complex64", "complex128"})
BOOL: Final = frozenset({"bool"})
STRING: Final = frozenset({"string"})
EVERY: Final = NUMERIC | COMPLEX | BOOL | STRING
# Gemm-13 and PRelu-16: floats and the 32/64-bit integers.
FLOAT_AND_WIDE_INTS: Final = FLOAT | frozenset({"int32", "int64", "uint32", "uint64"})
INTEGER: Final = SIGNED | UNSIGNED
# The narrow ONNX types, held by ``ml_dtypes`` arrays (NumPy dtype names).
FLOAT8: Final = frozenset({"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"})
NARROW: Final = FLOAT8 | frozenset(
    {"int4", "uint4", "int2", "uint2", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"}
)
# QuantizeLinear-25/28 T3, DequantizeLinear T1 (with int32): what a quantized tensor holds.
QUANTIZED: Final = frozenset({"int8", "uint8", "int16", "uint16"}) | NARROW


@dataclass(frozen=True, slots=True)
class Signature:
    """Type constraints of one operator.

    Attributes
    ----------
    onnx : str or None
        The ONNX operator name (None for OpenVINO's Broadcast, which has no ONNX schema).
    inputs : tuple of str
        The type parameter of each input; a variadic operator has one, repeated.
    output : str
        The type parameter of the output.
    allowed : mapping of str to frozenset of str
        The dtypes each type parameter allows.
    variadic : bool
        True when every input takes ``inputs[0]`` (Max, Min, Mean, Sum).
    """

    onnx: str | None
    inputs: tuple[str, ...]
    output: str
    allowed: Mapping[str, frozenset[str]]
    variadic: bool = False


def _same(onnx: str, allowed: frozenset[str], arity: int = 2) -> Signature:
    return Signature(onnx, ("T",) * arity, "T", {"T": allowed})


def _predicate(onnx: str, allowed: frozenset[str]) -> Signature:
    return Signature(onnx, ("T", "T"), "T1", {"T": allowed, "T1": BOOL})


def _variadic(onnx: str, allowed: frozenset[str]) -> Signature:
    return Signature(onnx, ("T",), "T", {"T": allowed}, variadic=True)


SIGNATURES: Final[Mapping[str, Signature]] = {
    "add": _same("Add", NUMERIC),
    "sub": _same("Sub", NUMERIC),
    "mul": _same("Mul", NUMERIC),
    "div": _same("Div", NUMERIC),
    "pow": Signature("Pow", ("T", "T1"), "T", {"T": FLOAT | {"int32", "int64"}, "T1": NUMERIC}),
    "equal": _predicate("Equal", NUMERIC | BOOL | STRING),
    "greater": _predicate("Greater", NUMERIC),
    "less": _predicate("Less", NUMERIC),
    "and_": _predicate("And", BOOL),
    "or_": _predicate("Or", BOOL),
    "xor": _predicate("Xor", BOOL),
    "max": _variadic("Max", NUMERIC),
    "min": _variadic("Min", NUMERIC),
    "mean": _variadic("Mean", FLOAT),
    "sum": _variadic("Sum", FLOAT),
    "where": Signature(
        "Where", ("B", "T", "T"), "T", {"B": BOOL, "T": NUMERIC | COMPLEX | BOOL | STRING}
    ),
    "gemm": _same("Gemm", FLOAT_AND_WIDE_INTS, 3),
    "prelu": _same("PRelu", FLOAT_AND_WIDE_INTS),
    "expand": _same("Expand", EVERY, 1),
    "broadcast": Signature(None, ("T",), "T", {"T": EVERY}),
    # ONNX opset 10+ and OpenVINO's element-wise set (None: OpenVINO only).
    "mod": _same("Mod", NUMERIC),
    "bit_shift": _same("BitShift", INTEGER),
    "bitwise_and": _same("BitwiseAnd", INTEGER),
    "bitwise_or": _same("BitwiseOr", INTEGER),
    "bitwise_xor": _same("BitwiseXor", INTEGER),
    "greater_or_equal": _predicate("GreaterOrEqual", NUMERIC),
    "less_or_equal": _predicate("LessOrEqual", NUMERIC),
    "not_equal": Signature(None, ("T", "T"), "T1", {"T": NUMERIC | BOOL, "T1": BOOL}),
    "squared_difference": Signature(None, ("T", "T"), "T", {"T": NUMERIC}),
    "select": Signature(None, ("B", "T", "T"), "T", {"B": BOOL, "T": NUMERIC | BOOL | STRING}),
    "fake_quantize": Signature(None, ("T",) * 5, "T", {"T": FLOAT}),
    "quantize_linear": Signature(
        "QuantizeLinear",
        ("T1", "T2", "T3"),
        "T3",
        {
            "T1": frozenset({"float32", "float16", "bfloat16", "int32"}),
            "T2": frozenset({"float32", "float16", "bfloat16", "int32", "float8_e8m0fnu"}),
            "T3": QUANTIZED,
        },
    ),
    "dequantize_linear": Signature(
        "DequantizeLinear",
        ("T1", "T2", "T1"),
        "T2",
        {
            "T1": QUANTIZED | {"int32"},
            "T2": frozenset({"float32", "float16", "bfloat16", "float8_e8m0fnu"}),
        },
    ),
}
"""Operator name (as in `bcast.ops`) → its type constraints."""


def bind(op: str, labels: Sequence[str], names: Sequence[str]) -> dict[str, int]:
    """Check input dtypes against an operator's signature; bind each type parameter.

    Returns, for each type parameter some input carries, the index of the first input
    bound to it (the output dtype is that input's, or the fixed dtype of a parameter no
    input carries, such as ``T1 = bool`` of the comparisons).

    Raises TypeError naming the operand and its dtype when a dtype is not allowed, and both
    dtypes when two operands of one parameter differ.

    >>> bind("pow", ["a", "b"], ["int32", "float32"])
    {'T': 0, 'T1': 1}
    >>> bind("add", ["a", "b"], ["int32", "float32"])
    Traceback (most recent call last):
    ...
    TypeError: add: a and b must have the same dtype (ONNX type parameter T); got int32 and float32
    """
    sig = SIGNATURES[op]
    bound: dict[str, int] = {}
    for index, (label, name) in enumerate(zip(labels, names, strict=True)):
        param = sig.inputs[0] if sig.variadic else sig.inputs[index]
        allowed = sig.allowed[param]
        if name not in allowed:
            raise TypeError(
                f"{op}: {label} has dtype {name}, which {_who(sig)} does not allow; "
                f"expected one of {', '.join(sorted(allowed))}"
            )
        first = bound.setdefault(param, index)
        if names[first] != name:
            raise TypeError(
                f"{op}: {labels[first]} and {label} must have the same dtype "
                f"(ONNX type parameter {param}); got {names[first]} and {name}"
            )
    return bound


def fixed_output(op: str) -> str | None:
    """Return the fixed output dtype of an operator (no input carries its parameter), or None.

    >>> fixed_output("equal"), fixed_output("add")
    ('bool', None)
    """
    sig = SIGNATURES[op]
    if sig.output in sig.inputs:
        return None
    (only,) = sig.allowed[sig.output]
    return only


def _who(sig: Signature) -> str:
    return f"ONNX {sig.onnx}" if sig.onnx else "the operator"
