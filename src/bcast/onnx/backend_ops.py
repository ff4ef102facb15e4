"""The `bcast.onnx.backend` handlers of the operators of ONNX opset 10+ (issue 38).

Mod, BitShift, QuantizeLinear and DequantizeLinear read attributes the other handlers do
not (``fmod``, ``direction``, ``axis``, ``block_size``, ``output_dtype``, ``saturate``,
``precision``); the narrow ONNX types arrive and leave as ``ml_dtypes`` arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from onnx import helper

from bcast import ops

__all__ = ["OPSET_28", "bit_shift", "dequantize_linear", "mod", "quantize_linear"]

Array = npt.NDArray[Any]


def _present(inputs: Sequence[Array | None], count: int) -> list[Array]:
    """Return exactly ``count`` inputs, all present (ONNX marks a missing one with "")."""
    if len(inputs) != count or any(x is None for x in inputs):
        raise ValueError(f"expected {count} inputs; got {len(inputs)}")
    return [x for x in inputs if x is not None]


OPSET_28: Final = 28
"""Mod-28 defines ``fmod=0`` for floats; BitShift-28 takes signed types (both: onnx 1.23)."""


def mod(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
    """Run Mod: ``fmod`` 0 (floor) or 1 (truncation).

    Before opset 28, Mod-10 and Mod-13 require ``fmod=1`` for floating-point inputs ("If
    the input type is floating point, then fmod attribute must be set to 1"): such a node
    is refused, as onnxruntime refuses it. From opset 28 it is the floor remainder.
    """
    a, b = _present(inputs, 2)
    fmod = int(attrs.get("fmod", 0))
    if fmod == 0 and opset < OPSET_28 and np.asarray(a).dtype.kind == "f":
        raise ValueError(
            f"Mod-{10 if opset < 13 else 13} (opset {opset}) requires fmod=1 for "
            f"floating-point inputs; got {np.asarray(a).dtype} with fmod=0 (Mod-28 defines it)"
        )
    return np.asarray(ops.mod(a, b, fmod=fmod))


def bit_shift(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
    """Run BitShift: ``direction`` is ``b"LEFT"`` or ``b"RIGHT"``.

    Before opset 28 BitShift-11 takes unsigned integers only: a signed input is refused.
    Its shift counts of the dtype's width or more have no defined value there; bcast gives
    BitShift-28's (0, or -1 for a right shift of a negative value).
    """
    a, b = _present(inputs, 2)
    if opset < OPSET_28 and np.asarray(a).dtype.kind == "i":
        raise TypeError(
            f"BitShift-11 (opset {opset}) takes unsigned integers only; got "
            f"{np.asarray(a).dtype} (BitShift-28 allows signed types)"
        )
    direction = attrs.get("direction", b"")
    if isinstance(direction, bytes):
        direction = direction.decode()
    return np.asarray(ops.bit_shift(a, b, direction=str(direction)))


def _quantize_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {"axis": int(attrs.get("axis", 1)), "block_size": int(attrs.get("block_size", 0))}


def _onnx_dtype(elem: int) -> np.dtype[Any]:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem))


def quantize_linear(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
    """Run QuantizeLinear; ``precision`` (opset 23+) converts x and the scale first."""
    x, scale = _present(inputs[:2], 2)
    zero_point = inputs[2] if len(inputs) > 2 else None
    precision = int(attrs.get("precision", 0))
    if precision:  # QuantizeLinear-23+: the division's type
        x, scale = x.astype(_onnx_dtype(precision)), scale.astype(_onnx_dtype(precision))
    output = int(attrs.get("output_dtype", 0))
    return np.asarray(
        ops.quantize_linear(
            x,
            scale,
            zero_point,
            output_dtype=_onnx_dtype(output) if output else None,
            saturate=bool(attrs.get("saturate", 1)),
            **_quantize_attrs(attrs),
        )
    )


def dequantize_linear(inputs: list[Array | None], attrs: dict[str, Any], opset: int) -> Array:
    """Run DequantizeLinear; ``output_dtype`` (opset 23+) rounds the float32 result once."""
    x, scale = _present(inputs[:2], 2)
    zero_point = inputs[2] if len(inputs) > 2 else None
    output = int(attrs.get("output_dtype", 0))
    if output:  # DequantizeLinear-23+: computed in float32, rounded once to output_dtype
        scale = scale.astype(np.float32)
    y = np.asarray(ops.dequantize_linear(x, scale, zero_point, **_quantize_attrs(attrs)))
    return y.astype(_onnx_dtype(output)) if output else y
