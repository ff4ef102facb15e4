"""Where ONNX's inference stops: bcast's own shapes (onnx/refine.py, onnx/values.py).

Expected shapes come from the ONNX operator definitions (Reshape's -1 is the element count
divided by the other dims; Slice clamps its end to the dim) and from onnxruntime running the
model at concrete sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import bcast
from bcast import Dim, Shape
from bcast.core.arithmetic import reshape_output
from bcast.core.shape import more_precise
from bcast.onnx.reader import read_onnx
from bcast.onnx.values import shape_tensor_values

F = TensorProto.FLOAT


@pytest.mark.parametrize(
    ("data", "target", "expected"),
    [
        pytest.param(
            "[batch,32,4,4]", [Dim.symbol("batch"), 32, -1], "[batch,32,16]", id="flatten"
        ),
        pytest.param("[2,3,4]", [0, -1], "[2,12]", id="zero-copies"),
        pytest.param("[N,6]", [-1, 3], None, id="symbol-does-not-cancel"),
        pytest.param("[2,3]", [-1, -1], None, id="two-minus-ones"),
        pytest.param("[2,3]", [4, -1], None, id="not-divisible"),
    ],
)
def test_reshape_output_resolves_minus_one_by_the_element_count(data, target, expected):
    got = reshape_output(Shape.parse(data), target, allowzero=False)
    assert (None if got is None else str(got)) == expected
    if expected is not None and "batch" not in expected:
        # The definition's answer, from NumPy's reshape of a concrete array.
        concrete = np.empty(Shape.parse(data).to_tuple())
        shape = [d if d else concrete.shape[i] for i, d in enumerate(target)]
        assert list(concrete.reshape(shape).shape) == [int(d) for d in got]


def test_more_precise_never_contradicts_what_is_known():
    assert str(more_precise(Shape.parse("[N,16]"), Shape.parse("[?,?]"))) == "[N,16]"
    assert more_precise(Shape.parse("[3,16]"), Shape.parse("[4,16]")) is None
    assert more_precise(Shape.parse("[3]"), Shape.parse("[?,?]")) is None


def _graph(nodes, inits=()):
    return helper.make_graph(nodes, "g", [], [], list(inits))


def test_a_huge_constant_of_shape_is_not_a_shape_tensor():
    # ConstantOfShape of 2**40 elements: evaluated as a shape tensor it would be a tuple of
    # 2**40 ints. It is left unknown, at once.
    size = numpy_helper.from_array(np.array([2**40], np.int64), "size")
    nodes = [helper.make_node("ConstantOfShape", ["size"], ["big"])]
    values = shape_tensor_values(_graph(nodes, [size]), {}, {"size": (2**40,)})
    assert "big" not in values


def test_a_reshape_target_past_what_a_dim_holds_is_left_to_the_checker():
    target = numpy_helper.from_array(np.array([2**62, -1], np.int64), "t")
    model = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Reshape", ["x", "t"], ["r"]),
                helper.make_node("Add", ["r", "r"], ["y"]),
            ],
            "g",
            [helper.make_tensor_value_info("x", F, [4, 4])],
            [helper.make_tensor_value_info("y", F, None)],
            [target],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    report = bcast.check(model)  # no exception: the Reshape's output stays unknown
    assert report.broadcasting == 1


def test_a_slice_of_a_buffer_to_an_inputs_length_is_min_of_both():
    # position_ids[:, :seq] of a [1,8] buffer, then Add with the input: runs for seq <= 8.
    ort = pytest.importorskip("onnxruntime")
    buffer = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(1, 8), "buf")
    consts = [
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Gather", ["sx", "one"], ["seq"], axis=0),
        helper.make_node("Slice", ["buf", "zero", "seq", "one"], ["pos"]),
        helper.make_node("Add", ["x", "pos"], ["y"], name="add"),
    ]
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("x", F, ["batch", "seq"])],
            [helper.make_tensor_value_info("y", F, None)],
            [buffer, *consts],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    (warning,) = bcast.check(model).findings
    assert (warning.node, warning.axis) == ("add", 1)
    assert "seq > 8" in warning.reason
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.ones((2, 8), np.float32)})
    with pytest.raises(Exception, match="add"):
        session.run(None, {"x": np.ones((2, 9), np.float32)})


def test_a_chain_of_forty_shape_reshape_links_is_sized_to_its_end():
    # Conv (kernel 1, stride 1: H stays H) -> Shape -> Reshape to that shape, 40 times: ONNX
    # sizes no Conv over a symbolic H, so every Reshape target comes from bcast's own Conv
    # shape. A target read when the walk reaches its Reshape sizes the whole chain in one
    # walk; evaluated after each walk, it took one walk per link and stopped short of 40.
    nodes, cur = [], "x"
    for i in range(40):
        nodes += [
            helper.make_node("Conv", [cur, "w"], [f"c{i}"], strides=[1]),
            helper.make_node("Shape", [f"c{i}"], [f"s{i}"]),
            helper.make_node("Reshape", [f"c{i}", f"s{i}"], [f"r{i}"]),
        ]
        cur = f"r{i}"
    weights = numpy_helper.from_array(np.full((4, 4, 1), 0.25, np.float32), "w")
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "chain",
            [helper.make_tensor_value_info("x", F, [1, 4, "h"])],
            [helper.make_tensor_value_info(cur, F, None)],
            [weights],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    graph = read_onnx(model)
    assert [str(s) for s in graph.nodes[-1].output_shapes] == ["[1,4,h]"]
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": np.ones((1, 4, 5), np.float32)})
    assert out.shape == (1, 4, 5)  # the runtime at h = 5


def test_a_small_constant_is_decoded_once_per_content_and_read_as_numpy_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reader asks for each Constant round after round (and a model repeats them)."""
    from bcast.onnx import protos

    calls: list[object] = []
    decode = protos._decode

    def counted(tensor: TensorProto) -> object:
        calls.append(tensor)
        return decode(tensor)

    monkeypatch.setattr(protos, "_decode", counted)
    protos._decoded.cache_clear()
    values = [np.array([2, -1, 5], np.int64), np.array([0.5, 2.0], np.float32), np.array(True)]
    for value in values:
        for _ in range(3):  # the same content, three protos
            found = protos.small_values(numpy_helper.from_array(value, "t"))
            assert found is not None
            assert found == (value.dtype.kind, tuple(value.reshape(-1).tolist()))
    assert len(calls) == len(values)


def test_a_small_tensor_with_more_data_than_its_dims_is_not_a_value() -> None:
    """A hostile [3] int64 tensor carrying 1 MiB: NumPy's reader refuses it; so does bcast."""
    from bcast.onnx.protos import small_values, tensor_ints

    tensor = TensorProto(
        name="t", data_type=TensorProto.INT64, dims=[3], raw_data=b"\x01" * (1 << 20)
    )
    with pytest.raises(ValueError):
        numpy_helper.to_array(tensor)
    assert small_values(tensor) is None and tensor_ints(tensor) is None
    negative = TensorProto(name="t", data_type=TensorProto.INT64, dims=[-3], int64_data=[1, 2, 3])
    assert small_values(negative) is None
