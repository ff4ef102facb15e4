"""Fuzzing the public API: only the documented exceptions, and NumPy's answer when valid.

Shapes, dims and their text, every mode and parameter, arrays of hostile layouts (views,
negative and zero strides, Fortran order), dtypes and byte orders, and ``out=`` variants.
The documented exceptions are `bcast.BroadcastError`, ``TypeError``, ``ValueError`` and
`bcast.ops.MemoryLimitError`; anything else fails. For valid inputs of the operators
whose ONNX definition is NumPy's (Add, Sub, Mul, the comparisons, And/Or/Xor), the result
must equal NumPy's. The budget is small in CI; ``BCAST_FUZZ_EXAMPLES=N`` runs N examples
per test (see docs/errors.md).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bcast
from bcast import ops

EXAMPLES = int(os.environ.get("BCAST_FUZZ_EXAMPLES", "0"))
DOCUMENTED = (bcast.BroadcastError, TypeError, ValueError, MemoryError)


def budget(ci: int) -> settings:
    return settings(
        max_examples=EXAMPLES or ci,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


# -- shapes, dims, text --------------------------------------------------------------------

ints = st.one_of(
    st.integers(-3, 6),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, 2**64, -(2**63)]),
)
dim_items = st.one_of(
    ints,
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.sampled_from(["N", "?", "1..", "..5", "2..1", "3..3", "0..", "a b", "[2]"]),
    st.integers(0, 9).map(np.int64),
    st.integers(0, 2).map(np.bool_),
    st.integers(0, 9).map(np.uint64),
)
shape_likes = st.one_of(
    st.lists(dim_items, max_size=5),
    st.text(max_size=20),
    st.text(alphabet="[],.?N0123456789 ", max_size=20),
    st.lists(st.integers(0, 3), max_size=70).map(tuple),
    st.none(),
    st.integers(),
)
modes = st.one_of(
    st.sampled_from(
        ["numpy", "NUMPY", "multidirectional", "none", "pdpd", "unidirectional",
         "bidirectional", "explicit", "bogus", ""]
    ),
    st.integers(),
    st.none(),
)  # fmt: skip
axes = st.one_of(st.integers(-6, 6), st.integers(-(2**70), 2**70), st.none(), st.text(max_size=2))
mappings = st.one_of(
    st.none(), st.lists(st.one_of(st.integers(-2, 6), st.text(max_size=1)), max_size=5)
)


@budget(150)
@given(st.lists(shape_likes, max_size=4), modes, axes, mappings)
def test_broadcast_shapes_raises_only_documented_errors(shapes, mode, axis, mapping):
    try:
        result = bcast.broadcast_shapes(*shapes, mode=mode, axis=axis, axes_mapping=mapping)
    except DOCUMENTED:
        return
    assert isinstance(result, bcast.Shape)
    assert bcast.Shape.parse(str(result)) == result


@budget(150)
@given(st.lists(st.lists(st.integers(0, 4), max_size=5).map(tuple), max_size=4))
def test_static_numpy_mode_agrees_with_numpy(shapes):
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(bcast.BroadcastError):
            bcast.broadcast_shapes(*shapes)
        return
    assert bcast.broadcast_shapes(*shapes) == expected


@budget(150)
@given(st.one_of(st.text(max_size=30), st.binary(max_size=10).map(lambda b: b.decode("latin-1"))))
def test_parsing_text_raises_only_documented_errors(text):
    for parse in (bcast.Shape.parse, bcast.Dim.parse):
        try:
            value = parse(text)
        except DOCUMENTED:
            continue
        assert parse(str(value)) == value


@budget(150)
@given(dim_items, st.one_of(dim_items, st.none()))
def test_dim_constructors_raise_only_documented_errors(lo, hi):
    for make in (lambda: bcast.Dim(lo), lambda: bcast.Dim.interval(lo, hi),
                 lambda: bcast.Dim(lo, hi), lambda: bcast.Dim.symbol(lo)):  # fmt: skip
        with contextlib.suppress(DOCUMENTED):
            make()


# -- arrays --------------------------------------------------------------------------------

DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
]  # fmt: skip
NUMPY_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "equal": np.equal,
    "greater": np.greater, "less": np.less, "and_": np.logical_and, "or_": np.logical_or,
    "xor": np.logical_xor,
}  # fmt: skip
BINARY = [*NUMPY_OPS, "div", "pow"]


@st.composite
def hostile_arrays(draw: st.DrawFn, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An array of ``shape``: contiguous, Fortran, a strided or reversed view, or stride 0."""
    values = draw(hnp.arrays(dtype, shape, elements=hnp.from_dtype(dtype, allow_nan=False)))
    layout = draw(st.sampled_from(["c", "f", "strided", "reversed", "zero", "readonly"]))
    if layout == "f":
        return np.asfortranarray(values)
    if layout == "strided":
        wide = np.repeat(values[..., None], 2, axis=-1) if values.ndim else values
        return wide[..., 0] if values.ndim else wide
    if layout == "reversed" and values.ndim:
        return values[::-1][::-1] if draw(st.booleans()) else np.flip(np.flip(values, 0), 0)
    if layout == "zero" and values.size:
        return np.broadcast_to(values.reshape(-1)[:1].reshape((1,) * values.ndim), shape)
    if layout == "readonly":
        values.flags.writeable = False
    return values


