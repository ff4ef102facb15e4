"""One dimension: static, an interval, or a symbol; and the one per-dimension merge.

A `Dim` is a closed interval ``[lo, hi]`` of non-negative integers (``hi`` None = unbounded),
optionally carrying a *symbol*: an ONNX ``dim_param`` whose value is unknown but whose identity
is known. A static dim is ``lo == hi``; ``?`` is ``[0, None]``.

Rules never compare dims with ``==`` (which is structural); they ask three-valued questions
(`Dim.definitely_equal`, `Dim.maybe_one`, ...) and merge with `merge_dims`, the only place
where the partial-shape policy of bcast lives (DESIGN §3).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Final

from bcast.core.errors import BroadcastError, show_int, show_text
from bcast.core.expressions import parse_expression

__all__ = [
    "MAX_DIM",
    "Dim",
    "DimLike",
    "as_dim",
    "intersect_dims",
    "merge_dims",
    "merge_into",
    "named_dim",
]

#: The largest dimension bcast accepts: ONNX and OpenVINO store dims as int64.
MAX_DIM: Final = 2**63 - 1
_MAX_DIGITS: Final = len(str(MAX_DIM))

_SYMBOL = re.compile(r"[A-Za-z_][^\s,\[\]?]*")
_BAD_SYMBOL_CHARS: Final = re.compile(r"[^A-Za-z0-9_.:/+\-*]")
_INTERVAL = re.compile(r"([0-9]*)\.\.([0-9]*)")


class _Same:
    """Sentinel for `Dim(n)`: the upper bound equals the lower one."""

    __slots__ = ()


_SAME: Final = _Same()


def _check_int(value: object, what: str) -> int:
    """Return ``value`` as an int dim bound, or raise TypeError / BroadcastError.

    `bool` is rejected although it is an `int`: ``Dim(True)`` is almost always a bug.

    >>> _check_int(3, "dim")
    3
    """
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, not bool; got {value!r}")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{what} must be an integer; got {type(value).__name__} {value!r}"
        ) from None
    if number < 0:
        raise BroadcastError(f"{what} must be non-negative; got {show_int(number)}")
    if number > MAX_DIM:
        raise BroadcastError(f"{what} must be at most 2**63-1 (int64); got {show_int(number)}")
    return number


def _int_text(text: str, what: str) -> int:
    """Read the digits of a dim bound; more than int64 holds is an error, not a slow int()."""
    if len(text.lstrip("0")) > _MAX_DIGITS:  # also keeps int() below Python's digit limit
        raise BroadcastError(
            f"{what} must be at most 2**63-1 (int64); got a number of {len(text)} digits"
        )
    return int(text)


@dataclass(frozen=True, slots=True, init=False, eq=False)
class Dim:
    """One dimension of a shape: static, an interval, or a named symbol.

    Parameters
    ----------
    lo : int
        The value of a static dim, or the lower bound of an interval.
    hi : int or None, optional
        The upper bound (None = unbounded). Omitted: the dim is static ``lo``.

    Raises
    ------
    TypeError
        If a bound is not an integer (`bool` included).
    BroadcastError
        If a bound is negative, above 2**63-1, or ``lo > hi``.

    Examples
    --------
    >>> import bcast
    >>> bcast.Dim(3), bcast.Dim(1, 10), bcast.Dim(0, None), bcast.Dim.symbol("N")
    (Dim(3), Dim(1, 10), Dim(0, None), Dim.symbol('N'))
    >>> int(bcast.Dim(3)), [0, 1, 2, 3][bcast.Dim(2)]
    (3, 2)
    >>> str(bcast.Dim.parse("..5"))
    '0..5'
    >>> bcast.Dim(5, 3)
    Traceback (most recent call last):
    ...
    bcast.BroadcastError: interval lower bound 5 exceeds upper bound 3
    """

    lo: int
    hi: int | None
    name: str | None

    def __init__(self, lo: int, hi: int | _Same | None = _SAME, /) -> None:
        low = _check_int(lo, "dimension")
        if isinstance(hi, _Same):
            high: int | None = low
        elif hi is None:
            high = None
        else:
            high = _check_int(hi, "interval upper bound")
            if high < low:
                raise BroadcastError(f"interval lower bound {low} exceeds upper bound {high}")
        object.__setattr__(self, "lo", low)
        object.__setattr__(self, "hi", high)
        object.__setattr__(self, "name", None)

    # -- constructors ------------------------------------------------------------------

    @classmethod
    def static(cls, value: int) -> Dim:
        """Return the static dim ``value`` (small values are shared instances).

        >>> import bcast
        >>> bcast.Dim.static(4) is bcast.Dim.static(4)
        True
        """
        if type(value) is int and 0 <= value < len(SMALL_DIMS):
            return SMALL_DIMS[value]
        return cls(value)

    @classmethod
    def unknown(cls) -> Dim:
        """Return ``?``: any non-negative value.

        >>> import bcast
        >>> str(bcast.Dim.unknown())
        '?'
        """
        return _UNKNOWN

    @classmethod
    def symbol(cls, name: str) -> Dim:
        """Return a symbolic dim (ONNX ``dim_param``): unknown value, known identity.

        Two dims with the same name have the same value. A name starts with a letter or
        ``_`` and contains no white space, comma, bracket or ``?``.

        >>> import bcast
        >>> bcast.Dim.symbol("batch").definitely_equal(bcast.Dim.symbol("batch"))
        True
        """
        if not isinstance(name, str):
            raise TypeError(f"symbol name must be a str; got {type(name).__name__} {name!r}")
        if not _SYMBOL.fullmatch(name) or ".." in name or not name.isprintable():
            raise BroadcastError(
                f"invalid symbol name {show_text(name)}: it must start with a letter or '_' "
                "and contain no white space, control character, ',', '[', ']', '?' or '..'"
            )
        dim = object.__new__(cls)
        object.__setattr__(dim, "lo", 0)
        object.__setattr__(dim, "hi", None)
        object.__setattr__(dim, "name", name)
        return dim

    @classmethod
    def parse(cls, text: str) -> Dim:
        """Parse the text form of one dim: ``3``, ``?``, ``1..10``, ``..5``, ``2..``, ``N``.

        >>> import bcast
        >>> [str(bcast.Dim.parse(t)) for t in ["3", "?", "1..10", "..5", "2..", "3..3", "N"]]
        ['3', '?', '1..10', '0..5', '2..', '3', 'N']
        """
        if not isinstance(text, str):
            raise TypeError(f"dim text must be a str; got {type(text).__name__} {text!r}")
        token = text.strip()
        if token.isascii() and token.isdigit():  # not "²" (int() fails) or "٣"
            return cls.static(_int_text(token, "dimension"))
        if token == "?":
            return _UNKNOWN
        interval = _INTERVAL.fullmatch(token)
        if interval:
            lo_text, hi_text = interval.groups()
            lo = _int_text(lo_text or "0", "interval lower bound")
            hi = _int_text(hi_text, "interval upper bound") if hi_text else None
            return cls.interval(lo, hi)
        if token.startswith("-") and token[1:].isascii() and token[1:].isdigit():
            shown = token if len(token) <= 40 else f"a negative number of {len(token) - 1} digits"
            raise BroadcastError(f"dimension must be non-negative; got {shown}")
        if _SYMBOL.fullmatch(token) and ".." not in token and token.isprintable():
            return cls.symbol(token)
        expr = parse_expression(token) if "(" in token else None
        if expr is not None and expr.symbols:  # as bcast prints an exporter's Min(64, s)
            return named_dim(str(expr))  # the symbol the ONNX reader makes of it
        raise BroadcastError(
            f"cannot parse dimension {show_text(text)}: expected an integer, '?', an interval "
            "'lo..hi' / 'lo..' / '..hi', or a symbol name"
        )

    @classmethod
    def interval(cls, lo: int, hi: int | None) -> Dim:
        """Return ``[lo, hi]``; an interval whose ends meet is the static dim.

        >>> import bcast
        >>> bcast.Dim.interval(3, 3) == bcast.Dim(3)
        True
        """
        lo = _check_int(lo, "dimension")  # validated before compared: numpy ints overflow
        if hi is not None:
            hi = _check_int(hi, "interval upper bound")
        if lo == 0 and hi is None:
            return _UNKNOWN
        if hi is not None and lo == hi:
            return cls.static(lo)
        return cls(lo, hi)

    # -- questions ---------------------------------------------------------------------

    @property
    def is_static(self) -> bool:
        """True for a known value (``lo == hi``)."""
        return self.lo == self.hi

    @property
    def is_symbol(self) -> bool:
        """True for a named symbolic dim."""
        return self.name is not None

    @property
    def value(self) -> int:
        """The value of a static dim; ValueError for any other.

        >>> import bcast
        >>> bcast.Dim(7).value
        7
        """
        if self.lo != self.hi:
            raise ValueError(f"dimension {self} has no single value")
        return self.lo

    def contains(self, value: int) -> bool:
        """Whether ``value`` is a possible value of this dim.

        >>> import bcast
        >>> bcast.Dim(2, 5).contains(1), bcast.Dim.parse("N").contains(1)
        (False, True)
        """
        return self.lo <= value and (self.hi is None or value <= self.hi)

    def definitely_one(self) -> bool:
        """Return True only for the static 1."""
        return self.lo == 1 and self.hi == 1

    def maybe_one(self) -> bool:
        """Return True if 1 is a possible value."""
        return self.lo <= 1 and (self.hi is None or self.hi >= 1)

    def definitely_equal(self, other: Dim) -> bool:
        """Return True when both dims certainly have one value: equal static, or one symbol.

        ``?`` is not definitely equal to ``?``: two unknowns may differ.

        >>> import bcast
        >>> q = bcast.Dim.unknown()
        >>> q.definitely_equal(q), bcast.Dim(3).definitely_equal(bcast.Dim(3))
        (False, True)
        """
        if self.name is not None:
            return self.name == other.name
        return self.lo == self.hi and other.name is None and other.lo == self.lo == other.hi

    def maybe_equal(self, other: Dim) -> bool:
        """Return True when some value is possible for both dims."""
        return _overlap(self, other) is not None

    # -- text and comparison -----------------------------------------------------------

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        if self.lo == self.hi:
            return str(self.lo)
        if self.hi is None:
            return "?" if self.lo == 0 else f"{self.lo}.."
        return f"{self.lo}..{self.hi}"

    def __repr__(self) -> str:
        if self.name is not None:
            return f"Dim.symbol({self.name!r})"
        if self.lo == self.hi:
            return f"Dim({self.lo})"
        return f"Dim({self.lo}, {self.hi})"

    def __index__(self) -> int:
        """Return the value of a static dim wherever an int is wanted (``range(Dim(3))``).

        >>> import bcast, numpy as np
        >>> np.zeros(bcast.broadcast_shapes((2, 1), (3,))).shape
        (2, 3)
        >>> int(bcast.Dim.symbol("N"))
        Traceback (most recent call last):
        ...
        TypeError: dimension N has no single value; only a static dim is an int
        """
        if self.lo != self.hi:
            raise TypeError(f"dimension {self} has no single value; only a static dim is an int")
        return self.lo

    __int__ = __index__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dim):
            return self.lo == other.lo and self.hi == other.hi and self.name == other.name
        if isinstance(other, int) and not isinstance(other, bool):
            return self.name is None and self.lo == other == self.hi
        return NotImplemented

    def __hash__(self) -> int:
        if self.name is None and self.lo == self.hi:
            return hash(self.lo)
        return hash((self.lo, self.hi, self.name))


DimLike = Dim | int | str | None
"""What a shape-like sequence may hold: a `Dim`, an int, a dim text or symbol, None (= ``?``)."""

SMALL_DIMS: Final = tuple(Dim(i) for i in range(1025))
"""The static dims 0..1024, shared (building a Dim costs more than finding one)."""
_UNKNOWN: Final = Dim(0, None)


def as_dim(value: DimLike) -> Dim:
    """Normalise one element of a shape-like sequence to a `Dim`.

    >>> import bcast
    >>> [str(as_dim(v)) for v in [3, None, "N", "2..5", bcast.Dim(1, None)]]
    ['3', '?', 'N', '2..5', '1..']
    """
    if type(value) is int:
        if 0 <= value < len(SMALL_DIMS):
            return SMALL_DIMS[value]
        return Dim(value)
    if isinstance(value, Dim):
        return value
    if value is None:
        return _UNKNOWN
    if isinstance(value, str):
        return Dim.parse(value)
    return Dim(value)  # numpy integers; Dim rejects the rest


# -- the merge ---------------------------------------------------------------------------


def _overlap(a: Dim, b: Dim) -> tuple[int, int | None] | None:
    lo = max(a.lo, b.lo)
    if a.hi is None:
        hi = b.hi
    elif b.hi is None:
        hi = a.hi
    else:
        hi = min(a.hi, b.hi)
    if hi is not None and lo > hi:
        return None
    return lo, hi


def _from_bounds(lo: int, hi: int | None) -> Dim:
    if hi is not None and lo == hi and lo < len(SMALL_DIMS):
        return SMALL_DIMS[lo]
    return Dim.interval(lo, hi)


def intersect_dims(a: Dim, b: Dim) -> Dim | None:
    """Return the dim that is both ``a`` and ``b`` (equal values), or None if none can be.

    This is OpenVINO's ``Dimension::merge``. A symbol survives when the other side adds no
    bound (``N`` with ``?`` or with ``M`` is ``N``, their common value).

    >>> import bcast
    >>> str(intersect_dims(bcast.Dim(1, 10), bcast.Dim(5, 20)))
    '5..10'
    >>> intersect_dims(bcast.Dim(2), bcast.Dim(3)) is None
    True
    """
    if a.name is not None and a.name == b.name:
        return a
    bounds = _overlap(a, b)
    if bounds is None:
        return None
    lo, hi = bounds
    if a.name is not None and lo == a.lo and hi == a.hi:
        return a
    if b.name is not None and lo == b.lo and hi == b.hi:
        return b
    return _from_bounds(lo, hi)


def merge_dims(a: Dim, b: Dim) -> Dim | None:
    """Broadcast two dims both ways: the narrowest dim containing every possible result.

    This is the single per-dimension rule of bcast (DESIGN §3). On intervals it equals
    OpenVINO's ``Dimension::broadcast_merge``: the hull when both may be 1, the other side
    when exactly one may be 1, the intersection otherwise. On symbols: ``N``∘``N`` = ``N``,
    ``N``∘``1`` = ``N``, ``N``∘``3`` = ``3``, ``N``∘``M`` = ``?``, ``N``∘``?`` = ``?``.
    Returns None when no pair of values can broadcast (a definite error).

    >>> import bcast
    >>> D = bcast.Dim.parse
    >>> [str(merge_dims(D(a), D(b))) for a, b in
    ...  [("?", "5"), ("N", "1"), ("N", "N"), ("N", "3"), ("N", "M"), ("2..10", "3..5")]]
    ['5', 'N', 'N', '3', '?', '3..5']
    >>> merge_dims(D("3"), D("4")) is None
    True
    """
    if a is b or (a.name is not None and a.name == b.name):
        return a
    a_one = a.lo <= 1 and (a.hi is None or a.hi >= 1)
    b_one = b.lo <= 1 and (b.hi is None or b.hi >= 1)
    if a_one and b_one:
        # Every value of either side is reachable (the other taking 1): the hull.
        if a.lo == 1 and a.hi == 1:
            return b
        if b.lo == 1 and b.hi == 1:
            return a
        lo = min(a.lo, b.lo)
        hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
        return _from_bounds(lo, hi)
    if a_one:
        return b
    if b_one:
        return a
    return intersect_dims(a, b)


def merge_into(a: Dim, b: Dim) -> Dim | None:
    """Broadcast ``b`` one way onto ``a``: the possible values of ``a`` that ``b`` fits.

    B fits A when B equals A or B is 1, and the result is A's value, so the answer is the
    two-way merge narrowed to ``a``. Used by unidirectional, pdpd and explicit modes.

    >>> import bcast
    >>> D = bcast.Dim.parse
    >>> str(merge_into(D("0"), D("1"))), merge_into(D("1"), D("0"))
    ('0', None)
    >>> str(merge_into(D("?"), D("5"))), str(merge_into(D("N"), D("M")))
    ('5', 'N')
    """
    both = merge_dims(a, b)
    if both is None:
        return None
    return intersect_dims(a, both)


def named_dim(name: str) -> Dim:
    """Return the symbol ``name``, cleaned where bcast's text cannot hold it (``?`` if never).

    >>> from bcast.core.dim import named_dim
    >>> str(named_dim("batch")), str(named_dim("a b")), str(named_dim("Min(64, s41)"))
    ('batch', 'a_b', 'Min_64__s41_')
    """
    try:
        return Dim.symbol(name)
    except BroadcastError:
        cleaned = _BAD_SYMBOL_CHARS.sub("_", name).replace("..", "_")
        if not cleaned or not (cleaned[0].isalpha() or cleaned[0] == "_"):
            cleaned = "_" + cleaned
        try:
            return Dim.symbol(cleaned)
        except BroadcastError:
            return Dim.unknown()
