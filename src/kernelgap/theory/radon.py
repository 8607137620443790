"""The Radon (simplex) bound: nonnegative features make the rank bound tight (docs/theory.md).

Rescale ``B = P Qᵀ`` (``P, Q ≥ 0``, ``n × r``) so that ``B_ii = 1``.  Then
``a_i = P_i ∘ Q_i`` is a probability vector on r coordinates and
``<a_i, a_j> ≤ B_ij·B_ji``.  Any ``r + 1`` such points have a Radon split with
a common point ω, and ``1 = Σ ω_k ≤ √r‖ω‖`` gives ``max B_ij·B_ji ≥ 1/r``.

**Certificate.**  A set of ``r + 1`` queries whose pairs all have
``ε_ij·ε_ji ≤ 1/r`` (``< 1/r`` when neither bound is strict) proves that every
exact model has rank ≥ ``r + 1``.  The pairs that qualify at level r form a
graph ``G_r``, nested in r (``G_{r+1} ⊆ G_r``); the certificate is the largest
``r`` with a clique of ``r + 1`` vertices in ``G_r``.  Every clique found is a
sound certificate; the search is exact unless its work budget (:mod:`.work`) or the hang
guard runs out, which the result reports.

**Whole set.**  When every pair of all n queries qualifies at level n − 1, the n queries are
the clique (:func:`whole_set_qualifies`).  Since every bounded ε is ≤ 1, a pair can fail only
if both ``ε_ij, ε_ji ≥ 1/(n − 1)``; only those pairs are decided, exactly, with no ``n × n``
float matrix.

Levels are read from the pair products in floats, and in exact rationals wherever
``1/(ε_ij ε_ji)`` lies within ``1e-9`` of an integer (float rounding errs by < 1e-15
relative, so elsewhere the float floor is the exact one).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..task.family import sorted_unique
from .pair_bounds import PairBounds
from .work import DEFAULT_GUARD_S, Work, bitsets, max_clique

#: The hang guard of the exact clique search, in seconds; the search itself is bounded by
#: work (:data:`.work.DEFAULT_NODES` nodes), so the certificate does not depend on the clock.
DEFAULT_BUDGET_S = DEFAULT_GUARD_S
#: Cores up to four times this size get the greedy-colouring test before the exact search; with
#: ``budget_s = 0`` only cores up to this size are searched exactly.
IN_PROCESS_CORE = 64
#: Rows of the pair matrices handled at once.
ROW_CHUNK = 2048
#: Greedy cliques are grown from this many vertices of highest degree.
GREEDY_STARTS = 8
#: Open sets up to this size pick the vertex with the most open neighbours (else the first).
GREEDY_DYNAMIC = 256
#: Relative distance of ``1/p`` from an integer below which a level is decided exactly.
NEAR_INTEGER = 1e-9


@dataclass
class RadonBound:
    """``members``: the clique (matching entry indices; a ``range`` by rule); ``level``: r with
    every member pair qualifying at r; ``exact_search``: no larger certificate exists;
    ``by_rule``: from the least gap (:mod:`.least_gap`); ``max_product_bound``: a proven upper
    bound on the members' largest product where ``max_product`` (exact) is not known."""

    rank: int
    members: list[int] | range
    level: int
    max_product: Fraction | None
    exact_search: bool
    seconds: float = 0.0
    steps: list[dict] = field(default_factory=list)
    whole_set: bool = False  # certified by the whole-set test, without a clique search
    by_rule: bool = False
    max_product_bound: Fraction | None = None
    nodes: int = 0  # exact clique-search nodes spent (the work budget counts these)
    guard_hit: bool = False  # the hang guard (seconds) stopped the search: the answer may depend on the clock


#: Largest table (value ids² × 2 cells) the distinct (ε_ij, ε_ji, strict) triples are counted in;
#: beyond it they are sorted.
TRIPLE_TABLE = 1 << 24


