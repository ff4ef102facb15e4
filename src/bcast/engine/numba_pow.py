"""float32 Pow for the compiled walker: ``2 ** (y * log2 x)`` in float64, rounded once.

Part of `bcast.engine.numba_kernels` (imported only with it, only when numba is installed).
"""

from __future__ import annotations

import math
from typing import Any, Final

import llvmlite.ir as ir
import numpy as np
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["pow_float32", "pow_special"]

# glibc's powf (NumPy's) is a scalar call per element. Here the logarithm and the exponential
# are polynomials in float64 (relative error about 1e-15, far below float32's 6e-8), with the
# exponent and mantissa taken from the bits: plain arithmetic, which LLVM vectorises. Only
# positive normal finite bases with finite exponents take it; `pow_special` finds the rest
# (zeros, negatives, subnormals, inf, NaN), which the walker recomputes with powf itself.

# Series coefficients, lowest power first, padded with zeros to the 16 that `_estrin` takes.
# Truncation errors: log 2e-14 (|s| < 0.172), exp 7e-15 (|f| < 0.347); float32 keeps 6e-8.
_LOG_TERMS: Final = tuple(1.0 / (2 * k + 1) if k < 9 else 0.0 for k in range(16))  # atanh, s**2
_EXP_TERMS: Final = tuple(1.0 / math.factorial(k) if k < 13 else 0.0 for k in range(16))  # exp
_LN2: Final = math.log(2.0)
_ROUND: Final = 1.5 * 2.0**52  # t + _ROUND: t rounded to an integer, in the low bits
_ROUND_BITS: Final = 0x4338000000000000  # the bits of _ROUND
_SQRT2_MANTISSA: Final = 0x3504F3  # mantissa bits above which 1.m exceeds sqrt(2)


def _bitcast(source: Any, target: Any, bits: Any) -> Any:
    """Build an intrinsic that reads a ``source`` value's bits as a ``target`` (LLVM ``bits``)."""

    @intrinsic
    def cast(typingctx: Any, value: Any) -> Any:
        if value != source:
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.bitcast(args[0], bits)

        return target(value), codegen

    return cast


_float32_bits = _bitcast(types.float32, types.int32, ir.IntType(32))
_float64_bits = _bitcast(types.float64, types.int64, ir.IntType(64))
_float64_of_bits = _bitcast(types.int64, types.float64, ir.DoubleType())


@njit(inline="always")
def pow_special(x: Any, y: Any) -> Any:
    """Tell whether ``x ** y`` needs powf: x not positive, normal and finite, or y not finite."""
    bits = _float32_bits(x)
    return (bits <= 0x007FFFFF) | (bits >= 0x7F800000) | (not abs(y) < math.inf)


@njit(inline="always")
def _estrin(x: Any, c: Any) -> Any:
    """Return the polynomial with the 16 coefficients ``c`` (lowest first) at ``x``.

    Estrin's scheme: pairs, then pairs of pairs, so the chain of dependent multiply-adds
    is 4 long instead of ``len(c)`` (Horner's); the vectorised loop runs at throughput.
    """
    x2 = x * x
    x4 = x2 * x2
    x8 = x4 * x4
    p0 = (c[0] + c[1] * x) + (c[2] + c[3] * x) * x2
    p1 = (c[4] + c[5] * x) + (c[6] + c[7] * x) * x2
    p2 = (c[8] + c[9] * x) + (c[10] + c[11] * x) * x2
    p3 = (c[12] + c[13] * x) + (c[14] + c[15] * x) * x2
    return (p0 + p1 * x4) + (p2 + p3 * x4) * x8


def pow_float32(x: Any, y: Any, z: Any) -> Any:
    """Return ``x ** y`` of positive normal float32 ``x`` and finite ``y`` (not `pow_special`)."""
    # No conversion between floats and 64-bit integers (AVX2 has none): the exponent goes
    # through int32, and 2 ** round(t) is built from the bits of t + 1.5 * 2**52.
    bits = _float32_bits(x)
    mantissa_bits = bits & 0x007FFFFF
    high = mantissa_bits > _SQRT2_MANTISSA  # fold 1.m into [sqrt(1/2), sqrt(2))
    exponent = np.float64(np.int32((bits >> 23) - 127 + high))
    mantissa = np.float64(np.int32(mantissa_bits)) * 2.0**-23 + 1.0
    mantissa = mantissa * (1.0 - 0.5 * high)  # halved when high (exact; no branch)
    s = (mantissa - 1.0) / (mantissa + 1.0)  # log(m) = 2 atanh(s)
    s2 = s * s
    series = _estrin(s2, _LOG_TERMS)
    t = np.float64(y) * (exponent + (2.0 / _LN2) * s * series)  # y * log2(x)
    t = min(max(t, -200.0), 200.0)  # beyond: 0 or inf in float32 all the same
    shifted = t + _ROUND
    f = (t - (shifted - _ROUND)) * _LN2  # |f| <= ln(2) / 2
    power = _estrin(f, _EXP_TERMS)
    scale = _float64_of_bits((_float64_bits(shifted) - _ROUND_BITS + 1023) << 52)
    return np.float32(power * scale)
