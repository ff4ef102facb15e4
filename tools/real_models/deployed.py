"""Build the deployed-model fixtures in tests/fixtures/deployed/ (issue 37; not run by CI).

What people deploy, tiny and with random weights (tools/real_models/deployed_models.py):
onnxruntime-quantized QDQ / QOperator / dynamic / MatMulNBits (4-bit blocks, also as blocked
DequantizeLinear) models, onnxruntime transformer-optimizer output (com.microsoft ops),
NNCF-compressed OpenVINO IR (int8, int4 groups, FakeQuantize), a GPT-2 with a KV cache,
U-Nets and a segmentation net with dynamic H/W, a diffusers UNet and VAE decoder, SSDlite
(If/Loop), LSTM/GRU, Mamba, an onnxscript model with model-local functions,
nn.MultiheadAttention by the TorchScript exporter, opsets 7 to 23.  Each valid model
has one-bug mutants (an initializer or IR Const one short, an attribute off by one), and
every file is run by the peers (tools/real_models/peers.py) at its default sizes, the
valid ones also at the probe points (tools/real_models/probe.py).  All verdicts, the
versions and every file's sha256 go into tests/fixtures/deployed/manifest.json.

Usage (from the repository root, in an environment made from requirements-deployed.txt):

    /tmp/exportenv/bin/python tools/real_models/deployed.py              # everything
    /tmp/exportenv/bin/python tools/real_models/deployed.py --only mutate --only peers
    /tmp/exportenv/bin/python tools/real_models/deployed.py --file unet_torchscript.onnx

Exports run one at a time, each in its own child process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "tests" / "fixtures" / "deployed"
sys.path.insert(0, str(HERE))

import build  # noqa: E402
import mutate  # noqa: E402

build.OUT = OUT  # build.run_peers and build.ir_mutate read files from OUT

TIMEOUT = 600


def _cut(
    base: str, init: str, shape: list[int], node: str, axis: int | None, bug: str, why: str
) -> dict[str, Any]:
    return {
        "base": base,
        "initializer": init,
        "new_shape": shape,
        "bug": bug,
        "expected": {"node": node, "axis": axis, "why": why},
    }


# Each mutant carries one bug of a kind real exports and hand edits make.  "expected" is
# known from the construction: the node that consumes the cut tensor (or, for an attribute,
# the node where the wrong size meets the right one), never from bcast.
MUTANTS: list[dict[str, Any]] = [
    {
        **_cut(
            "cnn_qdq_ort.onnx",
            "3.weight_scale",
            [15],
            "3.weight_DequantizeLinear",
            0,
            "per-channel weight scale one channel short (QDQ, axis 0)",
            "DequantizeLinear(axis=0) of a [16,8,3,3] weight with a scale of 15 values",
        ),
        "file": "cnn_qdq_ort__weight_scale_15.onnx",
    },
    {
        **_cut(
            "cnn_qdq_ort.onnx",
            "onnx::Conv_21_zero_point",
            [7],
            "onnx::Conv_21_DequantizeLinear",
            0,
            "per-channel weight zero point one channel short (QDQ)",
            "DequantizeLinear(axis=0) of a [8,3,3,3] weight with a zero point of 7 values",
        ),
        "file": "cnn_qdq_ort__conv0_zero_point_7.onnx",
    },
    {
        **_cut(
            "cnn_qoperator_ort.onnx",
            "3.weight_scale",
            [15],
            "/3/Conv_quant",
            1,
            "QLinearConv w_scale one output channel short (QOperator)",
            "QLinearConv with a [16,8,3,3] weight and a w_scale of 15 values",
        ),
        "file": "cnn_qoperator_ort__w_scale_15.onnx",
    },
    {
        **_cut(
            "cnn_qoperator_ort.onnx",
            "onnx::Conv_22_quantized",
            [7],
            "/0/Conv_quant",
            1,
            "QLinearConv int32 bias one channel short (QOperator)",
            "QLinearConv with 8 output channels and a bias B of 7 values",
        ),
        "file": "cnn_qoperator_ort__bias_7.onnx",
    },
    {
        **_cut(
            "bert_dynquant_ort.onnx",
            "model.encoder.layer.0.attention.output.dense.bias",
            [31],
            "/model/encoder/layer.0/attention/output/dense/Add",
            2,
            "Linear bias one short after MatMulInteger (dynamic quantization)",
            "dequantized MatMulInteger output [batch,seq,32] + bias [31]: axis 2",
        ),
        "file": "bert_dynquant_ort__dense_bias_31.onnx",
    },
    {
        **_cut(
            "llama_nbits_ort.onnx",
            "onnx::MatMul_652_scales",
            [32, 1],
            "/model/layers.0/self_attn/q_proj/MatMul_Q4",
            None,
            "MatMulNBits scales one block short per column (com.microsoft)",
            "MatMulNBits(K=32, N=32, block_size=16): scales must hold N*ceil(K/16) = 64 values",
        ),
        "file": "llama_nbits_ort__q_scales_32x1.onnx",
    },
    {
        **_cut(
            "llama_nbits_qdq_ort.onnx",
            "onnx::MatMul_652_DQ_scales",
            [1, 32],
            "/model/layers.0/self_attn/q_proj/MatMul_DQ_Q4",
            None,
            "blocked DequantizeLinear scale one block short (block_size 16, opset 21)",
            "DequantizeLinear(axis=0, block_size=16) of a [32,32] weight: scale must be [2,32]",
        ),
        "file": "llama_nbits_qdq_ort__q_scales_1x32.onnx",
    },
    {
        "file": "cnn_nncf_fakequantize_openvino__conv1_scale_15.xml",
        "base": "cnn_nncf_fakequantize_openvino.xml",
        "consumer": "__module.3/aten::_convolution/Convolution/fq_weights_1",
        "new_shape": [15, 1, 1, 1],
        "bug": "NNCF int8 per-channel weight scale one output channel short",
        "expected": {
            "node": "__module.3/aten::_convolution/Convolution/fq_weights_1",
            "axis": 0,
            "why": "decompression Multiply: weight [16,8,3,3] * scale [15,1,1,1]",
        },
    },
    {
        **_cut(
            "bert_ortopt.onnx",
            "model.encoder.layer.0.intermediate.dense.bias",
            [63],
            "Gelu_AddBias_0",
            2,
            "BiasGelu bias of 63 for 64 (com.microsoft)",
            "BiasGelu(A [batch,seq,64], bias [63]): bias must be A's last dim, 64",
        ),
        "file": "bert_ortopt__biasgelu_bias_63.onnx",
    },
    {
        **_cut(
            "bert_ortopt.onnx",
            "model.encoder.layer.1.output.LayerNorm.weight",
            [31],
            "SkipLayerNorm_AddBias_3",
            2,
            "SkipLayerNormalization gamma one short",
            "SkipLayerNormalization(input [batch,seq,32], gamma [31]): gamma must be [32]",
        ),
        "file": "bert_ortopt__skiplayernorm_gamma_31.onnx",
    },
    {
        **_cut(
            "bert_ortopt.onnx",
            "Attention_0_qkv_bias",
            [95],
            "Attention_0",
            2,
            "Attention qkv bias one short (com.microsoft Attention)",
            "Attention(weights [32,96], bias [95]): bias must be [3*hidden] = [96]",
        ),
        "file": "bert_ortopt__attention_bias_95.onnx",
    },
    {
        **_cut(
            "gpt2_ortopt.onnx",
            "model.h.0.mlp.c_fc.bias",
            [127],
            "FastGelu_AddBias_0",
            2,
            "FastGelu bias of 127 for 128 (com.microsoft)",
            "FastGelu(X [batch,seq,128], bias [127]): bias must be X's last dim",
        ),
        "file": "gpt2_ortopt__fastgelu_bias_127.onnx",
    },
    {
        **_cut(
            "gpt2_ortopt.onnx",
            "model.h.0.mlp.c_proj.bias",
            [31],
            "SkipLayerNorm_AddBias_0",
            2,
            "SkipLayerNormalization bias (the fused Linear bias) one short",
            "SkipLayerNormalization(input [batch,seq,32], bias [31])",
        ),
        "file": "gpt2_ortopt__skiplayernorm_bias_31.onnx",
    },
    {
        "file": "llama_nncf_int8_openvino__q_scale_63.xml",
        "base": "llama_nncf_int8_openvino.xml",
        "consumer": "self.lm.model.layers.0.self_attn.q_proj.weight/fq_weights_1",
        "new_shape": [63, 1],
        "bug": "NNCF int8 per-channel scale one output channel short",
        "expected": {
            "node": "self.lm.model.layers.0.self_attn.q_proj.weight/fq_weights_1",
            "axis": 0,
            "why": "decompression Multiply: weight [64,64] * scale [63,1]",
        },
    },
    {
        "file": "llama_nncf_int4_openvino__q_group_scale_3.xml",
        "base": "llama_nncf_int4_openvino.xml",
        "consumer": "self.lm.model.layers.0.self_attn.q_proj.weight/fq_weights_1",
        "new_shape": [64, 3, 1],
        "bug": "NNCF int4 group scale one group short ([out, groups, 1])",
        "expected": {
            "node": "self.lm.model.layers.0.self_attn.q_proj.weight/fq_weights_1",
            "axis": 1,
            "why": "decompression Multiply: weight [64,4,16] * scale [64,3,1]",
        },
    },
    {
        **_cut(
            "gpt2_kv_torchscript.onnx",
            "lm.transformer.h.0.attn.c_proj.bias",
            [31],
            "/lm/transformer/h.0/attn/c_proj/Gemm",
            1,
            "Gemm C one short in a KV-cache decoder",
            "Gemm(A [batch*seq,32], B [32,32], C [31]): C must broadcast to [batch*seq,32]",
        ),
        "file": "gpt2_kv_torchscript__c_proj_bias_31.onnx",
    },
    {
        **_cut(
            "unet_torchscript.onnx",
            "u.bias",
            [7],
            "/u/ConvTranspose",
            1,
            "ConvTranspose bias one channel short",
            "ConvTranspose with 8 output channels, B [7]",
        ),
        "file": "unet_torchscript__convtranspose_bias_7.onnx",
    },
    {
        "file": "unet_torchscript__output_padding_1.onnx",
        "base": "unet_torchscript.onnx",
        "attribute": {"node": "/u/ConvTranspose", "name": "output_padding", "ints": [1, 1]},
        "bug": "skip off by one: ConvTranspose output_padding 1 (2H+1 rows for H)",
        "expected": {
            "node": "/Add",
            "axis": 2,
            "why": "ConvTranspose output [batch,8,height+1,width+1] + skip [batch,8,"
            "height,width] (height even): axis 2, 33 vs 32 at 32x32",
        },
    },
    {
        "file": "unet2_torchscript__inner_output_padding_1.onnx",
        "base": "unet2_torchscript.onnx",
        "attribute": {"node": "/u2/ConvTranspose", "name": "output_padding", "ints": [1, 1]},
        "bug": "Concat skip off by one: the inner ConvTranspose's output_padding 1",
        "expected": {
            "node": "/Concat",
            "axis": 2,
            "why": "Concat(ConvTranspose [batch,8,2*(H/4)+1,..], skip [batch,8,H/2,..]) on "
            "axis 1: axes 2 and 3 must be equal, 17 vs 16 at 32x32",
        },
    },
    {
        **_cut(
            "lraspp_torchscript.onnx",
            "m.classifier.high_classifier.bias",
            [2],
            "/m/classifier/high_classifier/Conv",
            1,
            "segmentation head bias one class short",
            "Conv with 3 output channels (classes), B [2]",
        ),
        "file": "lraspp_torchscript__high_classifier_bias_2.onnx",
    },
    {
        **_cut(
            "sd_unet_torchscript.onnx",
            "m.down_blocks.0.resnets.0.time_emb_proj.bias",
            [7],
            "/m/down_blocks.0/resnets.0/time_emb_proj/Gemm",
            1,
            "time-embedding projection bias one channel short",
            "Gemm(temb [batch,32], W^T [32,8], C [7]): C must broadcast to [batch,8]",
        ),
        "file": "sd_unet_torchscript__time_emb_proj_bias_7.onnx",
    },
    {
        **_cut(
            "sd_vae_decoder_torchscript.onnx",
            "onnx::Mul_493",
            [15, 1, 1],
            "/decoder/mid_block/resnets.0/norm1/Mul",
            1,
            "GroupNorm scale one channel short",
            "normalised [batch,16,h,w] * scale [15,1,1]: axis 1, 16 vs 15",
        ),
        "file": "sd_vae_decoder_torchscript__norm1_scale_15.onnx",
    },
    {
        "file": "ssdlite_torchscript__head_bias.onnx",
        "base": "ssdlite_torchscript.onnx",
        "initializer": None,
        "head_bias": True,
        "bug": "SSD classification head bias one short",
        "expected": {
            "node": None,
            "axis": 1,
            "why": "the first classification-head Conv: B one channel short of its output channels",
        },
    },
    {
        **_cut(
            "lstm_torchscript.onnx",
            "head.bias",
            [4],
            "/head/Add",
            2,
            "per-step Linear bias one short after an LSTM",
            "MatMul [batch,seq,5] + bias [4]: axis 2",
        ),
        "file": "lstm_torchscript__head_bias_4.onnx",
    },
    {
        **_cut(
            "lstm_torchscript.onnx",
            "onnx::LSTM_111",
            [1, 255],
            "/rnn/LSTM",
            None,
            "LSTM B one short ([num_directions, 8*hidden])",
            "LSTM with hidden 32: B must be [1,256]",
        ),
        "file": "lstm_torchscript__B_255.onnx",
    },
    {
        **_cut(
            "gru_torchscript.onnx",
            "head.bias",
            [4],
            "/head/Add",
            2,
            "per-step Linear bias one short after a GRU",
            "MatMul [batch,seq,5] + bias [4]: axis 2",
        ),
        "file": "gru_torchscript__head_bias_4.onnx",
    },
    {
        **_cut(
            "mamba_torchscript.onnx",
            "lm.backbone.layers.0.norm.weight",
            [31],
            "/lm/backbone/layers.0/norm/Mul_1",
            2,
            "RMSNorm weight one short (Mamba block)",
            "weight [31] * normalised [batch,seq,32]: axis 2",
        ),
        "file": "mamba_torchscript__norm_weight_31.onnx",
    },
    {
        **_cut(
            "onnxscript_functions.onnx",
            "block0.b",
            [31],
            "block0",
            2,
            "bias one short, passed into a model-local function (BiasGelu inside Block)",
            "Block's MatMul [batch,seq,32] + b [31] in BiasGelu's Add: axis 2",
        ),
        "file": "onnxscript_functions__bias_31.onnx",
    },
    {
        **_cut(
            "mha_torchscript.onnx",
            "att.in_proj_bias",
            [95],
            "/att/Add",
            2,
            "MultiheadAttention in_proj bias one short",
            "MatMul [batch,seq,96] + in_proj_bias [95]: axis 2",
        ),
        "file": "mha_torchscript__in_proj_bias_95.onnx",
    },
    {
        **_cut(
            "mlp_opset7.onnx",
            "shift",
            [31],
            "/Add",
            1,
            "learned shift one short, opset 7",
            "Relu [batch,32] + shift [31]: axis 1",
        ),
        "file": "mlp_opset7__shift_31.onnx",
    },
    {
        **_cut(
            "cnn_opset23.onnx",
            "7.bias",
            [9],
            "/7/Gemm",
            1,
            "Gemm C one class short, opset 23",
            "Gemm(A [batch,16], B^T [16,10], C [9]): axis 1",
        ),
        "file": "cnn_opset23__fc_bias_9.onnx",
    },
]


def export(names: list[str]) -> dict[str, Any]:
    """Build each valid fixture in its own child process, one at a time."""
    OUT.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {}
    for name in names:
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, str(HERE / "deployed_models.py"), name, str(OUT)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        if proc.returncode != 0:
            print(f"export {name}: FAILED\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        info[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"export {name}: ok ({time.time() - t0:.1f} s)")
    return info


def _ssd_head_bias(model: Any) -> tuple[str, str, list[int]]:
    """The first classification-head Conv with a bias: (its name, the bias, the cut shape)."""
    inits = {i.name: list(i.dims) for i in model.graph.initializer}
    for n in model.graph.node:
        head = n.op_type == "Conv" and "classification_head" in n.name
        if head and len(n.input) == 3 and n.input[2] in inits:
            return n.name, n.input[2], [inits[n.input[2]][0] - 1]
    raise KeyError("no classification-head Conv with a bias")


def make_mutant(m: dict[str, Any]) -> dict[str, Any]:
    """Write one mutant; return what changed."""
    import onnx

    src, dst = OUT / m["base"], OUT / m["file"]
    if "consumer" in m:
        change = build.ir_mutate(src, dst, m["consumer"], m["new_shape"])
        m["expected"]["op_type"] = change["consumers"][0]["type"]
        return change
    if "attribute" in m:
        spec = m["attribute"]
        model = onnx.load(str(src))
        node = next(n for n in model.graph.node if n.name == spec["node"])
        for a in node.attribute:
            if a.name == spec["name"]:
                node.attribute.remove(a)
                break
        node.attribute.append(onnx.helper.make_attribute(spec["name"], spec["ints"]))
        onnx.save(model, str(dst))
        m["expected"]["op_type"] = next(
            n.op_type for n in model.graph.node if n.name == m["expected"]["node"]
        )
        return {"node": spec["node"], "attribute": spec["name"], "new_value": spec["ints"]}
    if m.get("head_bias"):
        node, init, shape = _ssd_head_bias(onnx.load(str(src)))
        m["initializer"], m["new_shape"], m["expected"]["node"] = init, shape, node
    change = mutate.onnx_initializer(src, dst, m["initializer"], m["new_shape"])
    model = onnx.load(str(dst))
    m["expected"]["op_type"] = next(
        n.op_type for n in model.graph.node if n.name == m["expected"]["node"]
    )
    return change


def probe(entry: dict[str, Any], points: list[dict[str, int]]) -> list[dict[str, Any]]:
    """The runtime at each point (tools/real_models/probe.py in a child process)."""
    cmd = [
        sys.executable,
        str(HERE / "probe.py"),
        str(OUT / entry["file"]),
        json.dumps(entry["inputs"]),
        json.dumps(entry["defaults"]),
        json.dumps(points),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def versions() -> dict[str, str]:
    """Versions of the packages used."""
    from importlib.metadata import PackageNotFoundError, version

    out = build.versions()
    for pkg in ("nncf", "diffusers", "onnx-ir"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


SECTION = "## Deployed models (issue 37)"


def docs_section(manifest: dict[str, Any]) -> list[str]:
    """docs/real-models.md's section on tests/fixtures/deployed: files as rows, peers as columns."""
    v = manifest["versions"]
    mark = build.MARK
    lines = [
        SECTION,
        "",
        "What people deploy, tiny and with random weights, in "
        "[`tests/fixtures/deployed/`](../tests/fixtures/deployed/) with "
        "[`manifest.json`](../tests/fixtures/deployed/manifest.json) (how each was made, its "
        "inputs, the sizes run, sha256, every verdict), made by "
        "[`tools/real_models/deployed.py`](../tools/real_models/deployed.py) and "
        "[`deployed_models.py`](../tools/real_models/deployed_models.py) (not run by CI). "
        f"Measured {manifest['measured']} with Python {v['python']}: torch {v['torch']}, "
        f"torchvision {v['torchvision']}, transformers {v['transformers']}, diffusers "
        f"{v['diffusers']}, nncf {v['nncf']}, onnxscript {v['onnxscript']}, onnx {v['onnx']}, "
        f"onnxruntime {v['onnxruntime']}, openvino {v['openvino']}. The columns are the "
        "table's above; the peers run each file at its default sizes (manifest `defaults`). "
        "`tests/unit/test_deployed_models.py` checks every file with bcast, asserts each "
        "mutant is reported at its node, and runs the runtime just inside and just outside "
        "every range `bcast domain` prints (and at the probe points below); what bcast "
        "still gets wrong on them is marked there as strict xfails, each with its reason. "
        "Before issue 37's work (ae9a754~1) 62 of its 109 tests failed: the com.microsoft and "
        "quantization mutants passed unseen, the U-Nets' domains said `height any`, verify "
        "skipped function bodies.",
        "",
        "| file | kind | what | checker | strict SI | ort session | ort run | ov read | "
        "ov compile | ov infer |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in manifest["files"].items():
        cells = [
            mark.get(e["peers"][s]["verdict"], e["peers"][s]["verdict"]) for s in build.STAGE_ORDER
        ]
        what = (
            e["architecture"]
            if e["kind"] == "valid"
            else f"{e['bug']}: `{e['expected']['node']}` ({e['expected']['op_type']})"
        )
        lines.append(f"| `{name}` | {e['kind']} | {what} | " + " | ".join(cells) + " |")
    lines += ["", "How each valid file was made, and the runtime at its probe points:", ""]
    for name, e in manifest["files"].items():
        if e["kind"] != "valid":
            continue
        lines.append(f"- `{name}`: {e['how']}.")
        for r in e.get("probe_results", []):
            said = "runs" if r["runs"] else f"fails: `{(r['message'] or '')[:160]}`"
            point = ", ".join(f"{k}={val}" for k, val in r["point"].items())
            lines.append(f"  - {point}: {said}")
    return [ln.replace("\n", " ") for ln in lines] + [""]


def write_docs(manifest: dict[str, Any]) -> None:
    """Put the section into docs/real-models.md, before "## Rebuilding" (or replace it)."""
    text = build.DOCS.read_text()
    section = "\n".join(docs_section(manifest)) + "\n"
    if SECTION in text:
        start = text.index(SECTION)
        end = text.index("\n## ", start + len(SECTION)) + 1
        text = text[:start] + section + text[end:]
    else:
        at = text.index("## Rebuilding")
        text = text[:at] + section + text[at:]
    build.DOCS.write_text(text)


def main(argv: list[str]) -> int:
    """Run the stages."""
    import deployed_models

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", choices=["export", "mutate", "peers", "docs"], action="append")
    ap.add_argument("--file", choices=list(deployed_models.BUILDERS), action="append")
    args = ap.parse_args(argv)
    stages = args.only or ["export", "mutate", "peers", "docs"]
    mpath = OUT / "manifest.json"
    manifest: dict[str, Any] = json.loads(mpath.read_text()) if mpath.exists() else {"files": {}}
    names = args.file or list(deployed_models.BUILDERS)
    mutants = [m for m in MUTANTS if m["base"] in names]
    if "export" in stages:
        for name, meta in export(names).items():
            manifest["files"][name] = {
                "file": name,
                "kind": "valid",
                **meta,
                "format": "openvino-ir" if name.endswith(".xml") else "onnx",
            }
    if "mutate" in stages:
        for m in mutants:
            change = make_mutant(m)
            base = manifest["files"][m["base"]]
            manifest["files"][m["file"]] = {
                "file": m["file"],
                "kind": "mutant",
                "base": m["base"],
                "bug": m["bug"],
                "format": base["format"],
                "architecture": base["architecture"],
                "mutation": change,
                "expected": m["expected"],
                "inputs": base["inputs"],
                "defaults": base["defaults"],
            }
            print(f"mutant {m['file']}: {change}")
    order = [*deployed_models.BUILDERS, *(m["file"] for m in MUTANTS)]
    manifest["files"] = dict(sorted(manifest["files"].items(), key=lambda kv: order.index(kv[0])))
    done = set(names) | {m["file"] for m in mutants}
    for name, e in manifest["files"].items():
        if name in done:
            e["files"] = [
                {"path": p.name, "bytes": p.stat().st_size, "sha256": build.sha256(p)}
                for p in (
                    [OUT / name, (OUT / name).with_suffix(".bin")]
                    if name.endswith(".xml")
                    else [OUT / name]
                )
            ]
    if "peers" in stages:
        for name, e in manifest["files"].items():
            if name not in done:
                continue
            t0 = time.time()
            specs = {
                k: {
                    **v,
                    "shape": [e["defaults"][d] if isinstance(d, str) else d for d in v["shape"]],
                }
                for k, v in e["inputs"].items()
            }
            e["peers"] = build.run_peers({"file": name, "run_inputs": specs})
            if e["kind"] == "valid" and "probes" in e:
                e["probe_results"] = probe(e, e["probes"])
            if e["kind"] == "mutant":
                e["rejected_by"] = [s for s, r in e["peers"].items() if r["verdict"] == "fail"]
            verdicts = " ".join(f"{s}={r['verdict']}" for s, r in e["peers"].items())
            print(f"peers {name} ({time.time() - t0:.1f} s): {verdicts}")
    manifest["versions"] = versions()
    manifest["measured"] = time.strftime("%Y-%m-%d")
    manifest = {
        "about": "Deployed-model fixtures (issue 37) with random weights; see docs/real-models.md"
        " and tools/real_models/deployed.py. kind=mutant files carry one bug at expected.node"
        " (expected.axis: the output axis, null where the bug is in an operand of the node's "
        "own rule); inputs give each input's dims (names for the dynamic ones), defaults the "
        "sizes the peers ran, probe_results the runtime at other sizes.",
        **{k: v for k, v in manifest.items() if k != "about"},
    }
    mpath.write_text(json.dumps(manifest, indent=1) + "\n")
    if "docs" in stages and all("peers" in e for e in manifest["files"].values()):
        write_docs(manifest)
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"{len(manifest['files'])} fixtures, {total / 1e6:.2f} MB in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
