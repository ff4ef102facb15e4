"""Dim expressions of the operators that resize, pad, cut and rearrange spatial dims.

`bcast.core.arithmetic` writes a Conv's window; this module writes the rest of what image and
sequence models compute from symbolic sizes, as `bcast.core.expressions.Expr` trees that the
ONNX and the OpenVINO IR readers record (`bcast.onnx.own_shapes`, `bcast.openvino.ir_shapes`):
a transposed convolution's output, a pooling window that rounds up (ceil_mode), Resize's
``floor(H*scale)``, DepthToSpace/SpaceToDepth, Pad, Slice (its clamping is ``Min``/``Max``),
Split and Range. Each follows the operator specification and what onnxruntime and OpenVINO
compute (the tests run them on both sides of every boundary).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Final

from bcast.core.arithmetic import expr_of, expression_dim, floor_div, plus, product
from bcast.core.dim import Dim
from bcast.core.expressions import Expr

__all__ = [
    "BIG",
    "bounds",
    "ceil_window_dim",
    "cut_dim",
    "difference",
    "range_length",
    "scaled_dim",
    "slice_length",
    "strided_axes",
    "transposed_window_dim",
    "up",
]

BIG: Final = 2**31 - 1
"""A Slice start or end at least this large means "to the end" (exporters write INT64_MAX)."""
_MAX_DENOMINATOR: Final = 64


def _int(value: int) -> Expr:
    return Expr("int", value=value)


def up(expr: Expr, number: int) -> Expr:
    """Return ``ceiling(expr/number)`` as a floor division, ``(expr + number - 1)//number``.

    Integer-set libraries (isl) take floor division by a constant; ``number`` > 0.

    >>> str(up(Expr("sym", name="h"), 2)), str(up(Expr("sym", name="h"), 1))
    ('(h + 1)//2', 'h')
    """
    return floor_div(plus(expr, number - 1), number)


def difference(a: Expr, b: Expr) -> Expr:
    """Return ``a - b``, a literal ``b`` folded in.

    >>> str(difference(Expr("sym", name="h"), Expr("int", value=3)))
    'h - 3'
    """
    if b.op == "int":
        return plus(a, -b.value)
    if a == b:
        return _int(0)
    return Expr("-", (a, b))


def transposed_window_dim(
    size: Expr, kernel: int, stride: int, dilation: int, pads: int, output_padding: int = 0
) -> Expr | None:
    """One spatial output dim of a transposed convolution (ONNX ConvTranspose).

    ``stride*(size - 1) + output_padding + ((kernel - 1)*dilation + 1) - pads``, the ONNX
    specification's formula (OpenVINO ConvolutionBackpropData: the same); ``pads`` is the
    axis's total. None for a stride, dilation or kernel below 1.

    >>> str(transposed_window_dim(Expr("sym", name="h"), 2, 2, 1, 0))
    '2*h'
    >>> str(transposed_window_dim(Expr("sym", name="h"), 3, 2, 1, 2, 1))
    '2*h'
    >>> str(transposed_window_dim(Expr("sym", name="h"), 4, 1, 1, 0))
    'h + 3'
    """
    if stride < 1 or dilation < 1 or kernel < 1:
        return None
    span = (kernel - 1) * dilation + 1
    return plus(product([_int(stride), size]), output_padding + span - pads - stride)


def ceil_window_dim(
    size: Expr,
    kernel: int,
    stride: int,
    dilation: int,
    pad_begin: int,
    pad_end: int,
    *,
    last_inside: bool,
    window_fits: bool = False,
) -> Expr | None:
    """One spatial output dim of a pooling that rounds up (ONNX ``ceil_mode=1``).

    ``ceiling((size + pads - span)/stride) + 1``; with ``last_inside`` (onnxruntime's
    pooling, OpenVINO's ``rounding_type="ceil_torch"``, PyTorch) the last window must start
    inside the padded input, ``(out - 1)*stride < size + pad_begin``, which is
    ``Min(out, (size + pad_begin - 1)//stride + 1)`` where ``pad_end`` is below the window.
    OpenVINO's ``rounding_type="ceil"`` has no such rule. With ``window_fits`` (OpenVINO,
    either rounding) the dilated window must fit the padded input, ``size + pads >= span``,
    where rounding up alone would give one window more than none: the dim is then
    ``Min(out, size + pads - span + 1)``, which is ``out`` wherever the window fits (a
    stride of at least 1 makes no more windows than positions) and at most 0 elsewhere.
    None where the parameters are invalid (a pad past the window: onnxruntime refuses it).

    >>> h = Expr("sym", name="h")
    >>> str(ceil_window_dim(h, 2, 2, 1, 0, 0, last_inside=True))
    '(h - 1)//2 + 1'
    >>> str(ceil_window_dim(h, 3, 2, 1, 1, 1, last_inside=True))
    'h//2 + 1'
    >>> str(ceil_window_dim(h, 2, 2, 1, 1, 1, last_inside=True))
    'Min((h + 1)//2 + 1, h//2 + 1)'
    >>> str(ceil_window_dim(h, 3, 2, 1, 0, 0, last_inside=False, window_fits=True))
    'Min((h - 2)//2 + 1, h - 2)'
    """
    span = (kernel - 1) * dilation + 1
    if stride < 1 or dilation < 1 or kernel < 1 or max(pad_begin, pad_end) >= span:
        return None
    out = plus(up(plus(size, pad_begin + pad_end - span), stride), 1)
    if last_inside and stride > 1 and pad_begin + pad_end > 0:
        # (No pad: a window that starts past the data would need pads; stride 1: no rounding.)
        inside = plus(floor_div(plus(size, pad_begin - 1), stride), 1)
        out = out if inside == out else Expr("Min", (out, inside))
    if window_fits and stride > 1:  # (stride 1 does not round: out is the fit already)
        out = Expr("Min", (out, plus(size, pad_begin + pad_end - span + 1)))
    return out


def scaled_dim(size: Expr, scale: float) -> Expr | None:
    """Resize's (and Upsample's) output dim ``floor(size*scale)`` for a constant scale.

    The scale is read as the fraction ``p/q`` closest to it (denominator up to 64):
    ``(p*size)//q``. None where no such fraction is within 1e-6 of it, or it is not
    positive.

    >>> h = Expr("sym", name="h")
    >>> str(scaled_dim(h, 2.0)), str(scaled_dim(h, 0.5)), str(scaled_dim(h, 1.5))
    ('2*h', 'h//2', '3*h//2')
    """
    if not scale > 0:
        return None
    ratio = Fraction(scale).limit_denominator(_MAX_DENOMINATOR)
    if abs(float(ratio) - scale) > 1e-6 * scale:
        return None
    return floor_div(product([_int(ratio.numerator), size]), ratio.denominator)


def _clamped(index: int, size: Expr) -> Expr:
    """Slice's start or end (step > 0) clamped to ``[0, size]``."""
    if index >= BIG:
        return size
    if index >= 0:
        return _int(0) if index == 0 else Expr("Min", (_int(index), size))
    return Expr("Max", (plus(size, index), _int(0)))


