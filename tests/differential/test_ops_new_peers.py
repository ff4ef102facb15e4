"""The operators of issue 38 against onnxruntime, the ONNX reference evaluator and OpenVINO.

Expected values are what the peers compute on one-node models (shapes drawn by hypothesis,
zero-size dims and rank 0 included). Where a peer departs from the operator text, a named
test shows its answer next to bcast's (docs/peer-differences.md, issue-38 section).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnx_nodes import assert_same, broadcastable_operands, elements, run_ort, run_reference

import bcast.onnx
from bcast import BroadcastError, ops

EXAMPLES = settings(max_examples=25, deadline=None)

ONNX_OP = {
    "bitwise_and": "BitwiseAnd",
    "bitwise_or": "BitwiseOr",
    "bitwise_xor": "BitwiseXor",
    "greater_or_equal": "GreaterOrEqual",
    "less_or_equal": "LessOrEqual",
}
INTS = [np.int8, np.uint8, np.int32, np.int64, np.uint64]


def _ids(d: Any) -> str:
    return np.dtype(d).name


# -- binary operators: onnxruntime and the reference ----------------------------------------


@pytest.mark.parametrize("op", ["bitwise_and", "bitwise_or", "bitwise_xor"])
@pytest.mark.parametrize("dtype", INTS, ids=_ids)
@EXAMPLES
@given(data=st.data())
def test_bitwise_matches_onnxruntime(op: str, dtype: Any, data: Any) -> None:
    a, b = data.draw(broadcastable_operands([dtype, dtype]))
    assert_same(getattr(ops, op)(a, b), run_ort(ONNX_OP[op], [a, b], dtype))


@pytest.mark.parametrize("op", ["greater_or_equal", "less_or_equal"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8], ids=_ids)
@EXAMPLES
@given(data=st.data())
def test_ordered_comparisons_match_onnxruntime(op: str, dtype: Any, data: Any) -> None:
    small = st.integers(0, 3).map(float) if np.dtype(dtype).kind == "f" else st.integers(0, 3)
    nan = st.one_of(small, st.just(float("nan"))) if np.dtype(dtype).kind == "f" else small
    a, b = data.draw(broadcastable_operands([dtype, dtype], elements_for=[nan, small]))
    assert_same(getattr(ops, op)(a, b), run_ort(ONNX_OP[op], [a, b], bool))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.uint64], ids=_ids)
@pytest.mark.parametrize("fmod", [0, 1])
@EXAMPLES
@given(data=st.data())
def test_integer_mod_matches_onnxruntime_and_the_reference(
    fmod: int, dtype: Any, data: Any
) -> None:
    a, b = data.draw(
        broadcastable_operands(
            [dtype, dtype], elements_for=[elements(dtype), elements(dtype, nonzero=True)]
        )
    )
    ours = ops.mod(a, b, fmod=fmod)
    assert_same(ours, run_ort("Mod", [a, b], dtype, fmod=fmod))
    assert_same(ours, run_reference("Mod", [a, b], dtype, fmod=fmod))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=_ids)
@EXAMPLES
@given(data=st.data())
def test_float_mod_matches_onnxruntime_fmod_and_the_reference_floor(dtype: Any, data: Any) -> None:
    a, b = data.draw(broadcastable_operands([dtype, dtype]))
    with np.errstate(all="ignore"):
        assert_same(ops.mod(a, b, fmod=1), run_ort("Mod", [a, b], dtype, fmod=1))
        assert_same(ops.mod(a, b), run_reference("Mod", [a, b], dtype, fmod=0))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64], ids=_ids)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@EXAMPLES
@given(data=st.data())
def test_unsigned_bitshift_matches_onnxruntime(direction: str, dtype: Any, data: Any) -> None:
    width = np.dtype(dtype).itemsize * 8
    values = st.integers(0, int(np.iinfo(dtype).max))
    counts = st.integers(0, width - 1)
    a, b = data.draw(broadcastable_operands([dtype, dtype], elements_for=[values, counts]))
    assert_same(
        ops.bit_shift(a, b, direction=direction),
        run_ort("BitShift", [a, b], dtype, direction=direction),
    )


# -- QuantizeLinear / DequantizeLinear: per tensor, per axis, blocked ------------------------


@st.composite
def quantization_case(draw: Any) -> tuple[np.ndarray, np.ndarray, int, int]:
    """x float32 of rank 1..4, a scale per tensor, per axis or blocked; (x, scale, axis, block)."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    kind = draw(st.sampled_from(["tensor", "axis", "block"]))
    block = 0
    if kind == "tensor":
        scale_shape: tuple[int, ...] = ()
    elif kind == "axis":
        scale_shape = (shape[axis],)
    else:
        block = draw(st.integers(1, shape[axis]))
        scale_shape = tuple(
            -(-d // block) if k == axis % len(shape) else d for k, d in enumerate(shape)
        )
    if block and all(d == 1 for d in scale_shape):
        # one element: per tensor for the reference and bcast; onnxruntime refuses a
        # block_size with it ("block_size must be 0 for per-tensor quantization")
        block, scale_shape = 0, ()
    x = draw(hnp.arrays(np.float32, shape, elements=st.floats(-300, 300, width=32)))
    scale = draw(
        hnp.arrays(np.float32, scale_shape, elements=st.sampled_from([0.5, 1.0, 2.0, 0.1, 3.0]))
    )
    return x, scale, axis, block


QUANTIZED = [np.int8, np.uint8, np.int16, np.uint16]


@pytest.mark.parametrize("qtype", QUANTIZED, ids=_ids)
@EXAMPLES
@given(case=quantization_case(), data=st.data())
def test_quantize_matches_onnxruntime_and_the_reference(qtype: Any, case: Any, data: Any) -> None:
    x, scale, axis, block = case
    info = np.iinfo(qtype)
    zero_point = data.draw(
        hnp.arrays(qtype, scale.shape, elements=st.integers(int(info.min), min(int(info.max), 300)))
    )
    attrs = {"axis": axis, "block_size": block}
    ours = ops.quantize_linear(x, scale, zero_point, axis=axis, block_size=block)
    assert_same(ours, run_ort("QuantizeLinear", [x, scale, zero_point], qtype, **attrs))
    assert_same(ours, run_reference("QuantizeLinear", [x, scale, zero_point], qtype, **attrs))


@pytest.mark.parametrize("qtype", [*QUANTIZED, np.int32], ids=_ids)
@EXAMPLES
@given(case=quantization_case(), data=st.data())
def test_dequantize_matches_onnxruntime_and_the_reference(qtype: Any, case: Any, data: Any) -> None:
    x_float, scale, axis, block = case
    info = np.iinfo(qtype)
    low, high = max(int(info.min), -1000), min(int(info.max), 1000)
    x = data.draw(hnp.arrays(qtype, x_float.shape, elements=st.integers(low, high)))
    inputs = [x, scale]
    if qtype != np.int32:  # int32 has no zero point
        inputs.append(data.draw(hnp.arrays(qtype, scale.shape, elements=st.integers(low, high))))
    attrs = {"axis": axis, "block_size": block}
    ours = ops.dequantize_linear(*inputs, axis=axis, block_size=block)
    assert_same(ours, run_ort("DequantizeLinear", inputs, np.float32, **attrs))
    assert_same(ours, run_reference("DequantizeLinear", inputs, np.float32, **attrs))


NARROW = ["int4", "uint4", "int2", "uint2", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"]
NARROW_PROTO = {
    "int4": TensorProto.INT4,
    "uint4": TensorProto.UINT4,
    "int2": TensorProto.INT2,
    "uint2": TensorProto.UINT2,
    "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
    "float8_e5m2": TensorProto.FLOAT8E5M2,
    "float4_e2m1fn": TensorProto.FLOAT4E2M1,
}


def _reference_q(op: str, inputs: list[np.ndarray], out: int, **attrs: Any) -> np.ndarray:
    """Run a one-node opset-25 model in the reference; ml_dtypes inputs keep their type."""
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "q",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), None)
            for n, v in zip(names, inputs, strict=True)
        ],
        [helper.make_tensor_value_info("y", out, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    feeds = dict(zip(names, inputs, strict=True))
    return np.asarray(ReferenceEvaluator(model).run(None, feeds)[0])


@pytest.mark.parametrize("name", NARROW)
@pytest.mark.parametrize("saturate", [1, 0])
@EXAMPLES
@given(case=quantization_case())
def test_narrow_quantize_and_dequantize_match_the_reference(
    name: str, saturate: int, case: Any
) -> None:
    x, scale, axis, block = case
    x = x * np.float32(200)  # reach past float8 e4m3fn's 448 and every integer range
    proto = NARROW_PROTO[name]
    attrs = {"axis": axis, "block_size": block, "output_dtype": proto, "saturate": saturate}
    with np.errstate(all="ignore"):
        expected = _reference_q("QuantizeLinear", [x, scale], proto, **attrs)
        ours = ops.quantize_linear(
            x, scale, axis=axis, block_size=block, output_dtype=name, saturate=bool(saturate)
        )
    assert ours.dtype == expected.dtype == np.dtype(getattr(ml_dtypes, name))
    np.testing.assert_array_equal(ours.astype(np.float32), expected.astype(np.float32))
    back = _reference_q(
        "DequantizeLinear", [ours, scale], TensorProto.FLOAT, axis=axis, block_size=block
    )
    assert_same(ops.dequantize_linear(ours, scale, axis=axis, block_size=block), back)


# -- where a peer departs from the operator text --------------------------------------------


def test_integer_mod_by_zero_onnxruntime_fails_reference_gives_zero() -> None:
    a, b = np.array([5, -5], np.int32), np.array([0, 0], np.int32)
    for fmod in (0, 1):
        with pytest.raises(
            onnxruntime.capi.onnxruntime_pybind11_state.Fail, match="modulo by zero"
        ):
            run_ort("Mod", [a, b], np.int32, fmod=fmod)
        with np.errstate(all="ignore"):
            assert run_reference("Mod", [a, b], np.int32, fmod=fmod).tolist() == [0, 0]
        with pytest.raises(ZeroDivisionError, match="mod: integer modulo by zero"):
            ops.mod(a, b, fmod=fmod)


def test_float_mod_fmod_0_is_defined_where_onnxruntime_refuses_it_before_opset_28() -> None:
    a, b = np.array([5.5, -5.5, 0.0], np.float32), np.array([2.0, 2.0, -3.0], np.float32)
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.Fail, match="fmod"):
        run_ort("Mod", [a, b], np.float32, fmod=0)
    ours = ops.mod(a, b)
    assert ours.tolist() == [1.5, 0.5, 0.0]  # Mod-28: A - floor(A / B) * B
    assert np.signbit(ours[2])  # Mod-28: +0 % negative is -0 (the sign of B)
    assert_same(ours, run_reference("Mod", [a, b], np.float32, fmod=0))
    node = helper.make_node("Mod", ["a", "b"], ["y"], fmod=0)
    with pytest.raises(ValueError, match="requires fmod=1"):  # Mod-13's text, as onnxruntime
        bcast.onnx.backend.run_node(node, [a, b], opset_version=21)
    assert_same(bcast.onnx.backend.run_node(node, [a, b], opset_version=28)[0], ours)


def test_bitshift_follows_opset_28_signed_types_and_wide_counts() -> None:
    x, counts = np.array([-16, 16, -1, 5], np.int8), np.array([2, 9, 8, -1], np.int8)
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidGraph):
        run_ort("BitShift", [x, counts], np.int8, direction="RIGHT")
    # BitShift-28: arithmetic right shift; a count >= 8 or < 0 gives -1 for a negative
    # value shifted right, 0 otherwise.
    assert ops.bit_shift(x, counts, direction="right").tolist() == [-4, 0, -1, 0]
    assert ops.bit_shift(x, counts).tolist() == [-64, 0, 0, 0]
    node = helper.make_node("BitShift", ["x", "c"], ["y"], direction="RIGHT")
    with pytest.raises(TypeError, match="unsigned integers only"):  # BitShift-11's types
        bcast.onnx.backend.run_node(node, [x, counts], opset_version=21)
    wide = np.array([1, 1], np.uint8), np.array([8, 9], np.uint8)
    assert run_ort("BitShift", list(wide), np.uint8, direction="LEFT").tolist() == [0, 0]
    assert ops.bit_shift(*wide).tolist() == [0, 0]


