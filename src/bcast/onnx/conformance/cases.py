"""The cases of ``bcast conformance``: one-node ONNX models with their inputs.

`generate` walks `bcast.onnx.conformance.catalog.OPS`: every operator, every element type
its schema's type constraints allow (``onnx.defs.get_schema`` at the opset of the case),
its shape table, three ways of giving the operands (``static``: graph inputs of fixed
shape; ``symbolic``: every dim a ``dim_param``, so the runtime meets the shapes at run
time; ``initializer``: every operand after the first a constant of the model) and two kinds
of values (seeded random draws, and edge values paired all against all). The other element
types get the representative rows only (`catalog.REDUCED`), in static form, so that the
default run stays within its time budget. Generation is deterministic for a seed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from bcast.core.shape import Shape
from bcast.onnx.conformance.catalog import OPS, REDUCED, OpSpec, Row
from bcast.onnx.conformance.values import case_rng, draw, edge_values, is_float, np_dtype

__all__ = ["MODES", "Case", "generate", "opset_of"]

Array = npt.NDArray[Any]

MODES: Final = ("static", "symbolic", "initializer")
"""How operands are given: fixed shapes, dims decided at run time, constants."""
_SKIP_TYPES: Final = frozenset({"string", "complex64", "complex128"})
_REPRESENTATIVE: Final = ("float", "int32", "bool", "int8", "uint8", "float16")
_MIN_OPSET: Final = 13
_MAX_OPSET: Final = 21
_NAMES: Final = ("A", "B", "C")


@dataclass(slots=True)
class Case:
    """One single-node model, its inputs and, once `expected.decide` ran, bcast's answer."""

    id: str
    op: str
    attrs: dict[str, Any]
    opset: int
    dtypes: tuple[str, ...]
    shapes: tuple[str, ...]
    pattern: str
    operands: str
    values: str
    inputs: list[Array]
    constant: tuple[bool, ...]
    out_type: str
    model: bytes = b""
    expected: list[Array] | None = None
    refusal: str | None = None  # bcast's error where the case must be refused
    mask: Array | None = None  # output elements the operator text leaves undefined
    spec: list[str] = field(default_factory=list)

    @property
    def feeds(self) -> dict[str, Array]:
        """The graph inputs by name (the constants are in the model)."""
        names = self.input_names
        return {n: x for n, x, c in zip(names, self.inputs, self.constant, strict=True) if not c}

    @property
    def input_names(self) -> list[str]:
        """The node's input names, in order."""
        return list(_NAMES[: len(self.inputs)]) if len(self.inputs) <= 3 else []

    @property
    def valid(self) -> bool:
        """Whether bcast accepts the case (the runtime must then run it)."""
        return self.refusal is None


def opset_of(op: str) -> int:
    """Return the opset of ``op``'s cases: its newest version up to 21, and at least 13.

    >>> opset_of("Add"), opset_of("And"), opset_of("QuantizeLinear")
    (14, 13, 21)
    """
    return max(_MIN_OPSET, int(onnx.defs.get_schema(op, _MAX_OPSET).since_version))


def _type_lists(op: str, opset: int, count: int) -> list[list[str]]:
    """Return the ONNX type names each of the first ``count`` inputs may take."""
    schema = onnx.defs.get_schema(op, opset)
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    formals = list(schema.inputs)
    lists = []
    for i in range(count):
        formal = formals[min(i, len(formals) - 1)]
        strs = allowed.get(formal.type_str, [formal.type_str])
        names = [s[len("tensor(") : -1] for s in strs if s.startswith("tensor(")]
        lists.append([n for n in names if n not in _SKIP_TYPES])
    return lists


def _type_params(op: str, opset: int, count: int) -> list[str]:
    schema = onnx.defs.get_schema(op, opset)
    formals = list(schema.inputs)
    return [formals[min(i, len(formals) - 1)].type_str for i in range(count)]


def _combos(op: str, opset: int, count: int, kind: str) -> list[tuple[str, ...]]:
    """Every assignment of element types to the inputs that the type constraints allow."""
    params = _type_params(op, opset, count)
    lists = _type_lists(op, opset, count)
    order = list(dict.fromkeys(params))
    choices = [lists[params.index(p)] for p in order]
    combos = []
    for picked in itertools.product(*choices):
        chosen = dict(zip(order, picked, strict=True))
        combo = tuple(chosen[p] for p in params)
        if kind and not all(_kind_fits(t, kind) for t in combo[:1]):
            continue
        combos.append(combo)
    return combos


