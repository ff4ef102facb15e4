"""Make the float16 copies of real-model fixtures in tests/fixtures/real_fp16/ (not run by CI).

Practitioners who ship a float16 ONNX model usually export it in float32 and convert it
with onnxconverter-common's ``float16.convert_float_to_float16``: every float32 initializer,
input, output and computation becomes float16 (``keep_io_types=False``). This does that to
the float32 TorchScript exports of tests/fixtures/real/ (made by build.py) and records the
source's and the copy's sha256 and the versions used in manifest.json beside the copies.

Usage (from the repository root, in the environment of requirements.txt beside this file):

    /tmp/exportenv/bin/python tools/real_models/half.py
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import onnx
import onnxconverter_common
from onnxconverter_common import float16

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "fixtures" / "real"
OUT = ROOT / "tests" / "fixtures" / "real_fp16"
MODELS = ["bert_torchscript", "gpt2_torchscript", "llama_torchscript", "resnet_torchscript"]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    OUT.mkdir(exist_ok=True)
    files = {}
    for name in MODELS:
        source, target = SOURCE / f"{name}.onnx", OUT / f"{name}_fp16.onnx"
        with warnings.catch_warnings():  # "the float32 value ... is truncated to float16"
            warnings.simplefilter("ignore")
            converted = float16.convert_float_to_float16(onnx.load(source), keep_io_types=False)
        onnx.checker.check_model(converted)
        onnx.save(converted, target)
        files[target.name] = {
            "source": f"tests/fixtures/real/{source.name}",
            "source_sha256": _sha256(source),
            "sha256": _sha256(target),
            "bytes": target.stat().st_size,
        }
        print(f"{target.relative_to(ROOT)}: {target.stat().st_size} bytes")
    manifest = {
        "about": "float16 copies of real-model fixtures, converted as practitioners convert "
        "them; see docs/real-models.md and tools/real_models/half.py.",
        "converter": "onnxconverter_common.float16.convert_float_to_float16(keep_io_types=False)",
        "versions": {"onnxconverter-common": onnxconverter_common.__version__,
                     "onnx": onnx.__version__},
        "files": files,
    }  # fmt: skip
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
