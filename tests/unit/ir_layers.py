"""One OpenVINO layer on one input, saved as IR: what the IR shape tests read and run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def save_layer(
    tmp_path: Path, make: Callable[[Any], Any], dims: Sequence[int], *, all_outputs: bool = True
) -> str:
    """Save ``make(x)`` for a float32 input ``x`` of ``dims`` (-1: dynamic); return the path.

    The model's outputs are all the layer's, or its first only.
    """
    import openvino as ov

    x = ov.opset8.parameter(ov.PartialShape(list(dims)), np.float32, name="x")
    op = make(x)
    count = op.get_output_size() if all_outputs else 1
    model = ov.Model([op.output(i) for i in range(count)], [x], "m")
    path = tmp_path / "m.xml"
    ov.save_model(model, str(path), compress_to_fp16=False)
    return str(path)
