"""The one exception of bcast's shape layer, and the picture it draws.

`BroadcastError` is raised for incompatible shapes and for every invalid parameter (axis,
axes_mapping, operand count, negative or oversized dims, malformed text). Like NumPy's
`AxisError` it keeps its facts as fields and builds the message from them in ``__str__``, so
that tests, the CLI and the model checker read fields rather than parse text.

It imports only the picture (`bcast.core.picture`), so `dim`, `shape` and `rules` can all
raise it.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from bcast.core.html import STYLE, alignment_html
from bcast.core.picture import Drawable, format_alignment

__all__ = ["BroadcastError", "show_bytes", "show_int", "show_ints", "show_text"]


class BroadcastError(ValueError):
    """Shapes that cannot be broadcast, or an invalid broadcasting parameter.

    Parameters
    ----------
    reason : str
        What is wrong, in one sentence, naming the parameter and the value received.
    mode : str or None
        The rule set that failed (``"numpy"``, ``"pdpd"``, ...), or None for errors found
        before a mode applies (a malformed shape text, a negative dim).
    shapes : sequence of Shape
        The operands as the rule received them.
    axis : int or None
        The failing *output* axis (non-negative), or None when no single axis fails.
    operand : int or None
        Index of the offending operand, when one is to blame.
    alignment : sequence of (tuple of (int or None)) or None, optional
        For each operand, the output axis of each of its axes (None for an axis the mode
        drops); used to draw the shapes as the mode aligns them.
    out_rank : int or None, optional
        Rank of the aligned picture.
    labels : sequence of str, optional
        Names of the operands by role (``"A"``, ``"B"``, ``"data"``, ...).
    kind : {"shapes", "parameter", "input"}, optional
        What is wrong: ``"shapes"`` the operands cannot broadcast; ``"parameter"`` a
        broadcasting parameter (mode, operand count, axis, axes_mapping) is invalid;
        ``"input"`` a shape or dim itself is malformed (negative, oversized, bad text).
        The default is ``"shapes"`` when a mode is given, else ``"input"``.

    Examples
    --------
    >>> import bcast
    >>> try:
    ...     bcast.broadcast_shapes("[2,3]", "[4]")
    ... except bcast.BroadcastError as err:
    ...     print(err.mode, err.axis)
    numpy 1
    """

    def __init__(
        self,
        reason: str,
        *,
        mode: str | None = None,
        shapes: Sequence[Drawable] = (),
        axis: int | None = None,
        operand: int | None = None,
        alignment: Sequence[tuple[int | None, ...] | None] | None = None,
        out_rank: int | None = None,
        labels: Sequence[str] | None = None,
        kind: str | None = None,
    ) -> None:
        self.reason = reason
        self.kind = kind if kind is not None else ("shapes" if mode else "input")
        self.mode = mode
        self.shapes = tuple(shapes)
        self.axis = axis
        self.operand = operand
        self.alignment = None if alignment is None else tuple(alignment)
        self.out_rank = out_rank
        self.labels = tuple(labels) if labels is not None else None
        super().__init__(reason)

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only fields need help to survive pickling (multiprocessing, Dask workers).
        return (_rebuild, (self.reason, self.__dict__))

    @property
    def summary(self) -> str:
        """The first line of the message: mode, reason."""
        return f"{self.mode}: {self.reason}" if self.mode else self.reason

    def __str__(self) -> str:
        lines = [self.summary]
        if self.shapes and self.alignment is not None and self.out_rank is not None:
            picture = format_alignment(
                self.shapes,
                self.alignment,
                self.out_rank,
                labels=self.labels,
                mark_axis=self.axis,
            )
            lines.extend("  " + row for row in picture)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """Draw the error for a notebook: the summary, and the table with the axis marked.

        >>> import bcast
        >>> try:
        ...     bcast.broadcast_shapes("[2,3]", "[4]")
        ... except bcast.BroadcastError as err:
        ...     '<th class="failing">1 ✗</th>' in err._repr_html_()
        True
        """
        head = f"<div><b>BroadcastError</b>: {escape(self.summary)}</div>"
        if not (self.shapes and self.alignment is not None and self.out_rank is not None):
            return head
        labels = self.labels or tuple(f"#{i}" for i in range(len(self.shapes)))
        table = alignment_html(
            self.shapes, self.alignment, self.out_rank, labels=labels, mark_axis=self.axis
        )
        return f"<style>{STYLE}</style>{head}{table}"


def show_int(value: int) -> str:
    """Write an int for a message, shortening one too long to read (or to convert).

    Python refuses to write ints of more than 4300 digits as text, and a message holding a
    thousand digits helps nobody: such a number is written by its size instead.

    >>> show_int(-3), show_int(2**64)
    ('-3', '18446744073709551616')
    >>> show_int(10**5000)
    'an integer of 5001 digits'
    """
    if value.bit_length() <= 128:
        return str(value)
    magnitude = abs(value)
    # Digits from the bit length, without str(): floor(bits * log10(2)) + 1 is right or one
    # too many.
    digits = int(magnitude.bit_length() * 0.30102999566398120) + 1
    if 10 ** (digits - 1) > magnitude:
        digits -= 1
    sign = "a negative" if value < 0 else "an"
    return f"{sign} integer of {digits} digits"


def show_bytes(nbytes: int) -> str:
    """Write a byte count for a message in binary units.

    >>> show_bytes(512), show_bytes(3 * 2**30), show_bytes(2**60)
    ('512 B', '3.0 GiB', '1024.0 PiB')
    """
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{nbytes} B"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def show_ints(values: Sequence[int], limit: int = 16) -> str:
    """Write a list of ints for a message: each one by `show_int`, at most ``limit`` of them.

    >>> show_ints([0, 2]), show_ints(range(40), limit=3)
    ('[0, 2]', '[0, 1, 2, ... (40 entries)]')
    """
    shown = ", ".join(show_int(v) for v in list(values)[:limit])
    if len(values) > limit:
        shown += f", ... ({len(values)} entries)"
    return f"[{shown}]"


def show_text(text: str, limit: int = 80) -> str:
    """Quote user text for a message, eliding the middle of text longer than ``limit``.

    >>> show_text("[2,3]"), show_text("x" * 100, limit=20)
    ("'[2,3]'", "'xxxxxxxx...xxxxxxxx' (100 characters)")
    """
    if len(text) <= limit:
        return repr(text)
    half = max(limit // 2 - 2, 1)
    return f"{text[:half] + '...' + text[-half:]!r} ({len(text)} characters)"


def _rebuild(reason: str, state: dict[str, object]) -> BroadcastError:
    err = BroadcastError.__new__(BroadcastError)
    ValueError.__init__(err, reason)
    err.__dict__.update(state)
    return err
