"""The shape arithmetic of spatial operators on symbolic dims, held against onnxruntime (issue 37).

Each model computes ``y = Op(x)`` from an input of symbolic height ``H`` and adds a constant
``z`` of a fixed size to it, so that onnxruntime runs exactly where ``Op``'s output has
``z``'s size. ``bcast check --dim H=h`` must report the ``Add`` at exactly the sizes where
onnxruntime fails: every expected value comes from onnxruntime running the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import bcast
from bcast.loading import load_graph
from bcast.models import Severity

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
helper, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto

INT_MAX = 2**63 - 1
ort.set_default_logger_severity(3)


def _model(
    nodes: Sequence[object],
    x_dims: Sequence[int | str],
    z_dims: Sequence[int],
    inits: Sequence[object] = (),
    opset: int = 17,
) -> object:
    """``out = y + z``: ``nodes`` compute ``y`` from ``x`` (float, symbolic ``H``)."""
    z = numpy_helper.from_array(np.ones(z_dims, np.float32), "z")
    add = helper.make_node("Add", ["y", "z"], ["out"], name="skip_add")
    graph = helper.make_graph(
        [*nodes, add],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_dims))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [z, *inits],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _ort_runs(model: object, shape: Sequence[int]) -> bool:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        session.run(None, {"x": np.ones(shape, np.float32)})
    except Exception:  # onnxruntime's refusal (Fail, InvalidArgument, RuntimeException)
        return False
    return True


def _bcast_runs(model: object, h: int) -> bool:
    return _accepted(model, {"H": h})


def _accepted(source: object, dims: dict[str, int]) -> bool:
    """Tell whether bcast's check finds no error at these sizes (the model runs there)."""
    report = bcast.check(source, dims=dims)
    return not any(f.severity is Severity.ERROR for f in report.findings)


def _openvino_ir(tmp_path: object, outputs: list[object], params: list[object]) -> tuple[str, Any]:
    """Save a model of OpenVINO nodes as IR; return its path and ``runs(arrays) -> bool``."""
    ov = pytest.importorskip("openvino")
    path = str(tmp_path / "m.xml")  # type: ignore[operator]
    ov.save_model(ov.Model(outputs, params, "m"), path)
    compiled = ov.Core().compile_model(path, "CPU")

    def runs(arrays: list[np.ndarray]) -> bool:
        try:
            compiled(arrays)
        except RuntimeError:  # OpenVINO's refusal (a negative dim, a pad past the mirror...)
            return False
        return True

    return path, runs


def _agree(model: object, shape_of: object, sizes: Sequence[int]) -> list[int]:
    """Check both at every size; return the sizes onnxruntime runs (the test's witness)."""
    runs = []
    for h in sizes:
        expected = _ort_runs(model, shape_of(h))  # type: ignore[operator]
        assert _bcast_runs(model, h) == expected, f"H={h}: onnxruntime runs: {expected}"
        if expected:
            runs.append(h)
    return runs


def _ints(name: str, values: Sequence[int]) -> object:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _floats(name: str, values: Sequence[float]) -> object:
    return numpy_helper.from_array(np.array(values, np.float32), name)


# -- ConvTranspose: the U-Net of the issue ---------------------------------------------------


def test_unet_skip_add_is_reported_for_odd_heights_as_onnxruntime_fails() -> None:
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class UNet(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, padding=1)
            self.d = nn.Conv2d(8, 8, 3, stride=2, padding=1)
            self.u = nn.ConvTranspose2d(8, 8, 2, stride=2)
            self.o = nn.Conv2d(8, 2, 1)

        def forward(self, x: object) -> object:
            a = torch.relu(self.a(x))
            return self.o(self.u(torch.relu(self.d(a))) + a)

    import io

    buffer = io.BytesIO()
    torch.onnx.export(
        UNet().eval(),
        (torch.randn(1, 3, 32, 32),),
        buffer,
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch", 2: "height", 3: "width"}},
        opset_version=17,
        dynamo=False,
    )
    model = onnx.load_from_string(buffer.getvalue())
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for h in (26, 27, 32, 33):
        try:
            session.run(None, {"x": np.ones((1, 3, h, 32), np.float32)})
            ran = True
        except Exception:
            ran = False
        report = bcast.check(model, dims={"height": h, "width": 32})
        reported = {f.node for f in report.findings if f.severity is Severity.ERROR}
        assert ran == (h % 2 == 0)  # onnxruntime: 2*((H - 1)//2 + 1) rows against H
        assert reported == (set() if ran else {"/Add"}), h
    symbolic = bcast.check(model)
    assert {f.node for f in symbolic.findings} == {"/Add"}  # fails for some heights
    assert not symbolic.unmodelled


