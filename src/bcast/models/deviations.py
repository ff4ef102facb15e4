"""Where a runtime is known to depart from the specification: ``bcast check --target``.

The differential tests run bcast's operators against onnxruntime and OpenVINO; where a
runtime answers what the operator text does not (a lost PDPD axis, a refused valid model, a
wrong mask), `docs/peer-differences.md` records the case and a test pins it. With a target
runtime, `check` turns the cases that a model's shapes alone reveal into warnings of kind
``runtime-deviation`` at the nodes that hit them, each with its entry in that file. A model
the specification accepts can still fail or compute something else there.

Only what the shapes and attributes show is told: a deviation that depends on values or on
element types bcast's graph does not carry (OpenVINO's floor division of integers under
pdpd, onnxruntime's signaling NaNs in float16 Pow) is not. onnxruntime's are its dilated
SAME windows: a Conv it refuses, pools it sizes smaller. For tract nothing is recorded yet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.core.planning import plan
from bcast.core.shape import Shape
from bcast.models.graph import Finding, Graph, Node, Severity

__all__ = ["TARGETS", "runtime_deviations"]

TARGETS: Final = ("onnxruntime", "openvino", "tract")
"""The runtimes ``--target`` takes."""

_DOCS: Final = "docs/peer-differences.md#openvino-kernels-cpu-plugin"
_ORT_DOCS: Final = (
    "docs/peer-differences.md#bcast-check-on-onnx-operators-the-runtimes-do-not-follow-or-"
    "cannot-run"
)

Operands = Sequence[tuple[str, Shape]]


@dataclass(frozen=True, slots=True)
class _Deviation:
    runtime: str
    ops: frozenset[str]
    says: Callable[[Node, Operands], str | None]  # the reason at this node, or None


def _pdpd_axis(node: Node, operands: Operands) -> int | None:
    """Return the pdpd axis OpenVINO reads where the plan places B off A's right edge.

    None where B is right-aligned (as NumPy would place it), or where the shapes do not
    broadcast at all (the check reports that itself).
    """
    if node.mode is not Mode.PDPD or len(operands) < 2:
        return None
    a, b = operands[0][1], operands[1][1]
    if a.rank is None or b.rank is None:
        return None
    axis = node.axis if node.axis_written else 0  # OpenVINO reads a missing axis as 0
    try:
        placed = plan(a, b, mode=Mode.PDPD, axis=axis).alignment[1]
    except BroadcastError:
        return None
    return None if placed == tuple(range(a.rank - b.rank, a.rank)) else axis


def _axis_lost(node: Node, operands: Operands) -> str | None:
    axis = _pdpd_axis(node, operands)
    if axis is None:
        return None
    return (
        f"OpenVINO's CPU plugin loses the pdpd axis of {node.op}: it places B "
        f"{operands[1][1]} right-aligned instead of at axis {axis} (a wrong result, or "
        "'Argument shapes are inconsistent' when compiled with static shapes); Add, "
        f"Multiply, Power and Maximum keep it. See {_DOCS}"
    )


def _eltwise_infer(node: Node, operands: Operands) -> str | None:
    axis = _pdpd_axis(node, operands)
    if axis is None:
        return None
    return (
        f"OpenVINO's CPU plugin fails {node.op} with pdpd B {operands[1][1]} at axis {axis} "
        f"('Eltwise shape infer input shapes dim index ... mismatch'). See {_DOCS}"
    )


def _select_mask(node: Node, operands: Operands) -> str | None:
    if node.mode is not Mode.PDPD or not operands:
        return None
    condition, then = operands[0][1], operands[1][1] if len(operands) > 1 else Shape.dynamic()
    if condition.rank is None or then.rank is None or not 0 < condition.rank < then.rank:
        return None
    if not condition.dims[-1].maybe_one() or all(s.is_static for _, s in operands):
        return None  # with every shape static at compile time the plugin reads it right
    return (
        f"OpenVINO's CPU plugin reads a pdpd Select's condition {condition} (of a lower rank "
        "than its then, ending in a dim that is or may be 1) as another mask when the shapes "
        f"are decided at run time: rows from the wrong branch. See {_DOCS}"
    )


def _fake_quantize(node: Node, operands: Operands) -> str | None:
    if not operands or operands[0][1].rank is None:
        return None
    x = operands[0][1]
    assert x.rank is not None
    higher = [name for name, s in operands[1:] if s.rank is not None and s.rank > x.rank]
    if higher:
        return (
            f"OpenVINO's CPU plugin fails a FakeQuantize whose limit {higher[0]} has a "
            f"higher rank than X {x}. See {_DOCS}"
        )
    if any(d.is_static and d.lo == 0 for d in x.dims):
        return f"OpenVINO's CPU plugin gives a wrong shape for FakeQuantize of an empty X {x}."
    return None


def _scalar_broadcast(node: Node, operands: Operands) -> str | None:
    if node.mode not in (None, Mode.NUMPY, Mode.BIDIRECTIONAL) or len(operands) < 2:
        return None
    data, target = operands[0][1], operands[1][1]
    if data.rank != 0 or target.rank != 1 or not target.dims[0].is_static:
        return None
    if target.dims[0].lo != 0:  # the target input holds the target's dims: none, []
        return None
    return (
        "OpenVINO's CPU plugin crashes (segmentation fault) broadcasting a scalar to the "
        f"scalar target []. See {_DOCS}"
    )


def _dilated_same(node: Node, operands: Operands) -> str | None:
    """Say how onnxruntime departs at a SAME window with a dilation: a Conv, or a pool."""
    attrs = dict(node.attrs)
    found = attrs.get("dilations", ())
    dilations = list(found) if isinstance(found, tuple) else [found]
    if not attrs.get("auto_same") or all(d == 1 for d in dilations):
        return None
    if node.op == "Conv":
        return (
            f"onnxruntime refuses a Conv with auto_pad SAME_UPPER or SAME_LOWER and dilations "
            f"{dilations} at every size ('Dilation not supported for AutoPadType::SAME_UPPER "
            "or AutoPadType::SAME_LOWER'); the ONNX text allows it (PyTorch's padding='same' "
            f"with a dilation exports it; explicit pads run). See {_ORT_DOCS}"
        )
    return (
        f"onnxruntime sizes a {node.op} with auto_pad SAME and dilations {dilations} "
        "smaller than ceil(input / stride), the ONNX text's size: it pads as if the "
        "window were not dilated (k3, dilation 2, stride 1: 2 fewer), and what meets it "
        f"downstream may not fit. See {_ORT_DOCS}"
    )


_DEVIATIONS: Final = (
    _Deviation(
        "onnxruntime", frozenset({"Conv", "MaxPool", "AveragePool", "LpPool"}), _dilated_same
    ),
    _Deviation(
        "openvino",
        frozenset(
            {"Subtract", "Divide", "Equal", "Greater", "Less", "LogicalAnd", "LogicalOr"}
            | {"LogicalXor"}
        ),
        _axis_lost,
    ),
    _Deviation(
        "openvino",
        frozenset({"GreaterEqual", "LessEqual", "NotEqual", "FloorMod", "Mod"}),
        _eltwise_infer,
    ),
    _Deviation("openvino", frozenset({"Select"}), _select_mask),
    _Deviation("openvino", frozenset({"FakeQuantize"}), _fake_quantize),
    _Deviation("openvino", frozenset({"Broadcast"}), _scalar_broadcast),
)


def runtime_deviations(
    graph: Graph, values: Mapping[str, Shape], target: str | None
) -> list[Finding]:
    """Return a warning for each node of ``graph`` that hits a known deviation of ``target``.

    ``values`` holds the propagated shapes (`bcast.models.checker`). None: no target.

    Raises
    ------
    ValueError
        For a target not in `TARGETS`.

    Examples
    --------
    >>> from bcast.core.modes import Mode
    >>> from bcast.models import Graph, Node, Rule
    >>> g = Graph("m.xml", "openvino", shapes={"a": Shape((2, 1)), "b": Shape((2,))})
    >>> g.nodes.append(
    ...     Node("sub", "Subtract", ("a", "b"), ("c",), rule=Rule.ELEMENTWISE, mode=Mode.PDPD,
    ...          axis=0)
    ... )
    >>> [f.kind for f in runtime_deviations(g, g.shapes, "openvino")]
    ['runtime-deviation']
    >>> runtime_deviations(g, g.shapes, "onnxruntime")
    []
    """
    if target is None:
        return []
    if target not in TARGETS:
        raise ValueError(f"target takes {', '.join(TARGETS)}; got {target!r:.40}")
    found = []
    for node in graph.nodes:
        for deviation in _DEVIATIONS:
            if deviation.runtime != target or node.op not in deviation.ops:
                continue
            operands = [(n, values[n]) for n in node.inputs if n and n in values]
            said = deviation.says(node, operands)
            if said is not None:
                mode = None if node.mode is None else node.mode.value
                found.append(
                    Finding(
                        Severity.WARNING,
                        "runtime-deviation",
                        node.name,
                        node.op,
                        tuple(operands),
                        mode,
                        None,
                        said,
                    )
                )
    return found
