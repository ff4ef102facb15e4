"""Which operations the compiled path has (`bcast.engine.compiled`), on which operands.

No numba here: the engine asks before it plans a walk (`accepts`), and numba is loaded
only for operands it takes.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import numpy as np

__all__ = [
    "BITS",
    "BY_WIDTH",
    "FLOAT",
    "HALF",
    "HALF_RULES",
    "NUMERIC",
    "OPERATIONS",
    "SWAPPED",
    "accepts",
    "numpy_power_vectorised",
]

NUMERIC: Final = frozenset("?bBhHiIlLqQfd")  # numba's scalar types, by dtype.char
FLOAT: Final = frozenset("fd")
HALF: Final = "e"  # float16: read as its bits, computed in float32 (numba_rows.HALVES)
HALF_RULES: Final = ("same", "float", "float32", "compare", "order")  # rules that take float16
BITS: Final = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


OPERATIONS: Final[dict[str, str]] = {
    "copy": "bits",
    "where": "bits",
    "add": "same",
    "sub": "same",
    "mul": "same",
    "div": "float",
    "pow": "float32",
    "squared_difference": "same",
    "equal": "compare",
    "not_equal": "compare",
    "greater": "order",
    "greater_or_equal": "order",
    "and_": "bool",
    "or_": "bool",
    "xor": "bool",
    "bitwise_and": "integer",
    "bitwise_or": "integer",
    "bitwise_xor": "integer",
}
"""The operations (their scalar functions: `bcast.engine.numba_kernels.SCALARS`) and what their
operands must be:

- ``same``: every operand and the output of one numeric dtype; ``float``: likewise, floating;
  ``float32``: likewise, float32 or float16 (Pow: within a unit in the last place of NumPy's
  powf; float16 rounds that float32 result to half precision, as NumPy's float16 power
  rounds powf's); ``integer``: likewise, an integer;
- ``compare``: two operands of one numeric dtype or bool, a bool output; ``order``: likewise,
  not bool; ``bool``: booleans only;
- ``bits``: moved bit for bit, operands viewed as unsigned integers of the output's width
  (Where's condition stays bool; its select is bit arithmetic).

Less and LessOrEqual have no kernels of their own: `SWAPPED`.
"""

SWAPPED: Final = {"less": "greater", "less_or_equal": "greater_or_equal"}
"""Operations computed by another one's kernels with the two operands swapped: ``x < y`` is
``y > x`` and ``x <= y`` is ``y >= x`` for every pair of values, NaN included (both false)."""

BY_WIDTH: Final = frozenset(
    {"add", "sub", "mul", "squared_difference", "equal", "not_equal"}
    | {"bitwise_and", "bitwise_or", "bitwise_xor"}
)
"""Operations whose integer operands are read as unsigned integers of their width: their
results have the same bits for a signed integer and the unsigned one of its width (sums,
differences and products wrap alike in two's complement; equal bits are equal values), so
int8 and uint8 share one kernel."""


@functools.cache
def numpy_power_vectorised() -> bool:
    """Tell whether NumPy's own float32 power runs a vector loop on this CPU.

    NumPy reports which of its compiled loops each ufunc runs on this CPU
    (``numpy.lib.introspect.opt_func_info``, NumPy 2). Its float32 power has a vector loop
    (SVML) for AVX-512 CPUs, and elsewhere calls the C library's ``powf`` per element. On
    the 2-core AVX-512 Xeon of ``docs/benchmarks.md``, NumPy's vector loop on the
    engine's two threads took 32 ms for (64,1024,1024) ** (1024,) and the compiled
    polynomial 82 ms, so where NumPy has one, float32 Pow is not compiled (`accepts`). A
    NumPy without the report counts as having none. Its float16 power has no vector loop
    (each element goes through powf), so float16 Pow is compiled everywhere.

    >>> isinstance(numpy_power_vectorised(), bool)
    True
    """
    try:
        from numpy.lib.introspect import opt_func_info

        loops = opt_func_info(func_name="^power$", signature="^float32$").get("power", {})
    except (ImportError, AttributeError):  # NumPy 1.x: no report of its loops
        return False
    return any(
        isinstance(info, dict) and not str(info.get("current", "baseline")).startswith("baseline")
        for info in loops.values()
    )


def _native(dtype: np.dtype[Any]) -> bool:
    return dtype.isnative and not dtype.hasobject and dtype.fields is None


def accepts(name: str, out: np.ndarray[Any, Any], operands: list[Any]) -> bool:
    """Tell whether operation ``name`` can compute ``out`` from these operands exactly.

    >>> import numpy as np
    >>> f4 = np.zeros(3, np.float32)
    >>> accepts("add", f4, [f4, f4]), accepts("add", f4, [f4, f4.astype(np.float64)])
    (True, False)
    >>> accepts("where", f4, [np.zeros(3, bool), f4, f4]), accepts("div", f4.astype(int), [])
    (True, False)
    """
    name = SWAPPED.get(name, name)
    if name not in OPERATIONS:
        return False
    rule = OPERATIONS[name]
    dtypes = [x.dtype for x in operands]
    if not all(_native(d) for d in [out.dtype, *dtypes]):
        return False
    if rule == "bits":
        values = dtypes[1:] if name == "where" else dtypes
        if name == "where" and dtypes[0] != np.bool_:
            return False
        return out.itemsize in BITS and all(d == out.dtype for d in values)
    if len(dtypes) != 2 or dtypes[0] != dtypes[1]:
        return False
    char = dtypes[0].char
    if rule in ("compare", "order"):
        ordered = rule == "order" and char == "?"
        return bool(out.dtype == np.bool_ and (char in NUMERIC or char == HALF) and not ordered)
    if rule == "bool":
        return bool(out.dtype == dtypes[0] == np.bool_)
    if out.dtype != dtypes[0]:
        return False
    by_rule = {"float": FLOAT | {HALF}, "float32": {"f", HALF}, "integer": NUMERIC - FLOAT - {"?"}}
    allowed = by_rule.get(rule, NUMERIC - {"?"} | {HALF})
    return char in allowed and not (name == "pow" and char == "f" and numpy_power_vectorised())
