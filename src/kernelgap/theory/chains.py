"""Pair bounds of a family given as sequences: chains over the comparisons it holds.

A comparison ``c → c'`` for a query x needs all four sequences ``(x; c, c)``,
``(x; c', c')``, ``(x; c, c')``, ``(x; c', c)`` and a gap ``s_{c'} − s_c > 2δ``
(:mod:`.pair_bounds`).  At length N it needs the N + 1 sequences of
docs/theory.md, "Context length N": the all-c and all-c' sequences and, for each
of the N − 1 candidate slots, c in that slot and c' in all the others; its
ratio is ``ρ_N``.  The chains are shortest paths over these comparisons,
level by level in increasing overlap.  Each level's exact relaxation costs time
in its own edges, not in every node (:class:`~.pair_bounds.ExactValues`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..task.family import Family, sorted_unique
from .pair_bounds import ExactValues, PairBounds, finish_pair_bounds, log_rho, min_gap, tight


def overlaps(tokens: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``<tokens[a], tokens[b]>`` elementwise (bit-packed popcounts, chunked)."""
    packed = np.packbits(tokens, axis=1)
    out = np.empty(len(a), dtype=np.int64)
    for start in range(0, len(a), 1 << 18):
        sl = slice(start, start + (1 << 18))
        out[sl] = np.bitwise_count(packed[a[sl]] & packed[b[sl]]).sum(axis=1)
    return out


@dataclass
class Comparisons:
    """The comparison DAG of every query: edges ``lo → hi`` (token ids) of query ``q``."""

    q: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    s_hi: np.ndarray
    gap: np.ndarray


def _contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    pos = np.searchsorted(sorted_keys, keys)
    return sorted_keys[np.minimum(pos, len(sorted_keys) - 1)] == keys