def slice_length(size: Expr, start: int, end: int, step: int) -> Expr | None:
    """Return the length of ``x[start:end:step]`` along a dim of ``size`` (ONNX Slice, Slice-8).

    Starts and ends clamp to the dim (``Min``, ``Max``); a negative one counts from the
    end. Negative steps are taken only to reverse the whole dim (``[::-k]``). None for a
    step of 0 or another negative slice.

    >>> h = Expr("sym", name="h")
    >>> str(slice_length(h, 1, 2**63 - 1, 1)), str(slice_length(h, 0, -1, 1))
    ('h - Min(1, h)', 'Max(h - 1, 0)')
    >>> str(slice_length(h, 0, 2**63 - 1, 2)), str(slice_length(h, -1, -(2**63), -1))
    ('(h + 1)//2', 'h')
    """
    if step == 0:
        return None
    if step < 0:
        whole = start in (-1,) or start >= BIG
        return up(size, -step) if whole and end <= -BIG else None
    first, last = _clamped(start, size), _clamped(end, size)
    if first.op == "int" and first.value == 0:
        span = last
    else:
        span = difference(last, first)
        if not (last == size and first.op == "Min"):  # size - Min(k, size) is never below 0
            span = Expr("Max", (span, _int(0)))
    return up(span, step)


