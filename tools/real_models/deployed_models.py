"""What people deploy, tiny, with random weights: the builders of tests/fixtures/deployed.

Every builder writes its file(s) at ``path`` and returns what the manifest records: the
architecture, how it was made (the exact calls), the symbolic inputs (``inputs``: each
input's dims, names for the dynamic ones) and the concrete sizes the peers run it at
(``defaults``).  Nothing is downloaded: every model comes from a library config or from
code here, with ``torch.manual_seed(0)``.  Run by tools/real_models/deployed.py, each in a
child process.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import models  # noqa: E402

_TV_LIB: Any = None  # keeps the torchvision op library alive


def _nms(dets: Any, scores: Any, iou_threshold: float) -> Any:
    """torchvision.ops.nms in plain torch (greedy, descending scores)."""
    import torch

    order = scores.argsort(descending=True)
    keep: list[int] = []
    x1, y1, x2, y2 = dets.unbind(1)
    area = (x2 - x1) * (y2 - y1)
    alive = torch.ones(len(order), dtype=torch.bool)
    for i, idx in enumerate(order.tolist()):
        if not alive[i]:
            continue
        keep.append(idx)
        rest = order[i + 1 :]
        w = (torch.minimum(x2[idx], x2[rest]) - torch.maximum(x1[idx], x1[rest])).clamp(min=0)
        h = (torch.minimum(y2[idx], y2[rest]) - torch.maximum(y1[idx], y1[rest])).clamp(min=0)
        inter = w * h
        alive[i + 1 :] &= inter / (area[idx] + area[rest] - inter) <= iou_threshold
    return torch.tensor(keep, dtype=torch.int64)


def torchvision() -> Any:
    """Import torchvision; where its C ops do not load (a CPU torch), define nms in Python.

    The ONNX export of SSDlite needs only nms's registered symbolic (NonMaxSuppression),
    not its kernel; the tracer calls the Python one.
    """
    global _TV_LIB
    import torch

    try:
        import torchvision as tv

        return tv
    except RuntimeError:
        for k in [k for k in sys.modules if k.startswith("torchvision")]:
            del sys.modules[k]
    _TV_LIB = torch.library.Library("torchvision", "DEF")
    _TV_LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TV_LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TV_LIB.impl("nms", _nms, "CPU")
    import torchvision as tv

    tv.extension._has_ops = _has_ops  # the tracer scripts nms's guard: it must pass
    return tv


def _has_ops() -> bool:
    return True


def _spec(shape: list[Any], dtype: str = "float32", high: int | None = None) -> dict[str, Any]:
    return {"shape": shape, "dtype": dtype, "high": high}


def _export(
    module: Any,
    example: tuple[Any, ...],
    path: str,
    names: list[str],
    dynamic: dict[str, dict[int, str]],
    opset: int = 17,
    outputs: list[str] | None = None,
) -> None:
    """torch.onnx.export(dynamo=False) with dynamic_axes, as most tutorials show."""
    import torch

    with torch.no_grad():
        torch.onnx.export(
            module,
            example,
            path,
            input_names=names,
            output_names=outputs or ["output"],
            dynamic_axes=dynamic,
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )


# --------------------------------------------------------------------------- CNNs


def _small_cnn() -> Any:
    import torch
    from torch import nn

    models._seed()
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )
    with torch.no_grad():
        m[1].running_mean.uniform_(-0.5, 0.5)
        m[1].running_var.uniform_(0.5, 1.5)
    return models._perturb(m).eval()


IMG_IN = {"pixel_values": _spec(["batch", 3, "height", "width"])}
IMG_DEF = {"batch": 2, "height": 32, "width": 32}
IMG_DYN = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}


def _cnn_fp32(path: str, opset: int = 17) -> None:
    import torch

    _export(
        _small_cnn(),
        (torch.randn(2, 3, 32, 32),),
        path,
        ["pixel_values"],
        {**IMG_DYN, "output": {0: "batch"}},
        opset=opset,
    )


class _Calib:
    """A tiny calibration reader: 4 random batches (onnxruntime.quantization)."""

    def __init__(self) -> None:
        import numpy as np

        rng = np.random.default_rng(0)
        self.data = iter(
            [
                {"pixel_values": rng.standard_normal((1, 3, 32, 32)).astype("float32")}
                for _ in range(4)
            ]
        )

    def get_next(self) -> Any:
        return next(self.data, None)


def cnn_quantized(path: str, fmt: str) -> dict[str, Any]:
    """A small CNN quantized by onnxruntime.quantization.quantize_static, per channel."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = f"{tmp}/fp32.onnx"
        _cnn_fp32(fp32, opset=17)
        quantize_static(
            fp32,
            path,
            _Calib(),
            quant_format=getattr(QuantFormat, fmt),
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
        )
    return {
        "architecture": "Conv-BN-ReLU-Conv(stride 2)-ReLU-GlobalAvgPool-Linear (8, 16 channels)",
        "how": f"torchscript export (opset 17, dynamic batch/height/width), then "
        f"onnxruntime.quantization.quantize_static(quant_format=QuantFormat.{fmt}, "
        "per_channel=True, QUInt8 activations, QInt8 weights, 4 random calibration batches)",
        "inputs": IMG_IN,
        "defaults": IMG_DEF,
    }