def distinct_triples(a: np.ndarray, b: np.ndarray, strict: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``(a, b, strict)`` triples of value ids in ``0..width − 1`` (sorted rows of
    an ``[k, 3]`` int64 array) and each input's row, from one packed int64 key per pair."""
    key = (a.astype(np.int64) * width + b.astype(np.int64)) * 2 + strict.astype(np.int64)
    if 2 * width * width <= TRIPLE_TABLE:
        present = np.bincount(key, minlength=2 * width * width) > 0
        uniq = np.flatnonzero(present)
        slot = np.cumsum(present) - 1
        inverse = slot[key]
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
        inverse = inverse.reshape(-1)
    combos = np.stack([uniq // 2 // width, uniq // 2 % width, uniq % 2], 1)
    return combos, inverse


def exact_levels(bounds: PairBounds, i: np.ndarray, j: np.ndarray, level, cap: int) -> np.ndarray:
    """``level(ε_ij·ε_ji, strict, cap)`` of each pair ``(i[k], j[k])``, in exact rationals,
    computed once per distinct ``(ε_ij, ε_ji, strict)``."""
    strict = bounds.strict[i, j] | bounds.strict[j, i]
    combos, inverse = distinct_triples(bounds.eps_id[i, j], bounds.eps_id[j, i], strict, len(bounds.values))
    exact = np.array([level(bounds.values[a] * bounds.values[b], bool(s), cap) for a, b, s in combos.tolist()])
    return exact[inverse.reshape(-1)]


def exact_level(p: Fraction, strict: bool, cap: int) -> int:
    """Largest r with ``p ≤ 1/r`` (strict bounds) or ``p < 1/r`` (otherwise), at most ``cap``."""
    if p == 0:
        return cap
    inv = 1 / p
    k = math.floor(inv)
    return min(k if strict or inv != k else k - 1, cap)


def pair_levels(bounds: PairBounds) -> np.ndarray:
    """``L[i, j]``: the largest level (capped at n) at which the pair qualifies (−1: never);
    symmetric, the diagonal ``n``."""
    n = bounds.n
    vals = bounds.value_floats()
    ok = bounds.reason == 0
    out = np.full((n, n), -1, dtype=np.int32)
    for start in range(0, n, ROW_CHUNK):
        sl = slice(start, min(n, start + ROW_CHUNK))
        eid, eid_t = bounds.eps_id[sl], bounds.eps_id[:, sl].T
        usable = ok[sl] & ok[:, sl].T
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / (vals[np.maximum(eid, 0)] * vals[np.maximum(eid_t, 0)])
            level = np.where(np.isinf(inv), n, np.floor(np.minimum(inv, n)))
            near = (
                usable
                & np.isfinite(inv)
                & (inv <= n + 1)
                & (np.abs(inv - np.rint(inv)) <= NEAR_INTEGER * np.maximum(inv, 1.0))
            )
        if near.any():
            i, j = np.nonzero(near)
            level[near] = exact_levels(bounds, i + start, j, exact_level, n)
        out[sl] = np.where(usable, level, -1)
    np.fill_diagonal(out, n)
    return out


# -- the clique search -----------------------------------------------------------------------


def _core(adj: np.ndarray, k: int, alive: np.ndarray | None = None) -> np.ndarray:
    """Vertices of the k-core of the graph ``adj`` (those left after peeling degrees < k)."""
    alive = np.ones(len(adj), dtype=bool) if alive is None else alive.copy()
    deg = adj[:, alive].sum(1)
    while True:
        drop = alive & (deg < k)
        if not drop.any():
            return np.flatnonzero(alive)
        alive &= ~drop
        deg -= adj[:, drop].sum(1)


def _greedy_clique(adj: np.ndarray, vertices: np.ndarray, starts: int = GREEDY_STARTS) -> list[int]:
    """The largest of several greedy cliques: from each of the ``starts`` vertices of highest
    degree, repeatedly take the open vertex with the most open neighbours."""
    sub = adj[np.ix_(vertices, vertices)]
    order = np.argsort(-sub.sum(1), kind="stable")
    best: list[int] = []
    for v in order[:starts]:
        chosen, open_ = [v], sub[v].copy()
        while open_.any():
            pick = np.flatnonzero(open_)
            u = pick[np.argmax(sub[np.ix_(pick, pick)].sum(1))] if len(pick) <= GREEDY_DYNAMIC else pick[0]
            chosen.append(u)
            open_ &= sub[u]
        if len(chosen) > len(best):
            best = chosen
    return [int(vertices[v]) for v in best]


def _edges(adj: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    sub = np.triu(adj[np.ix_(vertices, vertices)], 1)
    return np.argwhere(sub).astype(np.int32)


def _colour_count(adj: np.ndarray, vertices: np.ndarray) -> int:
    """Colours of a greedy colouring of the subgraph (an upper bound on its clique number)."""
    import igraph

    graph = igraph.Graph(n=len(vertices), edges=_edges(adj, vertices).tolist())
    return max(graph.vertex_coloring_greedy(), default=-1) + 1


def _exact_clique(adj: np.ndarray, vertices: np.ndarray, need: int, work: Work) -> list[int] | None:
    """A maximum clique of the subgraph if it has ``need`` vertices or more, ``[]`` if none
    has, None when the work budget (or the hang guard) ran out (:func:`.work.max_clique`)."""
    found = max_clique(bitsets(len(vertices), _edges(adj, vertices).tolist()), need, work)
    return None if found is None else [int(vertices[v]) for v in found]


def _decide(levels: np.ndarray, r: int, work: Work, small_only: bool = False) -> tuple[bool | None, list[int], str]:
    """Is there a clique of ``r + 1`` vertices at level r?  ``(answer, a clique found, how)``;
    the answer is None when the work budget ran out first."""
    adj = levels >= r
    np.fill_diagonal(adj, False)
    core = _core(adj, r)
    if len(core) < r + 1:
        return False, [], "core"
    clique = _greedy_clique(adj, core)
    if len(clique) >= r + 1:
        return True, clique, "greedy"
    if len(core) <= 4 * IN_PROCESS_CORE and _colour_count(adj, core) < r + 1:
        return False, clique, "colouring"
    if small_only and len(core) > IN_PROCESS_CORE:
        return None, clique, "budget"
    exact = _exact_clique(adj, core, r + 1, work)
    if exact is None:
        return None, clique, "guard" if work.guard_hit else "budget"
    best = exact if len(exact) > len(clique) else clique
    return len(exact) >= r + 1, best, "exact"


def _clique_level(levels: np.ndarray, clique: list[int]) -> int:
    """The largest level certified by a clique: min(its weakest pair, its size − 1)."""
    if len(clique) < 2:
        return 0
    sub = levels[np.ix_(clique, clique)]
    return int(min(sub[~np.eye(len(clique), dtype=bool)].min(), len(clique) - 1))


def whole_set_qualifies(bounds: PairBounds) -> bool:
    """Whether every pair of all ``n ≥ 2`` entries qualifies at level ``n − 1`` (module
    docstring, "Whole set")."""
    n = bounds.n
    if n < 2:
        return False
    off = ~np.eye(n, dtype=bool)
    if (bounds.reason[off] != 0).any():
        return False
    cut = Fraction(1, n - 1)
    large_value = np.array([v >= cut for v in bounds.values], dtype=bool)
    large = large_value[np.maximum(bounds.eps_id, 0)] & off
    i, j = np.nonzero(np.triu(large & large.T, 1))
    return not len(i) or bool((exact_levels(bounds, i, j, exact_level, n) >= n - 1).all())


def radon_bound(bounds: PairBounds, budget_s: float = DEFAULT_BUDGET_S, work: Work | None = None) -> RadonBound:
    """The best Radon certificate over the matching entries (module docstring), the whole set
    tried first.  ``work`` counts the exact search's nodes (default: a fresh :class:`.work.Work`
    with a ``budget_s`` hang guard); ``budget_s = 0`` searches exactly only cores of at most
    :data:`IN_PROCESS_CORE` vertices (greedy cliques beyond)."""
    start = time.monotonic()
    small_only = budget_s == 0
    work = Work(guard_s=budget_s if budget_s else DEFAULT_GUARD_S) if work is None else work
    n = bounds.n
    if whole_set_qualifies(bounds):
        members = list(range(n))
        return RadonBound(
            rank=n,
            members=members,
            level=n - 1,
            max_product=_max_product(bounds, members),
            exact_search=True,
            seconds=time.monotonic() - start,
            steps=[{"level": n - 1, "answer": True, "how": "whole set", "clique": n}],
            whole_set=True,
        )
    levels = pair_levels(bounds)
    best = [0] if n else []
    lo, hi, exact, steps = 0, n, True, []  # level lo is certified, level hi is not
    while hi - lo > 1:
        r = (lo + hi) // 2
        answer, clique, how = _decide(levels, r, work, small_only)
        steps.append({"level": r, "answer": answer, "how": how, "clique": len(clique)})
        found = _clique_level(levels, clique)
        if found > lo:
            best, lo = clique, found
        if answer is False:
            hi = r
        elif answer is None:
            hi, exact = r, False
    members = sorted(best)
    return RadonBound(
        rank=lo + 1,
        members=members,
        level=lo,
        max_product=_max_product(bounds, members),
        exact_search=exact,
        seconds=time.monotonic() - start,
        steps=steps,
        nodes=work.used,
        guard_hit=work.guard_hit,
    )


def _max_product(bounds: PairBounds, members: list[int]) -> Fraction | None:
    """The largest ``ε_ij·ε_ji`` over the members' pairs, exactly (None for fewer than two):
    float products by row chunks, then the exact maximum over the pairs within
    :data:`NEAR_INTEGER` of the float maximum (every pair near the float underflow)."""
    if len(members) < 2:
        return None
    idx = np.asarray(members)
    vals = bounds.value_floats()
    width = len(bounds.values)

    def chunks():
        for start in range(0, len(idx), ROW_CHUNK):
            rows = idx[start : start + ROW_CHUNK]
            eid = bounds.eps_id[np.ix_(rows, idx)].astype(np.int64)
            eid_t = bounds.eps_id[np.ix_(idx, rows)].T.astype(np.int64)
            upper = np.arange(len(idx))[None, :] > (start + np.arange(len(rows)))[:, None]
            yield eid, eid_t, upper, np.where(upper, vals[eid] * vals[eid_t], -1.0)

    best = max(prod.max(initial=-1.0) for *_, prod in chunks())
    floor = best * (1 - NEAR_INTEGER) if best >= 1e-290 else -0.5
    keys = sorted_unique(
        np.concatenate(
            [
                eid[upper & (prod >= floor)] * width + eid_t[upper & (prod >= floor)]
                for eid, eid_t, upper, prod in chunks()
            ]
        )
    )
    return max(bounds.values[k // width] * bounds.values[k % width] for k in keys.tolist())
