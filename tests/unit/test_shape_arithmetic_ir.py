"""The IR layers' shape arithmetic on symbolic dims, held against OpenVINO (issue 37 item 3).

Each layer is built with OpenVINO's Python opset API on an input of dynamic height, saved as
IR and read by bcast; bcast's dim expressions are evaluated at many heights and compared
with the shapes OpenVINO infers when the same IR is reshaped to each height (and with its
refusal where bcast's size is not a size).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ov = pytest.importorskip("openvino")
o = pytest.importorskip("openvino.opset14")

from ir_layers import save_layer  # noqa: E402

from bcast.loading import load_graph  # noqa: E402


def _const(values: Any, dtype: Any = np.float32) -> Any:
    return o.constant(np.array(values, dtype))


def _ints(values: Any) -> Any:
    return _const(values, np.int64)


LAYERS: list[tuple[str, Callable[[Any], Any], int]] = [
    (
        "backprop k2 s2",
        lambda x: o.convolution_backprop_data(x, _const(np.ones((3, 2, 2))), [2]),
        3,
    ),
    (
        "backprop k3 s2 pads output_padding",
        lambda x: o.convolution_backprop_data(
            x, _const(np.ones((3, 2, 3))), [2], None, [1], [1], [1], None, [1]
        ),
        3,
    ),
    (
        "backprop same_upper",
        lambda x: o.convolution_backprop_data(
            x, _const(np.ones((3, 2, 3))), [3], None, [0], [0], [1], "same_upper"
        ),
        3,
    ),
    (
        "group backprop dilated",
        lambda x: o.group_convolution_backprop_data(
            x, _const(np.ones((3, 1, 2, 3))), [2], None, [0], [0], [2]
        ),
        3,
    ),
    ("max pool ceil", lambda x: o.max_pool(x, [2], [1], [1], [1], [2], "ceil"), 1),
    ("max pool ceil_torch", lambda x: o.max_pool(x, [2], [1], [1], [1], [2], "ceil_torch"), 1),
    ("avg pool ceil_torch", lambda x: o.avg_pool(x, [3], [1], [1], [2], True, "ceil_torch"), 1),
    # a window of 3 rounds up to one window at h = 2, which OpenVINO refuses (3 > 2)
    ("max pool ceil k3", lambda x: o.max_pool(x, [2], [1], [0], [0], [3], "ceil"), 1),
    ("avg pool ceil_torch k3", lambda x: o.avg_pool(x, [2], [0], [0], [3], True, "ceil_torch"), 1),
    ("pad", lambda x: o.pad(x, _ints([0, 0, 2]), _ints([0, 0, -1]), "constant"), 1),
    ("split", lambda x: o.split(x, _ints(2), 2), 1),
    ("variadic split", lambda x: o.variadic_split(x, _ints(2), _ints([1, -1])), 1),
    ("tile", lambda x: o.tile(x, _ints([3])), 1),
]


@pytest.mark.parametrize(("label", "make", "channels"), LAYERS, ids=[w[0] for w in LAYERS])
def test_ir_layer_output_dims_are_openvinos_at_every_height(
    tmp_path: Path, label: str, make: Callable[[Any], Any], channels: int
) -> None:
    path = save_layer(tmp_path, make, [1, channels, -1])
    graph = load_graph(path)
    (node,) = [n for n in graph.nodes if n.op not in ("Parameter", "Const", "Result")]
    assert not node.unmodelled, node.unmodelled
    height = graph.shapes["x"].dims[2].name
    outputs = []
    for shape in node.output_shapes[: len(node.outputs)]:
        dim = shape.dims[2]
        expr = graph.expressions.get(dim.name or "")
        outputs.append(expr if expr is not None else dim)
    checked = 0
    for h in range(1, 20):
        sizes = [
            e.evaluate({height: h}) if hasattr(e, "evaluate") else (e.lo if e.is_static else h)
            for e in outputs
        ]
        model = ov.Core().read_model(path)
        try:
            model.reshape({"x": [1, channels, h]})
        except Exception:  # OpenVINO refuses the size: bcast's size is no size there
            least = 1 if "pool" in label else 0  # (no window: the domain requires one)
            assert any(s is None or s < least for s in sizes) or label.startswith("split"), (
                h, sizes,
            )  # fmt: skip
            continue
        assert sizes == [model.output(i).get_shape()[2] for i in range(len(sizes))], (h, sizes)
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize(("op", "channels"), [("depth_to_space", 4), ("space_to_depth", 1)])
def test_ir_depth_and_space_dims_are_openvinos(tmp_path: Path, op: str, channels: int) -> None:
    x = o.parameter(ov.PartialShape([1, channels, -1, 4]), np.float32, name="x")
    layer = getattr(o, op)(x, "blocks_first", 2)
    path = tmp_path / "m.xml"
    ov.save_model(ov.Model([layer.output(0)], [x], "m"), str(path), compress_to_fp16=False)
    graph = load_graph(path)
    (node,) = [n for n in graph.nodes if n.op not in ("Parameter", "Const", "Result")]
    height = graph.shapes["x"].dims[2].name
    expr = graph.expressions[node.output_shapes[0].dims[2].name]
    for h in (2, 4, 6, 8):
        model = ov.Core().read_model(path)
        model.reshape({"x": [1, channels, h, 4]})
        assert expr.evaluate({height: h}) == model.output(0).get_shape()[2]


@pytest.mark.parametrize("rounding", ["ceil", "ceil_torch"])
def test_an_ir_pool_rounding_up_runs_where_its_window_fits_as_openvino_runs(
    tmp_path: Path, rounding: str
) -> None:
    # Rounding up makes one window of 3 rows from 2 (ceil((2 - 3)/2) + 1 = 1), but OpenVINO
    # refuses a window larger than the padded input: the domain must start at 3.
    import bcast

    def pool(x: Any) -> Any:
        return o.max_pool(x, [2], [1], [0], [0], [3], rounding)

    path = save_layer(tmp_path, pool, [1, 1, -1])
    height = load_graph(path).shapes["x"].dims[2].name
    compiled = ov.Core().compile_model(str(path), "CPU")
    runs = []
    for h in range(1, 8):
        try:
            compiled(np.ones((1, 1, h), np.float32))
            runs.append(h)
        except RuntimeError:
            pass
    assert runs == list(range(3, 8))
    report = bcast.check(path)
    (axis,) = [d for d in report.domain.dims if d.sizes != ((1, None),)]
    assert axis.sizes == ((3, None),)
    for h in range(1, 8):
        found = bcast.check(path, dims={height: h}).findings
        assert (not [f for f in found if f.severity.name == "ERROR"]) == (h in runs), h