def cnn_opset(path: str, opset: int) -> dict[str, Any]:
    """The same small CNN, converted to another opset by onnx.version_converter."""
    import onnx
    from onnx import version_converter

    with tempfile.TemporaryDirectory() as tmp:
        _cnn_fp32(f"{tmp}/fp32.onnx", opset=13)
        model = version_converter.convert_version(onnx.load(f"{tmp}/fp32.onnx"), opset)
    onnx.save(model, path)
    return {
        "architecture": "Conv-BN-ReLU-Conv(stride 2)-ReLU-GlobalAvgPool-Linear (8, 16 channels)",
        "how": f"torchscript export at opset 13, then onnx.version_converter.convert_version"
        f"(model, {opset})",
        "inputs": IMG_IN,
        "defaults": IMG_DEF,
    }


def mlp_opset7(path: str) -> dict[str, Any]:
    """An MLP (Gemm, Relu, Add of a residual bias) converted down to opset 7."""
    import onnx
    import torch
    from onnx import version_converter
    from torch import nn

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 8)
            self.shift = nn.Parameter(torch.randn(32))

        def forward(self, x: Any) -> Any:
            return self.b(torch.relu(self.a(x)) + self.shift)

    models._seed()
    with tempfile.TemporaryDirectory() as tmp:
        _export(
            MLP().eval(),
            (torch.randn(2, 16),),
            f"{tmp}/m.onnx",
            ["x"],
            {"x": {0: "batch"}, "output": {0: "batch"}},
            opset=9,
        )
        model = version_converter.convert_version(onnx.load(f"{tmp}/m.onnx"), 7)
    onnx.save(model, path)
    return {
        "architecture": "MLP 16-32-8 with a learned shift added after the ReLU",
        "how": "torchscript export at opset 9, then onnx.version_converter.convert_version"
        "(model, 7)",
        "inputs": {"x": _spec(["batch", 16])},
        "defaults": {"batch": 2},
    }


def unet(path: str, opset: int = 17) -> dict[str, Any]:
    """/tmp/s/unet.py's U-Net: stride-2 Conv, ConvTranspose, additive skip; dynamic H/W."""
    import torch
    from torch import nn

    class U(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, padding=1)
            self.d = nn.Conv2d(8, 8, 3, stride=2, padding=1)
            self.u = nn.ConvTranspose2d(8, 8, 2, stride=2)
            self.o = nn.Conv2d(8, 2, 1)

        def forward(self, x: Any) -> Any:
            a = torch.relu(self.a(x))
            b = torch.relu(self.d(a))
            return self.o(self.u(b) + a)

    models._seed()
    _export(
        U().eval(),
        (torch.randn(1, 3, 32, 32),),
        path,
        ["x"],
        {"x": {0: "batch", 2: "height", 3: "width"}, "output": {0: "batch"}},
        opset=opset,
    )
    return {
        "architecture": "U-Net: Conv, Conv(stride 2), ConvTranspose(2, stride 2), additive skip",
        "how": "torchscript export (opset 17), dynamic batch/height/width",
        "inputs": {"x": _spec(["batch", 3, "height", "width"])},
        "defaults": {"batch": 1, "height": 32, "width": 32},
        "probes": [
            {"height": 32, "width": 32},
            {"height": 26, "width": 32},
            {"height": 33, "width": 32},
            {"height": 32, "width": 31},
        ],
    }


