"""The validity domain (issue 17), proved by running.

For the real fixture with a known limit (``bert_dynamo.onnx``: the 64-row position table
caps the sequence) and small models built here (a ViT-like image size fixed by a position
embedding, an attention mask with its own symbols, a batch fixed by a constant, MatMul,
Concat and Reshape), points inside and just outside the domain are run in onnxruntime: the
expected outcome is onnxruntime's. Inside must run; outside must fail at the node the
domain names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import bcast
from bcast.cli import main

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
F = TensorProto.FLOAT


def _run(model: object, feeds: dict[str, np.ndarray]) -> str | None:
    """Run ``model`` (path or ModelProto) in onnxruntime; None if it runs, else the error."""
    data = model if isinstance(model, str) else model.SerializeToString()
    options = ort.SessionOptions()
    options.log_severity_level = 4
    # Unoptimised, so that an error names the model's node (not a fused "conv2d_nchwc").
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        session.run(None, feeds)
    except Exception as err:  # onnxruntime's own error types
        return str(err)
    return None


def _agrees(model: object, domain: bcast.models.domain.Domain, point: dict, feeds: dict) -> None:
    """bcast's verdict at ``point`` is onnxruntime's, and names the node it fails at.

    Where several nodes fail that do not depend on each other, onnxruntime's execution
    order picks the one it reaches: it must be one bcast names (`Domain.failures`).
    """
    failure = domain.first_failure(point)
    error = _run(model, feeds)
    if failure is None:
        assert error is None, f"inside the domain at {point}, onnxruntime failed: {error}"
    else:
        assert error is not None, f"outside the domain at {point} ({failure}), but it ran"
        named = [
            f"Name:'{f.node}'" in error or f"({f.node})" in error for f in domain.failures(point)
        ]
        assert any(named), error


def _model(nodes, inputs, outputs, inits=(), value_info=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits), value_info=value_info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _const(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


# -- the real fixture with a known limit ---------------------------------------------------


def test_bert_dynamo_runs_for_seq_up_to_64_and_fails_at_the_position_add() -> None:
    path = str(REAL / "bert_dynamo.onnx")
    domain = bcast.check(path).domain
    seq = domain.dim("s41")
    assert seq is not None and seq.text == "1..64"
    assert [i.node for i in seq.imposed] == ["node_add_18"]
    assert domain.dim("s18").text == "any"
    # The mask has a batch of its own, s43, read by a GatherND: a row per sequence.
    assert [r.text for r in domain.relations] == ["s18 must be at most s43"]
    for s, mask_batch in [(1, 2), (63, 2), (64, 2), (65, 2), (100, 2), (8, 1), (8, 3)]:
        ids = np.random.default_rng(s).integers(0, 100, (2, s), dtype=np.int64)
        feeds = {
            "input_ids": ids,
            "attention_mask": np.ones((mask_batch, s), np.int64),
            "token_type_ids": np.zeros((2, s), np.int64),
        }
        _agrees(path, domain, {"s18": 2, "s41": s, "s43": mask_batch}, feeds)


def _ids(batch: int, seq: int) -> np.ndarray:
    return np.random.default_rng(seq).integers(0, 100, (batch, seq), dtype=np.int64)


def test_gpt2_dynamo_ties_its_attention_mask_and_caps_seq_at_its_position_table() -> None:
    # The dynamo exporter gives the mask dims of their own (s43, s53); GPT-2 reshapes the
    # mask to [s72, s43*s53//s72] and adds it to the [s72,2,s70,s70] scores; the positions
    # Range(0, s70) index a table of 64 rows. onnxruntime decides every point.
    path = str(REAL / "gpt2_dynamo.onnx")
    domain = bcast.check(path).domain
    seq = domain.dim("s70")
    assert seq is not None and seq.text == "1..64"
    assert [i.node for i in seq.imposed] == ["node_embedding_1"]
    texts = {r.text: [i.node for i in r.imposed] for r in domain.relations}
    assert texts["s70, s43*s53//s72 are equal (or 1)"] == ["node_add_168", "node_add_347"]
    assert texts["s43*s53 must equal s72*(s43*s53//s72)"] == ["node_view_1"]
    points = [(2, 8, 2, 8), (2, 8, 2, 5), (2, 8, 1, 8), (2, 8, 2, 1), (2, 8, 1, 16)]
    points += [(2, 8, 3, 5), (2, 8, 3, 8), (1, 64, 1, 64), (1, 65, 1, 65), (3, 4, 1, 12)]
    for batch, s, mask_batch, mask_seq in points:
        feeds = {
            "input_ids": _ids(batch, s),
            "attention_mask": np.ones((mask_batch, mask_seq), np.int64),
        }
        point = {"s72": batch, "s70": s, "s43": mask_batch, "s53": mask_seq}
        _agrees(path, domain, point, feeds)


def test_gpt2_torchscript_caps_seq_at_the_position_gather() -> None:
    path = str(REAL / "gpt2_torchscript.onnx")
    domain = bcast.check(path).domain
    seq = domain.dim("seq")
    assert seq is not None and seq.text == "1..64"
    assert [i.node for i in seq.imposed] == ["/model/wpe/Gather"]
    for s in (1, 64, 65):
        feeds = {"input_ids": _ids(2, s), "attention_mask": np.ones((2, s), np.int64)}
        _agrees(path, domain, {"batch": 2, "seq": s}, feeds)


@pytest.mark.parametrize("seq", [64, 65])
def test_check_with_seq_given_holds_the_position_gather_to_its_table(seq: int) -> None:
    # With every dim given, the Range of positions is static: its 65 rows of a 64-row table
    # are an error at the Gather, as onnxruntime fails there; 64 runs and is clean.
    path = str(REAL / "gpt2_torchscript.onnx")
    report = bcast.check(path, dims={"batch": 2, "seq": seq})
    feeds = {"input_ids": _ids(2, seq), "attention_mask": np.ones((2, seq), np.int64)}
    failed = _run(path, feeds)
    assert (failed is None) == (seq == 64)
    assert [(f.node, f.severity.value) for f in report.errors] == (
        [] if seq == 64 else [("/model/wpe/Gather", "error")]
    )
    if seq == 65:
        assert report.errors[0].reason.startswith("fails at batch=2, seq=65: positions 0..")
        assert "index a table of 64 rows" in report.errors[0].reason


def test_check_with_the_kv_cache_dims_given_holds_the_mask_rows_to_past_plus_seq() -> None:
    # GPT-2 with past_key_values (tests/fixtures/deployed): the mask's rows are read at
    # past + seq; onnxruntime runs total 8 and 9 and fails at 7 for past 5, seq 3.
    path = str(REAL.parent / "deployed" / "gpt2_kv_torchscript.onnx")
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for total in (7, 8, 9):
        feeds = {}
        for i in session.get_inputs():
            dims = {"batch": 2, "seq": 3, "past": 5, "total": total}
            shape = [d if isinstance(d, int) else dims[d] for d in i.shape]
            kind = np.int64 if "int64" in i.type else np.float32
            feeds[i.name] = np.ones(shape, kind)
        try:
            session.run(None, feeds)
            runs = True
        except Exception:
            runs = False
        report = bcast.check(path, dims=dims)
        assert runs == (total >= 8) == report.ok, (total, report.errors)
    lines = bcast.check(path).domain.lines()
    assert any(line.startswith("past + seq must be at most total") for line in lines)


@pytest.mark.parametrize(("indices", "least"), [([2], 3), ([-3, 0], 3), ([-1], 1)])
def test_constant_gather_indices_need_an_axis_that_long(indices: list[int], least: int) -> None:
    # x[:, k] on a symbolic axis: onnxruntime refuses an index outside it (Mamba's last step).
    nodes = [helper.make_node("Gather", ["x", "k"], ["y"], "pick", axis=1)]
    x = helper.make_tensor_value_info("x", F, ["batch", "seq", 4])
    y = helper.make_tensor_value_info("y", F, None)
    model = _model(nodes, [x], [y], [_const("k", np.array(indices, np.int64))])
    domain = bcast.check(model).domain
    seq = domain.dim("seq")
    assert seq is not None and seq.text == ("any" if least == 1 else f"{least}..")
    for s in sorted({max(least - 1, 1), least, least + 1}):
        failed = _run(model, {"x": np.ones((2, s, 4), np.float32)})
        assert (failed is None) == (s >= least), (s, failed)
        assert (domain.first_failure({"batch": 2, "seq": s}) is None) == (s >= least)


VIT_HW = [
    ("vit_hw_torchscript.onnx", "/model/embeddings/Add", ("batch", "height", "width")),
    ("vit_hw_dynamo.onnx", "node_add_17", ("s99", "s100", "s4")),
]


@pytest.mark.parametrize(("name", "add", "names"), VIT_HW, ids=[n for n, _, _ in VIT_HW])
def test_a_real_vit_runs_only_where_its_patches_fill_the_17_positions(
    name: str, add: str, names: tuple[str, str, str]
) -> None:
    # transformers' ViT, image 32, patch 8: (height//8)*(width//8) + 1 must be 17. The
    # TorchScript export leaves the conv's output unknown (bcast writes its window arithmetic);
    # the dynamo export writes s100//8. onnxruntime decides every point.
    path = str(REAL / name)
    domain = bcast.check(path).domain
    batch, height, width = names
    sizes = "8..23, 32..39, 64..71, 128..135"  # where (h//8)*(w//8) = 16 for some width
    assert (domain.dim(height).text, domain.dim(width).text) == (sizes, sizes)
    (tied,) = [r for r in domain.relations if r.imposed[0].node == add]
    expected = [(8, 15, 128, 135), (16, 23, 64, 71), (32, 39, 32, 39), (64, 71, 16, 23)]
    expected.append((128, 135, 8, 15))
    assert [(a, b, c, d) for (a, b), ((c, d),) in tied.boxes] == expected
    points = [(32, 32), (39, 39), (40, 32), (31, 32), (16, 64), (23, 71), (24, 64), (7, 128)]
    for h, w in [*points, (8, 128), (135, 15), (64, 64)]:
        feeds = {"pixel_values": np.zeros((2, 3, h, w), np.float32)}
        _agrees(path, domain, {batch: 2, height: h, width: w}, feeds)


def _run_openvino(xml: str, name: str, array: np.ndarray) -> str | None:
    """Run the IR at ``array``'s shape in OpenVINO; None if it runs, else the error.

    Read and compiled afresh for each shape: a compiled model that failed once at an
    invalid size can fail valid sizes after it.
    """
    ov = pytest.importorskip("openvino")
    core = ov.Core()
    model = core.read_model(xml)
    try:
        model.reshape({name: list(array.shape)})
        core.compile_model(model, "CPU")({name: array})
    except Exception as err:  # OpenVINO's own error types
        return str(err)
    return None


def test_a_real_vit_ir_has_the_domain_of_its_onnx_exports_and_openvino_agrees() -> None:
    # The same ViT converted by openvino.convert_model. OpenVINO's inference gives the
    # Convolution's output as 1.. (no link to the image size); bcast writes the window
    # arithmetic of the Convolution, the Reshape's -1 and the Concat's sum as expressions.
    xml = str(REAL / "vit_hw_openvino.xml")
    domain = bcast.check(xml).domain
    conv = "__module.model.embeddings.patch_embeddings.projection/aten::_convolution/Convolution"
    add = "__module.model.embeddings/aten::add/Add"
    height, width = domain.dim("pixel_values.2"), domain.dim("pixel_values.3")
    sizes = "8..23, 32..39, 64..71, 128..135"
    assert (height.text, width.text) == (sizes, sizes)
    assert {i.node for i in (*height.imposed, *width.imposed)} == {conv, add}
    (tied,) = [r for r in domain.relations if r.imposed[0].node == add]
    expected = [(8, 15, 128, 135), (16, 23, 64, 71), (32, 39, 32, 39), (64, 71, 16, 23)]
    expected.append((128, 135, 8, 15))
    assert [(a, b, c, d) for (a, b), ((c, d),) in tied.boxes] == expected
    for h, w in [(32, 32), (39, 39), (40, 32), (31, 32), (16, 64), (24, 64), (7, 128), (8, 128)]:
        point = {"pixel_values.0": 2, "pixel_values.2": h, "pixel_values.3": w}
        failure = domain.first_failure(point)
        error = _run_openvino(xml, "pixel_values", np.zeros((2, 3, h, w), np.float32))
        if failure is None:
            assert error is None, f"inside the domain at {point}, OpenVINO failed: {error}"
        else:
            assert error is not None, f"outside the domain at {point} ({failure}), but it ran"
            assert f" {failure.node} (" in error, error


def _word(name: str) -> str:
    """A pattern for ``name`` standing whole in a message (not inside a longer name)."""
    return rf"(?<![\w/.:]){re.escape(name)}(?![\w/.])"


def _openvino_agrees(
    xml: str, points: list[dict[str, tuple[int, ...]]], dtype: type = np.int64
) -> set[str]:
    """At each point (input name: shape), bcast's verdict is OpenVINO's; the ops failing."""
    ov = pytest.importorskip("openvino")
    domain = bcast.check(xml).domain
    failures = set()
    for shapes in points:
        point = {f"{n}.{i}": v for n, shape in shapes.items() for i, v in enumerate(shape)}
        failure = domain.first_failure(point)
        core = ov.Core()
        model = core.read_model(xml)  # afresh: a failed compile can spoil the next
        # Token 5 (not a padding token: RoBERTa's positions skip padding), masks of ones.
        feeds = {
            n: np.full(shape, 5 if n == "input_ids" else 1, dtype) for n, shape in shapes.items()
        }
        try:
            model.reshape({n: list(shape) for n, shape in shapes.items()})
            core.compile_model(model, "CPU")(feeds)
            error = None
        except Exception as err:  # OpenVINO's own error types
            error = str(err)
        if failure is None:
            assert error is None, f"inside the domain at {point}, OpenVINO failed: {error}"
        else:
            assert error is not None, f"outside the domain at {point} ({failure}), but it ran"
            # "While validating node 'opset1::Add NAME (...": shape inference; "Node NAME
            # of type GatherElements": a kernel at run time.
            named = [f for f in domain.failures(point) if re.search(_word(f.node), error)]
            (hit,) = named[:1]
            failures.add(hit.op)
    return failures


def test_a_real_bert_ir_caps_seq_and_ties_its_mask_and_openvino_agrees() -> None:
    # openvino.convert_model of BERT: each input dim is its own symbol. OpenVINO's inference
    # gives the position slice as 0..64 and loses every seq after the embeddings; bcast
    # carries Min(64, input_ids.1) (ShapeOf -> Gather -> Slice) and Max(ids, token types)
    # through MatMul and ScaledDotProductAttention, whose mask must fit the scores.
    xml = str(REAL / "bert_openvino.xml")
    assert bcast.check(xml).domain.dim("input_ids.1").text == "1..64"
    names = ["input_ids", "attention_mask", "token_type_ids"]
    points = [
        (2, 8, 2, 8, 2, 8), (2, 64, 2, 64, 2, 64), (2, 65, 2, 65, 2, 65), (2, 8, 2, 8, 2, 1),
        (2, 8, 2, 8, 2, 5), (2, 1, 2, 1, 2, 100), (2, 8, 2, 8, 1, 8), (2, 8, 1, 8, 2, 8),
        (2, 8, 2, 1, 2, 8), (2, 8, 3, 8, 2, 8), (2, 8, 2, 5, 2, 8), (2, 8, 2, 9, 2, 8),
    ]  # fmt: skip
    shapes = [dict(zip(names, (p[0:2], p[2:4], p[4:6]), strict=True)) for p in points]
    assert _openvino_agrees(xml, shapes) == {"Add", "ScaledDotProductAttention"}


def test_a_real_llama_ir_ties_its_mask_to_the_ids_and_openvino_agrees() -> None:
    # LLaMA (rotary positions: no cap on seq). The attention mask becomes a [b,1,seq,mask]
    # bias of the ScaledDotProductAttention: its length must be seq's (or 1). With one
    # token and a longer mask OpenVINO accepts the reshape and fails when it decomposes the
    # attention at compile time; the error names the same node.
    xml = str(REAL / "llama_openvino.xml")
    domain = bcast.check(xml).domain
    (tied,) = domain.relations
    assert tied.text == "attention_mask.1 = input_ids.1 or 1"
    points = [(2, 8, 2, 8), (2, 8, 2, 1), (2, 8, 2, 5), (2, 8, 2, 9), (2, 1, 2, 4), (2, 8, 1, 8)]
    points += [(2, 8, 3, 8), (2, 200, 2, 200)]
    shapes = [{"input_ids": p[:2], "attention_mask": p[2:]} for p in points]
    assert _openvino_agrees(xml, shapes) == {"ScaledDotProductAttention"}


def test_a_real_bert_mask_on_its_own_symbols_is_tied_to_seq() -> None:
    # TorchScript export with the mask's dims named mask_batch, mask_seq. The Add's output
    # is Max(seq, mask_seq): at seq = 1 a longer mask passes the Add and fails at the next
    # MatMul. The mask is read row by row by a flat Gather whose indices reach
    # (batch - 1)*mask_seq + mask_seq - 1 of mask_batch*mask_seq rows: batch <= mask_batch.
    path = str(REAL / "bert_mask_dims_torchscript.onnx")
    domain = bcast.check(path).domain
    assert domain.dim("seq").text == "1..64"
    tied = {r.imposed[0].node for r in domain.relations if set(r.dims) == {"seq", "mask_seq"}}
    assert tied == {
        "/model/encoder/layer.0/attention/self/Add",
        "/model/encoder/layer.0/attention/self/MatMul_1",
    }
    (rows,) = [r for r in domain.relations if set(r.dims) == {"batch", "mask_batch"}]
    assert (rows.text, rows.imposed[0].node) == (
        "batch must be at most mask_batch",
        "/model/Gather_4",
    )
    cases = [(2, 8, 2, 8), (2, 8, 2, 1), (2, 8, 2, 5), (2, 8, 2, 9), (2, 8, 3, 8), (3, 8, 2, 8)]
    for b, s, mb, ms in [*cases, (2, 1, 2, 5), (2, 1, 2, 1), (1, 1, 1, 64)]:
        for s_, ms_ in (
            [(s, ms), (64, 64), (65, 65)] if (b, s, mb, ms) == (2, 8, 2, 8) else [(s, ms)]
        ):
            feeds = {
                "input_ids": _ids(b, s_),
                "attention_mask": np.ones((mb, ms_), np.int64),
                "token_type_ids": np.zeros((b, s_), np.int64),
            }
            point = {"batch": b, "seq": s_, "mask_batch": mb, "mask_seq": ms_}
            _agrees(path, domain, point, feeds)


def test_a_real_bert_whose_mask_batch_was_left_static_runs_for_batch_1_or_2() -> None:
    # Exported with dynamic_axes naming only the mask's sequence axis: the file fixes the
    # mask at 2 rows. The mask is read row by row (flat Gather): a third sequence has no row.
    path = str(REAL / "bert_fixed_mask_batch_torchscript.onnx")
    domain = bcast.check(path).domain
    batch = domain.dim("batch")
    assert (batch.text, [i.node for i in batch.imposed]) == ("1..2", ["/model/Gather_4"])
    assert domain.dim("seq").text == "1..64"
    assert 'batch = Dim("batch", min=1, max=2)' in domain.torch_lines()
    assert domain.openvino_shapes()["input_ids"] == "[1..2,1..64]"
    for b, s in [(1, 8), (2, 8), (3, 8), (4, 1), (2, 64), (2, 65), (1, 64)]:
        feeds = {
            "input_ids": _ids(b, s),
            "attention_mask": np.ones((2, s), np.int64),
            "token_type_ids": np.zeros((b, s), np.int64),
        }
        _agrees(path, domain, {"batch": b, "seq": s}, feeds)


def test_a_real_roberta_counts_its_positions_and_caps_seq_at_64() -> None:
    # RoBERTa's positions are CumSum(ids != pad) + 1 into 66 rows: without padding the
    # largest is seq + 1, so seq <= 64. Data decides the positions; the domain is for every
    # input of a shape, so it takes the inputs without padding (the largest positions).
    # Two nodes read them, independently: a GatherElements of the token-type buffer (where
    # OpenVINO fails) and the position Gather (where onnxruntime's order fails first).
    path = str(REAL / "roberta_torchscript.onnx")
    domain = bcast.check(path).domain
    seq = domain.dim("seq")
    assert (seq.text, [i.node for i in seq.imposed]) == (
        "1..64",
        ["/model/embeddings/GatherElements"],
    )
    assert [f.node for f in domain.failures({"batch": 2, "seq": 65})] == [
        "/model/embeddings/GatherElements",
        "/model/embeddings/position_embeddings/Gather",
    ]
    for b, s in [(2, 1), (2, 8), (2, 64), (2, 65), (1, 100)]:
        feeds = {"input_ids": np.full((b, s), 5, np.int64), "attention_mask": np.ones((b, s))}
        feeds["attention_mask"] = feeds["attention_mask"].astype(np.int64)
        _agrees(path, domain, {"batch": b, "seq": s}, feeds)


def test_a_real_llama_dynamo_export_reads_its_mask_by_index_tuples() -> None:
    # torch.export gives the mask a batch of its own, s43; the causal mask is built by a
    # GatherND whose index tuples pair Range(s72) with Range(s53): s72 rows of the mask.
    path = str(REAL / "llama_dynamo.onnx")
    domain = bcast.check(path).domain
    (rows,) = [r for r in domain.relations if r.imposed[0].node == "node_GatherND_64"]
    assert rows.text == "s72 must be at most s43"
    for b, s, mb in [(2, 8, 2), (2, 8, 1), (2, 8, 3), (1, 8, 4), (3, 5, 2), (1, 1, 1)]:
        feeds = {"input_ids": _ids(b, s), "attention_mask": np.ones((mb, s), np.int64)}
        _agrees(path, domain, {"s72": b, "s53": s, "s43": mb}, feeds)


def test_bert_dynamo_hands_the_domain_back_to_torch_export_and_openvino() -> None:
    domain = bcast.check(str(REAL / "bert_dynamo.onnx")).domain
    assert 's41 = Dim("s41", min=1, max=64)' in domain.torch_lines()
    assert domain.openvino_shapes()["input_ids"] == "[?,1..64]"


def test_the_domain_command_names_the_first_failing_node() -> None:
    path = str(REAL / "bert_dynamo.onnx")
    out = CliRunner().invoke(main, ["domain", path, "--dim", "s41=65"])
    assert out.exit_code == 1
    assert "fails first at node_add_18 (Add, axis 1)" in out.output
    out = CliRunner().invoke(main, ["domain", path, "--json", "--dim", "s41=64"])
    assert out.exit_code == 0
    data = json.loads(out.output)
    assert data["point"]["inside"] is True
    assert data["domain"]["dims"][1] == {
        "name": "s41",
        "values": "1..64",
        "intervals": [[1, 64]],
        "imposed_by": [data["domain"]["dims"][1]["imposed_by"][0]],
        "condition": "s41 <= 64",  # onnxruntime: runs at 64, fails at 65 (above)
    }


def test_ir_inputs_related_by_an_add_are_a_relation() -> None:
    pytest.importorskip("openvino")
    domain = bcast.check(str(REAL / "bert_openvino.xml")).domain
    texts = {r.text: r.kind for r in domain.relations}
    assert texts["token_type_ids.0 = input_ids.0 or either is 1"] == "equal-or-1"


# -- small models with known limits --------------------------------------------------------


def test_a_vit_like_position_embedding_fixes_the_image_size() -> None:
    # Conv 16x16 stride 16 to [batch, 8, H//16, W//16] (written as dynamo writes it), + pos
    # embedding [1, 8, 2, 2]: H//16 and W//16 must be 2 (or 1).
    nodes = [
        helper.make_node(
            "Conv", ["x", "w"], ["p"], "patch", kernel_shape=[16, 16], strides=[16, 16]
        ),
        helper.make_node("Add", ["p", "pos"], ["y"], "pos_add"),
    ]
    x = helper.make_tensor_value_info("x", F, ["batch", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", F, ["batch", 8, "H//16", "W//16"])
    p = helper.make_tensor_value_info("p", F, ["batch", 8, "H//16", "W//16"])
    rng = np.random.default_rng(0)
    inits = [
        _const("w", rng.random((8, 3, 16, 16), np.float32)),
        _const("pos", rng.random((1, 8, 2, 2), np.float32)),
    ]
    model = _model(nodes, [x], [y], inits, [p])
    domain = bcast.check(model).domain
    assert (domain.dim("H").text, domain.dim("W").text) == ("16..47", "16..47")
    # The Conv's window needs H >= 16; the position add cuts the rest.
    assert {i.node for i in domain.dim("H").imposed} == {"patch", "pos_add"}
    for h, w in [(32, 32), (16, 47), (47, 20), (48, 32), (32, 48), (64, 64)]:
        feeds = {"x": rng.random((1, 3, h, w), np.float32)}
        _agrees(model, domain, {"batch": 1, "H": h, "W": w}, feeds)


def test_an_attention_mask_with_its_own_symbols_is_tied_to_batch_and_seq() -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], "t", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["x", "xt"], ["scores"], "qk"),
        helper.make_node("Unsqueeze", ["mask", "one"], ["m3"], "unsq"),
        helper.make_node("Add", ["scores", "m3"], ["y"], "mask_add"),
    ]
    x = helper.make_tensor_value_info("x", F, ["batch", "seq", 8])
    mask = helper.make_tensor_value_info("mask", F, ["mbatch", "mseq"])
    y = helper.make_tensor_value_info("y", F, None)
    model = _model(nodes, [x, mask], [y], [_const("one", np.array([1], np.int64))])
    domain = bcast.check(model).domain
    kinds = {r.text: r.kind for r in domain.relations}
    assert kinds == {
        "mbatch = batch or either is 1": "equal-or-1",
        "mseq = seq or either is 1": "equal-or-1",
    }
    rng = np.random.default_rng(1)
    for b, s, mb, ms in [
        (2, 5, 2, 5),
        (2, 5, 1, 5),
        (2, 5, 2, 1),
        (2, 5, 3, 5),
        (2, 5, 2, 6),
        (1, 5, 3, 5),
    ]:
        feeds = {"x": rng.random((b, s, 8), np.float32), "mask": rng.random((mb, ms), np.float32)}
        _agrees(model, domain, {"batch": b, "seq": s, "mbatch": mb, "mseq": ms}, feeds)


def test_a_batch_fixed_by_a_constant_and_by_a_reshape() -> None:
    nodes = [
        helper.make_node("Add", ["x", "c"], ["a"], "const_add"),
        helper.make_node("Reshape", ["a", "target"], ["y"], "flat"),
    ]
    x = helper.make_tensor_value_info("x", F, ["batch", 4])
    y = helper.make_tensor_value_info("y", F, None)
    inits = [_const("c", np.ones((2, 4), np.float32)), _const("target", np.array([8], np.int64))]
    model = _model(nodes, [x], [y], inits)
    domain = bcast.check(model).domain
    # Add: batch in {1, 2}; Reshape: 4*batch... of the Add's output [2,4], always 8: no cut.
    assert domain.dim("batch").text == "1..2"
    for b in (1, 2, 3):
        _agrees(model, domain, {"batch": b}, {"x": np.ones((b, 4), np.float32)})


def test_reshape_element_counts_and_matmul_inner_dims() -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], "proj"),
        helper.make_node("Reshape", ["z", "target"], ["y2"], "flat"),
    ]
    x = helper.make_tensor_value_info("x", F, ["n", "k"])
    z = helper.make_tensor_value_info("z", F, ["p", "q"])
    outs = [helper.make_tensor_value_info(v, F, None) for v in ("h", "y2")]
    inits = [
        _const("w", np.ones((16, 4), np.float32)),
        _const("target", np.array([-1, 32], np.int64)),
    ]
    model = _model(nodes, [x, z], outs, inits)
    domain = bcast.check(model).domain
    assert domain.dim("k").text == "16"
    assert [i.node for i in domain.dim("k").imposed] == ["proj"]
    assert [r.text for r in domain.relations] == ["p*q must be a multiple of 32"]
    for n, k, p, q in [(2, 16, 4, 8), (3, 16, 1, 32), (2, 15, 4, 8), (2, 17, 4, 8), (2, 16, 3, 5)]:
        feeds = {"x": np.ones((n, k), np.float32), "z": np.ones((p, q), np.float32)}
        _agrees(model, domain, {"n": n, "k": k, "p": p, "q": q}, feeds)


def test_one_dim_reshaped_to_a_constant_count_has_a_periodic_domain() -> None:
    nodes = [helper.make_node("Reshape", ["x", "target"], ["y"], "flat")]
    x = helper.make_tensor_value_info("x", F, ["n", 4])
    y = helper.make_tensor_value_info("y", F, None)
    model = _model(nodes, [x], [y], [_const("target", np.array([-1, 8], np.int64))])
    domain = bcast.check(model).domain
    assert domain.dim("n").text.startswith("2, 4, 6, ")
    for n in (1, 2, 3, 4, 4096, 4097):
        _agrees(model, domain, {"n": n}, {"x": np.ones((n, 4), np.float32)})


def test_concat_ties_the_other_axes() -> None:
    nodes = [helper.make_node("Concat", ["a", "b"], ["y"], "cat", axis=1)]
    a = helper.make_tensor_value_info("a", F, ["n", 3])
    b = helper.make_tensor_value_info("b", F, ["m", "k"])
    y = helper.make_tensor_value_info("y", F, None)
    model = _model(nodes, [a, b], [y])
    domain = bcast.check(model).domain
    assert [(r.kind, r.text) for r in domain.relations] == [("equal", "n = m")]
    for n, m, k in [(2, 2, 1), (2, 2, 7), (2, 3, 1), (1, 2, 1)]:
        feeds = {"a": np.ones((n, 3), np.float32), "b": np.ones((m, k), np.float32)}
        _agrees(model, domain, {"n": n, "m": m, "k": k}, feeds)


def test_an_empty_domain_is_an_error_finding() -> None:
    nodes = [
        helper.make_node("Add", ["x", "c"], ["a"], "const_add"),
        helper.make_node("Reshape", ["x", "target"], ["y"], "flat"),
    ]
    x = helper.make_tensor_value_info("x", F, ["n"])
    outs = [helper.make_tensor_value_info(v, F, None) for v in ("a", "y")]
    inits = [_const("c", np.ones((2,), np.float32)), _const("target", np.array([3], np.int64))]
    model = _model(nodes, [x], outs, inits)
    report = bcast.check(model)
    assert report.domain.is_empty and report.domain.dim("n").sizes == ()
    assert [f.kind for f in report.errors] == ["empty-domain"]
    for n in (1, 2, 3, 4):  # onnxruntime: no size runs
        assert _run(model, {"x": np.ones((n,), np.float32)}) is not None


# -- the domain in check's reports, and written back into the model ---------------------------

REAL_BERT = REAL / "bert_dynamo.onnx"


def test_check_json_sarif_and_html_carry_the_domain() -> None:
    runner = CliRunner()
    out = json.loads(runner.invoke(main, ["check", "--json", str(REAL_BERT)]).stdout)
    dims = {d["name"]: d["values"] for d in out["models"][0]["domain"]["dims"]}
    assert dims["s41"] == "1..64"  # onnxruntime: runs at 64, fails at 65 (above)
    sarif = json.loads(runner.invoke(main, ["check", "--format", "sarif", str(REAL_BERT)]).stdout)
    (domain,) = sarif["runs"][0]["properties"]["domains"].values()
    assert {d["name"]: d["values"] for d in domain["dims"]}["s41"] == "1..64"
    page = runner.invoke(main, ["check", "--format", "html", str(REAL_BERT)]).stdout
    assert "<b>runs for</b>" in page and "1..64" in page  # the domain, drawn as bars


def test_write_metadata_puts_the_domain_into_a_copy_of_the_model(tmp_path: Path) -> None:
    target = tmp_path / "with_domain.onnx"
    result = CliRunner().invoke(main, ["domain", str(REAL_BERT), "--write-metadata", str(target)])
    assert result.exit_code == 0, result.output
    written = onnx.load(target)
    props = {p.key: p.value for p in written.metadata_props}
    assert props["bcast.dim.s41"] == "1..64"
    assert json.loads(props["bcast.domain"])["dims"][1]["name"] == "s41"
    original = onnx.load(REAL_BERT)
    assert written.graph == original.graph  # nothing else changed
    # The model still runs in onnxruntime, at a size inside the domain.
    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    feeds = {i.name: np.ones((2, 64), np.int64) for i in session.get_inputs()}
    session.run(None, feeds)


def test_a_domain_prints_as_its_lines_in_a_terminal_and_a_notebook() -> None:
    domain = bcast.check(str(REAL / "bert_dynamo.onnx")).domain
    assert str(domain).splitlines() == domain.lines()
    assert str(domain).splitlines()[1].startswith("s41  1..64    <- node_add_18 (Add, axis 1)")
    page = domain._repr_html_()
    assert page.startswith("<pre>") and "&lt;- node_add_18" in page and "<- " not in page
    assert str(bcast.models.domain.Domain()) == "(no symbolic input dims)"


def test_a_real_roberta_ir_caps_seq_where_openvino_fails() -> None:
    # The same RoBERTa converted by openvino.convert_model: OpenVINO fails at the
    # GatherElements reading the token-type buffer at the positions, for seq 65.
    xml = str(REAL / "roberta_openvino.xml")
    assert bcast.check(xml).domain.dim("input_ids.1").text == "1..64"
    points = [(2, 8, 2, 8), (2, 64, 2, 64), (2, 65, 2, 65), (1, 100, 1, 100), (2, 8, 2, 5)]
    shapes = [{"input_ids": p[:2], "attention_mask": p[2:]} for p in points]
    assert _openvino_agrees(xml, shapes) == {"GatherElements", "ScaledDotProductAttention"}


@pytest.mark.parametrize(
    "name", ["whisper_encoder_torchscript.onnx", "whisper_encoder_openvino.xml"]
)
def test_a_real_whisper_encoder_runs_for_the_frames_its_16_positions_fit(name: str) -> None:
    # Conv k3 p1, then Conv k3 p1 stride 2: (frames - 1)//2 + 1 positions meet a 16-row
    # table added whole. Both runtimes decide the same 8 points.
    path = str(REAL / name)
    domain = bcast.check(path).domain
    frames = domain.dims[-1]
    assert frames.text == "1..2, 31..32"
    sizes = (1, 2, 3, 30, 31, 32, 33, 64)
    if name.endswith(".xml"):
        points = [{"input_features": (2, 8, f)} for f in sizes]
        assert _openvino_agrees(path, points, np.float32) == {"Add"}
        return
    for f in sizes:
        feeds = {"input_features": np.zeros((2, 8, f), np.float32)}
        _agrees(path, domain, {"batch": 2, "frames": f}, feeds)


def test_a_model_local_functions_requirements_are_the_models() -> None:
    # A function body always runs: its Add of x [batch,4] and a [2,4] constant makes
    # batch 1 or 2. onnxruntime inlines the function and names the inner node.
    fn = helper.make_function(
        "local", "AddBias", ["x", "b"], ["y"],
        [helper.make_node("Add", ["x", "b"], ["y"], name="add_in_fn")],
        [helper.make_opsetid("", 17)],
    )  # fmt: skip
    call = helper.make_node("AddBias", ["x", "c"], ["y"], name="call", domain="local")
    x = helper.make_tensor_value_info("x", F, ["batch", 4])
    y = helper.make_tensor_value_info("y", F, None)
    graph = helper.make_graph([call], "g", [x], [y], [_const("c", np.ones((2, 4), np.float32))])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    model = helper.make_model(graph, opset_imports=opsets, functions=[fn])
    model.ir_version = 8
    domain = bcast.check(model).domain
    batch = domain.dim("batch")
    assert (batch.text, [i.node for i in batch.imposed]) == ("1..2", ["call/AddBias/add_in_fn"])
    for b in (1, 2, 3):
        error = _run(model, {"x": np.ones((b, 4), np.float32)})
        assert (error is None) == (domain.first_failure({"batch": b}) is None)
        assert error is None or "add_in_fn" in error


def test_an_index_product_that_multiplies_out_too_far_is_kept_as_written() -> None:
    # 40 factors (a_i + b_i) would expand to 2**40 terms: bcast keeps the product.
    from bcast.core.expressions import Expr
    from bcast.core.polynomials import cancelled, expanded

    e = Expr("int", value=1)
    for i in range(40):
        e = Expr("*", (e, Expr("+", (Expr("sym", name=f"a{i}"), Expr("sym", name=f"b{i}")))))
    assert expanded(e) == e
    assert cancelled(e, Expr("sym", name="z")) == (e, Expr("sym", name="z"))


def test_every_two_dim_relation_is_decided_as_a_set() -> None:
    # A crafted model with 20 different two-dim requirements, a*b a multiple of k for k in
    # 3..22 (Reshape to [k, -1]): each is a Presburger set (a case split over the divisors of
    # k), decided without a bound; none is bounded, so none is written as boxes. Together
    # their sets grow past what is worth intersecting: the later ones are decided on their own.
    sizes = list(range(3, 23))
    nodes = [helper.make_node("Reshape", ["x", f"t{k}"], [f"y{k}"], f"r{k}") for k in sizes]
    inits = [_const(f"t{k}", np.array([k, -1], np.int64)) for k in sizes]
    outs = [helper.make_tensor_value_info(f"y{k}", F, None) for k in sizes]
    x = helper.make_tensor_value_info("x", F, ["a", "b"])
    domain = bcast.check(_model(nodes, [x], outs, inits)).domain
    assert len(domain.relations) == len(sizes)
    assert all(r.condition and not r.boxes for r in domain.relations)
    assert domain.relations[0].decided and not domain.relations[-1].decided
    assert domain.first_failure({"a": 1, "b": 1}).node == "r3"
    assert domain.first_failure({"a": 2 * 3 * 5 * 7 * 11 * 13 * 17 * 19, "b": 2**4 * 3**2}) is None
    # lcm(3..22) = 232792560: a*b must be a multiple of it; a, b alone may be anything.
    assert (domain.dim("a").text, domain.dim("b").text) == ("any", "any")
