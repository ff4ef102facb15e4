"""The soundness contract (issue 37, item 1): say only what is true, list what is not known.

Every node that `check`/`domain` cannot model is listed in coverage (text, JSON, SARIF) and
the domain says it is not decided past it; `verify` compares every broadcasting node, inside
model-local functions and If bodies too, or lists each one it does not compare with its
reason, and never says "every runtime agrees" without saying how many it did not compare.
Models: an onnxscript-style model whose broadcasting nodes sit in a model-local function
(a FunctionProto in model.functions), an If whose branches hold an Add, an operator of a
domain bcast has no rule for.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import onnxruntime as ort
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from bcast.cli import main
from bcast.cli._output import load_schema
from bcast.onnx.verify import verify_model

F = TensorProto.FLOAT


def _save(path: Path, model: onnx.ModelProto) -> str:
    onnx.save(model, path)
    return str(path)


def _function_model() -> onnx.ModelProto:
    """As onnxscript writes a module: the graph calls a function holding 3 broadcasts."""
    body = [
        helper.make_node("Add", ["X", "B"], ["T"], name="add_in_fn"),
        helper.make_node("Mul", ["T", "B"], ["U"], name="mul_in_fn"),
        helper.make_node("Sub", ["U", "X"], ["Y"], name="sub_in_fn"),
    ]
    fn = helper.make_function(
        "pkg.local", "Block", ["X", "B"], ["Y"], body, [helper.make_opsetid("", 17)]
    )
    x = helper.make_tensor_value_info("x", F, ["batch", 4])
    y = helper.make_tensor_value_info("y", F, None)
    bias = numpy_helper.from_array(np.ones(4, np.float32), "bias")
    nodes = [
        helper.make_node("Block", ["x", "bias"], ["t"], domain="pkg.local", name="call"),
        helper.make_node("Add", ["t", "x"], ["y"], name="top_add"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], [bias])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("pkg.local", 1)]
    model = helper.make_model(graph, opset_imports=opsets, functions=[fn])
    model.ir_version = 8
    return model


def _if_model() -> onnx.ModelProto:
    def branch(name: str, op: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{name}_out", F, None)
        return helper.make_graph(
            [helper.make_node(op, ["a", "b"], [f"{name}_out"], name=f"{name}_{op.lower()}")],
            name,
            [],
            [out],
        )

    inputs = [
        helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        helper.make_tensor_value_info("a", F, ["n", 4]),
        helper.make_tensor_value_info("b", F, [4]),
    ]
    node = helper.make_node(
        "If", ["c"], ["o"], name="if", then_branch=branch("then", "Add"),
        else_branch=branch("else", "Mul"),
    )  # fmt: skip
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("o", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _unknown_op_model(domain: str = "com.microsoft", op: str = "NotARealOp") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", F, ["batch", 8])
    nodes = [
        helper.make_node(op, ["x"], ["t"], domain=domain, name="custom"),
        helper.make_node("Add", ["t", "x"], ["y"], name="after"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", F, None)])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def _cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# -- check and domain ------------------------------------------------------------------------


def test_an_unknown_op_is_listed_in_text_json_and_sarif(tmp_path):
    path = _save(tmp_path / "m.onnx", _unknown_op_model())
    text = _cli("check", path).output
    assert "not modelled" in text and "custom (NotARealOp)" in text
    result = _cli("check", path, "--json")
    data = json.loads(result.stdout)
    jsonschema.validate(data, load_schema("check"))
    coverage = data["models"][0]["coverage"]
    assert [u["node"] for u in coverage["unmodelled"]] == ["custom"]
    assert "com.microsoft.NotARealOp has no shape rule" in coverage["unmodelled"][0]["reason"]
    # the Add after it is not checked (its shapes are unknown): not decided either
    undecided = data["models"][0]["domain"]["undecided"]
    assert [u["node"] for u in undecided] == ["custom", "after"]
    assert undecided[1]["reason"].startswith("not checked: shapes unknown after")
    sarif = json.loads(_cli("check", path, "--format", "sarif").stdout)
    results = sarif["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [("not-modelled", "note")]


def test_domain_names_the_node_past_which_it_is_not_decided(tmp_path):
    path = _save(tmp_path / "m.onnx", _unknown_op_model("org.example", "Mystery"))
    out = _cli("domain", path).output
    assert "not decided beyond node custom (Mystery)" in out
    out = _cli("domain", path, "--dim", "batch=3").output
    assert "inside the domain, but not decided past 2 nodes" in out  # custom, after
    result = _cli("domain", path, "--json", "--dim", "batch=3")
    data = json.loads(result.stdout)
    jsonschema.validate(data, load_schema("domain"))
    assert data["point"]["undecided"] == 2
    assert data["domain"]["undecided"][0]["node"] == "custom"


def test_an_if_body_is_not_decided_by_the_domain_and_says_so(tmp_path):
    path = _save(tmp_path / "if.onnx", _if_model())
    data = json.loads(_cli("domain", path, "--json").stdout)
    assert {u["node"] for u in data["domain"]["undecided"]} == {
        "if/then_branch/then_add",
        "if/else_branch/else_mul",
    }


def test_a_model_local_function_body_is_modelled_and_not_listed(tmp_path):
    path = _save(tmp_path / "fn.onnx", _function_model())
    data = json.loads(_cli("check", path, "--json").stdout)
    assert data["models"][0]["coverage"]["unmodelled"] == []
    assert data["models"][0]["domain"]["undecided"] == []


# -- verify ----------------------------------------------------------------------------------


def test_verify_compares_the_broadcasting_nodes_inside_a_local_function(tmp_path):
    path = _save(tmp_path / "fn.onnx", _function_model())
    feeds = {"x": np.ones((2, 4), np.float32)}
    ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    outcome = verify_model(path, runtimes=["onnxruntime"])
    ops = sorted(n.op for n in outcome.nodes)
    assert ops == ["Add", "Add", "Mul", "Sub"]  # 3 in the function, 1 in the graph
    assert outcome.skipped == [] and outcome.disagreements == 0


def test_verify_runs_each_broadcasting_node_of_an_if_body(tmp_path):
    path = _save(tmp_path / "if.onnx", _if_model())
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for cond in (True, False):  # both branches run in the runtime itself
        feeds = {"c": np.array(cond), "a": np.ones((3, 4), np.float32), "b": np.ones(4, np.float32)}
        session.run(None, feeds)
    outcome = verify_model(path, runtimes=["onnxruntime"])
    ran = {(n.node, n.op, "onnxruntime" in n.comparisons) for n in outcome.nodes}
    assert ran == {
        ("if/then_branch/then_add", "Add", True),
        ("if/else_branch/else_mul", "Mul", True),
    }
    assert outcome.skipped == [] and outcome.disagreements == 0
    result = _cli("verify", path, "--runtime", "onnxruntime", "--json")
    data = json.loads(result.stdout)
    jsonschema.validate(data, load_schema("verify"))
    assert data["summary"]["skipped"] == 0 and result.exit_code == 0


def _loop_model() -> onnx.ModelProto:
    """A Loop whose body adds the outer ``b`` [4] to its carried ``x`` [n,4] three times."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
            helper.make_node("Add", ["x_in", "b"], ["x_out"], name="body_add"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", F, ["n", 4]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", F, ["n", 4]),
        ],
    )
    node = helper.make_node("Loop", ["trips", "", "x"], ["y"], name="loop", body=body)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", F, ["n", 4]),
            helper.make_tensor_value_info("b", F, [4]),
        ],
        [helper.make_tensor_value_info("y", F, ["n", 4])],
        [helper.make_tensor("trips", TensorProto.INT64, [], [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_verify_runs_the_broadcasting_node_of_a_loop_body(tmp_path):
    path = _save(tmp_path / "loop.onnx", _loop_model())
    feeds = {"x": np.zeros((2, 4), np.float32), "b": np.arange(4, dtype=np.float32)}
    (y,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_array_equal(y, np.tile(3 * np.arange(4, dtype=np.float32), (2, 1)))
    outcome = verify_model(path, runtimes=["onnxruntime"], dims={"n": 2})
    (run,) = outcome.nodes
    assert (run.node, run.op) == ("loop/body/body_add", "Add")
    assert [str(shape) for _, shape in run.inputs] == ["[2,4]", "[4]"]
    assert run.comparisons["onnxruntime"].agree and outcome.skipped == []


def _if_model_reading_an_unknown_rank() -> onnx.ModelProto:
    model = _if_model()
    model.graph.input[2].type.tensor_type.ClearField("shape")  # b: rank unknown
    return model


def test_verify_lists_each_body_node_it_cannot_run_and_says_so_last(tmp_path):
    path = _save(tmp_path / "if.onnx", _if_model_reading_an_unknown_rank())
    outcome = verify_model(path, runtimes=["onnxruntime"])
    listed = {(s.node, s.kind.value) for s in outcome.skipped}
    assert listed == {
        ("if/then_branch/then_add", "unknown-shape"),
        ("if/else_branch/else_mul", "unknown-shape"),
    }
    model = _if_model_reading_an_unknown_rank()
    extra = helper.make_node("Add", ["a", "a"], ["top"], name="top_add")
    model.graph.node.append(extra)
    model.graph.output.append(helper.make_tensor_value_info("top", F, None))
    path = _save(tmp_path / "if_and_add.onnx", model)
    out = _cli("verify", path, "--runtime", "onnxruntime").output
    last = " ".join(out.split())
    assert "every runtime agrees with bcast; 2 broadcasting nodes not compared" in last


def _ir_with_if(path: Path) -> str:
    """An OpenVINO IR whose If holds an Add and a Multiply in its bodies."""
    import openvino as ov
    from openvino import opset13 as ops

    cond = ops.parameter([], np.bool_, name="c")
    x = ops.parameter([2, 4], np.float32, name="x")
    bodies = []
    for make in (ops.add, ops.multiply):
        inner = ops.parameter([2, 4], np.float32)
        out = make(inner, ops.constant(np.ones(4, np.float32)))
        bodies.append((inner, ov.Model([ops.result(out)], [inner])))
    node = ops.if_op(cond)
    node.set_then_body(bodies[0][1])
    node.set_else_body(bodies[1][1])
    node.set_input(x.output(0), bodies[0][0], bodies[1][0])
    result = node.set_output(bodies[0][1].get_results()[0], bodies[1][1].get_results()[0])
    node.set_friendly_name("if")
    ov.save_model(ov.Model([result], [cond, x], "m"), path)
    return str(path)


def test_an_ir_if_whose_bodies_are_not_read_is_listed_by_check_domain_and_verify(tmp_path):
    path = _ir_with_if(tmp_path / "if.xml")
    data = json.loads(_cli("check", path, "--json").stdout)
    (listed,) = data["models"][0]["coverage"]["unmodelled"]
    assert listed["node"] == "if" and "bodies" in listed["reason"]
    assert "not decided beyond node if (If)" in _cli("domain", path).output
    result = _cli("verify", path, "--json")
    skipped = json.loads(result.stdout)["skipped"]
    assert [(s["node"], s["kind"]) for s in skipped] == [("if", "in-body")]


def test_github_annotations_carry_each_node_not_modelled_as_a_notice(tmp_path):
    path = _save(tmp_path / "m.onnx", _unknown_op_model())
    lines = _cli("check", path, "--format", "github").stdout.splitlines()
    notices = [line for line in lines if line.startswith("::notice")]
    assert len(notices) == 1 and "not-modelled" in notices[0] and "custom" in notices[0]


def test_verify_runs_the_broadcast_after_a_com_microsoft_op_and_lists_the_op(tmp_path):
    x = helper.make_tensor_value_info("x", F, ["batch", 8, 64])
    inits = [
        numpy_helper.from_array(np.zeros(64, np.float32), "b"),
        numpy_helper.from_array(np.ones(64, np.float32), "c"),
    ]
    nodes = [
        helper.make_node("BiasGelu", ["x", "b"], ["t"], domain="com.microsoft", name="gelu"),
        helper.make_node("Add", ["t", "c"], ["y"], name="after"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", F, None)], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    path = _save(tmp_path / "gelu.onnx", model)
    outcome = verify_model(path, runtimes=["onnxruntime"])
    assert [n.node for n in outcome.nodes] == ["after"] and outcome.disagreements == 0
    assert [(s.node, s.kind.value) for s in outcome.skipped] == [("gelu", "unsupported")]
    out = " ".join(_cli("verify", path, "--runtime", "onnxruntime").output.split())
    assert "every runtime agrees with bcast; 1 broadcasting node not compared" in out