def unet2(path: str) -> dict[str, Any]:
    """A two-level U-Net: a Concat skip inside, an additive skip outside; H, W multiples of 4."""
    import torch
    from torch import nn

    class U2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, padding=1)
            self.d1 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
            self.d2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.u2 = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.m = nn.Conv2d(16, 8, 3, padding=1)
            self.u1 = nn.ConvTranspose2d(8, 8, 2, stride=2)
            self.o = nn.Conv2d(8, 2, 1)

        def forward(self, x: Any) -> Any:
            a = torch.relu(self.a(x))
            b = torch.relu(self.d1(a))
            c = torch.relu(self.d2(b))
            m = torch.relu(self.m(torch.cat([self.u2(c), b], dim=1)))
            return self.o(self.u1(m) + a)

    models._seed()
    _export(
        U2().eval(),
        (torch.randn(1, 3, 32, 32),),
        path,
        ["x"],
        {"x": {0: "batch", 2: "height", 3: "width"}, "output": {0: "batch"}},
    )
    return {
        "architecture": "two-level U-Net: Conv(stride 2) x2, ConvTranspose(2, stride 2) x2, a "
        "Concat skip at the inner level and an additive skip at the outer one",
        "how": "torchscript export (opset 17), dynamic batch/height/width",
        "inputs": {"x": _spec(["batch", 3, "height", "width"])},
        "defaults": {"batch": 1, "height": 32, "width": 32},
        "probes": [
            {"height": 28, "width": 32},
            {"height": 26, "width": 32},
            {"height": 30, "width": 32},
            {"height": 32, "width": 36},
            {"height": 32, "width": 34},
        ],
    }


