"""``bcast verify``: each broadcasting node run in onnxruntime / OpenVINO and in bcast.

The known departures from the ONNX spec must be found: onnxruntime broadcasts PRelu's slope
both ways (SEMANTICS R40), and OpenVINO applies a 1-D PRelu slope per channel while the
spec's unidirectional rule aligns it to the last axis. For OpenVINO IR, the CPU plugin's
lost PDPD axis (Subtract) and an IR's absent PDPD axis (OpenVINO reads 0, the spec -1).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result
from onnx import TensorProto, helper, numpy_helper

from bcast.cli import main
from bcast.cli._output import load_schema
from bcast.models import ModelError
from bcast.onnx.verify import verify_model
from bcast.ops import memory_limit

pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT
ENV = {"COLUMNS": "100", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}

VERIFY_SCHEMA = load_schema("verify")  # the schema shipped in the package


def run(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={**ENV, **(env or {})}, catch_exceptions=False)


def verify_json(*args: str) -> tuple[int, dict]:
    result = run("verify", "--json", *args)
    data = json.loads(result.stdout)
    jsonschema.validate(data, VERIFY_SCHEMA)
    return result.exit_code, data


def _save(path: Path, nodes, inputs, inits=()) -> str:
    outputs = [helper.make_tensor_value_info(nodes[-1].output[0], F, None)]
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def _vi(name: str, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _prelu(path: Path, x_shape, slope) -> str:
    node = helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")
    inits = [numpy_helper.from_array(np.asarray(slope, np.float32), "slope")]
    return _save(path, [node], [helper.make_tensor_value_info("x", F, x_shape)], inits)


def test_finds_onnxruntime_bidirectional_prelu(tmp_path):
    path = _prelu(tmp_path / "wide.onnx", [3], np.full((2, 3), 0.25))
    code, data = verify_json(path, "--runtime", "onnxruntime")
    assert code == 1
    (node,) = data["nodes"]
    assert node["node"] == "prelu"
    assert node["results"]["bcast"]["error"] is not None  # the spec: slope must fit X
    assert node["results"]["onnxruntime"]["shape"] == "[2,3]"  # SEMANTICS R40
    assert node["comparisons"]["onnxruntime"]["agree"] is False


def test_finds_openvino_per_channel_prelu(tmp_path):
    pytest.importorskip("openvino")
    path = _prelu(tmp_path / "channels.onnx", [1, 3, 2, 3], [0.1, 0.2, 0.3])
    code, data = verify_json(path)
    assert code == 1
    (node,) = data["nodes"]
    assert node["comparisons"]["onnxruntime"]["agree"] is True  # numpy-style, last axis
    openvino = node["comparisons"]["openvino"]
    assert openvino["agree"] is False
    assert node["results"]["openvino"]["shape"] == "[1,3,2,3]"
    assert openvino["max_abs_diff"] > 0.01


def test_the_reported_difference_is_where_the_slope_is_placed(tmp_path):
    pytest.importorskip("openvino")
    path = _prelu(tmp_path / "channels.onnx", [1, 3, 2, 3], [0.1, 0.2, 0.3])
    outcome = verify_model(path, runtimes=["openvino"], seed=3)
    (node,) = outcome.nodes
    ours = node.results["bcast"].value
    theirs = node.results["openvino"].value
    assert ours is not None and theirs is not None
    # Where x < 0, bcast gives x * slope[last axis] (the spec) and OpenVINO x * slope[channel]:
    # OpenVINO's values are bcast's rescaled from the last-axis slope to the channel slope.
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    channel = slope.reshape(1, 3, 1, 1)
    last = slope.reshape(1, 1, 1, 3)
    expected = np.where(ours < 0, ours / last * channel, ours)
    np.testing.assert_allclose(theirs, expected, rtol=1e-5, atol=1e-6)
    assert node.comparisons["openvino"].max_abs_diff == pytest.approx(
        float(np.max(np.abs(ours - theirs)))
    )


def test_clean_nodes_agree_and_exit_0(tmp_path):
    add = helper.make_node("Add", ["x", "b"], ["y"], name="add")
    path = _save(
        tmp_path / "add.onnx",
        [add],
        [
            helper.make_tensor_value_info("x", F, ["batch", 3]),
            helper.make_tensor_value_info("b", F, [3]),
        ],
    )
    code, data = verify_json(path, "--seed", "5")
    assert code == 0
    assert data["seed"] == 5
    assert data["nodes"][0]["inputs"][0]["shape"] == "[2,3]"  # batch defaults to 2


def test_symbols_take_the_value_that_makes_the_node_valid(tmp_path):
    add = helper.make_node("Add", ["x", "p"], ["y"], name="add")
    inputs = [
        helper.make_tensor_value_info("x", F, ["batch", 4]),
        helper.make_tensor_value_info("p", F, [5, 4]),
    ]
    path = _save(tmp_path / "pair.onnx", [add], inputs)
    code, data = verify_json(path, "--runtime", "onnxruntime")
    assert code == 0
    assert data["nodes"][0]["inputs"][0]["shape"] == "[5,4]"


def test_dim_binds_symbols_and_both_sides_reject_an_invalid_node(tmp_path):
    add = helper.make_node("Add", ["x", "p"], ["y"], name="add")
    inputs = [
        helper.make_tensor_value_info("x", F, ["batch", 4]),
        helper.make_tensor_value_info("p", F, [2, 4]),
    ]
    path = _save(tmp_path / "pair.onnx", [add], inputs)
    code, data = verify_json(path, "--runtime", "onnxruntime", "--dim", "batch=3")
    # bcast and onnxruntime both reject [3,4] + [2,4]: they agree, and the node fails at
    # these sizes, a finding of its own (issue 40).
    assert code == 1 and data["summary"]["failing"] == 1
    comparison = data["nodes"][0]["comparisons"]["onnxruntime"]
    assert comparison == {
        "agree": True,
        "detail": "both reject the node",
        "max_abs_diff": None,
        "harness": False,
    }


def test_gemm_bias_that_openvino_broadcasts_both_ways(tmp_path):
    pytest.importorskip("openvino")
    gemm = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm")
    inputs = [
        helper.make_tensor_value_info("a", F, [1, 8]),
        helper.make_tensor_value_info("b", F, [8, 4]),
    ]
    inits = [numpy_helper.from_array(np.ones((3, 4), np.float32), "c")]
    code, data = verify_json(_save(tmp_path / "gemm.onnx", [gemm], inputs, inits))
    assert code == 1
    node = data["nodes"][0]
    assert node["comparisons"]["onnxruntime"]["agree"] is True  # both reject (R34)
    assert node["comparisons"]["openvino"]["agree"] is False


def test_terminal_output_names_the_disagreement(tmp_path):
    path = _prelu(tmp_path / "wide.onnx", [3], np.full((2, 3), 0.25))
    result = run("verify", path, "--runtime", "onnxruntime")
    assert result.exit_code == 1
    assert "prelu" in result.stdout
    assert "1 disagreement found" in result.stdout
    assert "\x1b[" not in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("width", [40, 60])
def test_a_narrow_terminal_gets_the_disagreement_in_a_block_of_whole_words(tmp_path, width):
    path = _prelu(tmp_path / "wide.onnx", [3], np.full((2, 3), 0.25))
    data = json.loads(run("verify", path, "--runtime", "onnxruntime", "--json").stdout)
    detail = data["nodes"][0]["comparisons"]["onnxruntime"]["detail"]
    result = run("verify", path, "--runtime", "onnxruntime", env={"COLUMNS": str(width)})
    assert result.exit_code == 1
    out = result.stdout.splitlines()
    assert "prelu (PRelu)" in out
    start = next(k for k, line in enumerate(out) if line.startswith("    ≠ onnxruntime:"))
    shown = " ".join(line.strip() for line in out[start:] if line.startswith("    "))
    assert shown.startswith(f"≠ onnxruntime: {detail}")  # all of it, wrapped between words
    assert all(len(line) <= width for line in out[1:]), out  # the path may be longer
    assert out[-1] == "1 disagreement found"


@pytest.mark.parametrize("runtime", ["tensorflow", ""])
def test_unknown_runtime_is_a_usage_error(tmp_path, runtime):
    path = _prelu(tmp_path / "p.onnx", [3], [0.1, 0.2, 0.3])
    result = run("verify", path, "--runtime", runtime)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_unusable_model_exits_2_with_one_line(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"junk")
    result = run("verify", str(path))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "not an ONNX model" in line
    data = json.loads(run("verify", "--json", str(path)).stdout)
    assert "not an ONNX model" in data["error"]["message"]


def test_json_of_an_unusable_model_names_its_path(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"junk")
    data = json.loads(run("verify", "--json", str(path)).stdout)
    assert data["model"] == str(path)


def test_a_cycle_is_reported_with_the_file_path(tmp_path):
    add = helper.make_node("Add", ["x", "b"], ["a"], name="add")
    relu = helper.make_node("Relu", ["a"], ["b"], name="relu")
    graph = helper.make_graph(
        [add, relu], "g", [helper.make_tensor_value_info("x", F, [2])], [_vi("a", None)]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "cycle.onnx"
    onnx.save(model, path)
    result = run("verify", str(path))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"bcast: {path}: ")
    assert "cycle" in line
    assert "<ModelProto>" not in line


def test_xml_that_is_not_an_ir_exits_2_with_one_line(tmp_path):
    pytest.importorskip("openvino")
    path = tmp_path / "m.xml"
    path.write_text("<net/>")
    result = run("verify", str(path), "--runtime", "openvino")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "not an OpenVINO IR" in line


# -- OpenVINO IR ---------------------------------------------------------------------------


def _ir(path: Path, op: str, shapes, mode: str, axis: int | None = None, *, strip=False) -> str:
    """Save a one-node IR: ``op`` on parameters a, b with ``auto_broadcast`` = ``mode``."""
    ov = pytest.importorskip("openvino")
    from openvino.utils.node_factory import NodeFactory

    params = [
        ov.opset13.parameter(list(s), np.float32, name=n)
        for n, s in zip("ab", shapes, strict=False)
    ]
    attrs = {"auto_broadcast": mode}
    if axis is not None:
        attrs["auto_broadcast.auto_broadcast_axis"] = axis
    node = NodeFactory("opset13").create(op, [p.output(0) for p in params], attrs)
    node.set_friendly_name(f"{mode}_{op.lower()}")
    ov.save_model(ov.Model([node], params, "m"), path)
    if strip:  # OpenVINO always writes the axis: remove it, as in hand-written IR
        text = path.read_text()
        stripped = re.sub(r'\s+auto_broadcast\.auto_broadcast_axis="[^"]*"', "", text)
        assert stripped != text
        path.write_text(stripped)
    return str(path)


def test_ir_pdpd_subtract_whose_axis_the_cpu_plugin_loses(tmp_path):
    path = _ir(tmp_path / "sub.xml", "Subtract", [(2, 1), (2,)], "pdpd", 0)
    code, data = verify_json(path, "--runtime", "openvino")
    assert code == 1
    assert data["runtimes"] == ["openvino"]
    (node,) = data["nodes"]
    assert node["node"] == "pdpd_subtract"
    assert node["op"] == "Subtract"
    assert (node["mode"], node["axis"]) == ("pdpd", 0)
    assert [i["shape"] for i in node["inputs"]] == ["[2,1]", "[2]"]
    # The spec: B [2] covers A's axis 0, so the result is A's shape [2,1].
    assert node["results"]["bcast"]["shape"] == "[2,1]"
    assert node["comparisons"]["openvino"]["agree"] is False
    assert data["summary"] == {
        "nodes": 1,
        "compared": 1,
        "skipped": 0,
        "disagreements": 1,
        "harness_errors": 0,
        "failing": 0,
    }


def test_ir_bcast_values_are_the_spec_pdpd_subtract(tmp_path):
    pytest.importorskip("openvino")
    from bcast.openvino.verify import verify_ir

    path = _ir(tmp_path / "sub.xml", "Subtract", [(2, 1), (2,)], "pdpd", 0)
    outcome = verify_ir(path, seed=4)
    (node,) = outcome.nodes
    ours = node.results["bcast"].value
    assert ours is not None
    # Recompute from the inputs the verifier drew: B placed on A's axis 0.
    rng = np.random.default_rng([4, 2])
    a = rng.uniform(-2.0, 2.0, size=(2, 1)).astype(np.float32)
    b = rng.uniform(-2.0, 2.0, size=(2,)).astype(np.float32)
    np.testing.assert_allclose(ours, a - b.reshape(2, 1))


def test_ir_pdpd_without_axis_is_reported_with_a_note(tmp_path):
    path = _ir(tmp_path / "add.xml", "Add", [(2, 3, 4, 5), (4, 5)], "pdpd", 2, strip=True)
    code, data = verify_json(path, "--runtime", "openvino")
    assert code == 1
    (node,) = data["nodes"]
    assert node["node"] == "pdpd_add"
    assert (node["mode"], node["axis"]) == ("pdpd", None)
    # The spec's default axis -1 right-aligns [4,5] in [2,3,4,5]; OpenVINO reads 0 and fails.
    assert node["results"]["bcast"]["shape"] == "[2,3,4,5]"
    assert node["comparisons"]["openvino"]["agree"] is False
    (note,) = data["notes"]
    assert "pdpd_add" in note
    assert "no auto_broadcast.auto_broadcast_axis attribute" in note
    result = run("verify", path, "--runtime", "openvino")
    assert result.exit_code == 1
    assert "auto_broadcast.auto_broadcast_axis" in result.stdout


def test_ir_clean_numpy_add_exits_0(tmp_path):
    path = _ir(tmp_path / "add.xml", "Add", [(2, 3), (3,)], "numpy")
    code, data = verify_json(path, "--seed", "3")
    assert code == 0
    assert data["seed"] == 3
    assert data["runtimes"] == ["openvino"]
    (note,) = data["notes"]
    assert "onnxruntime cannot run OpenVINO IR" in note
    (node,) = data["nodes"]
    assert node["comparisons"]["openvino"]["agree"] is True
    assert node["results"]["bcast"]["shape"] == "[2,3]"
    result = run("verify", path)
    assert result.exit_code == 0
    assert "every runtime agrees with bcast" in result.stdout


def test_ir_with_onnxruntime_alone_exits_2_with_one_line(tmp_path):
    path = _ir(tmp_path / "add.xml", "Add", [(2, 3), (3,)], "numpy")
    result = run("verify", path, "--runtime", "onnxruntime")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "onnxruntime cannot run OpenVINO IR" in line
    data = json.loads(run("verify", "--json", path, "--runtime", "onnxruntime").stdout)
    assert "onnxruntime cannot run OpenVINO IR" in data["error"]["message"]


def test_ir_broadcast_select_and_integer_nodes_agree(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino.utils.node_factory import NodeFactory

    data = ov.opset13.parameter([3], np.float32, name="data")
    cond = ov.opset13.parameter(ov.PartialShape([-1, 3]), np.bool_, name="cond")
    i = ov.opset13.parameter([2, 3], np.int32, name="i")
    j = ov.opset13.parameter([3], np.int32, name="j")
    target = ov.opset13.constant(np.array([3, 2], np.int64))
    mapping = ov.opset13.constant(np.array([0], np.int64))
    explicit = NodeFactory("opset3").create(
        "Broadcast", [data.output(0), target.output(0), mapping.output(0)], {"mode": "explicit"}
    )
    explicit.set_friendly_name("explicit")
    select = NodeFactory("opset13").create(
        "Select", [cond.output(0), data.output(0), data.output(0)], {"auto_broadcast": "numpy"}
    )
    select.set_friendly_name("select")
    add = NodeFactory("opset13").create(
        "Add", [i.output(0), j.output(0)], {"auto_broadcast": "numpy"}
    )
    add.set_friendly_name("int_add")
    model = ov.Model([explicit, select, add], [data, cond, i, j], "m")
    path = tmp_path / "mix.xml"
    ov.save_model(model, path)
    code, out = verify_json(str(path), "--runtime", "openvino", "--dim", "batch=4")
    assert code == 0
    by_name = {n["node"]: n for n in out["nodes"]}
    assert set(by_name) == {"explicit", "select", "int_add"}
    assert by_name["explicit"]["results"]["bcast"]["shape"] == "[3,2]"
    assert by_name["int_add"]["results"]["openvino"]["dtype"] == "int32"
    assert by_name["select"]["inputs"][0]["shape"] == "[2,3]"  # the dynamic dim takes 2
    assert out["unused_dims"] == ["batch"]  # the IR's dims are named cond.0 ...: no batch
    code, out = verify_json(str(path), "--runtime", "openvino", "--dim", "cond.0=5")
    assert code == 0
    select = next(n for n in out["nodes"] if n["node"] == "select")
    assert select["inputs"][0]["shape"] == "[5,3]"
    assert select["results"]["openvino"]["shape"] == "[5,3]"


# -- nodes too large to run ----------------------------------------------------------------


def _add(path: Path, x_shape, y_shape) -> str:
    add = helper.make_node("Add", ["x", "y"], ["z"], name="wide")
    return _save(path, [add], [_vi("x", x_shape), _vi("y", y_shape)])


def test_a_node_too_large_for_memory_is_skipped_not_run(tmp_path):
    # [2**40,1] + [1,2]: 8 TiB of float32 output, more than any machine's memory.
    path = _add(tmp_path / "wide.onnx", [2**40, 1], [1, 2])
    code, data = verify_json(path)
    assert code == 2  # a broadcasting node, none verified: unusable for verify
    assert data["nodes"] == []
    (skipped,) = data["skipped"]
    assert (skipped["node"], skipped["op"], skipped["kind"]) == ("wide", "Add", "too-large")
    assert "memory limit" in skipped["reason"]
    assert any(n.startswith("wide (Add): too large to run") for n in data["notes"])
    assert data["summary"] == {
        "nodes": 0,
        "compared": 0,
        "skipped": 1,
        "disagreements": 0,
        "harness_errors": 0,
        "failing": 0,
    }
    result = run("verify", path)
    assert result.exit_code == 2
    assert "nothing verified" in result.stdout
    assert result.stderr.count("\n") == 1 and "nothing verified" in result.stderr
    assert "every runtime agrees" not in result.stdout


def test_the_size_is_checked_before_any_input_is_drawn(tmp_path, monkeypatch):
    import bcast.onnx.verify as onnx_verify

    drawn = []
    real = onnx_verify.random_array

    def spy(shape, *args, **kwargs):
        drawn.append(shape)
        return real(shape, *args, **kwargs)

    monkeypatch.setattr(onnx_verify, "random_array", spy)
    # [4096,1] + [1,4096]: a 64 MiB float32 result, over a 1 MiB limit.
    path = _add(tmp_path / "wide.onnx", [4096, 1], [1, 4096])
    with memory_limit(2**20):
        outcome = verify_model(path, runtimes=["onnxruntime"])
    assert drawn == []
    assert outcome.nodes == []
    assert [s.kind.value for s in outcome.skipped] == ["too-large"]
    # Under the default limit the same node runs and agrees.
    outcome = verify_model(path, runtimes=["onnxruntime"])
    assert [s.kind.value for s in outcome.skipped] == []
    assert outcome.nodes[0].comparisons["onnxruntime"].agree


def test_a_huge_expand_that_no_side_can_allocate_is_not_agreement(tmp_path):
    expand = helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_huge")
    target = numpy_helper.from_array(np.array([65536, 65536, 64], np.int64), "shape")
    path = _save(tmp_path / "huge.onnx", [expand], [_vi("x", [1, 64])], [target])
    code, data = verify_json(path)
    assert code == 2  # nothing verified
    assert data["nodes"] == []
    assert [(s["node"], s["kind"]) for s in data["skipped"]] == [("expand_huge", "too-large")]
    assert "every runtime agrees" not in run("verify", path).stdout


def test_a_node_that_runs_out_of_memory_is_skipped_not_compared(tmp_path, monkeypatch):
    import bcast.onnx.verify as onnx_verify

    # Let the node run despite the estimate: bcast's own guard then refuses its result.
    monkeypatch.setattr(onnx_verify, "memory_problem", lambda *a, **k: None, raising=False)
    expand = helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")
    target = numpy_helper.from_array(np.array([256, 4], np.int64), "shape")
    path = _save(tmp_path / "e.onnx", [expand], [_vi("x", [1, 4])], [target])
    with memory_limit(1000):  # the [256,4] float32 result needs 4096 bytes
        outcome = verify_model(path, runtimes=["onnxruntime"])
    assert outcome.nodes == []
    (skipped,) = outcome.skipped
    assert skipped.kind.value == "too-large"
    assert "bcast" in skipped.reason
    assert outcome.nothing_verified


def test_ir_node_with_a_huge_dim_is_skipped_not_run(tmp_path):
    path = _ir(tmp_path / "huge.xml", "Add", [(2**40, 3), (3,)], "numpy")
    code, data = verify_json(path, "--runtime", "openvino")
    assert code == 2  # nothing verified
    assert data["nodes"] == []
    (skipped,) = data["skipped"]
    assert (skipped["op"], skipped["kind"]) == ("Add", "too-large")
    assert "memory limit" in skipped["reason"]


# -- operators bcast.ops lacks, and nodes verify cannot run -------------------------------

I32 = TensorProto.INT32
U32 = TensorProto.UINT32


def _reference_ops(path: Path) -> str:
    nodes = [
        helper.make_node("Mod", ["i", "j"], ["mod"], name="mod"),
        helper.make_node("BitwiseAnd", ["i", "j"], ["band"], name="band"),
        helper.make_node("GreaterOrEqual", ["i", "j"], ["ge"], name="ge"),
        helper.make_node("LessOrEqual", ["i", "j"], ["le"], name="le"),
        helper.make_node("BitShift", ["u", "v"], ["shift"], name="shift", direction="LEFT"),
    ]
    inputs = [_vi("i", [2, 3], I32), _vi("j", [3], I32), _vi("u", [2, 3], U32), _vi("v", [3], U32)]
    outputs = [_vi(n.output[0], None, TensorProto.UNDEFINED) for n in nodes]
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def test_operators_bcast_ops_lacks_run_with_bcasts_broadcasting_and_agree(tmp_path):
    # bcast's side: broadcast by bcast's rules, NumPy's kernels (bcast.models.reference).
    code, data = verify_json(_reference_ops(tmp_path / "ops.onnx"), "--runtime", "onnxruntime")
    assert code == 0
    assert data["skipped"] == []
    assert [n["node"] for n in data["nodes"]] == ["mod", "band", "ge", "le", "shift"]
    for node in data["nodes"]:
        assert node["results"]["onnxruntime"]["shape"] == "[2,3]"
        assert node["comparisons"]["onnxruntime"]["agree"] is True, node


@pytest.mark.parametrize(
    ("scale", "runs"),
    [pytest.param([4], True, id="scale-4"), pytest.param([3], False, id="scale-3")],
)
def test_layer_normalization_runs_against_onnxruntime(tmp_path, scale, runs):
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], name="ln")
    inputs = [_vi("x", [2, 3, 4]), _vi("scale", scale), _vi("bias", [4])]
    graph = helper.make_graph([node], "g", inputs, [_vi("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "ln.onnx")
    code, data = verify_json(str(tmp_path / "ln.onnx"), "--runtime", "onnxruntime")
    assert code == (0 if runs else 1)  # a node both sides reject fails the model (issue 40)
    ((node),) = data["nodes"]
    ours, theirs = node["results"]["bcast"], node["results"]["onnxruntime"]
    assert (theirs["error"] is None) is runs  # onnxruntime's verdict on the shapes
    assert (ours["error"] is None) is runs
    assert node["comparisons"]["onnxruntime"]["agree"] is True
    if not runs:
        assert "Scale must equal X or be 1" in ours["error"]


def test_a_broadcasting_node_verify_cannot_run_is_noted_not_passed_over(tmp_path):
    # A broadcasting node for the checker (opset 6 Add: the legacy `broadcast` attribute);
    # verify does not run it, and must say so rather than report "no broadcasting node".
    inputs = [_vi("x", [2, 3]), _vi("scale", [2, 3])]
    node = helper.make_node("Add", [i.name for i in inputs], ["y"], name="node")
    graph = helper.make_graph([node], "g", inputs, [_vi("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    code, data = verify_json(str(path), "--runtime", "onnxruntime")
    assert code == 2  # a broadcasting node, none verified
    ((skipped),) = data["skipped"]
    assert (skipped["node"], skipped["op"], skipped["kind"]) == ("node", "Add", "unsupported")
    assert "legacy `broadcast` attribute" in skipped["reason"]
    result = run("verify", str(path), "--runtime", "onnxruntime")
    assert result.exit_code == 2
    assert "nothing verified" in result.stdout


def test_nodes_not_run_are_noted_beside_those_that_agree(tmp_path):
    # The Expand's target is a graph input of unknown length: no concrete target to run.
    nodes = [
        helper.make_node("Add", ["x", "b"], ["sum"], name="add"),
        helper.make_node("Expand", ["x", "s"], ["big"], name="expand"),
    ]
    inputs = [_vi("x", [2, 3]), _vi("b", [3]), _vi("s", None, TensorProto.INT64)]
    path = _save(tmp_path / "m.onnx", nodes, inputs)
    code, data = verify_json(path, "--runtime", "onnxruntime")
    assert code == 0
    assert [n["node"] for n in data["nodes"]] == ["add"]
    assert data["summary"]["skipped"] == 1
    result = run("verify", path, "--runtime", "onnxruntime")
    assert "expand (Expand): the computed target shape 's' has unknown length; skipped" in (
        result.stdout.replace("\n", "")
    )
    assert "1 broadcasting node not compared" in " ".join(result.stdout.split())


def test_an_expand_with_a_computed_target_runs_on_the_propagated_values(tmp_path):
    # target = Shape(m): its values are m's shape [2,1,3], known after propagation.
    nodes = [
        helper.make_node("Shape", ["m"], ["target"], name="shape"),
        helper.make_node("Expand", ["x", "target"], ["y"], name="expand"),
    ]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [4, 1]), _vi("m", [2, 1, 3])])
    code, data = verify_json(path, "--runtime", "onnxruntime")
    assert code == 0
    ((node),) = data["nodes"]
    assert node["node"] == "expand"
    assert node["results"]["onnxruntime"]["shape"] == "[2,4,3]"
    assert node["comparisons"]["onnxruntime"]["agree"] is True


def test_a_model_without_broadcasting_nodes_exits_0_and_says_so(tmp_path):
    relu = helper.make_node("Relu", ["x"], ["y"], name="relu")
    path = _save(tmp_path / "relu.onnx", [relu], [_vi("x", [2, 3])])
    result = run("verify", path, "--runtime", "onnxruntime")
    assert result.exit_code == 0
    assert "no broadcasting node to verify" in result.stdout


# -- external data -------------------------------------------------------------------------

WEIGHTS = np.array([1.5, -2.0, 3.25], np.float32)


def _external_expand(folder: Path) -> Path:
    """Expand(w, [2,3]) with both initializers in ``weights.bin`` beside the model."""
    folder.mkdir()
    expand = helper.make_node("Expand", ["w", "shape"], ["y"], name="expand")
    inits = [
        numpy_helper.from_array(WEIGHTS, "w"),
        numpy_helper.from_array(np.array([2, 3], np.int64), "shape"),
    ]
    graph = helper.make_graph([expand], "g", [], [_vi("y", None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "model.onnx"
    onnx.save(
        model,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    stored = onnx.load(path, load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in stored.graph.initializer)
    return path


def test_external_data_is_read_from_the_model_folder_not_the_cwd(tmp_path, monkeypatch):
    path = _external_expand(tmp_path / "model")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    outcome = verify_model(str(path), runtimes=["onnxruntime"])
    (node,) = outcome.nodes
    np.testing.assert_array_equal(node.results["bcast"].value, np.broadcast_to(WEIGHTS, (2, 3)))
    np.testing.assert_array_equal(
        node.results["onnxruntime"].value, np.broadcast_to(WEIGHTS, (2, 3))
    )
    assert run("verify", str(path), "--runtime", "onnxruntime").exit_code == 0


def _relocate(path: Path, location: str) -> None:
    model = onnx.load(path, load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save(model, path)


@pytest.mark.parametrize("where", ["parent", "absolute", "symlink"])
def test_external_data_outside_the_model_folder_is_refused(tmp_path, where):
    path = _external_expand(tmp_path / "model")
    outside = tmp_path / "outside.bin"
    outside.write_bytes((path.parent / "weights.bin").read_bytes())
    if where == "parent":
        _relocate(path, "../outside.bin")
    elif where == "absolute":
        _relocate(path, str(outside))
    else:
        link = path.parent / "link.bin"
        try:
            link.symlink_to(outside)
        except OSError:
            pytest.skip("no symlinks here")
        _relocate(path, "link.bin")
    result = run("verify", str(path), "--runtime", "onnxruntime")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"bcast: {path}: tensor ")
    assert "model's folder" in line
    data = json.loads(run("verify", "--json", str(path), "--runtime", "onnxruntime").stdout)
    assert data["model"] == str(path)
    assert "model's folder" in data["error"]["message"]


def test_external_data_in_a_model_proto_without_a_folder_is_refused(tmp_path):
    path = _external_expand(tmp_path / "model")
    model = onnx.load(path, load_external_data=False)
    with pytest.raises(ModelError, match="ModelProto has no folder"):
        verify_model(model, runtimes=["onnxruntime"])


def test_a_model_proto_with_embedded_data_verifies(tmp_path):
    path = _add(tmp_path / "add.onnx", [2, 3], [3])
    outcome = verify_model(onnx.load(path), runtimes=["onnxruntime"])
    assert outcome.path == "<ModelProto>"
    assert outcome.nodes[0].comparisons["onnxruntime"].agree


# -- --dim that no input uses --------------------------------------------------------------


def test_a_dim_that_no_input_has_is_warned_about(tmp_path):
    add = helper.make_node("Add", ["x", "b"], ["y"], name="add")
    path = _save(tmp_path / "add.onnx", [add], [_vi("x", ["batch", 3]), _vi("b", [3])])
    args = ["--runtime", "onnxruntime", "--dim", "nosuch=3", "--dim", "batch=4"]
    code, data = verify_json(path, *args)
    assert code == 0
    assert data["unused_dims"] == ["nosuch"]
    assert data["nodes"][0]["inputs"][0]["shape"] == "[4,3]"
    result = run("verify", path, *args)
    (line,) = result.stderr.strip().splitlines()
    assert "warning" in line
    assert "nosuch=3" in line
    assert "batch" not in line


# -- inputs exactly as the model declares them ---------------------------------------------


@pytest.mark.parametrize(
    ("elem", "op"),
    [
        pytest.param(F, "Add", id="float-scalar"),
        pytest.param(TensorProto.BOOL, "And", id="bool-scalar"),
        pytest.param(TensorProto.INT64, "Mul", id="int-scalar"),
    ],
)
def test_a_scalar_input_is_fed_as_a_0d_array_to_every_runtime(tmp_path, elem, op):
    # x: [2,3] and s: [] (a 0-d input): both runtimes run the node and agree with bcast.
    # Before: OpenVINO got s as [1] (np.ascontiguousarray) and onnxruntime refused a
    # numpy.bool scalar, and verify blamed the runtimes.
    out_elem = TensorProto.BOOL if op == "And" else elem
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "s"], ["z"])],
        "g",
        [_vi("x", [2, 3], elem), _vi("s", [], elem)],
        [helper.make_tensor_value_info("z", out_elem, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "scalar.onnx"
    onnx.save(model, path)
    code, out = verify_json(str(path))
    assert code == 0, out
    (node,) = out["nodes"]
    for runtime in ("onnxruntime", "openvino"):
        assert node["results"][runtime]["error"] is None, node["results"][runtime]
        assert node["results"][runtime]["shape"] == "[2,3]"


# -- harness errors: bcast's own, never the runtime's --------------------------------------


def _untyped_output(real):
    """Wrap one_node_model so that it declares the output UNDEFINED (the issue 14 bug)."""

    def build(*args, **kwargs):
        model = real(*args, **kwargs)
        model.graph.output[0].type.tensor_type.elem_type = TensorProto.UNDEFINED
        return model

    return build


@pytest.mark.parametrize("checked", [True, False], ids=["caught-by-bcast", "said-by-ort"])
def test_a_malformed_request_is_a_harness_error_not_the_runtimes_rejection(
    tmp_path, monkeypatch, checked
):
    import bcast.onnx.verify as onnx_verify

    monkeypatch.setattr(onnx_verify, "one_node_model", _untyped_output(onnx_verify.one_node_model))
    if not checked:  # onnxruntime itself says "Invalid tensor data type 0."
        monkeypatch.setattr(onnx_verify, "check_request", lambda model, feeds: None)
    path = _save(tmp_path / "add.onnx", [helper.make_node("Add", ["x", "b"], ["y"], name="add")],
                 [_vi("x", [2, 3]), _vi("b", [3])])  # fmt: skip
    code, data = verify_json(path, "--runtime", "onnxruntime")
    assert code == 1
    (node,) = data["nodes"]
    comparison = node["comparisons"]["onnxruntime"]
    assert comparison["harness"] is True and comparison["agree"] is False
    assert "bcast's harness failed" in comparison["detail"]
    assert "rejects" not in comparison["detail"]
    assert node["results"]["onnxruntime"]["harness"] is True
    assert data["summary"]["harness_errors"] == 1 and data["summary"]["disagreements"] == 0
    result = run("verify", path, "--runtime", "onnxruntime")
    assert result.exit_code == 1
    assert "1 harness error" in result.stdout and "every runtime agrees" not in result.stdout


@pytest.mark.parametrize(
    "elem",
    [TensorProto.INT64, TensorProto.BOOL, TensorProto.FLOAT16, TensorProto.DOUBLE, I32],
    ids=["int64", "bool", "float16", "double", "int32"],
)
def test_every_input_is_fed_in_the_dtype_the_model_declares(tmp_path, elem):
    op = "And" if elem == TensorProto.BOOL else "Equal"
    node = helper.make_node(op, ["x", "s"], ["y"], name="node")
    inputs = [_vi("x", [2, 3], elem), _vi("s", [], elem)]
    graph = helper.make_graph([node], "g", inputs, [_vi("y", None, TensorProto.BOOL)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    code, data = verify_json(str(tmp_path / "m.onnx"))
    assert code == 0, data
    (node_run,) = data["nodes"]
    for runtime in data["runtimes"]:
        assert node_run["results"][runtime]["shape"] == "[2,3]"
        assert node_run["comparisons"][runtime]["agree"] is True


def _half_apart(units: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Values of 0.1-1000 and the same values ``units`` units in the last place higher."""
    ours = np.geomspace(0.1, 1000.0, 200).astype(dtype)
    theirs = ours.copy()
    for _ in range(units):
        theirs = np.nextafter(theirs, np.array(np.inf, dtype))
    return ours, theirs


@pytest.mark.parametrize(
    ("dtype", "units", "agree"),
    [
        ("float16", 1, True),  # runtimes round float16 arithmetic differently, rightly
        ("float16", 2, True),
        ("float16", 3, False),
        ("float32", 1, True),  # far inside RTOL
        ("float32", 1000, False),  # past RTOL (1e-4): float32 gains no ulp tolerance
    ],
)
def test_values_agree_within_float16_units_in_the_last_place(
    dtype: str, units: int, agree: bool
) -> None:
    from bcast.models.verification import Result, compare

    ours, theirs = _half_apart(units, dtype)
    found = compare(Result(ours), Result(theirs), "onnxruntime")
    assert found.agree is agree, found.detail
