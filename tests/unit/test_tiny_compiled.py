"""The compiled tiny path of the binary operators (`bcast.ops._tinyc`): NumPy's results, bit
for bit, or no answer at all.

Each call it takes must give what NumPy's ufunc gives: dtype, shape, C layout and every byte
(NaN, infinities, signed zeros, subnormals, wrapping integers, bool bytes other than 0 and
1). Each call it does not take (another layout, dtype, size, an ``out=`` it cannot write
safely) it must decline (None), and the operator then answers as without it. No timings.
"""

from __future__ import annotations

import math
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fresh_python import stdout_of
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from python_paths import python_ops

from bcast import BroadcastError, ops
from bcast.ops import _tiny

# bcast's operator, NumPy's ufunc: every operator the compiled path has loops for.
UFUNCS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_or_equal": np.greater_equal,
    "less": np.less,
    "less_or_equal": np.less_equal,
    "and_": np.logical_and,
    "or_": np.logical_or,
    "xor": np.logical_xor,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
}
DTYPES = [
    np.dtype(name)
    for name in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                 "uint64", "float32", "float64")
]  # fmt: skip
LIMIT = 8 * 4096  # the largest result the compiled path computes (`_tiny._COMPILED_SIZE`)


def _compiler_here() -> bool:
    """Whether this Python can build C extensions: a C compiler and Python's headers."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which(compiler) is not None and headers.exists()


def test_the_build_compiled_the_tiny_path_where_it_could() -> None:
    # setup.py marks the extension optional: a build without a C compiler goes on without
    # it. Where one is present (CI), the build must have compiled it, or the fast path is
    # lost without a word.
    fast = _tiny.compiled_tiny("add")
    if _compiler_here():
        assert fast is not None, "bcast.ops._tinyc was not built: reinstall (pip install -e .)"
    else:
        assert fast is None or callable(fast)


tinyc = pytest.importorskip("bcast.ops._tinyc", reason="built without a C compiler")


def _fast(op: str) -> Any:
    fast = _tiny.compiled_tiny(op)
    assert fast is not None, op
    return fast


def same_bits(got: Any, want: np.ndarray) -> None:
    assert type(got) is np.ndarray
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert got.flags.c_contiguous
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


def numpys(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(UFUNCS[op](a, b))


def _allowed(op: str, dtype: np.dtype[Any]) -> bool:
    """Whether the operator takes two operands of ``dtype`` and computes them by the ufunc.

    (Integer Div truncates, as ONNX says, where NumPy's floor_divide floors: not a ufunc.)
    """
    try:
        python_ops.__dict__[op](np.ones(1, dtype), np.ones(1, dtype))
    except TypeError:
        return False
    return _tiny.kernel_for(op, [dtype.name, dtype.name]).ufunc is UFUNCS[op]


PAIRS = [(op, dtype) for op in UFUNCS for dtype in DTYPES if _allowed(op, dtype)]


def _elements(dtype: np.dtype[Any]) -> st.SearchStrategy[Any]:
    if dtype.kind == "f":
        edges = [0.0, -0.0, np.inf, -np.inf, np.nan, np.finfo(dtype).tiny / 4]
        finite = st.floats(width=32 if dtype.itemsize == 4 else 64, allow_nan=False)
        return st.one_of(st.sampled_from(edges), finite, st.integers(-3, 3).map(float))
    if dtype.kind == "b":
        return st.booleans()
    info = np.iinfo(dtype)
    edges = [info.min, info.max, 0, 1, -1 if info.min else 2]
    return st.one_of(st.sampled_from(edges), st.integers(info.min, info.max))


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, np.ndarray, np.ndarray]:
    op, dtype = draw(st.sampled_from(PAIRS))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=5))
    a, b = (draw(hnp.arrays(dtype, s, elements=_elements(dtype))) for s in shapes.input_shapes)
    return op, a, b


def test_every_operator_and_dtype_the_python_path_takes_has_a_loop() -> None:
    for op, dtype in PAIRS:
        a = np.arange(3).astype(dtype)
        same_bits(_fast(op)(a, a[:1]), numpys(op, a, a[:1]))
    assert len(PAIRS) == 3 * 10 + 2 + 2 * 11 + 4 * 10 + 3 + 3 * 8  # div, ==, !=: also bool


@pytest.mark.parametrize("op", UFUNCS)
def test_a_dtype_the_operator_refuses_is_declined(op: str) -> None:
    for dtype in DTYPES:
        if (op, dtype) not in PAIRS:
            a = np.ones(2, dtype)
            assert _fast(op)(a, a) is None, (op, dtype)
    with pytest.raises(TypeError):
        getattr(ops, op)(np.ones(2, np.complex64), np.ones(2, np.complex64))


@settings(max_examples=400, deadline=None)
@given(calls())
def test_results_are_numpys_bit_for_bit(call: tuple[str, np.ndarray, np.ndarray]) -> None:
    op, a, b = call
    want = numpys(op, a, b)
    same_bits(_fast(op)(a, b), want)
    same_bits(getattr(ops, op)(a, b), want)  # as users call it
    out = np.full(want.shape, 7, want.dtype)
    assert _fast(op)(a, b, out) is out
    same_bits(out, want)


@settings(max_examples=100, deadline=None)
@given(calls())
def test_an_operand_as_out_is_read_before_it_is_written(
    call: tuple[str, np.ndarray, np.ndarray],
) -> None:
    op, a, b = call
    want = numpys(op, a, b)
    for target, other, first in ((a.copy(), b, True), (b.copy(), a, False)):
        if target.shape != want.shape or target.dtype != want.dtype:
            continue
        x, y = (target, other) if first else (other, target)
        assert getattr(ops, op)(x, y, out=target) is target
        same_bits(target, want)


def test_integers_wrap_and_bool_bytes_read_as_numpy_reads_them() -> None:
    i8 = np.array([127, -128], np.int8)
    same_bits(_fast("add")(i8, np.array([1], np.int8)), np.array([-128, -127], np.int8))
    u16 = np.array([65535], np.uint16)
    same_bits(_fast("mul")(u16, u16), u16 * u16)  # 65535**2 overflows a C int: done unsigned
    i64 = np.array([np.iinfo(np.int64).min], np.int64)
    same_bits(_fast("sub")(i64, np.array([1], np.int64)), np.array([np.iinfo(np.int64).max]))
    odd = np.array([0, 1, 2, 255], np.uint8).view(bool)  # bytes 2 and 255 are true
    one = np.array([True, True, True, True])
    for op in ("equal", "not_equal", "and_", "or_", "xor"):
        same_bits(_fast(op)(odd, one), numpys(op, odd, one))


def _placed(shape: tuple[int, ...], dtype: np.dtype[Any], skew: int) -> np.ndarray:
    """An array of ``shape`` whose data starts ``skew`` bytes past a 64-byte boundary."""
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.zeros(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + skew
    return raw[start : start + nbytes].view(dtype).reshape(shape)


@pytest.mark.parametrize("skew", [0, 8, 16, 24, 40])
@pytest.mark.parametrize(
    ("op", "dtype"),
    [("sub", "float64"), ("div", "float32"), ("add", "int8"), ("mul", "uint16"),
     ("less", "float64"), ("equal", "int32")],
)  # fmt: skip
def test_a_bias_is_added_with_the_output_rows_shifted_to_whole_vectors(
    op: str, dtype: str, skew: int
) -> None:
    # A repeated row (a bias) against rows laid out as the output: where the output's rows
    # start off a 32-byte boundary (and fill at least 4 KiB), the C path walks the rows
    # shifted and reads the bias rotated (`walk`). Every element must still meet its own
    # bias element, on either side (sub, div and less are not symmetric), at every skew,
    # in 2-D and under a third axis.
    dt = np.dtype(dtype)
    rng = np.random.default_rng(skew)
    for shape, row_shape in (((70, 64), (64,)), ((2, 50, 96), (96,)), ((300, 32), (1, 32))):
        big = _placed(shape, dt, 0)
        big[...] = rng.integers(1, 100, shape).astype(dt)
        row = (rng.integers(1, 100, row_shape) + 0.5 * (dt.kind == "f")).astype(dt)
        for x, y in ((big, row), (row, big)):
            want = numpys(op, x, y)
            out = _placed(want.shape, want.dtype, skew)
            out.fill(0)
            assert _fast(op)(x, y, out) is out
            same_bits(out, want)


def _misaligned(n: int) -> np.ndarray:
    raw = np.zeros(8 * n + 1, np.uint8)
    x = raw[1:].view(np.float64)
    assert not x.flags.aligned
    return x


def test_what_it_does_not_take_is_declined_and_answered_as_without_it() -> None:
    f32 = np.arange(12, dtype=np.float32).reshape(3, 4)
    row = np.arange(4, dtype=np.float32)
    add = _fast("add")
    declined = [
        (f32[:, ::2], row[:2]),  # not contiguous
        (np.asfortranarray(f32), row),  # Fortran order
        (f32.astype(">f4"), row.astype(">f4")),  # byte-swapped
        (_misaligned(4), np.ones(4)),  # off its alignment
        (np.ma.masked_array(f32), row),  # a subclass
        (f32, row.astype(np.float64)),  # two dtypes
        (f32, np.ones(3, np.float32)),  # shapes that do not broadcast
        (np.ones((LIMIT + 1,), np.float32), np.ones(1, np.float32)),  # too large
        (np.ones((2, LIMIT), np.float32), np.ones(1, np.float32)),  # too large in all
        ([1.0, 2.0], row[:2]),  # not an array
    ]
    for a, b in declined:
        assert add(a, b) is None
        try:
            want = numpys("add", np.asarray(a), np.asarray(b))
        except ValueError:
            with pytest.raises((BroadcastError, TypeError)):
                ops.add(a, b)
        else:
            if isinstance(a, np.ndarray) and a.dtype == np.asarray(b).dtype:
                np.testing.assert_array_equal(ops.add(a, b), want)
    assert add(np.ones(LIMIT, np.float32), np.ones(1, np.float32)) is not None  # the edge


def test_an_out_it_cannot_write_safely_is_declined() -> None:
    a = np.arange(8, dtype=np.float64)
    one = np.ones(1)
    add = _fast("add")
    frozen = np.empty(8)
    frozen.flags.writeable = False
    for out in (np.empty(8, np.float32), np.empty(7), np.empty((1, 8)), frozen,
                np.empty(16)[::2], np.asfortranarray(np.empty((2, 8)))):  # fmt: skip
        assert add(a, one, out) is None
    buffer = np.arange(9, dtype=np.float64)
    shifted_in, shifted_out = buffer[:8], buffer[1:]  # overlap, element i on i + 1
    assert add(shifted_in, one, shifted_out) is None
    assert ops.add(shifted_in, one, out=shifted_out) is shifted_out  # NumPy's path copies
    same_bits(shifted_out, np.arange(8.0) + 1)
    x = np.arange(4.0)
    assert add(x[:1], x, x) is None  # a broadcast operand inside out: written before read
    same_bits(ops.add(x[:1], x, out=x), np.array([0.0, 1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="positionally"):
        add(a, one, out=None)
    with pytest.raises(TypeError, match="positionally"):
        add(a)


def test_a_zero_size_or_zero_dimension_result() -> None:
    add = _fast("add")
    same_bits(add(np.ones((0, 3)), np.ones(3)), np.ones((0, 3)))
    same_bits(add(np.ones((3, 1)), np.ones((1, 0))), np.ones((3, 0)))
    got = add(np.array(2.0), np.array(3.0))
    assert type(got) is np.ndarray and got.shape == () and got == 5.0
    assert add(np.ones((0, 3)), np.ones(4)) is None  # 3 and 4 do not broadcast
    # No elements, but dims whose product overflows 64 bits: declined before it counts them
    left, right = np.ones((LIMIT,) * 3 + (1,) * 3 + (0,)), np.ones((1,) * 3 + (LIMIT,) * 3 + (0,))
    assert add(left, right) is None
    with pytest.raises(ValueError, match="too large"):
        np.add(left, right)  # NumPy cannot make the result either
    with pytest.raises(BroadcastError, match="too large for an array"):
        ops.add(left, right)  # the full path says why
    assert "add" in repr(add)


def test_with_numpy_1_the_compiled_path_stays_where_numpys_tiny_path_is_off() -> None:
    # NumPy 1.x keeps its error state process-wide: no quiet context (`quiet_run` None), so
    # NumPy's ufuncs take no tiny call. The C loops warn of nothing and still take them
    # (checked by hand with NumPy 1.26.4 too: 151 ns a tiny add against NumPy's 512 ns).
    code = """
import bcast.engine.numpy_path as path
path.quiet_run = None  # as under NumPy 1.x, before the engine reads it
import numpy as np
from bcast import ops
from bcast.ops import _tiny
assert _tiny._TINY["add"] == {} and _tiny.compiled_tiny("add") is not None
print(ops.add(np.arange(3.0), np.ones(1)).tolist(), ops.div(np.ones(1), np.zeros(1)).tolist())
"""
    assert stdout_of(code).split() == ["[1.0,", "2.0,", "3.0]", "[inf]"]