def lraspp(path: str) -> dict[str, Any]:
    """torchvision LRASPP on a MobileNetV3-Large backbone at width 0.25, dynamic H/W."""
    import torch

    torchvision()
    from torchvision.models import mobilenet_v3_large
    from torchvision.models.segmentation.lraspp import _lraspp_mobilenetv3

    models._seed()
    m = _lraspp_mobilenetv3(mobilenet_v3_large(weights=None, dilated=True, width_mult=0.125), 3)

    class Out(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = m

        def forward(self, x: Any) -> Any:
            return self.m(x)["out"]

    _export(
        models._perturb(Out()).eval(),
        (torch.randn(1, 3, 64, 64),),
        path,
        ["pixel_values"],
        {**IMG_DYN, "output": {0: "batch", 2: "height", 3: "width"}},
    )
    return {
        "architecture": "torchvision LRASPP (segmentation.lraspp._lraspp_mobilenetv3) on "
        "mobilenet_v3_large(weights=None, dilated=True, width_mult=0.125), 3 classes",
        "how": "torchscript export (opset 17), dynamic batch/height/width",
        "inputs": IMG_IN,
        "defaults": {"batch": 1, "height": 64, "width": 64},
    }


def ssdlite(path: str) -> dict[str, Any]:
    """torchvision SSDlite320 MobileNetV3-Large (width 0.25), postprocessing included."""
    import functools

    import torch

    tv = torchvision()
    from torchvision.models.detection import ssdlite as sd

    sd.mobilenet_v3_large = functools.partial(tv.models.mobilenet_v3_large, width_mult=0.25)
    extra = sd._extra_block  # the extra feature layers (512, 256, 256, 128) at 1/4 width too

    def quarter(cin: int, cout: int, norm: Any) -> Any:
        return extra(cin // 4 if cin in (512, 256) else cin, cout // 4, norm)

    sd._extra_block = quarter
    models._seed()
    m = sd.ssdlite320_mobilenet_v3_large(
        weights=None,
        weights_backbone=None,
        num_classes=3,
        detections_per_img=20,
        topk_candidates=20,
    ).eval()

    class Boxes(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = m

        def forward(self, x: Any) -> Any:
            out = self.m(list(x))[0]
            return out["boxes"], out["scores"], out["labels"]

    _export(
        Boxes().eval(),
        (torch.rand(1, 3, 320, 320),),
        path,
        ["images"],
        {"images": {2: "height", 3: "width"}},
        outputs=["boxes", "scores", "labels"],
    )
    return {
        "architecture": "torchvision ssdlite320_mobilenet_v3_large(weights=None, "
        "weights_backbone=None, num_classes=3) with mobilenet_v3_large(width_mult=0.25) and "
        "its extra blocks at 1/4 width",
        "how": "torchscript export (opset 17) of model(list(images))[0], dynamic height/width",
        "inputs": {"images": _spec([1, 3, "height", "width"])},
        "defaults": {"height": 320, "width": 320},
    }


# --------------------------------------------------------------------------- sequence models


def _rnn(path: str, kind: str) -> dict[str, Any]:
    import torch
    from torch import nn

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = getattr(nn, kind)(16, 32, batch_first=True)
            self.head = nn.Linear(32, 5)

        def forward(self, x: Any) -> Any:
            return self.head(self.rnn(x)[0])

    models._seed()
    dyn = {0: "batch", 1: "seq"}
    _export(
        models._perturb(Tagger()).eval(),
        (torch.randn(2, 8, 16),),
        path,
        ["x"],
        {"x": dyn, "output": dyn},
    )
    return {
        "architecture": f"torch.nn.{kind}(16, 32, batch_first=True) + Linear(32, 5) per step",
        "how": "torchscript export (opset 17), dynamic batch/seq",
        "inputs": {"x": _spec(["batch", "seq", 16])},
        "defaults": {"batch": 2, "seq": 8},
    }


def lstm(path: str) -> dict[str, Any]:
    """nn.LSTM tagger, dynamic batch and sequence."""
    return _rnn(path, "LSTM")


def gru(path: str) -> dict[str, Any]:
    """nn.GRU tagger, dynamic batch and sequence."""
    return _rnn(path, "GRU")


def mha(path: str) -> dict[str, Any]:
    """nn.MultiheadAttention self-attention by the TorchScript exporter (it bakes seq 8)."""
    import torch
    from torch import nn

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.att = nn.MultiheadAttention(32, 2, batch_first=True)

        def forward(self, x: Any) -> Any:
            return self.att(x, x, x, need_weights=False)[0]

    models._seed()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused kernel has no ONNX export
    dyn = {0: "batch", 1: "seq"}
    _export(
        models._perturb(SelfAttention()).eval(),
        (torch.randn(2, 8, 32),),
        path,
        ["x"],
        {"x": dyn, "output": dyn},
    )
    return {
        "architecture": "torch.nn.MultiheadAttention(32, 2, batch_first=True), self-attention",
        "how": "torchscript export (opset 17), dynamic batch/seq (traced at seq 8)",
        "inputs": {"x": _spec(["batch", "seq", 32])},
        "defaults": {"batch": 2, "seq": 8},
        "probes": [{"batch": 2, "seq": 8}, {"batch": 2, "seq": 9}, {"batch": 3, "seq": 8}],
    }


TEXT_IN = {
    "input_ids": _spec(["batch", "seq"], "int64", 100),
    "attention_mask": _spec(["batch", "seq"], "int64", 2),
}
TEXT_DEF = {"batch": 2, "seq": 8}


def _bert_fp32(path: str, opset: int = 17) -> None:
    models.export_torchscript(models.bert(), path, opset=opset)


BERT_IN = {**TEXT_IN, "token_type_ids": _spec(["batch", "seq"], "int64", 2)}


def bert_dynquant(path: str) -> dict[str, Any]:
    """BERT quantized by onnxruntime.quantization.quantize_dynamic (MatMulInteger)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        _bert_fp32(f"{tmp}/fp32.onnx")
        quantize_dynamic(f"{tmp}/fp32.onnx", path, weight_type=QuantType.QInt8)
    return {
        "architecture": "transformers.BertModel (hidden 32, 2 layers, 64 positions)",
        "how": "torchscript export (opset 17), then onnxruntime.quantization.quantize_dynamic"
        "(weight_type=QuantType.QInt8)",
        "inputs": BERT_IN,
        "defaults": TEXT_DEF,
        "probes": [{"batch": 2, "seq": 64}, {"batch": 2, "seq": 65}],
    }


def llama_nbits(path: str, fmt: str) -> dict[str, Any]:
    """LLaMA weights quantized to 4 bits in blocks of 16 by onnxruntime's MatMulNBitsQuantizer."""
    import onnx
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    with tempfile.TemporaryDirectory() as tmp:
        models.export_torchscript(models.llama(), f"{tmp}/fp32.onnx", opset=21)
        quant = MatMulNBitsQuantizer(
            onnx.load(f"{tmp}/fp32.onnx"),
            bits=4,
            block_size=16,
            is_symmetric=True,
            quant_format=getattr(QuantFormat, fmt),
        )
        quant.process()
        quant.model.save_model_to_file(path, use_external_data_format=False)
    op = "com.microsoft MatMulNBits" if fmt == "QOperator" else "DequantizeLinear(block_size=16)"
    return {
        "architecture": "transformers.LlamaModel (hidden 32, 2 layers, 4 heads, 2 KV heads)",
        "how": f"torchscript export (opset 21), then onnxruntime.quantization."
        f"matmul_nbits_quantizer.MatMulNBitsQuantizer(bits=4, block_size=16, "
        f"is_symmetric=True, quant_format=QuantFormat.{fmt}): every MatMul weight as {op}",
        "inputs": TEXT_IN,
        "defaults": TEXT_DEF,
    }


def cnn_fakequantize(path: str) -> dict[str, Any]:
    """The small CNN converted to OpenVINO and quantized by nncf.quantize (FakeQuantize)."""
    import nncf
    import numpy as np
    import openvino as ov
    import torch

    with torch.no_grad():
        model = ov.convert_model(
            _small_cnn(),
            example_input=torch.randn(1, 3, 32, 32),
            input=[(ov.PartialShape([-1, 3, -1, -1]), ov.Type.f32)],
        )
    model.inputs[0].get_tensor().set_names({"pixel_values"})
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 3, 32, 32)).astype("float32") for _ in range(4)]
    model = nncf.quantize(model, nncf.Dataset(data), subset_size=4)
    ov.save_model(model, path, compress_to_fp16=False)
    return {
        "architecture": "Conv-BN-ReLU-Conv(stride 2)-ReLU-GlobalAvgPool-Linear (8, 16 channels)",
        "how": "openvino.convert_model (input [-1,3,-1,-1]), nncf.quantize(model, "
        "nncf.Dataset(4 random images), subset_size=4): FakeQuantize on activations and "
        "per-channel on weights, openvino.save_model(compress_to_fp16=False)",
        "inputs": IMG_IN,
        "defaults": IMG_DEF,
    }