@pytest.mark.parametrize(
    ("attrs", "z"),
    [
        pytest.param({"strides": [2]}, 11, id="k3-s2"),
        pytest.param({"strides": [2], "pads": [1, 1], "output_padding": [1]}, 12, id="pads-out"),
        pytest.param({"strides": [3], "dilations": [2]}, 20, id="dilated"),
        pytest.param({"strides": [2], "auto_pad": "SAME_UPPER"}, 12, id="same-upper"),
    ],
)
def test_conv_transpose_output_matches_onnxruntime(attrs: dict[str, object], z: int) -> None:
    w = numpy_helper.from_array(np.ones((1, 1, 3), np.float32), "w")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3], **attrs)
    model = _model([node], [1, 1, "H"], [1, 1, z], [w])
    assert _agree(model, lambda h: (1, 1, h), range(1, 12))


# -- pooling that rounds up --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "attrs", "z"),
    [
        pytest.param("MaxPool", {"kernel_shape": [2], "strides": [2]}, 4, id="max-k2-s2"),
        pytest.param(
            "MaxPool", {"kernel_shape": [2], "strides": [2], "pads": [1, 1]}, 5, id="max-pads"
        ),
        pytest.param(
            "AveragePool", {"kernel_shape": [3], "strides": [3], "pads": [1, 0]}, 3, id="avg"
        ),
        pytest.param(
            "MaxPool",
            {"kernel_shape": [2], "strides": [3], "dilations": [2], "pads": [1, 1]},
            3,
            id="max-dilated",
        ),
    ],
)
def test_ceil_mode_pooling_matches_onnxruntime(op: str, attrs: dict[str, object], z: int) -> None:
    node = helper.make_node(op, ["x"], ["y"], ceil_mode=1, **attrs)
    model = _model([node], [1, 1, "H"], [1, 1, z])
    assert _agree(model, lambda h: (1, 1, h), range(2, 14))


# -- Resize, Upsample, DepthToSpace, SpaceToDepth, Pad, Slice, Split, Tile, Range -------------


@pytest.mark.parametrize(
    ("scale", "z"),
    [
        pytest.param(2.0, 10, id="x2"),
        pytest.param(0.5, 3, id="half"),
        pytest.param(1.5, 7, id="x1.5"),
    ],
)
def test_resize_by_constant_scales_matches_onnxruntime(scale: float, z: int) -> None:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    model = _model([node], [1, 1, "H"], [1, 1, z], [_floats("scales", [1.0, 1.0, scale])])
    assert _agree(model, lambda h: (1, 1, h), range(1, 12))


def test_upsample_9_by_constant_scales_matches_onnxruntime() -> None:
    node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")
    model = _model([node], [1, 1, "H"], [1, 1, 8], [_floats("scales", [1.0, 1.0, 2.0])], opset=9)
    assert _agree(model, lambda h: (1, 1, h), range(1, 8)) == [4]


def test_depth_to_space_matches_onnxruntime() -> None:
    node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)
    model = _model([node], [1, 4, "H", 2], [1, 1, 6, 4])
    assert _agree(model, lambda h: (1, 4, h, 2), range(1, 6)) == [3]


@pytest.mark.parametrize(
    ("pads", "z"),
    [
        pytest.param([0, 0, 1, 0, 0, 2], 9, id="grow"),
        pytest.param([0, 0, -1, 0, 0, 0], 5, id="cut"),
    ],
)
def test_pad_by_constant_pads_matches_onnxruntime(pads: list[int], z: int) -> None:
    node = helper.make_node("Pad", ["x", "pads"], ["y"])
    model = _model([node], [1, 1, "H"], [1, 1, z], [_ints("pads", pads)])
    assert _agree(model, lambda h: (1, 1, h), range(1, 10))


