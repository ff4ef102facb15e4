"""``bcast verify``: each broadcasting node run in onnxruntime / OpenVINO and in bcast.

The known departures from the ONNX spec must be found: onnxruntime broadcasts PRelu's slope
both ways (SEMANTICS R40), and OpenVINO applies a 1-D PRelu slope per channel while the
spec's unidirectional rule aligns it to the last axis.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result
from onnx import TensorProto, helper, numpy_helper

from bcast.cli import main
from bcast.onnx.verify import verify_model

pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT
ENV = {"COLUMNS": "100", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}

RESULT = {
    "type": "object",
    "required": ["shape", "dtype", "error"],
    "properties": {
        "shape": {"type": ["string", "null"]},
        "dtype": {"type": ["string", "null"]},
        "error": {"type": ["string", "null"]},
    },
    "additionalProperties": False,
}
VERIFY_SCHEMA = {
    "type": "object",
    "required": ["model", "runtimes", "seed", "nodes", "notes", "summary", "error"],
    "properties": {
        "model": {"type": "string"},
        "runtimes": {"type": "array", "items": {"enum": ["onnxruntime", "openvino"]}},
        "seed": {"type": "integer"},
        "notes": {"type": "array", "items": {"type": "string"}},
        "error": {"type": "null"},
        "summary": {
            "type": "object",
            "required": ["nodes", "disagreements"],
            "properties": {"nodes": {"type": "integer"}, "disagreements": {"type": "integer"}},
        },
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["node", "op", "inputs", "results", "comparisons"],
                "properties": {
                    "results": {"type": "object", "additionalProperties": RESULT},
                    "comparisons": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "required": ["agree", "detail", "max_abs_diff"],
                        },
                    },
                },
            },
        },
    },
    "additionalProperties": False,
}


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=ENV, catch_exceptions=False)


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
    assert code == 0  # bcast and onnxruntime both reject [3,4] + [2,4]
    comparison = data["nodes"][0]["comparisons"]["onnxruntime"]
    assert comparison == {"agree": True, "detail": "both reject the node", "max_abs_diff": None}


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
    assert "not an ONNX model" in data["error"]


def test_openvino_ir_is_not_a_verify_input(tmp_path):
    path = tmp_path / "m.xml"
    path.write_text("<net/>")
    result = run("verify", str(path))
    assert result.exit_code == 2
    assert "bcast verify runs ONNX models" in result.stderr
