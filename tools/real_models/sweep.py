"""Build tests/fixtures/sweep/: exports where bcast once said "runs" and onnxruntime failed.

Found by trying bcast on models it had not seen (2026-11-27): tiny random-weight networks
exported by the TorchScript exporter (``torch.onnx.export(dynamo=False)``, dynamic H and W),
as most tutorials show.

- ``conv_tail.onnx``: Conv (k4 s4), x - mean(x), Conv (k2 s2), the same, Conv (k2 s2) as the
  graph output. The exporter names the output's dims ``Conv13_dim_2``; bcast took that claim
  for the dim and left the last window unchecked (it said H from 8; onnxruntime needs 16).
- ``convnext.onnx``: a ConvNeXt of three stages (channels-first LayerNorm by hand, blocks
  with permutes, k2 s2 downsampling). Each stage took bcast one more round of ONNX's
  inference, and three rounds stopped short of the last Conv (it said H from 8).
- ``swin.onnx``: Swin's window partition, a Reshape to ``H//4 // 4`` windows computed in the
  graph. bcast does not evaluate that target: it says so ("not decided beyond node
  /Reshape"), and its torch.export and OpenVINO lines say they hold only what was decided.
- ``swin_padded.onnx``: Hugging Face Swin's way, the feature map padded to a multiple of the
  window first, its pads computed from the shape (``(4 - h % 4) % 4``, by Mod and Sub, then
  F.pad's reversal of pairs by Reshape, Slice and Transpose). bcast left that Pad's output
  unknown ("its pads not known as constants") and decided nothing past it; it runs for
  every size. ``swin_padded_mutant.onnx`` pads to a multiple of 3 and cuts 4x4 windows.
- ``crossattn_dynamo.onnx`` (torch.export, ``Dim.AUTO``; onnxscript as pinned in
  requirements-deployed.txt): learned queries cross-attend CNN tokens through
  ``nn.MultiheadAttention``. The exporter's ``value_info`` claims the key projection
  ``[T, 1, 32]`` and its Reshape ``[T, 1, 2, 16]`` (a batch of 1), where ONNX's inference
  cannot size them; bcast took the claims and said the batch must be 1. onnxruntime runs
  any batch; bcast now sizes those values from the inputs where its rules can.
- ``classifier.onnx``: Conv, max pool, flatten, Linear (a Gemm): the Gemm's inner dim is
  ``4*h*w`` of the pooled map and must be the weight's 256. bcast did not compare a Gemm's
  inner dims at all (it said ``H any``; a Gemm of K 36 against 16 was "no findings").

Usage (from the repository root, with torch and onnxscript installed):

    python tools/real_models/sweep.py
"""

from __future__ import annotations

from pathlib import Path

import onnx
import torch
from torch import nn
from torch.nn import functional as F

OUT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "sweep"


class Centred(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.mean(1, keepdim=True)


class LayerNorm2d(nn.Module):
    """Channels-first LayerNorm written out, as ConvNeXt's downsampling layers do it."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.w, self.b = nn.Parameter(torch.rand(d)), nn.Parameter(torch.rand(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = x.mean(1, keepdim=True)
        v = (x - u).pow(2).mean(1, keepdim=True)
        return self.w[:, None, None] * ((x - u) / torch.sqrt(v + 1e-6)) + self.b[:, None, None]


class Block(nn.Module):
    """ConvNeXt's block: depthwise 7x7, channels-last LayerNorm and MLP, layer scale."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.p1, self.p2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.g = nn.Parameter(torch.rand(d) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.p2(F.gelu(self.p1(self.ln(y)))) * self.g
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 4, 4), LayerNorm2d(8))
        self.stages = nn.Sequential(
            Block(8), LayerNorm2d(8), nn.Conv2d(8, 12, 2, 2),
            Block(12), LayerNorm2d(12), nn.Conv2d(12, 16, 2, 2), Block(16),
        )  # fmt: skip
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)).mean((-2, -1)))


class Swin(nn.Module):
    """Patch embedding, then attention in 4x4 windows (window partition by reshape)."""

    def __init__(self, d: int = 16, ws: int = 4) -> None:
        super().__init__()
        self.ws = ws
        self.pe = nn.Conv2d(3, d, 4, 4)
        self.ln = nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pe(x).permute(0, 2, 3, 1)
        b, h, w, c = x.shape
        ws = self.ws
        win = self.ln(x).view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5)
        q, k, v = self.qkv(win.reshape(-1, ws * ws, c)).chunk(3, -1)
        a = (q @ k.transpose(-2, -1) * c**-0.5).softmax(-1)
        return self.o(a @ v).mean(1)


