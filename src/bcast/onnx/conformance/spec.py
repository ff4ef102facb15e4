"""What the ONNX operator texts leave undefined, and how close a runtime's value must be.

`UNDEFINED` is the spec table of ``bcast conformance``: each entry names the operators and
element types it covers, quotes the operator text that gives no value, and marks the output
elements that text leaves open (`undefined_mask`). Where a runtime differs from bcast only
there, the verdict is ``spec_undefined``: cited, never counted as a defect. `ulps` is the
tolerance table: integers, bools and shapes exact, floats within a per-operator bound in
units in the last place, NaN matching NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from bcast.onnx.conformance.values import iinfo, is_float

__all__ = ["TOLERANCE_ULPS", "UNDEFINED", "Undefined", "sanitize", "ulps", "undefined_mask"]

Array = npt.NDArray[Any]


@dataclass(frozen=True, slots=True)
class Undefined:
    """One row of the spec table: where an operator's text gives no value."""

    key: str
    ops: frozenset[str]
    kinds: str  # "i": integer inputs, "f": float inputs (the operand that decides)
    citation: str
    mask: Callable[[Sequence[Array], dict[str, Any]], Array]


def _integer(x: Array) -> bool:
    return x.dtype.kind in "iu"


def _wide(x: Array) -> Array:
    return np.asarray(x).astype(object)


def _out_of_range(exact: Array, dtype: np.dtype[Any]) -> Array:
    info = iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    return np.asarray(np.vectorize(lambda v: not lo <= v <= hi, otypes=[bool])(exact), bool)


def _zero_divisor(args: Sequence[Array], attrs: dict[str, Any]) -> Array:
    a, b = np.broadcast_arrays(*args[:2])
    return np.asarray(b == 0) | _overflow_div(a, b)


def _overflow_div(a: Array, b: Array) -> Array:
    if a.dtype.kind != "i" or a.size == 0:
        return np.zeros(a.shape, bool)
    return np.asarray((a == iinfo(a.dtype).min) & (b == -1))


def _overflow(op: str) -> Callable[[Sequence[Array], dict[str, Any]], Array]:
    def mask(args: Sequence[Array], attrs: dict[str, Any]) -> Array:
        a, b = np.broadcast_arrays(*args[:2])
        if a.size == 0:
            return np.zeros(a.shape, bool)
        x, y = _wide(a), _wide(b)
        if op == "PRelu":  # slope * x where x < 0
            exact = np.where(np.asarray(a < 0), x * y, x)
        else:
            exact = {"Add": x + y, "Sub": x - y, "Mul": x * y}[op]
        return _out_of_range(exact, a.dtype)

    return mask


def _pow(args: Sequence[Array], attrs: dict[str, Any]) -> Array:
    a, b = np.broadcast_arrays(*args[:2])
    if a.size == 0:
        return np.zeros(a.shape, bool)
    if is_float(b.dtype):  # NaN, inf and fractions have no integer power
        e = b.astype(np.float64)
        bad = ~np.isfinite(e) | (np.trunc(e) != e) | (e < 0) | (np.abs(e) > 64)
        whole = np.where(bad, 0, e).astype(np.int64)
    else:
        bad = np.asarray(_wide(b) < 0) | np.asarray(_wide(b) > 64)
        whole = np.where(bad, 0, b).astype(np.int64)
    exact = np.vectorize(lambda p, q: int(p) ** int(q), otypes=[object])(_wide(a), whole)
    return np.asarray(bad | _out_of_range(exact, a.dtype), bool)


def _shift(args: Sequence[Array], attrs: dict[str, Any]) -> Array:
    a, b = np.broadcast_arrays(*args[:2])
    width = iinfo(a.dtype).bits
    return np.asarray(b >= width)


def _nan_any(args: Sequence[Array], attrs: dict[str, Any]) -> Array:
    arrays = np.broadcast_arrays(*args)
    mask = np.zeros(arrays[0].shape, bool)
    for x in arrays:
        mask |= np.isnan(x.astype(np.float32))
    return mask


def _nan_to_integer(args: Sequence[Array], attrs: dict[str, Any]) -> Array:
    x = args[0]
    return np.asarray(np.isnan(x.astype(np.float32)))


