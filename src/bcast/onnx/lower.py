"""Lower any broadcasting `Plan` to standard ONNX nodes (Squeeze, Unsqueeze, Expand).

A PDPD, explicit, unidirectional or bidirectional broadcast has no ONNX operator of its own,
but every plan becomes one after `bcast.core.lowering.lower` has written it as axis steps: each
broadcast operand is squeezed (PDPD's trailing ones), unsqueezed to the output's rank, and
expanded to the output shape with ONNX ``Expand`` (which is bidirectional, so expanding an
aligned operand to the output is exactly the multidirectional broadcast).

Why Unsqueeze with axes and not Reshape: a Reshape needs the aligned shape as a constant,
which only exists for static shapes. ``Squeeze``/``Unsqueeze`` take *axes*, which the plan
knows even when dims are symbols or unknown, so the same nodes serve partial shapes. The
target of ``Expand`` is a constant when the output is static; otherwise it is computed at run
time from tensors the graph already has (see `lower`).

The nodes need opset 13 or later (``axes`` as an input of Squeeze and Unsqueeze).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import onnx

from bcast.core.dim import Dim
from bcast.core.lowering import LoweredOperand
from bcast.core.lowering import lower as lower_plan
from bcast.core.modes import Mode
from bcast.core.planning import plan as make_plan
from bcast.core.plans import Plan
from bcast.core.shape import Shape, ShapeLike

__all__ = ["MIN_OPSET", "OnnxLowering", "lower"]

MIN_OPSET = 13
"""The lowest ``ai.onnx`` opset the emitted nodes are valid in."""


@dataclass(frozen=True, slots=True)
class OnnxLowering:
    """ONNX nodes and initializers that perform a `Plan`'s broadcast.

    Attributes
    ----------
    plan : Plan
        The plan that was lowered.
    nodes : tuple of onnx.NodeProto
        The nodes, in topological order.
    initializers : tuple of onnx.TensorProto
        Constants the nodes read (axes, and the output shape when it is static).
    inputs : tuple of str
        The names from ``input_names`` that the nodes read.
    outputs : tuple of str
        One output per broadcast operand, in operand order.
    input_names : tuple of str
        The ``input_names`` given, one per operand of the plan.
    """

    plan: Plan
    nodes: tuple[onnx.NodeProto, ...]
    initializers: tuple[onnx.TensorProto, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_names: tuple[str, ...]

    def to_model(
        self, elem_type: int = onnx.TensorProto.FLOAT, *, opset: int = 21
    ) -> onnx.ModelProto:
        """Wrap the nodes in a model whose inputs are the plan's operands.

        An operand tensor gets the plan's shape (symbols as ``dim_param``, other partial dims
        unknown) and ``elem_type``; a target-shape input (explicit and bidirectional modes)
        is a 1-D int64 tensor. Outputs have the plan's output shape.

        Parameters
        ----------
        elem_type : int, default onnx.TensorProto.FLOAT
            The element type of the operand tensors.
        opset : int, default 21
            The ``ai.onnx`` opset to import; at least `MIN_OPSET`.

        Returns
        -------
        onnx.ModelProto
            A model that passes ``onnx.checker.check_model``.

        Examples
        --------
        >>> import bcast, bcast.onnx, onnx
        >>> low = bcast.onnx.lower("[2,3]", "[3]", mode="unidirectional",
        ...                        input_names=["a", "b"], output_name="y")
        >>> onnx.checker.check_model(low.to_model())
        """
        if opset < MIN_OPSET:
            raise ValueError(f"opset must be at least {MIN_OPSET}; got {opset}")
        graph_inputs = []
        for k, name in enumerate(self.input_names):
            if name not in self.inputs:
                continue
            if _is_shape_operand(self.plan.mode, k):
                rank = self.plan.shapes[k].rank
                graph_inputs.append(
                    onnx.helper.make_tensor_value_info(name, onnx.TensorProto.INT64, [rank])
                )
            else:
                dims = _onnx_dims(self.plan.shapes[k])
                graph_inputs.append(onnx.helper.make_tensor_value_info(name, elem_type, dims))
        out_dims = _onnx_dims(self.plan.output)
        graph_outputs = [
            onnx.helper.make_tensor_value_info(o, elem_type, out_dims) for o in self.outputs
        ]
        graph = onnx.helper.make_graph(
            list(self.nodes),
            "bcast_lowered",
            graph_inputs,
            graph_outputs,
            initializer=list(self.initializers),
        )
        opsets = [onnx.helper.make_opsetid("", opset)]
        # The lowest IR version that carries the opset, so that older runtimes load it.
        ir_version = onnx.helper.find_min_ir_version_for(opsets)
        return onnx.helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)


def lower(
    *args: Plan | ShapeLike,
    input_names: Sequence[str],
    output_name: str | Sequence[str],
    mode: str | Mode = "numpy",
    axis: int = -1,
    axes_mapping: Sequence[int] | None = None,
    name_prefix: str | None = None,
) -> OnnxLowering:
    """Express a broadcast as standard ONNX nodes: Squeeze / Unsqueeze, then Expand.

    Parameters
    ----------
    *args : Plan, or the shapes of `bcast.plan`
        Either one `Plan`, or shapes that are passed to `bcast.plan` with ``mode``,
        ``axis`` and ``axes_mapping``.
    input_names : sequence of str
        One graph value name per operand of the plan. For operands that are arrays it names
        the tensor. For the target of ``explicit`` and ``bidirectional`` it names a 1-D
        int64 tensor holding the target shape (as ONNX ``Expand`` takes it). A name is only
        read where it is needed; see Notes.
    output_name : str or sequence of str
        The names of the broadcast results: one per broadcast operand (all operands for
        ``numpy`` and ``none``, B for ``pdpd`` and ``unidirectional``, data for ``explicit``
        and ``bidirectional``). A single str is accepted when there is one.
    mode, axis, axes_mapping
        As for `bcast.plan`, used when shapes are given.
    name_prefix : str, optional
        Prefix of intermediate value and node names; default: the first output name.

    Returns
    -------
    OnnxLowering
        The nodes, their initializers, and the names they read and write.

    Raises
    ------
    BroadcastError
        From `bcast.plan`, for incompatible shapes.
    ValueError
        If the number of names is wrong, or the plan has an unknown rank.
    TypeError
        If ``input_names`` is a str, or a Plan comes with other positional arguments or
        with ``mode``, ``axis`` or ``axes_mapping``.

    Notes
    -----
    The target of ``Expand`` is a constant when the output shape is static. Otherwise it
    comes from the graph at run time: ``Shape(A)`` for ``pdpd`` and ``unidirectional``
    (the result is A's shape); the target shape for ``explicit`` and ``bidirectional``, a
    constant when it is static and the target-shape input otherwise (``Expand`` is
    bidirectional, which is exactly that mode, so it yields the output); and for
    ``numpy`` the shapes of the aligned operands folded with ``Where(Equal(s, 1), t, s)``,
    which is the multidirectional rule on shapes that are valid (zero-size dims included).
    Mode ``none`` never broadcasts, so its outputs are ``Identity``. Checks that only a
    concrete shape can decide are left to ONNX's ``Squeeze`` and ``Expand``, which fail
    at run time where the rule would.

    Examples
    --------
    >>> import bcast, bcast.onnx
    >>> low = bcast.onnx.lower("[2,3,4]", "[3,1]", mode="pdpd", axis=1,
    ...                        input_names=["a", "b"], output_name="y")
    >>> [n.op_type for n in low.nodes], low.inputs
    (['Unsqueeze', 'Expand'], ('b',))
    >>> low = bcast.onnx.lower("[N,3]", "[3]", input_names=["x", "z"], output_name=["x2", "z2"])
    >>> [n.op_type for n in low.nodes]
    ['Unsqueeze', 'Shape', 'Shape', 'Equal', 'Where', 'Identity', 'Expand']
    """
    the_plan = _as_plan(args, mode, axis, axes_mapping)
    if isinstance(input_names, str):
        raise TypeError(f"input_names must be a sequence of str; got the str {input_names!r}")
    names = tuple(input_names)
    if len(names) != len(the_plan.shapes):
        raise ValueError(
            f"input_names must name each of the {len(the_plan.shapes)} operands; got {names!r}"
        )
    lowering = lower_plan(the_plan)
    outs = (output_name,) if isinstance(output_name, str) else tuple(output_name)
    if len(outs) != len(lowering.operands):
        raise ValueError(
            f"output_name must name each of the {len(lowering.operands)} broadcast operands "
            f"({', '.join(the_plan.labels[s.operand] for s in lowering.operands)}); got {outs!r}"
        )
    builder = _Builder(name_prefix if name_prefix is not None else outs[0])
    aligned = [builder.align(step, names[step.operand]) for step in lowering.operands]
    shape = _expand_target(builder, the_plan, lowering.operands, aligned, names)
    for step, value, out in zip(lowering.operands, aligned, outs, strict=True):
        if step.needs_expand and shape is not None:
            builder.node("Expand", [value, shape], out)
        else:
            builder.node("Identity", [value], out)
    return OnnxLowering(
        plan=the_plan,
        nodes=tuple(builder.nodes),
        initializers=tuple(builder.initializers),
        inputs=tuple(n for n in names if n in builder.read),
        outputs=outs,
        input_names=names,
    )


def _as_plan(
    args: tuple[Plan | ShapeLike, ...],
    mode: str | Mode,
    axis: int,
    axes_mapping: Sequence[int] | None,
) -> Plan:
    if len(args) == 1 and isinstance(args[0], Plan):
        if Mode.parse(mode) is not Mode.NUMPY or axis != -1 or axes_mapping is not None:
            raise TypeError("pass either a Plan or shapes with mode/axis/axes_mapping, not both")
        return args[0]
    shapes: list[ShapeLike] = []
    for arg in args:
        if isinstance(arg, Plan):
            raise TypeError("a Plan must be the only positional argument")
        shapes.append(arg)
    return make_plan(*shapes, mode=Mode.parse(mode), axis=axis, axes_mapping=axes_mapping)


def _is_shape_operand(mode: Mode, k: int) -> bool:
    """Tell whether operand ``k`` is a target shape (explicit, bidirectional), not an array."""
    return k == 1 and mode in (Mode.EXPLICIT, Mode.BIDIRECTIONAL)


def _onnx_dims(shape: Shape) -> list[int | str | None] | None:
    if shape.rank is None:
        return None
    return [_onnx_dim(d) for d in shape]


def _onnx_dim(dim: Dim) -> int | str | None:
    if dim.is_static:
        return dim.value
    return dim.name  # a symbol becomes dim_param; any other partial dim is unknown


class _Builder:
    """Collects nodes and initializers with names unique under one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.read: set[str] = set()
        self._produced: set[str] = set()
        self._count = 0

    def fresh(self, what: str) -> str:
        self._count += 1
        return f"{self.prefix}__bcast_{what}_{self._count}"

    def constant(self, what: str, values: Sequence[int]) -> str:
        import numpy as np  # the worker reading models loads no NumPy (bcast._spawn.lean_onnx)

        name = self.fresh(what)
        self.initializers.append(onnx.numpy_helper.from_array(np.array(values, np.int64), name))
        self._produced.add(name)
        return name

    def node(self, op_type: str, inputs: list[str], output: str | None = None) -> str:
        out = output if output is not None else self.fresh(op_type.lower())
        for name in inputs:
            if name not in self._produced:
                self.read.add(name)
        self.nodes.append(onnx.helper.make_node(op_type, inputs, [out], name=f"{out}__node"))
        self._produced.add(out)
        return out

    def align(self, step: LoweredOperand, value: str) -> str:
        """Squeeze the dropped axes and unsqueeze the missing ones; return the new value."""
        if step.squeeze_axes:
            axes = self.constant("squeeze_axes", step.squeeze_axes)
            value = self.node("Squeeze", [value, axes])
        if step.unsqueeze_axes:
            axes = self.constant("unsqueeze_axes", step.unsqueeze_axes)
            value = self.node("Unsqueeze", [value, axes])
        return value


def _expand_target(
    builder: _Builder,
    plan: Plan,
    steps: tuple[LoweredOperand, ...],
    aligned: list[str],
    names: tuple[str, ...],
) -> str | None:
    """Return the value holding the output shape for Expand, or None when none is needed."""
    if plan.mode is Mode.NONE or not any(s.needs_expand for s in steps):
        return None
    if plan.output.is_static:
        return builder.constant("shape", plan.output.to_tuple())
    if plan.mode in (Mode.PDPD, Mode.UNIDIRECTIONAL):
        return builder.node("Shape", [names[0]])
    if plan.mode in (Mode.EXPLICIT, Mode.BIDIRECTIONAL):
        target = plan.shapes[1]
        if target.is_static:  # the data is partial; the target's values are known
            return builder.constant("shape", target.to_tuple())
        builder.read.add(names[1])
        return names[1]
    shapes = [builder.node("Shape", [value]) for value in aligned]
    result = shapes[0]
    if len(shapes) > 1:
        one = builder.constant("one", [1])
        for other in shapes[1:]:
            is_one = builder.node("Equal", [result, one])
            result = builder.node("Where", [is_one, other, result])
    return result