@pytest.mark.parametrize(
    ("start", "end", "step", "z"),
    [
        pytest.param(1, INT_MAX, 1, 4, id="from-1"),
        pytest.param(0, -1, 1, 4, id="to-minus-1"),
        pytest.param(0, INT_MAX, 2, 3, id="step-2"),
        pytest.param(2, 6, 1, 3, id="clamped-end"),
        pytest.param(-3, INT_MAX, 1, 3, id="last-3"),
        pytest.param(-1, -INT_MAX - 1, -1, 5, id="reversed"),
    ],
)
def test_slice_with_constant_bounds_matches_onnxruntime(
    start: int, end: int, step: int, z: int
) -> None:
    inits = [_ints(n, [v]) for n, v in (("s", start), ("e", end), ("a", 2), ("t", step))]
    node = helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])
    model = _model([node], [1, 1, "H"], [1, 1, z], inits)
    assert _agree(model, lambda h: (1, 1, h), range(1, 10))


def test_split_in_num_outputs_parts_matches_onnxruntime() -> None:
    split = helper.make_node("Split", ["x"], ["y", "rest"], axis=2, num_outputs=2)
    model = _model([split], [1, 1, "H"], [1, 1, 4], opset=18)
    assert _agree(model, lambda h: (1, 1, h), range(2, 11)) == [2, 7, 8]  # 1 broadcasts


def test_tile_by_constant_repeats_matches_onnxruntime() -> None:
    node = helper.make_node("Tile", ["x", "r"], ["y"])
    model = _model([node], [1, 1, "H"], [1, 1, 9], [_ints("r", [1, 1, 3])])
    assert _agree(model, lambda h: (1, 1, h), range(1, 6)) == [3]


def test_range_to_a_dim_matches_onnxruntime() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], start=2, end=3),
        helper.make_node("Squeeze", ["shape"], ["limit"]),
        helper.make_node("Range", ["two", "limit", "three"], ["r"]),
        helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT),
    ]
    inits = [
        numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("two", 2), ("three", 3))
    ]
    model = _model(nodes, [1, 1, "H"], [3], inits)
    assert _agree(model, lambda h: (1, 1, h), range(1, 14)) == [
        3,
        4,
        5,
        9,
        10,
        11,
    ]  # one position broadcasts


def test_constant_of_shape_of_a_shape_chain_is_sized() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("ConstantOfShape", ["shape"], ["c"]),
        helper.make_node("Pad", ["c", "pads"], ["y"]),
    ]
    model = _model(nodes, [1, 1, "H"], [1, 1, 5], [_ints("pads", [0, 0, 1, 0, 0, 1])])
    assert _agree(model, lambda h: (1, 1, h), range(1, 6)) == [3]


def test_a_reshape_to_rows_of_7_is_sized_as_onnxruntime_sizes_it() -> None:
    # [1,H] to [-1,7]: H/7 rows where 7 divides H, added to 2 rows: H = 7 broadcasts, 14 fits
    node = helper.make_node("Reshape", ["x", "rows"], ["y"])
    model = _model([node], [1, "H"], [2, 7], [_ints("rows", [-1, 7])])
    assert _agree(model, lambda h: (1, h), range(1, 30)) == [7, 14]
    assert not bcast.check(model).domain.undecided


def _pad_to_multiple(of: int, mode: str) -> object:
    """``F.pad(x, (0, (of - H % of) % of), mode)`` as the TorchScript exporter writes it.

    The pads are computed from the shape (Mod, Sub, Mod), then laid out F.pad's way: the
    pairs extended by ConstantOfShape, reshaped to ``[-1, 2]``, the rows reversed by a
    Slice, transposed, flattened. ``out = y + z`` with ``z`` of 8 on H.
    """
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "two"], ["h"], axis=0),
        helper.make_node("Mod", ["h", "of"], ["rest"]),
        helper.make_node("Sub", ["of", "rest"], ["short"]),
        helper.make_node("Mod", ["short", "of"], ["p"]),
        helper.make_node("Concat", ["zero", "p"], ["pairs"], axis=0),
        helper.make_node("ConstantOfShape", ["four"], ["more"], value=_ints("v", [0])),
        helper.make_node("Concat", ["pairs", "more"], ["flat"], axis=0),
        helper.make_node("Reshape", ["flat", "rows"], ["grid"]),
        helper.make_node("Slice", ["grid", "back", "first", "axis0", "back"], ["turned"]),
        helper.make_node("Transpose", ["turned"], ["swapped"], perm=[1, 0]),
        helper.make_node("Reshape", ["swapped", "flat_shape"], ["pads"]),
        helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode),
    ]
    ones = {"of": of, "zero": 0, "four": 4, "back": -1, "first": -INT_MAX, "axis0": 0}
    inits = [_ints(name, [v]) for name, v in {**ones, "flat_shape": -1}.items()]
    inits += [_ints("rows", [-1, 2]), numpy_helper.from_array(np.array(2, np.int64), "two")]
    return _model(nodes, [1, 1, "H"], [1, 1, 8], inits)


