"""The recurrent operators' weight shapes: LSTM, GRU and RNN, as their definitions fix them.

ONNX's shape inference reads only ``X``'s and ``hidden_size``'s dims for the outputs; it does
not hold ``W``, ``R``, ``B``, the initial states or ``P`` against them, and onnxruntime and
OpenVINO refuse the node when they differ (a bias one element short is the kind of bug an
edit or a converter makes). With ``g`` gates (LSTM 4, GRU 3, RNN 1), ``h = hidden_size``
(the attribute, else ``R``'s last dim), ``d`` the directions (``W``'s first dim) and
``batch`` ``X``'s batch dim (axis 1, or 0 with ``layout=1``):

- ``W`` is ``[d, g*h, input_size]``, ``input_size`` being ``X``'s last dim;
- ``R`` is ``[d, g*h, h]``;
- ``B`` is ``[d, 2*g*h]`` (the input and recurrent biases, added to every step's gates);
- ``sequence_lens`` is ``[batch]``;
- ``initial_h`` (and LSTM's ``initial_c``) is ``[d, batch, h]`` (``[batch, d, h]`` with
  ``layout=1``);
- LSTM's peepholes ``P`` are ``[d, 3*h]``.

OpenVINO's ``LSTMSequence``, ``GRUSequence`` and ``RNNSequence`` (opset 5) are the same
layers with their inputs in another order and batch first: ``X`` ``[batch, seq, input]``,
the initial states ``[batch, d, h]``, ``sequence_lengths`` ``[batch]``, ``W``, ``R`` as
above and ``B`` ``[d, g*h]`` (one bias a gate; ``[d, 4*h]`` for a GRU that is
``linear_before_reset``).

Each is an exact (``none``) broadcast of the given shape with the expected one, so its
finding, conditions and domain requirements are those of any other broadcast.

Examples
--------
>>> from bcast import Shape
>>> from bcast.models.graph import Node
>>> node = Node("lstm", "LSTM", ("X", "W", "R", "B"), ("Y",), attrs=(("hidden_size", 32),))
>>> shapes = [Shape.parse("[seq,N,16]"), Shape((1, 128, 16)), Shape((1, 128, 32)),
...           Shape((1, 255))]
>>> [(str(a), str(b)) for (_, a), (_, b) in (c.operands for c in RECURRENT_RULES["LSTM"](
...     node, shapes).constraints)][-1]
('[1,256]', '[1,255]')
"""

from __future__ import annotations

from typing import Final

from bcast.core.dim import MAX_DIM, Dim
from bcast.core.shape import Shape
from bcast.models.graph import Node
from bcast.models.rules_base import (
    Constraint,
    Operands,
    Outcome,
    RuleFunction,
    at,
    attr,
    equal,
    times,
)

__all__ = ["RECURRENT_RULES"]

_GATES: Final = {"LSTM": 4, "GRU": 3, "RNN": 1}
_UNKNOWN: Final = Dim.unknown()


def _times(dim: Dim, k: int) -> Dim:
    """Return ``k * dim`` (``dim`` itself for one gate, symbolic or not)."""
    return dim if k == 1 else times(k, dim)


