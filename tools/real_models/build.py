"""Build the real-model fixtures in tests/fixtures/real/ (not run by CI).

Tiny real architectures with RANDOM weights, made from library configs (nothing is
downloaded), exported the ways practitioners export them, plus mutated copies that each
carry one real broadcasting bug; then every peer (onnx.checker, ONNX strict shape
inference, onnxruntime, OpenVINO) is run on every file, each in a child process with a
timeout, and the verdicts go into tests/fixtures/real/manifest.json and docs/real-models.md.

Versions used (also in requirements.txt beside this file), Python 3.11, x86_64, CPU:
    torch==2.14.1 torchvision==0.29.1 transformers==5.23.0 timm==1.0.31
    scikit-learn==1.9.1 skl2onnx==1.20.0 onnxscript==0.7.2 onnx==1.23.2
    onnxruntime==1.32.0 openvino==2026.4.1 numpy==2.4.6

Usage (from the repository root, in an environment made from requirements.txt):

    python3 -m venv /tmp/exportenv
    /tmp/exportenv/bin/pip install -r tools/real_models/requirements.txt
    /tmp/exportenv/bin/python tools/real_models/build.py            # export, mutate, peers, docs
    /tmp/exportenv/bin/python tools/real_models/build.py --only peers
    /tmp/exportenv/bin/python tools/real_models/build.py --file vit_hw_dynamo.onnx  # one file

With --file, only the named valid files (and the mutants made from them) are exported and
run by the peers; the other manifest entries and their files are kept as they are.

Exports run one at a time, each in its own child process (the machine is small).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "tests" / "fixtures" / "real"
HALF_COPIES = [  # docs/real-models.md's part on tools/real_models/half.py's copies
    "## float16 copies",
    "",
    (
        "[`tests/fixtures/real_fp16/`](../tests/fixtures/real_fp16/) holds float16 copies"
        " of the BERT, GPT-2, LLaMA and ResNet TorchScript exports, converted as "
        "practitioners convert them (onnxconverter-common's `convert_float_to_float16`, "
        "`keep_io_types=False`) by "
        "[`tools/real_models/half.py`](../tools/real_models/half.py), with the sources' "
        "and the copies' sha256 in its manifest.json. `bcast verify` runs them at batch 8"
        " and sequence 64, where bcast computes their element-wise nodes with its "
        "compiled float16 kernels, and every node agrees with onnxruntime and OpenVINO "
        "(`tests/unit/test_verify_real.py`). Before, verify reported 2-23 disagreements a"
        " model: bcast's float16 Gemm rounded the product, then added C in float16, where"
        " both runtimes round once; and float16 results 1 unit in the last place apart "
        "(OpenVINO's Divide by a constant, both runtimes' LayerNormalization) counted as "
        "disagreements. See [peer-differences.md](peer-differences.md)."
    ),
    "",
]
DOCS = ROOT / "docs" / "real-models.md"
sys.path.insert(0, str(HERE))

import mutate  # noqa: E402
import peers  # noqa: E402

EXPORT_TIMEOUT = 600
PEER_TIMEOUT = 180

TS = "torch.onnx.export(dynamo=False, opset_version=17, dynamic_axes=...)"
DYNAMO = "torch.onnx.export(dynamo=True, dynamic_shapes=Dim.AUTO, optimize=True)"
OV = "openvino.convert_model(example_input=..., input=[PartialShape with -1]) + save_model"
SKL = "skl2onnx.to_onnx(target_opset={'': 17, 'ai.onnx.ml': 3}, zipmap=False)"

# file -> (builder, exporter); exporters: torchscript, dynamo, openvino, skl2onnx
VALID: dict[str, tuple[str, str]] = {
    "bert_torchscript.onnx": ("bert", "torchscript"),
    "gpt2_torchscript.onnx": ("gpt2", "torchscript"),
    "llama_torchscript.onnx": ("llama", "torchscript"),
    "vit_torchscript.onnx": ("vit", "torchscript"),
    "t5_encoder_torchscript.onnx": ("t5_encoder", "torchscript"),
    "clip_vision_torchscript.onnx": ("clip_vision", "torchscript"),
    "resnet_torchscript.onnx": ("resnet", "torchscript"),
    "mobilenet_torchscript.onnx": ("mobilenet", "torchscript"),
    "bert_dynamo.onnx": ("bert", "dynamo"),
    "gpt2_dynamo.onnx": ("gpt2", "dynamo"),
    "llama_dynamo.onnx": ("llama", "dynamo"),
    "resnet_dynamo.onnx": ("resnet", "dynamo"),
    "bert_openvino.xml": ("bert", "openvino"),
    "llama_openvino.xml": ("llama", "openvino"),
    "resnet_openvino.xml": ("resnet", "openvino"),
    "efficientnet_openvino.xml": ("efficientnet", "openvino"),
    "sklearn_logreg_skl2onnx.onnx": ("sklearn_logreg", "skl2onnx"),
    "sklearn_mlp_skl2onnx.onnx": ("sklearn_mlp", "skl2onnx"),
    # validity domains: models that run only for some sizes of their dynamic dims
    "vit_hw_torchscript.onnx": ("vit_hw", "torchscript"),
    "vit_hw_dynamo.onnx": ("vit_hw", "dynamo"),
    "vit_hw_openvino.xml": ("vit_hw", "openvino"),
    "bert_mask_dims_torchscript.onnx": ("bert_mask_dims", "torchscript"),
    "bert_fixed_mask_batch_torchscript.onnx": ("bert_fixed_mask_batch", "torchscript"),
    "roberta_torchscript.onnx": ("roberta", "torchscript"),
    "roberta_openvino.xml": ("roberta", "openvino"),
    "whisper_encoder_torchscript.onnx": ("whisper_encoder", "torchscript"),
    "whisper_encoder_openvino.xml": ("whisper_encoder", "openvino"),
}

# facts about particular files, measured by hand with the peers and kept in the manifest
NOTES: dict[str, str] = {
    "bert_dynamo.onnx": "dims Min(64, s41) (position_ids[:, :seq] of the 64-row buffer): the "
    "model is valid only for seq <= 64; onnxruntime at seq 65 fails at node_add_18 "
    "('Attempting to broadcast an axis by a dimension other than 1. 64 by 65')",
    "bert_dynamo__pos_embedding_width_31.onnx": "the Gather output's value_info still says "
    "[1,Min(64, s41),32] (stale, as after hand editing); onnx.checker and strict shape "
    "inference report that inconsistency, onnxruntime the Add",
    "vit_torchscript__pos_embedding_16.onnx": "ONNX shape inference leaves axis 1 of the "
    "Concat(CLS, patches) unknown (the CLS Expand target is computed by Where), so only the "
    "runtimes see 17 vs 16",
    "sklearn_logreg_skl2onnx.onnx": "OpenVINO's ONNX frontend lacks ai.onnx.ml kernels used here",
    "sklearn_mlp_skl2onnx.onnx": "OpenVINO's ONNX frontend lacks ai.onnx.ml Scaler and "
    "ArrayFeatureExtractor",
    "vit_hw_torchscript.onnx": "inputs [batch,3,height,width]; the 17-row position table "
    "makes the model valid only when (height//8)*(width//8) == 16 (e.g. 32..39 x 32..39, "
    "16..23 x 64..71); onnxruntime at 40x32 fails at /model/embeddings/Add ('17 by 21'). "
    "Output [batch,LayerNormalizationoutput_dim_1,LayerNormalizationoutput_dim_2]: only "
    "batch is requested, the exporter names the axes its shape inference lost (as in "
    "vit_torchscript.onnx)",
    "vit_hw_dynamo.onnx": "torch.export (Dim.AUTO) kept height and width dynamic (no "
    "specialisation to 32): inputs [s99,3,s100,s4], value_info dims such as "
    "((s100//8))*((s4//8)) + 1, output [s99,17,32]; valid only when (s100//8)*(s4//8) == 16, "
    "onnxruntime at 40x32 fails at node_add_17 ('17 by 21')",
    "vit_hw_openvino.xml": "inputs [?,3,?,?], output [?,17,32]; valid only when "
    "(H//8)*(W//8) == 16, OpenVINO at 40x32 fails at "
    "__module.model.embeddings/aten::add/Add. OpenVINO CPU 2026.4.1: once a compiled model "
    "has run one valid size and then failed at an invalid one, later valid sizes fail too "
    "(new infer requests as well), so probe each size on a fresh compile_model",
    "bert_mask_dims_torchscript.onnx": "attention_mask [mask_batch,mask_seq] beside ids "
    "[batch,seq]; onnxruntime runs when mask_seq is seq or 1, mask_batch >= batch (the mask "
    "is read by a Gather of flat index b*mask_seq + k, /model/Gather_4: mask_batch 1 with "
    "batch 2 fails there, 3 runs) and seq <= 64; mask_seq 5 for seq 8 fails at "
    "/model/encoder/layer.0/attention/self/Add, seq 65 at /model/embeddings/Add_1",
    "bert_fixed_mask_batch_torchscript.onnx": "attention_mask [2,seq] (its batch axis not in "
    "dynamic_axes) beside ids [batch,seq]; onnxruntime runs batch 1 and 2 and fails at "
    "/model/Gather_4 for batch 3 and 4 (the mask is read by a Gather of flat index "
    "b*seq + k of its 2*seq elements), seq 65 at /model/embeddings/Add_1",
    "roberta_torchscript.onnx": "positions CumSum(input_ids != 1)*mask + 1 index the 66-row "
    "table: with no padding token onnxruntime runs seq 64 and fails at seq 65 at "
    "/model/embeddings/position_embeddings/Gather (index 66 out of bounds); padded inputs "
    "reach smaller positions",
    "roberta_openvino.xml": "the same RoBERTa by openvino.convert_model; OpenVINO CPU at "
    "seq 65 (no padding) fails at __module.model.embeddings/aten::gather/GatherElements "
    "(the token-type buffer read at the positions), before the position Gather",
    "whisper_encoder_torchscript.onnx": "input_features [batch,8,frames]; after the stride-2 "
    "convolution (frames - 1)//2 + 1 positions meet the 16-row table: onnxruntime runs "
    "frames 1, 2, 31, 32 and fails at 3, 30, 33, 64 at the position Add",
    "whisper_encoder_openvino.xml": "the same encoder by openvino.convert_model",
}

EXPORTER_TEXT = {"torchscript": TS, "dynamo": DYNAMO, "openvino": OV, "skl2onnx": SKL}

# Each mutant: one initializer (ONNX) or one Const (IR, chosen by the layer it feeds) is cut
# to a smaller shape.  "expected" is where the broadcasting error is, computed from the
# construction: the node that broadcasts the cut tensor against the activation, and the
# output axis at which the two dims differ.
MUTANTS: list[dict[str, Any]] = [
    {
        "file": "bert_torchscript__dense_bias_31.onnx",
        "base": "bert_torchscript.onnx",
        "bug": "Linear bias of C-1 channels feeding an Add (attention output dense)",
        "initializer": "model.encoder.layer.0.attention.output.dense.bias",
        "new_shape": [31],
        "expected": {
            "node": "/model/encoder/layer.0/attention/output/dense/Add",
            "axis": 2,
            "why": "MatMul output [batch,seq,32] + bias [31]: aligned on the last axis, 32 vs 31",
        },
    },
    {
        "file": "vit_torchscript__pos_embedding_16.onnx",
        "base": "vit_torchscript.onnx",
        "bug": "position-embedding table one row short (16 rows for CLS + 16 patches)",
        "initializer": "model.embeddings.position_embeddings",
        "new_shape": [1, 16, 32],
        "expected": {
            "node": "/model/embeddings/Add",
            "axis": 1,
            "why": "embeddings [batch,17,32] + position_embeddings [1,16,32]: axis 1, 17 vs 16",
        },
    },
    {
        "file": "vit_torchscript__layernorm_scale_31.onnx",
        "base": "vit_torchscript.onnx",
        "bug": "LayerNorm scale of wrong length (LayerNormalization op, opset 17)",
        "initializer": "model.layers.1.layernorm_after.weight",
        "new_shape": [31],
        "expected": {
            "node": "/model/layers.1/layernorm_after/LayerNormalization",
            "axis": 2,
            "why": "Scale [31] must broadcast unidirectionally to X[axis=-1:] = [32] of X "
            "[batch,17,32]: output axis 2, 32 vs 31",
        },
    },
    {
        "file": "llama_torchscript__rmsnorm_scale_31.onnx",
        "base": "llama_torchscript.onnx",
        "bug": "RMSNorm scale of wrong length (decomposed norm: the final Mul)",
        "initializer": "model.norm.weight",
        "new_shape": [31],
        "expected": {
            "node": "/model/norm/Mul_1",
            "axis": 2,
            "why": "weight [31] * normalised [batch,seq,32]: axis 2, 31 vs 32",
        },
    },
    {
        "file": "resnet_torchscript__gemm_c_9.onnx",
        "base": "resnet_torchscript.onnx",
        "bug": "Gemm C of wrong size (fc bias 9 for 10 classes)",
        "initializer": "fc.bias",
        "new_shape": [9],
        "expected": {
            "node": "/fc/Gemm",
            "axis": 1,
            "why": "Gemm A*B is [batch,10]; C [9] must broadcast unidirectionally: axis 1, 10 vs 9",
        },
    },
    {
        "file": "bert_dynamo__pos_embedding_width_31.onnx",
        "base": "bert_dynamo.onnx",
        "bug": "position-embedding table of wrong width, in a graph with Min(64, s) dims",
        "initializer": "model.embeddings.position_embeddings.weight",
        "new_shape": [64, 31],
        "expected": {
            "node": "node_add_18",
            "axis": 2,
            "why": "(word+type) [s18,s41,32] + Gather(pos_table [64,31], position_ids[:, "
            ":s41]) [1,Min(64, s41),31]: axis 2, 32 vs 31",
        },
    },
    {
        "file": "llama_dynamo__rmsnorm_scale_31.onnx",
        "base": "llama_dynamo.onnx",
        "bug": "RMSNorm scale of wrong length, dynamo export (dims s72, s53)",
        "initializer": "model.norm.weight",
        "new_shape": [31],
        "expected": {
            "node": None,  # the Mul consuming model.norm.weight; filled in at build time
            "axis": 2,
            "why": "weight [31] * normalised [s72,s53,32]: axis 2, 31 vs 32",
        },
    },
    {
        "file": "sklearn_mlp_skl2onnx__intercepts_15.onnx",
        "base": "sklearn_mlp_skl2onnx.onnx",
        "bug": "hidden-layer intercepts of 15 for 16 units, after ai.onnx.ml Scaler",
        "initializer": "intercepts",
        "new_shape": [1, 15],
        "expected": {
            "node": "Add",
            "axis": 1,
            "why": "MatMul [N,16] + intercepts [1,15]: axis 1, 16 vs 15 (shapes after the "
            "ai.onnx.ml Scaler are unknown to ONNX shape inference)",
        },
    },
    {
        "file": "resnet_openvino__bn_bias_31.xml",
        "base": "resnet_openvino.xml",
        "bug": "folded BatchNorm bias Const of C-1 channels feeding an Add, dynamic H and W",
        "consumer": "__module.layer3.0.bn2/aten::batch_norm/BatchNormInference",
        "new_shape": [1, 31, 1, 1],
        "expected": {
            "node": "__module.layer3.0.bn2/aten::batch_norm/BatchNormInference",
            "axis": 1,
            "why": "Convolution [?,32,?,?] + Const [1,31,1,1]: axis 1, 32 vs 31",
        },
    },
    {
        "file": "llama_openvino__rmsnorm_scale_31.xml",
        "base": "llama_openvino.xml",
        "bug": "RMSNorm scale Const [1,1,32] cut to [1,1,31] feeding a Multiply",
        "consumer": "__module.model.norm/aten::mul/Multiply_1",
        "new_shape": [1, 1, 31],
        "expected": {
            "node": "__module.model.norm/aten::mul/Multiply_1",
            "axis": 2,
            "why": "Const [1,1,31] * normalised [?,?,32]: axis 2, 31 vs 32",
        },
    },
    {
        "file": "llama_openvino__rope_inv_freq_3.xml",
        "base": "llama_openvino.xml",
        "bug": "rotary inv_freq Const [1,1,4] cut to [1,1,3] feeding a Multiply (issue 14)",
        "consumer": "__module.model.rotary_emb/aten::mul/Multiply",
        "new_shape": [1, 1, 3],
        "confirm_text": ["f32[1,1,?,6]"],  # OpenVINO stops at q*cos / k*cos, cos [1,1,?,6]
        "expected": {
            "node": "__module.model.rotary_emb/aten::mul/Multiply",
            "axis": 2,
            "why": "positions [1,?,1] * Const [1,1,3] broadcast to [1,?,3], but the IR declares "
            "the Multiply's output [1,?,4] (axis 2: 3 vs declared 4); cos/sin become [1,?,6] "
            "and the first broadcast that fails downstream is q/k * cos in layer 0, e.g. "
            "k [?,2,?,8] * cos [1,1,?,6] (axis 3, 8 vs 6), see the OpenVINO message",
        },
    },
]


def sha256(path: Path) -> str:
    """Hex digest of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_of(name: str) -> list[Path]:
    """The files that make one fixture (.xml has its .bin)."""
    p = OUT / name
    return [p, p.with_suffix(".bin")] if p.suffix == ".xml" else [p]


