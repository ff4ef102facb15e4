"""The model checker on generated models: one model per finding kind.

Expected verdicts come from the specifications (ONNX Broadcasting.md, the OpenVINO op specs)
and, where onnxruntime follows them, from onnxruntime's own load/run outcome.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bcast import Shape
from bcast.core.modes import Mode
from bcast.models import Graph, Node, Rule, Severity, check_graph, propagate_shapes
from bcast.onnx.reader import read_onnx

F = TensorProto.FLOAT


def _model(nodes, inputs, inits=(), opset=17):
    outputs = [helper.make_tensor_value_info(nodes[-1].output[0], F, None)]
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _binary(op, a, b, name="n"):
    return _model([helper.make_node(op, ["a", "b"], ["y"], name=name)], [_vi("a", a), _vi("b", b)])


def _findings(model, **kwargs):
    return list(check_graph(read_onnx(model), **kwargs).findings)


def _only(model, **kwargs):
    found = _findings(model, **kwargs)
    assert len(found) == 1, [f.reason for f in found]
    return found[0]


# -- reading ---------------------------------------------------------------------------------


def test_reader_keeps_dim_params_as_symbols_and_unknown_dims_as_question_marks():
    x = helper.make_tensor_value_info("x", F, ["batch", None, 3])  # None: no value, no param
    graph = read_onnx(_model([helper.make_node("Relu", ["x"], ["y"])], [x]))
    assert str(graph.shapes["x"]) == "[batch,?,3]"


def test_reader_reads_an_input_without_shape_as_unknown_rank():
    x = helper.make_tensor_value_info("x", F, None)
    graph = read_onnx(_model([helper.make_node("Relu", ["x"], ["y"])], [x]))
    assert graph.shapes["x"].rank is None


def test_reader_uses_constant_nodes_and_initializers_as_shape_values():
    shape_const = helper.make_node(
        "Constant",
        [],
        ["target"],
        value=numpy_helper.from_array(np.array([2, 3], np.int64)),
    )
    expand = helper.make_node("Expand", ["x", "target"], ["y"], name="e")
    graph = read_onnx(_model([shape_const, expand], [_vi("x", [3])]))
    assert graph.constants["target"] == (2, 3)
    assert str(propagate_shapes(graph)["y"]) == "[2,3]"


def test_non_broadcasting_nodes_take_their_shapes_from_onnx_shape_inference():
    reshape = helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape")
    add = helper.make_node("Add", ["r", "b"], ["y"], name="add")
    inits = [numpy_helper.from_array(np.array([4, 6], np.int64), "s")]
    model = _model([reshape, add], [_vi("x", [24]), _vi("b", [5])], inits)
    found = _only(model)
    # Reshape gives [4,6] (ONNX's inference); Add [4,6] + [5] fails on the last axis.
    assert (found.node, found.axis, found.severity) == ("add", 1, Severity.ERROR)
    assert "6 vs 5" in found.reason


# -- definite errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "axis", "fragment"),
    [
        pytest.param([2, 3], [4], 1, "3 vs 4", id="static"),
        pytest.param(["batch", "seq", 64], ["seq", 32], 2, "64 vs 32", id="symbolic-rest"),
        pytest.param([0], [5], 0, "0 vs 5", id="zero"),
    ],
)
def test_incompatible_add_is_an_error_at_the_failing_axis(a, b, axis, fragment):
    found = _only(_binary("Add", a, b, name="bad_add"))
    assert (found.kind, found.node, found.op, found.axis) == (
        "incompatible",
        "bad_add",
        "Add",
        axis,
    )
    assert fragment in found.reason
    assert any("^ axis" in row for row in found.picture)


def test_incompatible_where_names_the_three_inputs():
    where = helper.make_node("Where", ["c", "x", "y"], ["z"], name="w")
    model = _model([where], [_vi("c", [2], TensorProto.BOOL), _vi("x", [3]), _vi("y", [])])
    found = _only(model)
    assert (found.kind, found.node, found.axis, found.mode) == ("incompatible", "w", 0, "numpy")
    assert "2 vs 3" in found.reason
    assert [name for name, _ in found.inputs] == ["c", "x", "y"]


def test_interval_dims_that_cannot_meet_are_an_error():
    g = Graph("m", "openvino", shapes={"a": Shape.parse("[2..4]"), "b": Shape.parse("[5]")})
    g.nodes.append(Node("add", "Add", ("a", "b"), ("y",), rule=Rule.ELEMENTWISE, mode=Mode.NUMPY))
    (found,) = check_graph(g).findings
    assert (found.kind, found.node, found.axis) == ("incompatible", "add", 0)
    assert "2..4 vs 5" in found.reason


# -- conditional findings ----------------------------------------------------------------------


def test_symbol_against_a_static_dim_fails_unless_it_is_one_or_that_value():
    found = _only(_binary("Add", ["batch", 4], [2, 4], name="pair"))
    assert (found.kind, found.severity, found.node, found.axis) == (
        "conditional",
        Severity.WARNING,
        "pair",
        0,
    )
    assert "fails unless batch ∈ {1, 2}" in found.reason


def test_binding_the_symbol_turns_the_condition_into_a_verdict():
    model = _binary("Add", ["batch", 4], [2, 4])
    assert _findings(model, dims={"batch": 2}) == []
    assert _findings(model, dims={"batch": 1}) == []
    assert _only(model, dims={"batch": 3}).kind == "incompatible"


def test_interval_against_a_static_dim_names_the_value_it_needs():
    g = Graph("m", "openvino", shapes={"a": Shape.parse("[2..4]"), "b": Shape.parse("[3]")})
    g.nodes.append(Node("add", "Add", ("a", "b"), ("y",), rule=Rule.ELEMENTWISE, mode=Mode.NUMPY))
    (found,) = check_graph(g).findings
    assert (found.kind, found.node, found.axis) == ("conditional", "add", 0)
    assert "2..4 = 3" in found.reason


def test_two_different_symbols_must_be_equal_or_one():
    found = _only(_binary("Mul", ["n"], ["m"], name="mul"))
    assert (found.kind, found.node, found.axis) == ("conditional", "mul", 0)
    assert "n, m are equal (or 1)" in found.reason


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param(["batch", 4], ["batch", 4], id="same-symbol"),
        pytest.param(["batch", 4], [1, 4], id="symbol-vs-one"),
        pytest.param([None, 4], [3, 4], id="unknown-dim-is-not-reported"),
    ],
)
def test_no_condition_where_nothing_can_fail_or_nothing_is_known(a, b):
    assert _findings(_binary("Add", a, b)) == []


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param("[?,8,1..,1..]", "[?,8,1..,1..]", id="residual-of-dynamic-spatial-dims"),
        pytest.param("[1..,4]", "[3,4]", id="unbounded-interval-vs-static"),
        pytest.param("[2..,4]", "[1..,4]", id="two-unbounded-intervals"),
    ],
)
def test_unnamed_unbounded_dims_carry_no_condition_a_user_can_act_on(a, b):
    # OpenVINO writes a dynamic dim as 1.. where ONNX writes ?: the same information, and
    # the same verdict (the ONNX export of the same net is clean).
    g = _ov_graph(a, b, mode=Mode.NUMPY)
    assert check_graph(g).findings == ()


@pytest.mark.parametrize(
    ("a", "b", "fragment"),
    [
        pytest.param("[1..64,4]", "[128,4]", "1..64 = 1", id="bounded-interval"),
        pytest.param("[N,4]", "[3,4]", "N ∈ {1, 3}", id="symbol"),
    ],
)
def test_named_or_bounded_dims_still_carry_their_condition(a, b, fragment):
    (found,) = check_graph(_ov_graph(a, b, mode=Mode.NUMPY)).findings
    assert (found.kind, found.axis) == ("conditional", 0)
    assert fragment in found.reason


# -- unidirectional rules that ONNX shape inference does not check -----------------------------


def test_prelu_slope_larger_than_x_is_a_unidirectional_error():
    prelu = helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")
    found = _only(_model([prelu], [_vi("x", [3]), _vi("slope", [2, 3])]))
    assert (found.kind, found.node, found.severity) == ("unidirectional", "prelu", Severity.ERROR)
    assert found.axis is None  # a rank error: no single axis fails
    assert "slope [2,3] must broadcast unidirectionally to X [3]" in found.reason
    assert "onnxruntime broadcasts both ways" in found.reason


def test_prelu_slope_of_channel_length_is_not_unidirectional_to_the_last_axis():
    prelu = helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")
    found = _only(_model([prelu], [_vi("x", [2, 3, 4]), _vi("slope", [3])]))
    assert (found.kind, found.node, found.axis) == ("unidirectional", "prelu", 2)
    assert "3 vs 4" in found.reason


@pytest.mark.parametrize(
    ("a", "b", "c", "attrs", "axis", "fragment"),
    [
        pytest.param([2, 3], [3, 4], [3], {}, 1, "3 vs 4", id="wrong-length"),
        pytest.param([1, 3], [3, 4], [2, 4], {}, 0, "2 vs 1", id="larger-than-Y"),
        pytest.param(
            [3, 2], [4, 3], [4, 1], {"transA": 1, "transB": 1}, 0, "4 vs 2", id="transposed"
        ),
    ],
)
def test_gemm_c_that_does_not_broadcast_to_m_n_is_an_error(a, b, c, attrs, axis, fragment):
    gemm = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", **attrs)
    found = _only(_model([gemm], [_vi("a", a), _vi("b", b), _vi("c", c)]))
    assert (found.kind, found.node, found.axis) == ("unidirectional", "gemm", axis)
    assert "Gemm C" in found.reason
    assert fragment in found.reason


def test_gemm_c_of_m_by_one_with_transposes_is_fine():
    gemm = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", transA=1, transB=1)
    assert _findings(_model([gemm], [_vi("a", [3, 2]), _vi("b", [4, 3]), _vi("c", [2, 1])])) == []


def test_gemm_c_against_a_symbolic_m_is_conditional():
    gemm = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm")
    found = _only(_model([gemm], [_vi("a", ["batch", 3]), _vi("b", [3, 4]), _vi("c", [2, 4])]))
    assert (found.kind, found.node, found.axis) == ("conditional", "gemm", 0)
    assert "batch = 2" in found.reason


# -- sizes ---------------------------------------------------------------------------------------


def _expand(target, x_shape=(1,)):
    expand = helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")
    inits = [numpy_helper.from_array(np.array(target, np.int64), "shape")]
    return _model([expand], [_vi("x", list(x_shape))], inits)


def test_huge_expand_output_is_reported_with_its_size():
    found = _only(_expand([65536, 65536, 64]))
    assert (found.kind, found.node, found.severity) == ("size", "expand", Severity.WARNING)
    assert found.axis is None
    assert "274,877,906,944 elements" in found.reason
    assert "TiB" in found.reason  # float32: 4 bytes each


def test_max_elements_sets_the_size_limit():
    assert _findings(_expand([10, 10])) == []
    found = _only(_expand([10, 10]), max_elements=99)
    assert (found.kind, found.node, found.axis) == ("size", "expand", None)
    assert "[10,10] has 100 elements" in found.reason
    assert "more than the limit of 99" in found.reason


def test_an_elementwise_output_no_bigger_than_its_input_is_not_a_size_finding():
    assert _findings(_binary("Add", [2**31, 2], [2]), max_elements=2**30) == []
    found = _only(_binary("Add", [2**31, 1], [1, 4], name="wide"), max_elements=2**30)
    assert (found.kind, found.node, found.axis) == ("size", "wide", None)
    assert "[2147483648,4]" in found.reason


def test_expand_with_a_negative_target_is_an_error():
    found = _only(_expand([-1]))
    assert (found.kind, found.node, found.axis) == ("incompatible", "expand", None)
    assert "the target shape [-1] has a negative entry" in found.reason


# -- OpenVINO graph IR (built directly; IR files are in the hostile and CLI tests) ---------------


def _ov_graph(a, b, *, mode=Mode.PDPD, axis=-1, written=True, rule=Rule.ELEMENTWISE):
    g = Graph("m.xml", "openvino", shapes={"a": Shape.parse(a), "b": Shape.parse(b)})
    g.nodes.append(
        Node(
            "add", "Add", ("a", "b"), ("y",), rule=rule, mode=mode, axis=axis, axis_written=written
        )
    )
    return g


def test_pdpd_without_an_axis_attribute_warns_that_openvino_reads_zero():
    kinds = {
        f.kind: f
        for f in check_graph(_ov_graph("[2,3,4,5]", "[4,5]", axis=0, written=False)).findings
    }
    assert set(kinds) == {"pdpd-default-axis", "incompatible"}
    warning = kinds["pdpd-default-axis"]
    assert (warning.severity, warning.node, warning.axis) == (Severity.WARNING, "add", None)
    assert "OpenVINO reads it as axis 0" in warning.reason
    assert "with axis -1 the result would be [2,3,4,5]" in warning.reason
    error = kinds["incompatible"]  # OpenVINO's axis 0: [4,5] against [2,3]
    assert (error.node, error.axis) == ("add", 0)
    assert "4 vs 2" in error.reason


def test_pdpd_without_an_axis_still_warns_when_both_axes_agree():
    (found,) = check_graph(_ov_graph("[2,3]", "[2,3]", axis=0, written=False)).findings
    assert (found.kind, found.node, found.axis) == ("pdpd-default-axis", "add", None)
    assert "same result" in found.reason


def test_pdpd_trailing_ones_past_a_are_accepted_but_openvino_inference_rejects_them():
    (found,) = check_graph(_ov_graph("[2,3,4]", "[3,4,1]", axis=1)).findings
    assert (found.kind, found.severity) == ("pdpd-trailing-ones", Severity.WARNING)
    assert (found.node, found.axis) == ("add", None)  # the rank, not one axis, is at fault
    assert "B [3,4,1] at axis 1 reaches past A [2,3,4]" in found.reason
    assert "1 + 3 > 3" in found.reason


def test_pdpd_one_against_zero_is_accepted_but_openvino_inference_rejects_it():
    # SEMANTICS §2.9 (O77/O228): OpenVINO's pre-check B > A rejects B=1 against A=0.
    (found,) = check_graph(_ov_graph("[2,0]", "[1]", axis=1)).findings
    assert (found.kind, found.node, found.axis, found.severity) == (
        "pdpd-one-against-zero",
        "add",
        1,
        Severity.WARNING,
    )
    assert "B's 1 meets A's 0 at axis 1" in found.reason
    assert "OpenVINO will not load it" in found.reason


def test_explicit_axes_mapping_with_duplicates_is_an_error():
    g = Graph(
        "m.xml",
        "openvino",
        shapes={"d": Shape.parse("[2,2]")},
        constants={"t": (2, 2, 3)},
    )
    g.nodes.append(
        Node(
            "bc",
            "Broadcast",
            ("d", "t", "m"),
            ("y",),
            rule=Rule.BROADCAST,
            mode=Mode.EXPLICIT,
            axes_mapping=(1, 1),
        )
    )
    (found,) = check_graph(g).findings
    assert (found.kind, found.node, found.axis) == ("axes-mapping-duplicates", "bc", 1)
    assert "strictly increasing" in found.reason


def test_broadcast_numpy_mode_is_one_directional_data_to_target():
    g = Graph("m.xml", "openvino", shapes={"d": Shape.parse("[3]")}, constants={"t": (2, 1)})
    g.nodes.append(
        Node("bc", "Broadcast", ("d", "t"), ("y",), rule=Rule.BROADCAST, mode=Mode.NUMPY)
    )
    (found,) = check_graph(g).findings
    assert (found.kind, found.node, found.axis) == ("incompatible", "bc", 1)
    assert found.mode == "unidirectional"
    assert "3 vs 1 (data must equal target or be 1)" in found.reason


def test_select_pdpd_merges_else_into_then_first():
    g = Graph(
        "m.xml",
        "openvino",
        shapes={k: Shape.parse(v) for k, v in {"c": "[2,3,4]", "t": "[3,4]", "e": "[4]"}.items()},
    )
    g.nodes.append(
        Node("sel", "Select", ("c", "t", "e"), ("y",), rule=Rule.SELECT, mode=Mode.PDPD, axis=-1)
    )
    (found,) = check_graph(g).findings
    # 'then' must be the largest: cond [2,3,4] does not fit into then [3,4] (SEMANTICS 1.7).
    assert (found.kind, found.node, found.axis) == ("incompatible", "sel", None)
    assert "[2,3,4] has rank 3, more than A [3,4]" in found.reason


def test_cycles_are_rejected():
    from bcast.models import ModelError

    g = Graph("m", "onnx", shapes={})
    g.nodes.append(Node("a", "Relu", ("y",), ("x",)))
    g.nodes.append(Node("b", "Relu", ("x",), ("y",)))
    with pytest.raises(ModelError, match="cycle"):
        check_graph(g)


# -- the checker's verdict equals onnxruntime's where onnxruntime follows the spec -------------


_ORT_DTYPES = {
    "tensor(bool)": bool,
    "tensor(uint8)": np.uint8,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(string)": object,
}


def _ort_error(model):
    """Load and run ``model`` in onnxruntime (symbolic dims set to 1); its error, or None."""
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        feeds = {}
        for info in session.get_inputs():
            shape = [d if isinstance(d, int) else 1 for d in info.shape]
            feeds[info.name] = np.ones(shape, dtype=_ORT_DTYPES.get(info.type, np.float32))
        session.run(None, feeds)
    except Exception as err:
        return str(err)
    return None


def _ort_outcome(model):
    return "runs" if _ort_error(model) is None else "fails"


def _where(c, x, y):
    node = helper.make_node("Where", ["c", "x", "y"], ["z"], name="w")
    return _model([node], [_vi("c", c, TensorProto.BOOL), _vi("x", x), _vi("y", y)])


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(_binary("Add", [3], [2]), id="add-3-2"),
        pytest.param(_binary("Add", [2, 1], [3]), id="add-ok"),
        pytest.param(_binary("Add", [0], [1]), id="add-zero-one"),
        pytest.param(_binary("Add", [0], [5]), id="add-zero-five"),
        pytest.param(_where([2, 1], [3], []), id="where-ok"),
        pytest.param(_where([2], [3], []), id="where-bad"),
        pytest.param(_expand([2, 1], (3,)), id="expand-ok"),
        pytest.param(_expand([2], (3,)), id="expand-bad"),
        pytest.param(_expand([2, 1, 6], (3, 1)), id="expand-rank-up"),
    ],
)
def test_checker_verdict_equals_onnxruntime_where_it_follows_the_spec(model):
    errors = [f for f in _findings(model) if f.severity is Severity.ERROR]
    assert ("fails" if errors else "runs") == _ort_outcome(model)


def test_prelu_is_where_onnxruntime_departs_from_the_spec():
    prelu = helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")
    model = _model([prelu], [_vi("x", [3]), _vi("slope", [2, 3])])
    assert _ort_outcome(model) == "runs"  # onnxruntime broadcasts PRelu both ways
    found = _only(model)
    assert found.kind == "unidirectional"  # the ONNX spec: slope is unidirectional to X


def test_example_models_build_and_check(tmp_path: Path):
    import runpy

    root = Path(__file__).resolve().parents[2]
    runpy.run_path(str(root / "examples" / "build_models.py"), run_name="not_main")["main"](
        ["build_models.py", str(tmp_path)]
    )
    block = check_graph(read_onnx(tmp_path / "block.onnx"))
    assert block.findings == ()
    assert block.nodes == 14
    assert {f.kind for f in check_graph(read_onnx(tmp_path / "huge_expand.onnx")).findings} == {
        "size"
    }
    assert onnx.load(str(tmp_path / "block.onnx")).graph.name == "block"
    broken = onnx.load(str(tmp_path / "block_broken.onnx"))
    assert _ort_outcome(broken) == "fails"  # onnxruntime refuses the 64-vs-32 beta
    findings = {f.node: f for f in check_graph(read_onnx(broken)).findings}
    assert set(findings) == {"ln_beta", "attn_mask"}
    beta, mask = findings["ln_beta"], findings["attn_mask"]
    assert (beta.kind, beta.axis) == ("incompatible", 2)
    assert "64 vs 32" in beta.reason
    assert (mask.kind, mask.axis) == ("conditional", 3)
    assert "kv_seq" in mask.reason and "seq" in mask.reason


# -- Expand targets computed in the graph (ONNX data propagation) -----------------------------


def _expand_by(nodes, inputs, inits=()):
    expand = helper.make_node("Expand", ["x", "target"], ["y"], name="ex")
    return _model([*nodes, expand], [_vi("x", [3, 1]), *inputs], inits)


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _shape_of_t(t_shape):
    return _expand_by(
        [helper.make_node("Shape", ["t"], ["target"], name="shp")], [_vi("t", t_shape)]
    )


def _concat_target():
    concat = helper.make_node("Concat", ["c1", "c2"], ["target"], name="cat", axis=0)
    return _expand_by([concat], [], [_ints("c1", [2]), _ints("c2", [5])])


def _gathered_target():
    # target = [t.shape[0], 2]: the batch symbol travels through Gather, Unsqueeze and Concat
    nodes = [
        helper.make_node("Shape", ["t"], ["s"], name="shp"),
        helper.make_node("Gather", ["s", "i0"], ["g"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["g", "axes"], ["u"], name="unsq"),
        helper.make_node("Concat", ["u", "two"], ["target"], name="cat", axis=0),
    ]
    inits = [_ints("i0", 0), _ints("axes", [0]), _ints("two", [2])]
    return _expand_by(nodes, [_vi("t", ["batch", 7])], inits)


@pytest.mark.parametrize(
    ("model", "axis", "target"),
    [
        pytest.param(_shape_of_t([2, 2, 4]), 1, "[2,2,4]", id="shape-of-static"),
        pytest.param(_concat_target(), 0, "[2,5]", id="concat-of-constants"),
        pytest.param(_shape_of_t(["batch", 2, 4]), 1, "[batch,2,4]", id="shape-of-symbolic"),
    ],
)
def test_expand_target_computed_in_the_graph_is_checked(model, axis, target):
    assert _ort_outcome(model) == "fails"  # onnxruntime: 3 against 2
    found = _only(model)
    assert (found.kind, found.node, found.op, found.axis, found.severity) == (
        "incompatible",
        "ex",
        "Expand",
        axis,
        Severity.ERROR,
    )
    assert "3 vs 2" in found.reason
    assert [str(shape) for _, shape in found.inputs] == ["[3,1]", target]


def test_a_symbol_in_a_computed_target_gives_a_condition():
    model = _gathered_target()
    graph = read_onnx(model)
    assert str(graph.shape_values["target"]) == "[batch,2]"
    found = _only(model)
    assert (found.kind, found.node, found.axis) == ("conditional", "ex", 0)
    assert "batch ∈ {1, 3}" in found.reason
    assert _ort_outcome(model) == "runs"  # batch = 1 fits
    assert _only(model, dims={"batch": 4}).kind == "incompatible"


def test_reading_computed_targets_leaves_the_model_unchanged():
    model = _shape_of_t(["batch", 2, 4])
    before = model.SerializeToString()
    graph = read_onnx(model)
    assert str(graph.shape_values["target"]) == "[batch,2,4]"
    assert model.SerializeToString() == before  # the probes are gone again
    assert [n.name for n in graph.nodes] == ["shp", "ex"]


def test_a_computed_target_that_fits_gives_the_broadcast_shape():
    model = _shape_of_t([2, 1, 4])
    assert _findings(model) == []
    assert _ort_outcome(model) == "runs"
    assert str(propagate_shapes(read_onnx(model))["y"]) == "[2,3,4]"


# -- subgraphs and model-local functions ------------------------------------------------------


def _if_model(then_nodes, a=(2, 3), b=(4,)):
    then = helper.make_graph(then_nodes, "then", [], [_vi(then_nodes[-1].output[0], None)])
    other = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["e"], name="id")], "else", [], [_vi("e", None)]
    )
    node = helper.make_node("If", ["c"], ["y"], name="if_node", then_branch=then, else_branch=other)
    inputs = [_vi("c", [], TensorProto.BOOL), _vi("a", list(a)), _vi("b", list(b))]
    return _model([node], inputs)


def test_an_if_branch_is_checked_with_the_outer_values_it_reads():
    model = _if_model([helper.make_node("Add", ["a", "b"], ["t"], name="add")])
    assert "Incompatible dimensions" in _ort_error(model)  # refused at load: branch inference
    found = _only(model)
    assert (found.kind, found.node, found.op, found.axis) == (
        "incompatible",
        "if_node/then_branch/add",
        "Add",
        1,
    )
    assert "3 vs 4" in found.reason
    assert check_graph(read_onnx(model)).nodes == 3  # If + one node per branch


def test_a_nested_body_sees_values_computed_in_the_enclosing_branch():
    inner = helper.make_graph(
        [helper.make_node("Mul", ["r", "b"], ["q"], name="mul")], "inner", [], [_vi("q", None)]
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["r"], ["w"], name="id2")], "else", [], [_vi("w", None)]
    )
    then_nodes = [
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("If", ["c"], ["t"], name="inner_if", then_branch=inner, else_branch=other),
    ]
    model = _if_model(then_nodes)
    assert _ort_outcome(model) == "fails"
    found = _only(model)
    assert (found.node, found.axis) == ("if_node/then_branch/inner_if/then_branch/mul", 1)
    assert "3 vs 4" in found.reason


def test_a_loop_body_is_checked():
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
            helper.make_node("Add", ["a", "b"], ["s"], name="add"),
        ],
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL)],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("s", None)],
    )
    loop = helper.make_node("Loop", ["n", ""], ["y"], name="loop", body=body)
    model = _model([loop], [_vi("a", [2, 3]), _vi("b", [4])], [_ints("n", 2)])
    assert _ort_outcome(model) == "fails"
    found = _only(model)
    assert (found.kind, found.node, found.axis) == ("incompatible", "loop/body/add", 1)


def _function_model(a, b, *, body_op="Add"):
    body = [helper.make_node(body_op, ["p", "q"], ["r"], name="add")]
    function = helper.make_function(
        "local", "F", ["p", "q"], ["r"], body, [helper.make_opsetid("", 17)]
    )
    call = helper.make_node("F", ["a", "b"], ["y"], name="call", domain="local")
    graph = helper.make_graph([call], "g", [_vi("a", a), _vi("b", b)], [_vi("y", None)])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
        functions=[function],
    )
    model.ir_version = 8
    return model


def test_a_model_local_function_is_checked_with_the_callers_shapes():
    model = _function_model([2, 3], [4])
    assert "Incompatible dimensions" in _ort_error(model)
    found = _only(model)
    assert (found.kind, found.node, found.op, found.axis) == (
        "incompatible",
        "call/F/add",
        "Add",
        1,
    )
    assert "3 vs 4" in found.reason
    assert [str(shape) for _, shape in found.inputs] == ["[2,3]", "[4]"]


def test_a_function_called_with_a_symbol_binds_it_inside():
    model = _function_model(["batch", 3], [2, 3])
    found = _only(model)
    assert (found.kind, found.node, found.axis) == ("conditional", "call/F/add", 0)
    assert "batch ∈ {1, 2}" in found.reason
    assert _only(model, dims={"batch": 5}).kind == "incompatible"
    assert _findings(_function_model([2, 3], [3])) == []


def test_a_function_called_with_unknown_shapes_is_reported_as_not_checked():
    model = _function_model(None, [4])
    found = _only(model)
    assert (found.kind, found.severity, found.node, found.op, found.axis) == (
        "not-checked",
        Severity.INFO,
        "call",
        "F",
        None,
    )
    assert "model-local function local.F is not checked" in found.reason
    assert "'a'" in found.reason
    assert not check_graph(read_onnx(model)).failed  # info only


def test_a_function_that_calls_itself_is_not_followed():
    function = helper.make_function(
        "local",
        "F",
        ["p"],
        ["r"],
        [helper.make_node("F", ["p"], ["r"], name="again", domain="local")],
        [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
    )
    call = helper.make_node("F", ["a"], ["y"], name="call", domain="local")
    graph = helper.make_graph([call], "g", [_vi("a", [2])], [_vi("y", None)])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
        functions=[function],
    )
    found = _only(model)
    assert (found.kind, found.node, found.axis) == ("not-checked", "call/F/again", None)
    assert "calls itself" in found.reason


# -- operators whose schema says they broadcast -------------------------------------------------


@pytest.mark.parametrize(
    ("op", "elem", "attrs"),
    [
        pytest.param("BitShift", TensorProto.UINT8, {"direction": "LEFT"}, id="BitShift"),
        pytest.param("StringConcat", TensorProto.STRING, {}, id="StringConcat"),
        pytest.param("Mod", TensorProto.INT32, {}, id="Mod"),
        pytest.param("BitwiseAnd", TensorProto.INT32, {}, id="BitwiseAnd"),
        pytest.param("GreaterOrEqual", F, {}, id="GreaterOrEqual"),
        pytest.param("LessOrEqual", F, {}, id="LessOrEqual"),
        pytest.param("Max", F, {}, id="Max"),
        pytest.param("Sum", F, {}, id="Sum"),
        pytest.param("Mean", F, {}, id="Mean"),
    ],
)
def test_multidirectional_operators_of_every_kind_are_checked(op, elem, attrs):
    node = helper.make_node(op, ["a", "b"], ["y"], name="op", **attrs)
    model = _model([node], [_vi("a", [2, 3], elem), _vi("b", [4], elem)], opset=20)
    assert "Incompatible dimensions" in _ort_error(model)
    found = _only(model)
    assert (found.kind, found.node, found.op, found.axis, found.mode) == (
        "incompatible",
        "op",
        op,
        1,
        "numpy",
    )
    assert "3 vs 4" in found.reason


def _normalization(op, x, scale, bias=None, axis=-1):
    inputs = ["x", "s"] + (["b"] if bias is not None else [])
    node = helper.make_node(op, inputs, ["y"], name="norm", axis=axis)
    infos = [_vi("x", x), _vi("s", scale)] + ([_vi("b", bias)] if bias is not None else [])
    return _model([node], infos, opset=23)


@pytest.mark.parametrize(
    ("op", "x", "scale", "bias", "axis", "fragment"),
    [
        pytest.param("LayerNormalization", [2, 3, 4], [5], [4], 2, "5 vs 4", id="ln-scale"),
        pytest.param("LayerNormalization", [2, 3, 4], [4], [2, 1], 1, "2 vs 3", id="ln-bias"),
        pytest.param("RMSNormalization", [2, 3, 4], [2, 1], None, 1, "2 vs 3", id="rms"),
        pytest.param(
            "RMSNormalization", [2, 3, 4], [1, 1, 1, 1], None, None, "rank 4", id="rms-rank"
        ),
    ],
)
def test_normalization_scale_and_bias_must_broadcast_unidirectionally_to_x(
    op, x, scale, bias, axis, fragment
):
    model = _normalization(op, x, scale, bias)
    assert "Scale and (optional) bias must match" in _ort_error(model)
    found = _only(model)
    assert (found.kind, found.node, found.op, found.axis, found.severity) == (
        "unidirectional",
        "norm",
        op,
        axis,
        Severity.ERROR,
    )
    assert "must broadcast unidirectionally to X [2,3,4]" in found.reason
    assert fragment in found.reason


@pytest.mark.parametrize(
    ("op", "scale", "axis"),
    [
        pytest.param("LayerNormalization", [3, 4], -1, id="ln-wider-than-normalized"),
        pytest.param("LayerNormalization", [3, 1], -1, id="ln-channel"),
        pytest.param("RMSNormalization", [2, 1, 4], -1, id="rms-leading"),
        pytest.param("RMSNormalization", [], 1, id="rms-scalar"),
    ],
)
def test_normalization_scale_unidirectional_to_x_but_not_to_the_normalized_shape_runs(
    op, scale, axis
):
    # RMSNormalization's input text says "broadcastable to the normalized shape"; the operator
    # texts and onnxruntime go by X (docs/peer-differences.md).
    model = _normalization(op, [2, 3, 4], scale, scale if op == "LayerNormalization" else None)
    assert _ort_error(model) is None
    assert _findings(model) == []


def test_swiglu_needs_identical_shapes():
    # onnxruntime has no SwiGLU-28 kernel; ONNX's own shape inference pins the spec.
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], name="swiglu")
    model = _model([node], [_vi("a", [2, 3]), _vi("b", [3])], opset=28)
    with pytest.raises(onnx.shape_inference.InferenceError):
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    found = _only(model)
    assert (found.kind, found.node, found.axis, found.mode) == (
        "incompatible",
        "swiglu",
        None,
        "none",
    )
    assert "shapes must be identical" in found.reason


# -- opsets 1 and 6: the `broadcast` attribute ---------------------------------------------------


def _legacy(op, a, b, opset=6, inputs=("a", "b"), **attrs):
    node = helper.make_node(op, list(inputs), ["y"], name="old", **attrs)
    shapes = {"a": a, "b": b, "c": None}
    infos = [_vi(name, shapes[name]) for name in inputs]
    return _model([node], infos, opset=opset)


def test_onnxruntime_refuses_opset_6_so_the_spec_decides():
    # onnxruntime implements opset 7 and later only; the expected verdicts below come from
    # onnx.defs.get_schema("Add", 6).doc ("Attribute `broadcast=1` needs to be passed").
    error = _ort_error(_legacy("Add", [2, 3], [2, 3]))
    assert "Could not find an implementation for Add(6)" in error
    assert "broadcast=1` needs to be passed" in onnx.defs.get_schema("Add", 6).doc


@pytest.mark.parametrize(
    ("op", "a", "b", "attrs", "axis", "fragment"),
    [
        pytest.param("Add", [2, 3], [3], {}, None, "identical", id="no-attribute-is-0"),
        pytest.param("Mul", [2, 3], [2, 1], {}, 1, "3 vs 1", id="same-rank-no-attribute"),
        pytest.param("Add", [2, 3], [2], {"broadcast": 1}, 1, "2 vs 3", id="suffix"),
        pytest.param("Sub", [2, 3, 4], [4], {"broadcast": 1, "axis": 1}, 1, "4 vs 3", id="axis"),
        pytest.param("Equal", [2, 3], [3], {"broadcast": 0}, None, "identical", id="explicit-0"),
    ],
)
def test_opset_6_elementwise_follows_the_broadcast_attribute(op, a, b, attrs, axis, fragment):
    found = _only(_legacy(op, a, b, **attrs))
    assert (found.kind, found.node, found.op, found.axis) == ("incompatible", "old", op, axis)
    assert f"ONNX {op} before opset 7" in found.reason
    assert fragment in found.reason
    if attrs.get("broadcast"):
        where = f"from axis {attrs['axis']}" if "axis" in attrs else "(suffix matching)"
        assert where in found.reason


@pytest.mark.parametrize(
    ("a", "b", "attrs"),
    [
        pytest.param([2, 3], [3], {"broadcast": 1}, id="suffix"),
        pytest.param([2, 3, 4], [3], {"broadcast": 1, "axis": 1}, id="axis"),
        pytest.param([2, 3], [2, 3], {}, id="identical"),
        pytest.param([2, 3, 4], [1, 4], {"broadcast": 1}, id="one-in-b-read-as-pdpd"),
    ],
)
def test_opset_6_elementwise_that_fits(a, b, attrs):
    assert _findings(_legacy("Add", a, b, **attrs)) == []


def test_opset_7_broadcasts_without_the_attribute():
    model = _legacy("Add", [2, 3], [3], opset=7)
    assert _ort_outcome(model) == "runs"
    assert _findings(model) == []


def test_opset_6_gemm_c_must_be_m_by_n_without_broadcast():
    inputs = ("a", "b", "c")
    node = helper.make_node("Gemm", list(inputs), ["y"], name="gemm")
    model = _model([node], [_vi("a", [2, 3]), _vi("b", [3, 4]), _vi("c", [4])], opset=6)
    found = _only(model)
    assert (found.kind, found.node, found.axis) == ("incompatible", "gemm", None)
    assert "Gemm C [4] must have the shape (M, N) = [2,4]" in found.reason
    with_broadcast = helper.make_node("Gemm", list(inputs), ["y"], name="gemm", broadcast=1)
    model = _model([with_broadcast], [_vi("a", [2, 3]), _vi("b", [3, 4]), _vi("c", [4])], opset=6)
    assert _findings(model) == []


def test_opset_6_sum_needs_identical_shapes():
    node = helper.make_node("Sum", ["a", "b"], ["y"], name="sum")
    found = _only(_model([node], [_vi("a", [2, 3]), _vi("b", [3])], opset=6))
    assert (found.kind, found.node, found.axis, found.mode) == ("incompatible", "sum", None, "none")


# -- OpenVINO IR files ---------------------------------------------------------------------------


@pytest.fixture
def ov():
    return pytest.importorskip("openvino")


def _read_ir(path):
    from bcast.openvino.reader import read_ir

    return read_ir(path)


def test_ir_interval_dims_come_from_openvino_and_give_conditions(ov, tmp_path):
    a = ov.opset13.parameter(ov.PartialShape([ov.Dimension(2, 4), 5]), np.float32, name="a")
    b = ov.opset13.parameter([3, 5], np.float32, name="b")
    add = ov.opset13.add(a, b, name="add")
    ov.save_model(ov.Model([add], [a, b], "m"), tmp_path / "m.xml")
    graph = _read_ir(tmp_path / "m.xml")
    assert str(graph.shapes["a"]) == "[2..4,5]"
    (found,) = check_graph(graph).findings
    assert (found.kind, found.node, found.op, found.axis) == ("conditional", "add", "Add", 0)
    assert "2..4 = 3" in found.reason


def test_ir_pdpd_add_without_axis_attribute(ov, tmp_path):
    from openvino.utils.node_factory import NodeFactory

    a = ov.opset13.parameter([2, 3], np.float32, name="a")
    b = ov.opset13.parameter([2, 3], np.float32, name="b")
    add = NodeFactory("opset13").create(
        "Add",
        [a.output(0), b.output(0)],
        {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": 0},
    )
    add.set_friendly_name("add")
    path = tmp_path / "m.xml"
    ov.save_model(ov.Model([add], [a, b], "m"), path)
    written = path.read_text()
    assert 'auto_broadcast.auto_broadcast_axis="0"' in written
    assert _read_ir(path).nodes[-1].axis_written is True
    path.write_text(written.replace(' auto_broadcast.auto_broadcast_axis="0"', ""))
    node = next(n for n in _read_ir(path).nodes if n.name == "add")
    assert (node.mode, node.axis, node.axis_written) == (Mode.PDPD, 0, False)
    (found,) = check_graph(_read_ir(path)).findings
    assert (found.kind, found.node, found.axis) == ("pdpd-default-axis", "add", None)
    assert "OpenVINO reads it as axis 0" in found.reason
    assert "here both give the same result" in found.reason


def test_ir_broadcast_explicit_with_duplicate_axes_mapping(ov, tmp_path):
    data = ov.opset13.parameter([2, 2], np.float32, name="data")
    target = ov.opset13.constant(np.array([2, 2, 3], np.int64), name="target")
    axes = ov.opset13.constant(np.array([1, 1], np.int64), name="axes")
    node = ov.opset3.broadcast(data, target, axes, broadcast_spec="explicit", name="bc")
    ov.save_model(ov.Model([node], [data], "m"), tmp_path / "m.xml")
    (found,) = check_graph(_read_ir(tmp_path / "m.xml")).findings
    assert (found.kind, found.node, found.op, found.axis) == (
        "axes-mapping-duplicates",
        "bc",
        "Broadcast",
        1,
    )
    assert "axes_mapping [1, 1] repeats target axis 1" in found.reason


def test_ir_pdpd_trailing_ones_that_openvino_refuses_to_load(ov, tmp_path):
    from openvino.utils.node_factory import NodeFactory

    a = ov.opset13.parameter([2, 3, 4], np.float32, name="a")
    b = ov.opset13.parameter([3, 4], np.float32, name="b")
    add = NodeFactory("opset13").create(
        "Add",
        [a.output(0), b.output(0)],
        {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": 1},
    )
    add.set_friendly_name("add")
    path = tmp_path / "m.xml"
    ov.save_model(ov.Model([add], [a, b], "m"), path)
    # Give B a trailing 1: [3,4] -> [3,4,1] (its Parameter and the Add's input port only:
    # the Add's output stays [2,3,4], what the specification gives).
    _set_parameter_shape(path, "b", [3, 4, 1])
    findings = {f.kind: f for f in check_graph(_read_ir(path)).findings}
    assert set(findings) == {"peer-rejects", "pdpd-trailing-ones"}
    rejects = findings["peer-rejects"]
    assert (rejects.severity, rejects.node, rejects.op, rejects.axis) == (
        Severity.INFO,
        "add",
        "Add",
        None,
    )
    assert "OpenVINO refuses to load this model" in rejects.reason
    assert "checked from the XML" in rejects.reason
    trailing = findings["pdpd-trailing-ones"]
    assert (trailing.node, trailing.axis) == ("add", None)
    assert "1 + 3 > 3" in trailing.reason


def _set_parameter_shape(path, name, dims):
    """Give Parameter ``name`` new dims in the IR, on its port and on every port it feeds."""
    import xml.etree.ElementTree as ET

    tree = ET.parse(path)
    layers = {layer.get("id"): layer for layer in tree.getroot().iter("layer")}
    layer = next(layer for layer in layers.values() if layer.get("name") == name)
    layer.find("data").set("shape", ",".join(map(str, dims)))
    ports = [layer.find("output/port")]
    for edge in tree.getroot().iter("edge"):
        if edge.get("from-layer") == layer.get("id"):
            user = layers[edge.get("to-layer")]
            ports += [p for p in user.find("input") if p.get("id") == edge.get("to-port")]
    for port in ports:
        for dim in port.findall("dim"):
            port.remove(dim)
        for value in dims:
            ET.SubElement(port, "dim").text = str(value)
    tree.write(path)


def _set_output_shape(path, name, dims):
    """Give layer ``name``'s first output port new dims in the IR."""
    import xml.etree.ElementTree as ET

    tree = ET.parse(path)
    layer = next(layer for layer in tree.getroot().iter("layer") if layer.get("name") == name)
    port = layer.find("output/port")
    for dim in port.findall("dim"):
        port.remove(dim)
    for value in dims:
        ET.SubElement(port, "dim").text = str(value)
    tree.write(path)


