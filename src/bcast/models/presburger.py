"""Sets of input sizes decided exactly, by isl (the integer set library, through islpy).

The sizes an exported model accepts are sets of integers under affine constraints with floor
division, modulo, Min and Max: Presburger arithmetic. `Space` writes a dim expression
(`bcast.core.expressions.Expr`) as an isl piecewise quasi-affine function of the input dims
and a requirement (two sizes equal, a broadcast, a bound) as an isl set; isl decides
emptiness, inclusion, projection and the smallest point exactly and without a bound, with
the congruences (``H mod 2 = 0``) these sets hold. Every input dim is at least 1.

A product of two dims is not affine. A product compared with a constant is still decided
exactly: ``a*b = 16`` is a finite union over the divisors of 16, ``a*b`` a multiple of 32
one over the divisors of 32. Anything else raises `NotAffine`; the caller says it is not
decided as a set (each point is still decided exactly by evaluation).

islpy is imported on the first `Space`, never with ``import bcast``.

Examples
--------
>>> from bcast.core.expressions import parse_expression as p
>>> space = Space(["H"])
>>> even = space.compare(p("2*((H - 1)//2 + 1)"), "==", p("H"))
>>> space.one_dim(even, "H")
(((2, None),), (2, 0))
>>> space.smallest(space.sizes.subtract(even), ["H"])
{'H': 1}
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from bcast.core.expressions import Expr
from bcast.core.modes import Mode
from bcast.models.presburger_products import NotAffine, ProductSets
from bcast.models.presburger_terms import RELATIONS, hulls, rebuilt, unit

__all__ = ["ONE_WAY_TARGET", "Congruence", "Intervals", "NotAffine", "Space"]

Congruence = tuple[int, int]
"""``(modulus, residue)``: every size ``n`` of the set has ``n % modulus == residue``."""
Intervals = tuple[tuple[int, int | None], ...]
"""Sorted, disjoint closed intervals ``(lo, hi)`` of sizes; ``hi`` None: unbounded."""
ONE_WAY_TARGET: Final[dict[Mode, int]] = {Mode.UNIDIRECTIONAL: 0, Mode.PDPD: 0, Mode.EXPLICIT: 1}
_POINTS: Final = 256  # a two-dim piece that is not a box is listed point by point up to this


def _isl() -> Any:
    import islpy  # lazily: only where a domain or a condition is decided

    return islpy


@functools.cache
def load_meanwhile() -> None:
    """Import isl in a background thread, once: while the worker reads a model, say.

    A process that waits on the worker (`bcast.loading.load_graph`) then finds the library
    the domain needs loaded when the graph arrives; nothing else changes.
    """
    threading.Thread(target=_isl, name="bcast-load-isl", daemon=True).start()


class Space(ProductSets):
    """The input dims as isl parameters; sets and functions of them.

    Parameters
    ----------
    names : sequence of str
        The input dims (each a size from 1). isl names them ``d0``, ``d1``, ... (a dim's own
        name may be any text); `names` maps back.
    """

    def __init__(self, names: Sequence[str]) -> None:
        isl = _isl()
        self.isl = isl
        self.names: tuple[str, ...] = tuple(dict.fromkeys(names))
        self.index = {n: i for i, n in enumerate(self.names)}
        ctx = isl.DEFAULT_CONTEXT
        self.space = isl.Space.create_from_names(
            ctx, set=[], params=[f"d{i}" for i in range(len(self.names))]
        )
        self.universe = isl.Set.universe(self.space)
        local = isl.LocalSpace.from_space(self.space)
        self._vars = [
            isl.PwAff.var_on_domain(local, isl.dim_type.param, i) for i in range(len(self.names))
        ]
        one = self.constant(1)
        self.sizes = self.universe
        for var in self._vars:  # every input dim is a size from 1
            self.sizes = self.sizes.intersect(var.ge_set(one))
        self._cache: dict[Expr, Any] = {}

    # -- functions -------------------------------------------------------------------------

    def constant(self, value: int) -> Any:
        """Return the constant ``value`` as an isl piecewise affine function."""
        return self.isl.PwAff.val_on_domain(self.universe, value)

    def pw(self, expr: Expr) -> Any:
        """Return ``expr`` as an isl piecewise quasi-affine function of the input dims.

        Raises
        ------
        NotAffine
            For a product of dims, a power of one, a division or modulo by one, or a symbol
            that is not an input dim.
        """
        found = self._cache.get(expr)
        if found is None:
            found = self._cache[expr] = self._pw(expr)
        return found

    def _pw(self, e: Expr) -> Any:  # one case per operator
        op = e.op
        if op == "int":
            return self.constant(e.value)
        if op == "sym":
            if e.name not in self.index:
                raise NotAffine(f"{e.name} is not an input dim")
            return self._vars[self.index[e.name]]
        if not e.symbols:
            value = e.evaluate({})
            if value is None:
                raise NotAffine(f"{e} has no integer value")
            return self.constant(value)
        args = [self.pw(a) for a in e.args] if op != "**" else []
        if op == "neg":
            return args[0].neg()
        if op == "+":
            return args[0].add(args[1])
        if op == "-":
            return args[0].sub(args[1])
        if op == "*":
            if not (args[0].is_cst() or args[1].is_cst()):
                raise NotAffine(f"{e} multiplies dims")
            return args[0].mul(args[1])
        if op in ("/", "CleanDiv"):
            a, c = args[0], self._divisor(e)
            exact = a.mod_val(abs(c)).eq_set(self.constant(0))
            return a.div(self.constant(c)).intersect_domain(exact)
        if op in ("//", "FloorDiv"):
            return args[0].div(self.constant(self._divisor(e))).floor()
        if op in ("%", "Mod", "PythonMod"):
            c = self._divisor(e)  # Python's %: the sign of the divisor
            quotient = args[0].div(self.constant(c)).floor()
            return args[0].sub(quotient.mul(self.constant(c)))
        if op in ("Min", "Max"):
            out = args[0]
            for arg in args[1:]:
                out = out.min(arg) if op == "Min" else out.max(arg)
            return out
        if op in ("floor", "FloorToInt"):
            return args[0].floor()
        if op in ("ceiling", "CeilToInt"):
            return args[0].ceil()
        if op == "TruncToInt":
            x, zero = args[0], self.constant(0)
            up = x.floor().intersect_domain(x.ge_set(zero))
            return up.union_add(x.ceil().intersect_domain(x.lt_set(zero)))
        if op == "Abs":
            return args[0].max(args[0].neg())
        if op == "**" and e.args[1].op == "int" and e.args[1].value == 1:
            return self.pw(e.args[0])
        raise NotAffine(f"{e} is not affine")

    @staticmethod
    def _divisor(e: Expr) -> int:
        value = e.args[1].evaluate({}) if not e.args[1].symbols else None
        if not value:
            raise NotAffine(f"{e} divides by a dim (or by 0)")
        return value

    # -- sets --------------------------------------------------------------------------------

    def compare(self, left: Expr, relation: str, right: Expr) -> Any:
        """Return the set where ``left relation right`` holds (``==``, ``<=``, ``>=``, ``<``).

        A product of dims against a constant is split over the constant's divisors.

        Raises
        ------
        NotAffine
            Where neither side is affine and no split applies.
        """
        try:
            a, b = self.pw(left), self.pw(right)
        except NotAffine:
            return self.compare_products(left, relation, right)
        return RELATIONS[relation](a, b)

    def column(self, values: Sequence[tuple[int, Expr]], mode: Mode) -> Any:
        """Return the set where sizes ``values`` (operand, size) broadcast at one axis.

        Where a size is negative there is no such tensor: the axis neither runs nor fails,
        and the point is kept (as `Domain.first_failure` decides it).

        >>> from bcast.core.expressions import parse_expression as p
        >>> s = Space(["s"])
        >>> cut = s.column([(0, p("s")), (1, p("Min(64, s)"))], Mode.NUMPY)
        >>> s.one_dim(cut, "s")
        (((1, 64),), None)
        """
        one = Expr("int", value=1)
        exprs = list(dict.fromkeys(e for _, e in values))
        target = ONE_WAY_TARGET.get(mode)
        if len(exprs) < 2:
            return self.universe
        ok = self.universe
        if mode is Mode.NONE:
            for a, b in itertools.pairwise(exprs):
                ok = ok.intersect(self.compare(a, "==", b))
        elif target is None:
            plain = [e for e in exprs if e != one]
            for i, a in enumerate(plain):
                for b in plain[i + 1 :]:
                    pair = self.compare(a, "==", b).union(self.compare(a, "==", one))
                    ok = ok.intersect(pair.union(self.compare(b, "==", one)))
        else:
            into = [e for k, e in values if k == target]
            if not into:
                return self.universe
            for k, b in values:
                if k != target and b != into[0]:
                    either = self.compare(b, "==", one).union(self.compare(b, "==", into[0]))
                    ok = ok.intersect(either)
        zero = Expr("int", value=0)
        for e in exprs:
            if e.symbols:
                ok = ok.union(self.compare(e, "<", zero))
        return ok.coalesce()

    def fixed(self, points: Mapping[str, int]) -> Any:
        """Return the set where each dim of ``points`` has its size."""
        out = self.universe
        for name, value in points.items():
            if name in self.index:
                out = out.intersect(self._vars[self.index[name]].eq_set(self.constant(value)))
        return out

    def box(self, ranges: Mapping[str, tuple[int, int | None]]) -> Any:
        """Return the set of points with each ranged dim in ``lo..hi`` (``hi`` None: no bound)."""
        out = self.sizes
        for name, (lo, hi) in ranges.items():
            var = self._vars[self.index[name]]
            out = out.intersect(var.ge_set(self.constant(lo)))
            if hi is not None:
                out = out.intersect(var.le_set(self.constant(hi)))
        return out

    # -- answers ---------------------------------------------------------------------------

    def smallest(self, region: Any, order: Iterable[str]) -> dict[str, int] | None:
        """Return the lexicographically smallest point of ``region`` over ``order``'s dims.

        The other dims are projected out; None where ``region`` is empty.
        """
        names = [n for n in order if n in self.index]
        found = region.intersect(self.sizes)
        if found.is_empty():
            return None
        isl = self.isl
        ids = [f"d{self.index[n]}" for n in names]
        found = found.project_out_except(ids, [isl.dim_type.param])
        laid = found
        for k, ident in enumerate(ids):  # each kept param into set dim k, in order
            at = laid.find_dim_by_name(isl.dim_type.param, ident)
            laid = laid.move_dims(isl.dim_type.set, k, isl.dim_type.param, at, 1)
        point = laid.lexmin().sample_point()
        return {
            n: int(point.get_coordinate_val(isl.dim_type.set, k).to_python())
            for k, n in enumerate(names)
        }

    def one_dim(self, region: Any, name: str) -> tuple[Intervals, Congruence | None]:
        """Return the sizes of dim ``name`` in ``region`` (the other dims projected out).

        The answer is intervals ``(lo, hi)`` (``hi`` None: unbounded) and, where every size
        of the set shares a residue, the congruence ``(modulus, residue)`` that holds on them
        too. A set of another form (sizes up to 10, then the even ones) gives its intervals
        only: `exactly` tells them apart, `text` says the set exactly.
        """
        line = self.line(region, name)
        if line.is_empty():
            return (), None
        intervals = hulls(line)
        modulus = int(line.get_stride(0).to_python())
        if modulus <= 1:
            return intervals, None
        residue = int(line.get_stride_info(0).get_offset().get_constant_val().to_python())
        return intervals, (modulus, residue % modulus)

    def exactly(self, region: Any, name: str) -> bool:
        """Tell whether `one_dim` says the sizes of ``name`` in ``region`` exactly."""
        intervals, congruence = self.one_dim(region, name)
        return rebuilt(self.isl, self.line(region, name), intervals, congruence)

    def pieces(self, region: Any, name: str) -> list[tuple[int, int | None, int, int]] | None:
        """Return the sizes of ``name`` in ``region`` as pieces ``(lo, hi, modulus, residue)``.

        Each piece is the sizes of ``lo..hi`` with ``n % modulus == residue``; None where a
        piece is not of that form.

        >>> from bcast.core.expressions import parse_expression as p
        >>> s = Space(["H"])
        >>> up = p("2*((H - 1)//2 + 1)")
        >>> s.pieces(s.compare(up, "==", p("H")).union(s.compare(p("H"), "==", p("1"))), "H")
        [(1, 1, 1, 0), (2, None, 2, 0)]
        """
        isl = self.isl
        out = []
        for basic in self.line(region, name).get_basic_sets():
            piece = isl.Set.from_basic_set(basic)
            ((lo, hi),) = hulls(piece)
            m = int(piece.get_stride(0).to_python())
            r = int(piece.get_stride_info(0).get_offset().get_constant_val().to_python()) % m
            if not rebuilt(isl, piece, ((lo, hi),), (m, r) if m > 1 else None):
                return None
            out.append((lo, hi, m, r))
        return sorted(out, key=lambda q: q[0])

    def residues(self, region: Any, name: str, modulus: int) -> list[tuple[int, Intervals]] | None:
        """Return the sizes of ``name`` in ``region`` residue by residue modulo ``modulus``.

        For each residue ``r`` that some size has, the intervals of the sizes ``n % modulus
        == r``; None where a residue's sizes are not intervals of that lattice.

        >>> from bcast.core.expressions import parse_expression as p
        >>> s = Space(["h"])
        >>> two = s.compare(p("2*((h - 1)//2//2 + 1)"), "==", p("(h - 1)//2 + 1"))
        >>> s.residues(two, "h", 4)
        [(0, ((4, None),)), (3, ((3, None),))]
        """
        line = self.line(region, name)
        out = []
        for r in range(modulus):
            lattice = self.isl.Set(f"{{ [x] : x mod {modulus} = {r} }}")
            piece = line.intersect(lattice).coalesce()
            if piece.is_empty():
                continue
            spans = hulls(piece)
            if not rebuilt(self.isl, piece, spans, (modulus, r)):
                return None
            out.append((r, spans))
        return out

    def line(self, region: Any, name: str) -> Any:
        """Return the sizes of dim ``name`` in ``region``, as a one-dim isl set."""
        isl = self.isl
        ident = f"d{self.index[name]}"
        found = region.intersect(self.sizes).project_out_except([ident], [isl.dim_type.param])
        return found.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, 1).coalesce()

    def implied(
        self,
        whole: Any,
        region: Any,
        names: Sequence[str],
        said: Mapping[str, tuple[Intervals, Congruence | None]],
    ) -> bool:
        """Tell whether the sizes ``whole`` leaves each of ``names``, alone, make ``region`` hold.

        A relation that is so (Swin's window counts: each of ``h`` and ``w`` a multiple of
        4) says nothing the dims' own sizes do not. ``said``: the dims whose sizes are known
        exactly as intervals and a congruence (cheaper than projecting ``whole``).

        >>> from bcast.core.expressions import parse_expression as p
        >>> s = Space(["h", "w"])
        >>> h4, w4 = (s.compare(p(f"{d} % 4"), "==", p("0")) for d in "hw")
        >>> both = h4.intersect(w4)
        >>> s.implied(both, both, ["h", "w"], {}), s.implied(s.sizes, both, ["h", "w"], {})
        (True, False)
        >>> s.implied(s.sizes, both, ["h", "w"], {d: (((4, None),), (4, 0)) for d in "hw"})
        True
        """
        box = self.sizes
        for name in names:
            var = self._vars[self.index[name]]
            if name in said:
                intervals, congruence = said[name]
                line = self.universe.subtract(self.universe)
                for lo, hi in intervals:
                    piece = var.ge_set(self.constant(lo))
                    if hi is not None:
                        piece = piece.intersect(var.le_set(self.constant(hi)))
                    line = line.union(piece)
                if congruence is not None:
                    line = line.intersect(
                        var.mod_val(congruence[0]).eq_set(self.constant(congruence[1]))
                    )
            else:
                ident = f"d{self.index[name]}"
                found = whole.intersect(self.sizes)
                line = found.project_out_except([ident], [self.isl.dim_type.param])
            box = box.intersect(line)
        return bool(box.is_subset(region))

    def text(self, region: Any, only: Sequence[str] | None = None) -> str:
        """Write ``region`` as isl's constraints, in the dims' names (``s41 <= 64``).

        ``only``: the dims kept (the others projected out).

        >>> from bcast.core.expressions import parse_expression as p
        >>> s = Space(["seq", "total", "past"])
        >>> s.text(s.compare(p("total"), "==", p("past + seq")))
        'past = -seq + total'
        """
        found = region.intersect(self.sizes)
        if only is not None:
            ids = [f"d{self.index[n]}" for n in only if n in self.index]
            kept = found.project_out_except(ids, [self.isl.dim_type.param])
            found = kept.gist_params(self.sizes.project_out_except(ids, [self.isl.dim_type.param]))
        else:
            found = found.gist(self.sizes)
        found = found.coalesce()
        if found.is_empty():
            return "false"
        body = str(found).split(":", 1)[1].rsplit("}", 1)[0].strip() if ":" in str(found) else ""
        if not body:
            return "true"
        names = {f"d{i}": n for i, n in enumerate(self.names)}
        return re.sub(r"\bd\d+\b", lambda m: names.get(m.group(0), m.group(0)), body)

    def boxes(
        self, region: Any, names: Sequence[str], most: int
    ) -> tuple[tuple[tuple[int, int], tuple[tuple[int, int | None], ...]], ...]:
        """Return the sizes of two dims in ``region`` as boxes, where they are bounded boxes.

        ``()`` where the sizes are unbounded, not boxes, or more than ``most`` of them.

        >>> from bcast.core.expressions import parse_expression as p
        >>> s = Space(["h", "w"])
        >>> s.boxes(s.product_equals([p("h//8"), p("w//8")], 4), ["h", "w"], 8)[:2]
        (((8, 15), ((32, 39),)), ((16, 23), ((16, 23),)))
        """
        isl = self.isl
        ids = [f"d{self.index[n]}" for n in names]
        laid = region.intersect(self.sizes).project_out_except(ids, [isl.dim_type.param])
        for k, ident in enumerate(ids):
            at = laid.find_dim_by_name(isl.dim_type.param, ident)
            laid = laid.move_dims(isl.dim_type.set, k, isl.dim_type.param, at, 1)
        laid = laid.coalesce()
        if laid.is_empty() or not laid.is_bounded() or laid.n_basic_set() > most:
            return ()
        out = []
        for basic in laid.get_basic_sets():
            piece = isl.Set.from_basic_set(basic)
            (a, b), (c, d) = [
                (int(piece.dim_min_val(k).to_python()), int(piece.dim_max_val(k).to_python()))
                for k in range(2)
            ]
            box = isl.Set(f"{{ [x, y] : {a} <= x <= {b} and {c} <= y <= {d} }}")
            if box.is_equal(piece):
                out.append(((a, b), ((c, d),)))
            elif (b - a + 1) * (d - c + 1) <= _POINTS:  # a small piece: its points, listed
                piece.foreach_point(lambda q, out=out: out.append(unit(isl, q)))
            else:
                return ()
        return tuple(sorted(out))
