"""The rank lower bound as an exact certificate for a concrete family (SPEC §4).

For a family of length-3 sequences, a query position and a tolerance
``0 < δ ≤ 1/2`` the certificate is a rank ``r₀`` such that every single-head
normalized nonnegative kernel model with max error ``≤ δ`` (``< 1/2`` at
δ = 1/2) on the query position needs ``r ≥ r₀`` features.

Steps, with ``s_c = <x, c>`` for a query ``x`` and candidate ``c``:

1. **Comparisons.**  ``c → c'`` is a comparison for x when the family holds
   ``(x; c, c)``, ``(x; c', c')``, ``(x; c, c')`` and ``(x; c', c)`` and the gap
   ``g = s_{c'} − s_c > 2δ``; it proves ``M(c')/M(c) ≤ ρ(g, δ) = 2δ/(g − 2δ)``.
2. **Amplification.**  Ratios multiply along chains; s strictly increases, so
   the best ratio ``R(x; g → c)`` is a shortest path in ``log ρ`` over a DAG.
3. **Pair bounds.**  For matching entries ``(x_i, g_i)``:
   ``B[i, j] = K(x_i, g_j)/K(x_i, g_i) ≤ ε_ij = R(x_i; g_i → g_j)`` whenever
   ``R ≤ 1`` and ``K(x_i, g_i) > 0`` is proven (the row is *anchored*: some
   entry with ``R < 1``, or at δ = 1/2 some non-empty path with ``R ≤ 1``).
4. **Trace bound.**  ``rank B ≤ r`` and ``|tr B|² ≤ rank B · ‖B‖_F²`` give
   ``r ≥ n²/(n + Σ_{i≠j} ε_ij²)``.  At δ = 1/2 every non-empty-path ε is
   strict, so ``r₀ = ⌊bound⌋ + 1`` (if any is used); otherwise ``r₀ = ⌈bound⌉``.

**Unbounded pairs.**  An entry with no path, ``R > 1``, or in an unanchored row
can be arbitrarily large, so capping it (say at 1) would be unsound.  Instead
the certificate works on a principal submatrix: queries are dropped greedily
(most unbounded pairs first) until every remaining pair is bounded — any
principal submatrix of B has rank ≤ rank B, so this is sound.  Queries are
then dropped while that raises the exact bound.  Every dropped query and
unbounded pair is reported.

**Exactness.**  The shortest paths are searched in floats; then an exact
dynamic program in :class:`fractions.Fraction` runs over the *tight* edges
(those within ``1e-9`` of the float optimum), which contain every exactly
optimal path, so the certified value is the exact optimum, and every value it
reports is the product of an actual path (sound whatever the floats did).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..errors import FamilyError, KernelgapError
from ..task.family import Family, bits_to_str

#: Tolerance (relative, on log-ratios) under which a float-search edge is kept for the exact pass.
TIGHT_TOL = 1e-9

#: Reasons a pair (i, j) cannot be bounded.
NO_PATH, RATIO_ABOVE_ONE, UNANCHORED = 1, 2, 3
REASONS = {
    NO_PATH: "no chain of comparisons from the good candidate (missing sequences or gaps ≤ 2δ)",
    RATIO_ABOVE_ONE: "best chain ratio R > 1",
    UNANCHORED: "the query's row has no bound proving K(x, g_x) > 0",
}


def parse_delta(text: str | Fraction | int) -> Fraction:
    """δ as an exact rational in ``(0, 1/2]`` (``"1/2"``, ``"0.4"``, ``Fraction``)."""
    try:
        delta = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise KernelgapError(f"delta must be a rational like 1/2 or 0.4, got {text!r}") from None
    if not 0 < delta <= Fraction(1, 2):
        raise KernelgapError(f"delta must lie in (0, 1/2], got {delta}")
    return delta


def rho(gap: int, delta: Fraction) -> Fraction:
    """Gap domination ``ρ(g, δ) = 2δ/(g − 2δ)`` for ``g > 2δ`` (SPEC §4)."""
    if gap <= 2 * delta:
        raise ValueError(f"gap {gap} is not above 2δ = {2 * delta}")
    return 2 * delta / (gap - 2 * delta)


def frac_str(x: Fraction) -> str:
    return f"{x.numerator}/{x.denominator}"


# -- family checks and overlaps ---------------------------------------------------

def check_family(family: Family) -> None:
    """The certificate's preconditions; raises a one-line :class:`FamilyError`."""
    if family.length != 3:
        raise FamilyError(f"the certificate needs length-3 sequences, family {family.name!r} has length {family.length}")
    if family.tokens.size and family.tokens.max() > 1:
        raise FamilyError(f"family {family.name!r} has non-binary tokens (values other than 0/1)")
    if not family.matching:
        raise FamilyError(f"family {family.name!r} has no matching (query, good candidate) pairs")
    if len(family.tokens) >= 1 << 21:
        raise FamilyError(f"family {family.name!r} has {len(family.tokens)} distinct tokens; at most 2^21 are supported")