def _openvino_refuses(ov, path):
    try:
        ov.Core().read_model(str(path))
    except RuntimeError:
        return True
    return False


def test_ir_pdpd_one_against_zero_that_openvino_refuses_to_load(ov, tmp_path):
    from openvino.utils.node_factory import NodeFactory

    a = ov.opset13.parameter([2, 3], np.float32, name="a")
    b = ov.opset13.parameter([1], np.float32, name="b")
    add = NodeFactory("opset13").create(
        "Add",
        [a.output(0), b.output(0)],
        {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": 1},
    )
    add.set_friendly_name("add")
    path = tmp_path / "m.xml"
    ov.save_model(ov.Model([add], [a, b], "m"), path)
    _set_parameter_shape(path, "a", [2, 0])  # B's 1 now meets A's 0 at axis 1
    _set_output_shape(path, "add", [2, 0])  # the file stays self-consistent: A's shape
    assert _openvino_refuses(ov, path)  # its pre-check B > A (SEMANTICS §2.9)
    findings = {f.kind: f for f in check_graph(_read_ir(path)).findings}
    assert set(findings) == {"peer-rejects", "pdpd-one-against-zero"}
    assert (findings["peer-rejects"].node, findings["peer-rejects"].severity) == (
        "add",
        Severity.INFO,
    )
    found = findings["pdpd-one-against-zero"]
    assert (found.node, found.op, found.axis, found.severity) == (
        "add",
        "Add",
        1,
        Severity.WARNING,
    )
    assert "B's 1 meets A's 0 at axis 1" in found.reason


@pytest.mark.parametrize(
    ("attrs", "shapes", "changed", "axis", "fragment"),
    [
        pytest.param(
            {"auto_broadcast": "numpy"},
            {"c": [2, 3], "t": [2, 3], "e": [3]},
            ("e", [4]),
            1,
            "3 vs 4",
            id="numpy",
        ),
        pytest.param(
            {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": -1},
            {"c": [3, 4], "t": [2, 3, 4], "e": [4]},
            ("c", [2, 3, 4, 4]),
            None,
            "rank 4, more than A [2,3,4]",
            id="pdpd-cond-larger-than-then",
        ),
    ],
)
def test_ir_select_that_openvino_refuses(ov, tmp_path, attrs, shapes, changed, axis, fragment):
    from openvino.utils.node_factory import NodeFactory

    params = [
        ov.opset13.parameter(dims, np.bool_ if name == "c" else np.float32, name=name)
        for name, dims in shapes.items()
    ]
    select = NodeFactory("opset13").create("Select", [p.output(0) for p in params], attrs)
    select.set_friendly_name("sel")
    path = tmp_path / "m.xml"
    ov.save_model(ov.Model([select], params, "m"), path)
    _set_parameter_shape(path, *changed)
    assert _openvino_refuses(ov, path)
    findings = {f.kind: f for f in check_graph(_read_ir(path)).findings}
    assert set(findings) == {"peer-rejects", "incompatible"}
    found = findings["incompatible"]
    assert (found.node, found.op, found.axis, found.severity) == (
        "sel",
        "Select",
        axis,
        Severity.ERROR,
    )
    assert fragment in found.reason


# -- IR: the file's own claims, and a peer's refusal ------------------------------------------


def _declared_graph(declared: str, *, refused: bool) -> Graph:
    # An IR that OpenVINO refused: shapes are the XML's port dims (Graph.declared).
    g = Graph("m.xml", "openvino", shapes={"a": Shape.parse("[1,?,1]"), "b": Shape((1, 1, 3))})
    g.declared = refused
    g.nodes.append(
        Node(
            "mul",
            "Multiply",
            ("a", "b"),
            ("y",),
            rule=Rule.ELEMENTWISE,
            mode=Mode.NUMPY,
            output_shapes=(Shape.parse(declared),),
        )
    )
    return g


def test_a_broadcast_that_contradicts_the_declared_output_is_an_error_at_that_axis():
    # [1,?,1] * [1,1,3] broadcasts to [1,?,3]; the file says [1,?,4] (a Const cut short).
    (found,) = check_graph(_declared_graph("[1,?,4]", refused=True)).findings
    assert (found.severity, found.kind, found.node, found.axis) == (
        Severity.ERROR,
        "declared-shape",
        "mul",
        2,
    )
    assert "3 vs 4" in found.reason


def test_declared_outputs_that_agree_give_no_finding():
    assert check_graph(_declared_graph("[1,?,3]", refused=True)).findings == ()


def test_a_peer_inference_is_not_held_against_the_broadcast():
    # Without Graph.declared the output shapes are the peer's inference: no such check.
    assert check_graph(_declared_graph("[1,?,4]", refused=False)).findings == ()


def _refused(note_only: bool) -> Graph:
    from bcast.models import Finding

    g = _ov_graph("[2,3]", "[4]" if not note_only else "[3]", mode=Mode.NUMPY)
    g.notes.append(
        Finding(Severity.INFO, "peer-rejects", "", "Add", (), None, None, "OpenVINO refuses")
    )
    return g


def test_a_refusal_bcast_cannot_explain_is_an_error_never_a_pass():
    report = check_graph(_refused(note_only=True))
    assert [(f.kind, f.severity) for f in report.findings] == [("peer-rejects", Severity.ERROR)]
    assert not report.ok


def test_a_refusal_bcast_explains_stays_a_note_beside_the_error():
    report = check_graph(_refused(note_only=False))
    kinds = {f.kind: f.severity for f in report.findings}
    assert kinds == {"peer-rejects": Severity.INFO, "incompatible": Severity.ERROR}


# -- IR: the inputs' dims get names, and OpenVINO carries them -------------------------------


def _ir_two_inputs(ov, tmp_path):
    # x [?,4] feeds a Relu (shape-preserving) and is added to itself, and to y [?,4].
    x = ov.opset13.parameter([-1, 4], np.float32, name="x")
    y = ov.opset13.parameter([-1, 4], np.float32, name="y")
    relu = ov.opset13.relu(x)
    same = ov.opset13.add(relu, x)
    same.set_friendly_name("residual")
    other = ov.opset13.add(same, y)
    other.set_friendly_name("with_y")
    path = tmp_path / "m.xml"
    ov.save_model(ov.Model([other], [x, y], "m"), path)
    return path


def test_ir_dims_from_one_input_are_the_same_and_two_inputs_are_related(ov, tmp_path):
    graph = _read_ir(_ir_two_inputs(ov, tmp_path))
    assert str(graph.shapes["x"]) == "[x.0,4]"
    found = check_graph(graph).findings
    # The residual add of x with relu(x): one source, no condition. x with y: their first
    # dims must agree, a relation between inputs that bcast named itself (info, exit 0).
    assert [(f.node, f.kind, f.severity, f.axis) for f in found] == [
        ("with_y", "conditional", Severity.INFO, 0)
    ]
    assert "x.0, y.0 are equal (or 1)" in found[0].reason


def test_ir_dim_names_bind_with_dim(ov, tmp_path):
    graph = _read_ir(_ir_two_inputs(ov, tmp_path))
    (found,) = check_graph(graph, dims={"x.0": 3, "y.0": 2}).findings
    assert (found.node, found.kind, found.severity, found.axis) == (
        "with_y",
        "incompatible",
        Severity.ERROR,
        0,
    )


# -- dim expressions (torch's dynamo exporter writes dims such as Min(64, s41)) --------------


_UP_TO = 10_000  # the sizes NumPy is asked about here (bcast's answers hold for every size)


def _numpy_failing(sizes, *, one_way=False):
    """The values of the symbol, in 1.._UP_TO, at which NumPy refuses the sizes ``sizes(v)``."""
    failing = set()
    for v in range(1, _UP_TO + 1):
        shapes = [(n,) for n in sizes(v)]
        try:
            out = np.broadcast_shapes(*shapes)
        except ValueError:
            failing.add(v)
            continue
        if one_way and out != shapes[0]:
            failing.add(v)
    return failing


def test_reader_records_the_expression_behind_a_dim_param():
    graph = read_onnx(_binary("Add", ["s0", 8], ["Min(64,  s0)", 8]))
    (name,) = graph.expressions
    assert graph.shapes["b"].dims[0].name == name
    assert str(graph.expressions[name]) == "Min(64, s0)"
    assert graph.expressions[name].evaluate({"s0": 100}) == 64


def test_condition_on_an_expression_is_said_in_the_input_dim():
    model = _binary("Add", ["s0", 8], ["Min(64, s0)", 8])
    failing = _numpy_failing(lambda v: (v, min(64, v)))
    assert failing == set(range(65, _UP_TO + 1))  # as said below: s0 > 64
    found = _only(model)
    assert (found.kind, found.severity, found.axis) == ("conditional", Severity.WARNING, 0)
    assert found.reason.startswith("fails when s0 > 64: ")  # decided as a set, no bound
    assert "checked" not in found.reason
    assert "Min(64, s0)" in found.reason and "Min_64" not in found.reason
    assert any("Min(64, s0)" in row for row in found.picture)


def test_expression_bound_by_dim():
    model = _binary("Add", ["s0", 8], ["Min(64, s0)", 8])
    found = _only(model, dims={"s0": 65})
    assert (found.kind, found.severity, found.axis) == ("incompatible", Severity.ERROR, 0)
    assert _findings(model, dims={"s0": 7}) == []


def test_one_way_condition_on_an_expression():
    x = _vi("x", ["s0"])
    slope = _vi("slope", ["Min(8, s0)"])
    model = _model([helper.make_node("PRelu", ["x", "slope"], ["y"], name="p")], [x, slope])
    failing = _numpy_failing(lambda v: (v, min(8, v)), one_way=True)
    assert failing == set(range(9, _UP_TO + 1))
    found = _only(model)
    assert (found.kind, found.axis) == ("conditional", 0)
    assert "fails when s0 > 8: " in found.reason


def test_expression_that_never_fails_in_the_range_is_info():
    model = _binary("Add", ["s0"], ["Max(1, s0)"])
    assert _numpy_failing(lambda v: (v, max(1, v))) == set()
    found = _only(model)
    assert found.severity is Severity.INFO
    assert found.reason.startswith("never fails: ") and "checked" not in found.reason


def test_periodic_failures_are_counted_not_overstated():
    model = _binary("Add", ["s0"], ["2*(s0//2)"])
    failing = _numpy_failing(lambda v: (v, 2 * (v // 2)))
    found = _only(model)
    assert found.severity is Severity.WARNING
    assert failing == set(range(3, _UP_TO + 1, 2))  # NumPy: s0 odd from 3 (at 1: 0 with 1)
    assert found.reason.startswith("fails when s0 % 2 == 1 and s0 >= 3: ")


def test_expression_of_several_symbols_keeps_the_plain_condition_in_readable_text():
    found = _only(_binary("Add", ["s0"], ["s1*s2 + 1"]))
    assert found.reason == "fails unless s0, s1*s2 + 1 are equal (or 1)"


def test_unknown_expression_forms_stay_opaque_symbols():
    graph = read_onnx(_binary("Add", ["s0"], ["sqrt(s0)"]))
    opaque = graph.shapes["b"].dims[0].name
    assert opaque is not None and opaque not in graph.expressions  # sqrt is no form of bcast's
    # the output is the larger of the two, each kept whole: Max(s0, <the opaque symbol>)
    assert all(e.op == "Max" and e.symbols == {"s0", opaque} for e in graph.expressions.values())
    assert "fails unless" in _only(_binary("Add", ["s0"], ["sqrt(s0)"])).reason


REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def _bert_dynamo_run(seq):
    """Run bert_dynamo.onnx in onnxruntime at sequence length ``seq``; its error, or None."""
    import json

    ort = pytest.importorskip("onnxruntime")
    manifest = json.loads((REAL / "manifest.json").read_text(encoding="utf-8"))
    inputs = manifest["files"]["bert_dynamo.onnx"]["run_inputs"]
    rng = np.random.default_rng(0)
    feeds = {
        name: rng.integers(0, spec["high"], size=(spec["shape"][0], seq)).astype(spec["dtype"])
        for name, spec in inputs.items()
    }
    ort.set_default_logger_severity(4)
    session = ort.InferenceSession(
        str(REAL / "bert_dynamo.onnx"), providers=["CPUExecutionProvider"]
    )
    try:
        session.run(None, feeds)
    except Exception as err:
        return str(err)
    return None


def test_real_dynamo_bert_fails_beyond_its_position_buffer_as_check_says():
    import bcast

    assert _bert_dynamo_run(64) is None
    error = _bert_dynamo_run(65)
    assert error is not None and "node_add_18" in error  # onnxruntime's own verdict

    path = str(REAL / "bert_dynamo.onnx")
    (found,) = bcast.check(path).findings
    assert (found.node, found.kind, found.severity, found.axis) == (
        "node_add_18",
        "conditional",
        Severity.WARNING,
        1,
    )
    assert found.reason.startswith("fails when s41 > 64: ")
    assert "Min(64, s41)" in found.reason

    (bound,) = bcast.check(path, dims={"s41": 65}).findings
    assert (bound.node, bound.kind, bound.severity, bound.axis) == (
        "node_add_18",
        "incompatible",
        Severity.ERROR,
        1,
    )
    assert bcast.check(path, dims={"s41": 64}).findings == ()
    assert bcast.check(path, dims={"s41": 7}).findings == ()


def test_a_body_phrases_conditions_on_the_outer_graph_s_expressions():
    from bcast.core.expressions import parse_expression
    from bcast.models import Subgraph

    outer = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[s0]"), "p": Shape.parse("[M]")})
    outer.expressions["M"] = parse_expression("Min(64, s0)")
    body = Graph("m.onnx", "onnx")
    body.nodes.append(Node("if/then/add", "Add", ("x", "p"), ("z",), rule=Rule.MULTIDIRECTIONAL))
    outer.nodes.append(Node("if", "If", ("c",), ("z",), subgraphs=(Subgraph("if/then", body),)))
    (found,) = check_graph(outer).findings
    assert found.node == "if/then/add"
    assert found.reason.startswith("fails when s0 > 64: ")
    assert [f.kind for f in check_graph(outer, dims={"s0": 65}).findings] == ["incompatible"]


def test_every_rule_has_its_check():
    from bcast.models import node_checks

    assert set(node_checks._CHECKS) == set(Rule)


@pytest.mark.parametrize(
    ("a", "w", "attrs", "fits"),
    [
        ([2, 36], [16, 5], {}, False),  # A's K 36 against B's 16
        ([2, 36], [5, 16], {"transB": 1}, False),  # a Linear of 16 fed 36 features
        ([36, 2], [16, 5], {"transA": 1}, False),
        ([2, 16], [5, 16], {"transB": 1}, True),
        ([16, 2], [5, 16], {"transA": 1, "transB": 1}, True),
    ],
)
def test_gemm_inner_dims_must_be_equal_as_onnxruntime_requires(a, w, attrs, fits) -> None:
    pytest.importorskip("onnxruntime")
    weight = numpy_helper.from_array(np.ones(w, np.float32), "w")
    node = helper.make_node("Gemm", ["a", "w"], ["y"], name="gemm", **attrs)
    model = _model([node], [_vi("a", a)], [weight])
    assert _ort_outcome(model) == ("runs" if fits else "fails")
    errors = [f for f in _findings(model) if f.severity is Severity.ERROR]
    assert [f.node for f in errors] == ([] if fits else ["gemm"]), [f.reason for f in errors]


def test_a_gemm_ties_a_symbolic_inner_dim_to_its_weight() -> None:
    weight = numpy_helper.from_array(np.ones((5, 16), np.float32), "w")
    node = helper.make_node("Gemm", ["a", "w"], ["y"], name="gemm", transB=1)
    graph = read_onnx(_model([node], [_vi("a", ["N", "K"])], [weight]))
    domain = check_graph(graph).domain
    assert domain.dim("K").sizes == ((16, 16),) and domain.dim("N").text == "any"


def test_a_matmul_batch_from_an_expand_of_unknown_target_is_not_decided() -> None:
    # Expand(q [1,5,16], Concat(k, [5, 16])): k is data, so the batch is unknown; the
    # MatMul against x [N,16,8] compares it with N (onnxruntime fails at k = 3, N = 2). The
    # domain must name the Expand and the MatMul, not say "N any" as if it had decided.
    import onnxruntime as ort

    q = numpy_helper.from_array(np.ones((1, 5, 16), np.float32), "q")
    rest = numpy_helper.from_array(np.array([5, 16], np.int64), "rest")
    nodes = [
        helper.make_node("Concat", ["k", "rest"], ["target"], axis=0),
        helper.make_node("Expand", ["q", "target"], ["queries"], name="expand"),
        helper.make_node("MatMul", ["queries", "x"], ["y"], name="mm"),
    ]
    inputs = [_vi("x", ["N", 16, 8]), _vi("k", [1], TensorProto.INT64)]
    model = _model(nodes, inputs, [q, rest])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.ones((2, 16, 8), np.float32)
    with pytest.raises(Exception, match=r"MatMul|broadcast"):
        session.run(None, {"x": x, "k": np.array([3], np.int64)})
    session.run(None, {"x": x, "k": np.array([2], np.int64)})
    undecided = check_graph(read_onnx(model)).domain.undecided
    assert [(u.node, u.op) for u in undecided] == [("expand", "Expand"), ("mm", "MatMul")]
