"""What every operator does first: find the library, check the dtypes, pick the result's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bcast.arrays.libraries import Library, library_of
from bcast.ops._dtypes import SIGNATURES, bind, dtype_name, fixed_output

__all__ = ["Checked", "check_operands"]


class Checked:
    """The outcome of `check_operands`: library, dtype names and the result dtype."""

    __slots__ = ("dtype", "lib", "names")

    def __init__(self, lib: Library, names: list[str], dtype: Any) -> None:
        self.lib = lib
        self.names = names
        self.dtype = dtype


def check_operands(op: str, labels: Sequence[str], operands: Sequence[Any]) -> Checked:
    """Check the operands' library and dtypes against the table; return the result dtype.

    Raises TypeError for non-arrays, arrays of different libraries, and dtypes the
    operator's signature does not allow.
    """
    lib = library_of(*operands)
    xp = lib.xp
    names = [dtype_name(x.dtype, xp) for x in operands]
    bound = bind(op, labels, names)
    fixed = fixed_output(op)
    if fixed is not None:
        import numpy as np

        return Checked(lib, names, np.dtype(fixed) if xp is None else getattr(xp, fixed))
    sig = SIGNATURES[op]
    source = operands[bound[sig.output]]
    dtype = source.dtype
    if xp is None and names[bound[sig.output]] == "string" and dtype.kind in "US":
        import numpy as np

        # Fixed-width NumPy strings: wide enough for every operand of the parameter.
        dtype = np.result_type(*(x.dtype for x in operands if x.dtype.kind in "US"))
    return Checked(lib, names, dtype)
