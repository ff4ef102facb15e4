"""ONNX's shape inference as the reader runs it: probes for shape values, facts before claims.

`infer` runs ``onnx.shape_inference`` with data propagation and makes the propagated values
of Expand targets visible (probes); `infer_with_claims` runs it on the weights' facts first,
and takes from the file's own ``value_info`` only what the facts leave unknown.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Set
from typing import Final

import onnx

from bcast.models.isolation import IsolationError
from bcast.onnx._integrity import graphs
from bcast.onnx.peer import infer_isolated
from bcast.onnx.protos import DEFAULT_DOMAINS, invented, read_opsets

__all__ = ["infer", "infer_with_claims"]

_PROBE: Final = "bcast::probe"  # not a name exporters write: ':' is rare, '::' rarer


def infer(model: onnx.ModelProto) -> tuple[onnx.ModelProto | None, dict[str, str]]:
    """Run ONNX's shape inference; also return ``{target: probe}`` for Expand targets.

    ONNX propagates the values of shape tensors (``data_prop=True``) but keeps them to
    itself. A probe ``Expand(scalar, target)`` makes them visible: its inferred output
    shape is the target's value, symbols included. The probes are removed again before
    this returns; the model is left as it came.
    """
    probes: dict[str, str] = {}
    added: list[tuple[onnx.GraphProto, int]] = []
    counter = itertools.count()
    if read_opsets(model.opset_import).get("", 0) >= 8:  # Expand exists from opset 8
        for graph in list(graphs(model.graph)):
            size = len(graph.node)
            if _add_probes(graph, probes, counter):
                added.append((graph, size))
    try:
        return infer_isolated(model), probes
    except IsolationError:  # a crash, a timeout, memory exhausted: the model is unusable
        raise
    except Exception:  # any failure of the peer means "no peer shapes"
        return None, probes
    finally:
        for graph, size in added:
            del graph.node[size:]


def infer_with_claims(
    model: onnx.ModelProto, known: Set[str] = frozenset(), taken: set[str] | None = None
) -> tuple[onnx.ModelProto | None, dict[str, str]]:
    """Run `_infer` on the weights' facts, keeping what only the file's claims know.

    The main graph's ``value_info`` (an exporter's claims) is set aside for one run, but for
    the entries named in ``known`` (bcast's own, from an earlier round): ONNX then derives
    the shapes from the inputs and the weights. The graph outputs' declared symbols are
    claims too (a KV cache's ``present`` declared ``total`` long, which onnxruntime does not
    hold the run to): ONNX would type the value and what follows by them. Where the claims
    know more (symbols, an exporter's expressions), they are merged in afterwards: a claim
    never overrides a fact. ``taken`` receives the names of the values a claim gave a dim
    the facts leave unknown (bcast's own rules may size them from the inputs).
    """
    everything = list(model.graph.value_info)
    claims = [v for v in everything if v.name not in known]
    outputs = [o.SerializeToString() for o in model.graph.output]
    del model.graph.value_info[:]
    model.graph.value_info.extend(v for v in everything if v.name in known)
    for output in model.graph.output:  # a graph output's declared symbols are claims too
        if output.name not in known and output.type.HasField("tensor_type"):
            for dim in output.type.tensor_type.shape.dim:
                if dim.HasField("dim_param"):
                    dim.ClearField("dim_param")
    try:
        facts, probes = infer(model)
    finally:
        del model.graph.value_info[:]
        model.graph.value_info.extend(everything)
        for output, saved in zip(model.graph.output, outputs, strict=True):
            output.ParseFromString(saved)
    if facts is None:
        return infer(model)
    for fact, claim in zip(facts.graph.output, model.graph.output, strict=False):
        if fact.name == claim.name and claim.type.HasField("tensor_type"):
            _merge_claim(fact.type.tensor_type, claim.type.tensor_type)
    derived = {v.name: v for v in facts.graph.value_info}
    for claim in claims:
        if not claim.type.HasField("tensor_type"):
            continue
        fact = derived.get(claim.name)
        if fact is None:
            facts.graph.value_info.append(claim)
            filled = claim.type.tensor_type.HasField("shape")
        else:
            filled = _merge_claim(fact.type.tensor_type, claim.type.tensor_type)
        if filled and taken is not None:
            taken.add(claim.name)
    return facts, probes


def _merge_claim(fact: onnx.TypeProto.Tensor, claim: onnx.TypeProto.Tensor) -> bool:
    """Fill the dims the facts leave unknown from the claim's (as `merge_claims` does).

    A fact is a static dim or a symbol the inference carried from the inputs: a claim
    overrides neither (a dynamo export claims ``[T, 1, 32]`` for a projection whose batch
    the inputs give as ``s77``, and onnxruntime runs it at any batch). True where the
    claim gave a dim.
    """
    if not fact.elem_type:
        fact.elem_type = claim.elem_type
    if not claim.HasField("shape"):
        return False
    if not fact.HasField("shape") or len(fact.shape.dim) != len(claim.shape.dim):
        if not fact.HasField("shape"):
            fact.shape.CopyFrom(claim.shape)
            return True
        return False
    filled = False
    for mine, theirs in zip(fact.shape.dim, claim.shape.dim, strict=True):
        if mine.HasField("dim_value") or (
            mine.HasField("dim_param") and not invented(mine.dim_param)
        ):
            continue  # a fact: a claim never overrides it
        if theirs.HasField("dim_value") or (
            theirs.HasField("dim_param") and not invented(theirs.dim_param)
        ):
            mine.CopyFrom(theirs)
            filled = True
    return filled


def _add_probes(graph: onnx.GraphProto, probes: dict[str, str], counter: Iterator[int]) -> bool:
    known = {t.name for t in graph.initializer}
    known.update(n.output[0] for n in graph.node if n.op_type == "Constant" and n.output)
    wanted = [
        n.input[1]
        for n in graph.node
        if n.op_type == "Expand"
        and n.domain in DEFAULT_DOMAINS
        and len(n.input) > 1
        and n.input[1]
        and n.input[1] not in known
        and n.input[1] not in probes
    ]
    if not wanted:
        return False
    scalar = f"{_PROBE}{next(counter)}"
    constant = graph.node.add(op_type="Constant", output=[scalar])  # a float32 zero
    constant.attribute.add(name="value", type=onnx.AttributeProto.TENSOR).t.CopyFrom(
        onnx.TensorProto(data_type=onnx.TensorProto.FLOAT, raw_data=bytes(4))
    )
    for target in dict.fromkeys(wanted):
        probes[target] = f"{_PROBE}{next(counter)}"
        graph.node.add(op_type="Expand", input=[scalar, target], output=[probes[target]])
    return True