def test_pads_computed_from_the_shape_are_sized_as_onnxruntime_pads() -> None:
    # Pad to a multiple of 4, then add 8 on H: onnxruntime runs H = 5..8 only
    model = _pad_to_multiple(4, "constant")
    assert _agree(model, lambda h: (1, 1, h), range(1, 14)) == [5, 6, 7, 8]
    report = bcast.check(model)
    assert not report.domain.undecided
    assert report.domain.dim("H").sizes == ((5, 8),)


def test_mirrored_pads_computed_from_the_shape_are_not_decided() -> None:
    # reflect needs each pad below H, which bcast requires of constant pads only: at H = 1
    # onnxruntime fails (a pad of 3 mirrors from 1 value); bcast names the Pad as undecided
    model = _pad_to_multiple(4, "reflect")
    assert not _ort_runs(model, (1, 1, 1)) and _ort_runs(model, (1, 1, 5))
    undecided = bcast.check(model).domain.undecided
    assert [(i.node, i.op) for i in undecided][:1] == [("Pad_12", "Pad")], undecided


# -- what the arithmetic requires of the input dims (ArithmeticRecord) -------------------------


def test_space_to_depth_requires_a_multiple_of_the_block_as_onnxruntime_does() -> None:
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)
    model = _model([node], [1, 1, "H", 4], [1, 4, 1, 2])
    assert _agree(model, lambda h: (1, 1, h, 4), range(1, 9)) == [2, 4, 6, 8]


def test_negative_pads_require_the_dim_they_cut_as_onnxruntime_does() -> None:
    # pads end -3 on H: onnxruntime refuses H < 3 ("Tensor shape.Size() must be >= 0")
    node = helper.make_node("Pad", ["x", "pads"], ["y"])
    model = _model([node], [1, 1, "H"], [1, 1, 1], [_ints("pads", [0, 0, 0, 0, 0, -3])])
    assert _agree(model, lambda h: (1, 1, h), range(1, 7)) == [3, 4, 5, 6]
    assert bcast.check(model).domain.dim("H").sizes == ((3, None),)
    # Pad-18's axes input: one pad cut at each end of H
    node = helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"])
    inits = [_ints("pads", [-1, -1]), _ints("axes", [2])]
    model = _model([node], [1, 1, "H"], [1, 1, 1], inits, opset=18)
    assert _agree(model, lambda h: (1, 1, h), range(1, 5)) == [2, 3, 4]


def test_reflected_pads_require_a_larger_dim_as_onnxruntime_does() -> None:
    # reflect takes its pads from inside the dim: 2 on each end of H needs H >= 3; edge none
    for mode, runs in (("reflect", [3, 4, 5]), ("edge", [1, 2, 3, 4, 5])):
        node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
        model = _model([node], [1, 1, "H"], [1, 1, 1], [_ints("pads", [0, 0, 2, 0, 0, 2])])
        assert _agree(model, lambda h: (1, 1, h), range(1, 6)) == runs, mode


@pytest.mark.parametrize(
    ("mode", "begin", "end", "runs"),
    [
        ("constant", [0, -1], [0, -2], [3, 4, 5]),  # cut 3
        ("reflect", [0, 2], [0, 1], [3, 4, 5]),  # mirrors 2: W > 2
        ("symmetric", [0, 2], [0, 1], [2, 3, 4, 5]),  # mirrors 2: W >= 2
    ],
)
def test_pads_of_an_ir_require_the_dim_as_openvino_does(tmp_path, mode, begin, end, runs) -> None:
    ov = pytest.importorskip("openvino")
    x = ov.opset12.parameter([1, -1], np.float32)
    limits = (ov.opset12.constant(np.array(v, np.int64)) for v in (begin, end))
    path, ir_runs = _openvino_ir(tmp_path, [ov.opset12.pad(x, *limits, mode)], [x])
    assert [w for w in range(1, 6) if ir_runs([np.ones((1, w), np.float32)])] == runs
    (axis,) = [d for d in bcast.check(path).domain.dims if d.sizes != ((1, None),)]
    assert axis.sizes == ((runs[0], None),)


