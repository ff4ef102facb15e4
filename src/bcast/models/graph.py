"""The format-free graph model: `Graph`, `Node`, `Finding`, `Report`.

The readers (`bcast.onnx.reader`, `bcast.openvino.reader`) turn a model into these small
values; the checker (`bcast.models.checker`) and the verifiers read them. This module
imports neither ``onnx`` nor ``openvino``.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from bcast.core.dim import Dim
from bcast.core.expressions import Expr
from bcast.core.modes import Mode
from bcast.core.pickling import fast_state
from bcast.core.shape import Shape
from bcast.core.text import safe_text
from bcast.models.domain import Domain
from bcast.models.report_html import report_html

__all__ = [
    "Finding",
    "Graph",
    "ModelError",
    "Node",
    "Report",
    "Rule",
    "Severity",
    "Subgraph",
    "Unchecked",
    "bind_dims",
    "topological_order",
    "bind_expressions",
]

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
    PRELU_CHANNEL = "prelu-channel"  # OpenVINO PRelu: a 1-D slope per channel, else as ONNX
    NORMALIZATION = "normalization"  # ONNX LayerNormalization/RMSNormalization: scale, bias to X
    EXPAND = "expand"  # ONNX Expand: bidirectional with the target's values
    BROADCAST = "broadcast"  # OpenVINO Broadcast-1/-3 with a constant target
    OPERATOR = "operator"  # the op's own rule (bcast.models.rules): quantization, com.microsoft

    def __str__(self) -> str:
        return self.value


@fast_state
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
        The PDPD axis as the peer reads it; a Concat's or Gather's axis; a GatherND's
        ``batch_dims``; 1 for a CumSum that is ``exclusive`` (its axis is an input).
    axis_written : bool
        False when a ``pdpd`` node has no axis attribute in the file (OpenVINO reads 0).
    axes_mapping : tuple of int or None
        Broadcast explicit mode: the constant ``axes_mapping``.
    trans_a, trans_b : bool
        Gemm ``transA`` / ``transB``; OpenVINO MatMul ``transpose_a`` / ``transpose_b``.
    allowzero : bool
        Reshape: a 0 in the target is a size of 0, not a copy of the data's dim (ONNX
        ``allowzero=1``, OpenVINO ``special_zero="false"``).
    causal : bool
        OpenVINO ScaledDotProductAttention ``causal``: its attention mask input is ignored.
    output_shapes : tuple of Shape
        The peer's inferred output shapes (``[...]`` where it has none).
    subgraphs : tuple of Subgraph
        Graphs the node runs: If/Loop/Scan bodies, a model-local function's body.
    domain, attrs : str, tuple of (str, int or tuple of int)
        The operator set of ``op`` (``""``: ONNX's); the integer attributes its rule reads.
    unmodelled : str
        Why bcast cannot model the node (``""``: it can); listed in the coverage.
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
    allowzero: bool = False
    causal: bool = False
    output_shapes: tuple[Shape, ...] = ()
    subgraphs: tuple[Subgraph, ...] = field(default=(), compare=False)
    domain: str = ""
    attrs: tuple[tuple[str, int | tuple[int, ...]], ...] = field(default=(), compare=False)
    unmodelled: str = ""


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
    declared : bool
        True when the nodes' ``output_shapes`` are what the file itself declares (an IR's
        port dims, read because OpenVINO refused the model), not a peer's inference: the
        checker then holds every broadcast result against them.
    invented_dims : frozenset of str
        Symbols the reader named itself (an IR's input dims, ``input_ids.1``), not the user.
    expressions : dict of str to Expr
        The expression behind each symbol that a ``dim_param`` wrote as one: the symbol's
        name in the shapes (``Min_64__s41_``) to the parsed text (``Min(64, s41)``).
    initializers : set of str
        The values that are initializers (an ONNX graph's weights): findings name the one
        that decides a failing dim (`bcast.models.provenance`).
    """

    path: str
    format: str
    nodes: list[Node] = field(default_factory=list)
    shapes: dict[str, Shape] = field(default_factory=dict)
    constants: dict[str, tuple[int, ...]] = field(default_factory=dict)
    shape_values: dict[str, Shape] = field(default_factory=dict)
    item_sizes: dict[str, int] = field(default_factory=dict)
    notes: list[Finding] = field(default_factory=list)
    declared: bool = False
    invented_dims: frozenset[str] = frozenset()
    expressions: dict[str, Expr] = field(default_factory=dict)
    initializers: set[str] = field(default_factory=set)


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
        ``not-checked``, ``runtime-deviation`` (``--target``).
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

    @property
    def where(self) -> str:
        """Say where the finding is: ``add (Add), numpy, axis 1`` (mode and axis if known)."""
        return ", ".join(
            [f"{self.node} ({self.op})"]
            + ([self.mode] if self.mode else [])
            + ([f"axis {self.axis}"] if self.axis is not None else [])
        )

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
class Unchecked:
    """A node the checker could not check (its operand shapes are unknown) or not model."""

    node: str
    op: str
    reason: str


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of checking one graph: its node count, its findings, what was not checked.

    ``broadcasting`` counts the broadcasting nodes; ``unchecked`` names those whose operand
    shapes could not be determined (an operand of unknown rank), with the reason.
    ``domain`` is the sizes of the input dims for which the model runs (`Domain`).
    ``unmodelled`` names every node bcast could not model (an operator without a shape
    rule, a body it did not read), at any depth, with the reason: nothing past them is
    decided.
    """

    path: str
    nodes: int
    findings: tuple[Finding, ...]
    broadcasting: int = 0
    unchecked: tuple[Unchecked, ...] = ()
    domain: Domain = field(default_factory=Domain, compare=False)
    unmodelled: tuple[Unchecked, ...] = ()

    @property
    def failed(self) -> bool:
        """True when an error or a warning was found (info alone does not fail)."""
        return any(f.severity is not Severity.INFO for f in self.findings)

    @property
    def ok(self) -> bool:
        """True when nothing but info notes was found: ``bcast check`` would exit 0."""
        return not self.failed

    @property
    def errors(self) -> tuple[Finding, ...]:
        """The findings of severity error."""
        return tuple(f for f in self.findings if f.severity is Severity.ERROR)

    def coverage(self) -> str | None:
        """Say which nodes were not modelled and how many broadcasting nodes not checked.

        None when every node was modelled and every broadcasting node checked.

        >>> r = Report("m.onnx", 3, (), 2, (Unchecked("add", "Add", "shapes unknown"),))
        >>> r.coverage()
        '1 of 2 broadcasting nodes not checked: add (Add): shapes unknown'
        >>> print(Report("m.onnx", 3, (), unmodelled=(Unchecked("f", "Foo", "no rule"),)))
        m.onnx (3 nodes): no findings
          1 of 3 nodes not modelled (nothing past them is decided): f (Foo): no rule
        """
        parts = []
        if self.unmodelled:
            named = "; ".join(f"{u.node} ({u.op}): {u.reason}" for u in self.unmodelled[:5])
            extra = len(self.unmodelled) - 5
            parts.append(
                f"{len(self.unmodelled)} of {self.nodes} nodes not modelled (nothing past them "
                f"is decided): {named}" + (f" (and {extra} more)" if extra > 0 else "")
            )
        if self.unchecked:
            first = self.unchecked[0]
            more = f" (and {len(self.unchecked) - 1} more)" if len(self.unchecked) > 1 else ""
            parts.append(
                f"{len(self.unchecked)} of {self.broadcasting} broadcasting nodes not checked: "
                f"{first.node} ({first.op}): {first.reason}{more}"
            )
        return "; ".join(parts) or None

    def to_json(self) -> dict[str, object]:
        """Return the report as plain JSON data, as ``bcast check --json`` lists each model."""
        return {
            "path": self.path,
            "nodes": self.nodes,
            "findings": [f.to_json() for f in self.findings],
            "coverage": {
                "broadcasting_nodes": self.broadcasting,
                "unchecked": [
                    {"node": u.node, "op": u.op, "reason": u.reason} for u in self.unchecked
                ],
                "unmodelled": [
                    {"node": u.node, "op": u.op, "reason": u.reason} for u in self.unmodelled
                ],
            },
            "domain": self.domain.to_json(),
            "error": None,
        }

    def _heading(self) -> str:
        counts = [
            f"{n} {s.value}{'s' if n != 1 and s is not Severity.INFO else ''}"
            for s in Severity
            if (n := sum(1 for f in self.findings if f.severity is s))
        ]
        nodes = f"{self.nodes} node{'' if self.nodes == 1 else 's'}"
        return f"{self.path} ({nodes}): {', '.join(counts) or 'no findings'}"

    def __str__(self) -> str:
        """Write the report as ``bcast check`` does: its heading, then a block per finding.

        >>> print(Report("m.onnx", 3, ()))
        m.onnx (3 nodes): no findings
        """
        lines = [self._heading()]
        coverage = self.coverage()
        if coverage is not None:
            lines.append(f"  {coverage}")
        for f in self.findings:
            lines.append(f"  {f.severity.value}[{f.kind}] {f.where}")
            if f.inputs:
                lines.append("    inputs: " + "; ".join(f"{n or '-'} {s}" for n, s in f.inputs))
            lines.append(f"    {f.reason}")
            lines.extend(f"      {row}".rstrip() for row in f.picture)
        return "\n".join(safe_text(line) for line in lines)  # model text shown escaped

    def to_html(self) -> str:
        """Return the report as an HTML fragment: summary, findings drawn as tables, domain.

        Each finding's operands are a table (stretched cells shaded, the failing axis
        marked, as `Plan` and `BroadcastError` draw them); each input dim's accepted sizes
        are a bar (`bcast.models.report_html`).

        >>> "<pre>" in Report("m.onnx", 3, ()).to_html()
        False
        """
        return "\n".join(safe_text(line) for line in report_html(self).split("\n"))

    def _repr_html_(self) -> str:
        return self.to_html()


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


def bind_expressions(dims: Mapping[str, int], expressions: Mapping[str, Expr]) -> dict[str, int]:
    """Add to ``dims`` the value of every expression whose free symbols ``dims`` all binds.

    A value the user gave for the expression's own name wins; an expression without a
    non-negative integer value there (a division by zero, ``s0 - 1`` at ``s0 = 0``) stays
    unbound.

    Examples
    --------
    >>> from bcast.core.expressions import parse_expression
    >>> found = {"Min_64__s41_": parse_expression("Min(64, s41)")}
    >>> bind_expressions({"s41": 65}, found)
    {'s41': 65, 'Min_64__s41_': 64}
    >>> bind_expressions({"batch": 2}, found)
    {'batch': 2}
    """
    bound = dict(dims)
    for name, expr in expressions.items():
        if name not in bound:
            value = expr.evaluate(dims)
            if value is not None and value >= 0:
                bound[name] = value
    return bound


def topological_order(
    inputs: Sequence[Sequence[str]], outputs: Sequence[Sequence[str]]
) -> tuple[list[int], int | None]:
    """Order nodes so that producers come first (file order among equals).

    ``inputs[i]`` and ``outputs[i]`` are node ``i``'s value names (``""``: absent). Returns
    the order (node indices) and, when the nodes depend on each other in a circle, the
    index of one node on it (else None); the order then holds only the nodes before it.

    >>> topological_order([["b"], ["x"]], [["y"], ["b"]])
    ([1, 0], None)
    >>> topological_order([["b"], ["a"]], [["a"], ["b"]])
    ([], 0)
    """
    producer: dict[str, int] = {}
    for index, names in enumerate(outputs):
        for out in names:
            if out:
                producer[out] = index
    waiting = [0] * len(inputs)
    users: list[list[int]] = [[] for _ in inputs]
    for index, names in enumerate(inputs):
        for name in set(names):
            source = producer.get(name)
            if name and source is not None:
                waiting[index] += 1
                users[source].append(index)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for user in users[index]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) < len(inputs):
        return order, next(i for i, count in enumerate(waiting) if count > 0)
    return order, None
