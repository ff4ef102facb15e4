"""Requirements that multiply dims, as isl sets where they still are Presburger sets.

A product of dims is not affine, but many requirements on one are still decided exactly:

- against a constant, the product is a finite union over the constant's divisors
  (`ProductSets.product_equals`, `ProductSets.product_multiple`);
- against another product whose factors pair up, each side's factors over the same dims
  bounding the other's by a constant ratio, it holds exactly where each pair meets its
  ratio (`ProductSets.balanced`). Swin's window partition reshapes ``a*b*C`` elements into
  ``(a//4)*4*(b//4)*4*C``: it runs where ``a`` and ``b`` are multiples of 4. Padded to a
  multiple of 7 first, ``a' = a + (7 - a % 7) % 7`` always is one, and the counts agree
  at every size.

Anything else raises `NotAffine`: the caller says it is not decided as a set, and each point
is still decided exactly by evaluation.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, Final

from bcast.core.arithmetic import product
from bcast.core.expressions import Expr
from bcast.models.presburger_terms import divisors, product_form

__all__ = ["NotAffine", "ProductSets"]

_MOST_DIVISORS: Final = 512  # pieces of a product's case split; more: not decided as a set
_LARGEST: Final = 1 << 40  # constants a product is split over (their divisors are listed)
_SAMPLES: Final = 64  # sizes a ratio's candidates are read at (isl then proves the bound)


class NotAffine(ValueError):
    """A requirement that is not a Presburger set: a product of dims, a power, a division by one."""


class ProductSets:
    """The sets of `bcast.models.presburger.Space` where a requirement multiplies dims.

    A mixin: `Space` gives it ``pw``, ``constant``, ``isl``, ``universe``, ``sizes`` and
    ``names``.
    """

    isl: Any
    universe: Any
    sizes: Any
    names: tuple[str, ...]
    pw: Callable[[Expr], Any]
    constant: Callable[[int], Any]

    def compare_products(self, left: Expr, relation: str, right: Expr) -> Any:
        """Return the set where ``left relation right`` holds, one side a product of dims.

        Raises
        ------
        NotAffine
            Where no split or proof applies.

        >>> from bcast.core.expressions import parse_expression as p
        >>> from bcast.models.presburger import Space
        >>> s = Space(["h", "w"])
        >>> padded = "(h + (7 - h % 7) % 7)*(w + (7 - w % 7) % 7)"
        >>> s.compare_products(p(padded), "==", p("49*((h + (7 - h % 7) % 7)//7)*"
        ...     "((w + (7 - w % 7) % 7)//7)")).intersect(s.sizes).is_equal(s.sizes)
        True
        """
        for this, other in ((left, right), (right, left)):
            form = product_form(this)
            value = other.evaluate({}) if not other.symbols else None
            if form is None or value is None:
                continue
            scale, factors, offset = form
            if relation == "==":
                if (value - offset) % scale:
                    return self.universe.subtract(self.universe)  # empty
                return self.product_equals(factors, (value - offset) // scale)
            below = relation == "<" and this is left and value <= 0 < scale and offset >= 0
            if below and all(self._never_negative(f) for f in factors):
                return self.universe.subtract(self.universe)  # never negative: never below
        if relation == "==":
            return self.balanced(left, right)
        raise NotAffine(f"{left} {relation} {right} is not affine")

    def balanced(self, left: Expr, right: Expr) -> Any:
        """Return the set where ``left == right``, two products whose factors bound each other.

        The factors of both sides are grouped by the dims they share; each group's two sides
        must be affine and never negative. Where, for every group, one side is at least
        ``k`` times the other at every size (``k`` a constant ratio isl proves; one side for
        all groups) and the constants multiply out to the sides' scales, the products are
        equal exactly where every group meets its ratio (or both sides are 0). A window
        partition ``16*a*b == 256*(a//4)*(b//4)`` holds where ``a`` and ``b`` are
        multiples of 4; ``(h + (7 - h%7)%7)`` against ``7*((h + (7 - h%7)%7)//7)``
        everywhere.

        Raises
        ------
        NotAffine
            Where that does not decide it (a group of a product of dims, no common ratio).

        >>> from bcast.core.expressions import parse_expression as p
        >>> from bcast.models.presburger import Space
        >>> s = Space(["h", "w"])
        >>> found = s.balanced(p("16*h*w"), p("256*(h//4)*(w//4)"))
        >>> s.one_dim(found, "h"), s.text(found)
        ((((4, None),), (4, 0)), '(h) mod 4 = 0 and (w) mod 4 = 0')
        >>> even = s.balanced(p("h*w"), p("(2*(h//2))*w"))
        >>> s.text(even)
        '(h) mod 2 = 0'
        """
        one, other = product_form(left, least=1), product_form(right, least=1)
        if one is None or other is None or one[2] or other[2]:
            raise NotAffine(f"{left} == {right}: not two products")
        (scale_l, factors_l, _), (scale_r, factors_r, _) = one, other
        if scale_l <= 0 or scale_r <= 0:
            raise NotAffine(f"{left} == {right}: a product of another sign")
        groups = _groups([*factors_l, *factors_r])
        for big, small, ratio in ((factors_l, factors_r, Fraction(scale_r, scale_l)),
                                  (factors_r, factors_l, Fraction(scale_l, scale_r))):  # fmt: skip
            pairs = [
                (
                    product([f for f in big if f.symbols <= names]),
                    product([f for f in small if f.symbols <= names]),
                )
                for names in groups
            ]
            ratios = [self._least_ratio(a, b) for a, b in pairs]
            if None in ratios or math.prod(r for r in ratios if r is not None) != ratio:
                continue
            functions = [(self.pw(a), self.pw(b)) for a, b in pairs]
            return self._balanced(functions, [r for r in ratios if r is not None])
        raise NotAffine(f"{left} == {right}: no common ratio of its factors")

    def _least_ratio(self, big: Expr, small: Expr) -> Fraction | None:
        """Return ``k`` where ``big >= k*small >= 0`` wherever ``big >= 1`` (isl proves it).

        Its candidate is the least ratio at a few sizes of the one dim they share.
        """
        if len(big.symbols | small.symbols) != 1:
            return None
        (name,) = big.symbols | small.symbols
        seen = []
        for size in range(1, _SAMPLES + 1):
            top, bottom = big.evaluate({name: size}), small.evaluate({name: size})
            if top is not None and bottom:
                seen.append(Fraction(top, bottom))
        if not seen:
            return None
        k, zero = min(seen), self.constant(0)
        a, b = self.pw(big), self.pw(small)
        if not self.sizes.is_subset(a.ge_set(zero).intersect(b.ge_set(zero))):
            return None
        positive = self.sizes.intersect(a.ge_set(self.constant(1)))
        scaled = a.mul(self.constant(k.denominator)).ge_set(b.mul(self.constant(k.numerator)))
        return k if k > 0 and positive.is_subset(scaled) else None

    def _balanced(self, pairs: Sequence[tuple[Any, Any]], ratios: Sequence[Fraction]) -> Any:
        one, zero = self.constant(1), self.constant(0)
        met = self.universe
        for (big, small), k in zip(pairs, ratios, strict=True):
            each = big.mul(self.constant(k.denominator)).eq_set(
                small.mul(self.constant(k.numerator))
            )
            met = met.intersect(each.intersect(big.ge_set(one)))
        empty = self.universe.subtract(self.universe)
        big_zero = functools.reduce(lambda u, p: u.union(p[0].eq_set(zero)), pairs, empty)
        small_zero = functools.reduce(lambda u, p: u.union(p[1].eq_set(zero)), pairs, empty)
        return met.union(big_zero.intersect(small_zero)).coalesce()

    def _never_negative(self, factor: Expr) -> bool:
        below = self.pw(factor).lt_set(self.constant(0))
        return bool(below.intersect(self.sizes).is_empty())

    def product_equals(self, factors: Sequence[Expr], value: int) -> Any:
        """Return the set where the product of ``factors`` (each affine) equals ``value``.

        >>> from bcast.core.expressions import parse_expression as p
        >>> from bcast.models.presburger import Space
        >>> s = Space(["h", "w"])
        >>> pairs = s.product_equals([p("h//8"), p("w//8")], 16)
        >>> s.one_dim(pairs, "h")
        (((8, 23), (32, 39), (64, 71), (128, 135)), None)
        """
        if abs(value) > _LARGEST:
            raise NotAffine(f"a product equal to {value}: too many divisors to split over")
        first = self.pw(factors[0])
        if len(factors) == 1:
            return first.eq_set(self.constant(value))
        if value == 0:
            out = first.eq_set(self.constant(0))
            return out.union(self.product_equals(factors[1:], 0))
        found = divisors(value)
        if len(found) ** (len(factors) - 1) > _MOST_DIVISORS:
            raise NotAffine(f"a product equal to {value}: too many pieces to split over")
        signs = (1,) if self._never_negative(factors[0]) else (1, -1)
        out = self.universe.subtract(self.universe)
        for d in found:
            for part in (d * sign for sign in signs):
                rest = self.product_equals(factors[1:], value // part)
                out = out.union(first.eq_set(self.constant(part)).intersect(rest))
        return out.coalesce()

    def product_multiple(self, factors: Sequence[Expr], modulus: int) -> Any:
        """Return the set where the product of ``factors`` is a multiple of ``modulus``.

        ``a*b`` is a multiple of ``m`` exactly when some divisor ``d`` of ``m`` divides
        ``a`` and ``m/d`` divides ``b``.

        >>> from bcast.core.expressions import parse_expression as p
        >>> from bcast.models.presburger import Space
        >>> s = Space(["n"])
        >>> s.one_dim(s.product_multiple([p("4*n")], 8), "n")
        (((2, None),), (2, 0))
        """
        modulus = abs(modulus)
        if modulus <= 1 or not factors:
            return self.universe if modulus <= 1 else self.universe.subtract(self.universe)
        if modulus > _LARGEST:
            raise NotAffine(f"a product a multiple of {modulus}: too many divisors")
        first = self.pw(factors[0])
        if len(factors) == 1:
            return first.mod_val(modulus).eq_set(self.constant(0))
        if len(divisors(modulus)) ** (len(factors) - 1) > _MOST_DIVISORS:
            raise NotAffine(f"a product a multiple of {modulus}: too many pieces to split over")
        out = self.universe.subtract(self.universe)
        for d in divisors(modulus):
            divides = first.mod_val(d).eq_set(self.constant(0)) if d > 1 else self.universe
            out = out.union(divides.intersect(self.product_multiple(factors[1:], modulus // d)))
        return out.coalesce()


def _groups(factors: Sequence[Expr]) -> list[frozenset[str]]:
    """Return the dims of ``factors`` in groups: two factors sharing a dim are one group.

    >>> from bcast.core.expressions import parse_expression as p
    >>> [sorted(g) for g in _groups([p("h//2"), p("w"), p("h + w"), p("c")])]
    [['h', 'w'], ['c']]
    """
    groups: list[frozenset[str]] = []
    for factor in factors:
        joined = frozenset(factor.symbols)
        for group in [g for g in groups if g & joined]:
            groups.remove(group)
            joined |= group
        groups.append(joined)
    return groups
