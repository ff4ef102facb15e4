"""The operators of issue 38 in `bcast.ops`: the operator texts' values, modes, out=, libraries.

Expected values come from the texts (Mod-28, BitShift-28, QuantizeLinear-25, OpenVINO
Select-1 and FakeQuantize-1) worked by hand or by Python's own integer arithmetic, and from
NumPy's ufuncs where the operator is one; the peers are compared in
``tests/differential/test_ops_new_peers.py`` and ``test_ops_new_openvino.py``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
import pytest

from bcast import BroadcastError, ops
from bcast.ops._dtypes import SIGNATURES

# -- the dtype table against the ONNX schemas of the new operators ---------------------------

NARROW_NAMES = {
    "float8e4m3fn": "float8_e4m3fn",
    "float8e4m3fnuz": "float8_e4m3fnuz",
    "float8e5m2": "float8_e5m2",
    "float8e5m2fnuz": "float8_e5m2fnuz",
    "float8e8m0": "float8_e8m0fnu",
    "float4e2m1": "float4_e2m1fn",
    "float6e2m3": "float6_e2m3fn",
    "float6e3m2": "float6_e3m2fn",
    "float": "float32",
    "double": "float64",
}


@pytest.mark.parametrize(
    ("op", "onnx_name"),
    [("quantize_linear", "QuantizeLinear"), ("dequantize_linear", "DequantizeLinear")],
)
def test_quantizer_tables_are_the_onnx_schemas_inputs(op: str, onnx_name: str) -> None:
    schema = onnx.defs.get_schema(onnx_name)
    sig = SIGNATURES[op]
    allowed = {
        c.type_param_str: {NARROW_NAMES.get(t[7:-1], t[7:-1]) for t in c.allowed_type_strs}
        for c in schema.type_constraints
    }
    formal = [i.type_str for i in schema.inputs]
    assert list(sig.inputs) == formal
    for param in set(formal):
        assert set(sig.allowed[param]) == allowed[param], param


# -- Mod -------------------------------------------------------------------------------------

INT_PAIRS = [(a, b) for a in (-7, -4, 0, 3, 5, 8) for b in (-3, -2, 2, 3, 5)]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_mod_is_floor_mod_and_fmod_is_c_fmod(dtype: Any) -> None:
    a = np.array([p[0] for p in INT_PAIRS], dtype)
    b = np.array([p[1] for p in INT_PAIRS], dtype)
    assert ops.mod(a, b).tolist() == [x % y for x, y in INT_PAIRS]  # Python %: sign of b
    assert ops.mod(a, b, fmod=1).tolist() == [int(math.fmod(x, y)) for x, y in INT_PAIRS]


def test_float_mod_follows_the_mod_28_special_cases() -> None:
    inf, nan = math.inf, math.nan
    a = np.array([0.0, -0.0, inf, 5.0, 5.0, -5.0, 5.0, nan, 5.5])
    b = np.array([-3.0, 3.0, 2.0, 0.0, -inf, inf, inf, 2.0, -2.0])
    got = ops.mod(a, b)
    # +-0 with y nonzero: 0 with y's sign; inf: NaN; y 0: NaN; y inf: x if same sign else y
    assert np.signbit(got[0]) and not np.signbit(got[1]) and got[0] == 0 == got[1]
    assert math.isnan(got[2]) and math.isnan(got[3]) and math.isnan(got[7])
    assert got[4] == -inf and got[5] == inf and got[6] == 5.0 and got[8] == -0.5
    fm = ops.mod(a, b, fmod=1)
    assert fm[6] == 5.0 and fm[4] == 5.0 and fm[8] == 1.5 and math.isnan(fm[3])


def test_mod_refuses_a_bad_fmod_and_an_integer_zero_divisor() -> None:
    with pytest.raises(ValueError, match="fmod must be 0 or 1"):
        ops.mod(np.ones(2), np.ones(2), fmod=2)
    with pytest.raises(ZeroDivisionError):
        ops.mod(np.array([1, 2]), np.array([1, 0]))
    out = np.full(2, 7)
    with pytest.raises(ZeroDivisionError):
        ops.mod(np.array([1, 2]), np.array([0]), out=out)
    assert out.tolist() == [7, 7]  # checked before anything is written


# -- BitShift --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint32, np.int64])
def test_bit_shift_is_bitshift_28(dtype: Any) -> None:
    bits = np.dtype(dtype).itemsize * 8
    info = np.iinfo(dtype)
    values = [v for v in (0, 1, 5, -1, -16, 100, int(info.max), int(info.min)) if info.min <= v]
    counts = [c for c in (0, 1, 3, bits - 1, bits, bits + 3, -1) if c >= info.min]
    x = np.array([v for v in values for _ in counts], dtype)
    y = np.array([c for _ in values for c in counts], dtype)

    def wrap(v: int) -> int:  # two's complement in the dtype
        v &= (1 << bits) - 1
        return v - (1 << bits) if info.min < 0 and v >> (bits - 1) else v

    left = [wrap(v << c) if 0 <= c < bits else 0 for v in values for c in counts]
    right = [(v >> c) if 0 <= c < bits else (-1 if v < 0 else 0) for v in values for c in counts]
    assert ops.bit_shift(x, y).tolist() == left
    assert ops.bit_shift(x, y, direction="RIGHT").tolist() == right  # Python >>: arithmetic


def test_bit_shift_refuses_floats_and_a_bad_direction() -> None:
    with pytest.raises(TypeError, match="BitShift"):
        ops.bit_shift(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="direction"):
        ops.bit_shift(np.ones(2, np.uint8), np.ones(2, np.uint8), direction="up")


# -- bitwise, comparisons, squared difference: NumPy's ufuncs under every mode --------------

UFUNCS = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "greater_or_equal": np.greater_equal,
    "less_or_equal": np.less_equal,
    "not_equal": np.not_equal,
    "squared_difference": lambda a, b: (a - b) * (a - b),
}


@pytest.mark.parametrize("op", sorted(UFUNCS))
def test_binary_ops_broadcast_by_numpy_none_and_pdpd(op: str) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(-5, 6, (2, 3, 4)).astype(np.int32)
    b = rng.integers(-5, 6, (3, 1)).astype(np.int32)
    fn = getattr(ops, op)
    assert np.array_equal(fn(a, b), UFUNCS[op](a, b))
    assert np.array_equal(fn(a, a, broadcast="none"), UFUNCS[op](a, a))
    # pdpd, axis 1: b [3,1] placed at A's axis 1 (its trailing 1 ignored) = b as [1,3,1]
    assert np.array_equal(fn(a, b, broadcast="pdpd", axis=1), UFUNCS[op](a, b.reshape(1, 3, 1)))
    with pytest.raises(BroadcastError):
        fn(a, b, broadcast="none")
    out = np.empty((2, 3, 4), UFUNCS[op](a, a).dtype)
    assert fn(a, b, out=out) is out
    assert np.array_equal(out, UFUNCS[op](a, b))


def test_not_equal_and_ordered_comparisons_on_nan() -> None:
    a, b = np.array([np.nan, 1.0, 2.0]), np.array([np.nan, 1.0, 1.0])
    assert ops.not_equal(a, b).tolist() == [True, False, True]
    assert ops.greater_or_equal(a, b).tolist() == [False, True, True]
    assert ops.less_or_equal(a, b).tolist() == [False, True, False]


# -- QuantizeLinear / DequantizeLinear -------------------------------------------------------


def test_quantize_rounds_half_to_even_and_saturates() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0], np.float32)
    got = ops.quantize_linear(x, np.float32(1.0), np.int8(0))
    assert got.tolist() == [0, 2, 2, 0, -2, 127, -128]
    assert ops.quantize_linear(x, np.float32(1.0)).tolist() == [0, 2, 2, 0, 0, 255, 0]
    assert ops.quantize_linear(x, np.float32(1.0), np.uint16(10)).dtype == np.uint16


def test_blocked_scales_serve_block_size_elements_and_the_last_block_is_cut() -> None:
    x = np.arange(10, dtype=np.float32).reshape(2, 5) * 4
    scale = np.array([[1.0, 2.0, 4.0], [4.0, 2.0, 1.0]], np.float32)  # ceil(5 / 2) = 3 blocks
    got = ops.quantize_linear(x, scale, axis=1, block_size=2)
    per_element = np.array([[1, 1, 2, 2, 4], [4, 4, 2, 2, 1]], np.float32)
    assert got.tolist() == np.rint(x / per_element).astype(np.uint8).tolist()
    back = ops.dequantize_linear(got, scale, axis=-1, block_size=2)
    assert back.tolist() == (got * per_element).tolist()
    with pytest.raises(BroadcastError, match="blocked"):
        ops.quantize_linear(x, scale, axis=1, block_size=1)  # 5 blocks expected
    with pytest.raises(ValueError, match="block_size"):
        ops.quantize_linear(x, scale, axis=1, block_size=-2)


def test_per_axis_scale_is_an_explicit_broadcast_onto_axis() -> None:
    x = np.ones((2, 3, 4), np.float32) * 8
    scale = np.array([1.0, 2.0, 4.0], np.float32)
    got = ops.quantize_linear(x, scale, np.array([0, 1, 2], np.uint8), axis=-2)
    assert got[0, :, 0].tolist() == [8, 5, 4] and got.shape == (2, 3, 4)
    with pytest.raises(BroadcastError) as err:
        ops.quantize_linear(x, scale, axis=2)  # 3 scales for an axis of 4
    assert err.value.axis is not None
    with pytest.raises(BroadcastError, match="out of range"):
        ops.quantize_linear(x, scale, axis=3)
    with pytest.raises(BroadcastError, match="same shape"):
        ops.quantize_linear(x, scale, np.zeros(2, np.uint8), axis=1)


def test_the_zero_point_may_be_given_by_keyword_as_design_writes_it() -> None:
    x = np.array([1.0, 3.0], np.float32)
    q = ops.quantize_linear(x, np.float32(2.0), zero_point=np.int8(-1))
    assert q.tolist() == [-1, 1]  # rint(0.5) = 0, rint(1.5) = 2; plus -1
    assert ops.dequantize_linear(q, np.float32(2.0), zero_point=np.int8(-1)).tolist() == [0.0, 4.0]


def test_output_dtype_and_the_zero_point_must_agree() -> None:
    x = np.array([1.0, -3.0], np.float32)
    assert ops.quantize_linear(x, np.float32(1), output_dtype="int16").dtype == np.int16
    assert ops.quantize_linear(x, np.float32(1), output_dtype=np.int8).tolist() == [1, -3]
    with pytest.raises(TypeError, match="differs from the zero point"):
        ops.quantize_linear(x, np.float32(1), np.uint8(0), output_dtype="int8")
    with pytest.raises(TypeError, match="not a quantized type"):
        ops.quantize_linear(x, np.float32(1), output_dtype="float32")


def test_quantize_to_int4_and_float8_through_ml_dtypes() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([-20.0, -8.4, 0.5, 7.5, 300.0, 500.0], np.float32)
    q4 = ops.quantize_linear(x, np.float32(1), output_dtype="int4")
    assert q4.dtype == ml_dtypes.int4
    assert q4.astype(np.int8).tolist() == [-8, -8, 0, 7, 7, 7]
    f8 = ops.quantize_linear(x, np.float32(1), output_dtype="float8_e4m3fn")
    assert f8.astype(np.float32).tolist()[-2:] == [288.0, 448.0]  # 448: the largest finite
    raw = ops.quantize_linear(x, np.float32(1), output_dtype="float8_e4m3fn", saturate=False)
    assert math.isnan(raw.astype(np.float32)[-1])  # e4m3fn has no inf: out of range is NaN
    back = ops.dequantize_linear(q4, np.float32(0.5))
    assert back.tolist() == [-4.0, -4.0, 0.0, 3.5, 3.5, 3.5]


def test_dequantize_takes_the_scales_dtype_and_writes_into_out() -> None:
    x = np.array([[0, 10], [20, 30]], np.int8)
    out = np.empty((2, 2), np.float16)
    got = ops.dequantize_linear(x, np.array([0.5, 2.0], np.float16), axis=0, out=out)
    assert got is out and out.tolist() == [[0.0, 5.0], [40.0, 60.0]]


# -- Select, FakeQuantize --------------------------------------------------------------------


def test_select_numpy_is_where_and_pdpd_places_else_and_cond_onto_then() -> None:
    then = np.arange(6).reshape(2, 3)
    cond = np.array([True, False, True])
    assert ops.select(cond, then, np.array(-1)).tolist() == [[0, -1, 2], [3, -1, 5]]
    got = ops.select(np.array([[True], [False]]), then, np.array([7, 8]), broadcast="pdpd", axis=0)
    assert got.tolist() == [[0, 1, 2], [8, 8, 8]]
    with pytest.raises(BroadcastError):  # pdpd: else is one-way onto then
        ops.select(cond, np.array([1, 2, 3]), np.ones((2, 3), np.int64), broadcast="pdpd")
    with pytest.raises(BroadcastError):
        ops.select(cond, then, then, broadcast="none")
    with pytest.raises(TypeError):
        ops.select(np.array([1, 0]), then, then)


def test_fake_quantize_follows_the_openvino_formula() -> None:
    x = np.array([-1.0, 0.0, 0.25, 0.5, 0.75, 1.0, 2.0], np.float32)
    # levels 3: steps at 0, 0.5, 1 of the input range [0, 1], mapped onto [-10, 10]
    got = ops.fake_quantize(x, 0.0, 1.0, -10.0, 10.0, levels=3)
    # round(0.25 * 2) = round(0.5) = 0 and round(0.75 * 2) = round(1.5) = 2: half to even
    assert got.tolist() == [-10.0, -10.0, -10.0, 0.0, 10.0, 10.0, 10.0]
    per_row = ops.fake_quantize(
        x, np.zeros((2, 1), np.float32), np.array([[1.0], [2.0]], np.float32), 0.0, 1.0, levels=2
    )
    assert per_row.shape == (2, 7) and per_row[1].tolist() == [
        0,
        0,
        0,
        0,
        0,
        0,
        1,
    ]  # 1.0 -> round(0.5) = 0
    with pytest.raises(ValueError, match="levels"):
        ops.fake_quantize(x, 0.0, 1.0, 0.0, 1.0, levels=1)
    with pytest.raises(TypeError):
        ops.fake_quantize(np.arange(3), 0, 1, 0, 1, levels=4)


# -- other libraries -------------------------------------------------------------------------


def test_the_new_ops_run_on_torch_and_dask() -> None:
    torch = pytest.importorskip("torch")
    da = pytest.importorskip("dask.array")
    a = torch.tensor([[5, -7], [3, 4]], dtype=torch.int32)
    b = torch.tensor([3, -2], dtype=torch.int32)
    assert ops.mod(a, b).tolist() == [[2, -1], [0, 0]]
    assert ops.mod(a, b, fmod=1).tolist() == [[2, -1], [0, 0]]
    shifted = ops.bit_shift(
        torch.tensor([-16, 16], dtype=torch.int8),
        torch.tensor([2, 9], dtype=torch.int8),
        direction="right",
    )
    assert shifted.tolist() == [-4, 0]
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    q = ops.quantize_linear(
        x, torch.tensor([1.0, 2.0, 4.0]), torch.tensor([0, 1, 2], dtype=torch.int8), axis=1
    )
    assert q.dtype == torch.int8 and q.tolist() == [[0, 1, 2], [3, 3, 3]]
    d = da.from_array(np.arange(12.0, dtype=np.float32).reshape(3, 4), chunks=2)
    scale = da.from_array(np.array([[1.0, 2.0]] * 3, np.float32))
    blocked = ops.quantize_linear(d, scale, axis=1, block_size=2).compute()
    assert blocked.tolist() == [[0, 1, 1, 2], [4, 5, 3, 4], [8, 9, 5, 6]]
    assert ops.select(torch.tensor([True, False]), x[:, :2], torch.tensor(0.0)).tolist() == [
        [0, 0],
        [3, 0],
    ]


def test_a_blocked_scale_is_spread_only_within_the_memory_limit() -> None:
    # The per-element scale of a blocked quantization is as large as x: the guard decides
    # before it is made, as for a result.
    x = np.broadcast_to(np.float32(1), (1 << 12, 1 << 12))
    scale = np.broadcast_to(np.float32(1), (1 << 12, 1 << 11))
    with ops.memory_limit(1 << 20), pytest.raises(ops.MemoryLimitError):
        ops.quantize_linear(x, scale, axis=1, block_size=2)


@pytest.mark.parametrize(
    ("op", "theirs"),
    [
        ("bitwise_and", np.bitwise_and),
        ("bitwise_xor", np.bitwise_xor),
        ("not_equal", np.not_equal),
        ("greater_or_equal", np.greater_equal),
        ("less_or_equal", np.less_equal),
        ("squared_difference", lambda a, b: (a - b) * (a - b)),
    ],
)
def test_the_new_binary_operators_replay_their_call_plans_as_add_does(op, theirs):
    from bcast import engine

    rng = np.random.default_rng(7)
    a = rng.integers(-50, 50, (640, 64), dtype=np.int32)  # above the compiled tiny path's size
    b = rng.integers(-50, 50, (64,), dtype=np.int32)
    out = np.empty((640, 64), theirs(a, b).dtype)
    first = getattr(ops, op)(a, b, out=out)
    before = engine.call_cache_info()
    again = getattr(ops, op)(a, b, out=out)
    after = engine.call_cache_info()
    assert after.hits == before.hits + 1  # the call site's plan, replayed
    assert first is out and again is out
    np.testing.assert_array_equal(out, theirs(a, b))
    tiny = getattr(ops, op)(a[:2], b)  # the tiny path: NumPy's own answer
    np.testing.assert_array_equal(tiny, theirs(a[:2], b))
