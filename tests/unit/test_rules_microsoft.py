"""The com.microsoft operators of onnxruntime's optimizer and quantizer (issue 37, item 5).

Each operator is built with onnx.helper, valid and with one bug (a bias a channel short, a
weight of the wrong width). onnxruntime, which implements these contrib operators on CPU,
runs the valid model and refuses the mutant; bcast reports the mutant at its node without
running it, nothing for the valid one, and gives the output shape, so that a node after it
is checked too. Shapes and constraints: onnxruntime's contrib op definitions
(``bert_defs.cc``, ``contrib_defs.cc``, ``quantization_defs.cc``) and CPU kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from bcast.models import Rule, Severity, check_graph
from bcast.onnx.reader import read_onnx

MS = "com.microsoft"
_TYPES = {np.float32: TensorProto.FLOAT, np.int32: TensorProto.INT32, np.int64: TensorProto.INT64,
          np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}  # fmt: skip


def _a(shape, dtype=np.float32, value=0.5):
    return np.full(shape, value, dtype)


@dataclass(frozen=True)
class Case:
    """One operator: its inputs (fed, or constant), attributes, output type."""

    op: str
    feeds: dict[str, np.ndarray]
    consts: dict[str, np.ndarray]
    inputs: tuple[str, ...]
    attrs: dict[str, object]
    out: int = TensorProto.FLOAT
    extra: tuple[str, ...] = ()  # outputs the operator requires beside y

    def model(self):
        ins = [
            helper.make_tensor_value_info(k, _TYPES[v.dtype.type], v.shape)
            for k, v in self.feeds.items()
        ]
        inits = [numpy_helper.from_array(v, k) for k, v in self.consts.items()]
        outputs = ["y", *self.extra]
        node = helper.make_node(
            self.op, list(self.inputs), outputs, name="op", domain=MS, **self.attrs
        )
        out = helper.make_tensor_value_info("y", self.out, None)
        graph = helper.make_graph([node], "g", ins, [out], inits)
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = 8
        return model


def _runs(case: Case) -> bool:
    try:
        session = ort.InferenceSession(
            case.model().SerializeToString(), providers=["CPUExecutionProvider"]
        )
        session.run(None, case.feeds)
    except Exception:  # onnxruntime's refusal, at load or at run time: the verdict
        return False
    return True


def _bias_gelu(width):
    return Case("BiasGelu", {"x": _a((2, 8, 64))}, {"b": _a(width)}, ("x", "b"), {})


def _fast_gelu(width):
    return Case("FastGelu", {"x": _a((2, 8, 64))}, {"b": _a(width)}, ("x", "b"), {})


def _fused_matmul(k):
    return Case(
        "FusedMatMul", {"a": _a((2, 3, 4))}, {"b": _a((2, 5, k))}, ("a", "b"), {"transB": 1}
    )


def _skip_norm(width, op="SkipLayerNormalization"):
    consts = {"gamma": _a(width), **({"beta": _a(64)} if op == "SkipLayerNormalization" else {})}
    inputs = ("x", "skip", *consts)
    feeds = {"x": _a((2, 8, 64)), "skip": _a((2, 8, 64))}
    return Case(op, feeds, consts, inputs, {"epsilon": 1e-5})


def _embed(width, seq=8):
    feeds = {"ids": _a((2, seq), np.int32, 1), "seg": _a((2, seq), np.int32, 0)}
    consts = {
        "word": _a((100, 64)), "pos": _a((16, width)), "segw": _a((2, 64)),
        "gamma": _a(64), "beta": _a(64),
    }  # fmt: skip
    inputs = ("ids", "seg", "word", "pos", "segw", "gamma", "beta")
    attrs = {"epsilon": 1e-5}
    return Case("EmbedLayerNormalization", feeds, consts, inputs, attrs, extra=("mask_index",))


def _attention(bias):
    consts = {"w": _a((64, 192), value=0.01), "b": _a(bias)}
    return Case("Attention", {"x": _a((2, 8, 64))}, consts, ("x", "w", "b"), {"num_heads": 4})


def _qattention(rows):
    consts = {
        "w": _a((rows, 192), np.uint8, 1), "b": _a(192), "xs": np.float32(0.1),
        "ws": np.float32(0.1), "xz": np.uint8(0), "wz": np.uint8(0),
    }  # fmt: skip
    inputs = ("x", "w", "b", "xs", "ws", "", "xz", "wz")
    feeds = {"x": _a((2, 8, 64), np.uint8, 1)}
    return Case("QAttention", feeds, consts, inputs, {"num_heads": 4})


def _multi_head(width):
    feeds = {"q": _a((2, 8, 64)), "k": _a((2, 10, width)), "v": _a((2, 10, 64))}
    return Case("MultiHeadAttention", feeds, {}, ("q", "k", "v"), {"num_heads": 4})


def _group_query(width):
    feeds = {"q": _a((1, 4, 64)), "k": _a((1, 4, width)), "v": _a((1, 4, 32))}
    consts = {"seqlens": np.array([3], np.int32), "total": np.array(4, np.int32)}
    inputs = ("q", "k", "v", "", "", "seqlens", "total")
    return Case("GroupQueryAttention", feeds, consts, inputs, {"num_heads": 4, "kv_num_heads": 2})


def _nbits(scales):
    consts = {"b": _a((8, 2, 8), np.uint8, 17), "scales": _a(scales)}
    attrs = {"K": 32, "N": 8, "bits": 4, "block_size": 16}
    return Case("MatMulNBits", {"a": _a((2, 32))}, consts, ("a", "b", "scales"), attrs)


def _rotary(width):
    feeds = {"x": _a((1, 4, 64))}
    consts = {"pos": np.zeros((1, 4), np.int64), "cos": _a((8, 8)), "sin": _a((8, width))}
    return Case("RotaryEmbedding", feeds, consts, ("x", "pos", "cos", "sin"), {"num_heads": 4})


def _qlinear(op, width):
    consts = {
        "b": _a(width, np.uint8, 2), "s": np.float32(0.1), "z": np.uint8(0),
    }  # fmt: skip
    inputs = ("a", "s", "z", "b", "s", "z", "s", "z")
    return Case(op, {"a": _a((2, 3), np.uint8, 1)}, consts, inputs, {}, TensorProto.UINT8)


def _dynamic_qmm(bias):
    consts = {"b": _a((4, 5), np.int8, 1), "bs": _a(5, value=0.1), "bias": _a(bias)}
    inputs = ("a", "b", "bs", "", "bias")
    return Case("DynamicQuantizeMatMul", {"a": _a((2, 4))}, consts, inputs, {})


def _qgemm(columns):
    consts = {
        "b": _a((4, 5), np.int8, 1), "s": np.float32(0.1), "z": np.uint8(0),
        "bs": _a(columns, value=0.1), "bz": _a(columns, np.int8, 0), "c": _a(5, np.int32, 0),
    }  # fmt: skip
    inputs = ("a", "s", "z", "b", "bs", "bz", "c", "s", "z")
    return Case("QGemm", {"a": _a((2, 4), np.uint8, 1)}, consts, inputs, {}, TensorProto.UINT8)


CASES: dict[str, tuple[Callable[[], Case], Callable[[], Case]]] = {
    "BiasGelu": (lambda: _bias_gelu(64), lambda: _bias_gelu(63)),
    "FastGelu": (lambda: _fast_gelu(64), lambda: _fast_gelu(63)),
    "FusedMatMul": (lambda: _fused_matmul(4), lambda: _fused_matmul(3)),
    "SkipLayerNormalization": (lambda: _skip_norm(64), lambda: _skip_norm(63)),
    "SkipSimplifiedLayerNormalization": (
        lambda: _skip_norm(64, "SkipSimplifiedLayerNormalization"),
        lambda: _skip_norm(63, "SkipSimplifiedLayerNormalization"),
    ),
    "EmbedLayerNormalization": (lambda: _embed(64), lambda: _embed(63)),
    "EmbedLayerNormalization-positions": (lambda: _embed(64, 16), lambda: _embed(64, 17)),
    "Attention": (lambda: _attention(192), lambda: _attention(191)),
    "QAttention": (lambda: _qattention(64), lambda: _qattention(63)),
    "MultiHeadAttention": (lambda: _multi_head(64), lambda: _multi_head(60)),
    "GroupQueryAttention": (lambda: _group_query(32), lambda: _group_query(30)),
    "MatMulNBits": (lambda: _nbits(16), lambda: _nbits(15)),
    "RotaryEmbedding": (lambda: _rotary(8), lambda: _rotary(7)),
    "QLinearAdd": (lambda: _qlinear("QLinearAdd", 3), lambda: _qlinear("QLinearAdd", 4)),
    "QLinearMul": (lambda: _qlinear("QLinearMul", 3), lambda: _qlinear("QLinearMul", 4)),
    "DynamicQuantizeMatMul": (lambda: _dynamic_qmm(5), lambda: _dynamic_qmm(4)),
    "QGemm": (lambda: _qgemm(5), lambda: _qgemm(4)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_onnxruntime_runs_the_valid_model_and_refuses_the_mutant(name):
    valid, mutant = CASES[name]
    assert _runs(valid())
    assert not _runs(mutant())


@pytest.mark.parametrize("name", list(CASES))
def test_bcast_reports_the_mutant_at_its_node_and_not_the_valid_model(name):
    valid, mutant = CASES[name]
    report = check_graph(read_onnx(valid().model()))
    assert [f for f in report.findings if f.severity is not Severity.INFO] == []
    assert report.unmodelled == ()
    found = check_graph(read_onnx(mutant().model())).findings
    assert {f.node for f in found if f.severity is Severity.ERROR} == {"op"}


@pytest.mark.parametrize("name", list(CASES))
def test_the_output_shape_is_the_one_onnxruntime_computes(name):
    case = CASES[name][0]()
    session = ort.InferenceSession(
        case.model().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (expected,) = [o.shape for o in session.run(None, case.feeds)][:1]
    graph = read_onnx(case.model())
    assert graph.nodes[0].rule is Rule.OPERATOR
    from bcast.models import propagate_shapes

    assert propagate_shapes(graph)["y"] == tuple(expected)


def test_a_node_after_an_operator_with_a_rule_is_checked_too():
    case = _bias_gelu(64)
    model = case.model()
    model.graph.initializer.append(numpy_helper.from_array(_a(63), "c"))
    model.graph.node.append(helper.make_node("Add", ["y", "c"], ["z"], name="after"))
    model.graph.output[0].name = "z"
    found = check_graph(read_onnx(model)).findings
    assert [(f.node, f.kind) for f in found] == [("after", "incompatible")]


def test_an_operator_without_a_rule_is_listed_as_not_modelled():
    case = Case("SomeFutureOp", {"x": _a((2, 8))}, {}, ("x",), {})
    report = check_graph(read_onnx(case.model()))
    assert [(u.node, u.op) for u in report.unmodelled] == [("op", "SomeFutureOp")]
    assert "com.microsoft.SomeFutureOp has no shape rule" in report.unmodelled[0].reason
    assert report.coverage() is not None and "not modelled" in report.coverage()
    assert report.domain.undecided[0].node == "op"
    assert any("not decided beyond node op" in line for line in report.domain.lines())


def test_bias_add_bias_and_skip_follow_the_definition():
    # onnxruntime implements BiasAdd for CUDA only ("Could not find an implementation for
    # BiasAdd(1)" on CPU): the expected verdicts are its definition's (bert_defs.cc: bias
    # [C] for X [N, S, C], skip of X's shape).
    def case(width, skip=(2, 8, 64)):
        feeds = {"x": _a((2, 8, 64)), "skip": _a(skip)}
        return Case("BiasAdd", feeds, {"b": _a(width)}, ("x", "b", "skip"), {})

    assert check_graph(read_onnx(case(64).model())).findings == ()
    for mutant in (case(63), case(64, (2, 8, 63))):
        found = check_graph(read_onnx(mutant.model())).findings
        assert {f.node for f in found if f.severity is Severity.ERROR} == {"op"}


def test_onnx_inference_goes_on_after_the_operator_so_a_later_broadcast_is_checked():
    # BiasGelu -> MatMul -> Add: ONNX's inference knows the MatMul only once bcast hands it
    # BiasGelu's output (shape and element type); then the Add's bias of 31 for 32 is found.
    case = _bias_gelu(64)
    model = case.model()
    model.graph.initializer.extend(
        [numpy_helper.from_array(_a((64, 32)), "w"), numpy_helper.from_array(_a(31), "c")]
    )
    model.graph.node.extend(
        [
            helper.make_node("MatMul", ["y", "w"], ["m"], name="mm"),
            helper.make_node("Add", ["m", "c"], ["z"], name="add"),
        ]
    )
    model.graph.output[0].name = "z"
    assert _runs(case)  # the BiasGelu alone runs
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, case.feeds
        )
        runs = True
    except Exception:  # onnxruntime's refusal of the Add
        runs = False
    assert not runs
    found = check_graph(read_onnx(model)).findings
    assert [(f.node, f.kind, f.axis) for f in found] == [("add", "incompatible", 2)]


def test_embed_layer_normalization_bounds_the_sequence_by_its_position_table():
    # An ORT-optimized BERT: input_ids [batch, seq], 16 position rows. onnxruntime runs
    # seq = 16 and refuses 17; the domain says seq 1..16, named at the node.
    case = _embed(64)
    model = case.model()
    for name in ("ids", "seg"):
        (info,) = [i for i in model.graph.input if i.name == name]
        info.CopyFrom(helper.make_tensor_value_info(name, TensorProto.INT32, ["batch", "seq"]))
    assert _runs(_embed(64, 16)) and not _runs(_embed(64, 17))
    domain = check_graph(read_onnx(model)).domain
    seq = domain.dim("seq")
    assert seq is not None and seq.text == "1..16"
    assert [i.node for i in seq.imposed] == ["op"]
    assert domain.first_failure({"batch": 2, "seq": 17}) is not None
    assert domain.first_failure({"batch": 2, "seq": 16}) is None


@pytest.mark.parametrize(
    ("name", "kind"), [("bert_torchscript", "bert"), ("gpt2_torchscript", "gpt2")]
)
def test_onnxruntime_optimizer_output_is_modelled_with_no_new_finding(tmp_path, name, kind):
    # What onnxruntime's transformer optimizer makes of the real fixtures: SkipLayerNormalization,
    # BiasGelu / FastGelu. Nothing is left unmodelled, no finding appears that the exported model
    # did not have, the domain is the same; a fused bias cut by one is an error at its node,
    # and onnxruntime refuses that mutant.
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    source = f"tests/fixtures/real/{name}.onnx"
    optimized = optimize_model(source, model_type=kind, num_heads=4, hidden_size=32, opt_level=0)
    optimized.save_model_to_file(str(tmp_path / "optimized.onnx"))  # imports com.microsoft
    model = onnx.load(tmp_path / "optimized.onnx")
    fused = {n.op_type for n in model.graph.node if n.domain == MS}
    assert "SkipLayerNormalization" in fused and fused & {"BiasGelu", "FastGelu"}
    before = check_graph(read_onnx(onnx.load(source)))
    after = check_graph(read_onnx(model))
    # every node modelled, every broadcast checked: ONNX's inference goes on after each
    # fused node (GPT-2 chains SkipLayerNormalization's input + skip sum, output 3)
    assert after.unmodelled == () and after.unchecked == ()
    assert {(f.kind, f.reason) for f in after.findings} <= {
        (f.kind, f.reason) for f in before.findings
    }
    assert [(d.name, d.text) for d in after.domain.dims] == [
        (d.name, d.text) for d in before.domain.dims
    ]
    gelu = next(n for n in model.graph.node if n.op_type in ("BiasGelu", "FastGelu"))
    bias = next(t for t in model.graph.initializer if t.name == gelu.input[1])
    cut = numpy_helper.to_array(bias)[:-1]
    bias.CopyFrom(numpy_helper.from_array(cut, bias.name))
    path = tmp_path / "mutant.onnx"
    onnx.save(model, path)
    feeds = {
        i.name: np.ones([d.dim_value or 2 for d in i.type.tensor_type.shape.dim], np.int64)
        for i in model.graph.input
    }
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception):  # noqa: B017 (onnxruntime's refusal, of its own type)
        session.run(None, feeds)
    errors = [f for f in check_graph(read_onnx(model)).findings if f.severity is Severity.ERROR]
    assert [f.node for f in errors] == [
        gelu.name or f"{gelu.op_type}_{list(model.graph.node).index(gelu)}"
    ]


def test_a_layout_the_rule_does_not_size_is_listed_as_not_modelled():
    # MultiHeadAttention with a 4-D (BNSH) query: bcast's rule covers the 3-D layout only.
    case = Case(
        "MultiHeadAttention", {"q": _a((2, 4, 8, 16))}, {}, ("q", "q", "q"), {"num_heads": 4}
    )
    report = check_graph(read_onnx(case.model()))
    assert [(u.node, u.op) for u in report.unmodelled] == [("op", "MultiHeadAttention")]
    assert "does not size the output" in report.unmodelled[0].reason


# Valid variants onnxruntime runs: past and masks, qkv_hidden_sizes, a 2-D skip, the 4-D
# RotaryEmbedding, 8-bit MatMulNBits, transA, no bias, a broadcasting QLinearAdd. None is a
# finding, and the output shape is onnxruntime's.
VARIANTS: dict[str, Case] = {
    "gqa_past": Case(
        "GroupQueryAttention",
        {
            "q": _a((1, 4, 64)),
            "k": _a((1, 4, 32)),
            "v": _a((1, 4, 32)),
            "pk": _a((1, 2, 8, 16)),
            "pv": _a((1, 2, 8, 16)),
        },
        {"seqlens": np.array([11], np.int32), "total": np.array(12, np.int32)},
        ("q", "k", "v", "pk", "pv", "seqlens", "total"),
        {"num_heads": 4, "kv_num_heads": 2},
        extra=("present_key", "present_value"),
    ),
    "attn_mask": Case(
        "Attention",
        {"x": _a((2, 8, 64)), "mask": _a((2, 8), np.int32, 1)},
        {"w": _a((64, 192), value=0.01), "b": _a(192)},
        ("x", "w", "b", "mask"),
        {"num_heads": 4},
    ),
    "attn_qkv": Case(
        "Attention",
        {"x": _a((2, 8, 64))},
        {"w": _a((64, 160), value=0.01), "b": _a(160)},
        ("x", "w", "b"),
        {"num_heads": 4, "qkv_hidden_sizes": [64, 64, 32]},
    ),
    "mha_bias": Case(
        "MultiHeadAttention",
        {"q": _a((2, 8, 64)), "k": _a((2, 10, 64)), "v": _a((2, 10, 32))},
        {"bias": _a(160)},
        ("q", "k", "v", "bias"),
        {"num_heads": 4},
    ),
    "skip_2d_bias": Case(
        "SkipLayerNormalization",
        {"x": _a((2, 8, 64)), "skip": _a((8, 64))},
        {"g": _a(64), "be": _a(64), "bi": _a(64)},
        ("x", "skip", "g", "be", "bi"),
        {},
    ),
    "rotary_4d": Case(
        "RotaryEmbedding",
        {"x": _a((1, 4, 6, 16))},
        {"pos": np.zeros((1, 6), np.int64), "cos": _a((8, 8)), "sin": _a((8, 8))},
        ("x", "pos", "cos", "sin"),
        {},
    ),
    "nbits8": Case(
        "MatMulNBits",
        {"a": _a((3, 2, 32))},
        {"b": _a((8, 2, 16), np.uint8, 17), "scales": _a((8, 2))},
        ("a", "b", "scales"),
        {"K": 32, "N": 8, "bits": 8, "block_size": 16},
    ),
    "fused_transA": Case(
        "FusedMatMul", {"a": _a((2, 4, 3))}, {"b": _a((4, 5))}, ("a", "b"), {"transA": 1}
    ),
    "fastgelu_nobias": Case("FastGelu", {"x": _a((2, 8, 64))}, {}, ("x",), {}),
    "qlinearadd_bcast": Case(
        "QLinearAdd",
        {"a": _a((2, 3, 4), np.uint8, 1)},
        {"b": _a((3, 1), np.uint8, 2), "s": np.float32(0.1), "z": np.uint8(0)},
        ("a", "s", "z", "b", "s", "z", "s", "z"),
        {},
        TensorProto.UINT8,
    ),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_valid_variant_is_no_finding_and_has_onnxruntimes_output_shape(name):
    case = VARIANTS[name]
    session = ort.InferenceSession(
        case.model().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    expected = session.run(None, case.feeds)[0].shape
    report = check_graph(read_onnx(case.model()))
    assert report.findings == () and report.unmodelled == ()
    from bcast.models import propagate_shapes

    assert propagate_shapes(read_onnx(case.model()))["y"] == tuple(expected)
