"""Pair bounds of a product family: chains over overlap levels (docs/theory.md, "Product families").

In a product family every ordered candidate pair of a query is a sequence, so
every two candidates ``c, c'`` of x with ``s_{c'} − s_c > 2δ`` are a
comparison, and ρ depends on the gap alone: the best chain ``R(x; g → c)``
only depends on which overlap levels ``s ∈ {0..m}`` the candidates offer x.
It is a shortest path over at most ``m + 1`` levels, computed for all queries
at once; no sequence is materialised.

Overlaps ``<x, c>`` come from a float32 matrix product of the 0/1 tokens in
chunks of queries: every partial sum is an integer ≤ m < 2²⁴, so each is exact.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..task.family import ProductFamily
from .pair_bounds import ExactValues, PairBounds, finish_pair_bounds, log_rho_table, tight

#: Candidate overlaps computed per chunk (queries × candidates), to bound memory.
CHUNK_CELLS = 1 << 24


def candidate_levels(family: ProductFamily, queries: np.ndarray, goods: np.ndarray):
    """For token ids ``queries``: candidates per overlap level ``[Q, m+1]`` and ``<x_q, g>``
    for each token id of ``goods`` ``[Q, G]``."""
    levels = family.m + 1
    cands = family.tokens[family.candidates].astype(np.float32)
    good_rows = family.tokens[goods].astype(np.float32)
    counts = np.zeros((len(queries), levels), dtype=np.int64)
    at_goods = np.zeros((len(queries), len(goods)), dtype=np.int64)
    step = max(1, CHUNK_CELLS // max(len(cands), 1))
    for start in range(0, len(queries), step):
        rows = family.tokens[queries[start:start + step]].astype(np.float32)
        s = np.rint(rows @ cands.T).astype(np.int64)
        offset = np.arange(len(rows))[:, None] * levels
        counts[start:start + len(rows)] = np.bincount(
            (offset + s).ravel(), minlength=len(rows) * levels).reshape(len(rows), levels)
        at_goods[start:start + len(rows)] = np.rint(rows @ good_rows.T).astype(np.int64)
    return counts, at_goods


def comparison_count(counts: np.ndarray, min_gap: int) -> int:
    """Σ over queries of candidate pairs whose levels differ by at least ``min_gap``."""
    total = 0
    levels = counts.shape[1]
    for gap in range(min_gap, levels):
        total += int((counts[:, :-gap] * counts[:, gap:]).sum())
    return total


def level_pair_bounds(family: ProductFamily, delta: Fraction) -> PairBounds:
    """ε for every ordered pair of matching entries of a product family."""
    entry_query = np.array([q for q, _ in family.matching], dtype=np.int64)
    goods = np.array([g for _, g in family.matching], dtype=np.int64)
    uq, q_of = np.unique(entry_query, return_inverse=True)
    counts, at_goods = candidate_levels(family, uq, goods)
    present = counts[q_of] > 0  # [n, L]
    target = at_goods[q_of]  # [n, n]: level of g_j for query x_i
    n, levels = present.shape
    rows = np.arange(n)
    source = target[rows, rows]
    min_gap = math.floor(2 * delta) + 1
    weight = log_rho_table(levels - 1, delta)

    dist = np.full((n, levels), np.inf)
    dist[rows, source] = 0.0
    for b in range(min_gap, levels):  # float search over levels in increasing order
        tails = b - min_gap + 1
        best = (dist[:, :tails] + weight[b - np.arange(tails)]).min(axis=1)
        head = present[:, b] & (source != b)
        dist[head, b] = best[head]
    exact = ExactValues(n * levels, rows * levels + source, delta)
    for b in range(min_gap, levels):  # exact pass over the tight edges
        tails = b - min_gap + 1
        gaps = b - np.arange(tails)
        ok = tight(dist[:, :tails], weight[gaps], dist[:, b:b + 1])
        ok &= (present[:, b] & (source != b))[:, None]
        i, a = np.nonzero(ok)
        exact.relax(i * levels + a, i * levels + b, gaps[a])

    vid = exact.vid[rows[:, None] * levels + target]
    vid[target == source[:, None]] = -1  # another candidate at the good one's level: no chain
    return finish_pair_bounds(vid, goods[:, None] == goods[None, :], exact.values, delta,
                              comparison_count(counts, min_gap))
