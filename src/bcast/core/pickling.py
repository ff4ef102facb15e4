"""Pickling of frozen slotted dataclasses without `dataclasses.fields` on every object.

A model's graph comes back from the worker process pickled (`bcast.loading`): tens of
thousands of `Node` and `Shape` objects. The ``__getstate__`` that ``dataclass(slots=True,
frozen=True)`` writes walks ``fields(self)`` for each one; `fast_state` gives a class a
getter and a setter over its field names, computed once.

>>> import pickle
>>> from bcast.core.shape import Shape
>>> Shape.parse("[N,3]").__getstate__()
((Dim.symbol('N'), Dim(3)), True)
>>> pickle.loads(pickle.dumps(Shape.parse("[N,3]")))
Shape.parse('[N,3]')
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_state"]

C = TypeVar("C", bound=type)


def fast_state(cls: C) -> C:
    """Give the dataclass ``cls`` a ``__getstate__``/``__setstate__`` of its fields, in order."""
    names = tuple(f.name for f in dataclasses.fields(cls))

    def __getstate__(self: Any) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in names])

    def __setstate__(self: Any, state: tuple[Any, ...]) -> None:
        for name, value in zip(names, state, strict=True):
            object.__setattr__(self, name, value)

    cls.__getstate__ = __getstate__  # type: ignore[attr-defined]
    cls.__setstate__ = __setstate__  # type: ignore[attr-defined]
    return cls
