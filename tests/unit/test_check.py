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
from bcast.check import Graph, Node, Rule, Severity, check_graph, propagate_shapes
from bcast.modes import Mode
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
    assert (found.node, found.axis, found.mode) == ("w", 0, "numpy")
    assert [name for name, _ in found.inputs] == ["c", "x", "y"]


def test_interval_dims_that_cannot_meet_are_an_error():
    g = Graph("m", "openvino", shapes={"a": Shape.parse("[2..4]"), "b": Shape.parse("[5]")})
    g.nodes.append(Node("add", "Add", ("a", "b"), ("y",), rule=Rule.ELEMENTWISE, mode=Mode.NUMPY))
    (found,) = check_graph(g).findings
    assert (found.kind, found.axis) == ("incompatible", 0)


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
    assert (found.kind, found.axis) == ("conditional", 0)
    assert "2..4 = 3" in found.reason


def test_two_different_symbols_must_be_equal_or_one():
    found = _only(_binary("Mul", ["n"], ["m"]))
    assert found.kind == "conditional"
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


# -- unidirectional rules that ONNX shape inference does not check -----------------------------


def test_prelu_slope_larger_than_x_is_a_unidirectional_error():
    prelu = helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")
    found = _only(_model([prelu], [_vi("x", [3]), _vi("slope", [2, 3])]))
    assert (found.kind, found.node, found.severity) == ("unidirectional", "prelu", Severity.ERROR)
    assert "slope [2,3] must broadcast unidirectionally to X [3]" in found.reason
    assert "onnxruntime broadcasts both ways" in found.reason


def test_prelu_slope_of_channel_length_is_not_unidirectional_to_the_last_axis():
    prelu = helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")
    found = _only(_model([prelu], [_vi("x", [2, 3, 4]), _vi("slope", [3])]))
    assert (found.kind, found.axis) == ("unidirectional", 2)


@pytest.mark.parametrize(
    ("a", "b", "c", "attrs", "axis"),
    [
        pytest.param([2, 3], [3, 4], [3], {}, 1, id="wrong-length"),
        pytest.param([1, 3], [3, 4], [2, 4], {}, 0, id="larger-than-Y"),
        pytest.param([3, 2], [4, 3], [4, 1], {"transA": 1, "transB": 1}, 0, id="transposed"),
    ],
)
def test_gemm_c_that_does_not_broadcast_to_m_n_is_an_error(a, b, c, attrs, axis):
    gemm = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", **attrs)
    found = _only(_model([gemm], [_vi("a", a), _vi("b", b), _vi("c", c)]))
    assert (found.kind, found.node, found.axis) == ("unidirectional", "gemm", axis)
    assert "Gemm C" in found.reason


def test_gemm_c_of_m_by_one_with_transposes_is_fine():
    gemm = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", transA=1, transB=1)
    assert _findings(_model([gemm], [_vi("a", [3, 2]), _vi("b", [4, 3]), _vi("c", [2, 1])])) == []


def test_gemm_c_against_a_symbolic_m_is_conditional():
    gemm = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm")
    found = _only(_model([gemm], [_vi("a", ["batch", 3]), _vi("b", [3, 4]), _vi("c", [2, 4])]))
    assert (found.kind, found.axis) == ("conditional", 0)
    assert "batch = 2" in found.reason


# -- sizes ---------------------------------------------------------------------------------------


def _expand(target, x_shape=(1,)):
    expand = helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")
    inits = [numpy_helper.from_array(np.array(target, np.int64), "shape")]
    return _model([expand], [_vi("x", list(x_shape))], inits)


def test_huge_expand_output_is_reported_with_its_size():
    found = _only(_expand([65536, 65536, 64]))
    assert (found.kind, found.node, found.severity) == ("size", "expand", Severity.WARNING)
    assert "274,877,906,944 elements" in found.reason
    assert "TiB" in found.reason  # float32: 4 bytes each