@pytest.mark.parametrize(
    ("equation", "a", "b"),
    [
        ("ij,jk->ik", [2, "N"], ["M", 3]),  # a label's dims broadcast as NumPy's (1 with 3)
        ("...ij,...jk->...ik", ["N", 2, 2], ["M", 2, 3]),  # and the dims under ...
    ],
)
def test_einsum_labels_broadcast_as_onnxruntime_and_openvino_take_them(
    tmp_path, equation, a, b
) -> None:
    node = helper.make_node("Einsum", ["a", "b"], ["c"], equation=equation)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in (("a", a), ("b", b))],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ov = pytest.importorskip("openvino")
    ins = [ov.opset12.parameter([-1 if isinstance(d, str) else d for d in s], np.float32,
                                name=name) for name, s in (("a", a), ("b", b))]  # fmt: skip
    ir, ir_runs = _openvino_ir(tmp_path, [ov.opset12.einsum(ins, equation)], ins)
    ir_names = [f"{n}.{s.index(d)}" for n, s in (("a", a), ("b", b)) for d in s if d in ("N", "M")]
    for n, m in ((2, 2), (2, 3), (1, 3), (3, 1), (3, 3)):
        feeds = [np.ones([n if d == "N" else m if d == "M" else d for d in s], np.float32)
                 for s in (a, b)]  # fmt: skip
        try:
            session.run(None, dict(zip("ab", feeds, strict=True)))
            runs = True
        except Exception:  # onnxruntime's refusal
            runs = False
        assert _accepted(model, {"N": n, "M": m}) == runs, (n, m)
        assert ir_runs(feeds) == runs, (n, m)
        ir_dims = dict(zip(ir_names, (n, m), strict=True))  # the IR names a dim input.axis
        assert _accepted(ir, ir_dims) == runs


@pytest.mark.parametrize("opset", [11, 17])  # axes as an attribute, then as an input
def test_squeeze_requires_the_dims_it_removes_to_be_one_as_onnxruntime_does(opset) -> None:
    if opset >= 13:
        node, inits = helper.make_node("Squeeze", ["x", "axes"], ["y"]), [_ints("axes", [2])]
    else:
        node, inits = helper.make_node("Squeeze", ["x"], ["y"], axes=[2]), []
    model = _model([node], [1, 3, "H"], [1, 3], inits, opset=opset)
    assert _agree(model, lambda h: (1, 3, h), range(1, 4)) == [1]


def test_squeeze_of_an_ir_requires_the_dim_to_be_one_as_openvino_does(tmp_path) -> None:
    ov = pytest.importorskip("openvino")
    x = ov.opset12.parameter([2, -1, 3], np.float32, name="x")
    squeezed = ov.opset12.squeeze(x, ov.opset12.constant(np.array([1], np.int64)))
    path, ir_runs = _openvino_ir(tmp_path, [squeezed], [x])
    for w in (1, 2, 3):
        runs = ir_runs([np.ones((2, w, 3), np.float32)])
        assert _accepted(path, {"x.1": w}) == runs, w
        assert runs == (w == 1)


def test_top_k_of_a_constant_k_is_sized_and_requires_k_values_as_onnxruntime_does() -> None:
    # ONNX's inference leaves TopK over a symbolic axis unknown; bcast sizes it [1,1,5] and
    # requires H >= 5, where it said "not modelled: k, computed in the graph"
    node = helper.make_node("TopK", ["x", "k"], ["y", "indices"], axis=-1)
    model = _model([node], [1, 1, "H"], [1, 1, 5], [_ints("k", [5])])
    assert _agree(model, lambda h: (1, 1, h), range(1, 8)) == [5, 6, 7]
    report = bcast.check(model)
    assert report.domain.dim("H").sizes == ((5, None),)
    assert report.unmodelled == ()


def test_top_k_1_s_attribute_k_requires_k_values_as_onnxruntime_does() -> None:
    # TopK before opset 10 takes k as an attribute: H >= 5, as with a constant k input
    node = helper.make_node("TopK", ["x"], ["y", "indices"], axis=-1, k=5)
    model = _model([node], [1, 1, "H"], [1, 1, 5], opset=9)
    assert _agree(model, lambda h: (1, 1, h), range(1, 8)) == [5, 6, 7]
    assert bcast.check(model).domain.dim("H").sizes == ((5, None),)


