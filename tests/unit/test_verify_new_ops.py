"""``bcast verify`` runs the issue-38 operators through `bcast.ops` and compares the runtimes.

A model of Mod, BitShift, BitwiseAnd, GreaterOrEqual, LessOrEqual, QuantizeLinear (per
axis) and DequantizeLinear (blocked): every node is compared with onnxruntime and OpenVINO
and agrees; none is skipped. An OpenVINO IR of FloorMod, SquaredDifference, NotEqual and
Select (pdpd) likewise.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bcast.onnx.verify import verify_model

ov = pytest.importorskip("openvino")


def _model(path: Path) -> Path:
    nodes = [
        helper.make_node("Mod", ["a", "b"], ["m"], name="mod", fmod=1),
        helper.make_node("BitShift", ["u", "s"], ["sh"], name="shift", direction="RIGHT"),
        helper.make_node("BitwiseAnd", ["u", "s"], ["band"], name="band"),
        helper.make_node("GreaterOrEqual", ["a", "b"], ["ge"], name="ge"),
        helper.make_node("LessOrEqual", ["a", "b"], ["le"], name="le"),
        helper.make_node("QuantizeLinear", ["a", "scale", "zp"], ["q"], name="q", axis=1),
        helper.make_node(
            "DequantizeLinear", ["w4", "bscale4", "bzp4"], ["dq4"], name="dq4", axis=0, block_size=2
        ),
        helper.make_node(
            "DequantizeLinear", ["w", "bscale", "bzp"], ["dq"], name="dq", axis=0, block_size=2
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 3]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
        helper.make_tensor_value_info("u", TensorProto.UINT8, ["batch", 3]),
        helper.make_tensor_value_info("s", TensorProto.UINT8, [1]),
        helper.make_tensor_value_info("w4", TensorProto.INT8, [4, "k"]),
        helper.make_tensor_value_info("w", TensorProto.INT8, [5, "k"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([0.5, 1.0, 2.0], np.float32), "scale"),
        numpy_helper.from_array(np.array([0, 10, 128], np.uint8), "zp"),
        numpy_helper.from_array(
            np.array([[0.5, 1.0], [2.0, 4.0], [1.0, 1.0]], np.float32), "bscale"
        ),
        numpy_helper.from_array(np.array([[0, 1], [2, 3], [4, 5]], np.int8), "bzp"),
        numpy_helper.from_array(np.array([[0.5, 1.0], [2.0, 4.0]], np.float32), "bscale4"),
        numpy_helper.from_array(np.array([[0, 1], [2, 3]], np.int8), "bzp4"),
    ]
    outs = [
        helper.make_tensor_value_info(n, 0, None)
        for n in ("m", "sh", "band", "ge", "le", "q", "dq4", "dq")
    ]
    graph = helper.make_graph(nodes, "issue38", inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, path)
    return path


def test_every_new_operator_is_run_in_bcast_and_compared(tmp_path: Path) -> None:
    outcome = verify_model(
        _model(tmp_path / "new.onnx"), runtimes=["onnxruntime", "openvino"], seed=4
    )
    assert outcome.skipped == []
    assert [run.op for run in outcome.nodes] == [
        "Mod", "BitShift", "BitwiseAnd", "GreaterOrEqual", "LessOrEqual", "QuantizeLinear",
        "DequantizeLinear", "DequantizeLinear",
    ]  # fmt: skip
    for run in outcome.nodes[:-1]:
        assert run.results["bcast"].error is None, (run.op, run.results["bcast"])
        assert set(run.comparisons) == {"onnxruntime", "openvino"}
        assert all(c.agree for c in run.comparisons.values()), (run.op, run.comparisons)
    # A last block shorter than block_size (5 rows in blocks of 2): DequantizeLinear-21's
    # ceil(D / B) blocks. onnxruntime agrees with bcast; OpenVINO refuses the node
    # (docs/peer-differences.md).
    dq = outcome.nodes[-1]
    assert dq.results["bcast"].value.shape == (5, 2)  # k takes the blocked scale's 2
    assert dq.comparisons["onnxruntime"].agree
    assert not dq.comparisons["openvino"].agree
    assert "cannot be divided by block_size" in str(dq.results["openvino"].error)
    assert outcome.disagreements == 1 and outcome.harness_errors == 0


@pytest.mark.parametrize(
    ("op", "mode", "axis"),
    [
        ("FloorMod", "numpy", None),
        ("Mod", "numpy", None),
        ("SquaredDifference", "pdpd", 0),
        ("NotEqual", "numpy", None),
        ("GreaterEqual", "pdpd", 0),
        ("BitwiseXor", "numpy", None),
    ],
)
def test_ir_elementwise_nodes_run_through_bcast_ops(
    tmp_path: Path, op: str, mode: str, axis: int | None
) -> None:
    from openvino.utils.node_factory import NodeFactory

    from bcast.openvino.verify import verify_ir

    dtype = np.int32 if op == "BitwiseXor" else np.float32
    params = [ov.opset13.parameter([2, 3], dtype), ov.opset13.parameter([2, 1], dtype)]
    attrs: dict[str, object] = {"auto_broadcast": mode}
    if axis is not None:
        attrs["auto_broadcast.auto_broadcast_axis"] = axis
    node = NodeFactory("opset13").create(op, [p.output(0) for p in params], attrs)
    path = tmp_path / "one.xml"
    ov.save_model(ov.Model([node], params, "m"), path)
    outcome = verify_ir(str(path), seed=2)
    (run,) = outcome.nodes
    assert run.results["bcast"].error is None
    assert run.comparisons["openvino"].agree


def test_ir_select_pdpd_runs_through_bcast_select(tmp_path: Path) -> None:
    from bcast.openvino.verify import verify_ir

    cond = ov.opset13.parameter([2, 3, 4], np.bool_)
    then = ov.opset13.parameter([2, 3, 4], np.float32)
    other = ov.opset13.parameter([4], np.float32)
    from openvino.utils.node_factory import NodeFactory

    attrs = {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": -1}
    node = NodeFactory("opset13").create(
        "Select", [cond.output(0), then.output(0), other.output(0)], attrs
    )
    path = tmp_path / "select.xml"
    ov.save_model(ov.Model([node], [cond, then, other], "m"), path)
    (run,) = verify_ir(str(path), seed=3).nodes
    assert run.results["bcast"].value.shape == (2, 3, 4)
    assert run.comparisons["openvino"].agree


def test_nncf_fake_quantize_nodes_are_compared_with_openvino_not_skipped() -> None:
    # NNCF's FakeQuantize IR (tools/real_models/deployed.py): its per-tensor and per-channel
    # limits, placed by bcast.ops.fake_quantize and by OpenVINO's CPU plugin, agree
    from bcast.openvino.verify import verify_ir

    path = (
        Path(__file__).parents[1] / "fixtures" / "deployed" / "cnn_nncf_fakequantize_openvino.xml"
    )
    outcome = verify_ir(str(path), seed=0)
    fakes = [run for run in outcome.nodes if run.op == "FakeQuantize"]
    assert len(fakes) == 4 and outcome.skipped == []
    assert all(run.comparisons["openvino"].agree for run in fakes)


def test_a_fake_quantize_limit_placed_elsewhere_disagrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # per-element limits along X's last axis: X is drawn on the levels they make, so a side
    # that places them otherwise (here: reversed) lands on other levels and is told apart
    from bcast import ops
    from bcast.openvino import verify as ir_verify

    x = ov.opset13.parameter([2, 4, 3], np.float32)
    limits = [ov.opset13.parameter([1, 1, 3], np.float32) for _ in range(4)]
    node = ov.opset13.fake_quantize(x, *limits, levels=16)
    path = tmp_path / "fq.xml"
    ov.save_model(ov.Model([node], [x, *limits], "m"), path)
    (run,) = ir_verify.verify_ir(str(path), seed=5).nodes
    assert run.comparisons["openvino"].agree

    original = ops.fake_quantize

    def reversed_limits(x, low, high, out_low, out_high, **kw):  # type: ignore[no-untyped-def]
        return original(x, low[..., ::-1], high[..., ::-1], out_low, out_high, **kw)

    monkeypatch.setattr(ir_verify.ops, "fake_quantize", reversed_limits)
    (run,) = ir_verify.verify_ir(str(path), seed=5).nodes
    assert run.results["bcast"].error is None  # it ran, and answered other values
    assert run.results["bcast"].value.shape == (2, 4, 3)
    assert not run.comparisons["openvino"].agree


@pytest.mark.parametrize("levels", ["1", "0", "-5"])
def test_fake_quantize_levels_below_two_are_a_disagreement_not_a_crash(
    tmp_path: Path, levels: str
) -> None:
    # A hostile IR: levels that give no grid. bcast refuses the node (levels must be at
    # least 2); OpenVINO may run it: a disagreement, with no warning or traceback on the way
    import warnings

    from bcast.openvino.verify import verify_ir

    fixture = Path(__file__).parents[1] / "fixtures" / "deployed"
    xml = (fixture / "cnn_nncf_fakequantize_openvino.xml").read_text()
    (tmp_path / "fq.xml").write_text(xml.replace('levels="256"', f'levels="{levels}"', 1))
    (tmp_path / "fq.bin").write_bytes((fixture / "cnn_nncf_fakequantize_openvino.bin").read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's divide by zero was one
        outcome = verify_ir(str(tmp_path / "fq.xml"), seed=0)
    first = next(run for run in outcome.nodes if run.op == "FakeQuantize")
    assert "levels must be an integer of at least 2" in str(first.results["bcast"].error)
    assert not first.comparisons["openvino"].agree