def bert_ortopt(path: str) -> dict[str, Any]:
    """BERT after onnxruntime.transformers.optimizer.optimize_model(model_type='bert')."""
    from onnxruntime.transformers.optimizer import optimize_model

    with tempfile.TemporaryDirectory() as tmp:
        _bert_fp32(f"{tmp}/fp32.onnx", opset=14)
        opt = optimize_model(f"{tmp}/fp32.onnx", model_type="bert", num_heads=2, hidden_size=32)
        opt.save_model_to_file(path)
    return {
        "architecture": "transformers.BertModel (hidden 32, 2 layers, 64 positions)",
        "how": "torchscript export (opset 14), then onnxruntime.transformers.optimizer."
        "optimize_model(model_type='bert', num_heads=2, hidden_size=32)",
        "inputs": BERT_IN,
        "defaults": TEXT_DEF,
        "probes": [{"batch": 2, "seq": 64}, {"batch": 2, "seq": 65}],
    }


def gpt2_ortopt(path: str) -> dict[str, Any]:
    """GPT-2 after optimize_model(model_type='gpt2')."""
    from onnxruntime.transformers.optimizer import optimize_model

    with tempfile.TemporaryDirectory() as tmp:
        models.export_torchscript(models.gpt2(), f"{tmp}/fp32.onnx", opset=14)
        opt = optimize_model(f"{tmp}/fp32.onnx", model_type="gpt2", num_heads=2, hidden_size=32)
        opt.save_model_to_file(path)
    return {
        "architecture": "transformers.GPT2Model (hidden 32, 2 layers, 64 positions)",
        "how": "torchscript export (opset 14), then onnxruntime.transformers.optimizer."
        "optimize_model(model_type='gpt2', num_heads=2, hidden_size=32)",
        "inputs": TEXT_IN,
        "defaults": TEXT_DEF,
        "probes": [{"batch": 2, "seq": 64}, {"batch": 2, "seq": 65}],
    }


