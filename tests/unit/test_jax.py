"""JAX arrays through the array-API path: views and every operator return JAX arrays.

Expected values are NumPy expressions written here from the specs (ONNX operator
definitions, the OpenVINO broadcast rules), never bcast's own NumPy results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import bcast
from bcast import ops

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

A = np.arange(-6, 6, dtype=np.float32).reshape(2, 3, 2) / 2
B = np.array([1.5, -2.0], dtype=np.float32)


def _is_jax(x: object) -> bool:
    return isinstance(x, jax.Array)


@pytest.mark.parametrize(
    ("x", "shape", "kwargs", "expected"),
    [
        pytest.param(np.arange(3.0), (2, 3), {}, np.tile(np.arange(3.0), (2, 1)), id="numpy-mode"),
        pytest.param(
            np.arange(3.0).reshape(3, 1),
            (2, 3, 4),
            {"mode": "pdpd", "axis": 1},
            np.broadcast_to(np.arange(3.0).reshape(1, 3, 1), (2, 3, 4)),
            id="pdpd-trailing-one",
        ),
        pytest.param(
            np.arange(4.0),
            (2, 4, 3),
            {"mode": "explicit", "axes_mapping": [1]},
            np.broadcast_to(np.arange(4.0).reshape(1, 4, 1), (2, 4, 3)),
            id="explicit",
        ),
        pytest.param(
            np.arange(3.0).reshape(3, 1),
            (2, 1, 6),
            {"mode": "bidirectional"},
            np.broadcast_to(np.arange(3.0).reshape(1, 3, 1), (2, 3, 6)),
            id="bidirectional-grows-past-target",
        ),
    ],
)
def test_jax_views_match_the_spec_and_stay_jax(
    x: np.ndarray[Any, Any], shape: tuple[int, ...], kwargs: dict[str, Any], expected: Any
) -> None:
    view = bcast.broadcast_to(jnp.asarray(x), shape, **kwargs)
    assert _is_jax(view)
    np.testing.assert_array_equal(np.asarray(view), expected)


def test_jax_broadcast_arrays_are_jax() -> None:
    a, b = bcast.broadcast_arrays(jnp.ones((2, 1)), jnp.arange(3.0))
    assert _is_jax(a) and _is_jax(b)
    assert a.shape == b.shape == (2, 3)


BINARY: list[tuple[str, Callable[..., Any]]] = [
    ("add", np.add),
    ("sub", np.subtract),
    ("mul", np.multiply),
    ("div", np.divide),
    ("equal", np.equal),
    ("greater", np.greater),
    ("less", np.less),
]


@pytest.mark.parametrize(("name", "reference"), BINARY, ids=[n for n, _ in BINARY])
def test_jax_binary_operators_broadcast_like_numpy(
    name: str, reference: Callable[..., Any]
) -> None:
    got = getattr(ops, name)(jnp.asarray(A), jnp.asarray(B))
    assert _is_jax(got)
    np.testing.assert_allclose(np.asarray(got), reference(A, B), rtol=1e-6)


def test_jax_pow_keeps_the_base_dtype() -> None:
    base = np.array([[2.0], [3.0]], dtype=np.float32)
    exponent = np.array([0.5, 2.0, -1.0], dtype=np.float32)
    got = ops.pow(jnp.asarray(base), jnp.asarray(exponent))
    assert _is_jax(got) and got.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got), base**exponent, rtol=1e-6)


def test_jax_integer_div_truncates_toward_zero() -> None:
    # ONNX Div: "truncating division (rounding toward zero)" for integers (SEMANTICS R1).
    a = np.array([-7, 7, -7, 7, -1, 1], dtype=np.int32)
    b = np.array([2, -2, -2, 2, 2, -2], dtype=np.int32)
    got = ops.div(jnp.asarray(a), jnp.asarray(b))
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(got), [-3, -3, 3, 3, 0, 0])


@pytest.mark.parametrize(
    ("name", "reference"),
    [("max", np.maximum), ("min", np.minimum)],
)
def test_jax_max_min_propagate_nan(name: str, reference: Callable[..., Any]) -> None:
    a = np.array([[np.nan], [1.0]], dtype=np.float32)
    b = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    got = getattr(ops, name)(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_array_equal(np.asarray(got), reference(a, b))


def test_jax_variadic_sum_and_mean_broadcast() -> None:
    x, y, z = A, B, np.float32(4.0) * np.ones((3, 1), np.float32)
    got_sum = ops.sum(jnp.asarray(x), jnp.asarray(y), jnp.asarray(z))
    got_mean = ops.mean(jnp.asarray(x), jnp.asarray(y), jnp.asarray(z))
    np.testing.assert_allclose(np.asarray(got_sum), x + y + z, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got_mean), (x + y + z) / 3, rtol=1e-6)


def test_jax_where_and_logical_operators() -> None:
    cond = np.array([[True], [False]])
    got = ops.where(jnp.asarray(cond), jnp.ones((3, 1, 2)), jnp.zeros(2))
    np.testing.assert_array_equal(np.asarray(got), np.where(cond, np.ones((3, 1, 2)), 0.0))
    p, q = np.array([True, False]), np.array([[True], [False]])
    np.testing.assert_array_equal(np.asarray(ops.and_(jnp.asarray(p), jnp.asarray(q))), p & q)
    np.testing.assert_array_equal(np.asarray(ops.or_(jnp.asarray(p), jnp.asarray(q))), p | q)
    np.testing.assert_array_equal(np.asarray(ops.xor(jnp.asarray(p), jnp.asarray(q))), p ^ q)


def test_jax_gemm_prelu_expand_broadcast() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = np.arange(4, dtype=np.float32)
    gemm = ops.gemm(jnp.asarray(a), jnp.asarray(b), jnp.asarray(c), alpha=2.0, beta=0.5)
    np.testing.assert_allclose(np.asarray(gemm), 2.0 * a @ b + 0.5 * c, rtol=1e-6)
    x = np.array([[-1.0, 2.0, -3.0]], dtype=np.float32)
    slope = np.array([0.1, 0.2, 0.3], dtype=np.float32)
    prelu = ops.prelu(jnp.asarray(x), jnp.asarray(slope))
    np.testing.assert_allclose(np.asarray(prelu), np.where(x < 0, x * slope, x), rtol=1e-6)
    expanded = ops.expand(jnp.arange(3.0), (2, 1))
    assert _is_jax(expanded) and expanded.shape == (2, 3)
    explicit = ops.broadcast(jnp.arange(4.0), (2, 4, 3), [1], mode="explicit")
    np.testing.assert_array_equal(
        np.asarray(explicit), np.broadcast_to(np.arange(4.0).reshape(1, 4, 1), (2, 4, 3))
    )


def test_jax_incompatible_shapes_raise_broadcast_error() -> None:
    with pytest.raises(bcast.BroadcastError) as excinfo:
        ops.add(jnp.ones((2, 3)), jnp.ones(4))
    assert excinfo.value.axis == 1


# -- the memory guard and the value checks run on concrete JAX arrays -----------------------


def test_jax_memory_guard_applies() -> None:
    # 10 x 10 float32 = 400 bytes, over a 100-byte limit (as for NumPy operands).
    with ops.memory_limit(100), pytest.raises(ops.MemoryLimitError) as excinfo:
        ops.add(jnp.ones((10, 1), jnp.float32), jnp.ones(10, jnp.float32))
    assert excinfo.value.shape == (10, 10)


def test_jax_integer_div_by_zero_raises_as_for_numpy() -> None:
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        ops.div(np.array([1, 2], np.int32), np.array([0], np.int32))
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        ops.div(jnp.array([1, 2], dtype=jnp.int32), jnp.array([0], dtype=jnp.int32))


def test_jax_integer_zero_to_a_negative_power_raises_as_for_numpy() -> None:
    with pytest.raises(ZeroDivisionError, match="negative integer power"):
        ops.pow(np.array([0, 2], np.int32), np.array([-1], np.int32))
    with pytest.raises(ZeroDivisionError, match="negative integer power"):
        ops.pow(jnp.array([0, 2], dtype=jnp.int32), jnp.array([-1], dtype=jnp.int32))


def test_jax_integer_negative_powers_are_truncated_r7() -> None:
    # onnxruntime's answer: the truncated real power, 0 except for the bases 1 and -1.
    base = np.array([2, -2, 1, -1, -1, 5], np.int32)
    exponent = np.array([-1, -1, -3, -3, -2, -2], np.int32)
    got = ops.pow(jnp.asarray(base), jnp.asarray(exponent))
    np.testing.assert_array_equal(np.asarray(got), [0, 0, 1, -1, 1, 0])


def test_jax_integer_div_and_pow_run_under_jit() -> None:
    # Traced values cannot be read, so the zero checks are skipped inside jax.jit (the
    # documented exception); the values are the same as outside it.
    a = np.array([[-7], [7]], np.int32)
    b = np.array([2, -2, 3], np.int32)
    div = jax.jit(ops.div)(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_array_equal(np.asarray(div), [[-3, 3, -2], [3, -3, 2]])
    pw = jax.jit(ops.pow)(jnp.asarray(a), jnp.asarray(np.array([2, 0, -1], np.int32)))
    np.testing.assert_array_equal(np.asarray(pw), [[49, 1, 0], [49, 1, 0]])
