"""The model checker: propagate shapes through a graph and report broadcasting findings.

The readers (`bcast.onnx.reader`, `bcast.openvino.reader`) turn a model into the small graph
IR of this module: `Graph` and `Node`. `check_graph` walks the graph in topological order,
applies bcast's rules (`bcast.plan`) to every broadcasting node and takes every other node's
output shapes from the peer's own shape inference, which the reader recorded. It returns
`Finding` objects: definite errors, conditions under which a node fails (symbols and
intervals), unidirectional violations that ONNX shape inference does not check, oversized
broadcast outputs, and OpenVINO attribute pitfalls.

This module imports neither ``onnx`` nor ``openvino``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from bcast.dim import Dim
from bcast.modes import Mode
from bcast.shape import Shape

__all__ = [
    "DEFAULT_MAX_ELEMENTS",
    "Finding",
    "Graph",
    "ModelError",
    "Node",
    "Report",
    "Rule",
    "Severity",
    "Subgraph",
    "bind_dims",
    "check_graph",
    "propagate_shapes",
]

DEFAULT_MAX_ELEMENTS = 2**31
"""Broadcast outputs with more elements than this are reported (``--max-elements``)."""

_UNKNOWN = Dim.unknown()


class ModelError(Exception):
    """A model that cannot be read: not a model, truncated, unsafe, or inconsistent.

    The message is one line, fit to print after ``bcast: ``.
    """


class Severity(str, Enum):
    """How serious a finding is."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    def __str__(self) -> str:
        return self.value


class Rule(str, Enum):
    """How a node broadcasts its inputs (the checker's dispatch key)."""

    MULTIDIRECTIONAL = "multidirectional"  # ONNX Add..Where, Max/Min/Sum/Mean (mode: numpy/none)
    ELEMENTWISE = "elementwise"  # OpenVINO auto_broadcast; ONNX opset <= 6 `broadcast`
    SELECT = "select"  # OpenVINO Select(cond, then, else)
    GEMM = "gemm"  # ONNX Gemm: C unidirectional to (M, N) (mode none: opset <= 6, broadcast=0)
    PRELU = "prelu"  # ONNX PRelu: slope unidirectional to X
    NORMALIZATION = "normalization"  # ONNX LayerNormalization/RMSNormalization: scale, bias to X
    EXPAND = "expand"  # ONNX Expand: bidirectional with the target's values
    BROADCAST = "broadcast"  # OpenVINO Broadcast-1/-3 with a constant target

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a model, as the checker sees it.

    Attributes
    ----------
    name, op : str
        The node's name (or a generated one) and its operator type.
    inputs, outputs : tuple of str
        Value names; ``""`` is an absent optional input.
    rule : Rule or None
        How the node broadcasts; None for a node whose shapes come from the peer.
    mode : Mode or None
        OpenVINO ``auto_broadcast`` / Broadcast mode (element-wise, Select, Broadcast).
    axis : int
        The PDPD axis as the peer reads it.
    axis_written : bool
        False when a ``pdpd`` node has no axis attribute in the file (OpenVINO reads 0).
    axes_mapping : tuple of int or None
        Broadcast explicit mode: the constant ``axes_mapping``.
    trans_a, trans_b : bool
        Gemm ``transA`` / ``transB``.
    output_shapes : tuple of Shape
        The peer's inferred output shapes (``[...]`` where it has none).
    subgraphs : tuple of Subgraph
        Graphs the node runs: If/Loop/Scan bodies, a model-local function's body.
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    rule: Rule | None = None
    mode: Mode | None = None
    axis: int = -1
    axis_written: bool = True
    axes_mapping: tuple[int, ...] | None = None
    trans_a: bool = False
    trans_b: bool = False
    output_shapes: tuple[Shape, ...] = ()
    subgraphs: tuple[Subgraph, ...] = field(default=(), compare=False)


