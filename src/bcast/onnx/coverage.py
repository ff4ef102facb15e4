"""What `bcast verify` runs of an ONNX model, and what it lists as not compared.

Verify runs the broadcasting nodes of the main graph. A model-local function is inlined first
(``onnx.inliner.inline_local_functions``), so the nodes of its body are the main graph's and
run like any other. The broadcasting nodes of If/Loop/Scan bodies, and the nodes checked by
an operator's own rule (`bcast.models.Rule.OPERATOR`: quantization scales, ``com.microsoft``
operators), are listed as not compared, each with the reason: never left out silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

import onnx
import onnx.inliner

from bcast.models import Node
from bcast.models.rules_base import broadcasting

__all__ = ["OPERATOR", "in_bodies", "inlined"]

OPERATOR: Final = (
    "verify runs the broadcasting operators bcast.ops implements; this operator's rule "
    "(scales, biases, com.microsoft shapes) is checked by bcast check only"
)


def inlined(model: onnx.ModelProto) -> onnx.ModelProto:
    """Inline the model-local functions (their nodes become the main graph's), if any."""
    if not model.functions:
        return model
    try:
        return onnx.inliner.inline_local_functions(model)
    except Exception:  # the inliner refusing the model: its functions' nodes are listed
        return model


def in_bodies(nodes: Iterable[Node]) -> Iterator[tuple[Node, str]]:
    """Yield the broadcasting nodes in the bodies of ``nodes`` (and deeper), each with why."""
    for node in nodes:
        for sub in node.subgraphs:
            kind = "function" if not sub.outer_scope else "body"
            why = (
                f"in the {kind} {sub.name}: verify runs the main graph's nodes (a body's "
                "values are not the model's outputs)"
            )
            for inner in sub.graph.nodes:
                if broadcasting(inner):
                    yield inner, why
                yield from in_bodies((inner,))
