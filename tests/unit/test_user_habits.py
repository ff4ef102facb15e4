"""What users of NumPy and the array API do on their first day: scalars, ints, reprs, limits.

Expected values come from NumPy (NEP 50: a Python scalar takes the array's dtype) and the
array API standard 2024.12, never from bcast itself.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

import bcast
import bcast.ops as ops
from bcast import Dim, Shape
from bcast.ops import MemoryLimitError

# -- NumPy scalars are 0-d NumPy arrays ----------------------------------------------------


def test_numpy_scalar_operand_is_a_0d_array() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = ops.div(x, x.max())
    np.testing.assert_array_equal(got, x / x.max())
    assert got.dtype == np.float32 and type(got) is np.ndarray


def test_numpy_scalar_of_another_dtype_is_a_dtype_mismatch() -> None:
    # A NumPy scalar is an array with a dtype (not a weak Python scalar): ONNX's rule applies.
    with pytest.raises(TypeError, match="same dtype"):
        ops.add(np.ones(2, np.float32), np.float64(1.0))


def test_numpy_scalars_without_array_api_compat() -> None:
    # The core install has no array-api-compat: a NumPy scalar must not need it.
    code = (
        "import sys; sys.modules['array_api_compat'] = None\n"
        "import numpy as np, bcast, bcast.ops as ops\n"
        "x = np.arange(4.0)\n"
        "print(ops.div(x, x.max()).tolist(), ops.add(x, np.float64(1))[0],\n"
        "      bcast.broadcast_to(np.float32(2), (2,)).tolist(), ops.expand(np.int64(3), [2]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[0.0,", "0.3333333333333333,", "0.6666666666666666,", "1.0]",
                                  "1.0", "[2.0,", "2.0]", "[3", "3]"]  # fmt: skip


def test_foreign_array_without_the_extra_names_it() -> None:
    code = (
        "import sys; sys.modules['array_api_compat'] = None\n"
        "import bcast\n"
        "class Fake:\n"
        "    shape = (2,)\n"
        "    dtype = 'float32'\n"
        "bcast.broadcast_to(Fake(), (3, 2))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1
    assert "ModuleNotFoundError" in out.stderr
    assert 'pip install "bcast[arrays]"' in out.stderr


# -- Python scalars: the array API rule ----------------------------------------------------

SCALAR_CASES = [
    ("add", np.float32, 2.5),
    ("sub", np.int16, 3),
    ("mul", np.uint8, 2),
    ("div", np.float64, 4),
    ("pow", np.float32, 2),
    ("equal", np.int32, 1),
    ("greater", np.float16, 0.5),
    ("less", np.int64, -1),
]

NUMPY_UFUNC = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "pow": np.power,
    "equal": np.equal,
    "greater": np.greater,
    "less": np.less,
}


@pytest.mark.parametrize(("op", "dtype", "scalar"), SCALAR_CASES)
def test_python_scalar_takes_the_array_dtype(op: str, dtype: Any, scalar: Any) -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=dtype)
    expected = NUMPY_UFUNC[op](x, scalar)  # NumPy 2 (NEP 50): the scalar is weak
    if op == "div" and np.dtype(dtype).kind in "iu":
        expected = (x / scalar).astype(dtype)
    for got in (getattr(ops, op)(x, scalar), getattr(ops, op)(x.copy(), scalar)):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    flipped = getattr(ops, op)(scalar, x)
    assert flipped.dtype == NUMPY_UFUNC[op](scalar, x).dtype


def test_python_scalars_in_variadic_ternary_unidirectional_and_views() -> None:
    x = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    assert ops.max(x, 0.0).dtype == np.float32
    np.testing.assert_array_equal(ops.max(x, 0.0), np.maximum(x, np.float32(0)))
    np.testing.assert_array_equal(ops.where(x > 0, x, 0.0), np.where(x > 0, x, np.float32(0)))
    np.testing.assert_allclose(ops.prelu(x, 0.5), np.where(x < 0, x * 0.5, x))
    assert ops.prelu(x, 0.5).dtype == np.float32
    np.testing.assert_array_equal(ops.gemm(x, x, 1.0), x @ x + 1)
    _a, b = bcast.broadcast_arrays(x, 2.0)
    assert b.shape == (2, 2) and b.dtype == np.float32


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: ops.add(np.ones(2, np.uint8), 300), OverflowError, "300 does not fit in uint8"),
        (lambda: ops.add(np.ones(2, np.int8), -129), OverflowError, "does not fit in int8"),
        (lambda: ops.add(np.ones(2, np.float16), 10**6), OverflowError, "float16"),
        (lambda: ops.add(np.ones(2, np.int32), 1.5), TypeError, "Python float cannot take"),
        (lambda: ops.add(np.ones(2), True), TypeError, "Python bool cannot take"),
        (lambda: ops.and_(np.ones(2, bool), 1), TypeError, "Python int cannot take"),
        (lambda: ops.add(1, 2), TypeError, "at least one operand must be an array"),
        (lambda: ops.where(np.ones(2, bool), 1.0, 2.0), TypeError, "array API rule"),
        (lambda: bcast.broadcast_to(2.0, (3,)), TypeError, "at least one operand"),
    ],
)
def test_python_scalars_that_break_the_rule(call: Any, error: type, match: str) -> None:
    # The array API: at least one array; a float never meets an integer array; an int that
    # does not fit is an error (NumPy 2 raises OverflowError for it as well).
    with pytest.raises(error, match=match):
        call()


def test_python_int_in_range_on_the_full_path() -> None:
    x = np.array([1, 2], np.uint16)
    got = ops.add(x, 60000)  # not a "small" int: checked exactly on the full path
    np.testing.assert_array_equal(got, np.add(x, 60000))
    assert got.dtype == np.uint16


def test_python_scalar_with_torch_keeps_library_and_dtype() -> None:
    torch = pytest.importorskip("torch")
    t = torch.ones(3, dtype=torch.float16)
    got = ops.add(t, 2)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float16
    assert got.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(OverflowError, match="int8"):
        ops.add(torch.ones(3, dtype=torch.int8), 200)


# -- names and values ----------------------------------------------------------------------


def test_broadcast_to_takes_shape_by_keyword_and_position() -> None:
    x = np.arange(3)
    assert bcast.broadcast_to(x, shape=(2, 3)).shape == np.broadcast_to(x, shape=(2, 3)).shape
    assert bcast.broadcast_to(x, (2, 3)).shape == (2, 3)


def test_static_dims_are_ints_for_numpy() -> None:
    shape = bcast.broadcast_shapes((2, 1), (3,))
    assert np.zeros(shape).shape == np.zeros(np.broadcast_shapes((2, 1), (3,))).shape
    assert int(Dim(3)) == 3 and list(range(Dim(2))) == [0, 1]
    assert np.ones(3)[Dim(1)] == 1.0
    with pytest.raises(TypeError, match="no single value"):
        np.zeros(Shape.parse("[N,2]"))
    with pytest.raises(TypeError):
        int(Dim(1, 10))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Dim(3), "Dim(3)"),
        (Dim(1, 10), "Dim(1, 10)"),
        (Dim(0, None), "Dim(0, None)"),
        (Dim(2, None), "Dim(2, None)"),
        (Dim.symbol("N"), "Dim.symbol('N')"),
        (Shape.parse("[2,?]"), "Shape.parse('[2,?]')"),
        (Shape.dynamic(), "Shape.parse('[...]')"),
    ],
)
def test_reprs_evaluate_back(value: object, text: str) -> None:
    assert repr(value) == text
    assert eval(text, {"Dim": Dim, "Shape": Shape}) == value


def test_memory_limit_is_scoped_to_the_thread() -> None:
    x, y = np.ones((100, 1)), np.ones(100)
    limited_inside = threading.Event()
    other_done = threading.Event()
    seen: dict[str, object] = {}

    def limited() -> None:
        with ops.memory_limit(1000):
            try:
                ops.add(x, y)
            except MemoryLimitError:
                seen["limited"] = "raised"
            limited_inside.set()
            other_done.wait(10)  # keep the limit in force while the other thread computes

    def other() -> None:
        limited_inside.wait(10)
        try:
            seen["other"] = ops.add(x, y).shape
        except MemoryLimitError as err:
            seen["other"] = err
        seen["other_limit"] = ops.get_memory_limit()
        other_done.set()

    threads = [threading.Thread(target=limited), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen["limited"] == "raised"
    assert seen["other"] == (100, 100)
    assert seen["other_limit"] != 1000
    assert ops.get_memory_limit() != 1000  # nor in this thread, after the block


def test_memory_limit_still_applies_to_tiny_results_in_its_context() -> None:
    # The tiny fast path skips the guard only where no small limit is in force.
    with ops.memory_limit(8), pytest.raises(MemoryLimitError):
        ops.add(np.ones(4), np.ones(4))
    assert ops.add(np.ones(4), np.ones(4)).shape == (4,)