@pytest.mark.parametrize(
    ("mode", "pads", "runs"),
    [
        ("constant", [0, 0, 0, 0, 0, -3], [3, 4, 5, 6]),  # cuts 3 from H
        ("reflect", [0, 0, 2, 0, 0, 1], [3, 4, 5, 6]),  # mirrors 2: H > 2
        ("edge", [0, 0, 2, 0, 0, 1], [1, 2, 3, 4, 5, 6]),
    ],
)
def test_pad_2_s_attribute_pads_require_the_dim_as_onnxruntime_does(
    mode: str, pads: list[int], runs: list[int]
) -> None:
    # Pad before opset 11 takes its pads as an attribute
    node = helper.make_node("Pad", ["x"], ["y"], pads=pads, mode=mode)
    model = _model([node], [1, 1, "H"], [1, 1, 1], opset=10)
    assert _agree(model, lambda h: (1, 1, h), range(1, 7)) == runs
    assert bcast.check(model).domain.dim("H").sizes == ((runs[0], None),)


def _channels_model(node: object, inits: Sequence[object], z_dims: Sequence[int]) -> object:
    return _model([node], [1, "H", 4, 4], z_dims, inits)


def test_channels_of_conv_instance_norm_and_depth_to_space_as_onnxruntime_takes_them() -> None:
    # H is X's channel count here: Conv's W [4, 3/group...], ConvTranspose's W [3, ...],
    # InstanceNormalization's and BatchNormalization's parameters [3], DepthToSpace's block
    # 2 (H a multiple of 4)
    ones = lambda name, shape: numpy_helper.from_array(np.ones(shape, np.float32), name)  # noqa: E731
    cases = [
        (helper.make_node("Conv", ["x", "w"], ["y"]), [ones("w", (4, 3, 1, 1))], [1, 4, 4, 4], [3]),
        (helper.make_node("Conv", ["x", "w"], ["y"], group=2), [ones("w", (4, 2, 1, 1))],
         [1, 4, 4, 4], [4]),
        (helper.make_node("ConvTranspose", ["x", "w"], ["y"]), [ones("w", (3, 2, 1, 1))],
         [1, 2, 4, 4], [3]),
        (helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"]),
         [ones("s", (3,)), ones("b", (3,))], [1, 1, 4, 4], [3]),
        (helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]),
         [ones(n, (3,)) for n in "sbmv"], [1, 1, 4, 4], [3]),
        (helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2), [], [1, 1, 8, 8], [4, 8]),
    ]  # fmt: skip
    for node, inits, z_dims, runs in cases:
        model = _channels_model(node, inits, z_dims)
        assert _agree(model, lambda h: (1, h, 4, 4), range(1, 9)) == runs, node.op_type


@pytest.mark.parametrize(("opset", "scale"), [(18, 2), (21, 4)])  # per group, then per channel
def test_group_normalization_as_onnxruntime_takes_it(opset, scale) -> None:
    # 2 groups: H (the channels) a multiple of 2; opset 21's scale and bias per channel (4)
    params = [numpy_helper.from_array(np.ones(scale, np.float32), n) for n in ("s", "b")]
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)
    model = _model([node], [1, "H", 4, 4], [1, 1, 4, 4], params, opset=opset)
    runs = [2, 4, 6, 8] if opset == 18 else [4]
    assert _agree(model, lambda h: (1, h, 4, 4), range(1, 9)) == runs
    assert bcast.check(model).unmodelled == ()


def test_grid_sample_needs_the_batch_of_x_as_onnxruntime_does() -> None:
    node = helper.make_node("GridSample", ["x", "grid"], ["y"])
    grid = helper.make_tensor_value_info("grid", TensorProto.FLOAT, ["M", 2, 2, 2])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 4, 4]), grid],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n, m in ((1, 1), (1, 2), (2, 1), (2, 2)):
        feeds = {"x": np.ones((n, 1, 4, 4), np.float32), "grid": np.zeros((m, 2, 2, 2), np.float32)}
        try:
            session.run(None, feeds)
            runs = True
        except Exception:  # onnxruntime's refusal
            runs = False
        assert _accepted(model, {"N": n, "M": m}) == runs, (n, m)
        assert runs == (n == m)


