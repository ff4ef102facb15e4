"""The quantization kernels: QuantizeLinear, DequantizeLinear, OpenVINO FakeQuantize.

The narrow ONNX types (int4, uint4, int2, uint2, float8, float4e2m1) are ``ml_dtypes``
dtypes of NumPy arrays; ``ml_dtypes`` is imported here only, when one of them is named.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from bcast.engine import Kernel
from bcast.ops._dtypes import FLOAT8, NARROW

__all__ = [
    "INTEGER_RANGES",
    "dequantize_kernel",
    "fake_quantize_kernel",
    "narrow_dtype",
    "quantize_kernel",
]

INTEGER_RANGES: Final = {
    "uint8": (0, 255),
    "int8": (-128, 127),
    "uint16": (0, 65535),
    "int16": (-32768, 32767),
    "uint4": (0, 15),
    "int4": (-8, 7),
    "uint2": (0, 3),
    "int2": (-2, 1),
}
"""QuantizeLinear's saturation range of each integer output type (the operator text)."""

_ML_DTYPES: Final = NARROW | {"float8_e8m0fnu", "bfloat16"}
"""The dtype names that are ``ml_dtypes``' (the narrow ONNX types, e8m0 scales, bfloat16)."""


def narrow_dtype(name: str) -> np.dtype[Any]:
    """Return the NumPy dtype of a dtype name, ``ml_dtypes``' for the narrow ONNX types."""
    if name in _ML_DTYPES:
        import ml_dtypes

        found: np.dtype[Any] = np.dtype(getattr(ml_dtypes, name))
        return found
    return np.dtype(name)


def _precision(*dtypes: Any) -> Any:
    """float64 where an operand is int32 (exact), else float32 (QuantizeLinear's division)."""
    return np.float64 if any(np.dtype(d) == np.int32 for d in dtypes) else np.float32


def quantize_kernel(out_name: str, *, saturate: bool) -> Kernel:
    """``y = saturate(round_half_even(x / scale) + zero_point)`` into ``out``'s dtype.

    The division is in float32 (float64 for int32 operands): float16 and bfloat16 scales
    are widened, as the ONNX reference does. Integer outputs clip to the type's range (NaN
    gives its low end, as onnxruntime and the reference do). float8 outputs clip to the
    largest finite value when ``saturate`` (NaN stays NaN), else convert as ``ml_dtypes``
    does (out of range: NaN for e4m3fn, inf for e5m2, the Cast-19 table). The zero point
    is added for every output type, as the formula says ("usually not used" for float8 and
    4-bit types; the ONNX reference skips a float8 one).
    """
    integer = out_name in INTEGER_RANGES
    target = narrow_dtype(out_name)

    def scaled(x: Any, scale: Any) -> Any:
        wide = _precision(x.dtype, scale.dtype)
        return np.divide(x, scale, dtype=wide, casting="unsafe")

    def run_numpy(out: Any, x: Any, scale: Any, *zero_point: Any) -> None:
        q = scaled(x, scale)
        if integer:
            np.rint(q, out=q)
        if zero_point:
            q += zero_point[0].astype(q.dtype)
        if integer:
            low, high = INTEGER_RANGES[out_name]
            np.clip(q, low, high, out=q)
            np.copyto(q, low, where=np.isnan(q))  # NaN: the low end, as both ONNX peers
        elif saturate and out_name in FLOAT8:
            import ml_dtypes

            big = float(ml_dtypes.finfo(target).max)  # type: ignore[no-untyped-call]
            np.clip(q, -big, big, out=q)
        out[...] = q.astype(target)

    def run_generic(xp: Any, x: Any, scale: Any, *zero_point: Any) -> Any:
        if not integer:
            raise TypeError(f"quantize_linear: {out_name} output needs NumPy arrays (ml_dtypes)")
        wide = xp.float64 if xp.int32 in (x.dtype, scale.dtype) else xp.float32
        q = xp.round(xp.astype(x, wide) / xp.astype(scale, wide))
        if zero_point:
            q = q + xp.astype(zero_point[0], wide)
        low, high = INTEGER_RANGES[out_name]
        q = xp.clip(q, float(low), float(high))
        return xp.where(xp.isnan(q), xp.full_like(q, float(low)), q)

    return Kernel(run_numpy, run_generic, cost=8.0, passes=4)


def dequantize_kernel() -> Kernel:
    """``y = (x - zero_point) * scale`` in float32, rounded once to the output dtype.

    The formula applies to every input type, float8 and float4e2m1 included (the ONNX
    reference refuses a non-zero float8 zero point and skips a float4e2m1 one).
    """

    def run_numpy(out: Any, x: Any, scale: Any, *zero_point: Any) -> None:
        dx = x.astype(np.float32)
        if zero_point:
            dx -= zero_point[0].astype(np.float32)
        y = dx * scale.astype(np.float32)
        out[...] = y.astype(out.dtype)

    def run_generic(xp: Any, x: Any, scale: Any, *zero_point: Any) -> Any:
        dx = xp.astype(x, xp.float32)
        if zero_point:
            dx = dx - xp.astype(zero_point[0], xp.float32)
        return dx * xp.astype(scale, xp.float32)

    return Kernel(run_numpy, run_generic, cost=4.0, passes=3)


def fake_quantize_kernel(levels: int) -> Kernel:
    """OpenVINO FakeQuantize-1, in float32 (float64 for float64 data), rounded once.

    ``x <= min(in_low, in_high)``: out_low; ``x > max(in_low, in_high)``: out_high;
    otherwise ``round((x - in_low) / (in_high - in_low) * (levels - 1)) / (levels - 1) *
    (out_high - out_low) + out_low``, rounding half to even (OpenVINO's reference uses
    ``std::nearbyint``).
    """
    steps = float(levels - 1)

    def formula(xp: Any, x: Any, il: Any, ih: Any, ol: Any, oh: Any) -> Any:
        q = xp.round((x - il) / (ih - il) * steps) / steps * (oh - ol) + ol
        low = xp.where(il < ih, il, ih)
        high = xp.where(il < ih, ih, il)
        return xp.where(x <= low, ol + 0 * q, xp.where(x > high, oh + 0 * q, q))

    def run_numpy(out: Any, *operands: Any) -> None:
        wide = np.float64 if out.dtype == np.float64 else np.float32
        with np.errstate(all="ignore"):
            y = formula(np, *(np.asarray(v, dtype=wide) for v in operands))
        out[...] = y.astype(out.dtype)

    def run_generic(xp: Any, *operands: Any) -> Any:
        wide = xp.float64 if operands[0].dtype == xp.float64 else xp.float32
        return formula(xp, *(xp.astype(v, wide) for v in operands))

    return Kernel(run_numpy, run_generic, cost=16.0, passes=6)