# --------------------------------------------------------------------------- export


def export_one(name: str) -> dict[str, Any]:
    """Build and export one valid fixture (runs in a child process)."""
    import models

    models.hide_broken_torchvision()
    builder, exporter = VALID[name]
    path = str(OUT / name)
    if exporter == "skl2onnx":
        pipe, x, run, source = models.sklearn_models()[builder]
        models.export_skl2onnx(pipe, x, path)
        dynamic = {"input": {"0": "N"}}
    else:
        b = models.BUILDERS[builder]()
        {
            "torchscript": models.export_torchscript,
            "dynamo": models.export_dynamo,
            "openvino": models.export_openvino,
        }[exporter](b, path)
        run, source = b.run_inputs, b.source
        dynamic = {n: {str(k): v for k, v in ax.items()} for n, ax in b.dynamic.items()}
    return {"architecture": source, "dynamic_dims_requested": dynamic, "run_inputs": run}


def stage_export(names: list[str]) -> dict[str, Any]:
    """Export each valid fixture in its own child process, one at a time."""
    OUT.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {}
    for name in names:
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, __file__, "_export", name],
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0:
            print(f"export {name}: FAILED\n{proc.stderr[-3000:]}", file=sys.stderr)
            info[name] = {"error": proc.stderr.strip().splitlines()[-1:]}
            continue
        info[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"export {name}: ok ({time.time() - t0:.1f} s)")
    return info


