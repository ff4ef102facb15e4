"""The model checker: propagate shapes through a graph and report broadcasting findings.

`check_graph` walks a `Graph` in topological order, applies bcast's rules to every
broadcasting node (`bcast.models.node_checks`) and takes every other node's output shapes
from the peer's own shape inference, which the reader recorded. It returns `Finding` objects:
definite errors, conditions under which a node fails (symbols and intervals), unidirectional
violations that ONNX shape inference does not check, oversized broadcast outputs, and
OpenVINO attribute pitfalls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import replace
from typing import Final

from bcast.core.arithmetic import expr_of, expression_dim
from bcast.core.expressions import Expr
from bcast.core.modes import Mode
from bcast.core.shape import Shape, informative, more_named, more_precise
from bcast.models.condition_sets import never_below as _never_below
from bcast.models.declared import against_declared, unexplained_refusals
from bcast.models.deviations import runtime_deviations
from bcast.models.domain import Imposed
from bcast.models.domain_collect import Record, collect_other
from bcast.models.domain_records import PlanRecord
from bcast.models.domain_solve import solve_domain
from bcast.models.graph import (
    Finding,
    Graph,
    ModelError,
    Node,
    Report,
    Rule,
    Severity,
    Subgraph,
    Unchecked,
    bind_dims,
    bind_expressions,
    topological_order,
)
from bcast.models.lost_dims import lost_operands
from bcast.models.node_checks import check_node
from bcast.models.operator_checks import more_outputs
from bcast.models.provenance import name_sources
from bcast.models.ranges import DimValue, prove_ranges, split_dims
from bcast.models.rules_base import broadcasting as is_broadcasting

__all__ = ["DEFAULT_MAX_ELEMENTS", "check_graph", "propagate_shapes"]

_DYNAMIC: Final = Shape.dynamic()

Derive = Callable[[Node, Mapping[str, Shape]], Sequence[Shape | None] | None]
"""A node's output shapes from the shapes known so far (`propagate_shapes`'s ``derive``)."""
DEFAULT_MAX_ELEMENTS: Final = 2**31
"""Broadcast outputs with more elements than this are reported (``--max-elements``)."""


def _topological(nodes: Sequence[Node], path: str) -> list[Node]:
    """Order nodes so that producers come first (file order among equals); reject cycles."""
    order, stuck = topological_order([n.inputs for n in nodes], [n.outputs for n in nodes])
    if stuck is not None:
        node = nodes[stuck]
        raise ModelError(f"{path}: the graph has a cycle through node {node.name!r} ({node.op})")
    return [nodes[i] for i in order]


def check_graph(
    graph: Graph,
    *,
    dims: Mapping[str, DimValue] | None = None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    progress: Iterable[None] | None = None,
    target: str | None = None,
) -> Report:
    """Propagate shapes through ``graph`` and report every broadcasting finding.

    Parameters
    ----------
    graph : Graph
        A model as a reader produced it.
    dims : mapping of str to int or range, optional
        Values for symbolic dims (``--dim batch=4``); bound symbols are checked as values.
        A range (``(1, 512)``, ``"1..512"``, ``"1.."``) claims every size in it: the
        domain decides the conditions on that dim there (`bcast.models.ranges`).
    max_elements : int, default 2**31
        Broadcast outputs with more elements are reported.
    progress : iterable, optional
        Advanced once per node (the CLI passes a progress bar's ticks).
    target : {"onnxruntime", "openvino", "tract"}, optional
        Also warn where that runtime is known to depart from the specification
        (`bcast.models.deviations`).

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
    >>> from bcast.models import Graph, Node, Rule
    >>> g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[batch]"), "y": Shape((2,))})
    >>> g.nodes.append(Node("add", "Add", ("x", "y"), ("z",), rule=Rule.MULTIDIRECTIONAL))
    >>> [f.reason for f in check_graph(g).findings]
    ['fails unless batch ∈ {1, 2} (axis 0 of x)']
    >>> [f.kind for f in check_graph(g, dims={"batch": 3}).findings]
    ['incompatible']
    """
    points, ranges = split_dims(dims)
    unchecked: list[Unchecked] = []
    records: list[Record] = []
    unmodelled: list[Unchecked] = []
    undecided: list[Imposed] = []
    findings, values = _walk(
        graph,
        points,
        max_elements,
        progress,
        unchecked=unchecked,
        unmodelled=unmodelled,
        undecided=undecided,
        collect=records,
    )
    findings += runtime_deviations(graph, values, target)
    domain = solve_domain(graph, records, bind_expressions(points, graph.expressions))
    domain = replace(domain, undecided=_not_decided(unmodelled, unchecked, undecided))
    failed = {f.node for f in findings if f.severity is Severity.ERROR}
    for r in records:  # a Concat or MatMul that fails at every size: an error at its node
        if isinstance(r, PlanRecord) and r.plan is None and r.node not in failed:
            why = f"no input sizes make this model run: {r.error}"
            findings.append(
                Finding(Severity.ERROR, "empty-domain", r.node, r.op, (), None, None, why)
            )
    if points:  # --dim values: what the model needs of them where values decide it too
        findings += _at_points(graph, points, max_elements, {f.node for f in findings})
    if domain.empty_at and not any(f.severity is Severity.ERROR for f in findings):
        at = domain.empty_at[-1]
        reason = f"no input sizes make this model run: {domain.empty}"
        findings.append(
            Finding(Severity.ERROR, "empty-domain", at.node, at.op, (), None, None, reason)
        )
    report = Report(
        graph.path,
        _count(graph),
        tuple(unexplained_refusals(name_sources(graph, list(dict.fromkeys(findings))))),
        _count(graph, broadcasting=True),
        tuple(unchecked),
        domain,
        tuple(unmodelled),
    )
    return prove_ranges(report, ranges)


def _at_points(
    graph: Graph, points: Mapping[str, int], max_elements: int, reported: Set[str]
) -> list[Finding]:
    """Return an error at each node whose requirement fails at the ``--dim`` values given.

    With the dims bound, an index computed from them (a KV cache's mask row, a Range of
    positions) is a value no shape shows: the domain over the free dims decides it there.
    """
    records: list[Record] = []
    _walk(graph, {}, max_elements, None, quiet=True, collect=records)
    free = solve_domain(graph, records, {})
    given = ", ".join(f"{k}={v}" for k, v in points.items())
    found: dict[str, Finding] = {}
    for at in free.failures(bind_expressions(dict(points), graph.expressions)):
        if at.node not in reported and at.node not in found:
            why = f"fails at {given}: {at.reason}"
            found[at.node] = Finding(Severity.ERROR, "fails-in-range", at.node, at.op, (),
                                     None, at.axis, why)  # fmt: skip
    return list(found.values())


def propagate_shapes(
    graph: Graph,
    *,
    dims: Mapping[str, int] | None = None,
    derive: Derive | None = None,
    over_intervals: bool = False,
    outer: Mapping[str, Shape] | None = None,
) -> dict[str, Shape]:
    """Return the shape of every value of ``graph``, as `check_graph` propagates them.

    ``outer`` holds the enclosing graph's values where ``graph`` is an If, Loop or Scan
    body (`bcast.models.Subgraph`): the body reads them; they are returned with its own.

    ``derive`` gives the output shapes of a node that does not broadcast from the shapes
    known so far (None where it knows none); they fill what the peer's shapes leave unknown
    (with ``over_intervals``, also the peer's unnamed intervals: `more_named`).

    Examples
    --------
    >>> from bcast import Shape
    >>> from bcast.models import Graph, Node, Rule
    >>> g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[N,1]"), "y": Shape((3,))})
    >>> g.nodes.append(Node("add", "Add", ("x", "y"), ("z",), rule=Rule.MULTIDIRECTIONAL))
    >>> str(propagate_shapes(g)["z"]), str(propagate_shapes(g, dims={"N": 5})["z"])
    ('[N,3]', '[5,3]')
    """
    _, values = _walk(
        graph,
        dict(dims or {}),
        DEFAULT_MAX_ELEMENTS,
        None,
        outer,
        quiet=True,
        derive=derive,
        fill=more_named if over_intervals else more_precise,
    )
    return values


def _count(graph: Graph, *, broadcasting: bool = False) -> int:
    """Count the nodes (or the broadcasting nodes) of ``graph`` and of its subgraphs."""
    own = (  # an operator rule counts (a scale, a com.microsoft op), Conv's bias does not
        sum(1 for n in graph.nodes if is_broadcasting(n)) if broadcasting else len(graph.nodes)
    )
    return own + sum(
        _count(s.graph, broadcasting=broadcasting) for n in graph.nodes for s in n.subgraphs
    )


def _why_unknown(
    name: str,
    producers: Mapping[str, Node],
    values: Mapping[str, Shape],
    failed: Set[str],
) -> str:
    """Name the node after which a value's shape is unknown: the first one, walking back."""
    seen: set[str] = set()
    while name not in seen:
        seen.add(name)
        node = producers.get(name)
        if node is None:
            return f"the shape of {name!r} is not known"
        lost = [i for i in node.inputs if i and values.get(i, Shape.dynamic()).rank is None]
        if not lost:
            if node.name in failed:
                return f"shapes unknown after the error at {node.op} {node.name!r}"
            return f"shapes unknown after {node.op} {node.name!r}"
        name = lost[0]
    return f"the shape of {name!r} is not known"


def _walk(
    graph: Graph,
    bound: dict[str, int],
    max_elements: int,
    progress: Iterable[None] | None,
    outer: Mapping[str, Shape] | None = None,
    inputs: Mapping[str, Shape] | None = None,
    *,
    unchecked: list[Unchecked] | None = None,
    unmodelled: list[Unchecked] | None = None,
    undecided: list[Imposed] | None = None,
    quiet: bool = False,
    collect: list[Record] | None = None,
    derive: Derive | None = None,
    fill: Callable[[Shape, Shape], Shape | None] = more_precise,
) -> tuple[list[Finding], dict[str, Shape]]:
    """Check ``graph``'s nodes, then the bodies they run.

    ``outer`` is the enclosing graph's values (If/Loop/Scan bodies see them); ``inputs``
    binds a function body's inputs to its caller's values, over the shapes declared.
    """
    bound = bind_expressions(bound, graph.expressions)  # --dim s41=7 binds Min(64, s41)
    values: dict[str, Shape] = dict(outer or {})
    values.update({k: bind_dims(v, bound) for k, v in graph.shapes.items()})
    values.update(inputs or {})
    targets = {k: bind_dims(v, bound) for k, v in graph.shape_values.items()}
    findings: list[Finding] = list(graph.notes)
    ticks = iter(progress) if progress is not None else None
    nested: list[Subgraph] = []
    failed: set[str] = set()  # nodes with an error finding
    producers = {o: n for n in graph.nodes for o in n.outputs if o}  # where a value is made
    for node in _topological(graph.nodes, graph.path):
        peer = tuple(bind_dims(s, bound) for s in node.output_shapes)
        outputs: tuple[Shape, ...] = peer
        if node.unmodelled and unmodelled is not None:  # listed, never skipped silently
            unmodelled.append(Unchecked(node.name, node.op, node.unmodelled))
        if node.rule is not None:
            if unchecked is not None and is_broadcasting(node):
                lost = [i for i in node.inputs if i and values.get(i, _DYNAMIC).rank is None]
                if lost:
                    why = _why_unknown(lost[0], producers, values, failed)
                    unchecked.append(Unchecked(node.name, node.op, why))
            result, found = check_node(
                node, graph, values, max_elements, targets=targets, quiet=quiet, collect=collect
            )
            findings.extend(
                found
                + lost_operands(node, values, graph, undecided, quiet=quiet, producers=producers)
            )
            if any(f.severity is Severity.ERROR for f in found):
                failed.add(node.name)
            if result is None and unmodelled is not None and _unsized(node, values, peer):
                why = f"its rule does not size the output for these inputs ({node.op}'s layout)"
                unmodelled.append(Unchecked(node.name, node.op, why))
            if result is not None:
                if graph.declared and peer:
                    findings.extend(against_declared(node, result, peer[0]))
                if peer:  # what bcast leaves unknown (an Expand target), the peer may know
                    result = more_precise(peer[0], result) or result
                if _two_way(node):
                    operands = [values.get(i, _DYNAMIC) for i in node.inputs if i]
                    result = _settled(result, operands, graph.expressions)
                outputs = (result, *peer[1:])
            if node.rule is Rule.OPERATOR and len(node.outputs) > 1:  # SkipLayerNorm's sum
                outputs = more_outputs(node, values, outputs)
        own = node.rule is None or node.rule is Rule.OPERATOR  # shapes not from a broadcast
        derived = derive(node, values) if derive is not None and own else None
        if derived:
            outputs = (
                tuple(
                    _filled(outputs[i] if i < len(outputs) else _DYNAMIC, shape, fill)
                    for i, shape in enumerate(derived[: len(node.outputs)])
                )
                + outputs[len(derived) :]
            )
        for index, name in enumerate(node.outputs):
            if name:
                values[name] = outputs[index] if index < len(outputs) else Shape.dynamic()
        if (own or node.op == "Gemm") and collect is not None:  # MatMul, Gemm, Concat, Conv
            collect_other(node, graph, values, collect, producers)
        if own and node.op in ("MatMul", "Concat"):  # what they compare may have been lost
            findings.extend(
                lost_operands(node, values, graph, undecided, quiet=quiet, producers=producers)
            )
        nested.extend(node.subgraphs)
        if ticks is not None:
            next(ticks, None)
    # Bodies last: they may read any value of this graph (outer scope), not only the
    # owner's declared inputs, so every value is propagated first. Their findings are all
    # they give: shape propagation (quiet) leaves them.
    for sub in [] if quiet else nested:
        bindings = {}
        for name, source in sub.bindings:
            shape = values.get(source)
            if shape is not None and shape.rank is not None:
                bindings[name] = shape
        scope = values if sub.outer_scope else None
        body = sub.graph
        if graph.expressions:  # the outer values' expressions, for the body's conditions
            body = replace(body, expressions={**graph.expressions, **body.expressions})
        # A function's body always runs: its requirements are the model's. A branch or a
        # loop body runs only for some data, so what it requires is not (yet) collected.
        into = collect if not sub.outer_scope else None
        findings.extend(
            _walk(
                body,
                bound,
                max_elements,
                None,
                scope,
                bindings,
                unchecked=unchecked,
                unmodelled=unmodelled,
                undecided=undecided,
                collect=into,
            )[0]
        )
        if into is None and undecided is not None:  # the domain says what it did not decide
            undecided.extend(_in_body(sub))
    return findings, values


def _unsized(node: Node, values: Mapping[str, Shape], peer: Sequence[Shape]) -> bool:
    """Tell whether an operator rule left a node's output unknown where nothing else knows it.

    Its inputs' ranks are known (else the node before is to blame) and no peer sized it.
    """
    if node.rule is not Rule.OPERATOR or node.domain in ("", "ai.onnx"):
        return False  # ONNX's own operators: its inference sizes them
    if peer and peer[0].rank is not None:
        return False
    return all(values.get(i, _DYNAMIC).rank is not None for i in node.inputs if i)


def _in_body(sub: Subgraph) -> list[Imposed]:
    """Name the nodes of an If/Loop/Scan body whose requirements the domain leaves out."""
    found = []
    for node in sub.graph.nodes:
        if node.rule is not None:
            reason = (
                f"in {sub.name}, a body that runs for some data only: its requirements are "
                "not collected, so the domain is not decided past it"
            )
            found.append(Imposed(node.name, node.op, None, reason))
    return found  # bodies inside it: their own walk names them


def _not_decided(
    unmodelled: Sequence[Unchecked], unchecked: Sequence[Unchecked], undecided: Sequence[Imposed]
) -> tuple[Imposed, ...]:
    """List the nodes past which the domain is not decided.

    Those not modelled, the broadcasting nodes not checked (their shapes unknown: they
    required nothing of the domain), then the bodies' nodes.
    """
    seen = {i.node for i in undecided}
    listed = [
        Imposed(u.node, u.op, None, f"{what}: {u.reason}")
        for what, found in (("not modelled", unmodelled), ("not checked", unchecked))
        for u in found
        if u.node not in seen
    ]
    return tuple(dict.fromkeys([*listed, *undecided]))


def _settled(result: Shape, operands: Sequence[Shape], expressions: dict[str, Expr]) -> Shape:
    """Name the output dims a numpy broadcast leaves unknown: the largest of its operands'.

    Where the model runs, each output dim is the largest of the operands' dims at its axis.
    ``seq`` against ``Min(64, seq)`` is ``seq`` at every size, so the output is ``seq``, not
    ``?`` (and the dims after it keep their name); decided size by size over one symbol, up
    to a bound past the expressions' constants. Other dims make ``Max(seq, mask_seq)``,
    recorded in ``expressions``, so that what follows (a MatMul against ``seq``) is still
    related to the inputs.
    """
    if result.rank is None or any(s.rank is None for s in operands):
        return result
    if all(informative(d) for d in result.dims):
        return result
    dims = list(result.dims)
    for axis, dim in enumerate(dims):
        if informative(dim):
            continue
        back = result.rank - axis
        column = [s.dims[s.rank - back] for s in operands if s.rank is not None and s.rank >= back]
        kept = [d for d in column if not d.definitely_one()]
        found = [expr_of(d, expressions) for d in kept]
        exprs = [e for e in found if e is not None]
        if not exprs or len(exprs) != len(found):
            continue
        largest = _largest_of(exprs)
        named = {e: d for d, e in reversed(list(zip(kept, exprs, strict=True)))}
        if len(largest) == 1:  # the largest at every size: that operand's dim names it
            dims[axis] = named.get(largest[0]) or expression_dim(largest[0], expressions)
        elif largest:
            dims[axis] = expression_dim(Expr("Max", tuple(largest)), expressions)
    return Shape(dims)


def _largest_of(exprs: Sequence[Expr]) -> list[Expr]:
    """Return the expressions that can be the largest, ``Max`` unpacked.

    Repeats are dropped, and so is one that another is never below (``Min(64, seq)``
    beside ``seq``; of two always equal, the first stays).
    """
    flat = list(dict.fromkeys(a for e in exprs for a in (e.args if e.op == "Max" else (e,))))
    return [
        e
        for i, e in enumerate(flat)
        if not any(
            j != i and _never_below(o, e) and (j < i or not _never_below(e, o))
            for j, o in enumerate(flat)
        )
    ]


def _two_way(node: Node) -> bool:
    """Tell whether ``node`` broadcasts its operands numpy's way (each to the largest)."""
    if node.rule is Rule.MULTIDIRECTIONAL:
        return node.mode is not Mode.NONE
    return node.rule in (Rule.ELEMENTWISE, Rule.SELECT) and node.mode is Mode.NUMPY


def _filled(
    peer: Shape,
    ours: Shape | None,
    fill: Callable[[Shape, Shape], Shape | None] = more_precise,
) -> Shape:
    """Return the peer's shape with what ``ours`` knows where the peer's is unknown."""
    return peer if ours is None else fill(ours, peer) or peer