def cut_dim(
    dim: Dim, start: int, end: int | Dim | bool, step: int, expressions: dict[str, Expr]
) -> Dim:
    """One axis of a Slice ``dim[start:end:step]``; ``?`` where it cannot be written.

    A static dim is cut as Python cuts it; a symbolic one gets `slice_length`'s
    expression; an end that is a dim (``x[:, :seq]``, an unpad ``x[:, :h]``) with start 0
    and step 1 is ``Min`` of the two, or the dim itself where they are one. Both readers
    cut with it (ONNX Slice, IR Slice and StridedSlice).

    >>> found = {}
    >>> str(cut_dim(Dim(10), 1, -1, 2, found))
    '4'
    >>> cut_dim(Dim.symbol("p"), 0, Dim.symbol("h"), 1, found).name
    'Min_p__h_'
    """
    if isinstance(end, bool):
        return Dim.unknown()
    if dim.is_static and type(end) is int and step != 0:
        return Dim(len(range(*slice(start, end, step).indices(dim.lo))))
    size = expr_of(dim, expressions)
    if size is None:
        return Dim.unknown()
    if isinstance(end, Dim):  # an end computed from a shape: x[:, :seq]
        stop = expr_of(end, expressions)
        if stop is None or start != 0 or step != 1:
            return Dim.unknown()
        if stop == size:
            return dim
        return expression_dim(Expr("Min", (size, stop)), expressions)
    found = slice_length(size, start, end, step)
    return Dim.unknown() if found is None else expression_dim(found, expressions)


def strided_axes(
    rank: int,
    count: int,
    new_axis: list[int],
    shrink: list[int],
    ellipsis: list[int],
) -> list[tuple[str, int, int]] | None:
    """Place a StridedSlice's ``count`` entries on a rank-``rank`` input (OpenVINO, as TF).

    Each output axis, in order, as ``(kind, input axis, entry)``: ``"slice"`` cuts the
    input axis by the entry's begin, end and stride; ``"shrink"`` takes the element at the
    entry's begin and drops the axis (it makes no output axis, but is listed); ``"new"``
    inserts an axis of 1 (input axis -1); ``"keep"`` copies an input axis the entries do not
    name (those of an ellipsis, and the trailing ones; entry -1 for the latter). A mask
    shorter than the entries is read as zeros. None where the masks cannot apply: two
    ellipses, a new axis that is also shrunk or an ellipsis, more entries than input axes.

    >>> strided_axes(3, 2, [0, 1], [0, 0], [1, 0])  # x[..., None]
    [('keep', 0, 0), ('keep', 1, 0), ('keep', 2, 0), ('new', -1, 1)]
    >>> strided_axes(3, 2, [0, 0], [0, 1], [0, 0])  # x[a:b, k]
    [('slice', 0, 0), ('shrink', 1, 1), ('keep', 2, -1)]
    >>> strided_axes(2, 3, [0, 0, 0], [0, 0, 0], [0, 0, 0]) is None
    True
    """

    def bit(mask: list[int], at: int) -> bool:
        return at < len(mask) and mask[at] != 0

    if sum(bit(ellipsis, i) for i in range(count)) > 1 or any(
        bit(new_axis, i) and (bit(shrink, i) or bit(ellipsis, i)) for i in range(count)
    ):
        return None
    consumed = sum(not bit(new_axis, i) and not bit(ellipsis, i) for i in range(count))
    placed: list[tuple[str, int, int]] = []
    axis = 0
    for i in range(count):
        if bit(ellipsis, i):
            spread = rank - consumed
            if spread < 0:
                return None
            placed += [("keep", axis + j, i) for j in range(spread)]
            axis += spread
        elif bit(new_axis, i):
            placed.append(("new", -1, i))
        else:
            if axis >= rank:
                return None
            placed.append(("shrink" if bit(shrink, i) else "slice", axis, i))
            axis += 1
    return placed + [("keep", a, -1) for a in range(axis, rank)]