# --------------------------------------------------------------------------- mutate


def stage_mutate(manifest: dict[str, Any], only: set[str] | None = None) -> None:
    """Write every mutant (or those of the files in ``only``) from its exported base."""
    import onnx

    for m in MUTANTS:
        if only is not None and not {m["file"], m["base"]} & only:
            continue
        src, dst = OUT / m["base"], OUT / m["file"]
        if dst.suffix == ".onnx":
            change = mutate.onnx_initializer(src, dst, m["initializer"], m["new_shape"])
            model = onnx.load(str(dst))
            users = [n for n in model.graph.node if m["initializer"] in n.input]
            assert len(users) == 1, (m["file"], [n.name for n in users])
            if m["expected"]["node"] is None:
                m["expected"]["node"] = users[0].name
            # the node that broadcasts is the initializer's user, or the next node (an Add
            # after a Gather of the cut table)
            nexts = [n for n in model.graph.node if set(users[0].output) & set(n.input)]
            node = next(n for n in [*users, *nexts] if n.name == m["expected"]["node"])
            m["expected"]["op_type"] = node.op_type
        else:
            change = ir_mutate(src, dst, m["consumer"], m["new_shape"])
            m["expected"]["op_type"] = change["consumers"][0]["type"]
        base = manifest["files"][m["base"]]
        manifest["files"][m["file"]] = {
            "file": m["file"],
            "format": base["format"],
            "kind": "mutant",
            "architecture": base["architecture"],
            "exporter": base["exporter"],
            "base": m["base"],
            "bug": m["bug"],
            "mutation": change,
            "expected": m["expected"],
            "how_known": "computed from the construction (the cut tensor's shape against the "
            "activation it is broadcast with in the base model); confirmed_by lists the peer "
            "stages whose error names the node",
            "run_inputs": base["run_inputs"],
            **({"confirm_text": m["confirm_text"]} if "confirm_text" in m else {}),
        }
        print(f"mutant {m['file']}: {change.get('old_shape')} -> {change.get('new_shape')}")