def _kind_fits(name: str, kind: str) -> bool:
    floating = is_float(np_dtype(name))
    return floating if kind == "f" else not floating and name != "bool"


def _representative(combo: tuple[str, ...], combos: Sequence[tuple[str, ...]]) -> bool:
    """Whether ``combo`` is one of the (at most two) element types every row is tried on."""
    picked = []
    for name in _REPRESENTATIVE:
        for c in combos:
            if c[0] == name and c not in picked:
                picked.append(c)
                break
        if len(picked) == 2:
            break
    return combo in (picked or list(combos[:1]))


def _parse(text: str) -> tuple[int, ...]:
    return tuple(int(d.value) for d in Shape.parse(text))


def generate(ops: Sequence[str] | None = None, *, seed: int = 0) -> Iterator[Case]:
    """Yield the cases of the kit, operator by operator, deterministic for ``seed``.

    Parameters
    ----------
    ops : sequence of str, optional
        The operators (default: all of `bcast.onnx.conformance.catalog.OPS`).
    seed : int
        The seed of every random draw.

    Yields
    ------
    Case
        Without bcast's answer (see `bcast.onnx.conformance.expected.decide`).

    Examples
    --------
    >>> cases = list(generate(["Add"]))
    >>> len({c.id for c in cases}) == len(cases)
    True
    >>> sorted({c.operands for c in cases})
    ['initializer', 'static', 'symbolic']
    """
    wanted = None if ops is None else set(ops)
    for spec in OPS:
        if wanted is not None and spec.name not in wanted:
            continue
        yield from _op_cases(spec, seed)


def _op_cases(spec: OpSpec, seed: int) -> Iterator[Case]:
    opset = opset_of(spec.name)
    kinds = spec.kinds or ("",) * len(spec.variants)
    for variant, kind in zip(spec.variants, kinds, strict=True):
        count = 2 if spec.family in {"binary", "prelu", "expand"} else 3
        combos = _combos(spec.name, opset, count, kind)
        for combo in combos:
            rep = _representative(combo, combos)
            for index, row in enumerate(spec.rows):
                if spec.family == "binary" and not rep and index not in REDUCED:
                    continue
                for mode in MODES if rep else ("static",):
                    yield _case(spec, variant, opset, combo, row, mode, "random", seed)
            for mode in ("static", "symbolic") if rep else ("static",):
                yield _edge_case(spec, variant, opset, combo, mode)


def _label(spec: OpSpec, variant: dict[str, Any], combo: tuple[str, ...]) -> str:
    attrs = "".join(f"-{k}{v}" for k, v in variant.items())
    return f"{spec.name}{attrs}-{'-'.join(dict.fromkeys(combo))}"


def _case(
    spec: OpSpec,
    variant: dict[str, Any],
    opset: int,
    combo: tuple[str, ...],
    row: Row,
    mode: str,
    values: str,
    seed: int,
) -> Case:
    pattern, *rest = row
    attrs = dict(variant)
    if spec.family == "quant":
        x_shape, s_shape, extra = rest
        shapes = [x_shape, s_shape, s_shape]
        attrs.update(extra)
    elif spec.family == "expand":
        data, target = rest
        shapes = [data, f"[{len(target)}]"]
        attrs_text = "to" + "_".join(map(str, target))
    else:
        shapes = list(rest)
    if spec.family != "expand":
        attrs_text = ""
    count = len(shapes)
    combo = combo[:count] if len(combo) >= count else combo + combo[-1:] * (count - len(combo))
    rng = case_rng(seed, f"{_label(spec, variant, combo)}-{pattern}-{shapes}-{mode}-{values}")
    inputs = []
    for i, (text, name) in enumerate(zip(shapes, combo, strict=True)):
        if spec.family == "expand" and i == 1:
            inputs.append(np.array(rest[1], np.int64))
            continue
        inputs.append(draw(rng, np_dtype(name), _parse(text), spec.roles[i]))
    constant = tuple(i > 0 and mode == "initializer" for i in range(count))
    if spec.family == "expand" and mode == "static":
        constant = (False, True)  # the target known when the model is loaded
    case = _finish(spec, attrs, opset, combo, shapes, pattern, mode, values, inputs, constant)
    if attrs_text:
        case.id += f"-{attrs_text}"
    return case


