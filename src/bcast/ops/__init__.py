"""Operators: one function per ONNX / OpenVINO operator, broadcasting by the specifications.

Every operator checks its dtypes against one table (`bcast.ops._dtypes`, from the ONNX
schemas), plans its broadcast with `bcast.plan`, and runs in one engine (`bcast.engine`)
that allocates the result once, after the memory guard, or writes into ``out=``. NumPy
arrays and any array-API array (PyTorch, CuPy, JAX, Dask, array-api-strict) work; the
result is of the operands' library.

>>> import bcast
>>> import numpy as np
>>> bcast.ops.add(np.ones((2, 1)), np.arange(3.0))
array([[1., 2., 3.],
       [1., 2., 3.]])
"""

from __future__ import annotations

from bcast.engine.guard import MemoryLimitError, get_memory_limit, memory_limit, set_memory_limit
from bcast.ops._binary import add, and_, div, equal, greater, less, mul, or_, pow, sub, xor
from bcast.ops._elementwise import (
    bit_shift,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    greater_or_equal,
    less_or_equal,
    mod,
    not_equal,
    squared_difference,
)
from bcast.ops._materialise import broadcast, expand
from bcast.ops._nary import max, mean, min, sum, where
from bcast.ops._quant import dequantize_linear, quantize_linear
from bcast.ops._select import fake_quantize, select
from bcast.ops._unidirectional import gemm, prelu

__all__ = [
    # binary, with auto_broadcast
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "equal",
    "greater",
    "less",
    "and_",
    "or_",
    "xor",
    "mod",
    "bit_shift",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "greater_or_equal",
    "less_or_equal",
    "not_equal",
    "squared_difference",
    # variadic and ternary
    "max",
    "min",
    "mean",
    "sum",
    "where",
    "select",
    # quantization
    "quantize_linear",
    "dequantize_linear",
    "fake_quantize",
    # unidirectional
    "gemm",
    "prelu",
    # materialising
    "expand",
    "broadcast",
    # memory guard
    "MemoryLimitError",
    "get_memory_limit",
    "memory_limit",
    "set_memory_limit",
]

MemoryLimitError.__module__ = __name__  # shown by its public path: bcast.ops.MemoryLimitError
