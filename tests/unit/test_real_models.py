"""``check`` on real exported models: tiny random-weight BERT, LLaMA, ViT, ResNet, skl2onnx...

The fixtures in ``tests/fixtures/real/`` were made by real exporters (TorchScript, dynamo,
``openvino.convert_model``, skl2onnx) with ``tools/real_models/build.py``. Each mutant holds
one broadcasting bug; ``manifest.json`` gives its node and output axis, known from how it
was made and confirmed by the peers that reject it (their verdicts, measured, are in the
manifest and in ``docs/real-models.md``). None of the expectations below comes from bcast.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import bcast
from bcast.models import Severity

pytest.importorskip("onnx")

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
MANIFEST = json.loads((REAL / "manifest.json").read_text())
FILES = MANIFEST["files"]
ENTRIES = list(FILES.values()) if isinstance(FILES, dict) else FILES

# Valid models with a real latent bug that bcast must keep reporting (not a false alarm):
# BERT's position table has 64 rows. The dynamo export says so in its dims, Min(64, s41); the
# TorchScript export slices the table to the input's length (Slice ends = seq), which bcast
# reads as Min(64, seq). onnxruntime runs sequence length 64 and fails at 65, at these nodes
# (test_the_latent_bug_is_where_onnxruntime_fails below).
# Real conditions of valid models, each confirmed by onnxruntime below: BERT's position
# embeddings cap the sequence at 64; GPT-2's dynamo export gives the attention mask dims of
# their own (s43, s53), and the mask, reshaped to [s72, s43*s53//s72], meets the scores.
SEQ_CAPPED = {
    "bert_dynamo.onnx": ("node_add_18", 1),
    "bert_torchscript.onnx": ("/model/embeddings/Add_1", 1),
    "bert_fixed_mask_batch_torchscript.onnx": ("/model/embeddings/Add_1", 1),
}
LATENT = {
    **{name: [at] for name, at in SEQ_CAPPED.items()},
    "gpt2_dynamo.onnx": [("node_add_168", 3), ("node_add_347", 3)],
    # Image size tied to the 17 position embeddings; mask dims of their own (see test_domain).
    "vit_hw_torchscript.onnx": [("/model/embeddings/Add", 1)],
    "vit_hw_dynamo.onnx": [("node_add_17", 1), ("node_add_181", 1), ("node_add_315", 1)],
    "vit_hw_openvino.xml": [("__module.model.embeddings/aten::add/Add", 1)],
    # The position slice caps seq at 64 (Min(64, input_ids.1), see test_domain).
    "bert_openvino.xml": [("__module.model.embeddings/aten::add/Add_2", 1)],
    # Whisper's 16 positions fit (frames - 1)//2 + 1 only for frames 1, 2, 31, 32.
    "whisper_encoder_torchscript.onnx": [("/model/Add_2", 1)],
    "whisper_encoder_openvino.xml": [("__module.model/aten::add/Add", 1)],
    "bert_mask_dims_torchscript.onnx": [
        ("/model/embeddings/Add_1", 1),
        ("/model/encoder/layer.0/attention/self/Add", 3),
        ("/model/encoder/layer.1/attention/self/Add", 3),
    ],
}


def _needs(entry: dict) -> None:
    if entry["file"].endswith(".xml"):
        pytest.importorskip("openvino")


def _param(entry: dict) -> object:
    return pytest.param(entry, id=entry["file"])


VALID = [_param(e) for e in ENTRIES if e["kind"] == "valid"]
MUTANTS = [_param(e) for e in ENTRIES if e["kind"] == "mutant"]


def test_the_corpus_is_the_one_described() -> None:
    # Every file the manifest names is here, and the corpus is the size the docs describe.
    for entry in ENTRIES:
        assert (REAL / entry["file"]).is_file(), entry["file"]
    assert len(VALID) >= 18 and len(MUTANTS) >= 11


@pytest.mark.parametrize("entry", VALID)
def test_a_valid_model_has_no_error_or_warning_but_its_real_latent_bugs(entry: dict) -> None:
    _needs(entry)
    report = bcast.check(REAL / entry["file"])
    loud = [(f.node, f.axis) for f in report.findings if f.severity is not Severity.INFO]
    expected = LATENT.get(entry["file"], [])
    assert loud == expected, [f.reason for f in report.findings]


@pytest.mark.parametrize("entry", MUTANTS)
def test_every_injected_bug_is_caught_at_its_node_and_axis_without_running(entry: dict) -> None:
    _needs(entry)
    expected = entry["expected"]
    report = bcast.check(REAL / entry["file"])
    errors = [(f.node, f.axis) for f in report.findings if f.severity is Severity.ERROR]
    assert (expected["node"], expected["axis"]) in errors, [f.reason for f in report.findings]
    assert not report.ok


@pytest.mark.parametrize(
    "name",
    [
        "sklearn_mlp_skl2onnx.onnx",
        "vit_torchscript.onnx",
        "clip_vision_torchscript.onnx",
    ],
)
def test_shapes_go_on_where_onnx_inference_stops(name: str) -> None:
    # After ai.onnx.ml Scaler/Normalizer and PyTorch's expand(batch, -1, -1) (a Where over
    # an Equal), ONNX's own inference knows no shape: every broadcasting node is checked
    # anyway, none is left out.
    report = bcast.check(REAL / name)
    assert report.broadcasting > 0
    assert report.unchecked == ()


def test_findings_speak_the_models_own_dim_names() -> None:
    report = bcast.check(REAL / "vit_torchscript__pos_embedding_16.onnx")
    (error,) = report.errors
    assert "[batch,17,32]" in error.reason  # the input's dim name, and 1 CLS + 16 patches


def test_an_unknown_operator_is_counted_and_named_as_where_shapes_stop() -> None:
    # A custom-domain operator (no shape function anywhere) feeds an Add: the Add cannot
    # be checked, and the report says which node and why, instead of "no findings".
    nodes = [
        helper.make_node("Mystery", ["x"], ["m"], domain="com.example", name="mystery"),
        helper.make_node("Add", ["m", "b"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("b", TensorProto.FLOAT, [3], [0.0, 1.0, 2.0])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
    )
    model.ir_version = 8
    report = bcast.check(model)
    assert report.broadcasting == 1
    (unchecked,) = report.unchecked
    assert (unchecked.node, unchecked.op) == ("add", "Add")
    assert "after Mystery 'mystery'" in unchecked.reason
    assert report.coverage() is not None
    assert "1 of 1 broadcasting nodes not checked" in (report.coverage() or "")
    assert report.to_json()["coverage"] == {
        "broadcasting_nodes": 1,
        "unchecked": [{"node": "add", "op": "Add", "reason": unchecked.reason}],
        "unmodelled": [  # issue 37: the operator itself is named, not only what it hides
            {
                "node": "mystery",
                "op": "Mystery",
                "reason": "op com.example.Mystery has no shape rule in bcast (nor in ONNX)",
            }
        ],
    }


def test_a_stale_exporter_claim_does_not_hide_what_the_weights_say() -> None:
    # The dynamo export declares the position embedding [1,Min(64,s41),32] (value_info);
    # the mutant's table is [64,31]. The weights win: the error is at axis 2, 32 vs 31, as
    # ONNX's strict inference and onnxruntime's session both report (manifest).
    model = onnx.load(REAL / "bert_dynamo__pos_embedding_width_31.onnx")
    declared = {v.name for v in model.graph.value_info}
    assert "embedding_2" in declared
    (error,) = bcast.check(model).errors
    assert (error.node, error.axis) == ("node_add_18", 2)
    assert "32 vs 31" in error.reason


def test_nodes_left_unchecked_after_an_error_say_so() -> None:
    # Downstream of the failing bias Add the shapes are unknown: those nodes are counted as
    # not checked, and the reason points at the error, not at a mysterious loss.
    report = bcast.check(REAL / "bert_torchscript__dense_bias_31.onnx")
    (error,) = report.errors
    assert report.unchecked
    assert all(f"the error at Add {error.node!r}" in u.reason for u in report.unchecked)


@pytest.mark.parametrize("name", sorted(SEQ_CAPPED))
def test_the_latent_bug_is_where_onnxruntime_fails(name: str) -> None:
    # The warning says "fails when <seq> > 64" at a node: onnxruntime runs the model at
    # sequence length 64 and fails at 65, naming that node.
    ort = pytest.importorskip("onnxruntime")
    import numpy as np

    node, axis = SEQ_CAPPED[name]
    (warning,) = [f for f in bcast.check(REAL / name).findings if f.severity is Severity.WARNING]
    assert (warning.node, warning.axis) == (node, axis)
    assert "> 64" in warning.reason
    session = ort.InferenceSession(str(REAL / name), providers=["CPUExecutionProvider"])

    def run(seq: int) -> None:
        feeds = {i.name: np.ones((2, seq), np.int64) for i in session.get_inputs()}
        session.run(None, feeds)

    run(64)
    with pytest.raises(Exception, match=re.escape(node)):
        run(65)