UNDEFINED: Final = (
    Undefined(
        "integer-division-by-zero",
        frozenset({"Div", "Mod"}),
        "i",
        "Div-14: 'For integer inputs, the result is computed using truncating division "
        "(rounding toward zero)'; Mod-13 (fmod=0): 'the semantics follow that of the Python "
        "%-operator'. Neither gives a value for a zero divisor, nor for the minimum integer "
        "divided by -1, whose quotient T cannot hold.",
        _zero_divisor,
    ),
    Undefined(
        "integer-overflow",
        frozenset({"Add", "Sub", "Mul", "PRelu"}),
        "i",
        "Add-14, Sub-14, Mul-14: 'Performs element-wise binary addition' (subtraction, "
        "multiplication); PRelu-16: 'f(x) = slope * x for x < 0'. The output has type T and "
        "the texts give no value when the exact result does not fit T (wrap-around is not "
        "stated).",
        lambda args, attrs: np.zeros(0, bool),  # replaced per op below
    ),
    Undefined(
        "integer-power",
        frozenset({"Pow"}),
        "i",
        "Pow-15: 'f(x) = x^exponent' with the output of the base's type T: a negative or "
        "fractional exponent, or a power T cannot hold, has no value of type T.",
        _pow,
    ),
    Undefined(
        "shift-count-at-least-width",
        frozenset({"BitShift"}),
        "i",
        "BitShift-11: the text moves the binary representation by Y bits and gives no value "
        "for a count of at least the width of T (BitShift-28 defines it; these models are "
        "of an opset below 28).",
        _shift,
    ),
    Undefined(
        "nan-in-max-min",
        frozenset({"Max", "Min"}),
        "f",
        "Max-13, Min-13: 'Element-wise max (min) of each of the input tensors'; the text does "
        "not say which value a NaN operand gives.",
        _nan_any,
    ),
    Undefined(
        "nan-quantized-to-integer",
        frozenset({"QuantizeLinear"}),
        "f",
        "QuantizeLinear-21: 'y = saturate((x / y_scale) + y_zero_point)' with saturation to "
        "the integer range; the text gives no integer for a NaN x.",
        _nan_to_integer,
    ),
)
"""The spec table: each place an operator's text gives no value (see `undefined_mask`)."""

_OVERFLOW: Final = {op: _overflow(op) for op in ("Add", "Sub", "Mul", "PRelu")}


def undefined_mask(
    op: str, args: Sequence[Array], attrs: dict[str, Any], out_dtype: np.dtype[Any] | None
) -> tuple[Array | None, list[str]]:
    """Return the output elements the operator text leaves open, and the spec keys that apply.

    Parameters
    ----------
    op : str
        The ONNX operator.
    args : sequence of numpy.ndarray
        Its inputs, in order.
    attrs : dict
        Its attributes.
    out_dtype : numpy.dtype or None
        The output's element type (QuantizeLinear: integer or float8).

    Returns
    -------
    (numpy.ndarray or None, list of str)
        A boolean array of the output's shape (None when nothing is undefined) and the keys
        of `UNDEFINED` whose rows marked something.

    Examples
    --------
    >>> import numpy as np
    >>> mask, keys = undefined_mask("Div", [np.array([1, 2]), np.array([0, 1])], {}, None)
    >>> mask.tolist(), keys
    ([True, False], ['integer-division-by-zero'])
    """
    if not args or any(a.size == 0 for a in args):
        return None, []
    total: Array | None = None
    keys = []
    first = args[0]
    for row in UNDEFINED:
        if op not in row.ops:
            continue
        if row.kinds == "i" and not _integer(first):
            continue
        if row.kinds == "f" and not is_float(first.dtype):
            continue
        if row.key == "nan-quantized-to-integer" and (
            out_dtype is None or np.dtype(out_dtype).kind not in "iu"
        ):
            continue
        mask = (
            _OVERFLOW[op](args, attrs) if row.key == "integer-overflow" else row.mask(args, attrs)
        )
        if mask.any():
            keys.append(row.key)
            total = mask if total is None else total | mask
    return total, keys


def sanitize(op: str, args: list[Array]) -> list[Array]:
    """Return ``args`` with what makes bcast refuse an undefined element replaced.

    bcast raises on an integer zero divisor and on zero to a negative integer power (no
    value exists); the kit still needs bcast's answer at every other element, so those
    divisors and exponents become 1 (the elements stay marked undefined).

    >>> import numpy as np
    >>> sanitize("Div", [np.array([4]), np.array([0])])[1].tolist()
    [1]
    """
    if len(args) < 2 or (args[1].dtype.kind not in "iu" and op != "Pow"):
        return args
    b = args[1]
    if op in {"Div", "Mod"}:
        return [args[0], np.where(b == 0, np.ones_like(b), b).astype(b.dtype), *args[2:]]
    if op == "Pow" and args[0].dtype.kind in "iu" and b.dtype.kind in "iuf":
        bad = (b < 0) | (~np.isfinite(b) if b.dtype.kind == "f" else False)
        return [args[0], np.where(bad, np.ones_like(b), b).astype(b.dtype), *args[2:]]
    return args


TOLERANCE_ULPS: Final = {"Pow": 2, "DequantizeLinear": 1, "Sum": 2, "Mean": 3}
"""Units in the last place a float result may differ by, per operator (others: 0)."""


def ulps(op: str, inputs: int) -> int:
    """Return the units in the last place a float result of ``op`` may be off by.

    Sum and Mean round once per addition in most runtimes: one unit per input beyond the
    first (Mean one more, for its division); Pow's libm is not correctly rounded; every
    other operator is exact in IEEE arithmetic.

    >>> ulps("Add", 2), ulps("Sum", 3), ulps("Mean", 3), ulps("Pow", 2)
    (0, 2, 3, 2)
    """
    if op == "Sum":
        return max(inputs - 1, 1)
    if op == "Mean":
        return inputs
    return TOLERANCE_ULPS.get(op, 0)
