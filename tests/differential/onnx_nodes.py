"""One-node ONNX models for the differential tests of `bcast.ops`, and the peers that run them.

Inputs are declared with their element type and no shape, so one model (and one
onnxruntime session) serves every shape hypothesis draws.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import helper
from onnx.reference import ReferenceEvaluator

OPSET = 21


def onnx_type(dtype: Any) -> int:
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def make_model(
    op_type: str,
    in_dtypes: Sequence[Any],
    out_dtype: Any,
    attrs: tuple[tuple[str, Any], ...] = (),
) -> onnx.ModelProto:
    names = [f"i{k}" for k in range(len(in_dtypes))]
    node = helper.make_node(op_type, names, ["y"], **dict(attrs))
    graph = helper.make_graph(
        [node],
        f"one_{op_type}",
        [
            helper.make_tensor_value_info(n, onnx_type(d), None)
            for n, d in zip(names, in_dtypes, strict=True)
        ],
        [helper.make_tensor_value_info("y", onnx_type(out_dtype), None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    return model


@functools.lru_cache(maxsize=256)
def _session(op_type: str, in_dtypes: tuple[str, ...], out_dtype: str, attrs: tuple) -> Any:
    model = make_model(op_type, in_dtypes, out_dtype, attrs)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@functools.lru_cache(maxsize=256)
def _reference(op_type: str, in_dtypes: tuple[str, ...], out_dtype: str, attrs: tuple) -> Any:
    return ReferenceEvaluator(make_model(op_type, in_dtypes, out_dtype, attrs))


def _key(inputs: Sequence[np.ndarray], out_dtype: Any) -> tuple[tuple[str, ...], str]:
    return tuple(np.dtype(x.dtype).str for x in inputs), np.dtype(out_dtype).str


def run_ort(op_type: str, inputs: Sequence[np.ndarray], out_dtype: Any, **attrs: Any) -> np.ndarray:
    """Run a one-node model in onnxruntime (CPU) and return its output."""
    dtypes, out = _key(inputs, out_dtype)
    session = _session(op_type, dtypes, out, tuple(sorted(attrs.items())))
    feeds = {f"i{k}": x for k, x in enumerate(inputs)}
    return np.asarray(session.run(None, feeds)[0])


def run_reference(
    op_type: str, inputs: Sequence[np.ndarray], out_dtype: Any, **attrs: Any
) -> np.ndarray:
    """Run a one-node model in `onnx.reference.ReferenceEvaluator` and return its output."""
    dtypes, out = _key(inputs, out_dtype)
    evaluator = _reference(op_type, dtypes, out, tuple(sorted(attrs.items())))
    feeds = {f"i{k}": x for k, x in enumerate(inputs)}
    return np.asarray(evaluator.run(None, feeds)[0])


def assert_same(ours: np.ndarray, theirs: np.ndarray, *, rtol: float = 1e-6) -> None:
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    if ours.dtype.kind == "f":
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(ours, theirs)


# -- hypothesis strategies ------------------------------------------------------------------


def elements(dtype: Any, *, nonzero: bool = False, nan: bool = False) -> st.SearchStrategy:
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return st.booleans()
    if dt.kind in "iu":
        low = 0 if dt.kind == "u" else -100
        values = st.integers(low, 100)
        return values.filter(lambda v: v != 0) if nonzero else values
    width = 32 if dt == np.float32 else 64
    values = st.floats(-1e3, 1e3, width=width, allow_nan=False)
    if nonzero:
        values = values.filter(lambda v: v != 0)
    if nan:
        values = st.one_of(values, st.just(float("nan")))
    return values


@st.composite
def broadcastable_operands(
    draw: Any,
    dtypes: Sequence[Any],
    *,
    elements_for: Sequence[st.SearchStrategy] | None = None,
    max_dims: int = 4,
) -> list[np.ndarray]:
    """Arrays of mutually broadcastable shapes (0-size and rank-0 included)."""
    shapes = draw(
        hnp.mutually_broadcastable_shapes(
            num_shapes=len(dtypes), min_dims=0, max_dims=max_dims, min_side=0, max_side=4
        )
    )
    strategies = elements_for or [elements(d) for d in dtypes]
    return [
        draw(hnp.arrays(np.dtype(d), s, elements=e))
        for d, s, e in zip(dtypes, shapes.input_shapes, strategies, strict=True)
    ]


@st.composite
def unidirectional_pair(
    draw: Any, a_dtype: Any, b_dtype: Any, *, a_min_dims: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """A and B where B broadcasts to A one way (B's dims are A's or 1; rank(B) <= rank(A))."""
    a_shape = draw(hnp.array_shapes(min_dims=a_min_dims, max_dims=4, min_side=0, max_side=4))
    rank_b = draw(st.integers(0, len(a_shape)))
    tail = a_shape[len(a_shape) - rank_b :]
    b_shape = tuple(draw(st.sampled_from([d, 1])) for d in tail)
    a = draw(hnp.arrays(np.dtype(a_dtype), a_shape, elements=elements(a_dtype)))
    b = draw(hnp.arrays(np.dtype(b_dtype), b_shape, elements=elements(b_dtype)))
    return a, b