@st.composite
def binary_cases(draw: st.DrawFn):
    op = draw(st.sampled_from(BINARY))
    base = draw(st.sampled_from(DTYPES))
    order = draw(st.sampled_from(["=", ">", "<"]))
    dtype_a = np.dtype(base).newbyteorder(order) if base != "bool" else np.dtype(base)
    same = draw(st.booleans())
    other = base if same else draw(st.sampled_from(DTYPES))
    dtype_b = np.dtype(other).newbyteorder(draw(st.sampled_from(["=", ">"])))
    if draw(st.integers(0, 3)):
        shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3))
        a_shape, b_shape = shapes.input_shapes
    else:
        a_shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
        b_shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    a = draw(hostile_arrays(a_shape, dtype_a))
    b = draw(hostile_arrays(b_shape, dtype_b))
    mode = draw(st.sampled_from(["numpy", "numpy", "numpy", "none", "pdpd", "PDPD", "bogus"]))
    axis = draw(st.integers(-2, 3))
    out_kind = draw(st.sampled_from(["none", "none", "right", "wrong-shape", "wrong-dtype",
                                     "readonly", "list"]))  # fmt: skip
    return op, a, b, mode, axis, out_kind


@budget(300)
@given(binary_cases())
def test_binary_operators_against_numpy(case):
    op, a, b, mode, axis, out_kind = case
    note(f"{op} {a.dtype}{a.shape} {a.strides} {b.dtype}{b.shape} {mode} {axis} {out_kind}")
    expected = None
    if op in NUMPY_OPS and mode == "numpy" and a.dtype.name == b.dtype.name:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                expected = NUMPY_OPS[op](a, b)
        except (ValueError, TypeError):
            expected = None
    out = None
    if out_kind != "none":
        shape = (
            expected.shape
            if expected is not None
            else np.broadcast_shapes(a.shape, b.shape)
            if _broadcasts(a.shape, b.shape)
            else (7,)
        )
        dtype = expected.dtype if expected is not None else a.dtype
        if out_kind == "wrong-shape":
            shape = (*shape, 2)
        if out_kind == "wrong-dtype":
            dtype = np.dtype("complex64")
        out = np.zeros(shape, dtype)
        if out_kind == "readonly":
            out.flags.writeable = False
        if out_kind == "list":
            out = out.tolist()
    kwargs = {} if mode == "numpy" and axis == -1 else {"broadcast": mode, "axis": axis}
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            result = getattr(ops, op)(a, b, out=out, **kwargs)
    except ZeroDivisionError:
        # documented for integer Div by zero and 0 to a negative power (peer-differences.md)
        assert a.dtype.kind in "iu" and b.dtype.kind in "iu", (a.dtype, b.dtype)
        if op == "div":
            assert not np.all(b)
        else:
            assert op == "pow" and np.any(a == 0) and np.any(b < 0)
        return
    except DOCUMENTED as err:
        if expected is not None and out_kind in ("none", "right") and not kwargs:
            # shapes NumPy broadcasts, one dtype: only the ONNX dtype table may refuse
            assert isinstance(err, TypeError) and "does not allow" in str(err), err
        return
    if out_kind not in ("none", "right"):
        pytest.fail(f"out={out_kind} was accepted")
    if expected is not None:
        assert result.shape == expected.shape
        np.testing.assert_array_equal(result, expected.astype(result.dtype))


def _broadcasts(*shapes: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


def _materialise(which: str, x: np.ndarray, target: tuple[int, ...], mode: str) -> Any:
    if which == "broadcast_to":
        return bcast.broadcast_to(x, target, mode=mode)
    if which == "expand":
        return ops.expand(x, target)
    return ops.broadcast(x, target, mode=mode)


@budget(150)
@given(
    st.sampled_from(["broadcast_to", "expand", "broadcast"]),
    hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
    st.one_of(
        st.lists(st.integers(0, 4), max_size=5).map(tuple),
        st.lists(st.integers(0, 2**64), max_size=3).map(tuple),
        st.just((1,) * 65),
        st.just((0, 2**62)),
    ),
    st.sampled_from(["numpy", "bidirectional", "pdpd", "explicit", "none", "x"]),
    st.sampled_from(["=", ">"]),
)
def test_materialising_and_views_against_numpy(which, shape, target, mode, order):
    x = np.arange(int(np.prod(shape)), dtype=np.dtype("int32").newbyteorder(order)).reshape(shape)
    # A result over 64 MiB is refused by the memory guard (MemoryLimitError, documented) rather
    # than allocated: the property is the same, and the suite stays within its memory bound.
    try:
        with ops.memory_limit(64 * 2**20):
            result = _materialise(which, x, target, mode)
    except DOCUMENTED:
        return
    if which == "expand" or (which == "broadcast" and mode == "bidirectional"):
        expected = np.broadcast_to(x, np.broadcast_shapes(x.shape, target))
    elif mode == "numpy" and which in ("broadcast_to", "broadcast"):
        expected = np.broadcast_to(x, target)
    else:
        return
    assert result.shape == expected.shape
    if expected.size <= 10**5:  # the values of larger views are NumPy's by construction
        np.testing.assert_array_equal(result, expected)
