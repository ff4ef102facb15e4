"""Tiny real architectures with random weights, and the ways practitioners export them.

Every builder returns a ``Built``: the torch module (or sklearn pipeline), example inputs,
which dims are dynamic, and the concrete inputs the peers run on.  Nothing is downloaded:
each model is made from a library config with tiny sizes and ``torch.manual_seed(0)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

SEED = 0
VOCAB = 100
BATCH, SEQ = 2, 8  # concrete sizes the peers run text models on
IMG = 32  # images are IMG x IMG (CNNs on IR are also run at another H, W)


@dataclasses.dataclass
class Built:
    """A model ready to export."""

    module: Any
    # name -> example tensor (torch) used for tracing
    example: dict[str, Any]
    # name -> {axis: symbolic name}; the dims left dynamic in the exported file
    dynamic: dict[str, dict[int, str]]
    # name -> {"shape": [...], "dtype": "...", "high": int | None}; what peers run on
    run_inputs: dict[str, dict[str, Any]]
    source: str


def hide_broken_torchvision() -> None:
    """Make an installed torchvision that fails to import (built for another torch) absent.

    transformers imports torchvision whenever it is installed, so a broken one breaks every
    transformers builder; the torchvision builders (resnet, mobilenet) still need a working one.
    """
    import sys

    try:
        import torchvision  # noqa: F401
    except Exception:  # e.g. RuntimeError: operator torchvision::nms does not exist
        for k in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[k]
        sys.modules["torchvision"] = None  # type: ignore[assignment]  # find_spec -> None


def _seed() -> None:
    import torch

    torch.manual_seed(SEED)


def _perturb(model: Any) -> Any:
    """Give constant-initialised parameters (norm scales of ones, zero biases) random values.

    Otherwise exporters and converters may fold a multiply by ones or an add of zeros away,
    and the broadcasting nodes a trained model has would be missing from the fixture.
    """
    import torch

    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 0 and bool((p == p.reshape(-1)[0]).all()):
                p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model


def _text_inputs(with_types: bool = False) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    import torch

    g = torch.Generator().manual_seed(SEED)
    ex = {
        "input_ids": torch.randint(0, VOCAB, (BATCH, SEQ), generator=g),
        "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.int64),
    }
    run = {
        "input_ids": {"shape": [BATCH, SEQ], "dtype": "int64", "high": VOCAB},
        "attention_mask": {"shape": [BATCH, SEQ], "dtype": "int64", "high": 2},
    }
    if with_types:
        ex["token_type_ids"] = torch.zeros(BATCH, SEQ, dtype=torch.int64)
        run["token_type_ids"] = {"shape": [BATCH, SEQ], "dtype": "int64", "high": 2}
    return ex, run


def _text_model(model: Any, source: str, with_types: bool = False) -> Built:
    """A text model on ids and a mask (and token types), every input [batch, seq]."""
    ex, run = _text_inputs(with_types=with_types)
    names = list(ex)
    return Built(_wrap_hidden(_perturb(model), names), ex, _text_dynamic(names), run, source)


def _text_dynamic(names: list[str]) -> dict[str, dict[int, str]]:
    return {n: {0: "batch", 1: "seq"} for n in names}


def _wrap_hidden(model: Any, names: list[str]) -> Any:
    """Wrap a transformers model as forward(<names>) -> last_hidden_state.

    The forward has one named parameter per input (torch.export maps ``dynamic_shapes`` on
    parameter names), so the wrapper class is made for the given names.
    """
    import torch

    params = ", ".join(names)
    kwargs = ", ".join(f"{n}={n}" for n in names)
    ns: dict[str, Any] = {}
    exec(  # a plain signature, not *args
        f"def forward(self, {params}):\n    return self.model({kwargs}).last_hidden_state\n", ns
    )

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

    Wrapper.forward = ns["forward"]  # type: ignore[method-assign]
    w = Wrapper()
    w.eval()
    return w


def bert() -> Built:
    """BERT encoder (position_ids / token_type_ids buffers sliced by seq length)."""
    import transformers

    _seed()
    cfg = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    return _text_model(model, "transformers.BertModel", with_types=True)


def gpt2() -> Built:
    """GPT-2 decoder (no cache)."""
    import transformers

    _seed()
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=2,
        n_positions=64,
        use_cache=False,
        attn_implementation="eager",
    )
    model = transformers.GPT2Model(cfg).eval()
    return _text_model(model, "transformers.GPT2Model")


def llama() -> Built:
    """LLaMA decoder: RMSNorm, rotary embeddings, grouped-query attention (no cache)."""
    import transformers

    _seed()
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
        attn_implementation="eager",
    )
    model = transformers.LlamaModel(cfg).eval()
    return _text_model(model, "transformers.LlamaModel")


def vit() -> Built:
    """ViT encoder on 32x32 images, patch 8 (16 patches + CLS = 17 positions)."""
    import torch
    import transformers

    _seed()
    cfg = transformers.ViTConfig(
        image_size=IMG,
        patch_size=8,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        attn_implementation="eager",
    )
    model = transformers.ViTModel(cfg, add_pooling_layer=False).eval()
    names = ["pixel_values"]
    ex = {
        "pixel_values": torch.randn(BATCH, 3, IMG, IMG, generator=torch.Generator().manual_seed(0))
    }
    run = {"pixel_values": {"shape": [BATCH, 3, IMG, IMG], "dtype": "float32", "high": None}}
    return Built(
        _wrap_hidden(_perturb(model), names),
        ex,
        {"pixel_values": {0: "batch"}},
        run,
        "transformers.ViTModel",
    )


def vit_hw() -> Built:
    """ViT as ``vit``, exported with dynamic height and width as well as batch.

    The position table keeps 17 rows (CLS + 16 patches of 8x8 on 32x32), so the model runs
    only when (height // 8) * (width // 8) == 16: the validity domain of its input sizes.
    """
    b = vit()
    b.dynamic = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
    b.run_inputs = {"pixel_values": {"shape": [BATCH, 3, 16, 64], "dtype": "float32", "high": None}}
    b.source = "transformers.ViTModel (dynamic height and width)"
    return b


def bert_mask_dims() -> Built:
    """BERT as ``bert``, but the attention mask's dims are symbols of their own.

    Runs when the mask's dims equal the ids' dims or are 1, and seq <= 64 (position table).
    """
    b = bert()
    b.dynamic = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "mask_batch", 1: "mask_seq"},
        "token_type_ids": {0: "batch", 1: "seq"},
    }
    b.source = "transformers.BertModel (attention_mask dims mask_batch, mask_seq)"
    return b


def roberta() -> Built:
    """RoBERTa encoder: positions count the tokens that are not padding (CumSum), from 2.

    66 position rows, padding_idx 1: an input without padding runs up to 64 tokens.
    """
    import transformers

    _seed()
    cfg = transformers.RobertaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=66,
        attn_implementation="eager",
    )
    model = transformers.RobertaModel(cfg, add_pooling_layer=False).eval()
    return _text_model(model, "transformers.RobertaModel")


def whisper_encoder() -> Built:
    """Whisper's audio encoder: two convolutions (the second of stride 2) over mel frames,
    then a position table of 16 rows added whole: (frames - 1)//2 + 1 must be 16 (or 1).
    """
    import torch
    import transformers

    _seed()
    cfg = transformers.WhisperConfig(
        num_mel_bins=8,
        d_model=32,
        encoder_layers=2,
        encoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_layers=1,
        decoder_attention_heads=2,
        decoder_ffn_dim=64,
        max_source_positions=16,
        vocab_size=VOCAB,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    model = transformers.WhisperModel(cfg).get_encoder().eval()
    names = ["input_features"]
    ex = {"input_features": torch.randn(BATCH, 8, 32, generator=torch.Generator().manual_seed(0))}
    run = {"input_features": {"shape": [BATCH, 8, 32], "dtype": "float32", "high": None}}
    return Built(
        _wrap_hidden(_perturb(model), names),
        ex,
        {"input_features": {0: "batch", 2: "frames"}},
        run,
        "transformers.WhisperModel encoder (dynamic batch and frames)",
    )


def bert_fixed_mask_batch() -> Built:
    """BERT as ``bert``, exported with the attention mask's batch left static (a common slip:
    ``dynamic_axes`` name the mask's sequence axis only), so the file fixes it at 2.

    Runs only for batch 1 or 2 with a mask of 2 rows; which node fails is the domain's job.
    """
    b = bert()
    b.dynamic = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {1: "seq"},
        "token_type_ids": {0: "batch", 1: "seq"},
    }
    b.source = "transformers.BertModel (attention_mask batch static: only its axis 1 dynamic)"
    return b


def t5_encoder() -> Built:
    """T5 encoder (relative position bias added to every attention score)."""
    import transformers

    _seed()
    cfg = transformers.T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        use_cache=False,
    )
    model = transformers.T5EncoderModel(cfg).eval()
    return _text_model(model, "transformers.T5EncoderModel")


def clip_vision() -> Built:
    """CLIP vision tower on 32x32 images, patch 8 (class embedding + position embedding)."""
    import torch
    import transformers

    _seed()
    cfg = transformers.CLIPVisionConfig(
        image_size=IMG,
        patch_size=8,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        attn_implementation="eager",
    )
    model = transformers.CLIPVisionModel(cfg).eval()
    names = ["pixel_values"]
    ex = {
        "pixel_values": torch.randn(BATCH, 3, IMG, IMG, generator=torch.Generator().manual_seed(0))
    }
    run = {"pixel_values": {"shape": [BATCH, 3, IMG, IMG], "dtype": "float32", "high": None}}
    return Built(
        _wrap_hidden(_perturb(model), names),
        ex,
        {"pixel_values": {0: "batch"}},
        run,
        "transformers.CLIPVisionModel",
    )


def _image_built(module: Any, source: str, dynamic_hw: bool) -> Built:
    import torch

    _perturb(module).eval()
    ex = {
        "pixel_values": torch.randn(BATCH, 3, IMG, IMG, generator=torch.Generator().manual_seed(0))
    }
    dyn = {0: "batch", 2: "height", 3: "width"} if dynamic_hw else {0: "batch"}
    run = {"pixel_values": {"shape": [BATCH, 3, 40, 48], "dtype": "float32", "high": None}}
    if not dynamic_hw:
        run["pixel_values"]["shape"] = [BATCH, 3, IMG, IMG]
    return Built(module, ex, {"pixel_values": dyn}, run, source)


def resnet() -> Built:
    """Torchvision ResNet-18 topology (BasicBlock) at 1/8 width, one block per stage."""
    import torch
    from torchvision.models.resnet import BasicBlock, ResNet

    class TinyResNet(ResNet):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(BasicBlock, [1, 1, 1, 1], num_classes=10)
            w = 8
            self.inplanes = w
            self.conv1 = torch.nn.Conv2d(3, w, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(w)
            self.layer1 = self._make_layer(BasicBlock, w, 1)
            self.layer2 = self._make_layer(BasicBlock, 2 * w, 1, stride=2)
            self.layer3 = self._make_layer(BasicBlock, 4 * w, 1, stride=2)
            self.layer4 = self._make_layer(BasicBlock, 8 * w, 1, stride=2)
            self.fc = torch.nn.Linear(8 * w, 10)

    _seed()
    m = TinyResNet()
    # random BatchNorm statistics so that folding them is not a no-op
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
    return _image_built(m, "torchvision.models.resnet.ResNet(BasicBlock,[1,1,1,1]) width 8", True)


def mobilenet() -> Built:
    """Torchvision MobileNetV3-Small, width_mult=0.25 (SE blocks: Mul [N,C,1,1] x [N,C,H,W])."""
    from torchvision.models import mobilenet_v3_small

    _seed()
    m = mobilenet_v3_small(weights=None, num_classes=10, width_mult=0.25)
    return _image_built(m, "torchvision.models.mobilenet_v3_small(width_mult=0.25)", True)


def efficientnet() -> Built:
    """Timm EfficientNet-B0 topology with channel and depth multipliers 0.25."""
    from timm.models.efficientnet import _gen_efficientnet

    _seed()
    m = _gen_efficientnet(
        "efficientnet_b0", channel_multiplier=0.25, depth_multiplier=0.25, num_classes=10
    )
    return _image_built(m, "timm efficientnet_b0 (channel 0.25, depth 0.25)", True)


BUILDERS: dict[str, Callable[[], Built]] = {
    "bert": bert,
    "bert_mask_dims": bert_mask_dims,
    "bert_fixed_mask_batch": bert_fixed_mask_batch,
    "roberta": roberta,
    "whisper_encoder": whisper_encoder,
    "gpt2": gpt2,
    "llama": llama,
    "vit": vit,
    "vit_hw": vit_hw,
    "t5_encoder": t5_encoder,
    "clip_vision": clip_vision,
    "resnet": resnet,
    "mobilenet": mobilenet,
    "efficientnet": efficientnet,
}


# --------------------------------------------------------------------------- exporters


def export_torchscript(b: Built, path: str, opset: int = 17) -> None:
    """Torch's TorchScript-based exporter with ``dynamic_axes`` (what most tutorials show)."""
    import torch

    names = list(b.example)
    dyn = {n: dict(ax) for n, ax in b.dynamic.items()}
    out_dyn: dict[int, str] = {0: "batch"}
    if "seq" in {v for ax in dyn.values() for v in ax.values()} and "input_ids" in dyn:
        out_dyn[1] = "seq"
    dyn["output"] = out_dyn
    with torch.no_grad():
        torch.onnx.export(
            b.module,
            tuple(b.example[n] for n in names),
            path,
            input_names=names,
            output_names=["output"],
            dynamic_axes=dyn,
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )


def export_dynamo(b: Built, path: str) -> None:
    """Torch's dynamo exporter (torch.export) with ``dynamic_shapes``."""
    import torch

    names = list(b.example)
    # Dim.AUTO: torch.export names the dims itself (s0, s1, ...) and writes derived ones
    # such as Min(64, s1) into dim_param, as practitioners get them by default.
    shapes = {n: dict.fromkeys(b.dynamic.get(n, {}), torch.export.Dim.AUTO) for n in names}
    with torch.no_grad():
        prog = torch.onnx.export(
            b.module,
            tuple(b.example[n] for n in names),
            input_names=names,
            output_names=["output"],
            dynamic_shapes=tuple(shapes[n] for n in names),  # by position
            dynamo=True,
            optimize=True,
            external_data=False,
        )
    prog.save(path, external_data=False)


def export_openvino(b: Built, path: str) -> None:
    """``openvino.convert_model`` of the torch module, then ``openvino.save_model`` (IR)."""
    import openvino as ov
    import torch

    names = list(b.example)
    inputs = []
    for n in names:
        t = b.example[n]
        shape = [-1 if ax in b.dynamic.get(n, {}) else int(s) for ax, s in enumerate(t.shape)]
        dtype = {torch.int64: ov.Type.i64, torch.float32: ov.Type.f32}[t.dtype]
        inputs.append((ov.PartialShape(shape), dtype))  # by position; named below
    with torch.no_grad():
        model = ov.convert_model(
            b.module, example_input=tuple(b.example[n] for n in names), input=inputs
        )
    for i, n in enumerate(names):
        model.inputs[i].get_tensor().set_names({n})
    ov.save_model(model, path, compress_to_fp16=False)


def sklearn_models() -> dict[str, tuple[Any, Any, dict[str, dict[str, Any]], str]]:
    """Pipelines exported with skl2onnx: name -> (pipeline, X, run_inputs, source)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Normalizer, StandardScaler

    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(64, 8)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 0.5)
    logreg = make_pipeline(StandardScaler(), Normalizer(), LogisticRegression(max_iter=200))
    logreg.fit(x, y)
    mlp = make_pipeline(
        StandardScaler(), MLPClassifier(hidden_layer_sizes=(16,), max_iter=300, random_state=SEED)
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp.fit(x, y)
    run = {"input": {"shape": [5, 8], "dtype": "float32", "high": None}}
    return {
        "sklearn_logreg": (
            logreg,
            x,
            run,
            "sklearn Pipeline(StandardScaler, Normalizer, LogisticRegression)",
        ),
        "sklearn_mlp": (mlp, x, run, "sklearn Pipeline(StandardScaler, MLPClassifier(16,))"),
    }


def export_skl2onnx(pipe: Any, x: Any, path: str) -> None:
    """skl2onnx.to_onnx with a dynamic batch dim (None)."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType

    onx = to_onnx(
        pipe,
        initial_types=[("input", FloatTensorType([None, x.shape[1]]))],
        target_opset={"": 17, "ai.onnx.ml": 3},
        options={id(pipe.steps[-1][1]): {"zipmap": False}},
    )
    with open(path, "wb") as f:
        f.write(onx.SerializeToString())
