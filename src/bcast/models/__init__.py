"""Models: the format-free graph, the checker, and the verification model.

The readers of `bcast.onnx` and `bcast.openvino` produce a `Graph`; `check_graph` reports
its broadcasting findings; `bcast.models.verification` holds what both verifiers share.

>>> import bcast
>>> from bcast.models import Graph, Node, Rule, check_graph
>>> g = Graph("m.onnx", "onnx", shapes={"x": bcast.Shape((2,)), "y": bcast.Shape((3,))})
>>> g.nodes.append(Node("add", "Add", ("x", "y"), ("z",), rule=Rule.MULTIDIRECTIONAL))
>>> check_graph(g).findings[0].kind
'incompatible'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
)

__all__ = [
    # the graph
    "Graph",
    "Node",
    "Rule",
    "Subgraph",
    # findings
    "Finding",
    "Report",
    "Severity",
    "Unchecked",
    "ModelError",
    # checking
    "DEFAULT_MAX_ELEMENTS",
    "bind_dims",
    "bind_expressions",
    "check_graph",
    "propagate_shapes",
]

if TYPE_CHECKING:
    from bcast.models.checker import DEFAULT_MAX_ELEMENTS, check_graph, propagate_shapes


def __getattr__(name: str) -> Any:
    """Import the checker when it is first used, not with the package.

    The worker process that reads models imports `bcast.models.isolation`, and so this
    package, without needing the checker.
    """
    if name in ("DEFAULT_MAX_ELEMENTS", "check_graph", "propagate_shapes"):
        value = getattr(importlib.import_module("bcast.models.checker"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


for _cls in (Finding, Graph, ModelError, Node, Report, Rule, Severity, Subgraph, Unchecked):
    _cls.__module__ = __name__  # shown by their public path: bcast.models.ModelError
del _cls
