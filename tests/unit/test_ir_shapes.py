"""bcast's own IR shapes against OpenVINO's real output shapes.

OpenVINO's inference gives a Convolution of a ``?`` height as ``1..``; the IR reader writes
the window arithmetic as a dim expression of the input's dims (`bcast.openvino.ir_shapes`).
Each expression is evaluated at many sizes and held against the shape OpenVINO infers when
the same IR is reshaped to those sizes (and to its refusal where the window does not fit).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ov = pytest.importorskip("openvino")
o8 = pytest.importorskip("openvino.opset8")

from ir_layers import save_layer  # noqa: E402

import bcast  # noqa: E402
from bcast.loading import load_graph  # noqa: E402


def _weights(*shape: int) -> Any:
    return o8.constant(np.ones(shape, np.float32))


def _conv(w: tuple[int, ...], strides: list[int], begin: list[int], end: list[int],
          dilations: list[int], pad: str = "explicit") -> Callable[[Any], Any]:  # fmt: skip
    make = o8.group_convolution if len(w) == 5 else o8.convolution
    return lambda x: make(x, _weights(*w), strides, begin, end, dilations, pad)


WINDOWS: list[tuple[str, Callable[[Any], Any], int]] = [
    ("conv 7x7 /2 pads 3", _conv((4, 3, 7, 7), [2, 2], [3, 3], [3, 3], [1, 1]), 4),
    ("conv 3x5 /2,3 dilated", _conv((4, 3, 3, 5), [2, 3], [0, 1], [2, 1], [2, 1]), 4),
    ("conv 8x8 /8", _conv((4, 3, 8, 8), [8, 8], [0, 0], [0, 0], [1, 1]), 4),
    ("conv same_upper", _conv((4, 3, 3, 3), [2, 2], [0, 0], [0, 0], [1, 1], "same_upper"), 4),
    ("conv valid", _conv((4, 3, 3, 3), [1, 1], [5, 5], [5, 5], [1, 1], "valid"), 4),
    ("group conv", _conv((3, 2, 1, 3, 3), [2, 2], [1, 1], [1, 1], [1, 1]), 6),
    ("max pool dilated", lambda x: o8.max_pool(x, [2, 2], [2, 1], [1, 1], [1, 1], [3, 3]), 3),
    (
        "avg pool same_lower",
        lambda x: o8.avg_pool(x, [2, 2], [0, 0], [0, 0], [2, 3], True, "floor", "same_lower"),
        3,
    ),
]


@pytest.mark.parametrize(("label", "make", "channels"), WINDOWS, ids=[w[0] for w in WINDOWS])
def test_ir_window_output_dims_are_openvinos_at_every_size(
    tmp_path: Path, label: str, make: Callable[[Any], Any], channels: int
) -> None:
    path = save_layer(tmp_path, make, [-1, 3, -1, -1], all_outputs=False)
    graph = load_graph(path)
    (node,) = [n for n in graph.nodes if n.op not in ("Parameter", "Const", "Result")]
    out = node.output_shapes[0]
    assert str(out.dims[1]) == str(channels)
    exprs = [graph.expressions[d.name] for d in out.dims[2:]]
    height, width = (d.name for d in graph.shapes["x"].dims[2:])
    checked = 0
    for h, w in [(1, 1), (2, 9), (9, 9), (10, 13), (16, 16), (17, 31), (33, 8), (64, 65)]:
        model = ov.Core().read_model(path)
        sizes = [e.evaluate({height: h, width: w}) for e in exprs]
        try:
            model.reshape({"x": [1, 3, h, w]})
        except Exception:  # the window does not fit: bcast's size is below 1 there
            assert min(sizes) < 1, (h, w, sizes)
            continue
        assert sizes == list(model.output(0).get_shape())[2:], (h, w)
        checked += 1
    assert checked >= 5


def test_a_convolution_chain_to_a_position_add_gives_the_image_size(tmp_path: Path) -> None:
    # Conv 4x4 /4 -> Reshape [0,4,-1] -> Transpose -> Concat a class token -> + [1,5,4]:
    # (h//4)*(w//4) + 1 must be 5, so h, w in 8..11 (or 4..7 x 16..19 ...): each of h and
    # w in 4..11 or 16..19. OpenVINO
    # decides each point; bcast's first failure names the node it refuses at.
    x = o8.parameter(ov.PartialShape([1, 3, -1, -1]), np.float32, name="x")
    conv = o8.convolution(x, _weights(4, 3, 4, 4), [4, 4], [0, 0], [0, 0], [1, 1], name="conv")
    flat = o8.reshape(conv, o8.constant(np.array([0, 4, -1], np.int64)), True, name="flat")
    tokens = o8.transpose(flat, o8.constant(np.array([0, 2, 1], np.int64)), name="tokens")
    cls = o8.constant(np.zeros((1, 1, 4), np.float32))
    cat = o8.concat([cls, tokens], 1, name="cat")
    add = o8.add(cat, o8.constant(np.zeros((1, 5, 4), np.float32)), name="pos")
    path = tmp_path / "chain.xml"
    ov.save_model(ov.Model([add.output(0)], [x], "m"), str(path), compress_to_fp16=False)
    domain = bcast.check(str(path)).domain
    assert (domain.dim("x.2").text, domain.dim("x.3").text) == ("4..11, 16..19", "4..11, 16..19")
    (tied,) = domain.relations
    assert tied.imposed[0].node == "pos"
    assert ((8, 11), ((8, 11),)) in tied.boxes
    for h, w in [(8, 8), (11, 11), (12, 8), (7, 8), (4, 16), (4, 20), (3, 16)]:
        failure = domain.first_failure({"x.2": h, "x.3": w})
        model = ov.Core().read_model(str(path))
        try:
            model.reshape({"x": [1, 3, h, w]})
            error = None
        except Exception as err:  # OpenVINO's own error types
            error = str(err)
        if failure is None:
            assert error is None, (h, w, error)
        else:
            assert error is not None and f" {failure.node} (" in error, (h, w, failure, error)


BAD_ATTRIBUTES = [
    {"strides": "a, b"},
    {"strides": "0, 0"},
    {"pads_begin": "1"},
    {"dilations": "-1, 1"},
    {"auto_pad": "sideways"},
    {"rounding_type": "sideways"},  # ceil and ceil_torch are modelled (ir_spatial)
]


@pytest.mark.parametrize("bad", BAD_ATTRIBUTES, ids=lambda d: str(d))
def test_a_window_attribute_bcast_cannot_read_leaves_openvinos_shape(bad: dict) -> None:
    # Never a guess (a malformed stride read as 1): no expression, OpenVINO's dim stays.
    from bcast.models import Graph, Node
    from bcast.openvino.ir_shapes import ir_shapes

    good = {"strides": "2, 2", "pads_begin": "0, 0", "pads_end": "0, 0", "dilations": "1, 1"}
    graph = Graph("m.xml", "openvino")
    node = Node("pool", "MaxPool", ("x",), ("y",))
    shapes = [bcast.Shape.parse("[n,3,h,w]")]
    assert ir_shapes(node, {**good, "kernel": "2, 2"}, shapes, graph) is not None
    found = ir_shapes(node, {**good, "kernel": "2, 2", **bad}, shapes, graph)
    if found is not None:  # a shape, but no spatial dim named by a guess
        (shape,) = set(found)
        assert shape is None or all(d.name is None for d in shape.dims[2:])


def test_huge_and_broken_ir_values_give_no_shape_and_no_error() -> None:
    from bcast.models import Graph, Node
    from bcast.openvino.ir_shapes import ir_shapes, track_values

    graph = Graph("m.xml", "openvino", constants={"t": (2**62, 2**62, -1), "p": (5, 0)})
    reshape = Node("r", "Reshape", ("x", "t"), ("y",))
    assert ir_shapes(reshape, {}, [bcast.Shape.parse("[n,4]")], graph) in (None, [None])
    transpose = Node("t", "Transpose", ("x", "p"), ("y",))  # not a permutation
    assert ir_shapes(transpose, {}, [bcast.Shape.parse("[n,4]")], graph) == [None]
    tensors: dict = {"i": (7,), "a": (0,), "s": (1, 2)}
    track_values(Node("g", "Gather", ("s", "i", "a"), ("g",)), [], tensors)  # out of range
    assert "g" not in tensors