def overlaps(tokens: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``<tokens[a], tokens[b]>`` elementwise (bit-packed popcounts, chunked)."""
    packed = np.packbits(tokens, axis=1)
    out = np.empty(len(a), dtype=np.int64)
    for start in range(0, len(a), 1 << 18):
        sl = slice(start, start + (1 << 18))
        out[sl] = np.bitwise_count(packed[a[sl]] & packed[b[sl]]).sum(axis=1)
    return out


# -- comparisons -------------------------------------------------------------------

@dataclass
class Comparisons:
    """The comparison DAG of every query: edges ``lo → hi`` (token ids) of query ``q``."""

    q: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    s_hi: np.ndarray
    gap: np.ndarray


def _triples(family: Family, qpos: int) -> np.ndarray:
    """Sorted unique keys ``(q·T + a)·T + b`` of (query, first other, second other)."""
    others = [p for p in range(3) if p != qpos]
    t = len(family.tokens)
    idx = family.index
    return _sorted_unique((idx[:, qpos] * t + idx[:, others[0]]) * t + idx[:, others[1]])


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a plain sort: faster than ``np.unique``'s hashing here)."""
    keys = np.sort(keys)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def _contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    pos = np.searchsorted(sorted_keys, keys)
    return sorted_keys[np.minimum(pos, len(sorted_keys) - 1)] == keys


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
    """Every comparison of SPEC §4 (all four sequences present, gap > 2δ)."""
    q, a, b = complete_quads(family, qpos)
    sa, sb = overlaps(family.tokens, q, a), overlaps(family.tokens, q, b)
    gap = np.abs(sa - sb)
    ok = gap * delta.denominator > 2 * delta.numerator
    q, a, b, sa, sb, gap = q[ok], a[ok], b[ok], sa[ok], sb[ok], gap[ok]
    up = sa < sb
    return Comparisons(q, np.where(up, a, b), np.where(up, b, a), np.maximum(sa, sb), gap)


# -- amplification: shortest paths, float search then exact pass ---------------------

@dataclass
class PathValues:
    """Exact best ratios per node ``(entry, candidate)``: ``values[vid[node]]``."""

    node_keys: np.ndarray  # sorted keys entry·T + candidate
    vid: np.ndarray  # value id per node, −1 if unreachable
    values: list[Fraction] = field(default_factory=list)


def _entry_edges(comp: Comparisons, entry_query: np.ndarray):
    """Replicate each query's edges for every matching entry with that query."""
    order = np.argsort(comp.q, kind="stable")
    qs = comp.q[order]
    start = np.searchsorted(qs, entry_query, "left")
    count = np.searchsorted(qs, entry_query, "right") - start
    entry = np.repeat(np.arange(len(entry_query)), count)
    offsets = np.repeat(start - np.concatenate([[0], np.cumsum(count)[:-1]]), count)
    return entry, order[offsets + np.arange(count.sum())]


def best_ratios(family: Family, comp: Comparisons, delta: Fraction) -> PathValues:
    """``R(x_e; g_e → c)`` for every entry e and every candidate c reachable from g_e."""
    t = len(family.tokens)
    entry_query = np.array([q for q, _ in family.matching], dtype=np.int64)
    entry_good = np.array([g for _, g in family.matching], dtype=np.int64)
    entry, edge = _entry_edges(comp, entry_query)
    lo_key, hi_key = entry * t + comp.lo[edge], entry * t + comp.hi[edge]
    src_key = np.arange(len(entry_query)) * t + entry_good
    node_keys = _sorted_unique(np.concatenate([lo_key, hi_key, src_key]))
    lo, hi, src = (np.searchsorted(node_keys, k) for k in (lo_key, hi_key, src_key))
    gap, level = comp.gap[edge], comp.s_hi[edge]
    weight = _log_rho_table(int(gap.max(initial=0)), delta)[gap]
    by_level = np.argsort(level, kind="stable")
    bounds = np.flatnonzero(np.diff(level[by_level])) + 1
    groups = np.split(by_level, bounds) if len(by_level) else []

    dist = np.full(len(node_keys), np.inf)
    dist[src] = 0.0
    for g in groups:  # float search: levels in increasing s, every in-edge of a level at once
        np.minimum.at(dist, hi[g], dist[lo[g]] + weight[g])

    exact = _ExactValues(len(node_keys), src, delta)
    for g in groups:  # exact pass over the tight edges only
        tight = np.isfinite(dist[lo[g]]) & (
            dist[lo[g]] + weight[g] <= dist[hi[g]] + TIGHT_TOL * (1 + np.abs(dist[hi[g]])))
        exact.relax(lo[g[tight]], hi[g[tight]], gap[g[tight]])
    return PathValues(node_keys, exact.vid, exact.values)


class _ExactValues:
    """Exact path products per node as ids into a table of distinct Fractions."""

    def __init__(self, nodes: int, sources: np.ndarray, delta: Fraction) -> None:
        self.delta = delta
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
        """Set ``vid[v] = min over edges u → v of value[u]·ρ(gap)`` for the nodes of one level
        (their tails are final); distinct (value, gap) pairs are multiplied once."""
        if not len(lo):
            return
        combos, inverse = np.unique(np.stack([self.vid[lo], gap], 1), axis=0, return_inverse=True)
        products = [self.values[v] * rho(g, self.delta) for v, g in combos.tolist()]
        ranked = sorted(set(products))
        rank_of = {p: k for k, p in enumerate(ranked)}
        edge_rank = np.array([rank_of[p] for p in products], dtype=np.int64)[inverse.reshape(-1)]
        best = np.full(len(self.vid), len(ranked), dtype=np.int64)
        np.minimum.at(best, hi, edge_rank)
        nodes = np.unique(hi)
        self.vid[nodes] = np.array([self._id(p) for p in ranked], dtype=np.int64)[best[nodes]]


def _log_rho_table(max_gap: int, delta: Fraction) -> np.ndarray:
    """``log ρ(g, δ)`` for g = 0..max_gap (``inf`` where g ≤ 2δ: never an edge)."""
    return np.array([math.log(float(rho(g, delta))) if g > 2 * delta else math.inf
                     for g in range(max_gap + 1)])


# -- pair bounds ε_ij ----------------------------------------------------------------

@dataclass
class PairBounds:
    """``ε_ij = values[eps_id[i, j]]`` over matching entries; ``reason`` ≠ 0 where unbounded.

    ``strict[i, j]``: the bound is strict (a non-empty chain at δ = 1/2).
    """

    eps_id: np.ndarray
    reason: np.ndarray
    strict: np.ndarray
    values: list[Fraction]
    comparisons: int

    def eps_squared(self) -> np.ndarray:
        """``ε²`` in floats, 0 on the diagonal and where unbounded (for greedy choices only)."""
        sq = np.array([float(v) ** 2 for v in self.values])[np.maximum(self.eps_id, 0)]
        sq[self.reason != 0] = 0.0
        np.fill_diagonal(sq, 0.0)
        return sq


def pair_bounds(family: Family, qpos: int, delta: Fraction) -> PairBounds:
    """ε for every ordered pair of matching entries at query position ``qpos`` (0-based)."""
    comp = comparisons(family, qpos, delta)
    paths = best_ratios(family, comp, delta)
    n, t = len(family.matching), len(family.tokens)
    goods = np.array([g for _, g in family.matching], dtype=np.int64)
    keys = np.arange(n)[:, None] * t + goods[None, :]
    pos = np.minimum(np.searchsorted(paths.node_keys, keys), len(paths.node_keys) - 1)
    vid = np.where(paths.node_keys[pos] == keys, paths.vid[pos], -1)
    empty = goods[:, None] == goods[None, :]  # same candidate: B = 1 exactly
    vid[empty] = 0
    reachable = vid >= 0
    le_one = np.array([v <= 1 for v in paths.values])[np.maximum(vid, 0)] & reachable
    lt_one = np.array([v < 1 for v in paths.values])[np.maximum(vid, 0)] & reachable
    strict_reading = delta == Fraction(1, 2)
    anchored = (~empty & (lt_one | (strict_reading & le_one))).any(axis=1)
    reason = np.where(~reachable, NO_PATH, np.where(~le_one, RATIO_ABOVE_ONE, 0))
    reason[(reason == 0) & ~anchored[:, None]] = UNANCHORED
    np.fill_diagonal(reason, 0)
    np.fill_diagonal(vid, 0)
    strict = strict_reading & ~empty & (reason == 0)
    return PairBounds(vid, reason, strict, paths.values, len(comp.q))


# -- choosing the queries, the trace bound --------------------------------------------

def trace_bound(n: int, sum_eps2: Fraction) -> Fraction:
    """``n² / (n + Σ ε²)`` (Schur: ``|tr B|² ≤ rank B · ‖B‖_F²``)."""
    return Fraction(n * n) / (n + sum_eps2) if n else Fraction(0)


def sum_eps2(bounds: PairBounds, kept: np.ndarray) -> Fraction:
    """Exact ``Σ_{i≠j} ε_ij²`` over the kept entries (all pairs bounded)."""
    sub = bounds.eps_id[np.ix_(kept, kept)]
    off = ~np.eye(len(sub), dtype=bool)
    counts = np.bincount(sub[off], minlength=len(bounds.values))
    return sum((int(c) * bounds.values[v] ** 2 for v, c in enumerate(counts) if c), Fraction(0))


def select_queries(bounds: PairBounds) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """Kept entry indices and dropped ``(entry, why)`` (module docstring, 'Unbounded pairs')."""
    n = len(bounds.eps_id)
    kept = np.ones(n, dtype=bool)
    unbounded = bounds.reason != 0
    counts = unbounded.sum(0) + unbounded.sum(1)
    eps2 = bounds.eps_squared()
    loads = eps2.sum(0) + eps2.sum(1)
    dropped = []

    def drop(k: int, why: str) -> None:
        nonlocal counts, loads
        kept[k] = False
        counts = counts - unbounded[:, k] - unbounded[k, :]
        loads = loads - eps2[:, k] - eps2[k, :]
        dropped.append((k, why))

    while kept.any() and counts[kept].max() > 0:
        worst = np.flatnonzero(kept & (counts == counts[kept].max()))
        drop(int(worst[np.argmax(loads[worst])]), "has unbounded pairs")
    while kept.sum() > 1:
        alive = np.flatnonzero(kept)
        nk, total = len(alive), eps2[np.ix_(alive, alive)].sum()
        k = int(alive[np.argmax((nk - 1) ** 2 / (nk - 1 + total - loads[alive]))])
        trial = kept.copy()
        trial[k] = False
        if trace_bound(nk - 1, sum_eps2(bounds, trial)) <= trace_bound(nk, sum_eps2(bounds, kept)):
            break
        drop(k, "dropping it raises the bound")
    return np.flatnonzero(kept), dropped


# -- the certificate -------------------------------------------------------------------

@dataclass
class Certificate:
    """A certified rank ``r₀`` for a family (SPEC §4), with its intermediate numbers."""

    family: str
    m: int
    sequences: int
    query_position: int  # 1-based
    delta: Fraction
    queries_total: int
    queries: int
    sum_eps2: Fraction
    bound: Fraction
    strict: bool
    certified_rank: int
    comparisons: int
    weakest_pair: dict | None
    unbounded_pairs: list[dict]
    dropped_queries: list[dict]
    kept: list[int]  # matching entries the bound uses
    seconds: float = 0.0

    def to_json(self, limit: int = 50) -> dict:
        """JSON-ready dict; rationals as ``"p/q"``; long lists cut to ``limit`` entries."""
        return {
            "family": self.family, "m": self.m, "sequences": self.sequences,
            "query_position": self.query_position, "delta": frac_str(self.delta),
            "queries_total": self.queries_total, "queries": self.queries,
            "sum_eps2": frac_str(self.sum_eps2), "bound": frac_str(self.bound),
            "bound_float": float(self.bound), "strict": self.strict,
            "certified_rank": self.certified_rank, "comparisons": self.comparisons,
            "weakest_pair": self.weakest_pair,
            "unbounded_count": len(self.unbounded_pairs),
            "unbounded_pairs": self.unbounded_pairs[:limit],
            "dropped_count": len(self.dropped_queries),
            "dropped_queries": self.dropped_queries[:limit],
            "seconds": round(self.seconds, 4),
        }


def certified_rank(bound: Fraction, strict: bool) -> int:
    """``⌊bound⌋ + 1`` for a strict bound, else ``⌈bound⌉`` (SPEC §4, strictness)."""
    return math.floor(bound) + 1 if strict else math.ceil(bound)


def certify(family: Family, delta: Fraction | str = Fraction(1, 2)) -> Certificate:
    """The certificate at the family's query position; with every position scored
    (``query_position`` None) each position gives a valid certificate: the best is kept."""
    start = time.perf_counter()
    delta = parse_delta(delta)
    check_family(family)
    positions = [family.query_position] if family.query_position else [1, 2, 3]
    if not any(len(complete_quads(family, p - 1)[0]) for p in positions):
        raise FamilyError(
            f"family {family.name!r} has nothing to compare at query position "
            f"{' or '.join(map(str, positions))}: the certificate needs, for a query x and two "
            f"candidates c ≠ c', all four sequences (x; c, c), (x; c', c'), (x; c, c') and (x; c', c) "
            f"(are the mixed orders missing?)")
    best = max((certify_at(family, p - 1, delta) for p in positions),
               key=lambda c: (c.certified_rank, c.bound))
    best.seconds = time.perf_counter() - start
    return best


def certify_at(family: Family, qpos: int, delta: Fraction) -> Certificate:
    """The certificate with the query at 0-based position ``qpos``."""
    bounds = pair_bounds(family, qpos, delta)
    kept, dropped = select_queries(bounds)
    total = sum_eps2(bounds, kept)
    bound = trace_bound(len(kept), total)
    strict = bool(bounds.strict[np.ix_(kept, kept)].any())
    words = [bits_to_str(t) for t in family.tokens]
    match = family.matching
    bad = np.argwhere(bounds.reason != 0)
    return Certificate(
        family=family.name, m=family.m, sequences=len(family), query_position=qpos + 1,
        delta=delta, queries_total=len(match), queries=len(kept), sum_eps2=total, bound=bound,
        strict=strict, certified_rank=certified_rank(bound, strict),
        comparisons=bounds.comparisons,
        weakest_pair=_weakest(bounds, kept, family, words),
        unbounded_pairs=[{"query": words[match[i][0]], "bad": words[match[j][1]],
                          "reason": REASONS[int(bounds.reason[i, j])]} for i, j in bad.tolist()],
        dropped_queries=[{"query": words[match[k][0]], "why": why} for k, why in dropped],
        kept=kept.tolist(),
    )


def _weakest(bounds: PairBounds, kept: np.ndarray, family: Family, words: list[str]) -> dict | None:
    """The kept pair with the largest ε (the one the bound is least sure of)."""
    if len(kept) < 2:
        return None
    eps2 = bounds.eps_squared()[np.ix_(kept, kept)]
    i, j = (kept[k] for k in np.unravel_index(np.argmax(eps2), eps2.shape))
    (q, g), (_, b) = family.matching[i], family.matching[j]
    s = overlaps(family.tokens, np.array([q, q]), np.array([g, b]))
    return {"query": words[q], "good": words[g], "bad": words[b], "s_good": int(s[0]),
            "s_bad": int(s[1]), "eps": frac_str(bounds.values[bounds.eps_id[i, j]])}


def render_certificate(payload: dict) -> None:
    """Human summary of :meth:`Certificate.to_json`."""
    rel = ">" if payload["strict"] else "≥"
    print(f"family {payload['family']}: {payload['sequences']} sequences, m = {payload['m']}, "
          f"query at position {payload['query_position']}, δ = {payload['delta']}")
    print(f"queries used {payload['queries']} of {payload['queries_total']}, "
          f"Σε² = {payload['sum_eps2']}, bound n²/(n + Σε²) = {payload['bound']} "
          f"(≈ {payload['bound_float']:.4f}), {payload['comparisons']} comparisons")
    print(f"certified: every exact nonnegative kernel model needs r {rel} {payload['bound_float']:.4f}, "
          f"i.e. r ≥ {payload['certified_rank']}")
    if payload["weakest_pair"]:
        w = payload["weakest_pair"]
        print(f"weakest pair: ε = {w['eps']} (s_good = {w['s_good']}, s_bad = {w['s_bad']})")
    if payload["unbounded_count"]:
        print(f"{payload['unbounded_count']} pairs could not be bounded, e.g.:")
        for p in payload["unbounded_pairs"][:5]:
            print(f"  query {p['query']} vs bad {p['bad']}: {p['reason']}")
    if payload["dropped_count"]:
        print(f"{payload['dropped_count']} queries dropped to keep the bound sound")
