"""QuantizeLinear and DequantizeLinear: scales that broadcast per tensor, per axis, per block.

The scale and zero point are aligned to ``x`` by bcast's own modes before the element-wise
plan: a scalar broadcasts multidirectionally, a per-axis vector is OpenVINO's explicit
broadcast onto ``axis`` (``axes_mapping=[axis]``, the axis-aligned broadcast PDPD also
expresses), and a blocked scale is each block's scale broadcast along a new axis of the
block's length, then cut to ``x``'s length on ``axis``. ``bcast.plan`` then plans the three
operands and `bcast.engine` runs the kernel.
"""

from __future__ import annotations

from typing import Any

from bcast.arrays.dtypes import dtype_name
from bcast.arrays.libraries import Library, as_operands, shape_of
from bcast.arrays.views import ArrayT, Scalar, broadcast_to
from bcast.core.errors import BroadcastError
from bcast.core.planning import plan
from bcast.core.shape import Shape
from bcast.engine import execute, guard
from bcast.ops._common import scalar_partner
from bcast.ops._dtypes import QUANTIZED, SIGNATURES, bind
from bcast.ops._quant_kernels import dequantize_kernel, narrow_dtype, quantize_kernel

__all__ = ["dequantize_linear", "quantize_linear"]


def _operands(op: str, x: Any, scale: Any, zero_point: Any) -> tuple[Library, list[Any], list[str]]:
    labels = ["x", "scale"] + ([] if zero_point is None else ["zero_point"])
    given = [x, scale] + ([] if zero_point is None else [zero_point])
    lib, arrays = as_operands(given, scalar_partner(SIGNATURES[op], labels), labels)
    names = [dtype_name(v.dtype, lib.xp) for v in arrays]
    bind(op, labels, names)
    return lib, list(arrays), names


