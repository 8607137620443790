"""Pair bounds of a product family: chains over overlap levels (docs/theory.md, "Product families").

In a product family every ordered candidate pair of a query is a sequence, so
every two candidates ``c, c'`` of x with ``s_{c'} − s_c > 2δ`` are a
comparison, and ρ depends on the gap alone: the best chain ``R(x; g → c)``
only depends on which overlap levels the candidates offer x.  It is a
shortest path over the *distinct levels present* (at most ``min(C, m + 1)``
per query), computed for all matching entries at once; no sequence is
materialised.

At length N every ratio is ``ρ_N = ρ/(N − 2)`` (docs/theory.md, "Context length
N"); nothing else changes.

**Short look-back.**  Splitting a step ``a → b`` at a present level c never
hurts once both parts are long enough: with ``k = N − 2`` and
``a_i = g_i − 2δ > 0``,

    ρ_N(g₁, δ)·ρ_N(g₂, δ) ≤ ρ_N(g₁ + g₂, δ)   ⟺   k·a₁a₂ ≥ 2δ(a₁ + a₂ + 2δ)
                                            ⟺   (k a₁ − 2δ)(k a₂ − 2δ) ≥ 4δ²(k + 1)

(multiply by k and complete the product), which holds when both
``k a_i − 2δ ≥ 2δ√(k + 1)``, i.e. both gaps ``≥ T``, the least integer
``≥ 2δ + 2δ(1 + √(k + 1))/k`` (:func:`split_length`).  At N = 3 (k = 1) that is
``(g₁ − 4δ)(g₂ − 4δ) ≥ 8δ²`` and ``T = ⌈(4 + 2√2)δ⌉ ≤ 4``; T only falls as N
grows (``T = 2`` at δ = 1/2 from N = 5).  Splitting every such step
of an optimal chain keeps it optimal, so every level b has an exactly optimal
chain whose last step comes from a level a with ``s_a > s_{c*} − T``, where
c* is the highest present level ``≤ s_b − T``.  Those predecessors lie in
``(s_{c*} − T, s_{c*}] ∪ (s_b − T, s_b − ⌊2δ⌋ − 1]``: at most
``2T − ⌊2δ⌋ − 1 ≤ 7`` levels (the argument uses only the splitting inequality, so it
holds for every N with its own T).  The search over a query's k levels therefore
costs O(k) per matching entry, whatever m is.

Overlaps ``<x, c>`` come from a matrix product of the 0/1 tokens in chunks of
queries: every partial sum is an integer ≤ m, exact in float32 below 2²⁴ (and
in float64 above it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..task.family import ProductFamily
from .pair_bounds import ExactValues, PairBounds, finish_pair_bounds, log_rho, min_gap, tight

#: Cells (queries × max(candidates, m)) of one chunk of the overlap product, to bound memory.
CHUNK_CELLS = 1 << 22
#: Cells (entries × levels × look-back) of one chunk of the level search.
SEARCH_CELLS = 1 << 22
#: Cells (queries × (m + 2)) of a dense level → index map, used for the n² look-ups below it.
DENSE_CELLS = 1 << 24
#: Largest m whose overlaps float32 sums exactly (every partial sum an integer ≤ m).
FLOAT32_EXACT = 1 << 24


def split_length(delta: Fraction, length: int = 3) -> int:
    """``T``: the least integer gap ``t > 2δ`` with ``k(t − 2δ) ≥ 2δ`` and
    ``(k(t − 2δ) − 2δ)² ≥ 4δ²(k + 1)``, ``k = N − 2``, decided exactly (module docstring,
    "Short look-back"); at N = 3 the least integer ``t ≥ (4 + 2√2)δ``."""
    if length < 3:
        raise ValueError(f"the look-back needs length N ≥ 3, got {length}")
    k = length - 2
    t = max(min_gap(delta), math.ceil(2 * delta + 2 * delta / k))
    while (k * (t - 2 * delta) - 2 * delta) ** 2 < 4 * delta * delta * (k + 1):
        t += 1
    return t


@dataclass
class QueryLevels:
    """The distinct overlap levels each query sees, ascending, padded with ``pad`` (> m).

    ``levels[u, :sizes[u]]``: the levels of query u; ``counts``: candidates at each
    (0 on the padding); ``at_goods[u, j]``: ``<x_u, g_j>``.
    """

    levels: np.ndarray  # int64 [U, K]
    counts: np.ndarray  # int64 [U, K]
    sizes: np.ndarray  # int64 [U]
    at_goods: np.ndarray  # int64 [U, G]
    pad: int


def _compact(s: np.ndarray, m: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values per row of the overlap block ``s [r, C]`` (ascending, padded) and
    their counts: by counting over ``0..m`` when m is small against C, else by sorting."""
    r, c = s.shape
    if m + 1 <= 2 * c:  # linear: a histogram per row, then its non-empty levels
        hist = np.bincount((np.arange(r)[:, None] * (m + 1) + s).ravel(), minlength=r * (m + 1)).reshape(r, m + 1)
        present = hist > 0
        values = np.broadcast_to(np.arange(m + 1), (r, m + 1))
        weights = hist
    else:  # sort each row (C log C), keep the first of each run
        values = np.sort(s, axis=1)
        present = np.ones_like(values, dtype=bool)
        present[:, 1:] = values[:, 1:] != values[:, :-1]
        weights = None
    width = int(present.sum(1).max(initial=0))
    pos = np.cumsum(present, axis=1) - 1
    rows = np.broadcast_to(np.arange(r)[:, None], present.shape)
    levels = np.full((r, width), pad, dtype=np.int64)
    levels[rows[present], pos[present]] = values[present]
    counts = np.zeros((r, width), dtype=np.int64)
    if weights is not None:
        counts[rows[present], pos[present]] = weights[present]
    else:
        counts = np.bincount((rows * width + pos).ravel(), minlength=r * width).reshape(r, width)
    return levels, counts


