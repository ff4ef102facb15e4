"""What ``bcast verify`` shares between model formats: results, comparison, inputs.

`bcast.onnx.verify` (ONNX models) and `bcast.openvino.verify` (OpenVINO IR) run each
broadcasting node alone in the runtimes and in bcast; both record what they find in the
classes of this module (`Verification`, whose JSON and report the CLI renders), compare
with `compare`, choose concrete shapes with `right_aligned` / `pick` and draw inputs with
`random_array`. This module imports neither ``onnx`` nor ``openvino``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from bcast.dim import Dim
from bcast.errors import BroadcastError
from bcast.shape import Shape

__all__ = [
    "ATOL",
    "RTOL",
    "Comparison",
    "NodeRun",
    "Result",
    "Verification",
    "aligned",
    "attempt",
    "compare",
    "error_line",
    "pick",
    "random_array",
    "right_aligned",
]

RTOL: Final = 1e-4
ATOL: Final = 1e-5


@dataclass(frozen=True, slots=True)
class Result:
    """What one implementation produced for one node: an array, or an error message."""

    value: npt.NDArray[Any] | None = None
    error: str | None = None

    def text(self) -> str:
        """Return the shape as text (``[2,3] float32``), or ``error: ...``."""
        if self.value is None:
            return f"error: {self.error}"
        return f"{Shape(self.value.shape)} {self.value.dtype}"

    def to_json(self) -> dict[str, Any]:
        """Return ``{"shape", "dtype", "error"}`` as plain JSON data."""
        if self.value is None:
            return {"shape": None, "dtype": None, "error": self.error}
        return {
            "shape": str(Shape(self.value.shape)),
            "dtype": str(self.value.dtype),
            "error": None,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """How a runtime's result compares with bcast's."""

    agree: bool
    detail: str
    max_abs_diff: float | None = None


@dataclass(slots=True)
class NodeRun:
    """One node run in bcast and in each runtime.

    ``mode`` and ``axis`` are an OpenVINO node's broadcast attributes as written (``axis``
    None: a pdpd node without one); None for ONNX nodes.
    """

    node: str
    op: str
    inputs: tuple[tuple[str, Shape], ...]
    results: dict[str, Result] = field(default_factory=dict)
    comparisons: dict[str, Comparison] = field(default_factory=dict)
    mode: str | None = None
    axis: int | None = None

    def attributes(self) -> str:
        """Return the broadcast attributes as text (``pdpd, axis 0``), ``""`` for none."""
        if self.mode is None:
            return ""
        if self.mode != "pdpd":
            return self.mode
        return f"pdpd, {'no axis' if self.axis is None else f'axis {self.axis}'}"

    def to_json(self) -> dict[str, Any]:
        """Return the run as plain JSON data."""
        return {
            "node": self.node,
            "op": self.op,
            "inputs": [{"name": n, "shape": str(s)} for n, s in self.inputs],
            "mode": self.mode,
            "axis": self.axis,
            "results": {k: r.to_json() for k, r in self.results.items()},
            "comparisons": {
                k: {"agree": c.agree, "detail": c.detail, "max_abs_diff": c.max_abs_diff}
                for k, c in self.comparisons.items()
            },
        }


@dataclass(slots=True)
class Verification:
    """The outcome of `verify_model`."""

    path: str
    runtimes: list[str]
    seed: int
    nodes: list[NodeRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def disagreements(self) -> int:
        """Return the number of (node, runtime) pairs that disagree with bcast."""
        return sum(1 for n in self.nodes for c in n.comparisons.values() if not c.agree)

    def to_json(self) -> dict[str, Any]:
        """Return the verification as one JSON object."""
        return {
            "model": self.path,
            "runtimes": self.runtimes,
            "seed": self.seed,
            "nodes": [n.to_json() for n in self.nodes],
            "notes": self.notes,
            "summary": {"nodes": len(self.nodes), "disagreements": self.disagreements},
            "error": None,
        }


def attempt(call: Any, *args: Any, **kwargs: Any) -> Result:
    """Call ``call(*args, **kwargs)``; its value or its error (one line) as a `Result`."""
    try:
        value = call(*args, **kwargs)
    except BroadcastError as err:  # bcast: the summary line, not the picture
        return Result(error=err.summary)
    except Exception as err:  # a runtime's failure is a result to compare, not a crash
        return Result(error=error_line(err))
    if isinstance(value, tuple):
        value = value[0]
    return Result(value=np.asarray(value))


def error_line(err: Exception) -> str:
    """Return the informative line of a runtime's error message."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    message = lines[-1] if lines else type(err).__name__
    if "Status Message:" in message:  # onnxruntime: keep what the kernel said
        message = message.split("Status Message:", 1)[1].strip()
    return message if len(message) <= 200 else message[:197] + "..."