def _edge_case(
    spec: OpSpec, variant: dict[str, Any], opset: int, combo: tuple[str, ...], mode: str
) -> Case:
    """All edge values of each input against all of the others' (an outer broadcast)."""
    count = len(spec.roles) if spec.family != "variadic" else 2
    combo = combo[:count] if len(combo) >= count else combo + combo[-1:] * (count - len(combo))
    attrs = dict(variant)
    if spec.family == "quant":
        x = edge_values(np_dtype(combo[0]), "any")
        half = 0.5 if is_float(np_dtype(combo[1])) else 2.0  # an integer scale is never 0
        scale = np.asarray(np.array(half, np.float32).astype(np_dtype(combo[1])))
        zero = np.zeros((), np_dtype(combo[2]))
        inputs = [x, scale, zero]
    elif spec.family == "expand":
        x = edge_values(np_dtype(combo[0]), "any")
        inputs = [x.reshape(-1, 1), np.array([2, 1, x.size], np.int64)]
    elif spec.family == "prelu":
        x = edge_values(np_dtype(combo[0]), "any")
        inputs = [np.tile(x, (x.size, 1)), x.copy()]
    elif spec.family == "where":
        x = edge_values(np_dtype(combo[1]), "any")
        inputs = [np.array([[[True]], [[False]]]), x.reshape(-1, 1), x.copy()]
    else:
        a = edge_values(np_dtype(combo[0]), spec.roles[0])
        b = edge_values(np_dtype(combo[1]), spec.roles[1])
        inputs = [a.reshape(-1, 1), b.reshape(1, -1)]
    shapes = ["[" + ",".join(map(str, x.shape)) + "]" for x in inputs]
    constant = tuple(i > 0 and spec.family in {"expand", "quant"} for i in range(count))
    return _finish(spec, attrs, opset, combo, shapes, "edge-values", mode, "edge", inputs, constant)


def _finish(
    spec: OpSpec,
    attrs: dict[str, Any],
    opset: int,
    combo: tuple[str, ...],
    shapes: list[str],
    pattern: str,
    mode: str,
    values: str,
    inputs: list[Array],
    constant: tuple[bool, ...],
) -> Case:
    out_type = _out_type(spec, combo)
    label = f"{_label(spec, attrs, combo)}-{pattern}-{mode}"
    case = Case(
        id="",
        op=spec.name,
        attrs=attrs,
        opset=opset,
        dtypes=tuple(combo),
        shapes=tuple(shapes),
        pattern=pattern,
        operands=mode,
        values=values,
        inputs=inputs,
        constant=constant,
        out_type=out_type,
    )
    case.id = _safe_id(f"{label}-{values}-{'x'.join(shapes)}")
    case.model = model_bytes(case)
    return case


def _safe_id(text: str) -> str:
    out = text.replace("[]", "0d").replace("[", "").replace("]", "").replace(",", "_")
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in out)


def _out_type(spec: OpSpec, combo: tuple[str, ...]) -> str:
    if spec.name in {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"}:
        return "bool"
    if spec.name == "QuantizeLinear":
        return combo[2]
    if spec.name == "DequantizeLinear":
        return combo[1]
    if spec.family == "where":
        return combo[1]
    return combo[0]


def model_bytes(case: Case) -> bytes:
    """Build the one-node model of ``case`` and return it serialized.

    Graph inputs are declared with the case's shapes (``static``, ``initializer``) or with a
    ``dim_param`` per dim (``symbolic``); constants are initializers; the output has the
    element type the operator's definition gives and a ``dim_param`` per dim of its rank.
    """
    names = case.input_names
    graph_inputs, initializers = [], []
    for name, x, const in zip(names, case.inputs, case.constant, strict=True):
        if const:
            initializers.append(numpy_helper.from_array(x, name))
            continue
        elem = helper.np_dtype_to_tensor_dtype(x.dtype)
        dims: list[int | str] = list(x.shape)
        if case.operands == "symbolic":
            dims = [f"{name.lower()}{k}" for k in range(x.ndim)]
        graph_inputs.append(helper.make_tensor_value_info(name, elem, dims))
    rank = _out_rank(case)
    out_elem = int(TensorProto.DataType.Value(case.out_type.upper()))
    output = helper.make_tensor_value_info("Y", out_elem, [f"y{k}" for k in range(rank)])
    node = helper.make_node(case.op, names, ["Y"], **case.attrs)
    graph = helper.make_graph([node], "conformance", graph_inputs, [output], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = min(model.ir_version, 10)
    return bytes(model.SerializeToString())


def _out_rank(case: Case) -> int:
    if case.op == "Expand":
        return max(case.inputs[0].ndim, int(case.inputs[1].size))
    if case.op in {"PRelu", "QuantizeLinear", "DequantizeLinear"}:
        return case.inputs[0].ndim
    return max(x.ndim for x in case.inputs)