def range_length(start: int, limit: Expr, delta: int) -> Expr | None:
    """Return the length of ``Range(start, limit, delta)`` (constant ``start``, ``delta``).

    ``Max((limit - start + delta - 1)//delta, 0)`` (ONNX Range); ``limit`` itself for
    ``Range(0, limit, 1)``. None for a delta that is not positive.

    >>> n = Expr("sym", name="n")
    >>> str(range_length(0, n, 1)), str(range_length(2, n, 2))
    ('n', 'Max((n - 1)//2, 0)')
    """
    if delta < 1:
        return None
    span = up(plus(limit, -start), delta)
    return span if start == 0 else Expr("Max", (span, _int(0)))


def bounds(expr: Expr) -> tuple[int | None, int | None]:
    """Return a lower and an upper bound of ``expr`` over dims of any size (None: none known).

    Conservative: a dim is at least 0, ``e % n`` is ``0..n-1`` for a constant ``n`` > 0,
    and sums, differences, constant multiples, floor divisions by a constant, Min and Max
    combine their arguments' bounds. ``7 - h % 7`` is never below 1: exporters compute a
    pad to a multiple of 7 that way, and a value proved never negative can be a dim.

    >>> from bcast.core.expressions import parse_expression as p
    >>> bounds(p("7 - h % 7")), bounds(p("h - 1")), bounds(p("Min(64, h)//2"))
    ((1, 7), (-1, None), (0, 32))
    >>> bounds(p("-2*(h % 3)")), bounds(p("Max(h, 4) + Min(h, 2)")), bounds(p("h/2"))
    ((-4, 0), (4, None), (None, None))
    """
    op, args = expr.op, expr.args
    if op == "int":
        return expr.value, expr.value
    if op == "sym":
        return 0, None
    number = args[1].value if len(args) == 2 and args[1].op == "int" else None
    if op in ("%", "Mod") and number is not None and number > 0:
        return 0, number - 1
    found = [bounds(a) for a in args]
    if op == "+":
        return _add(found[0][0], found[1][0]), _add(found[0][1], found[1][1])
    if op == "-":
        return _add(found[0][0], _neg(found[1][1])), _add(found[0][1], _neg(found[1][0]))
    if op == "neg":
        return _neg(found[0][1]), _neg(found[0][0])
    if op == "*" and len(args) == 2 and (args[0].op == "int" or args[1].op == "int"):
        k, (lo, hi) = (args[0].value, found[1]) if args[0].op == "int" else (number, found[0])
        ends = [None if v is None else v * (k or 0) for v in (lo, hi)]
        return (ends[0], ends[1]) if (k or 0) >= 0 else (ends[1], ends[0])
    if op in ("//", "FloorDiv") and number is not None and number > 0:
        lo, hi = found[0]
        return None if lo is None else lo // number, None if hi is None else hi // number
    los, his = [lo for lo, _ in found], [hi for _, hi in found]
    known_lo, known_hi = [v for v in los if v is not None], [v for v in his if v is not None]
    if op == "Min" and found:
        return (min(known_lo) if len(known_lo) == len(los) else None), min(known_hi, default=None)
    if op == "Max" and found:
        return max(known_lo, default=None), (max(known_hi) if len(known_hi) == len(his) else None)
    return None, None


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _neg(a: int | None) -> int | None:
    return None if a is None else -a