def test_max_elements_sets_the_size_limit():
    assert _findings(_expand([10, 10])) == []
    assert _only(_expand([10, 10]), max_elements=99).kind == "size"


def test_an_elementwise_output_no_bigger_than_its_input_is_not_a_size_finding():
    assert _findings(_binary("Add", [2**31, 2], [2]), max_elements=2**30) == []
    found = _only(_binary("Add", [2**31, 1], [1, 4]), max_elements=2**30)
    assert found.kind == "size"


def test_expand_with_a_negative_target_is_an_error():
    found = _only(_expand([-1]))
    assert found.kind == "incompatible"
    assert "negative" in found.reason


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
    assert warning.severity is Severity.WARNING
    assert "OpenVINO reads it as axis 0" in warning.reason
    assert "-1" in warning.reason


def test_pdpd_without_an_axis_still_warns_when_both_axes_agree():
    (found,) = check_graph(_ov_graph("[2,3]", "[2,3]", axis=0, written=False)).findings
    assert found.kind == "pdpd-default-axis"
    assert "same result" in found.reason


def test_pdpd_trailing_ones_past_a_are_accepted_but_openvino_inference_rejects_them():
    (found,) = check_graph(_ov_graph("[2,3,4]", "[3,4,1]", axis=1)).findings
    assert (found.kind, found.severity) == ("pdpd-trailing-ones", Severity.WARNING)
    assert "1 + 3 > 3" in found.reason


def test_pdpd_one_against_zero_is_accepted_but_openvino_inference_rejects_it():
    # SEMANTICS §2.9 (O77/O228): OpenVINO's pre-check B > A rejects B=1 against A=0.
    (found,) = check_graph(_ov_graph("[2,0]", "[1]", axis=1)).findings
    assert (found.kind, found.axis, found.severity) == (
        "pdpd-one-against-zero",
        1,
        Severity.WARNING,
    )


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
    assert (found.kind, found.axis, found.mode) == ("incompatible", 1, "unidirectional")


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
    assert found.kind == "incompatible"
    assert "rank" in found.reason


def test_cycles_are_rejected():
    from bcast.check import ModelError

    g = Graph("m", "onnx", shapes={})
    g.nodes.append(Node("a", "Relu", ("y",), ("x",)))
    g.nodes.append(Node("b", "Relu", ("x",), ("y",)))
    with pytest.raises(ModelError, match="cycle"):
        check_graph(g)


# -- the checker's verdict equals onnxruntime's where onnxruntime follows the spec -------------


def _ort_outcome(model):
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        feeds = {}
        for info in session.get_inputs():
            shape = [d if isinstance(d, int) else 1 for d in info.shape]
            dtype = bool if info.type == "tensor(bool)" else np.float32
            feeds[info.name] = np.ones(shape, dtype=dtype)
        session.run(None, feeds)
    except Exception:
        return "fails"
    return "runs"


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
    assert (found.kind, found.node) == ("pdpd-default-axis", "add")


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
    # Give B a trailing 1: [3,4] -> [3,4,1] (its Parameter and the Add's input port).
    text = path.read_text().replace('shape="3,4"', 'shape="3,4,1"')
    text = text.replace(
        "<dim>3</dim>\n\t\t\t\t\t<dim>4</dim>\n\t\t\t\t</port>",
        "<dim>3</dim>\n\t\t\t\t\t<dim>4</dim>\n\t\t\t\t\t<dim>1</dim>\n\t\t\t\t</port>",
    )
    path.write_text(text)
    findings = {f.kind: f for f in check_graph(_read_ir(path)).findings}
    assert set(findings) == {"peer-rejects", "pdpd-trailing-ones"}
    assert findings["peer-rejects"].severity is Severity.INFO
    trailing = findings["pdpd-trailing-ones"]
    assert trailing.node == "add"
    assert "1 + 3 > 3" in trailing.reason