def ir_mutate(src: Path, dst: Path, consumer: str, new_shape: list[int]) -> dict[str, Any]:
    """Cut the Const that feeds IR layer ``consumer``."""
    import xml.etree.ElementTree as ET

    root = ET.parse(src).getroot()
    layers = {lay.get("id"): lay for lay in root.iter("layer")}
    target = next(lay for lay in layers.values() if lay.get("name") == consumer)
    consts = [
        layers[e.get("from-layer")]
        for e in root.iter("edge")
        if e.get("to-layer") == target.get("id")
        and layers[e.get("from-layer")].get("type") == "Const"
    ]
    assert len(consts) == 1, (consumer, [c.get("name") for c in consts])
    change = mutate.ir_const(src, dst, consts[0].get("name", ""), new_shape)
    assert [c["name"] for c in change["consumers"]] == [consumer], change
    return change


# --------------------------------------------------------------------------- peers


def run_peers(entry: dict[str, Any]) -> dict[str, Any]:
    """Every peer on one file, each in a child process with a timeout."""
    results: dict[str, Any] = {}
    path = str(OUT / entry["file"])
    for peer in peers.PEERS:
        cmd = [sys.executable, str(HERE / "peers.py"), peer, path, json.dumps(entry["run_inputs"])]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=PEER_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            for s in peers.STAGES[peer]:
                results[s] = {"verdict": "timeout", "message": f"> {PEER_TIMEOUT} s"}
            continue
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            for s in peers.STAGES[peer]:
                results[s] = {"verdict": "crash", "message": f"rc={proc.returncode}: {tail}"}
            continue
        results.update(json.loads(lines[-1]))
    return results