def gpt2_kv(path: str) -> dict[str, Any]:
    """GPT-2 LM with a KV cache: past_key_values in, present out (total = past + seq mask)."""
    import torch
    import transformers
    from transformers import DynamicCache

    models._seed()
    cfg = transformers.GPT2Config(
        vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64, attn_implementation="eager"
    )
    lm = models._perturb(transformers.GPT2LMHeadModel(cfg)).eval()

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = lm

        def forward(self, input_ids: Any, attention_mask: Any, *past: Any) -> Any:
            cache = DynamicCache(config=cfg)
            for i in range(cfg.n_layer):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.lm(
                input_ids=input_ids,
                attention_mask=attention_mask,
                past_key_values=cache,
                use_cache=True,
            )
            pres = out.past_key_values
            flat = [t for layer in pres.layers for t in (layer.keys, layer.values)]
            return (out.logits, *flat)

    b, s, p = 2, 3, 5
    past = [torch.randn(b, 2, p, 16) for _ in range(2 * cfg.n_layer)]
    names = ["input_ids", "attention_mask"] + [
        f"past_key_values.{i}.{kv}" for i in range(cfg.n_layer) for kv in ("key", "value")
    ]
    outs = ["logits"] + [f"present.{i}.{kv}" for i in range(cfg.n_layer) for kv in ("key", "value")]
    dyn: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "total"},
        "logits": {0: "batch", 1: "seq"},
    }
    for n in names[2:]:
        dyn[n] = {0: "batch", 2: "past"}
    for n in outs[1:]:
        dyn[n] = {0: "batch", 2: "total"}
    ex = (torch.randint(0, 100, (b, s)), torch.ones(b, s + p, dtype=torch.int64), *past)
    _export(Step().eval(), ex, path, names, dyn, opset=17, outputs=outs)
    inputs = {
        "input_ids": _spec(["batch", "seq"], "int64", 100),
        "attention_mask": _spec(["batch", "total"], "int64", 2),
    }
    for n in names[2:]:
        inputs[n] = _spec(["batch", 2, "past", 16])
    return {
        "architecture": "transformers.GPT2LMHeadModel (hidden 32, 2 layers, 2 heads) with "
        "past_key_values (DynamicCache filled from the inputs)",
        "how": "torchscript export (opset 17): input_ids [batch,seq], attention_mask "
        "[batch,total], past_key_values.{i}.key/value [batch,2,past,16]",
        "inputs": inputs,
        "defaults": {"batch": 2, "seq": 3, "past": 5, "total": 8},
        "probes": [
            {"batch": 2, "seq": 3, "past": 5, "total": 8},
            {"batch": 2, "seq": 3, "past": 5, "total": 7},
            {"batch": 2, "seq": 1, "past": 7, "total": 8},
            {"batch": 2, "seq": 3, "past": 5, "total": 9},
            {"batch": 2, "seq": 3, "past": 61, "total": 64},
            {"batch": 2, "seq": 3, "past": 62, "total": 65},
            {"batch": 2, "seq": 3, "past": 0, "total": 3},
        ],
    }


def mamba(path: str) -> dict[str, Any]:
    """transformers MambaForCausalLM, tiny config, the slow (pure torch) path."""
    import torch
    import transformers

    models._seed()
    cfg = transformers.MambaConfig(
        vocab_size=100,
        hidden_size=32,
        state_size=8,
        num_hidden_layers=2,
        expand=2,
        conv_kernel=4,
        use_cache=False,
    )
    lm = models._perturb(transformers.MambaForCausalLM(cfg)).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = lm

        def forward(self, input_ids: Any) -> Any:
            return self.lm(input_ids=input_ids, use_cache=False).logits

    _export(
        Logits().eval(),
        (torch.randint(0, 100, (2, 8)),),
        path,
        ["input_ids"],
        {"input_ids": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}},
    )
    return {
        "architecture": "transformers.MambaForCausalLM (hidden 32, state 8, 2 layers)",
        "how": "torchscript export (opset 17), dynamic batch/seq (traced at seq 8)",
        "inputs": {"input_ids": _spec(["batch", "seq"], "int64", 100)},
        "defaults": TEXT_DEF,
        "probes": [{"batch": 2, "seq": 8}, {"batch": 2, "seq": 9}],
    }


