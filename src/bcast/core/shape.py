"""`Shape`: an immutable sequence of `Dim`, or a shape of unknown rank; its text form.

Text form (parse and ``str`` agree, no spaces): ``[2,3,4,5]``; ``[]`` scalar; ``?`` unknown
dim; ``1..10`` interval; ``1..`` no upper bound; ``N`` symbol; ``[...]`` unknown rank.
`Shape.parse` also takes the form without brackets (``2,3,?``) for command lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Union, overload

from bcast.core.dim import SMALL_DIMS, Dim, DimLike, as_dim
from bcast.core.errors import BroadcastError, show_text
from bcast.core.pickling import fast_state

__all__ = ["Shape", "ShapeLike", "as_shape", "informative", "more_named", "more_precise"]


def _split_dims(body: str) -> list[str]:
    """Split shape text at the commas outside parentheses (an exporter's ``Min(64, s)``).

    >>> _split_dims("Min(64, s),3"), _split_dims("2,3")
    (['Min(64, s)', '3'], ['2', '3'])
    """
    if "(" not in body:
        return body.split(",")
    parts, depth, start = [], 0, 0
    for k, char in enumerate(body):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    parts.append(body[start:])
    return parts


@fast_state
@dataclass(frozen=True, slots=True, init=False, eq=False)
class Shape(Sequence[Dim]):
    """An immutable, hashable shape: a sequence of `Dim`, or unknown rank.

    A `collections.abc.Sequence` of `Dim`, and `Dim` is an index (``__index__``) when it is
    static: a static shape is what NumPy takes as a shape, to the type checker as well
    (``np.zeros(shape)``); `to_tuple` gives the ints for libraries that want a tuple
    (``torch.zeros(shape.to_tuple())``).

    Parameters
    ----------
    dims : iterable of Dim, int, str or None
        The dimensions; an int is a static dim, None is ``?``, a str is a symbol or a dim
        text such as ``"2..5"``.

    Raises
    ------
    TypeError
        For an element that is not a dim (a float, a bool, a nested list).
    BroadcastError
        For a negative or oversized dim, or malformed dim text.

    Examples
    --------
    >>> import bcast
    >>> s = bcast.Shape.parse("[N,3,1..8]")
    >>> s.rank, s.is_static, str(s)
    (3, False, '[N,3,1..8]')
    >>> bcast.Shape((2, 3)) == (2, 3)
    True
    >>> str(bcast.Shape([None, "N", 4])), bcast.Shape.dynamic().rank is None
    ('[?,N,4]', True)
    >>> import numpy as np
    >>> np.zeros(bcast.Shape((2, 3))).shape
    (2, 3)
    """

    dims: tuple[Dim, ...]
    ranked: bool

    def __init__(self, dims: Iterable[DimLike] = (), /) -> None:
        if isinstance(dims, (str, bytes)):
            raise TypeError("Shape() takes a sequence of dims; use Shape.parse() for text")
        if not isinstance(dims, (tuple, list)) and isinstance(dims, Shape):  # tuple: no ABC check
            object.__setattr__(self, "dims", dims.dims)
            object.__setattr__(self, "ranked", dims.ranked)
            return
        try:
            items = tuple(dims)
        except TypeError:
            raise TypeError(
                f"a shape must be a sequence of dims; got {type(dims).__name__} {dims!r}"
            ) from None
        object.__setattr__(self, "dims", tuple(_element(d, i) for i, d in enumerate(items)))
        object.__setattr__(self, "ranked", True)

    @classmethod
    def dynamic(cls) -> Shape:
        """Return the shape of unknown rank, written ``[...]``."""
        return _DYNAMIC

    @classmethod
    def of_dims(cls, dims: tuple[Dim, ...]) -> Shape:
        """Build from already-normalised dims, without validating them: the rules' fast path.

        >>> import bcast
        >>> str(bcast.Shape.of_dims((bcast.Dim(2), bcast.Dim.symbol("N"))))
        '[2,N]'
        """
        shape = object.__new__(cls)
        object.__setattr__(shape, "dims", dims)
        object.__setattr__(shape, "ranked", True)
        return shape

    @classmethod
    def parse(cls, text: str) -> Shape:
        """Parse the text form; brackets are optional, spaces are ignored.

        >>> import bcast
        >>> [str(bcast.Shape.parse(t)) for t in ["[2, 3]", "2,?,N", "[]", "[...]", "4"]]
        ['[2,3]', '[2,?,N]', '[]', '[...]', '[4]']
        """
        if not isinstance(text, str):
            raise TypeError(f"shape text must be a str; got {type(text).__name__} {text!r}")
        # Spaces around brackets and commas are ignored; inside a dim they are an error
        # ("[2 3]" is not [23]): Dim.parse strips each item and rejects inner white space.
        body = text.strip()
        if body.startswith("[") or body.endswith("]"):
            if not (body.startswith("[") and body.endswith("]")):
                raise BroadcastError(f"cannot parse shape {show_text(text)}: unbalanced brackets")
            body = body[1:-1].strip()
        if body == "...":
            return _DYNAMIC
        if body == "":
            return _SCALAR
        parts = _split_dims(body)  # at the commas between dims, not in Min(64, s)
        if any(p.strip() == "" for p in parts):
            raise BroadcastError(f"cannot parse shape {show_text(text)}: empty dimension")
        try:
            return cls.of_dims(tuple(Dim.parse(p) for p in parts))
        except BroadcastError as err:
            raise BroadcastError(f"cannot parse shape {show_text(text)}: {err.reason}") from None

    # -- questions ---------------------------------------------------------------------

    @property
    def rank(self) -> int | None:
        """Number of dims, or None for unknown rank."""
        return len(self.dims) if self.ranked else None

    @property
    def is_static(self) -> bool:
        """True when the rank and every dim are known values."""
        return self.ranked and all(d.lo == d.hi for d in self.dims)

    def to_tuple(self) -> tuple[int, ...]:
        """Return the dims of a static shape as ints; ValueError for a partial shape.

        >>> import bcast
        >>> bcast.Shape.parse("[2,3]").to_tuple()
        (2, 3)
        """
        if not self.is_static:
            raise ValueError(f"shape {self} is not static")
        return tuple(d.lo for d in self.dims)

    def size(self) -> int | None:
        """Return the number of elements of a static shape, or None when unknown.

        >>> import bcast
        >>> bcast.Shape((2, 3, 4)).size(), bcast.Shape(("N", 2)).size()
        (24, None)
        """
        if not self.is_static:
            return None
        total = 1
        for d in self.dims:
            total *= d.lo
        return total

    # -- sequence protocol -------------------------------------------------------------

    def __iter__(self) -> Iterator[Dim]:
        self._require_rank()
        return iter(self.dims)

    def __len__(self) -> int:
        self._require_rank()
        return len(self.dims)

    @overload
    def __getitem__(self, index: int) -> Dim: ...
    @overload
    def __getitem__(self, index: slice) -> Shape: ...
    def __getitem__(self, index: int | slice) -> Dim | Shape:
        self._require_rank()
        if isinstance(index, slice):
            return Shape.of_dims(self.dims[index])
        return self.dims[index]

    def _require_rank(self) -> None:
        if not self.ranked:
            raise TypeError("a shape of unknown rank [...] has no dims")

    # -- text and comparison -----------------------------------------------------------

    def __str__(self) -> str:
        if not self.ranked:
            return "[...]"
        return "[" + ",".join(str(d) for d in self.dims) + "]"

    def __repr__(self) -> str:
        return f"Shape.parse({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Shape):
            return self.ranked == other.ranked and self.dims == other.dims
        if isinstance(other, tuple):
            return (
                self.ranked
                and len(other) == len(self.dims)
                and all(d == o for d, o in zip(self.dims, other, strict=True))
            )
        return NotImplemented

    def __hash__(self) -> int:
        if not self.ranked:
            return hash("[...]")
        return hash(self.dims)  # a static shape hashes as the tuple of its ints


ShapeLike = Union[Shape, str, Sequence[DimLike]]
"""What public functions accept as a shape: a `Shape`, its text form, or a sequence of dims."""

_DYNAMIC = object.__new__(Shape)
object.__setattr__(_DYNAMIC, "dims", ())
object.__setattr__(_DYNAMIC, "ranked", False)
_SCALAR = Shape.of_dims(())


def _element(value: object, index: int) -> Dim:
    if isinstance(value, bool):
        raise TypeError(f"dimension {index} must be an int, not bool; got {value!r}")
    if isinstance(value, (list, tuple, set, dict, float)) or value is Ellipsis:
        raise TypeError(
            f"dimension {index} must be an int, None, a str or a Dim; "
            f"got {type(value).__name__} {value!r}"
        )
    try:
        return as_dim(value)  # type: ignore[arg-type]
    except BroadcastError as err:
        reason = err.reason
        if reason.startswith("dimension "):  # "dimension must be ..." -> "dimension 2 must be ..."
            raise BroadcastError(f"dimension {index} {reason[len('dimension ') :]}") from None
        raise BroadcastError(f"dimension {index}: {reason}") from None


_INT_SHAPES: dict[tuple[object, ...], Shape] = {}
_INT_SHAPES_SIZE = 4096


def _small_static(value: Sequence[object]) -> Shape | None:
    """Build a shape of small plain ints from the shared dims, or None (take the full path).

    This is the hot path of cold `broadcast_shapes` calls; `type(d) is int` keeps bools out.
    """
    small = SMALL_DIMS
    for d in value:
        if type(d) is not int or not 0 <= d < len(small):
            return None
    # Shared per tuple of (checked) ints: building a Shape costs more than finding one.
    key = value if type(value) is tuple else tuple(value)
    shape = _INT_SHAPES.get(key)
    if shape is None:
        shape = Shape.of_dims(tuple(small[d] for d in key))  # type: ignore[index]
        if len(_INT_SHAPES) >= _INT_SHAPES_SIZE:
            _INT_SHAPES.clear()  # O(1) amortised, like the rules' plan cache
        _INT_SHAPES[key] = shape
    return shape


def as_shape(value: ShapeLike) -> Shape:
    """Normalise a shape-like argument: a `Shape`, its text form, or a sequence of dims.

    A NumPy integer array of rank 1 is accepted as a sequence. A bare int is not a shape
    (NumPy reads it as ``(n,)``; bcast asks you to say so).

    >>> import bcast
    >>> str(as_shape("2,3")), str(as_shape((2, None))), str(as_shape([]))
    ('[2,3]', '[2,?]', '[]')
    >>> as_shape(3)
    Traceback (most recent call last):
    ...
    TypeError: a shape must be a Shape, its text form or a sequence of dims; got int 3 ...
    """
    if isinstance(value, (tuple, list)):  # first: a Shape check of a tuple costs an ABC lookup
        fast = _small_static(value)
        return Shape(value) if fast is None else fast
    if isinstance(value, Shape):
        return value
    if isinstance(value, str):
        return Shape.parse(value)
    if isinstance(value, (bytes, int, float, dict, set)) or value is None:
        hint = f" (write ({value},) for a rank-1 shape)" if isinstance(value, int) else ""
        raise TypeError(
            "a shape must be a Shape, its text form or a sequence of dims; "
            f"got {type(value).__name__} {value!r}{hint}"
        )
    if hasattr(value, "ndim") and hasattr(value, "tolist"):
        if value.ndim != 1:
            raise TypeError(f"an array used as a shape must be 1-D; got ndim {value.ndim}")
        return Shape(value.tolist())
    return Shape(value)


def informative(dim: Dim) -> bool:
    """Tell whether ``dim`` says anything: a size, a name or an upper bound."""
    return dim.is_static or dim.name is not None or dim.hi is not None


def more_named(new: Shape, old: Shape) -> Shape | None:
    """Return ``old`` with its unnamed dims (``?``, ``1..``, ``0..64``) named by ``new``.

    Like `more_precise`, but an interval gives way too: a size or a symbol (a dim
    expression of the inputs) says which input dims it comes from, an interval does not.

    >>> str(more_named(Shape.parse("[N,h2]"), Shape.parse("[N,1..64]")))
    '[N,h2]'
    >>> more_named(Shape.parse("[?,h]"), Shape.parse("[N,h]")) is None
    True
    """
    if new.rank is None or old.rank is None or new.rank != old.rank:
        return more_precise(new, old)
    dims = [
        n if not o.is_static and o.name is None and (n.is_static or n.name is not None) else o
        for n, o in zip(new.dims, old.dims, strict=True)
    ]
    merged = Shape(dims)
    return None if merged == old else merged


def more_precise(new: Shape, old: Shape) -> Shape | None:
    """Return ``old`` with what ``new`` knows beyond it, or None if it knows nothing more.

    Only unknown dims of ``old`` are filled; a dim both know is ``old``'s (never contradicted).

    >>> str(more_precise(Shape.parse("[N,16]"), Shape.parse("[?,?]")))
    '[N,16]'
    >>> more_precise(Shape.parse("[N,16]"), Shape.parse("[N,16]")) is None
    True
    """
    if new.rank is None:
        return None
    if old.rank is None:
        return new
    if new.rank != old.rank:
        return None
    dims = [
        n if not informative(o) and informative(n) else o
        for n, o in zip(new.dims, old.dims, strict=True)
    ]
    merged = Shape(dims)
    return None if merged == old else merged
