"""The verdict on one case in one runtime: bcast's answer against the runtime's.

| verdict | when |
|---|---|
| ``agree`` | same output shape and element type, values within `spec.ulps` |
| ``wrong_value`` | a value (or the element type) differs where the operator defines it |
| ``wrong_shape`` | the output shape differs from the broadcast shape |
| ``accepts_invalid`` | bcast refuses the operands (they do not broadcast), the runtime answers |
| ``refuses_valid`` | bcast answers, the runtime refuses the model or the run |
| ``crash`` | the worker process died or hung on the case |
| ``spec_undefined`` | differs only where the operator text gives no value (not a defect) |

Integers, bools and shapes compare exactly; NaN matches NaN (any payload); the sign of a
zero is not compared; a float matches within the operator's bound in units in the last
place of the expected value's type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from bcast.onnx.conformance.cases import Case
from bcast.onnx.conformance.spec import ulps
from bcast.onnx.conformance.values import finfo, is_float
from bcast.onnx.conformance.workers import Outcome

__all__ = ["DEFECTS", "VERDICTS", "Verdict", "judge"]

VERDICTS: Final = (
    "agree",
    "wrong_value",
    "wrong_shape",
    "accepts_invalid",
    "refuses_valid",
    "crash",
    "spec_undefined",
)
DEFECTS: Final = frozenset(VERDICTS) - {"agree", "spec_undefined"}
"""The verdicts that count as a defect of the runtime."""

Array = npt.NDArray[Any]


@dataclass(frozen=True, slots=True)
class Verdict:
    """One case in one runtime configuration: the verdict and what was seen."""

    verdict: str
    detail: str = ""
    got: str = ""  # the runtime's answer in a few words: a shape and type, or its error
    refused: bool = False  # the runtime refused the model or the run


def _describe(y: Array) -> str:
    return f"{y.dtype}[{','.join(map(str, y.shape))}]"


def judge(case: Case, outcome: Outcome) -> Verdict:
    """Return the verdict on ``case`` given the runtime's ``outcome``.

    Examples
    --------
    >>> import numpy as np
    >>> from bcast.onnx.conformance.cases import generate
    >>> from bcast.onnx.conformance.expected import decide
    >>> case = next(c for c in generate(["Add"]) if c.pattern == "stretch")
    >>> decide(case)
    >>> judge(case, Outcome("ok", [case.expected[0].copy()])).verdict
    'agree'
    >>> judge(case, Outcome("ok", [case.expected[0][..., :1]])).verdict
    'wrong_shape'
    >>> judge(case, Outcome("refused", message="no")).verdict
    'refuses_valid'
    """
    if outcome.kind == "crash":
        again = {
            True: "; deterministic: it crashes again alone in a fresh process",
            False: "; history-dependent: alone in a fresh process it does not crash",
            None: "",
        }[outcome.deterministic]
        return Verdict("crash", outcome.message + again, "crash")
    if not case.valid:
        if outcome.kind == "refused":
            return Verdict("agree", got=outcome.message, refused=True)
        shapes = ", ".join(_describe(np.asarray(y)) for y in outcome.outputs or [])
        return Verdict("accepts_invalid", f"bcast: {case.refusal}", shapes)
    if outcome.kind == "refused":
        if case.mask is not None and case.mask.any():
            return Verdict("spec_undefined", ", ".join(case.spec), outcome.message, True)
        return Verdict("refuses_valid", outcome.message, outcome.message, True)
    assert case.expected is not None
    outputs = outcome.outputs or []
    if not outputs:
        return Verdict("wrong_shape", "no output", "no output")
    expected, got = case.expected[0], np.asarray(outputs[0])
    seen = _describe(got)
    if got.shape != expected.shape:
        return Verdict("wrong_shape", f"expected {_describe(expected)}", seen)
    if got.dtype != expected.dtype:
        return Verdict("wrong_value", f"element type {got.dtype}, expected {expected.dtype}", seen)
    bad = _mismatches(expected, got, ulps(case.op, len(case.inputs)))
    if not bad.any():
        return Verdict("agree", got=seen)
    defined = bad if case.mask is None else bad & ~case.mask
    if not defined.any():
        return Verdict("spec_undefined", ", ".join(case.spec), seen)
    return Verdict("wrong_value", _first_difference(expected, got, defined), seen)


def _mismatches(expected: Array, got: Array, bound: int) -> Array:
    """Return where ``got`` is not ``expected`` under the tolerance table."""
    if not is_float(expected.dtype):
        return np.asarray(expected != got)
    with np.errstate(all="ignore"):
        e = expected.astype(np.float64)
        g = got.astype(np.float64)
        both_nan = np.isnan(e) & np.isnan(g)
        same = (e == g) | both_nan
        if bound == 0:
            return np.asarray(~same)
        info = finfo(expected.dtype)
        unit = np.maximum(np.abs(e) * float(info.eps), float(info.smallest_subnormal))
        close = np.isfinite(e) & np.isfinite(g) & (np.abs(e - g) <= bound * unit)
        return np.asarray(~(same | close))


def _first_difference(expected: Array, got: Array, where: Array) -> str:
    index = tuple(int(i) for i in np.argwhere(where)[0])
    count = int(where.sum())
    return (
        f"{count} of {expected.size} elements differ; at {list(index)}: expected "
        f"{expected[index]!r}, got {got[index]!r}"
    )