def compare(ours: Result, theirs: Result, name: str) -> Comparison:
    """Compare runtime ``name``'s result with bcast's: shapes, then values (or who failed)."""
    if ours.value is None and theirs.value is None:
        return Comparison(True, "both reject the node")
    if ours.value is None:
        return Comparison(False, f"bcast rejects the node, {name} runs it")
    if theirs.value is None:
        return Comparison(False, f"{name} rejects the node, bcast runs it")
    a, b = ours.value, theirs.value
    if a.shape != b.shape:
        return Comparison(False, f"shape {Shape(b.shape)} from {name}, {Shape(a.shape)} from bcast")
    if a.size == 0:
        return Comparison(True, "equal (empty)", 0.0)
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        differ = int(np.count_nonzero(a.astype(bool) != b.astype(bool)))
        return Comparison(differ == 0, f"{differ} elements differ", float(differ > 0))
    x, y = a.astype(np.float64), b.astype(np.float64)
    both_nan = np.isnan(x) & np.isnan(y)
    diff = np.where(both_nan, 0.0, np.abs(x - y))
    worst = float(np.nanmax(np.where(np.isnan(diff), np.inf, diff)))
    close = bool(np.all(both_nan | np.isclose(x, y, rtol=RTOL, atol=ATOL)))
    return Comparison(close, f"max abs diff {worst:.3g}", worst)


def right_aligned(
    shapes: Sequence[Shape], chosen: dict[str, int], rank: int | None = None
) -> list[tuple[int, ...]]:
    """Concrete shapes, right-aligned: each unknown dim takes the static size its axis meets.

    ``chosen`` holds the values already given to symbols (shared by a node's operands).
    """
    out_rank = max((len(s.dims) for s in shapes), default=0) if rank is None else rank
    return aligned(shapes, [out_rank - len(s.dims) for s in shapes], chosen)


def aligned(
    shapes: Sequence[Shape], offsets: Sequence[int], chosen: dict[str, int]
) -> list[tuple[int, ...]]:
    """Concrete shapes of operands placed at ``offsets``: unknown dims take what they meet.

    Parameters
    ----------
    shapes : sequence of Shape
        Operands of known rank.
    offsets : sequence of int
        The output axis of each operand's first dim (right alignment: rank minus its rank;
        PDPD: the axis).
    chosen : dict of str to int
        The values already given to symbols; updated.

    Returns
    -------
    list of tuple of int
    """
    reference: dict[int, int] = {}
    for shape, offset in zip(shapes, offsets, strict=True):
        for i, d in enumerate(shape.dims):
            if d.is_static and d.lo != 1:
                reference.setdefault(offset + i, d.lo)
    return [
        tuple(pick(d, reference.get(offset + i), chosen) for i, d in enumerate(shape.dims))
        for shape, offset in zip(shapes, offsets, strict=True)
    ]


def pick(dim: Dim, reference: int | None, chosen: dict[str, int]) -> int:
    """Choose a value for ``dim``: its own, a symbol's earlier choice, ``reference``, else 2."""
    if dim.is_static:
        return dim.lo
    if dim.name is not None and dim.name in chosen:
        return chosen[dim.name]
    value = 2
    if reference is not None and dim.contains(reference):
        value = reference
    elif not dim.contains(2):
        value = dim.lo if dim.lo >= 1 else 1
    if dim.name is not None:
        chosen[dim.name] = value
    return value


def random_array(
    shape: tuple[int, ...], dtype: npt.DTypeLike, rng: np.random.Generator, *, positive: bool
) -> npt.NDArray[Any]:
    """Draw an input: bools, small integers (from 1 when ``positive``) or floats.

    Parameters
    ----------
    shape : tuple of int
    dtype : dtype
    rng : numpy.random.Generator
    positive : bool
        Keep the values above 0 (a divisor, a power's base or exponent).

    Returns
    -------
    numpy.ndarray
    """
    kind = np.dtype(dtype)
    if kind == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(kind, np.integer):
        low = 1 if positive else (0 if np.issubdtype(kind, np.unsignedinteger) else -5)
        return rng.integers(low, 6, size=shape).astype(kind)
    start = 0.5 if positive else -2.0
    return rng.uniform(start, 2.0, size=shape).astype(kind)