def stage_peers(manifest: dict[str, Any], only: set[str] | None = None) -> None:
    """Record every peer's verdicts (on every file, or those in ``only``) in the manifest."""
    for name, entry in manifest["files"].items():
        if only is not None and name not in only:
            continue
        t0 = time.time()
        entry["peers"] = run_peers(entry)
        if entry["kind"] == "mutant":
            # a peer confirms the bug when its error names the node, the cut tensor, or
            # (spec "confirm_text") the shape the bug produces where the peer stops
            mut = entry["mutation"]
            marks = [
                entry["expected"]["node"],
                mut.get("initializer") or f"{mut.get('const')}[0]",
                *entry.get("confirm_text", []),
            ]
            entry["confirmed_by"] = [
                s
                for s, r in entry["peers"].items()
                if r["verdict"] == "fail" and any(t in r.get("message", "") for t in marks)
            ]
            entry["rejected_by"] = [s for s, r in entry["peers"].items() if r["verdict"] == "fail"]
        verdicts = " ".join(f"{s}={r['verdict']}" for s, r in entry["peers"].items())
        print(f"peers {name} ({time.time() - t0:.1f} s): {verdicts}")


# --------------------------------------------------------------------------- docs


def versions() -> dict[str, str]:
    """Versions of the packages used."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "machine": platform.machine()}
    for pkg in (
        "torch",
        "torchvision",
        "transformers",
        "timm",
        "scikit-learn",
        "skl2onnx",
        "onnxscript",
        "onnx",
        "onnxruntime",
        "openvino",
        "numpy",
    ):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


STAGE_ORDER = [s for p in peers.PEERS for s in peers.STAGES[p]]
MARK = {"pass": "pass", "fail": "**FAIL**", "n/a": "n/a", "not run": "not run"}


def write_docs(manifest: dict[str, Any]) -> None:
    """docs/real-models.md: files as rows, peers as columns, measured."""
    v = manifest["versions"]
    lines = [
        "# Real models: what each peer catches",
        "",
        "Tiny real architectures with random weights (hidden size 32, two layers, vocabulary "
        "100, 32x32 images), exported the ways practitioners export them, and mutated "
        "copies that each carry one broadcasting bug. The files are in "
        "[`tests/fixtures/real/`](../tests/fixtures/real/), listed with their construction, "
        "the expected node and axis of each bug and every verdict in "
        "[`manifest.json`](../tests/fixtures/real/manifest.json). They are made by "
        "[`tools/real_models/build.py`](../tools/real_models/build.py) (not run by CI).",
        "",
        f"Measured {manifest['measured']} with Python {v['python']} ({v['machine']}, CPU): "
        f"onnx {v['onnx']}, onnxruntime {v['onnxruntime']}, openvino {v['openvino']}; "
        f"exported with torch {v['torch']}, torchvision {v['torchvision']}, transformers "
        f"{v['transformers']}, timm {v['timm']}, scikit-learn {v['scikit-learn']}, skl2onnx "
        f"{v['skl2onnx']}, onnxscript {v['onnxscript']}.",
        "",
        f"Each peer runs in its own process (timeout {PEER_TIMEOUT} s) on the file as saved:",
        "",
        "| column | call |",
        "|---|---|",
        "| checker | `onnx.checker.check_model(onnx.load(f), full_check=True)` |",
        "| strict SI | `onnx.shape_inference.infer_shapes(onnx.load(f), strict_mode=True)` |",
        "| ort session | `onnxruntime.InferenceSession(f, providers=['CPUExecutionProvider'])` |",
        "| ort run | `session.run(None, inputs)` on random inputs of the concrete sizes below |",
        "| ov read | `openvino.Core().read_model(f)` (ONNX files too) |",
        "| ov compile | `core.compile_model(model, 'CPU')` |",
        "| ov infer | `compiled.create_infer_request().infer(inputs)` |",
        "",
        "Concrete inputs: text models batch 2, sequence 8 (token ids in [0, 100), masks in "
        "{0, 1}); ViT and CLIP 2x3x32x32, and the ViTs exported with dynamic H and W "
        "(`vit_hw_*`) 2x3x16x64 (16 patches too); the CNNs, exported with dynamic H and W, "
        "2x3x40x48 (`resnet_dynamo` 2x3x40x48 too); scikit-learn 5x8. `n/a`: the peer does "
        "not read "
        "the format (OpenVINO IR); `not run`: an earlier stage failed.",
        "",
        "## Valid models",
        "",
        "| file | architecture | exporter | checker | strict SI | ort session | ort run | "
        "ov read | ov compile | ov infer |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in manifest["files"].items():
        if e["kind"] != "valid":
            continue
        cells = [MARK.get(e["peers"][s]["verdict"], e["peers"][s]["verdict"]) for s in STAGE_ORDER]
        lines.append(
            f"| `{name}` | {e['architecture']} | {e['exporter_short']} | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "## Mutants: one broadcasting bug each",
        "",
        "| file | bug | node (axis) | checker | strict SI | ort session | ort run | "
        "ov read | ov compile | ov infer |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in manifest["files"].items():
        if e["kind"] != "mutant":
            continue
        cells = [MARK.get(e["peers"][s]["verdict"], e["peers"][s]["verdict"]) for s in STAGE_ORDER]
        ex = e["expected"]
        lines.append(
            f"| `{name}` | {e['bug']} | `{ex['node']}` ({ex['op_type']}, axis {ex['axis']}) | "
            + " | ".join(cells)
            + " |"
        )
    notes = [f"- `{n}`: {e['note']}." for n, e in manifest["files"].items() if "note" in e]
    notes += [
        f"- `{n}`: built and measured {e.get('measured', '?')} with "
        + ", ".join(f"{k} {val}" for k, val in e["versions"].items())
        + " (added later, by `build.py --file`)."
        for n, e in manifest["files"].items()
        if "versions" in e
    ]
    if notes:
        lines += ["", "Notes:", "", *notes]
    lines += ["", "## What the peers said about the mutants", ""]
    for name, e in manifest["files"].items():
        if e["kind"] != "mutant":
            continue
        lines.append(f"- `{name}`: expected {e['expected']['why']}.")
        for s in STAGE_ORDER:
            r = e["peers"][s]
            if r["verdict"] in ("fail", "timeout", "crash"):
                msg = r.get("message", "").replace("|", "\\|")
                lines.append(f"  - {s}: `{msg[:400]}`")
    lines += [
        "",
        "## Valid models some peer still rejects",
        "",
    ]
    any_valid_fail = False
    for name, e in manifest["files"].items():
        if e["kind"] != "valid":
            continue
        for s in STAGE_ORDER:
            r = e["peers"][s]
            if r["verdict"] in ("fail", "timeout", "crash"):
                any_valid_fail = True
                msg = r.get("message", "").replace("|", "\\|")
                lines.append(f"- `{name}`, {s}: `{msg[:400]}`")
    if not any_valid_fail:
        lines.append("None.")
    lines += ["", *HALF_COPIES, *deployed_section()]
    lines += [
        "## Rebuilding",
        "",
        "```bash",
        "python3 -m venv /tmp/exportenv",
        "/tmp/exportenv/bin/pip install -r tools/real_models/requirements.txt",
        "/tmp/exportenv/bin/python tools/real_models/build.py",
        "/tmp/exportenv/bin/python tools/real_models/half.py  # the float16 copies",
        "```",
        "",
    ]
    DOCS.write_text("\n".join(lines))


def deployed_section() -> list[str]:
    """The docs' section on tests/fixtures/deployed (tools/real_models/deployed.py), kept."""
    text = DOCS.read_text() if DOCS.exists() else ""
    head = "## Deployed models (issue 37)"
    if head not in text:
        return []
    start = text.index(head)
    return text[start : text.index("\n## ", start + len(head)) + 1].splitlines()


