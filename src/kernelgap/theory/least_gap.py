"""The whole set by rule: the Radon bound of a complement-shaped product family from its least gap
(docs/theory.md, "Context length N", "The whole set by rule").

A product family has **complement shape** when every matching query has the same weight w,
each good candidate is the complement of its query and the candidates are exactly the good
ones.  Then ``<x_i, g_i> = 0`` and, for ``i ≠ j``,

    gap_ij = <x_i, g_j> − <x_i, g_i> = w − <x_i, x_j> = d(x_i, x_j)/2,

and the family holds every sequence of the single step ``g_i → g_j`` (it is a product), so
``ε_ij ≤ ρ_N(gap_ij, δ)`` whenever ``gap_ij > 2δ``.  ρ_N falls with the gap, so with
``g* = d_min/2`` (the least gap over all ordered pairs) every pair has
``ε_ij ε_ji ≤ ρ_N(g*)²``.  Since no candidate lies strictly between a query's good level 0
and g*, the pair at the least distance has exactly ``ε = ρ_N(g*)``: ``ρ_N(g*)²`` is the exact
largest product, and the rule decides the whole set exactly as the pair matrices would.

Where the least distance's search (:func:`~kernelgap.task.codes.min_distance`) stops at its
work cap, its proven lower bound is used: that can only lower the level, never make it wrong.
The level is read as the pair matrices' would be (:func:`.radon.exact_level`), so the rule
certifies all n exactly when the whole-set test would; below, the first ``min(n, L + 1)``
queries are a clique at the rule's level L.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..task.codes import min_distance
from ..task.family import ProductFamily, sorted_unique
from ..task.packed import PackedCode, pack_words, popcount
from .pair_bounds import min_gap, rho
from .radon import exact_level


@dataclass
class ComplementShape:
    """The matching queries of a complement-shaped family, packed: ``code.ints[i]`` is entry i's
    query word (:class:`~kernelgap.task.packed.PackedCode`, one ``uint64`` a word)."""

    code: PackedCode
    weight: int

    @property
    def n(self) -> int:
        return len(self.code)


def complement_shape(family: ProductFamily) -> ComplementShape | None:
    """The family's :class:`ComplementShape` (module docstring), or None: fewer than two
    entries, words wider than 64 bits, or not of that shape (``O(n)`` integer work)."""
    if len(family.matching) < 2 or family.m > 64:
        return None
    pairs = np.asarray(family.matching, dtype=np.int64)
    queries, goods = pairs[:, 0], pairs[:, 1]
    if not np.array_equal(sorted_unique(goods), family.candidates):
        return None
    packed = pack_words(family.tokens)
    code, complements = packed[queries], packed[goods]
    weights = popcount(code)
    if (weights != weights[0]).any():
        return None
    if not np.array_equal(complements, code ^ np.uint64((1 << family.m) - 1)):
        return None
    return ComplementShape(PackedCode(code, family.m), int(weights[0]))


@dataclass
class LeastGap:
    """The rule's numbers: ``distance`` the least distance of the query code (a proven lower bound
    when not ``exact``; ``pair`` two entries at it when exact), ``gap = distance // 2``,
    ``eps = ρ_N(gap)`` (None when ``gap ≤ 2δ``: such pairs are unbounded), ``product = eps²``,
    ``level`` the Radon level every pair qualifies at (0: none), ``strict`` the bounds' reading."""

    n: int
    distance: int
    exact: bool
    pair: tuple[int, int] | None
    gap: int
    eps: Fraction | None
    product: Fraction | None
    level: int
    strict: bool

    @property
    def rank(self) -> int:
        """The rank the rule certifies: the first ``min(n, level + 1)`` queries are a clique."""
        return min(self.n, self.level + 1)

    @property
    def whole_set(self) -> bool:
        return self.level >= self.n - 1


def least_gap(shape: ComplementShape, delta: Fraction, length: int, max_keys: int | None = None) -> LeastGap:
    """The rule (module docstring) at tolerance δ and context length N = ``length``; the search
    for the least distance sorts at most ``max_keys`` sub-word keys per test (default
    :data:`~kernelgap.task.codes.MAX_SUBWORD_KEYS`)."""
    distance, exact, pair = min_distance(shape.code, shape.weight, max_keys=max_keys)
    gap = distance // 2
    strict = delta == Fraction(1, 2)
    if gap < min_gap(delta):
        return LeastGap(shape.n, distance, exact, pair, gap, None, None, 0, strict)
    eps = rho(gap, delta, length)
    product = eps * eps
    # a pair bound above 1 bounds nothing: exact_level is then 0
    level = exact_level(product, strict, shape.n - 1) if eps <= 1 else 0
    return LeastGap(shape.n, distance, exact, pair, gap, eps, product, level, strict)
