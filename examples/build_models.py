"""Build the example models that ``bcast check`` and ``bcast verify`` are shown on.

Usage::

    python examples/build_models.py [OUTPUT_DIR]      # default: examples/models/

Writes, with ``onnx.helper`` (and ``openvino`` for the IR):

- ``block.onnx``: a small transformer-style block with symbolic ``batch`` and ``seq``:
  LayerNorm-like Sub/Div/Mul/Add with broadcast gamma and beta, attention scores plus a
  mask (Add), a Gemm with a bias, a PRelu, an Expand. It is clean.
- ``block_broken.onnx``: the same block with two mistakes of the kind exporters make: a
  beta of 32 values for 64 features (definite error at ``ln_beta``) and a mask whose last dim
  is a separate symbol ``kv_seq`` (``attn_mask`` fails unless kv_seq is 1 or seq).
- ``broken_add.onnx``: an Add of [batch,seq,64] and [seq,32] (definite error).
- ``broken_prelu.onnx``: a PRelu whose slope [2,8] is larger than X [8].
- ``broken_gemm.onnx``: a Gemm whose C [4,16] does not broadcast to (M,N) = [1,16].
- ``huge_expand.onnx``: an Expand to [65536,65536,64] (a 1 TiB output).
- ``conditional.onnx``: [batch,4] + [2,4]: fails unless batch is 1 or 2.
- ``prelu_channels.onnx``: PRelu slope [3] on X [1,3,2,3] (OpenVINO reads it per channel).
- ``pdpd_no_axis.xml`` / ``.bin``: an OpenVINO IR whose pdpd Add has no axis attribute.
- ``pdpd_subtract.xml`` / ``.bin``: an OpenVINO IR with a pdpd Subtract ``[2,1] - [2]``,
  axis 0, whose axis OpenVINO's CPU plugin loses (``bcast verify`` shows it).

Every model passes ``onnx.checker.check_model``. With ``full_check=True`` (ONNX shape
inference, strict) the ``broken_*``, ``block_broken`` and ``huge_expand`` models are
rejected or accepted as ONNX's own inference sees them: they are invalid on purpose, as the
README lists.

The models are generated, never committed (``examples/models/`` is git-ignored).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
OPSET = [helper.make_opsetid("", 17)]


def _model(nodes, inputs, outputs, inits=(), name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="bcast-examples")
    model.ir_version = 8
    return model


def _vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _out(name, rank):
    """A graph output of known rank and unknown dims (onnx.checker wants a shape there)."""
    return _vi(name, [None] * rank)


def _const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def block() -> onnx.ModelProto:
    """A transformer-style block; every broadcast in it is valid."""
    rng = np.random.default_rng(0)
    d = 64
    inputs = [
        _vi("x", ["batch", "seq", d]),
        _vi("mask", ["batch", 1, 1, "seq"]),
        _vi("scores", ["batch", 4, "seq", "seq"]),
        _vi("features", ["batch", 32]),
    ]
    inits = [
        _const("gamma", rng.standard_normal(d).astype(np.float32)),
        _const("beta", rng.standard_normal(d).astype(np.float32)),
        _const("eps", np.array(1e-5, np.float32)),
        _const("w", rng.standard_normal((32, 16)).astype(np.float32)),
        _const("bias", rng.standard_normal(16).astype(np.float32)),
        _const("slope", np.full(16, 0.1, np.float32)),
        _const("heads", np.array([1, 4, 1, 1], np.int64)),
    ]
    nodes = [
        # LayerNorm, written out: (x - mean) / sqrt(var + eps) * gamma + beta
        helper.make_node("ReduceMean", ["x"], ["mean"], name="ln_mean", axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["centered"], name="ln_center"),
        helper.make_node("Mul", ["centered", "centered"], ["sq"], name="ln_square"),
        helper.make_node("ReduceMean", ["sq"], ["var"], name="ln_var", axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["var_eps"], name="ln_eps"),
        helper.make_node("Sqrt", ["var_eps"], ["std"], name="ln_std"),
        helper.make_node("Div", ["centered", "std"], ["normed"], name="ln_div"),
        helper.make_node("Mul", ["normed", "gamma"], ["scaled"], name="ln_gamma"),
        helper.make_node("Add", ["scaled", "beta"], ["ln_out"], name="ln_beta"),
        # attention: scores + mask, the mask broadcast over heads and query positions
        helper.make_node("Expand", ["mask", "heads"], ["mask_heads"], name="mask_expand"),
        helper.make_node("Add", ["scores", "mask_heads"], ["masked"], name="attn_mask"),
        helper.make_node("Softmax", ["masked"], ["probs"], name="attn_softmax", axis=-1),
        # a projection with bias, then PRelu
        helper.make_node("Gemm", ["features", "w", "bias"], ["proj"], name="proj_gemm"),
        helper.make_node("PRelu", ["proj", "slope"], ["act"], name="proj_prelu"),
    ]
    outputs = [
        _out("ln_out", 3),
        _out("probs", 4),
        _out("act", 2),
    ]
    return _model(nodes, inputs, outputs, inits, "block")


def block_broken() -> onnx.ModelProto:
    """The block with a beta of the wrong width and a mask over its own sequence symbol."""
    model = block()
    graph = model.graph
    (beta,) = [t for t in graph.initializer if t.name == "beta"]
    beta.CopyFrom(_const("beta", np.zeros(32, np.float32)))
    (mask,) = [i for i in graph.input if i.name == "mask"]
    mask.CopyFrom(_vi("mask", ["batch", 1, 1, "kv_seq"]))
    graph.name = "block_broken"
    return model


def broken_add() -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["x", "y"], ["z"], name="residual_add")]
    return _model(nodes, [_vi("x", ["batch", "seq", 64]), _vi("y", ["seq", 32])], [_out("z", 3)])


def broken_prelu() -> onnx.ModelProto:
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu_wide")]
    inits = [_const("slope", np.linspace(0.1, 0.8, 16, dtype=np.float32).reshape(2, 8))]
    return _model(nodes, [_vi("x", [8])], [_out("y", 1)], inits)


def broken_gemm() -> onnx.ModelProto:
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm_bias")]
    inits = [_const("c", np.ones((4, 16), np.float32))]
    return _model(nodes, [_vi("a", [1, 32]), _vi("b", [32, 16])], [_out("y", 2)], inits)


def huge_expand() -> onnx.ModelProto:
    nodes = [helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_huge")]
    inits = [_const("shape", np.array([65536, 65536, 64], np.int64))]
    return _model(nodes, [_vi("x", [1, 64])], [_out("y", 3)], inits)


def conditional() -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["x", "pair"], ["y"], name="pair_add")]
    inputs = [_vi("x", ["batch", 4]), _vi("pair", [2, 4])]
    return _model(nodes, inputs, [_out("y", 2)])


def prelu_channels() -> onnx.ModelProto:
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu_channels")]
    inits = [_const("slope", np.array([0.1, 0.2, 0.3], np.float32))]
    return _model(nodes, [_vi("x", [1, 3, 2, 3])], [_out("y", 4)], inits)


def pdpd_ir(directory: Path) -> Path | None:
    """An OpenVINO IR whose pdpd Add has no axis attribute (the axis is stripped)."""
    try:
        import openvino as ov
        from openvino.utils.node_factory import NodeFactory
    except ImportError:
        print("openvino is not installed: skipping pdpd_no_axis.xml", file=sys.stderr)
        return None
    a = ov.opset13.parameter([2, 3, 4, 5], np.float32, name="a")
    b = ov.opset13.parameter([4, 5], np.float32, name="b")
    add = NodeFactory("opset13").create(
        "Add",
        [a.output(0), b.output(0)],
        {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": 2},
    )
    add.set_friendly_name("pdpd_add")
    model = ov.Model([add], [a, b], "pdpd_no_axis")
    path = directory / "pdpd_no_axis.xml"
    ov.save_model(model, path)
    # OpenVINO always writes the axis; remove it to get the "absent" case of real files.
    text = path.read_text()
    stripped = re.sub(r'\s+auto_broadcast\.auto_broadcast_axis="[^"]*"', "", text)
    path.write_text(stripped)
    return path


def pdpd_subtract_ir(directory: Path) -> Path | None:
    """An OpenVINO IR with a pdpd Subtract [2,1] - [2], axis 0 (B covers A's axis 0)."""
    try:
        import openvino as ov
        from openvino.utils.node_factory import NodeFactory
    except ImportError:
        print("openvino is not installed: skipping pdpd_subtract.xml", file=sys.stderr)
        return None
    a = ov.opset13.parameter([2, 1], np.float32, name="a")
    b = ov.opset13.parameter([2], np.float32, name="b")
    sub = NodeFactory("opset13").create(
        "Subtract",
        [a.output(0), b.output(0)],
        {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": 0},
    )
    sub.set_friendly_name("pdpd_subtract")
    path = directory / "pdpd_subtract.xml"
    ov.save_model(ov.Model([sub], [a, b], "pdpd_subtract"), path)
    return path


MODELS = {
    "block.onnx": block,
    "block_broken.onnx": block_broken,
    "broken_add.onnx": broken_add,
    "broken_prelu.onnx": broken_prelu,
    "broken_gemm.onnx": broken_gemm,
    "huge_expand.onnx": huge_expand,
    "conditional.onnx": conditional,
    "prelu_channels.onnx": prelu_channels,
}


def main(argv: list[str]) -> int:
    directory = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent / "models"
    directory.mkdir(parents=True, exist_ok=True)
    for name, build in MODELS.items():
        model = build()
        onnx.save(model, directory / name)
    written = [*MODELS]
    for build_ir in (pdpd_ir, pdpd_subtract_ir):
        ir = build_ir(directory)
        if ir is not None:
            written.append(ir.name)
    print(f"wrote {len(written)} models to {directory}: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
