"""What every operator does first: find the library, check the dtypes, pick the result's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bcast.arrays import namespace_of
from bcast.ops._dtypes import SIGNATURES, bind, dtype_name, fixed_output

__all__ = ["Checked", "check_operands"]


class Checked:
    """The outcome of `check_operands`: namespace, dtype names and the result dtype."""

    __slots__ = ("dtype", "names", "xp")

    def __init__(self, xp: Any, names: list[str], dtype: Any) -> None:
        self.xp = xp
        self.names = names
        self.dtype = dtype


def check_operands(op: str, labels: Sequence[str], operands: Sequence[Any]) -> Checked:
    """Check the operands' library and dtypes against the table; return the result dtype.

    Raises TypeError for non-arrays, arrays of different libraries, and dtypes the
    operator's signature does not allow.
    """
    xp = namespace_of(*operands)
    names = [dtype_name(x.dtype, xp) for x in operands]
    bound = bind(op, labels, names)
    fixed = fixed_output(op)
    if fixed is not None:
        import numpy as np

        return Checked(xp, names, np.dtype(fixed) if xp is None else getattr(xp, fixed))
    sig = SIGNATURES[op]
    source = operands[bound[sig.output]]
    dtype = source.dtype
    if xp is None and names[bound[sig.output]] == "string" and dtype.kind in "US":
        import numpy as np

        # Fixed-width NumPy strings: wide enough for every operand of the parameter.
        dtype = np.result_type(*(x.dtype for x in operands if x.dtype.kind in "US"))
    return Checked(xp, names, dtype)
