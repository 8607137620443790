"""The ceiling of pair certificates: how many queries any Radon or trace certificate can reach
(docs/theory.md, "The ceiling of pair certificates").

**The reduction.**  Both bounds use only the pair bounds ε, and a Radon clique of two or more
queries, like the queries the trace bound keeps past rank 1, needs every ordered pair (i, j)
bounded.  A chain climbs the overlap levels of ``x_i`` in steps of at least the usable gap
``g₀ = ⌊2δ⌋ + 1`` (:func:`usable_gap`), so with ``B_i`` the support of the good candidate
``g_i``

    <x_i, g_j> − <x_i, g_i> ≥ g₀   for all i ≠ j,   hence   |B_j \\ B_i| ≥ g₀

(``g_j − g_i`` is at most 1 on ``B_j \\ B_i`` and at most 0 elsewhere, and ``x_i ≥ 0``).
Two entries with one good candidate bound each other only by ``ε = 1`` exactly (an empty
chain): such a pair qualifies at Radon level 0, and the trace bound of entries that share k
distinct good candidates stays below k (docs/theory.md).

**The bound** (:func:`pair_ceiling`).  Deleting ``g₀ − 1`` elements from each ``B_i`` gives
sets that no two entries share and that are never nested, an antichain; so does adding
``g₀ − 1`` elements.  The LYM inequality (Lubell 1966) on both antichains, added, gives
``n ≤ ⌊2 / min_k f(k)⌋`` with ``f(k) = C(k, g₀−1)/C(m, k−g₀+1) + C(m−k, g₀−1)/C(m, k+g₀−1)``:
Sperner's ``C(m, ⌊m/2⌋)`` at ``g₀ = 1`` (δ < 1/2; attained by the middle layer), and
``⌊2 C(m, ⌊m/2⌋)/(m + 2)⌋`` at ``g₀ = 2`` (δ = 1/2; the Johnson bound of ``A(m, 4, m/2)``,
attained at m = 4, 5, 7, 8, 12, not at m = 6 (4 < 5) nor m = 9 (18 < 22,
:mod:`.pair_maximum`).

**The length** (:func:`length_ceiling`).  At context length N every chain of total gap G has
value at least ``μ_N(G)``, the least product of ``ρ_N`` over compositions of G into parts
``≥ g₀``; since ``G_ij + G_ji = <x_i − x_j, g_j − g_i> ≤ m``, every product
``ε_ij ε_ji ≥ μ_N(m)``, and neither bound certifies more than ``⌊1/μ_N(m)⌋ + 1`` queries.

:func:`exhaustive_pair_maximum` finds the exact maximum for small m by a maximum-clique search
over every pair ``(x, g)``, unequal thresholds ``<x, g>`` allowed.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from math import comb

import numpy as np

from ..errors import KernelgapError
from ..rationals import parse_delta
from .pair_bounds import min_gap, rho

#: Largest m whose full graph of all ``4^m`` pairs ``(x, g)`` the exhaustive search builds
#: (4,096 vertices at m = 6); above it only the ``2^m`` undominated pairs ``(1 − g, g)``.
FULL_GRAPH_M = 6
#: Largest m the exhaustive search accepts (256 undominated pairs at m = 8, searched in a second
#: at gap 2).
EXHAUSTIVE_M = 8
#: Largest m of the gap-1 search (a maximum antichain: 80 s at m = 7, out of reach at m = 8).
EXHAUSTIVE_GAP1_M = 7


def usable_gap(delta: Fraction | str | int) -> int:
    """The least integer overlap gap a pair certificate can use at tolerance δ: ``⌊2δ⌋ + 1``,
    1 for δ < 1/2 and 2 at δ = 1/2 (gap domination needs ``g > 2δ``; docs/theory.md, "Gap
    domination").  δ outside ``(0, 1/2]`` is refused in one line."""
    return min_gap(parse_delta(delta))


def _check_m_gap(m: int, gap: int) -> None:
    for name, value in (("m", m), ("the gap", gap)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise KernelgapError(f"{name} must be an integer ≥ 1, got {value!r}")


def shadow_weight(m: int, gap: int, k: int) -> Fraction:
    """``f(k)``: one set of size k's share of the two LYM sums (module docstring), exact."""
    down = Fraction(comb(k, gap - 1), comb(m, k - gap + 1))
    up = Fraction(comb(m - k, gap - 1), comb(m, k + gap - 1))
    return down + up


def pair_ceiling(m: int, gap: int) -> int:
    """A proven upper bound on the number of entries ``(x_i, g_i)`` of ``{0,1}^m`` with
    ``<x_i, g_j> ≥ <x_i, g_i> + gap`` for all i ≠ j (thresholds free): ``⌊2/min f(k)⌋`` over
    the sizes ``gap ≤ k ≤ m − gap`` (module docstring), 1 when no size allows two entries.
    ``C(m, ⌊m/2⌋)`` at gap 1 (Sperner), ``⌊2 C(m, ⌊m/2⌋)/(m + 2)⌋`` at gap 2."""
    _check_m_gap(m, gap)
    sizes = range(gap, m - gap + 1)
    if not sizes:
        return 1
    least = min(shadow_weight(m, gap, k) for k in sizes)
    return max(1, math.floor(2 / least))


@lru_cache(maxsize=4096)
def chain_minimum(total: int, delta: Fraction | str, length: int) -> Fraction | None:
    """``μ_N(G)``: the least product ``Π ρ_N(g_k, δ)`` over the compositions of ``G = total`` into
    parts ``g_k ≥ ⌊2δ⌋ + 1`` (the least value any chain of total gap G can have), exact; None
    when no part fits (G below the usable gap)."""
    delta = parse_delta(delta)
    if length < 3:
        raise KernelgapError(f"a context length N must be ≥ 3, got {length}")
    g0 = min_gap(delta)
    if total < g0:
        return None
    best = rho(total, delta, length)
    for last in range(g0, total - g0 + 1):
        rest = chain_minimum(total - last, delta, length)
        if rest is not None:
            best = min(best, rest * rho(last, delta, length))
    return best


def length_ceiling(m: int, delta: Fraction | str, length: int) -> int:
    """``⌊1/μ_N(m)⌋ + 1``: no Radon or trace certificate at context length N reaches more
    queries, since every pair has ``ε_ij ε_ji ≥ μ_N(G_ij + G_ji) ≥ μ_N(m)`` (module docstring;
    the trace bound stays below ``1/μ_N(m)``)."""
    _check_m_gap(m, 1)
    low = chain_minimum(m, delta, length)
    return 1 if low is None else math.floor(1 / low) + 1


def certificate_ceiling(m: int, delta: Fraction | str, length: int) -> int:
    """The most queries any pair certificate (Radon or trace, with chains) can certify on
    ``{0,1}^m`` at tolerance δ and context length N: the least of :func:`pair_ceiling` at
    :func:`usable_gap` and :func:`length_ceiling` (docs/theory.md, "The ceiling of pair
    certificates")."""
    return min(pair_ceiling(m, usable_gap(delta)), length_ceiling(m, delta, length))


def _words(m: int) -> np.ndarray:
    """Every word of ``{0,1}^m`` as a ``uint8 [2^m, m]`` row, in the order of its integer (bit 0
    the first position)."""
    codes = np.arange(1 << m, dtype=np.int64)
    return ((codes[:, None] >> np.arange(m)) & 1).astype(np.uint8)


def pair_graph(xs: np.ndarray, gs: np.ndarray, gap: int) -> np.ndarray:
    """Compatibility of entries ``(xs[i], gs[i])``: ``adj[i, j]`` when both
    ``<x_i, g_j> ≥ <x_i, g_i> + gap`` and ``<x_j, g_i> ≥ <x_j, g_j> + gap`` (bool, no loops)."""
    overlap = xs.astype(np.int32) @ gs.astype(np.int32).T
    ok = overlap >= np.diag(overlap)[:, None] + gap
    adj = ok & ok.T
    np.fill_diagonal(adj, False)
    return adj


def _full_graph_reduction(m: int, gap: int) -> None:
    """Build the graph of all ``4^m`` pairs and check the dominance the search relies on:
    every ``(x, g)``'s neighbours are neighbours of ``(1 − g, g)`` (``x`` only enters
    ``<x, g_j − g>``, largest at ``x = 1 − g``), so a maximum clique never needs another x."""
    words = _words(m)
    size = len(words)
    xs, gs = np.repeat(words, size, axis=0), np.tile(words, (size, 1))
    adj = pair_graph(xs, gs, gap)
    best = (size - 1 - np.arange(size)) * size + np.arange(size)  # row of (1 − g, g) for each g
    owner = np.tile(np.arange(size), size)  # the g of each row
    if (adj & ~adj[best[owner]]).any():
        raise AssertionError("a pair (x, g) has a neighbour that (1 − g, g) lacks")


def maximum_pair_family(m: int, gap: int) -> list[int]:
    """A largest set of good candidates (integers, bit k the k-th position) whose entries
    ``(1 − g, g)`` meet the pair condition at ``gap``; its size is the maximum over every set of
    pairs ``(x, g)`` (the dominance of :func:`_full_graph_reduction`, checked on the full graph
    up to :data:`FULL_GRAPH_M`).  An exact maximum clique (igraph's Cliquer)."""
    import igraph

    _check_m_gap(m, gap)
    top = EXHAUSTIVE_GAP1_M if gap == 1 else EXHAUSTIVE_M
    if m > top:
        raise KernelgapError(f"the exhaustive search at gap {gap} takes m ≤ {top}, got {m}")
    if m <= FULL_GRAPH_M:
        _full_graph_reduction(m, gap)
    words = _words(m)
    adj = pair_graph(1 - words, words, gap)
    keep = np.flatnonzero(adj.any(1))
    if not len(keep):
        return [0]
    edges = np.argwhere(np.triu(adj[np.ix_(keep, keep)], 1))
    clique = igraph.Graph(n=len(keep), edges=edges.tolist()).largest_cliques()[0]
    return sorted(int(keep[v]) for v in clique)


def exhaustive_pair_maximum(m: int, gap: int) -> int:
    """The exact maximum number of entries ``(x, g)`` over ``{0,1}^m`` meeting the pair
    condition at ``gap``, unequal thresholds ``<x_i, g_i>`` allowed (:func:`maximum_pair_family`)."""
    return len(maximum_pair_family(m, gap))
