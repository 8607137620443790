"""Pair bounds of a family given as sequences: chains over the comparisons it holds.

A comparison ``c → c'`` for a query x needs all four sequences ``(x; c, c)``,
``(x; c', c')``, ``(x; c, c')``, ``(x; c', c)`` and a gap ``s_{c'} − s_c > 2δ``
(:mod:`.pair_bounds`); the chains are shortest paths over these comparisons,
level by level in increasing overlap.  Each level's exact relaxation costs time
in its own edges, not in every node (:class:`~.pair_bounds.ExactValues`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..task.family import Family
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


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a plain sort: faster than ``np.unique``'s hashing here)."""
    keys = np.sort(keys)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def _contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    pos = np.searchsorted(sorted_keys, keys)
    return sorted_keys[np.minimum(pos, len(sorted_keys) - 1)] == keys


def _triples(family: Family, qpos: int) -> np.ndarray:
    """Sorted unique keys ``(q·T + a)·T + b`` of (query, first other, second other)."""
    others = [p for p in range(3) if p != qpos]
    t = len(family.tokens)
    idx = family.index
    return _sorted_unique((idx[:, qpos] * t + idx[:, others[0]]) * t + idx[:, others[1]])


def complete_quads(family: Family, qpos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q, a, b)``, ``a < b``: the family holds (q; a, b), (q; b, a), (q; a, a) and (q; b, b)."""
    t = len(family.tokens)
    keys = _triples(family, qpos)
    q, rest = np.divmod(keys, t * t)
    a, b = np.divmod(rest, t)
    mixed = a < b
    q, a, b = q[mixed], a[mixed], b[mixed]
    need = [(q * t + b) * t + a, (q * t + a) * t + a, (q * t + b) * t + b]
    ok = np.logical_and.reduce([_contains(keys, k) for k in need])
    return q[ok], a[ok], b[ok]


def comparisons(family: Family, qpos: int, delta: Fraction) -> Comparisons:
    """Every comparison (all four sequences present, gap > 2δ)."""
    q, a, b = complete_quads(family, qpos)
    sa, sb = overlaps(family.tokens, q, a), overlaps(family.tokens, q, b)
    gap = np.abs(sa - sb)
    ok = gap >= min_gap(delta)  # g > 2δ for an integer g, whatever δ's size
    q, a, b, sa, sb, gap = q[ok], a[ok], b[ok], sa[ok], sb[ok], gap[ok]
    up = sa < sb
    return Comparisons(q, np.where(up, a, b), np.where(up, b, a), np.maximum(sa, sb), gap)


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
    node_keys = _sorted_unique(np.concatenate([lo_key, hi_key, src_key]))
    lo, hi, src = (np.searchsorted(node_keys, k) for k in (lo_key, hi_key, src_key))
    gap, level = comp.gap[edge], comp.s_hi[edge]
    weight = log_rho(gap, delta)
    by_level = np.argsort(level, kind="stable")
    groups = np.split(by_level, np.flatnonzero(np.diff(level[by_level])) + 1) if len(by_level) else []

    dist = np.full(len(node_keys), np.inf)
    dist[src] = 0.0
    for g in groups:  # float search: levels in increasing s, every in-edge of a level at once
        np.minimum.at(dist, hi[g], dist[lo[g]] + weight[g])
    exact = ExactValues(len(node_keys), src, delta)
    for g in groups:  # exact pass over the tight edges only
        keep = g[tight(dist[lo[g]], weight[g], dist[hi[g]])]
        exact.relax(lo[keep], hi[keep], gap[keep])

    n = len(goods)
    keys = np.arange(n)[:, None] * t + goods[None, :]
    pos = np.minimum(np.searchsorted(node_keys, keys), len(node_keys) - 1)
    vid = np.where(node_keys[pos] == keys, exact.vid[pos], -1)
    return finish_pair_bounds(vid, goods[:, None] == goods[None, :], exact.values, delta, len(comp.q))