def _complete_pairs_3(family: Family, qpos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Length 3: ``(q, a, b)``, ``a < b``, with (q; a, b), (q; b, a), (q; a, a) and (q; b, b)
    all present (one sort of the rows' keys, then look-ups)."""
    others = [p for p in range(3) if p != qpos]
    t = len(family.tokens)
    idx = family.index
    keys = sorted_unique((idx[:, qpos] * t + idx[:, others[0]]) * t + idx[:, others[1]])
    q, rest = np.divmod(keys, t * t)
    a, b = np.divmod(rest, t)
    mixed = a < b
    q, a, b = q[mixed], a[mixed], b[mixed]
    need = [(q * t + b) * t + a, (q * t + a) * t + a, (q * t + b) * t + b]
    ok = np.logical_and.reduce([_contains(keys, k) for k in need])
    return q[ok], a[ok], b[ok]


def complete_comparisons(family: Family, qpos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q, lo, hi)`` token ids, ``lo ≠ hi``: the family holds the all-lo and all-hi sequences
    with q at ``qpos`` and, for every other slot j, lo at j and hi at every other slot (at
    N = 3 both orders of a mixed pair, so each complete pair comes once per direction).

    Each sequence is read as a record ``(q, lo, hi, slot)``: a sequence whose candidate
    slots hold one token once and another in all the rest (N = 3: either of the two);
    a pair is complete when its records cover all N − 1 slots.
    """
    n = family.length
    if n == 3:  # (q; a, b) is "a in slot 0, b elsewhere" and "b in slot 1, a elsewhere"
        q, a, b = _complete_pairs_3(family, qpos)
        return np.concatenate([q, q]), np.concatenate([a, b]), np.concatenate([b, a])
    t = len(family.tokens)
    idx = family.index
    q, cand = idx[:, qpos], idx[:, [p for p in range(n) if p != qpos]]
    first = cand[:, :1]
    same_first = (cand == first).sum(1)
    uniform = same_first == n - 1
    uniform_keys = sorted_unique(q[uniform] * t + first[uniform, 0])
    at_zero = (same_first == 1) & (cand[:, 1:] == cand[:, 1:2]).all(1)  # slot 0 holds the single one
    elsewhere = same_first == n - 2  # exactly one slot j > 0 differs from slot 0
    single = np.where(at_zero, 0, np.argmax(cand != first, axis=1))
    keep = at_zero | elsewhere
    rq, slot = q[keep], single[keep]
    lo = cand[np.arange(len(idx)), single][keep]
    hi = np.where(at_zero, cand[:, 1], first[:, 0])[keep]
    if not len(rq):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    key = (rq * t + lo) * t + hi  # < 2^63 for T < 2^21
    if t**3 * (n - 1) < 1 << 63:  # one int64 per record: a plain sort
        records = sorted_unique(key * (n - 1) + slot) // (n - 1)
    else:
        records = np.unique(np.stack([key, slot], 1), axis=0)[:, 0]
    keys, counts = np.unique(records, return_counts=True)
    keys = keys[counts == n - 1]
    q, rest = np.divmod(keys, t * t)
    lo, hi = np.divmod(rest, t)
    ok = (
        _contains(uniform_keys, q * t + lo) & _contains(uniform_keys, q * t + hi)
        if len(uniform_keys)
        else np.zeros(len(q), dtype=bool)
    )
    return q[ok], lo[ok], hi[ok]


def complete_quads(family: Family, qpos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q, a, b)``, ``a < b``: every sequence of a comparison between a and b is present
    (at N = 3: (q; a, b), (q; b, a), (q; a, a) and (q; b, b))."""
    if family.length == 3:
        return _complete_pairs_3(family, qpos)
    q, lo, hi = complete_comparisons(family, qpos)
    return q, np.minimum(lo, hi), np.maximum(lo, hi)


def comparisons(family: Family, qpos: int, delta: Fraction) -> Comparisons:
    """Every comparison (all its sequences present, gap > 2δ, from the lower to the higher
    overlap)."""
    q, a, b = complete_comparisons(family, qpos)
    sa, sb = overlaps(family.tokens, q, a), overlaps(family.tokens, q, b)
    ok = sb - sa >= min_gap(delta)  # g > 2δ for an integer g, whatever δ's size
    return Comparisons(q[ok], a[ok], b[ok], sb[ok], (sb - sa)[ok])


def _entry_edges(comp: Comparisons, entry_query: np.ndarray):
    """Replicate each query's edges for every matching entry with that query."""
    order = np.argsort(comp.q, kind="stable")
    qs = comp.q[order]
    start = np.searchsorted(qs, entry_query, "left")
    count = np.searchsorted(qs, entry_query, "right") - start
    entry = np.repeat(np.arange(len(entry_query)), count)
    offsets = np.repeat(start - np.concatenate([[0], np.cumsum(count)[:-1]]), count)
    return entry, order[offsets + np.arange(count.sum())]


def chain_pair_bounds(family: Family, qpos: int, delta: Fraction) -> PairBounds:
    """ε for every ordered pair of matching entries at query position ``qpos`` (0-based)."""
    comp = comparisons(family, qpos, delta)
    t = len(family.tokens)
    entry_query = np.array([q for q, _ in family.matching], dtype=np.int64)
    goods = np.array([g for _, g in family.matching], dtype=np.int64)
    entry, edge = _entry_edges(comp, entry_query)
    lo_key, hi_key = entry * t + comp.lo[edge], entry * t + comp.hi[edge]
    src_key = np.arange(len(entry_query)) * t + goods
    node_keys = sorted_unique(np.concatenate([lo_key, hi_key, src_key]))
    lo, hi, src = (np.searchsorted(node_keys, k) for k in (lo_key, hi_key, src_key))
    gap, level = comp.gap[edge], comp.s_hi[edge]
    weight = log_rho(gap, delta, family.length)
    by_level = np.argsort(level, kind="stable")
    groups = np.split(by_level, np.flatnonzero(np.diff(level[by_level])) + 1) if len(by_level) else []

    dist = np.full(len(node_keys), np.inf)
    dist[src] = 0.0
    for g in groups:  # float search: levels in increasing s, every in-edge of a level at once
        np.minimum.at(dist, hi[g], dist[lo[g]] + weight[g])
    exact = ExactValues(len(node_keys), src, delta, family.length)
    for g in groups:  # exact pass over the tight edges only
        keep = g[tight(dist[lo[g]], weight[g], dist[hi[g]])]
        exact.relax(lo[keep], hi[keep], gap[keep])

    n = len(goods)
    keys = np.arange(n)[:, None] * t + goods[None, :]
    pos = np.minimum(np.searchsorted(node_keys, keys), len(node_keys) - 1)
    vid = np.where(node_keys[pos] == keys, exact.vid[pos], -1)
    return finish_pair_bounds(vid, goods[:, None] == goods[None, :], exact.values, delta, len(comp.q))