def test_depth_to_space_of_an_ir_requires_a_multiple_of_the_block_as_openvino_does(tmp_path):
    ov = pytest.importorskip("openvino")
    x = ov.opset12.parameter([1, -1, 4, 4], np.float32, name="x")
    path, ir_runs = _openvino_ir(tmp_path, [ov.opset12.depth_to_space(x, "blocks_first", 2)], [x])
    for c in range(1, 9):
        runs = ir_runs([np.ones((1, c, 4, 4), np.float32)])
        assert _accepted(path, {"x.1": c}) == runs, c
        assert runs == (c % 4 == 0)


def test_split_sizes_must_sum_to_the_dim_as_onnxruntime_requires() -> None:
    node = helper.make_node("Split", ["x", "sizes"], ["y", "rest"], axis=2)
    model = _model([node], [1, 1, "H"], [1, 1, 1], [_ints("sizes", [2, 3])], opset=13)
    assert _agree(model, lambda h: (1, 1, h), range(1, 9)) == [5]


def test_split_into_num_outputs_needs_a_last_part_of_at_least_0_as_onnxruntime_does() -> None:
    # Split-18 num_outputs=3: parts of ceil(H/3) and a last one of what they leave; H = 1
    # would make it -1, and onnxruntime refuses it
    node = helper.make_node("Split", ["x"], ["y", "b", "c"], axis=2, num_outputs=3)
    model = _model([node], [1, 1, "H"], [1, 1, 1], opset=18)
    assert _agree(model, lambda h: (1, 1, h), range(1, 8)) == [2, 3, 4, 5, 6, 7]


def test_split_into_equal_parts_requires_a_multiple_as_onnxruntime_does() -> None:
    node = helper.make_node("Split", ["x"], ["y", "b", "c"], axis=2)
    model = _model([node], [1, 1, "H"], [1, 1, 1], opset=13)
    assert _agree(model, lambda h: (1, 1, h), range(1, 10)) == [3, 6, 9]


# -- OpenVINO Interpolate on symbolic dims ---------------------------------------------------


def _ir_interpolate(tmp_path: object, how: str) -> tuple[str, Any]:
    """A pooled map upsampled back and added to its input (a U-Net skip), as an IR.

    ``how``: Interpolate-11 by scales, -11 by sizes read from the input's shape, or -4 by
    scales (its sizes input present but unused). Each run compiles afresh.
    """
    ov = pytest.importorskip("openvino")
    from openvino.utils.node_factory import NodeFactory

    o11, o4 = ov.opset11, ov.opset4
    x = o11.parameter([1, 2, -1, -1], np.float32, name="x")
    pooled = o11.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2])
    axes = o11.constant(np.array([2, 3], np.int64))
    if how == "scales":
        scales = o11.constant(np.array([2.0, 2.0], np.float32))
        up = o11.interpolate(pooled.output(0), scales, "nearest", "scales", axes=axes)
    elif how == "sizes":
        hw = o11.gather(o11.shape_of(x), o11.constant(np.array([2, 3], np.int64)), 0)
        up = o11.interpolate(pooled.output(0), hw, "nearest", "sizes", axes=axes)
    else:
        attrs = {"mode": "nearest", "shape_calculation_mode": "scales",
                 "coordinate_transformation_mode": "asymmetric"}  # fmt: skip
        sizes = o4.constant(np.array([1, 1], np.int64))
        scales = o4.constant(np.array([2.0, 2.0], np.float32))
        up = NodeFactory("opset4").create("Interpolate", [pooled.output(0), sizes, scales, axes],
                                          attrs)  # fmt: skip
    path = str(tmp_path / f"{how}.xml")  # type: ignore[operator]
    ov.save_model(ov.Model([o11.add(up, x)], [x], "m"), path)

    def runs(h: int) -> bool:
        try:
            ov.Core().compile_model(path, "CPU")(np.ones((1, 2, h, 6), np.float32))
        except RuntimeError:  # OpenVINO's refusal
            return False
        return True

    return path, runs


@pytest.mark.parametrize(("how", "sizes"), [("scales", [2, 4, 6, 8]), ("v4", [2, 4, 6, 8]),
                                             ("sizes", [2, 3, 4, 5, 6, 7, 8, 9])])  # fmt: skip