class PaddedSwin(Swin):
    """Hugging Face Swin's window attention: pad to a multiple of the window, then unpad.

    The pads are computed from the shape, ``(ws - h % ws) % ws``, so every size runs.
    ``pad_to`` other than the window is the bug of the mutant: it pads to a multiple of 3
    and then cuts 4x4 windows, which runs only where that multiple is one of 4 too.
    """

    def __init__(self, pad_to: int = 4) -> None:
        super().__init__()
        self.pad_to = pad_to

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln(self.pe(x).permute(0, 2, 3, 1))
        b, h, w, c = x.shape
        ws, to = self.ws, self.pad_to
        x = F.pad(x, (0, 0, 0, (to - w % to) % to, 0, (to - h % to) % to))
        hp, wp = x.shape[1], x.shape[2]
        win = x.view(b, hp // ws, ws, wp // ws, ws, c).permute(0, 1, 3, 2, 4, 5)
        q, k, v = self.qkv(win.reshape(-1, ws * ws, c)).chunk(3, -1)
        a = (q @ k.transpose(-2, -1) * c**-0.5).softmax(-1)
        y = self.o(a @ v).view(b, hp // ws, wp // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5)
        return y.reshape(b, hp, wp, c)[:, :h, :w, :].mean((1, 2))


class Classifier(nn.Module):
    """A LeNet-style head: Conv, pool, flatten, Linear: the Gemm's K is 4*h*w of the map."""

    def __init__(self) -> None:
        super().__init__()
        self.c, self.fc = nn.Conv2d(3, 4, 3, 2, 1), nn.Linear(4 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(F.max_pool2d(F.relu(self.c(x)), 2), 1))


class CrossAttention(nn.Module):
    """CNN tokens cross-attended by learned queries through ``nn.MultiheadAttention``."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 16, 4, 4)
        self.q = nn.Parameter(torch.randn(1, 5, 16))
        self.a = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.c(x).flatten(2).transpose(1, 2)
        return self.a(self.q.expand(t.shape[0], -1, -1), t, t)[0]


def dynamo() -> None:
    """Write the torch.export (dynamo) fixtures: they need onnxscript (requirements-deployed)."""
    torch.manual_seed(0)
    auto = torch.export.Dim.AUTO
    torch.onnx.export(
        CrossAttention().eval(),
        (torch.rand(1, 3, 16, 16),),
        str(OUT / "crossattn_dynamo.onnx"),
        input_names=["x"],
        dynamic_shapes={"x": {0: auto, 2: auto, 3: auto}},
        dynamo=True,
    )
    path = OUT / "crossattn_dynamo.onnx"
    model = onnx.load(str(path))  # one file: the weights inside, as committed
    for node in model.graph.node:  # its stack traces name this machine's folders
        kept = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    onnx.save(model, str(path))
    (OUT / "crossattn_dynamo.onnx.data").unlink(missing_ok=True)
    print(f"wrote {path}")


def main() -> None:
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    models = {
        "conv_tail.onnx": nn.Sequential(
            *(nn.Conv2d(3, 8, 4, 4), Centred(), nn.Conv2d(8, 8, 2, 2), Centred()),
            nn.Conv2d(8, 8, 2, 2),
        ),
        "convnext.onnx": ConvNeXt(),
        "swin.onnx": Swin(),
        "swin_padded.onnx": PaddedSwin(),
        "swin_padded_mutant.onnx": PaddedSwin(pad_to=3),
        "classifier.onnx": Classifier(),
    }
    for name, model in models.items():
        # where the mutant runs too; the classifier's Linear takes the map of a 32 x 32 input
        size = {"swin_padded": 48, "classifier": 32}.get(
            name.split(".")[0].removesuffix("_mutant"), 64
        )
        torch.onnx.export(
            model.eval(),
            (torch.rand(1, 3, size, size),),
            str(OUT / name),
            input_names=["x"],
            dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}},
            opset_version=17,
            dynamo=False,
        )
        print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
    dynamo()