def query_levels(family: ProductFamily, queries: np.ndarray, goods: np.ndarray) -> QueryLevels:
    """:class:`QueryLevels` of the token ids ``queries`` against the family's candidates."""
    m = family.m
    dtype = np.float32 if m < FLOAT32_EXACT else np.float64
    cands = family.tokens[family.candidates].astype(dtype)
    good_rows = family.tokens[goods].astype(dtype)
    pad = m + 1
    step = max(1, CHUNK_CELLS // max(len(cands), m, len(goods), 1))
    blocks, at_goods = [], np.zeros((len(queries), len(goods)), dtype=np.int64)
    for start in range(0, len(queries), step):
        rows = family.tokens[queries[start : start + step]].astype(dtype)
        blocks.append(_compact(np.rint(rows @ cands.T).astype(np.int64), m, pad))
        at_goods[start : start + len(rows)] = np.rint(rows @ good_rows.T).astype(np.int64)
    width = max((b[0].shape[1] for b in blocks), default=0)
    levels = np.full((len(queries), width), pad, dtype=np.int64)
    counts = np.zeros((len(queries), width), dtype=np.int64)
    start = 0
    for lv, cnt in blocks:
        levels[start : start + len(lv), : lv.shape[1]] = lv
        counts[start : start + len(lv), : cnt.shape[1]] = cnt
        start += len(lv)
    return QueryLevels(levels, counts, (counts > 0).sum(1), at_goods, pad)


class _RowSearch:
    """``searchsorted`` within each row of a padded ascending table, all rows at once."""

    def __init__(self, levels: np.ndarray, low: int, pad: int) -> None:
        self.width = levels.shape[1]
        self.low = low  # the least value ever searched (≤ 0)
        self.stride = pad - low + 1
        self.keys = (np.arange(len(levels))[:, None] * self.stride + (levels - low)).ravel()

    def last_at_most(self, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Index of the last level ``≤ value`` in each row (−1: none)."""
        keys = rows * self.stride + (np.asarray(values) - self.low)
        found = np.searchsorted(self.keys, keys, side="right") - 1 - rows * self.width
        return np.maximum(found, -1)


def level_index(table: QueryLevels, query: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Index of each of ``values`` (overlaps ``0..m``) among the levels of ``query`` (rows of
    the table, broadcast against ``values``); −1 where it is not one of them."""
    u = len(table.levels)
    if u * (table.pad + 1) <= DENSE_CELLS:  # a dense map: one gather per look-up
        dense = np.full((u, table.pad + 1), -1, dtype=np.int64)
        rows, cols = np.nonzero(table.counts > 0)
        dense[rows, table.levels[rows, cols]] = cols
        return dense[query, values]
    query, values = np.broadcast_arrays(query, values)
    found = _RowSearch(table.levels, 0, table.pad).last_at_most(query, values)
    level = table.levels[query, np.maximum(found, 0)]
    return np.where((found >= 0) & (level == values), found, -1)


def comparison_count(table: QueryLevels, gap: int) -> int:
    """Σ over queries of candidate pairs whose levels differ by at least ``gap``."""
    if not table.levels.size:
        return 0
    search = _RowSearch(table.levels, -gap, table.pad)
    rows = np.arange(len(table.levels))[:, None]
    below = search.last_at_most(rows, table.levels - gap)
    cum = np.cumsum(table.counts, axis=1)
    under = np.where(below >= 0, np.take_along_axis(cum, np.maximum(below, 0), 1), 0)
    return int((table.counts * under).sum())


def level_pair_bounds(family: ProductFamily, delta: Fraction) -> PairBounds:
    """ε for every ordered pair of matching entries of a product family.

    A level search per entry (module docstring): from the good candidate's level up
    through the levels its query sees, each level looking back at most
    ``2T − ⌊2δ⌋ − 1`` levels; a float pass, then an exact pass over its tight edges.
    Every ratio is ``ρ_N`` at the family's length N (docs/theory.md, "Context length N").
    """
    entry_query = np.array([q for q, _ in family.matching], dtype=np.int64)
    goods = np.array([g for _, g in family.matching], dtype=np.int64)
    # a family matches each query once, so the table's rows are the entries themselves
    table = query_levels(family, entry_query, goods)
    length = family.length
    gap0, split = min_gap(delta), split_length(delta, length)
    n, width = len(goods), table.levels.shape[1]
    q_of = np.arange(n)
    target = table.at_goods  # [n, n]: level of g_j for query x_i
    source = target[q_of, q_of]
    exact = None
    if n:
        back = 2 * split - gap0  # look-back per level (module docstring)
        chunk = max(1, SEARCH_CELLS // max(width * back, 1))
        exact = ExactValues(n * width, np.zeros(0, dtype=np.int64), delta, length)
        src = level_index(table, q_of, source)  # −1 only if g_i were no candidate
        for start in range(0, n, chunk):
            rows = np.arange(start, min(n, start + chunk))
            _search(table, q_of[rows], rows, src[rows], exact)
        position = level_index(table, q_of[:, None], target)  # index of g_j's level for x_i
        vid = exact.vid[np.arange(n)[:, None] * width + np.maximum(position, 0)]
        vid[position < 0] = -1
    else:
        vid = np.zeros((0, 0), dtype=np.int64)
    vid[target == source[:, None]] = -1  # another candidate at the good one's level: no chain
    return finish_pair_bounds(
        vid,
        goods[:, None] == goods[None, :],
        exact.values if exact is not None else [Fraction(1)],
        delta,
        comparison_count(table, gap0),
    )


def _search(table: QueryLevels, query: np.ndarray, entries: np.ndarray, src: np.ndarray, exact: ExactValues) -> None:
    """The level search of some entries (global ids ``entries``, their good candidates at
    level index ``src``, −1: none), its exact values written into ``exact`` at node
    ``entry·width + level index``; δ and N are ``exact``'s."""
    delta, length, width = exact.delta, exact.length, table.levels.shape[1]
    gap0, split = min_gap(delta), split_length(delta, length)
    back = 2 * split - gap0  # look-back per level (module docstring)
    lv, size = table.levels[query], table.sizes[query]
    r = len(lv)
    local = np.arange(r)[:, None]
    search = _RowSearch(lv, -split, table.pad)
    src_ok = src >= 0
    index = np.arange(width)[None, :]
    head = src_ok[:, None] & (index > src[:, None]) & (index < size[:, None])
    last = search.last_at_most(local, lv - gap0)  # latest possible predecessor
    pivot = search.last_at_most(local, lv - split)  # c*: the highest level ≤ s_b − T
    pivot_level = np.take_along_axis(lv, np.maximum(pivot, 0), 1)
    first = np.where(pivot >= 0, search.last_at_most(local, pivot_level - split) + 1, 0)
    first = np.maximum(first, src[:, None])
    tail = last[:, :, None] - np.arange(back)  # [r, K, back]
    valid = head[:, :, None] & (tail >= first[:, :, None])
    # every predecessor the lemma keeps lies within the look-back (module docstring)
    assert not (head & (last - first + 1 > back)).any(), "look-back window too short"
    tail = np.maximum(tail, 0)
    gaps = np.where(valid, lv[:, :, None] - np.take_along_axis(lv, tail.reshape(r, -1), 1).reshape(tail.shape), 0)
    weight = np.where(valid, log_rho(gaps, delta, length), np.inf)

    dist = np.full((r, width), np.inf)
    start = np.flatnonzero(src_ok)
    dist[start, src[start]] = 0.0
    for b in range(width):  # float search, levels ascending (each tail final before its heads)
        best = (np.take_along_axis(dist, tail[:, b], 1) + weight[:, b]).min(axis=1, initial=np.inf)
        dist[:, b] = np.where(head[:, b], best, dist[:, b])
    node = entries[:, None] * width  # global node of (entry, level index): node + index
    exact.vid[node[start, 0] + src[start]] = 0
    for b in range(width):  # exact pass over the tight edges only
        d_lo = np.take_along_axis(dist, tail[:, b], 1)
        ok = valid[:, b] & tight(d_lo, weight[:, b], dist[:, b : b + 1])
        i, k = np.nonzero(ok)
        exact.relax(node[i, 0] + tail[i, b, k], node[i, 0] + b, gaps[i, b, k])