# --------------------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    """Run the stages."""
    if argv[:1] == ["_export"]:
        print(json.dumps(export_one(argv[1])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--only",
        choices=["export", "mutate", "peers", "docs"],
        action="append",
        help="run only these stages (default: all); later stages read manifest.json",
    )
    ap.add_argument(
        "--file",
        choices=list(VALID),
        action="append",
        help="only these valid files and their mutants (default: all); the manifest's "
        "other entries are kept",
    )
    args = ap.parse_args(argv)
    stages = args.only or ["export", "mutate", "peers", "docs"]
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    mpath = OUT / "manifest.json"
    manifest: dict[str, Any] = json.loads(mpath.read_text()) if mpath.exists() else {"files": {}}
    only: set[str] | None = None
    if args.file:
        only = set(args.file) | {m["file"] for m in MUTANTS if m["base"] in args.file}
    if "export" in stages:
        info = stage_export([n for n in VALID if only is None or n in only])
        if only is None:
            manifest = {"files": {}}
        for name, meta in info.items():
            if "error" in meta:
                continue
            builder, exporter = VALID[name]
            manifest["files"][name] = {
                "file": name,
                "format": "openvino-ir" if name.endswith(".xml") else "onnx",
                "kind": "valid",
                "builder": builder,
                "exporter": EXPORTER_TEXT[exporter],
                **meta,
            }
    if "mutate" in stages:
        manifest["files"] = {
            k: v
            for k, v in manifest["files"].items()
            if v["kind"] == "valid" or (only is not None and k not in only)
        }
        stage_mutate(manifest, only)
    # valid files in VALID's order, then the mutants in MUTANTS' order, as a full build has them
    order = [*VALID, *(m["file"] for m in MUTANTS)]
    manifest["files"] = dict(
        sorted(
            manifest["files"].items(),
            key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order),
        )
    )
    for name, e in manifest["files"].items():
        if name in NOTES:
            e["note"] = NOTES[name]
        e["exporter_short"] = next(k for k, t in EXPORTER_TEXT.items() if t == e["exporter"])
        e["files"] = [
            {"path": p.name, "bytes": p.stat().st_size, "sha256": sha256(p)}
            for p in files_of(e["file"])
        ]
    if "peers" in stages:
        stage_peers(manifest, only)
        if only is None:
            manifest["measured"] = time.strftime("%Y-%m-%d")
    if only is not None:
        # a partial build keeps the manifest's versions and date for the files it did not
        # touch; the files it did touch say their own where they differ
        now = versions()
        for name in only & set(manifest["files"]):
            e = manifest["files"][name]
            if "peers" in stages:
                e["measured"] = time.strftime("%Y-%m-%d")
            diff = {k: v for k, v in now.items() if manifest.get("versions", {}).get(k) != v}
            if diff and ("export" in stages or "peers" in stages):
                e["versions"] = diff
    if only is None:
        manifest["versions"] = versions()
    manifest = {
        "about": "Real-architecture fixtures with random weights; see docs/real-models.md "
        "and tools/real_models/build.py. kind=mutant files carry one broadcasting bug at "
        "expected.node / expected.axis (output axis of that node).",
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
