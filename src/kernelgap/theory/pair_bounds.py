"""Pair bounds ``ε_ij ≥ K(x_i, g_j) / K(x_i, g_i)``: what both certificates are built from.

docs/theory.md derives them; in short, with ``s_c = <x, c>``:

1. **Gap domination.**  When a family of length N ≥ 3 holds the all-c sequence
   ``(x; c, …, c)``, the all-c' sequence and the N − 1 sequences with c in one
   slot and c' in all the others, and ``g = s_{c'} − s_c > 2δ``, every model
   with max error ≤ δ has ``M(c')/M(c) ≤ ρ_N(g, δ) = 2δ/((N − 2)(g − 2δ))``
   (N = 3: ``2δ/(g − 2δ)``; docs/theory.md, "Context length N").
2. **Amplification.**  Ratios multiply along chains ``c_0 → c_1 → …``; the
   best ratio ``R(x; g → c)`` is a shortest path in ``log ρ`` over a DAG.
3. **Pair bounds.**  For matching entries ``(x_i, g_i)``:
   ``ε_ij = R(x_i; g_i → g_j)`` bounds ``B[i, j] = K(x_i, g_j)/K(x_i, g_i)``
   whenever ``R ≤ 1`` and the row is *anchored* (``K(x_i, g_i) > 0`` is proven:
   some entry with ``R < 1``, or at δ = 1/2 some non-empty chain with ``R ≤ 1``).

The chains run over the comparisons a list of sequences offers (:mod:`.chains`) or over the
overlap levels of a product family (:mod:`.levels`); both end in :func:`finish_pair_bounds`.

**Exactness.**  Chains are searched in floats, then exactly in Fractions over the *tight*
edges (within ``TIGHT_TOL`` of the float optimum), which contain every exactly optimal chain:
each value is the exact optimum.  δ is a Fraction of any size throughout and no bound is ever
computed in floats (docs/theory.md, "Exactness").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

#: Tolerance (relative, on log-ratios) under which a float-search edge is kept for the exact pass.
TIGHT_TOL = 1e-9

#: Reasons a pair (i, j) cannot be bounded.
NO_PATH, RATIO_ABOVE_ONE, UNANCHORED = 1, 2, 3
REASONS = {
    NO_PATH: "no chain of comparisons from the good candidate (missing sequences or gaps ≤ 2δ)",
    RATIO_ABOVE_ONE: "best chain ratio R > 1",
    UNANCHORED: "the query's row has no bound proving K(x, g_x) > 0",
}


def min_gap(delta: Fraction) -> int:
    """The least integer gap above 2δ, ``⌊2δ⌋ + 1``: a comparison needs ``g ≥ min_gap``."""
    return math.floor(2 * delta) + 1


def rho(gap: int, delta: Fraction, length: int = 3) -> Fraction:
    """Gap domination at context length N, ``ρ_N(g, δ) = 2δ/((N − 2)(g − 2δ))`` for ``g > 2δ``
    and ``N ≥ 3`` (N = 3: ``2δ/(g − 2δ)``; docs/theory.md, "Context length N")."""
    if gap <= 2 * delta:
        raise ValueError(f"gap {gap} is not above 2δ = {2 * delta}")
    if length < 3:
        raise ValueError(f"gap domination needs length N ≥ 3, got {length}")
    return 2 * delta / ((length - 2) * (gap - 2 * delta))


def log_fraction(x: Fraction) -> float:
    """``ln x`` for a positive Fraction of any size (no float over- or underflow)."""
    return math.log(x.numerator) - math.log(x.denominator)


def log_rho(gaps, delta: Fraction, length: int = 3) -> np.ndarray:
    """``ln ρ_N(g, δ) = ln 2δ − ln(g − 2δ) − ln(N − 2)`` per integer gap (``inf`` where
    ``g ≤ 2δ``), within ~1e-15 of the true logarithm (what :data:`TIGHT_TOL` needs) for a δ of
    any size: ``ln 2δ`` from its exact numerator and denominator, and ``g = 1`` (only when
    ``2δ < 1``) taken exactly, since ``1 − 2δ`` may be far below float resolution."""
    gaps = np.asarray(gaps, dtype=np.int64)
    two = 2 * delta
    out = np.full(gaps.shape, math.inf)
    ok = gaps >= min_gap(delta)
    shift = math.log(length - 2) if length > 3 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        out[ok] = log_fraction(two) - np.log(gaps[ok] - float(two)) - shift
    if two < 1:
        out[gaps == 1] = log_fraction(two) - log_fraction(1 - two) - shift
    return out


class ExactValues:
    """Exact chain products per node, as ids into a table of distinct Fractions: relaxed level
    by level (every tail final before its heads), ``vid[v] = min over tight edges u → v of
    values[vid[u]]·ρ_N(gap)``."""

    def __init__(self, nodes: int, sources: np.ndarray, delta: Fraction, length: int = 3) -> None:
        self.delta = delta
        self.length = length
        self.vid = np.full(nodes, -1, dtype=np.int64)
        self.vid[sources] = 0
        self.values = [Fraction(1)]
        self._ids = {Fraction(1): 0}

    def _id(self, value: Fraction) -> int:
        if value not in self._ids:
            self._ids[value] = len(self.values)
            self.values.append(value)
        return self._ids[value]

    def relax(self, lo: np.ndarray, hi: np.ndarray, gap: np.ndarray) -> None:
        """Set the heads ``hi`` of one level from their tails; distinct (value, gap) pairs
        are multiplied once."""
        if not len(lo):
            return
        combos, inverse = np.unique(np.stack([self.vid[lo], gap], 1), axis=0, return_inverse=True)
        products = [self.values[v] * rho(g, self.delta, self.length) for v, g in combos.tolist()]
        ranked = sorted(set(products))
        rank_of = {p: k for k, p in enumerate(ranked)}
        edge_rank = np.array([rank_of[p] for p in products], dtype=np.int64)[inverse.reshape(-1)]
        nodes, local = np.unique(hi, return_inverse=True)  # work in the edges, not in all nodes
        best = np.full(len(nodes), len(ranked), dtype=np.int64)
        np.minimum.at(best, local.reshape(-1), edge_rank)
        self.vid[nodes] = np.array([self._id(p) for p in ranked], dtype=np.int64)[best]


def _float(value: Fraction) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf


def tight(dist_lo: np.ndarray, weight: np.ndarray, dist_hi: np.ndarray) -> np.ndarray:
    """Edges on a float-optimal chain, up to :data:`TIGHT_TOL` (a superset of the exact optima)."""
    return np.isfinite(dist_lo) & (dist_lo + weight <= dist_hi + TIGHT_TOL * (1 + np.abs(dist_hi)))


@dataclass
class PairBounds:
    """``ε_ij = values[eps_id[i, j]]`` over matching entries; ``reason`` ≠ 0 where unbounded;
    ``strict[i, j]``: a strict bound (a non-empty chain at δ = 1/2); ``comparisons``: the
    ordered candidate pairs with a gap above 2δ, per query, the family offers."""

    eps_id: np.ndarray
    reason: np.ndarray
    strict: np.ndarray
    values: list[Fraction]
    comparisons: int

    @property
    def n(self) -> int:
        return len(self.eps_id)

    def value_floats(self) -> np.ndarray:
        """``float(values)``: each correctly rounded (relative error ≤ 2⁻⁵³), ``inf`` past the
        float range (only ever a ratio far above 1, which bounds nothing) and 0 or subnormal
        below it."""
        return np.array([_float(v) for v in self.values])

    def eps_squared(self) -> np.ndarray:
        """``ε²`` in floats, 0 on the diagonal and where unbounded (for greedy choices only)."""
        sq = np.square(np.minimum(self.value_floats(), 2.0))[np.maximum(self.eps_id, 0)]
        sq[self.reason != 0] = 0.0
        np.fill_diagonal(sq, 0.0)
        return sq


def finish_pair_bounds(
    vid: np.ndarray, empty: np.ndarray, values: list[Fraction], delta: Fraction, comparisons: int
) -> PairBounds:
    """Pair bounds from the chain value id of every entry pair (−1: no chain); ``empty[i, j]``:
    entries i and j share their good candidate, so ``B[i, j] = 1`` exactly (an empty chain)."""
    vid = vid.copy()
    vid[empty] = 0
    reachable = vid >= 0
    safe = np.maximum(vid, 0)
    le_one = np.array([v <= 1 for v in values])[safe] & reachable
    lt_one = np.array([v < 1 for v in values])[safe] & reachable
    strict_reading = delta == Fraction(1, 2)
    anchored = (~empty & (lt_one | (strict_reading & le_one))).any(axis=1)
    reason = np.where(~reachable, NO_PATH, np.where(~le_one, RATIO_ABOVE_ONE, 0)).astype(np.int8)
    reason[(reason == 0) & ~anchored[:, None]] = UNANCHORED
    np.fill_diagonal(reason, 0)
    np.fill_diagonal(vid, 0)
    strict = strict_reading & ~empty & (reason == 0)
    return PairBounds(vid, reason, strict, values, comparisons)
