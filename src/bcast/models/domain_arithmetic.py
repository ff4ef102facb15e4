"""What a node's own shape arithmetic requires of its input dims, for the domain (issue 37).

The readers size SpaceToDepth and Split on symbolic dims with floor divisions, and Pad with
its pads added (`bcast.onnx.spatial_shapes`, `bcast.openvino.ir_spatial`); the runtimes
refuse sizes that do not divide, and negative sizes. `arithmetic_records` says so as
`ArithmeticRecord` relations over the input dims: ``H % 2 == 0`` ("H must be a multiple of
2"), the split sizes summing to the dim, ``W >= 3`` where Pad cuts 3 from W.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bcast.core.arithmetic import expr_of, total
from bcast.core.expressions import Expr
from bcast.core.shape import Shape
from bcast.models.domain_records import ArithmeticRecord
from bcast.models.graph import Graph, Node

__all__ = ["ARITHMETIC_OPS", "arithmetic_records"]

ARITHMETIC_OPS: Final = frozenset(
    {
        "SpaceToDepth", "DepthToSpace", "Split", "VariadicSplit", "Pad", "Squeeze", "TopK",
        "GroupNormalization",
    }
)  # fmt: skip
"""The operators whose shape arithmetic requires a relation of their input dims."""


def _int(value: int) -> Expr:
    return Expr("int", value=value)


def arithmetic_records(
    node: Node, graph: Graph, inputs: Sequence[Shape], outputs: Sequence[Shape]
) -> list[ArithmeticRecord]:
    """Return the relations ``node`` requires of its inputs' dims (empty where none).

    SpaceToDepth: each spatial dim a multiple of the block (read from the channels, ``C*b^k``
    out of ``C``). Split into equal parts: the dim a multiple of their count; into constant
    sizes: the sizes summing to the dim; VariadicSplit's ``-1``: the others at most the dim.
    Pad with constant pads that cut (their sum on an axis negative): the dim at least the
    cut, as onnxruntime and OpenVINO refuse a negative size. Squeeze of constant axes: each
    of those dims 1. ONNX TopK of a constant ``k``: the axis at least ``k``. DepthToSpace:
    the channels a multiple of the block's square; GroupNormalization's, of its groups.

    Examples
    --------
    >>> g = Graph("m.onnx", "onnx")
    >>> node = Node("s2d", "SpaceToDepth", ("x",), ("y",))
    >>> found = arithmetic_records(node, g, [Shape.parse("[1,3,H,8]")], [Shape.parse("[1,12,?,4]")])
    >>> [(str(r.left), r.relation, str(r.right), r.reason) for r in found]
    [('H%2', '==', '0', "H must be a multiple of 2 (SpaceToDepth's block)")]
    """
    if not inputs or inputs[0].rank is None:
        return []
    x = inputs[0]
    sized = bool(outputs) and outputs[0].rank is not None  # SpaceToDepth and Split read it
    if node.op in ("SpaceToDepth", "Split", "VariadicSplit") and not sized:
        return []
    if node.op == "SpaceToDepth":
        found = _space_to_depth(node, graph, x, outputs[0])
    elif node.op == "Pad":
        found = _pad(node, graph, x)
    elif node.op == "Squeeze":
        found = _squeeze(node, graph, x)
    elif node.op == "TopK":
        found = _top_k(node, graph, x)
    elif node.op == "DepthToSpace":
        found = _depth_to_space(node, graph, x)
    elif node.op == "GroupNormalization":
        found = _groups(node, graph, x)
    else:
        found = _split(node, graph, x, outputs)
    return [r for r in found if r.left.symbols or r.right.symbols or not _holds(r)]


def _holds(record: ArithmeticRecord) -> bool:
    """Tell whether a relation between sizes (no symbols: ``--dim H=5``, static dims) holds."""
    left, right = record.left.evaluate({}), record.right.evaluate({})
    if left is None or right is None:
        return False
    return {"==": left == right, "<=": left <= right, ">=": left >= right}[record.relation]


def _space_to_depth(node: Node, graph: Graph, x: Shape, y: Shape) -> list[ArithmeticRecord]:
    spatial = (x.rank or 0) - 2
    c, out = (x.dims[1], y.dims[1]) if spatial >= 1 and y.rank == x.rank else (None, None)
    if c is None or out is None or not (c.is_static and out.is_static) or c.lo == 0:
        return []
    block = round((out.lo / c.lo) ** (1 / spatial))
    if block < 2 or c.lo * block**spatial != out.lo:
        return []
    found = []
    for dim in x.dims[2:]:
        size = expr_of(dim, graph.expressions)
        if size is None:  # a size (--dim H=5) is decided here and now
            continue
        reason = f"{size} must be a multiple of {block} ({node.op}'s block)"
        left = Expr("%", (size, _int(block)))
        found.append(ArithmeticRecord(node.name, node.op, left, "==", _int(0), reason))
    return found


def _pad(node: Node, graph: Graph, x: Shape) -> list[ArithmeticRecord]:
    """Require each dim that constant negative pads cut to stay at least 0, and more.

    ONNX Pad-11+: ``pads`` ``[x1_begin, x2_begin, ..., x1_end, x2_end]`` over ``axes``
    (all of them, unless the ``axes`` input says which); IR Pad: ``pads_begin`` and
    ``pads_end`` over every axis. A mirrored pad (``reflect``: ONNX and IR; ``symmetric``: IR)
    takes its values from inside the dim: the dim must be larger than a reflect pad
    (onnxruntime refuses less; OpenVINO's Pad-12 text: "not greater than data.shape[D] - 1")
    and at least a symmetric one ("not greater than data.shape[D]"). ONNX Pad-2's pads are
    an attribute (``node.attrs``), over every axis. Pads computed in the graph are not read
    (`bcast.models.domain_collect.NOT_COLLECTED`).

    >>> g = Graph("m.onnx", "onnx", constants={"p": (0, 0, 0, 0, 0, -3)})
    >>> node = Node("pad", "Pad", ("x", "p"), ("y",))
    >>> [(str(r.left), r.relation, str(r.right)) for r in _pad(node, g, Shape.parse("[1,4,w]"))]
    [('w', '>=', '3')]
    """
    rank = x.rank or 0
    names = [*node.inputs, "", "", ""]
    if graph.format == "openvino":
        begin, end = graph.constants.get(names[1]), graph.constants.get(names[2])
        if begin is None or end is None or len(begin) != rank or len(end) != rank:
            return []
        axes: list[int] = list(range(rank))
        pads = [*begin, *end]
    else:
        found = graph.constants.get(names[1]) if names[1] else None
        given = graph.constants.get(names[3]) if names[3] else None
        attribute = dict(node.attrs).get("pads")
        if found is None and isinstance(attribute, tuple):  # Pad-2
            found, given = attribute, None
        if found is None:
            return []
        pads = list(found)
        axes = list(given) if given is not None else list(range(rank))
    count = len(axes)
    if len(pads) != 2 * count or not all(type(v) is int for v in (*pads, *axes)):
        return []
    mirrored = dict(node.attrs)
    beyond = 1 if "reflect" in mirrored else 0 if "symmetric" in mirrored else None
    records = []
    for i, axis in enumerate(axes):
        size = expr_of(x.dims[axis % rank], graph.expressions) if -rank <= axis < rank else None
        if size is None:
            continue
        cut = -(pads[i] + pads[i + count])
        if cut > 0:
            reason = f"{size} must be at least {cut}: {node.op}'s negative pads cut {cut} from it"
            records.append(ArithmeticRecord(node.name, node.op, size, ">=", _int(cut), reason))
        widest = max(pads[i], pads[i + count])
        if beyond is not None and widest > 0:  # a mirror takes its pads from inside the dim
            need = widest + beyond
            mode = "reflect" if beyond else "symmetric"
            reason = f"{size} must be at least {need}: {node.op} ({mode}) mirrors {widest} values"
            records.append(ArithmeticRecord(node.name, node.op, size, ">=", _int(need), reason))
    return records


def _squeeze(node: Node, graph: Graph, x: Shape) -> list[ArithmeticRecord]:
    """Require each dim a Squeeze removes to be 1 (onnxruntime and OpenVINO refuse others).

    Its axes: the constant ``axes`` input (ONNX Squeeze-13+, IR), else the attribute
    (ONNX Squeeze-1 and -11). Without axes a Squeeze removes the dims of size 1 it finds:
    nothing to require.

    >>> g = Graph("m.onnx", "onnx", constants={"a": (1,)})
    >>> node = Node("sq", "Squeeze", ("x", "a"), ("y",))
    >>> [(str(r.left), r.relation, str(r.right)) for r in _squeeze(node, g, Shape.parse("[2,s,3]"))]
    [('s', '==', '1')]
    """
    rank = x.rank or 0
    given = graph.constants.get(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    written = dict(node.attrs).get("axes")
    axes = given if given is not None else (written,) if isinstance(written, int) else written
    found = []
    for axis in axes or ():
        if type(axis) is not int or not -rank <= axis < rank:
            return []
        size = expr_of(x.dims[axis % rank], graph.expressions)
        if size is not None:
            reason = f"{size} must be 1: {node.op} removes axis {axis % rank}"
            found.append(ArithmeticRecord(node.name, node.op, size, "==", _int(1), reason))
    return found


def _depth_to_space(node: Node, graph: Graph, x: Shape) -> list[ArithmeticRecord]:
    """Require DepthToSpace's channels to be a multiple of the block's square.

    >>> node = Node("d2s", "DepthToSpace", ("x",), ("y",), attrs=(("blocksize", 2),))
    >>> found = _depth_to_space(node, Graph("m.onnx", "onnx"), Shape.parse("[1,C,4,4]"))
    >>> [(str(r.left), r.relation, str(r.right)) for r in found]
    [('C%4', '==', '0')]
    """
    block = dict(node.attrs).get("blocksize", dict(node.attrs).get("block_size"))
    if not isinstance(block, int) or block < 1 or (x.rank or 0) < 3:
        return []
    square = block ** ((x.rank or 0) - 2)  # ONNX's 4-D: block * block
    why = f"{node.op}'s block {block}, per spatial axis"
    return _channels_multiple(node, graph, x, square, why)


def _groups(node: Node, graph: Graph, x: Shape) -> list[ArithmeticRecord]:
    """Require GroupNormalization's channels to be a multiple of its group count."""
    groups = dict(node.attrs).get("num_groups")
    if not isinstance(groups, int) or groups < 1:
        return []
    return _channels_multiple(node, graph, x, groups, f"{node.op}'s num_groups")


def _channels_multiple(
    node: Node, graph: Graph, x: Shape, divisor: int, why: str
) -> list[ArithmeticRecord]:
    """Require X's channels (axis 1) to be a multiple of ``divisor``."""
    size = expr_of(x.dims[1], graph.expressions) if (x.rank or 0) >= 2 else None
    if size is None:
        return []
    reason = f"{size} must be a multiple of {divisor} ({why})"
    left = Expr("%", (size, _int(divisor)))
    return [ArithmeticRecord(node.name, node.op, left, "==", _int(0), reason)]


def _top_k(node: Node, graph: Graph, x: Shape) -> list[ArithmeticRecord]:
    """Require an ONNX TopK's axis to hold ``k`` values: onnxruntime refuses less.

    ``k``: a constant input (TopK-10 and later), or TopK-1's attribute (``node.attrs``).

    >>> g = Graph("m.onnx", "onnx", constants={"k": (5,)})
    >>> node = Node("top", "TopK", ("x", "k"), ("v", "i"), axis=-1)
    >>> [(str(r.left), r.relation, str(r.right)) for r in _top_k(node, g, Shape.parse("[1,s]"))]
    [('s', '>=', '5')]
    >>> old = Node("top", "TopK", ("x",), ("v", "i"), axis=-1, attrs=(("k", 3),))
    >>> [(str(r.left), r.relation, str(r.right)) for r in _top_k(old, g, Shape.parse("[1,s]"))]
    [('s', '>=', '3')]
    """
    rank = x.rank or 0
    k = graph.constants.get(node.inputs[1]) if len(node.inputs) > 1 else None
    attribute = dict(node.attrs).get("k")
    if k is None and isinstance(attribute, int):  # TopK-1
        k = (attribute,)
    if graph.format != "onnx" or k is None or len(k) != 1 or not -rank <= node.axis < rank:
        return []
    size = expr_of(x.dims[node.axis % rank], graph.expressions)
    if size is None:
        return []
    reason = f"{size} must be at least {k[0]}: {node.op} takes the {k[0]} largest along it"
    return [ArithmeticRecord(node.name, node.op, size, ">=", _int(k[0]), reason)]


def _split(node: Node, graph: Graph, x: Shape, outputs: Sequence[Shape]) -> list[ArithmeticRecord]:
    """Require a Split's parts to make up its dim (ONNX: ``node.axis``; IR: its axis input)."""
    rank = x.rank or 0
    if graph.format == "openvino":
        given = graph.constants.get(node.inputs[1]) if len(node.inputs) > 1 else None
        axis = given[0] if given is not None and len(given) == 1 else None
    else:
        axis = node.axis
    if axis is None or not -rank <= axis < rank:
        return []
    at = axis % rank
    size = expr_of(x.dims[at], graph.expressions)
    if size is None:
        return []
    parts = [expr_of(s.dims[at], graph.expressions) if s.rank == rank else None for s in outputs]
    if any(p is None for p in parts):
        return []
    exprs = [p for p in parts if p is not None]
    if all(p.op == "int" for p in exprs):
        right = _int(sum(p.value for p in exprs))
        reason = f"{size} must equal {right}, the sum of {node.op}'s sizes"
        return [ArithmeticRecord(node.name, node.op, size, "==", right, reason)]
    if len(set(exprs)) == 1 and exprs[0] == Expr("//", (size, _int(len(exprs)))):
        count = len(exprs)
        reason = f"{size} must be a multiple of {count} ({node.op} into {count} equal parts)"
        left = Expr("%", (size, _int(count)))
        return [ArithmeticRecord(node.name, node.op, left, "==", _int(0), reason)]
    fixed = [p for p in exprs if p.op == "int"]
    if len(fixed) == len(exprs) - 1 and total([*fixed]).op == "int":  # VariadicSplit's -1
        known = total(fixed)
        reason = f"{size} must be at least {known}, the sum of {node.op}'s fixed lengths"
        return [ArithmeticRecord(node.name, node.op, size, ">=", known, reason)]
    # Split-18's num_outputs: ceil-sized parts and a last one of what they leave, which
    # must not be negative (onnxruntime refuses C = 1 in 3 parts: 1, 1 and -1)
    return [
        ArithmeticRecord(
            node.name, node.op, part, ">=", _int(0),
            f"{part} must be at least 0: the part of {size} {node.op} leaves last",
        )
        for part in dict.fromkeys(p for p in exprs if p.symbols)
    ]  # fmt: skip
