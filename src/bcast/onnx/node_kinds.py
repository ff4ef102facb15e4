"""What an ONNX node is to the checker beyond its names: its rule, mode and attributes.

The rule of an operator is the one of the operator set the model imports: before opset 7
the element-wise operators broadcast only with ``broadcast=1`` (the PDPD rule from
``axis``); operators of other domains get their operator rule (`bcast.models.rules_for`)
or are said not to be modelled.

>>> from onnx import helper
>>> node_kind(helper.make_node("Add", ["a", "b"], ["c"]), {"": 17}, local=False)
{'domain': '', 'rule': <Rule.MULTIDIRECTIONAL: 'multidirectional'>}
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

import onnx

from bcast.core.modes import Mode
from bcast.models import Rule
from bcast.models.domain_collect import einsum_labels
from bcast.models.operator_checks import rule_for
from bcast.onnx.protos import DEFAULT_DOMAINS, attribute

__all__ = ["MULTIDIRECTIONAL_OPS", "NORMALIZATION_OPS", "node_kind"]

MULTIDIRECTIONAL_OPS: Final = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Equal", "Greater",
        "GreaterOrEqual", "Less", "LessOrEqual", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
        "BitShift", "Max", "Min", "Sum", "Mean", "Where", "StringConcat",
    }
)  # fmt: skip
"""ONNX operators with multidirectional (NumPy) broadcasting over all their inputs."""

_SAME_SHAPE_BEFORE_8: Final = frozenset({"Max", "Min", "Sum", "Mean"})  # opsets 1 and 6
NORMALIZATION_OPS: Final = frozenset({"LayerNormalization", "RMSNormalization"})
"""ONNX operators whose scale and bias broadcast onto the normalized shape of X."""


@functools.lru_cache(maxsize=512)
def _schema(op: str, version: int) -> onnx.defs.OpSchema | None:
    """Return the schema of ``op`` in default-domain opset ``version`` (None: not in it)."""
    try:
        return onnx.defs.get_schema(op, version, "")
    except onnx.defs.SchemaError:
        return None


def node_kind(proto: onnx.NodeProto, opsets: Mapping[str, int], *, local: bool) -> dict[str, Any]:
    """Return what a node is to the checker beyond its names: its rule, mode and attributes."""
    op = proto.op_type
    if proto.domain not in DEFAULT_DOMAINS:
        return _other_domain(proto, local=local)
    found: dict[str, Any] = {"domain": proto.domain}
    if rule_for("", op) is not None:  # scales, biases, weights: bcast.models.rules_*
        found = {"rule": Rule.OPERATOR, "domain": "", "attrs": _int_attributes(proto)}
    if op in ("Concat", "Gather", "GatherElements", "Split"):  # their axis, for the domain
        return {**found, "axis": int(attribute(proto, "axis", 0))}
    if op == "GatherND":  # its batch_dims, for the domain's index bounds
        return {**found, "axis": int(attribute(proto, "batch_dims", 0))}
    if op == "CumSum":  # exclusive or not, for the domain's index bounds
        return {**found, "axis": 1 if attribute(proto, "exclusive", 0) else 0}
    if op == "Pad":  # for the domain: Pad-2's pads (an attribute), a mirror's pads below the dim
        mirror = attribute(proto, "mode", "constant") in (b"reflect", "reflect")
        return {**found, "attrs": (*_int_attributes(proto), *((("reflect", 1),) * mirror))}
    if op == "GroupNormalization" and found.get("rule") is Rule.OPERATOR:  # its version
        schema = _schema(op, opsets.get("", 0)) if opsets.get("") else None
        since = schema.since_version if schema is not None else 21
        return {**found, "attrs": (*found["attrs"], ("since", since))}
    if op == "TopK":  # its axis and TopK-1's k (an attribute), for the domain
        return {**found, "axis": int(attribute(proto, "axis", -1)), "attrs": _int_attributes(proto)}
    if op in ("Squeeze", "DepthToSpace"):  # for the domain: axes (before 13), blocksize
        return {**found, "attrs": _int_attributes(proto)}
    if op in _WINDOWED and attribute(proto, "auto_pad", b"") in (b"SAME_UPPER", b"SAME_LOWER"):
        # --target onnxruntime: it refuses (Conv) or sizes smaller (pools) a dilated SAME
        return {**found, "attrs": (*_int_attributes(proto), ("auto_same", 1))}
    if op == "Einsum":  # for the domain: each label's dims broadcast across the operands
        equation = attribute(proto, "equation", b"")
        text = equation.decode("utf-8", "replace") if isinstance(equation, bytes) else ""
        return {**found, "attrs": einsum_labels(text)}
    if op == "Reshape":
        return {**found, "allowzero": bool(attribute(proto, "allowzero", 0))}
    if op in NORMALIZATION_OPS:  # onnxruntime also runs LayerNormalization before opset 17
        return {**found, "rule": Rule.NORMALIZATION}
    version = opsets.get("")
    schema = _schema(op, version) if version is not None else None
    if version is not None and schema is None:  # onnxruntime refuses the model anyway
        return {**found, "unmodelled": f"{op} is not an operator of ONNX opset {version}"}
    if schema is not None:
        legacy = "broadcast" in schema.attributes  # Add..Less and Gemm of opsets 1 and 6
    else:  # no opset imported (IR version < 3): go by the attribute
        legacy = any(a.name == "broadcast" for a in proto.attribute)
    if legacy:
        # Opsets before 7: no attribute is broadcast=0 (shapes match exactly); broadcast=1
        # broadcasts B into A from `axis` (suffix matching without it): the PDPD rule.
        on = bool(attribute(proto, "broadcast", 0))
        if op == "Gemm":
            mode = Mode.UNIDIRECTIONAL if on else Mode.NONE
            return {**found, **_gemm(proto), "mode": mode}
        return {
            **found,
            "rule": Rule.ELEMENTWISE,
            "mode": Mode.PDPD if on else Mode.NONE,
            "axis": int(attribute(proto, "axis", -1)),
        }
    if op in MULTIDIRECTIONAL_OPS:
        if op in _SAME_SHAPE_BEFORE_8 and schema is not None and schema.since_version < 8:
            return {**found, "rule": Rule.MULTIDIRECTIONAL, "mode": Mode.NONE}
        return {**found, "rule": Rule.MULTIDIRECTIONAL}
    if op == "SwiGLU":  # opset 28: "A and B must have identical shapes"
        return {**found, "rule": Rule.MULTIDIRECTIONAL, "mode": Mode.NONE}
    if op == "Gemm":
        return {**found, **_gemm(proto)}
    if op == "PRelu" and (schema is None or schema.since_version >= 7):
        return {**found, "rule": Rule.PRELU}  # PRelu-1/-6 say nothing about broadcasting
    if op == "Expand":
        return {**found, "rule": Rule.EXPAND, "mode": Mode.BIDIRECTIONAL}
    return found


_WINDOWED: Final = frozenset({"Conv", "MaxPool", "AveragePool", "LpPool"})


def _other_domain(proto: onnx.NodeProto, *, local: bool) -> dict[str, Any]:
    """Give a node of another operator set its rule, or say that bcast cannot model it.

    ``local``: a model-local function implements it (its body is read as a subgraph).
    """
    found: dict[str, Any] = {"domain": proto.domain, "attrs": _int_attributes(proto)}
    if rule_for(proto.domain, proto.op_type) is not None:
        return {**found, "rule": Rule.OPERATOR}
    if local or onnx.defs.has(proto.op_type, proto.domain):  # ai.onnx.ml: ONNX's inference
        return found
    why = f"op {proto.domain}.{proto.op_type} has no shape rule in bcast (nor in ONNX)"
    return {**found, "unmodelled": why}


def _int_attributes(proto: onnx.NodeProto) -> tuple[tuple[str, int | tuple[int, ...]], ...]:
    """Return the integer attributes of a node, for its operator rule (`rules_base`)."""
    found: list[tuple[str, int | tuple[int, ...]]] = []
    for attr in proto.attribute:
        if attr.type == onnx.AttributeProto.INT:
            found.append((attr.name, int(attr.i)))
        elif attr.type == onnx.AttributeProto.INTS:
            found.append((attr.name, tuple(int(v) for v in attr.ints)))
    return tuple(found)


def _gemm(proto: onnx.NodeProto) -> dict[str, Any]:
    return {
        "rule": Rule.GEMM,
        "trans_a": bool(attribute(proto, "transA", 0)),
        "trans_b": bool(attribute(proto, "transB", 0)),
    }