def test_an_ir_interpolate_is_sized_as_openvino_sizes_it(tmp_path, how, sizes) -> None:
    # by scales: 2*(H//2) rows against H, equal only for even H (H = 1: the pool's window)
    path, ir_runs = _ir_interpolate(tmp_path, how)
    assert [h for h in range(1, 10) if ir_runs(h)] == sizes
    report = bcast.check(path)
    assert not report.domain.undecided, report.domain.undecided
    assert [h for h in range(1, 10) if _accepted(path, {"x.2": h, "x.3": 6})] == sizes


def _strided_ir(tmp_path, make_cut, other) -> tuple[str, list[int]]:
    """Save ``make_cut(opset, x) + ones(other)`` for x of ``[1,H,8]`` as IR; return its path
    and the H in 1..10 at which OpenVINO runs it."""
    ov = pytest.importorskip("openvino")
    o = ov.opset13
    x = o.parameter([1, -1, 8], np.float32, name="x")
    path = str(tmp_path / "strided.xml")
    added = o.add(make_cut(o, x), o.constant(np.ones(other, np.float32)))
    ov.save_model(ov.Model([added], [x]), path)

    def ir_runs(h: int) -> bool:
        try:
            ov.Core().compile_model(path, "CPU")(np.ones((1, h, 8), np.float32))
        except RuntimeError:
            return False
        return True

    return path, [h for h in range(1, 11) if ir_runs(h)]


@pytest.mark.parametrize(
    ("begin_mask", "end_mask", "runs"),
    [
        ([1, 0, 1], [1, 0, 1], [3, 4, 7, 8]),  # x[:, 1:-1:2]: 1 or 3 rows against 3
        ([1, 1, 1], [1, 1, 1], [1, 2, 5, 6]),  # x[:, ::2]: begin and end ignored
    ],
)
def test_an_ir_strided_slice_is_sized_as_openvino_sizes_it(
    tmp_path, begin_mask, end_mask, runs
) -> None:
    path, ran = _strided_ir(
        tmp_path,
        lambda o, x: o.strided_slice(
            x, np.array([0, 1, 0], np.int64), np.array([0, -1, 0], np.int64),
            np.array([1, 2, 1], np.int64), begin_mask, end_mask),
        (1, 3, 8),
    )  # fmt: skip
    assert ran == runs
    assert not bcast.check(path).domain.undecided
    assert [h for h in range(1, 11) if _accepted(path, {"x.1": h})] == runs


STRIDED_MASKS = [  # begin, end, masks (begin, end, new axis, shrink, ellipsis), the constant
    ("x[..., -1]", [0, -1], [0, 0], ([1, 0], [1, 0], [0, 0], [0, 1], [1, 0]), (1, 3), [1, 3]),
    ("x[:, 2]", [0, 2], [0, 0], ([1, 0], [1, 0], [0, 0], [0, 1], [0, 0]), (1, 8),
     list(range(1, 11))),  # OpenVINO clamps the index: any H
    ("x[:, None, 1:]", [0, 0, 1], [0, 0, 0], ([1, 0, 0], [1, 0, 1], [0, 1, 0], [0, 0, 0],
     [0, 0, 0]), (1, 1, 3, 8), [2, 4]),  # h - 1 rows against 3
    ("x[None, ..., 1:, 2]", [0, 0, 1, 2], [0, 0, 0, 0], ([1, 1, 0, 0], [1, 1, 1, 0],
     [1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 0]), (1, 1, 3), [2, 4]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("label", "begin", "end", "masks", "other", "runs"),
    STRIDED_MASKS,
    ids=[m[0] for m in STRIDED_MASKS],
)
def test_an_ir_strided_slice_with_new_shrunk_and_ellipsis_axes_is_openvinos(
    tmp_path, label, begin, end, masks, other, runs
) -> None:
    # The masks place the entries (bcast.core.spatial.strided_axes). A shrunk axis's index
    # out of its dim is clamped by OpenVINO (x[:, 2] at H = 1 reads row 0), not refused.
    path, ran = _strided_ir(
        tmp_path,
        lambda o, x: o.strided_slice(x, np.array(begin, np.int64), np.array(end, np.int64),
                                     np.ones(len(begin), np.int64), *masks),
        other,
    )  # fmt: skip
    assert ran == runs, label
    graph = load_graph(path)
    (node,) = [n for n in graph.nodes if n.op == "StridedSlice"]
    assert not node.unmodelled and node.output_shapes[0].rank == len(other), node
    assert not bcast.check(path).domain.undecided
    assert [h for h in range(1, 11) if _accepted(path, {"x.1": h})] == runs, label