@dataclass(slots=True)
class Graph:
    """A model reduced to what the checker needs.

    Attributes
    ----------
    path : str
        Where the model came from (for reports).
    format : str
        ``"onnx"`` or ``"openvino"``.
    nodes : list of Node
        In file order; `check_graph` sorts them topologically.
    shapes : dict of str to Shape
        Known shapes of graph inputs, initializers and constants.
    constants : dict of str to tuple of int
        Values of small integer constants (shape targets, axes_mapping).
    shape_values : dict of str to Shape
        Values of shape tensors computed in the graph (``Shape`` → ``Concat`` → ``Expand``),
        as the peer's data propagation gives them; symbols stay symbols.
    item_sizes : dict of str to int
        Bytes per element of values whose type is known.
    notes : list of Finding
        Findings the reader made itself (a peer refusing the model, for example).
    """

    path: str
    format: str
    nodes: list[Node] = field(default_factory=list)
    shapes: dict[str, Shape] = field(default_factory=dict)
    constants: dict[str, tuple[int, ...]] = field(default_factory=dict)
    shape_values: dict[str, Shape] = field(default_factory=dict)
    item_sizes: dict[str, int] = field(default_factory=dict)
    notes: list[Finding] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Subgraph:
    """A graph that a node runs: a control-flow body or a model-local function's body.

    Attributes
    ----------
    name : str
        Its path (``if_node/then_branch``); its nodes' names start with it.
    graph : Graph
        The body; its ``shapes`` hold the body's declared inputs.
    bindings : tuple of (str, str)
        ``(inner, outer)`` pairs: a function's formal input and the caller's value.
    outer_scope : bool
        True when the body sees the enclosing graph's values (If, Loop, Scan); a function's
        body sees only its inputs.
    """

    name: str
    graph: Graph
    bindings: tuple[tuple[str, str], ...] = ()
    outer_scope: bool = True


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the checker reports about one node.

    Attributes
    ----------
    severity : Severity
    kind : str
        A stable identifier: ``incompatible``, ``conditional``, ``unidirectional``,
        ``size``, ``pdpd-default-axis``, ``axes-mapping-duplicates``,
        ``pdpd-trailing-ones``, ``pdpd-one-against-zero``, ``peer-rejects``,
        ``not-checked``.
    node, op : str
    inputs : tuple of (str, Shape)
        The broadcast operands: value name and shape.
    mode : str or None
        The rule set applied.
    axis : int or None
        The output axis concerned (non-negative), if one is.
    reason : str
        Plain-language explanation.
    picture : tuple of str
        The operands as the mode aligns them, with a caret under ``axis``.
    """

    severity: Severity
    kind: str
    node: str
    op: str
    inputs: tuple[tuple[str, Shape], ...]
    mode: str | None
    axis: int | None
    reason: str
    picture: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """Return the finding as plain JSON data (shapes in the text form)."""
        return {
            "severity": self.severity.value,
            "kind": self.kind,
            "node": self.node,
            "op": self.op,
            "inputs": [{"name": n, "shape": str(s)} for n, s in self.inputs],
            "mode": self.mode,
            "axis": self.axis,
            "reason": self.reason,
            "picture": "\n".join(self.picture),
        }


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of checking one graph: its node count and its findings."""

    path: str
    nodes: int
    findings: tuple[Finding, ...]

    @property
    def failed(self) -> bool:
        """True when an error or a warning was found (info alone does not fail)."""
        return any(f.severity is not Severity.INFO for f in self.findings)


# -- binding symbols -----------------------------------------------------------------------


def bind_dims(shape: Shape, dims: Mapping[str, int]) -> Shape:
    """Replace symbols named in ``dims`` by their values.

    Examples
    --------
    >>> from bcast import Shape
    >>> str(bind_dims(Shape.parse("[batch,seq,4]"), {"batch": 2}))
    '[2,seq,4]'
    """
    if not dims or shape.rank is None:
        return shape
    if not any(d.name in dims for d in shape.dims if d.name is not None):
        return shape
    return Shape(
        Dim(dims[d.name]) if d.name is not None and d.name in dims else d for d in shape.dims
    )


# -- the walk ------------------------------------------------------------------------------


def _topological(nodes: Sequence[Node], path: str) -> list[Node]:
    """Order nodes so that producers come first (file order among equals); reject cycles."""
    producer: dict[str, int] = {}
    for index, node in enumerate(nodes):
        for out in node.outputs:
            if out:
                producer[out] = index
    waiting = [0] * len(nodes)
    users: list[list[int]] = [[] for _ in nodes]
    for index, node in enumerate(nodes):
        for name in set(node.inputs):
            source = producer.get(name)
            if name and source is not None:
                waiting[index] += 1
                users[source].append(index)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[Node] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(nodes[index])
        for user in users[index]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) < len(nodes):
        stuck = next(nodes[i] for i, count in enumerate(waiting) if count > 0)
        raise ModelError(f"{path}: the graph has a cycle through node {stuck.name!r} ({stuck.op})")
    return order


