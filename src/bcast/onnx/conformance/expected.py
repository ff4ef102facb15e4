"""bcast's answer to each conformance case: the oracle the runtimes are graded against.

`decide` runs the case's node through `bcast.onnx.backend` (that is, `bcast.ops` and the
broadcasting rules of `bcast.core`) and records the output, or the refusal where bcast
finds the operands do not broadcast (a `ValueError`, `bcast.BroadcastError` among them).
Elements the operator text leaves undefined (`bcast.onnx.conformance.spec`) are marked;
bcast's answer there is not binding, and where bcast itself has none (an integer zero
divisor) it is computed on a sanitized copy of the inputs. A case bcast cannot answer at
all (an element type it does not implement) is dropped with the reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from bcast.onnx import backend
from bcast.onnx.conformance.cases import Case
from bcast.onnx.conformance.spec import sanitize, undefined_mask
from bcast.onnx.conformance.values import np_dtype

__all__ = ["decide"]


def decide(case: Case) -> str | None:
    """Fill in bcast's answer for ``case``; return why it is dropped, or None.

    Returns
    -------
    str or None
        None when the case is kept (its ``expected`` or ``refusal`` set), otherwise a
        one-line reason (bcast has no answer for these element types).

    Examples
    --------
    >>> from bcast.onnx.conformance.cases import generate
    >>> case = next(c for c in generate(["Add"]) if c.pattern == "mismatch")
    >>> decide(case) is None, case.valid
    (True, False)
    """
    node = helper.make_node(case.op, case.input_names, ["Y"], **case.attrs)
    args = sanitize(case.op, list(case.inputs))
    try:
        with np.errstate(all="ignore"):
            out = backend.run_node(node, args, opset_version=case.opset)[0]
    except (TypeError, NotImplementedError, ImportError, ZeroDivisionError) as err:
        return f"bcast has no answer: {type(err).__name__}: {err}"
    except ValueError as err:  # BroadcastError among them: the operands must be refused
        case.refusal = f"{type(err).__name__}: {_first_line(err)}"
        return None
    result = np.asarray(out)
    wanted = np_dtype(case.out_type)
    if result.dtype != wanted:
        return f"bcast answered {result.dtype}, the operator's definition gives {wanted}"
    case.expected = [result]
    attrs: dict[str, Any] = dict(case.attrs)
    with np.errstate(all="ignore"):
        mask, keys = undefined_mask(case.op, case.inputs, attrs, wanted)
    if mask is not None and mask.shape != result.shape:
        mask = np.broadcast_to(mask, result.shape) if _fits(mask, result) else None
    case.mask = mask
    case.spec = keys
    return None


def _fits(mask: np.ndarray[Any, Any], result: np.ndarray[Any, Any]) -> bool:
    try:
        np.broadcast_shapes(mask.shape, result.shape)
    except ValueError:
        return False
    return bool(np.broadcast_shapes(mask.shape, result.shape) == result.shape)


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else ""
