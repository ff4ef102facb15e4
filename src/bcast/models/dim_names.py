"""The names of a graph's symbolic dims: what ``--dim`` can bind, and what it names in vain."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bcast.models.graph import Graph

__all__ = ["dim_names", "unused_dims"]


def dim_names(graph: Graph) -> set[str]:
    """Return the names of the symbolic dims of ``graph``'s values (what ``--dim`` binds)."""
    shapes = [*graph.shapes.values(), *(s for n in graph.nodes for s in n.output_shapes)]
    return {d.name for shape in shapes for d in shape.dims if d.name is not None}


def unused_dims(graphs: Iterable[Graph], dims: Mapping[str, object]) -> list[str]:
    """Return the names in ``dims`` that no dim of any of ``graphs`` has, in ``dims`` order.

    >>> from bcast.core.shape import Shape
    >>> g = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[batch,3]")})
    >>> unused_dims([g], {"batch": 2, "nosuch": 3})
    ['nosuch']
    """
    used: set[str] = set()
    for graph in graphs:
        used |= dim_names(graph)
    return [name for name in dims if name not in used]