def _recurrent(node: Node, shapes: Operands) -> Outcome:
    """LSTM, GRU, RNN: W, R, B, sequence_lens, the initial states and P against X and h."""
    x, w, r = at(shapes, 0), at(shapes, 1), at(shapes, 2)
    gates = _GATES[node.op]
    given = dict(node.attrs).get("hidden_size")
    if isinstance(given, int) and given > 0:
        hidden = Dim(given)
    elif r.rank == 3:
        hidden = r.dims[2]
    else:
        return Outcome()
    directions = w.dims[0] if w.rank == 3 else r.dims[0] if r.rank == 3 else Dim.unknown()
    batch_first = attr(node, "layout", 0) == 1
    batch = None if x.rank != 3 else x.dims[0 if batch_first else 1]
    size = None if x.rank != 3 else x.dims[2]
    wide = _times(hidden, gates)
    expected: dict[int, tuple[str, Shape]] = {
        1: ("W", Shape((directions, wide, size if size is not None else Dim.unknown()))),
        2: ("R", Shape((directions, wide, hidden))),
        3: ("B", Shape((directions, _times(hidden, 2 * gates)))),
    }
    if batch is not None:
        state = (batch, directions, hidden) if batch_first else (directions, batch, hidden)
        expected[4] = ("sequence_lens", Shape((batch,)))
        expected[5] = ("initial_h", Shape(state))
        if node.op == "LSTM":
            expected[6] = ("initial_c", Shape(state))
    if node.op == "LSTM":
        expected[7] = ("P", Shape((directions, _times(hidden, 3))))
    return _held(node, shapes, expected, gates, hidden)


def _held(
    node: Node,
    shapes: Operands,
    expected: dict[int, tuple[str, Shape]],
    gates: int,
    hidden: Dim,
) -> Outcome:
    """Hold each present input ``index`` against its ``(role, expected shape)``."""
    constraints: list[Constraint] = []
    for index, (role, want) in expected.items():
        got = at(shapes, index)
        if index < len(node.inputs) and node.inputs[index] and got.rank is not None:
            if got.rank == want.rank:  # what the rule cannot size, it does not hold
                want = Shape(
                    g if w == _UNKNOWN else w for w, g in zip(want.dims, got.dims, strict=True)
                )
            context = (
                f"{node.op} {role} {got} must be {want} ({gates} gate(s) of hidden_size "
                f"{hidden}); onnxruntime and OpenVINO refuse the node: "
            )
            constraints.append(equal("expected", want, role, got, context))
    return Outcome(tuple(constraints))


_SEQUENCES: Final = {"LSTMSequence": 4, "GRUSequence": 3, "RNNSequence": 1}


def _sequence(node: Node, shapes: Operands) -> Outcome:
    """OpenVINO's LSTMSequence, GRUSequence, RNNSequence: the states, lengths, W, R and B."""
    gates = _SEQUENCES[node.op]
    given = dict(node.attrs).get("hidden_size")
    if not isinstance(given, int) or not 1 <= given <= MAX_DIM:
        why = f"{node.op} hidden_size {given} is not a size; OpenVINO refuses the layer"
        return Outcome(errors=((None, why),))
    hidden, x = Dim(given), at(shapes, 0)
    cell = node.op == "LSTMSequence"  # X, H, C, lengths, W, R, B; else X, H, lengths, W, R, B
    first = 4 if cell else 3  # W's index
    w, r = at(shapes, first), at(shapes, first + 1)
    directions = w.dims[0] if w.rank == 3 else r.dims[0] if r.rank == 3 else Dim.unknown()
    batch = x.dims[0] if x.rank == 3 else Dim.unknown()
    size = x.dims[2] if x.rank == 3 else Dim.unknown()
    wide = _times(hidden, gates)
    bias = _times(hidden, gates + 1) if attr(node, "linear_before_reset", 0) == 1 else wide
    state = Shape((batch, directions, hidden))
    expected: dict[int, tuple[str, Shape]] = {
        1: ("initial_hidden_state", state),
        first - 1: ("sequence_lengths", Shape((batch,))),
        first: ("W", Shape((directions, wide, size))),
        first + 1: ("R", Shape((directions, wide, hidden))),
        first + 2: ("B", Shape((directions, bias))),
    }
    if cell:
        expected[2] = ("initial_cell_state", state)
    return _held(node, shapes, expected, gates, hidden)


RECURRENT_RULES: Final[dict[str, RuleFunction]] = {
    **{op: _recurrent for op in _GATES},
    **{op: _sequence for op in _SEQUENCES},
}
"""LSTM, GRU and RNN (ONNX, default domain) and OpenVINO's sequence layers, by op type."""