def onnxscript_functions(path: str) -> dict[str, Any]:
    """A model whose layers are onnxscript @script functions (model-local functions)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxscript import opset18 as op
    from onnxscript import script
    from onnxscript.values import Opset

    local = Opset("local", 1)

    @script(local, default_opset=op)
    def BiasGelu(x, b):  # type: ignore[no-untyped-def]
        y = op.Add(x, b)
        return op.Mul(y, op.Sigmoid(op.Mul(y, op.Constant(value_float=1.702))))

    @script(local, default_opset=op)
    def ScaleShift(x, g, beta):  # type: ignore[no-untyped-def]
        return op.Add(op.Mul(x, g), beta)

    @script(local, default_opset=op)
    def Block(x, w, b, g, beta):  # type: ignore[no-untyped-def]
        h = BiasGelu(op.MatMul(x, w), b)
        return ScaleShift(op.Add(h, x), g, beta)

    rng = np.random.default_rng(0)
    inits, nodes = [], []
    cur = "x"
    for i in range(2):
        ws = {"w": [32, 32], "b": [32], "g": [32], "beta": [32]}
        for k, shape in ws.items():
            inits.append(
                numpy_helper.from_array(
                    rng.standard_normal(shape).astype("float32") * 0.2, f"block{i}.{k}"
                )
            )
        out = f"h{i}"
        nodes.append(
            helper.make_node(
                "Block",
                [cur, *(f"block{i}.{k}" for k in ws)],
                [out],
                domain="local",
                name=f"block{i}",
            )
        )
        cur = out
    nodes.append(helper.make_node("Softmax", [cur], ["y"], axis=-1, name="softmax"))
    graph = helper.make_graph(
        nodes,
        "script_blocks",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 32])],
        inits,
    )
    funcs = [f.to_function_proto() for f in (Block, BiasGelu, ScaleShift)]
    model = helper.make_model(
        graph,
        functions=funcs,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
    )
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return {
        "architecture": "two blocks MatMul -> BiasGelu -> residual Add -> ScaleShift, each "
        "layer an onnxscript @script function (domain 'local'), functions nested",
        "how": "onnxscript @script(Opset('local', 1)) functions' to_function_proto(), called "
        "from a graph made with onnx.helper (opset 18)",
        "inputs": {"x": _spec(["batch", "seq", 32])},
        "defaults": TEXT_DEF,
    }


# --------------------------------------------------------------------------- OpenVINO + NNCF


def llama_nncf(path: str, mode: str) -> dict[str, Any]:
    """A LLaMA converted by openvino.convert_model, weights compressed by nncf.compress_weights."""
    import nncf
    import openvino as ov
    import torch
    import transformers

    models._seed()
    cfg = transformers.LlamaConfig(
        vocab_size=100,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
        attn_implementation="eager",
    )
    lm = models._perturb(transformers.LlamaForCausalLM(cfg)).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = lm

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits

    ex = (torch.randint(0, 100, (2, 8)), torch.ones(2, 8, dtype=torch.int64))
    with torch.no_grad():
        model = ov.convert_model(
            Logits().eval(), example_input=ex, input=[(ov.PartialShape([-1, -1]), ov.Type.i64)] * 2
        )
    for i, n in enumerate(["input_ids", "attention_mask"]):
        model.inputs[i].get_tensor().set_names({n})
    call = {
        "int8": "mode=CompressWeightsMode.INT8_ASYM",
        "int4": "mode=CompressWeightsMode.INT4_SYM, group_size=16, ratio=1.0, all_layers=True",
    }
    if mode == "int8":
        model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    else:
        model = nncf.compress_weights(
            model, mode=nncf.CompressWeightsMode.INT4_SYM, group_size=16, ratio=1.0, all_layers=True
        )
    ov.save_model(model, path, compress_to_fp16=False)
    return {
        "architecture": "transformers.LlamaForCausalLM (hidden 64, 1 layer, 4 heads, 2 KV heads)",
        "how": f"openvino.convert_model (inputs [-1,-1] i64), nncf.compress_weights({call[mode]}),"
        " openvino.save_model(compress_to_fp16=False)",
        "inputs": {
            "input_ids": _spec(["batch", "seq"], "int64", 100),
            "attention_mask": _spec(["batch", "seq"], "int64", 2),
        },
        "defaults": TEXT_DEF,
    }


# --------------------------------------------------------------------------- diffusers


def sd_unet(path: str) -> dict[str, Any]:
    """diffusers UNet2DModel, tiny config (two levels, attention), dynamic H/W."""
    import diffusers
    import torch

    models._seed()
    m = diffusers.UNet2DModel(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(8, 16),
        norm_num_groups=8,
        attention_head_dim=8,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
    )

    class Eps(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = m

        def forward(self, sample: Any, timestep: Any) -> Any:
            return self.m(sample, timestep).sample

    _export(
        models._perturb(Eps()).eval(),
        (torch.randn(1, 3, 32, 32), torch.tensor([10])),
        path,
        ["sample", "timestep"],
        {
            "sample": {0: "batch", 2: "height", 3: "width"},
            "output": {0: "batch", 2: "height", 3: "width"},
        },
    )
    return {
        "architecture": "diffusers.UNet2DModel(block_out_channels=(8, 16), layers_per_block=1,"
        " norm_num_groups=8, DownBlock2D+AttnDownBlock2D / AttnUpBlock2D+UpBlock2D)",
        "how": "torchscript export (opset 17), dynamic batch/height/width; timestep [1] int64",
        "inputs": {
            "sample": _spec(["batch", 3, "height", "width"]),
            "timestep": _spec([1], "int64", 1000),
        },
        "defaults": {"batch": 1, "height": 32, "width": 32},
        "probes": [
            {"batch": 1, "height": 32, "width": 32},
            {"batch": 1, "height": 31, "width": 32},
            {"batch": 1, "height": 34, "width": 32},
        ],
    }


def sd_vae_decoder(path: str) -> dict[str, Any]:
    """diffusers AutoencoderKL decoder, tiny config, dynamic latent H/W."""
    import diffusers
    import torch

    models._seed()
    vae = diffusers.AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        layers_per_block=1,
        block_out_channels=(8, 16),
        norm_num_groups=8,
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
    )

    class Decode(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.vae = vae

        def forward(self, latent: Any) -> Any:
            return self.vae.decode(latent).sample

    _export(
        models._perturb(Decode()).eval(),
        (torch.randn(1, 4, 8, 8),),
        path,
        ["latent"],
        {"latent": {0: "batch", 2: "height", 3: "width"}, "output": {0: "batch"}},
    )
    return {
        "architecture": "diffusers.AutoencoderKL(block_out_channels=(8, 16), latent_channels=4,"
        " layers_per_block=1, norm_num_groups=8), decoder",
        "how": "torchscript export (opset 17) of vae.decode(latent).sample, dynamic "
        "batch/height/width",
        "inputs": {"latent": _spec(["batch", 4, "height", "width"])},
        "defaults": {"batch": 1, "height": 8, "width": 8},
    }


BUILDERS: dict[str, Any] = {
    "cnn_qdq_ort.onnx": lambda p: cnn_quantized(p, "QDQ"),
    "cnn_qoperator_ort.onnx": lambda p: cnn_quantized(p, "QOperator"),
    "bert_dynquant_ort.onnx": bert_dynquant,
    "llama_nbits_ort.onnx": lambda p: llama_nbits(p, "QOperator"),
    "llama_nbits_qdq_ort.onnx": lambda p: llama_nbits(p, "QDQ"),
    "cnn_nncf_fakequantize_openvino.xml": cnn_fakequantize,
    "bert_ortopt.onnx": bert_ortopt,
    "gpt2_ortopt.onnx": gpt2_ortopt,
    "llama_nncf_int8_openvino.xml": lambda p: llama_nncf(p, "int8"),
    "llama_nncf_int4_openvino.xml": lambda p: llama_nncf(p, "int4"),
    "gpt2_kv_torchscript.onnx": gpt2_kv,
    "unet_torchscript.onnx": unet,
    "unet2_torchscript.onnx": unet2,
    "lraspp_torchscript.onnx": lraspp,
    "sd_unet_torchscript.onnx": sd_unet,
    "sd_vae_decoder_torchscript.onnx": sd_vae_decoder,
    "ssdlite_torchscript.onnx": ssdlite,
    "lstm_torchscript.onnx": lstm,
    "gru_torchscript.onnx": gru,
    "mamba_torchscript.onnx": mamba,
    "onnxscript_functions.onnx": onnxscript_functions,
    "mha_torchscript.onnx": mha,
    "mlp_opset7.onnx": mlp_opset7,
    "cnn_opset23.onnx": lambda p: cnn_opset(p, 23),
}


def main(argv: list[str]) -> int:
    """Build one fixture: ``deployed_models.py NAME OUTDIR``; print its manifest entry."""
    import json

    name, out = argv
    torchvision()  # transformers and diffusers import it too
    meta = BUILDERS[name](str(Path(out) / name))
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