def test_quantize_nan_gives_the_low_end_as_both_peers() -> None:
    x = np.array([np.nan, 1.0], np.float32)
    for qtype in (np.int8, np.uint8):
        inputs = [x, np.array(1.0, np.float32), np.array(0, qtype)]
        expected = run_ort("QuantizeLinear", inputs, qtype)
        with np.errstate(all="ignore"):
            assert_same(run_reference("QuantizeLinear", inputs, qtype), expected)
        assert_same(ops.quantize_linear(*inputs), expected)
        assert expected[0] == np.iinfo(qtype).min


def test_float8_zero_point_is_used_by_the_formula_where_the_reference_skips_or_refuses_it() -> None:
    f8 = ml_dtypes.float8_e4m3fn
    x, scale, zp = np.array([1.0, 1e4], np.float32), np.array(1.0, np.float32), np.array(2, f8)
    proto = TensorProto.FLOAT8E4M3FN
    reference = _reference_q("QuantizeLinear", [x, scale, zp], proto)
    assert reference.astype(np.float32).tolist() == [1.0, 448.0]  # the zero point skipped
    ours = ops.quantize_linear(x, scale, zp)
    assert ours.astype(np.float32).tolist() == [3.0, 448.0]  # x / scale + 2, saturated
    q = np.array([1.0, 4.0], f8)
    with pytest.raises(ValueError, match="should be zero for float8"):
        _reference_q("DequantizeLinear", [q, scale, zp], TensorProto.FLOAT)
    assert ops.dequantize_linear(q, scale, zp).tolist() == [-1.0, 2.0]


def test_quantize_with_a_float16_scale_divides_in_float32() -> None:
    x = np.array([1000.3, 3.3, -7.25], np.float32)
    scale, zp = np.array(0.1, np.float16), np.array(0, np.int16)
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.Fail, match="T1"):
        run_ort("QuantizeLinear", [x, scale, zp], np.int16)
    expected = run_reference("QuantizeLinear", [x, scale, zp], np.int16)
    assert_same(ops.quantize_linear(x, scale, zp), expected)


def test_a_scale_that_fits_no_granularity_is_a_broadcast_error() -> None:
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(BroadcastError, match="1-D tensor of x's length"):
        ops.quantize_linear(x, np.ones((3, 1), np.float32))
    with pytest.raises(BroadcastError):  # per axis: 4 does not fit axis 1 (3)
        ops.quantize_linear(x, np.ones(4, np.float32))
    with pytest.raises(BroadcastError, match="blocked scale"):
        ops.quantize_linear(x, np.ones((2, 3, 3), np.float32), axis=2, block_size=2)
    with pytest.raises((ValueError, IndexError)):  # the reference refuses it too
        run_reference("QuantizeLinear", [x, np.ones(4, np.float32)], np.uint8)
