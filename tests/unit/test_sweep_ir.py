"""The sweep's exports as OpenVINO IR (``ov.convert_model``), held against OpenVINO.

The TorchScript exports of tests/fixtures/sweep/ converted the way OpenVINO's users convert
them, at test time, in a child process (convert_model imports every framework it knows,
JAX's threads among them, which the test process would then fork with). OpenVINO writes
F.pad's pads, Swin's window partition and its unpad with ShapeOf, FloorMod, Subtract,
Divide, a Reshape to ``[-1, 2]``, a reversing Slice, a Transpose and a Split: bcast must
size them all (nothing left undecided) and say, at each size, what OpenVINO does when it
runs there (a fresh compile for every size).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bcast

ov = pytest.importorskip("openvino")

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"
CASES = {
    "swin.onnx": (16, [15, 16, 19, 20, 28, 32, 35, 36]),
    "swin_padded.onnx": (16, [3, 4, 5, 20, 37]),
    "swin_padded_mutant.onnx": (40, [39, 40, 47, 48, 51, 52, 88, 100]),
    "classifier.onnx": (32, [2, 3, 30, 31, 32, 34, 35, 64]),
    "conv_tail.onnx": (64, [8, 15, 16, 17]),
}


_CONVERT = """
import sys, openvino as ov
for source, target in zip(sys.argv[1::2], sys.argv[2::2]):
    ov.save_model(ov.convert_model(source), target)
"""


@pytest.fixture(scope="module")
def irs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sweep's models as IR, converted in one child process."""
    folder = tmp_path_factory.mktemp("sweep_ir")
    pairs = [a for m in sorted(CASES) for a in (str(SWEEP / m), str(folder / f"{m}.xml"))]
    done = subprocess.run([sys.executable, "-c", _CONVERT, *pairs], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


@pytest.mark.parametrize("model", sorted(CASES))
def test_an_ir_of_the_sweep_is_decided_and_agrees_with_openvino(irs: Path, model: str) -> None:
    path = str(irs / f"{model}.xml")
    domain = bcast.check(path).domain
    assert not domain.undecided, [str(u) for u in domain.undecided]
    width, heights = CASES[model]
    seen = set()
    for h in heights:
        try:
            ov.Core().compile_model(path, "CPU")(np.ones((1, 3, h, width), np.float32))
            runs = True
        except RuntimeError:  # OpenVINO's refusal at that size
            runs = False
        seen.add(runs)
        failed = domain.first_failure({"x.0": 1, "x.2": h, "x.3": width})
        assert (failed is None) is runs, (h, failed)
    assert seen == {True, False}  # each model is probed inside and outside
