"""What every operator does first: find the library, check the dtypes, pick the result's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from bcast.arrays.libraries import Library, as_operands
from bcast.core.errors import BroadcastError
from bcast.core.modes import Mode
from bcast.ops._dtypes import SIGNATURES, Signature, bind, dtype_name, fixed_output

__all__ = [
    "TORCH_ARITHMETIC",
    "TORCH_COMPUTES",
    "TORCH_STORAGE_ONLY",
    "Checked",
    "check_operands",
    "scalar_partner",
]

TORCH_STORAGE_ONLY: Final = frozenset({"uint16", "uint32", "uint64"})
"""PyTorch dtypes without arithmetic kernels (on CPU): they hold data only."""
TORCH_ARITHMETIC: Final = frozenset(
    {"add", "sub", "mul", "div", "pow", "max", "min", "mean", "sum", "gemm", "prelu"}
)
"""The operators whose PyTorch kernels need arithmetic on the operands' dtype."""
TORCH_COMPUTES: Final = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
    "float64",
)  # fmt: skip
"""The dtypes PyTorch computes on (those the operator's ONNX signature allows)."""


class Checked:
    """The outcome of `check_operands`: library, operands as arrays, dtype names, result dtype."""

    __slots__ = ("dtype", "lib", "names", "operands")

    def __init__(
        self, lib: Library, names: list[str], dtype: Any, operands: tuple[Any, ...]
    ) -> None:
        self.lib = lib
        self.names = names
        self.dtype = dtype
        self.operands = operands


def scalar_partner(sig: Signature, labels: Sequence[str]) -> Any:
    """Which array operand a Python scalar takes its dtype from, for one signature.

    An array of the scalar's own type parameter (``where(c, x, 0.0)``: y follows x); else
    the first array whose parameter is not the bool condition ``B`` (``pow(x, 2)``: the
    exponent follows the base, as the array API's ``pow(x1, x2)``). None qualifies for
    ``where(c, 1.0, 2.0)``: the array API asks for an array among x and y, and so do we.
    """

    def param(i: int) -> str:
        return sig.inputs[0] if sig.variadic else sig.inputs[i]

    def like(i: int, arrays: list[int]) -> int:
        for j in arrays:
            if param(j) == param(i):
                return j
        if param(i) != "B":
            for j in arrays:
                if param(j) != "B":
                    return j
        raise TypeError(
            f"{labels[i]}: a Python scalar needs an array among the operands of its kind "
            "to take its dtype from (the array API rule); pass an array"
        )

    return like


def check_operands(op: str, labels: Sequence[str], operands: Sequence[Any]) -> Checked:
    """Check the operands' library and dtypes against the table; return the result dtype.

    Operands are normalised first (`bcast.arrays.libraries.as_operands`): NumPy scalars
    become 0-d NumPy arrays, Python scalars 0-d arrays of an array operand's dtype; use
    ``Checked.operands`` from then on.

    Raises TypeError for non-arrays, arrays of different libraries, and dtypes the
    operator's signature does not allow; OverflowError for a Python int out of its dtype's
    range.
    """
    lib, operands = as_operands(operands, scalar_partner(SIGNATURES[op], labels), labels)
    xp = lib.xp
    names = [dtype_name(x.dtype, xp) for x in operands]
    bound = bind(op, labels, names)
    if xp is not None and op in TORCH_ARITHMETIC and getattr(xp, "__name__", "").endswith("torch"):
        sig = SIGNATURES[op]
        computes = [d for d in TORCH_COMPUTES if d in sig.allowed[sig.inputs[0]]]
        for label, name in zip(labels, names, strict=True):
            if name in TORCH_STORAGE_ONLY:
                raise TypeError(
                    f"{op}: {label} has dtype {name}, on which PyTorch does not compute "
                    f"{op} (its uint16, uint32 and uint64 hold data only); bcast computes "
                    f"{op} on PyTorch tensors of {', '.join(computes)}"
                )
    fixed = fixed_output(op)
    if fixed is not None:
        import numpy as np

        return Checked(lib, names, np.dtype(fixed) if xp is None else getattr(xp, fixed), operands)
    sig = SIGNATURES[op]
    source = operands[bound[sig.output]]
    dtype = source.dtype
    if xp is None and not dtype.isnative:  # results in native byte order, as NumPy's
        dtype = dtype.newbyteorder("=")
    if xp is None and names[bound[sig.output]] == "string" and dtype.kind in "US":
        import numpy as np

        # Fixed-width NumPy strings: wide enough for every operand of the parameter.
        dtype = np.result_type(*(x.dtype for x in operands if x.dtype.kind in "US"))
    return Checked(lib, names, dtype, operands)


ELEMENTWISE_MODES: Final = (Mode.NUMPY, Mode.NONE, Mode.PDPD)
"""The ``broadcast=`` of element-wise operators: OpenVINO's ``auto_broadcast``."""


def elementwise_mode(broadcast: str | Mode) -> Mode:
    """Parse an element-wise operator's ``broadcast=``: numpy, none or pdpd, any case.

    >>> elementwise_mode("NUMPY")
    <Mode.NUMPY: 'numpy'>
    >>> elementwise_mode("explicit")
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: explicit: broadcast must be one of numpy, none, pdpd for an element-...
    """
    mode = Mode.parse(broadcast)
    if mode not in ELEMENTWISE_MODES:
        raise BroadcastError(
            f"broadcast must be one of numpy, none, pdpd for an element-wise operator; "
            f"got {broadcast!r}",
            mode=mode.value,
        )
    return mode
