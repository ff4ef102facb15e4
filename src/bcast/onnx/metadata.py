"""The validity domain of a model, written back into it: ONNX ``metadata_props``.

So that the next tool that reads the model (a runtime, a converter, a person) is told the
input sizes it runs for: ``bcast.domain`` holds the domain's JSON, ``bcast.dim.NAME`` the
sizes of each input dim as text (``1..64``).
"""

from __future__ import annotations

import json

import onnx

from bcast.models.domain import Domain
from bcast.onnx.reader import load_model

__all__ = ["write_domain_metadata"]

_PREFIX = "bcast."


def write_domain_metadata(source: str, target: str, domain: Domain) -> None:
    """Copy the ONNX model at ``source`` to ``target`` with the domain in its metadata.

    Earlier ``bcast.*`` entries are replaced; the model is otherwise unchanged (its weights
    included: external data files are not copied, and keep their relative locations).

    >>> import tempfile, os
    >>> from onnx import helper, TensorProto
    >>> from bcast.models.domain import Domain
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    >>> m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    >>> folder = tempfile.mkdtemp()
    >>> onnx.save(m, os.path.join(folder, "a.onnx"))
    >>> write_domain_metadata(os.path.join(folder, "a.onnx"), os.path.join(folder, "b.onnx"),
    ...                       Domain())
    >>> [p.key for p in onnx.load(os.path.join(folder, "b.onnx")).metadata_props]
    ['bcast.domain']
    """
    model = load_model(source)
    kept = [p for p in model.metadata_props if not p.key.startswith(_PREFIX)]
    entries = {_PREFIX + "domain": json.dumps(domain.to_json(), sort_keys=True)}
    for dim in domain.dims:
        entries[f"{_PREFIX}dim.{dim.name}"] = dim.text
    onnx.helper.set_model_props(model, {**{p.key: p.value for p in kept}, **entries})
    onnx.save(model, target)
