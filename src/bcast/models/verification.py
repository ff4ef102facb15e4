"""What ``bcast verify`` shares between model formats: results, comparison, inputs.

`bcast.onnx.verify` (ONNX models) and `bcast.openvino.verify` (OpenVINO IR) run each
broadcasting node alone in the runtimes and in bcast; both record what they find in the
classes of this module (`Verification`, whose JSON and report the CLI renders), compare
with `compare`, choose concrete shapes with `right_aligned` / `pick` and draw inputs with
`random_array`. Before a node's inputs are drawn, `memory_problem` weighs what running it
would allocate against bcast's memory limit (`bcast.ops.get_memory_limit`); a node too large
to run, one whose operator bcast lacks, or one without concrete shapes is recorded with
`Verification.skip` (a note, and an entry of ``"skipped"`` in the JSON), never run. This
module imports neither ``onnx`` nor ``openvino``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from bcast.core.errors import BroadcastError
from bcast.core.shape import Shape
from bcast.models.isolation import IsolationError

__all__ = [
    "observe",
    "ATOL",
    "HALF_ULPS",
    "RTOL",
    "Comparison",
    "HarnessError",
    "NO_OPERATOR",
    "NodeRun",
    "Result",
    "Skip",
    "Skipped",
    "Verification",
    "attempt",
    "compare",
    "error_line",
    "out_of_memory",
]

RTOL: Final = 1e-4
ATOL: Final = 1e-5
HALF_ULPS: Final = 2
"""Values of a float dtype coarser than `RTOL` (float16, bfloat16) agree within this many
units of its last place, relative. Runtimes round such arithmetic in their own ways: on
float16 copies of real models, OpenVINO divided by a constant as a multiplication by its
reciprocal rounded to float16 (a third of bert's GELU quotients 1 unit off the correctly
rounded ones), and both runtimes' LayerNormalization came out 1 unit apart from NumPy's
with float32 statistics (tests/unit/test_verify_real.py)."""
KEPT_BYTES: Final = 64 * 2**20
"""Result values a `Verification` keeps once compared; larger ones keep their shape only."""
NO_OPERATOR: Final = "bcast.ops has no such operator"
"""Why a broadcasting node whose operator bcast does not implement is skipped."""
_ALLOCATION_FAILED: Final = re.compile(
    r"failed to allocate|bad_alloc|out of memory|cannot allocate memory", re.IGNORECASE
)
"""How the runtimes say an allocation failed (onnxruntime's arena, OpenVINO, C++)."""
_MALFORMED_REQUEST: Final = re.compile(
    r"Invalid tensor data type|Unexpected input data type|Got invalid dimensions for input"
    r"|Invalid rank for input|Unable to handle object of type|are missing from input feed"
    r"|Invalid input name|Invalid Feed Input Name|input tensor size is not equal to the model"
    r"|Port for tensor name .* was not found",
    re.IGNORECASE,
)
"""How the runtimes say the request itself was malformed: the harness's fault, not theirs."""


class HarnessError(RuntimeError):
    """bcast's verifier could not build a well-formed request for a node (its own bug).

    Raised before a runtime is called (an input without an element type, a feed that does
    not match the input it is fed to); `attempt` records it as a harness error, a distinct
    outcome that is never blamed on the runtime.
    """


@dataclass(frozen=True, slots=True)
class Result:
    """What one implementation produced for one node: an array, or an error message."""

    value: npt.NDArray[Any] | None = None
    error: str | None = None
    out_of_memory: bool = False
    harness: bool = False
    """The error is bcast's own harness's (a malformed request), not the side's verdict."""
    let_go: tuple[tuple[int, ...], str] | None = None
    """The shape and dtype of a value let go once compared (`Verification.record`)."""

    def text(self) -> str:
        """Return the shape as text (``[2,3] float32``), or ``error: ...``."""
        if self.error is not None:
            return f"{'harness error' if self.harness else 'error'}: {self.error}"
        shape, dtype = self.let_go or (self.value.shape, self.value.dtype)  # type: ignore[union-attr]
        return f"{Shape(shape)} {dtype}"

    def to_json(self) -> dict[str, Any]:
        """Return ``{"shape", "dtype", "error"}`` as plain JSON data."""
        if self.error is not None:
            return {"shape": None, "dtype": None, "error": self.error, "harness": self.harness}
        shape, dtype = self.text().split(" ")
        return {"shape": shape, "dtype": dtype, "error": None, "harness": False}


@dataclass(frozen=True, slots=True)
class Comparison:
    """How a runtime's result compares with bcast's.

    ``harness`` is True when bcast's own harness failed to make a well-formed request:
    ``agree`` is then False, but it is no disagreement (`Verification.harness_errors`).
    """

    agree: bool
    detail: str
    max_abs_diff: float | None = None
    harness: bool = False


class Skip(str, Enum):
    """Why a broadcasting node was not run."""

    UNSUPPORTED = "unsupported"  # bcast has no such operator
    UNKNOWN_SHAPE = "unknown-shape"  # no concrete shapes: unknown rank, non-constant target
    TOO_LARGE = "too-large"  # over the memory limit, or a side ran out of memory
    IN_BODY = "in-body"  # inside an If/Loop/Scan body: its values are not the model's

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Skipped:
    """A broadcasting node that was not run, and why (see `Verification.skip`)."""

    node: str
    op: str
    kind: Skip
    reason: str

    def note(self) -> str:
        """Return the note printed for it: ``node (Op): reason; skipped``."""
        return f"{self.node} ({self.op}): {self.reason}; skipped"

    def to_json(self) -> dict[str, Any]:
        """Return ``{"node", "op", "kind", "reason"}`` as plain JSON data."""
        return {"node": self.node, "op": self.op, "kind": self.kind.value, "reason": self.reason}


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

    @property
    def fails_everywhere(self) -> bool:
        """True when bcast and every runtime run reject the node (`Verification.failing`)."""
        ours = self.results.get("bcast")
        return (
            ours is not None
            and ours.error is not None
            and not ours.harness
            and bool(self.comparisons)
            and all(c.agree and not c.harness for c in self.comparisons.values())
        )

    def to_json(self) -> dict[str, Any]:
        """Return the run as plain JSON data."""
        return {
            "node": self.node,
            "op": self.op,
            "inputs": [{"name": n, "shape": str(s)} for n, s in self.inputs],
            "mode": self.mode,
            "axis": self.axis,
            "fails_everywhere": self.fails_everywhere,
            "results": {k: r.to_json() for k, r in self.results.items()},
            "comparisons": {
                k: {
                    "agree": c.agree,
                    "detail": c.detail,
                    "max_abs_diff": c.max_abs_diff,
                    "harness": c.harness,
                }
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
    skipped: list[Skipped] = field(default_factory=list)
    unused_dims: list[str] = field(default_factory=list)
    """``--dim`` bindings whose name no dim of the model has (they change nothing)."""
    kept_bytes: int = 0
    """The bytes of result values kept (at most `KEPT_BYTES`; the others are let go)."""

    @property
    def disagreements(self) -> int:
        """Return the number of (node, runtime) pairs that disagree with bcast."""
        return sum(
            1 for n in self.nodes for c in n.comparisons.values() if not (c.agree or c.harness)
        )

    @property
    def harness_errors(self) -> int:
        """Return the number of (node, runtime) pairs that bcast's harness failed to run."""
        return sum(1 for n in self.nodes for c in n.comparisons.values() if c.harness)

    @property
    def compared(self) -> int:
        """Return the number of nodes run and compared with at least one runtime."""
        return sum(1 for n in self.nodes if any(not c.harness for c in n.comparisons.values()))

    @property
    def failing(self) -> list[NodeRun]:
        """Return the nodes that fail in bcast and in every runtime run (at these sizes).

        Every side agreeing is no disagreement, but the model does not run there: a
        finding of its own (exit 1).
        """
        return [n for n in self.nodes if n.fails_everywhere]

    @property
    def nothing_verified(self) -> bool:
        """True when the model has broadcasting nodes but none was compared with a runtime."""
        return self.compared == 0 and bool(self.nodes or self.skipped)

    def record(self, run: NodeRun) -> None:
        """Keep ``run``; or, when a side ran out of memory, skip the node as too large.

        Both sides "rejecting" a node they could not allocate is no agreement.
        """
        exhausted = out_of_memory(run)
        if exhausted is None:
            for name, result in run.results.items():  # memory: node by node, not the model
                if result.value is not None and self.kept_bytes + result.value.nbytes > KEPT_BYTES:
                    seen = (tuple(result.value.shape), str(result.value.dtype))
                    run.results[name] = Result(let_go=seen)
                elif result.value is not None:
                    self.kept_bytes += result.value.nbytes
            self.nodes.append(run)
            _tell(run.node, run.op)
        else:
            self.skip(run.node, run.op, Skip.TOO_LARGE, exhausted)

    def skip(self, node: str, op: str, kind: Skip, reason: str) -> None:
        """Record a node that is not run: in `skipped` and as a note."""
        skipped = Skipped(node, op, kind, reason)
        self.skipped.append(skipped)
        self.notes.append(skipped.note())
        _tell(node, op)

    def to_json(self) -> dict[str, Any]:
        """Return the verification as one JSON object."""
        return {
            "model": self.path,
            "runtimes": self.runtimes,
            "seed": self.seed,
            "nodes": [n.to_json() for n in self.nodes],
            "skipped": [s.to_json() for s in self.skipped],
            "notes": self.notes,
            "unused_dims": self.unused_dims,
            "summary": {
                "nodes": len(self.nodes),
                "compared": self.compared,
                "skipped": len(self.skipped),
                "disagreements": self.disagreements,
                "harness_errors": self.harness_errors,
                "failing": len(self.failing),
            },
            "error": None,
        }


_OBSERVER: ContextVar[Callable[[str, str], None] | None] = ContextVar(
    "bcast_verify_observer", default=None
)


@contextmanager
def observe(callback: Callable[[str, str], None]) -> Iterator[None]:
    """Call ``callback(node, op)`` as each node is recorded or skipped, in this context.

    The command line draws its progress with it; the verifiers need not know.

    >>> seen = []
    >>> with observe(lambda node, op: seen.append(node)):
    ...     Verification("m.onnx", [], 0).skip("n1", "Add", Skip.UNSUPPORTED, "why")
    >>> seen
    ['n1']
    """
    token = _OBSERVER.set(callback)
    try:
        yield
    finally:
        _OBSERVER.reset(token)


def _tell(node: str, op: str) -> None:
    callback = _OBSERVER.get()
    if callback is not None:
        callback(node, op)


def attempt(call: Any, *args: Any, **kwargs: Any) -> Result:
    """Call ``call(*args, **kwargs)``; its value or its error (one line) as a `Result`.

    A `HarnessError`, or a runtime saying that the request itself was malformed (an input
    of the wrong type or shape, a tensor type it does not know), is a harness error.
    `bcast.models.isolation.IsolationError` (a runtime crashed, or ran past its time or
    memory limit) is raised, not recorded: the verification cannot go on.

    >>> attempt(lambda: (_ for _ in ()).throw(HarnessError("x has no element type"))).text()
    'harness error: x has no element type'
    """
    try:
        value = call(*args, **kwargs)
    except IsolationError:  # a runtime crashed or ran out of its limits: the run ends
        raise
    except BroadcastError as err:  # bcast: the summary line, not the picture
        return Result(error=err.summary)
    except MemoryError as err:  # bcast's MemoryLimitError, or an allocation that failed
        return Result(error=error_line(err), out_of_memory=True)
    except HarnessError as err:
        return Result(error=error_line(err), harness=True)
    except Exception as err:  # a runtime's failure is a result to compare, not a crash
        text = str(err)
        failed = bool(_ALLOCATION_FAILED.search(text))
        malformed = bool(_MALFORMED_REQUEST.search(text))
        return Result(error=error_line(err), out_of_memory=failed, harness=malformed)
    if isinstance(value, tuple):
        value = value[0]
    return Result(value=np.asarray(value))


def error_line(err: Exception) -> str:
    r"""Return the informative line of a runtime's error message.

    onnxruntime: what the kernel said (after ``Status Message:``). OpenVINO: the reason
    with the node and the input shapes it validated, not its summary line
    (``-- Conversion is failed for: Add-17``). Otherwise the last line. At most 300
    characters.

    >>> text = (
    ...     "-- Add-17 with a message:\nWhile validating node 'opset1::Add Add_3 "
    ...     "(Parameter a[0]:f32[31], Parameter b[0]:f32[32]) -> (dynamic[...])' with "
    ...     "friendly_name 'Add_3':\nArgument shapes are inconsistent.\n\nSummary:\n"
    ...     "-- Conversion is failed for: Add-17"
    ... )
    >>> print(error_line(RuntimeError(text)))  # doctest: +NORMALIZE_WHITESPACE
    Argument shapes are inconsistent. (validating opset1::Add Add_3
    (Parameter a[0]:f32[31], Parameter b[0]:f32[32]))
    """
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    message = lines[-1] if lines else type(err).__name__
    validating = [i for i, ln in enumerate(lines) if ln.startswith("While validating node '")]
    if validating:  # OpenVINO: the reason after the node it validated, with its shapes
        at = validating[-1]
        node = lines[at][len("While validating node '") :]
        node = re.split(r" -> |' with friendly_name", node, maxsplit=1)[0].rstrip("':")
        reason = lines[at + 1] if at + 1 < len(lines) else "validation failed"
        message = f"{reason} (validating {node})"
    elif message.startswith("-- Conversion is failed for"):  # OpenVINO's summary line
        kept = [ln for ln in lines if not ln.startswith(("Summary:", "-- Conversion is failed"))]
        message = kept[-1] if kept else message
    if "Status Message:" in message:  # onnxruntime: keep what the kernel said
        message = message.split("Status Message:", 1)[1].strip()
    return message if len(message) <= 300 else message[:297] + "..."


def out_of_memory(run: NodeRun) -> str | None:
    """Return why ``run`` says nothing about broadcasting (a side ran out of memory), or None.

    A node that bcast refuses with `bcast.ops.MemoryLimitError`, or that a runtime fails to
    allocate, is too large to run here: the sides "both rejecting" it is no agreement.
    """
    for name, result in run.results.items():
        if result.out_of_memory:
            return f"too large to run: {name}: {result.error}"
    return None


def compare(ours: Result, theirs: Result, name: str) -> Comparison:
    """Compare runtime ``name``'s result with bcast's: shapes, then values (or who failed).

    Values agree within `RTOL` relative and `ATOL` absolute; float16 and bfloat16 values
    within `HALF_ULPS` units of their last place. A harness error on either side is
    neither agreement nor disagreement: ``harness``.
    """
    for side, result in (("bcast", ours), (name, theirs)):
        if result.harness:
            detail = f"bcast's harness failed to run the node in {side}: {result.error}"
            return Comparison(False, detail, harness=True)
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
    rtol = max(RTOL, HALF_ULPS * max(_epsilon(a.dtype), _epsilon(b.dtype)))
    close = bool(np.all(both_nan | np.isclose(x, y, rtol=rtol, atol=ATOL)))
    return Comparison(close, f"max abs diff {worst:.3g}", worst)


def _epsilon(dtype: np.dtype[Any]) -> float:
    """Return the spacing of a float dtype's numbers just above 1 (0 for other dtypes).

    >>> _epsilon(np.dtype(np.float16)), _epsilon(np.dtype(np.int8))
    (0.0009765625, 0.0)
    """
    if dtype.name == "bfloat16":  # ml_dtypes' bfloat16, which np.finfo does not know
        return 2.0**-7
    if dtype.kind != "f":
        return 0.0
    return float(np.finfo(dtype).eps)
