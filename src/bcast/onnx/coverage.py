"""What `bcast verify` runs of an ONNX model, and what it lists as not compared.

Verify runs the broadcasting nodes of the main graph and of If/Loop/Scan bodies
(`bcast.onnx.verify_bodies`). A model-local function is inlined first
(``onnx.inliner.inline_local_functions``), so the nodes of its body are the main graph's and
run like any other. The nodes checked by an operator's own rule (`bcast.models.Rule.OPERATOR`:
quantization scales, ``com.microsoft`` operators) are listed as not compared, each with the
reason: never left out silently.
"""

from __future__ import annotations

from typing import Final

import onnx
import onnx.inliner

__all__ = ["OPERATOR", "inlined"]

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