def check_graph(
    graph: Graph,
    *,
    dims: Mapping[str, int] | None = None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    progress: Iterable[None] | None = None,
) -> Report:
    """Propagate shapes through ``graph`` and report every broadcasting finding.

    Parameters
    ----------
    graph : Graph
        A model as a reader produced it.
    dims : mapping of str to int, optional
        Values for symbolic dims (``--dim batch=4``); bound symbols are checked as values.
    max_elements : int, default 2**31
        Broadcast outputs with more elements are reported.
    progress : iterable, optional
        Advanced once per node (the CLI passes a progress bar's ticks).

    Returns
    -------
    Report

    Raises
    ------
    ModelError
        If the graph has a cycle.

    Examples
    --------
    >>> from bcast import Shape
    >>> g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[batch]"), "y": Shape((2,))})
    >>> g.nodes.append(Node("add", "Add", ("x", "y"), ("z",), rule=Rule.MULTIDIRECTIONAL))
    >>> [f.reason for f in check_graph(g).findings]
    ['fails unless batch ∈ {1, 2} (axis 0 of x)']
    >>> [f.kind for f in check_graph(g, dims={"batch": 3}).findings]
    ['incompatible']
    """
    findings, _ = _walk(graph, dict(dims or {}), max_elements, progress)
    return Report(graph.path, _count(graph), tuple(findings))


def propagate_shapes(graph: Graph, *, dims: Mapping[str, int] | None = None) -> dict[str, Shape]:
    """Return the shape of every value of ``graph``, as `check_graph` propagates them.

    Examples
    --------
    >>> from bcast import Shape
    >>> g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[N,1]"), "y": Shape((3,))})
    >>> g.nodes.append(Node("add", "Add", ("x", "y"), ("z",), rule=Rule.MULTIDIRECTIONAL))
    >>> str(propagate_shapes(g)["z"]), str(propagate_shapes(g, dims={"N": 5})["z"])
    ('[N,3]', '[5,3]')
    """
    _, values = _walk(graph, dict(dims or {}), DEFAULT_MAX_ELEMENTS, None)
    return values


def _count(graph: Graph) -> int:
    """Count the nodes of ``graph`` and of every subgraph it runs."""
    return len(graph.nodes) + sum(_count(s.graph) for n in graph.nodes for s in n.subgraphs)


def _walk(
    graph: Graph,
    bound: dict[str, int],
    max_elements: int,
    progress: Iterable[None] | None,
    outer: Mapping[str, Shape] | None = None,
    inputs: Mapping[str, Shape] | None = None,
) -> tuple[list[Finding], dict[str, Shape]]:
    """Check ``graph``'s nodes, then the bodies they run.

    ``outer`` is the enclosing graph's values (If/Loop/Scan bodies see them); ``inputs``
    binds a function body's inputs to its caller's values, over the shapes declared.
    """
    # Imported here: the per-rule checks import this module's types (no import cycle).
    from bcast._node_checks import check_node

    values: dict[str, Shape] = dict(outer or {})
    values.update({k: bind_dims(v, bound) for k, v in graph.shapes.items()})
    values.update(inputs or {})
    targets = {k: bind_dims(v, bound) for k, v in graph.shape_values.items()}
    findings: list[Finding] = list(graph.notes)
    ticks = iter(progress) if progress is not None else None
    nested: list[Subgraph] = []
    for node in _topological(graph.nodes, graph.path):
        peer = tuple(bind_dims(s, bound) for s in node.output_shapes)
        outputs: tuple[Shape, ...] = peer
        if node.rule is not None:
            result, found = check_node(node, graph, values, max_elements, targets=targets)
            findings.extend(found)
            if result is not None:
                outputs = (result, *peer[1:])
        for index, name in enumerate(node.outputs):
            if name:
                values[name] = outputs[index] if index < len(outputs) else Shape.dynamic()
        nested.extend(node.subgraphs)
        if ticks is not None:
            next(ticks, None)
    # Bodies last: they may read any value of this graph (outer scope), not only the
    # owner's declared inputs, so every value is propagated first.
    for sub in nested:
        bindings = {}
        for name, source in sub.bindings:
            shape = values.get(source)
            if shape is not None and shape.rank is not None:
                bindings[name] = shape
        scope = values if sub.outer_scope else None
        findings.extend(_walk(sub.graph, bound, max_elements, None, scope, bindings)[0])
    return findings, values
