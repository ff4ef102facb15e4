"""LSTM, GRU and RNN weights held against X and hidden_size, each rule against a runtime.

Every case builds the node with onnx.helper, runs the valid model in onnxruntime (ONNX's
reference evaluator for ``layout=1``, which onnxruntime refuses), runs the
one-bug copy there (it must fail), and asks bcast: no finding on the valid one, an error at
the node on the other.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import bcast

F = TensorProto.FLOAT
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
HIDDEN, SIZE, BATCH, SEQ = 8, 5, 2, 3


def _model(op: str, cut: str = "", layout: int = 0, directions: int = 1) -> onnx.ModelProto:
    """An ``op`` node on X [seq,batch,5] (layout 0) with every optional input given."""
    g, h, d = GATES[op], HIDDEN, directions
    shapes = {
        "W": (d, g * h, SIZE),
        "R": (d, g * h, h),
        "B": (d, 2 * g * h),
        "initial_h": (BATCH, d, h) if layout else (d, BATCH, h),
        "initial_c": (BATCH, d, h) if layout else (d, BATCH, h),
        "P": (d, 3 * h),
    }
    if cut:
        shapes[cut] = (*shapes[cut][:-1], shapes[cut][-1] - 1)
    rng = np.random.default_rng(0)
    names = ["W", "R", "B", "sequence_lens", "initial_h"]
    names += ["initial_c", "P"] if op == "LSTM" else []
    inits = [
        numpy_helper.from_array(rng.standard_normal(shapes[n]).astype(np.float32), n)
        for n in names
        if n != "sequence_lens"
    ]
    inits.append(numpy_helper.from_array(np.full(BATCH, SEQ, np.int32), "sequence_lens"))
    attrs = {"hidden_size": h, "layout": layout}
    if directions == 2:
        attrs["direction"] = "bidirectional"
    node = helper.make_node(op, ["X", *names], ["Y"], name="rnn", **attrs)
    x = [BATCH, "seq", SIZE] if layout else ["seq", BATCH, SIZE]  # the states fix the batch
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", F, x)],
        [helper.make_tensor_value_info("Y", F, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def _runs(model: onnx.ModelProto, layout: int = 0) -> bool:
    """Run the model in onnxruntime (in ONNX's reference for layout 1, which ORT lacks)."""
    shape = (BATCH, SEQ, SIZE) if layout else (SEQ, BATCH, SIZE)
    feeds = {"X": np.ones(shape, np.float32)}
    try:
        if layout:
            ReferenceEvaluator(model).run(None, feeds)
        else:
            session = ort.InferenceSession(
                model.SerializeToString(), providers=["CPUExecutionProvider"]
            )
            session.run(None, feeds)
    except Exception:
        return False
    return True


CASES = [
    ("LSTM", "B", 0, 1),
    ("LSTM", "W", 0, 1),
    ("LSTM", "R", 0, 1),
    ("LSTM", "P", 0, 1),
    ("LSTM", "initial_c", 0, 1),
    ("LSTM", "B", 0, 2),
    ("GRU", "B", 0, 1),
    ("GRU", "initial_h", 1, 1),
    ("GRU", "R", 0, 2),
    ("RNN", "B", 0, 1),
    ("RNN", "W", 1, 1),
]


@pytest.mark.parametrize(("op", "cut", "layout", "directions"), CASES)
def test_a_weight_one_short_fails_in_onnxruntime_and_is_found_at_its_node(
    op: str, cut: str, layout: int, directions: int
) -> None:
    valid = _model(op, layout=layout, directions=directions)
    assert _runs(valid, layout)
    report = bcast.check(valid)
    assert report.findings == ()
    mutant = _model(op, cut, layout, directions)
    assert not _runs(mutant, layout)
    found = bcast.check(mutant).findings
    assert [(f.node, f.severity.value) for f in found] == [("rnn", "error")]
    assert cut in found[0].reason


def test_initial_states_of_one_batch_make_a_symbolic_batch_a_condition() -> None:
    model = _model("GRU")
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "batch"
    found = bcast.check(model).findings  # sequence_lens [2], initial_h [1,2,8]: batch 2 only
    assert [(f.kind, f.node) for f in found] == [("conditional", "rnn")] * 2
    assert all("batch = 2" in f.reason for f in found)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    session.run(None, {"X": np.ones((SEQ, BATCH, SIZE), np.float32)})
    with pytest.raises(Exception, match=r"sequence_lens must have shape \{3\}"):
        session.run(None, {"X": np.ones((SEQ, 3, SIZE), np.float32)})


def test_a_recurrent_node_with_unknown_weights_claims_nothing() -> None:
    model = _model("LSTM")
    del model.graph.initializer[:]  # every weight becomes an input of unknown shape
    names = ["W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    model.graph.input.extend(helper.make_tensor_value_info(n, F, None) for n in names)
    assert bcast.check(model).findings == ()