def _align(
    op: str, v: Any, label: str, dims: tuple[int, ...], axis: int, block: int, xp: Any
) -> Any:
    """Align a scale or zero point to ``x``'s shape ``dims`` (a view where possible)."""
    shape = shape_of(v)
    if not shape:
        return v  # per tensor: the multidirectional plan broadcasts it
    if shape == (1,):  # one element: per tensor, whatever the axis (the ONNX reference)
        import numpy as np

        return (np if xp is None else xp).reshape(v, ())
    rank = len(dims)
    if not -rank <= axis < rank:
        raise BroadcastError(
            f"{op}: axis {axis} is out of range for x of rank {rank} (-{rank}..{rank - 1})",
            mode="explicit",
            shapes=(Shape(dims), Shape(shape)),
        )
    axis %= rank
    if block < 0:
        raise ValueError(f"{op}: block_size must be 0 or positive; got {block}")
    if not block:
        if len(shape) != 1:
            raise BroadcastError(
                f"{op}: {label} {list(shape)} must be a scalar or a 1-D tensor of x's "
                f"length on axis {axis} (per-axis), or give block_size (blocked)",
                mode="explicit",
                shapes=(Shape(dims), Shape(shape)),
            )
        return broadcast_to(v, dims, mode="explicit", axes_mapping=[axis])
    blocks = -(-dims[axis] // block)
    expected = (*dims[:axis], blocks, *dims[axis + 1 :])
    if shape != expected:
        raise BroadcastError(
            f"{op}: a blocked {label} of x {list(dims)} with block_size {block} on axis "
            f"{axis} has shape {list(expected)}; got {list(shape)}",
            mode="explicit",
            shapes=(Shape(dims), Shape(shape)),
        )
    # The per-element scale is as large as x: the memory guard first, as for a result.
    flat = (*shape[:axis], blocks * block, *shape[axis + 1 :])
    guard.check(op, flat, v.dtype, 4)
    lifted = (*shape[: axis + 1], 1, *shape[axis + 1 :])
    spread = (*shape[: axis + 1], block, *shape[axis + 1 :])
    if xp is None:
        import numpy as np

        repeated = np.reshape(broadcast_to(np.reshape(v, lifted), spread), flat)
    else:
        repeated = xp.reshape(broadcast_to(xp.reshape(v, lifted), spread), flat)
    cut = tuple(slice(0, dims[axis]) if k == axis else slice(None) for k in range(rank))
    return repeated[cut]


def _run(
    op: str,
    lib: Library,
    arrays: list[Any],
    axis: int,
    block: int,
    kernel: Any,
    dtype: Any,
    out: Any,
) -> Any:
    x, *rest = arrays
    if len(rest) == 2 and _granule(shape_of(rest[0])) != _granule(shape_of(rest[1])):
        raise BroadcastError(
            f"{op}: scale {list(shape_of(rest[0]))} and zero_point "
            f"{list(shape_of(rest[1]))} must have the same shape",
            mode="none",
            shapes=(Shape(shape_of(rest[0])), Shape(shape_of(rest[1]))),
        )
    dims = shape_of(x)
    aligned = [x] + [
        _align(op, v, label, dims, axis, block, lib.xp)
        for v, label in zip(rest, ("scale", "zero_point"), strict=False)
    ]
    the_plan = plan(
        *(lib.dims(v) for v in aligned), labels=["x", "scale", "zero_point"][: len(aligned)]
    )
    return execute(op, the_plan, kernel, aligned, dtype=dtype, out=out, lib=lib)


def quantize_linear(
    x: ArrayT,
    scale: ArrayT | Scalar,
    zero_point: ArrayT | Scalar | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
    output_dtype: Any = None,
    saturate: bool = True,
    out: ArrayT | None = None,
) -> ArrayT:
    """Quantize ``x``: ``saturate(round(x / scale) + zero_point)`` (ONNX QuantizeLinear-25).

    ``round`` is half to even. The scale (and the zero point, of the same shape) is a scalar
    or a one-element vector (per tensor), a vector of ``x``'s length on ``axis`` (per axis),
    or, with ``block_size``, ``x``'s shape with ``ceil(x.shape[axis] / block_size)`` on
    ``axis`` (blocked: each scale serves ``block_size`` consecutive elements).

    Parameters
    ----------
    x : array
        float32, float16, bfloat16 or int32 values.
    scale : array or Python float
        float32, float16, bfloat16 or int32 (the division is in float32; float64 when an
        operand is int32).
    zero_point : array, optional
        Of the output type; it sets the output type.
    axis : int, default 1
        The quantization axis for per-axis and blocked scales; negative counts from the end.
    block_size : int, default 0
        The block length of a blocked scale; 0 for per-tensor and per-axis scales.
    output_dtype : dtype or str, optional
        The output type without a zero point (default uint8): int8, uint8, int16, uint16,
        and, NumPy only, through ``ml_dtypes``, int4, uint4, int2, uint2, float8_e4m3fn,
        float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float4_e2m1fn. With a zero point it
        must be the zero point's dtype.
    saturate : bool, default True
        float8 outputs only: clip out-of-range values to the largest finite value (True),
        or convert them as the Cast-19 table says (NaN for e4m3fn, inf for e5m2).
    out : array, optional
        An array of ``x``'s shape and the output dtype to write into; it is returned.

    Returns
    -------
    array
        The quantized array, of ``x``'s shape and library.

    Raises
    ------
    BroadcastError
        If the scale's shape fits none of the three granularities, the zero point's shape
        differs from the scale's, or ``axis`` is out of range.
    TypeError
        If a dtype is not allowed, or ``output_dtype`` contradicts the zero point.
    ValueError
        If ``block_size`` is negative.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> x = np.array([0.0, 2.0, 3.0, 1000.0, -254.0, -1000.0], np.float32)
    >>> bcast.ops.quantize_linear(x, np.float32(2.0), np.uint8(128))
    array([128, 129, 130, 255,   1,   0], dtype=uint8)
    >>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> bcast.ops.quantize_linear(x, np.array([1.0, 2.0, 4.0], np.float32), axis=1)
    array([[0, 0, 0],
           [3, 2, 1]], dtype=uint8)
    """
    lib, arrays, names = _operands("quantize_linear", x, scale, zero_point)
    target = names[2] if zero_point is not None else "uint8"
    if output_dtype is not None:
        wanted = _dtype_name(output_dtype)
        if wanted not in QUANTIZED:
            raise TypeError(
                f"quantize_linear: output_dtype {wanted} is not a quantized type; expected "
                f"one of {', '.join(sorted(QUANTIZED))}"
            )
        if zero_point is not None and wanted != target:
            raise TypeError(
                f"quantize_linear: output_dtype {wanted} differs from the zero point's "
                f"dtype {target}"
            )
        target = wanted
    kernel = quantize_kernel(target, saturate=bool(saturate))
    dtype = narrow_dtype(target) if lib.xp is None else _xp_dtype(lib.xp, target)
    result: ArrayT = _run("quantize_linear", lib, arrays, axis, int(block_size), kernel, dtype, out)
    return result


def dequantize_linear(
    x: ArrayT,
    scale: ArrayT | Scalar,
    zero_point: ArrayT | Scalar | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
    out: ArrayT | None = None,
) -> ArrayT:
    """Dequantize ``x``: ``(x - zero_point) * scale`` (ONNX DequantizeLinear-25).

    Computed in float32 and rounded once to the scale's dtype. Scales and zero points
    broadcast as in `quantize_linear` (per tensor, per axis, blocked).

    Parameters
    ----------
    x : array
        int8, uint8, int16, uint16, int32, or (NumPy, ``ml_dtypes``) int4, uint4, int2,
        uint2, float8 and float4e2m1 values.
    scale : array or Python float
        float32, float16 or bfloat16; the result has its dtype.
    zero_point : array, optional
        Of ``x``'s dtype (none for int32 in ONNX; if given, it is subtracted).
    axis, block_size
        As `quantize_linear`.
    out : array, optional
        An array of ``x``'s shape and the scale's dtype to write into; it is returned.

    Returns
    -------
    array
        The dequantized array, of ``x``'s shape and library.

    Raises
    ------
    BroadcastError
        If the scale's shape fits none of the granularities (as `quantize_linear`).
    TypeError
        If a dtype is not allowed or the zero point's dtype is not ``x``'s.

    Examples
    --------
    >>> import bcast
    >>> import numpy as np
    >>> x = np.array([[0, 3], [128, 255]], np.uint8)
    >>> scale, zero_point = np.array([2.0, 0.5], np.float32), np.array([128, 0], np.uint8)
    >>> bcast.ops.dequantize_linear(x, scale, zero_point, axis=0)
    array([[-256. , -250. ],
           [  64. ,  127.5]], dtype=float32)
    """
    lib, arrays, names = _operands("dequantize_linear", x, scale, zero_point)
    target = names[1] if names[1] != "float8_e8m0fnu" else "float32"
    dtype = narrow_dtype(target) if lib.xp is None else _xp_dtype(lib.xp, target)
    result: ArrayT = _run(
        "dequantize_linear", lib, arrays, axis, int(block_size), dequantize_kernel(), dtype, out
    )
    return result


def _granule(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Return the shape a scale or zero point counts as: ``[1]`` is per tensor, as ``[]``."""
    return () if shape == (1,) else shape


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str):
        return dtype
    import numpy as np

    try:
        return dtype_name(np.dtype(dtype))
    except TypeError:
        return str(dtype).rsplit(".", 1)[-1]  # torch.int8 -> "int8"


def _xp_dtype(xp: Any, name: str) -> Any:
    dtype = getattr(xp, name, None)
    if dtype is None:
        raise TypeError(
            f"{name} needs NumPy arrays (ml_dtypes); the operands' library has no {name}"
        )
    return dtype
