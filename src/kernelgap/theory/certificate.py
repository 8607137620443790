"""The rank lower bound as an exact certificate for a concrete family (docs/theory.md).

For a family of sequences of length N ≥ 3 (docs/theory.md, "Context length N"),
a query position and a tolerance
``0 < δ ≤ 1/2`` the certificate is a rank ``r₀`` such that every single-head
normalized nonnegative kernel model with max error ``≤ δ`` (``< 1/2`` at
δ = 1/2) on the query position needs ``r ≥ r₀`` features.  Two bounds are
computed from the same pair bounds ε (:mod:`.pair_bounds`) and the larger is
certified:

* **trace** (Schur): ``|tr B|² ≤ rank B · ‖B‖_F²`` gives
  ``r ≥ n²/(n + Σ_{i≠j} ε_ij²)``; holds for any real B;
* **Radon** (:mod:`.radon`): uses that the features are nonnegative; a clique
  of ``r + 1`` queries with every ``ε_ij ε_ji ≤ 1/r`` certifies ``r + 1``.

**Unbounded pairs (trace bound).**  An entry with no chain, ``R > 1``, or in an
unanchored row can be arbitrarily large, so capping it would be unsound.  The
trace bound works on a principal submatrix instead: queries are dropped greedily
(most unbounded pairs first) until every remaining pair is bounded — any
principal submatrix of B has rank ≤ rank B — then while that raises the bound.
Every dropped query and unbounded pair is reported.  The Radon clique simply
never uses an unbounded pair.

**Strictness.**  At δ = 1/2 every non-empty chain is a strict bound, so the
trace bound gives ``r₀ = ⌊bound⌋ + 1`` (if any such ε is used), else ``⌈bound⌉``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import FamilyError
from ..task.family import AnyFamily, Family, ProductFamily, bits_to_str, count_json, count_text, sequence_count
from .chains import chain_pair_bounds, complete_quads
from .levels import level_pair_bounds
from .pair_bounds import REASONS, PairBounds, frac_str, parse_delta
from .radon import DEFAULT_BUDGET_S, RadonBound, radon_bound

#: Most distinct tokens of a sequence family (token-id keys must fit in int64).
MAX_TOKENS = 1 << 21


# -- the trace bound --------------------------------------------------------------------


def trace_bound(n: int, sum_eps2: Fraction) -> Fraction:
    """``n² / (n + Σ ε²)`` (Schur: ``|tr B|² ≤ rank B · ‖B‖_F²``)."""
    return Fraction(n * n) / (n + sum_eps2) if n else Fraction(0)


def sum_eps2(bounds: PairBounds, kept: np.ndarray) -> Fraction:
    """Exact ``Σ_{i≠j} ε_ij²`` over the kept entries (all pairs bounded)."""
    sub = bounds.eps_id[np.ix_(kept, kept)]
    off = ~np.eye(len(sub), dtype=bool)
    counts = np.bincount(sub[off], minlength=len(bounds.values))
    return sum((int(c) * bounds.values[v] ** 2 for v, c in enumerate(counts) if c), Fraction(0))


def certified_rank(bound: Fraction, strict: bool) -> int:
    """``⌊bound⌋ + 1`` for a strict bound, else ``⌈bound⌉``."""
    return math.floor(bound) + 1 if strict else math.ceil(bound)


def select_queries(bounds: PairBounds) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """Kept entry indices and dropped ``(entry, why)`` (module docstring, 'Unbounded pairs')."""
    n = bounds.n
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
        if trace_bound(nk - 1, sum_eps2(bounds, np.flatnonzero(trial))) <= trace_bound(nk, sum_eps2(bounds, alive)):
            break
        drop(k, "dropping it raises the bound")
    return np.flatnonzero(kept), dropped


@dataclass
class TraceBound:
    rank: int
    bound: Fraction
    sum_eps2: Fraction
    strict: bool
    kept: np.ndarray
    dropped: list[tuple[int, str]]


def trace_certificate(bounds: PairBounds) -> TraceBound:
    kept, dropped = select_queries(bounds)
    total = sum_eps2(bounds, kept)
    bound = trace_bound(len(kept), total)
    strict = bool(bounds.strict[np.ix_(kept, kept)].any())
    return TraceBound(certified_rank(bound, strict), bound, total, strict, kept, dropped)


# -- the certificate ------------------------------------------------------------------------


@dataclass
class Certificate:
    """A certified rank ``r₀`` for a family, with both bounds and their intermediate numbers."""

    family: str
    m: int
    sequences: int  # a Python int of any size (a product family's Q·C^(N−1))
    query_position: int  # 1-based
    delta: Fraction
    queries_total: int
    comparisons: int
    trace: TraceBound
    radon: RadonBound
    weakest_pair: dict | None
    unbounded_pairs: list[dict]
    dropped_queries: list[dict]
    radon_queries: list[str]
    seconds: float = 0.0
    length: int = 3

    @property
    def certified_rank(self) -> int:
        return max(self.trace.rank, self.radon.rank)

    @property
    def method(self) -> str:
        """The bound that certifies the rank (Radon on a tie: it alone uses nonnegativity)."""
        return "radon" if self.radon.rank >= self.trace.rank else "trace"

    # the trace bound's numbers, under the names certificates have always used
    queries = property(lambda self: len(self.trace.kept))
    kept = property(lambda self: self.trace.kept.tolist())
    bound = property(lambda self: self.trace.bound)
    sum_eps2 = property(lambda self: self.trace.sum_eps2)
    strict = property(lambda self: self.trace.strict)

    def to_json(self, limit: int = 50) -> dict:
        """JSON-ready dict; rationals as ``"p/q"``; long lists of problems cut to ``limit``."""
        t, r = self.trace, self.radon
        return {
            "family": self.family,
            "m": self.m,
            "sequences": count_json(self.sequences),
            "length": self.length,
            "query_position": self.query_position,
            "delta": frac_str(self.delta),
            "queries_total": self.queries_total,
            "queries": self.queries,
            "sum_eps2": frac_str(t.sum_eps2),
            "bound": frac_str(t.bound),
            "bound_float": float(t.bound),
            "strict": t.strict,
            "certified_rank": self.certified_rank,
            "method": self.method,
            "bounds": {
                "trace": {
                    "rank": t.rank,
                    "bound": frac_str(t.bound),
                    "sum_eps2": frac_str(t.sum_eps2),
                    "queries": len(t.kept),
                },
                "radon": {
                    "rank": r.rank,
                    "level": r.level,
                    "queries": self.radon_queries,
                    "max_product": frac_str(r.max_product) if r.max_product is not None else None,
                    "exact_search": r.exact_search,
                    "whole_set": r.whole_set,
                    "seconds": round(r.seconds, 4),
                },
            },
            "comparisons": self.comparisons,
            "weakest_pair": self.weakest_pair,
            "unbounded_count": len(self.unbounded_pairs),
            "unbounded_pairs": self.unbounded_pairs[:limit],
            "dropped_count": len(self.dropped_queries),
            "dropped_queries": self.dropped_queries[:limit],
            "seconds": round(self.seconds, 4),
        }


def check_family(family: AnyFamily) -> None:
    """The certificate's preconditions; raises a one-line :class:`FamilyError`.

    The family is validated again first (:meth:`Family.validate`): it validated itself
    when it was built and whenever a field was assigned, and this also catches a list
    or array changed in place since."""
    family.validate()
    if family.length < 3:
        raise FamilyError(
            f"the certificate needs length-3 or longer sequences, family {family.name!r} has length {family.length}"
        )
    if not family.matching:
        raise FamilyError(f"family {family.name!r} has no matching (query, good candidate) pairs")
    if isinstance(family, Family) and len(family.tokens) >= MAX_TOKENS:
        raise FamilyError(
            f"family {family.name!r} has {len(family.tokens)} distinct tokens; at most 2^21 are supported"
        )


def _nothing_to_compare(family: AnyFamily, positions: list[int]) -> FamilyError:
    shown = positions if len(positions) <= 4 else positions[:3] + ["…"]
    if family.length == 3:
        need = "all four sequences (x; c, c), (x; c', c'), (x; c, c') and (x; c', c) (are the mixed orders missing?)"
    else:
        need = (
            f"the all-c and all-c' sequences and, for each of the {family.length - 1} candidate slots, "
            f"c in that slot and c' in all the others"
        )
    return FamilyError(
        f"family {family.name!r} has nothing to compare at query position "
        f"{' or '.join(map(str, shown))}: the certificate needs, for a query x and two "
        f"candidates c ≠ c', {need}"
    )


def certify(
    family: AnyFamily, delta: Fraction | str = Fraction(1, 2), budget_s: float = DEFAULT_BUDGET_S
) -> Certificate:
    """The certificate at the family's query position; with every position scored
    (``query_position`` None) each position gives a valid certificate: the best is kept.
    ``budget_s`` bounds the exact clique search of the Radon bound."""
    start = time.perf_counter()
    delta = parse_delta(delta)
    check_family(family)
    if isinstance(family, ProductFamily):
        if len(family.candidates) < 2:
            raise _nothing_to_compare(family, [family.query_position])
        best = _certificate(family, family.query_position, level_pair_bounds(family, delta), delta, budget_s)
    else:
        positions = [family.query_position] if family.query_position else list(range(1, family.length + 1))
        if not any(len(complete_quads(family, p - 1)[0]) for p in positions):
            raise _nothing_to_compare(family, positions)
        best = max(
            (certify_at(family, p - 1, delta, budget_s) for p in positions), key=lambda c: (c.certified_rank, c.bound)
        )
    best.seconds = time.perf_counter() - start
    return best


def certify_at(family: Family, qpos: int, delta: Fraction, budget_s: float = DEFAULT_BUDGET_S) -> Certificate:
    """The certificate of a sequence family with the query at 0-based position ``qpos``."""
    return _certificate(family, qpos + 1, chain_pair_bounds(family, qpos, delta), delta, budget_s)


def _certificate(family: AnyFamily, position: int, bounds: PairBounds, delta: Fraction, budget_s: float) -> Certificate:
    trace = trace_certificate(bounds)
    radon = radon_bound(bounds, budget_s)
    word = _words(family)
    match = family.matching
    bad = np.argwhere(bounds.reason != 0)
    return Certificate(
        family=family.name,
        m=family.m,
        sequences=sequence_count(family),
        query_position=position,
        delta=delta,
        queries_total=len(match),
        comparisons=bounds.comparisons,
        trace=trace,
        radon=radon,
        weakest_pair=_weakest(bounds, trace.kept, family, word),
        unbounded_pairs=[
            {"query": word(match[i][0]), "bad": word(match[j][1]), "reason": REASONS[int(bounds.reason[i, j])]}
            for i, j in bad[:1000].tolist()
        ],
        dropped_queries=[{"query": word(match[k][0]), "why": why} for k, why in trace.dropped],
        radon_queries=[word(match[k][0]) for k in radon.members],
        length=family.length,
    )


def _words(family: AnyFamily):
    cache: dict[int, str] = {}

    def word(token: int) -> str:
        if token not in cache:
            cache[token] = bits_to_str(family.tokens[token])
        return cache[token]

    return word


def _weakest(bounds: PairBounds, kept: np.ndarray, family: AnyFamily, word) -> dict | None:
    """The kept pair with the largest ε (the one the trace bound is least sure of)."""
    if len(kept) < 2:
        return None
    eps2 = bounds.eps_squared()[np.ix_(kept, kept)]
    i, j = (kept[k] for k in np.unravel_index(np.argmax(eps2), eps2.shape))
    (q, g), (_, b) = family.matching[i], family.matching[j]
    tok = family.tokens.astype(np.int64)
    return {
        "query": word(q),
        "good": word(g),
        "bad": word(b),
        "s_good": int(tok[q] @ tok[g]),
        "s_bad": int(tok[q] @ tok[b]),
        "eps": frac_str(bounds.values[bounds.eps_id[i, j]]),
    }


def describe_certificate(payload: dict) -> list[str]:
    """Human lines for :meth:`Certificate.to_json`: both bounds, which one wins and why."""
    trace, radon = payload["bounds"]["trace"], payload["bounds"]["radon"]
    rel = ">" if payload["strict"] else "≥"
    count = count_text(payload["sequences"])
    lines = [
        f"family {payload['family']}: {count} sequences of length {payload.get('length', 3)}, m = {payload['m']}, "
        f"query at position {payload['query_position']}, δ = {payload['delta']}, "
        f"{payload['comparisons']:,} comparisons",
        f"trace bound: {trace['queries']} of {payload['queries_total']} queries, Σε² = {trace['sum_eps2']}, "
        f"n²/(n + Σε²) = {trace['bound']} (≈ {payload['bound_float']:.4f}), so r {rel} that: r ≥ {trace['rank']}",
    ]
    if radon["max_product"] is not None:
        search = (
            "every pair of all the queries qualifies: no clique search"
            if radon.get("whole_set")
            else "exact search"
            if radon["exact_search"]
            else "budget ran out: greedy, may be improvable"
        )
        level = radon["level"]
        lines.append(
            f"Radon bound: {len(radon['queries'])} queries whose every pair has ε_ij·ε_ji ≤ "
            f"{radon['max_product']} (≤ 1/{level}), so r ≥ {radon['rank']} ({search})"
        )
    else:
        lines.append("Radon bound: no pair of queries qualifies, r ≥ 1")
    why = (
        "it uses that the features are nonnegative"
        if payload["method"] == "radon"
        else "ε is uneven enough that the sum of squares wins"
    )
    lines.append(
        f"certified: every exact nonnegative kernel model needs r ≥ {payload['certified_rank']} "
        f"({payload['method']} bound: {why})"
    )
    if payload["weakest_pair"]:
        w = payload["weakest_pair"]
        lines.append(f"weakest pair: ε = {w['eps']} (s_good = {w['s_good']}, s_bad = {w['s_bad']})")
    if payload["unbounded_count"]:
        lines.append(f"{payload['unbounded_count']} pairs could not be bounded, e.g.:")
        lines += [f"  query {p['query']} vs bad {p['bad']}: {p['reason']}" for p in payload["unbounded_pairs"][:5]]
    if payload["dropped_count"]:
        lines.append(f"{payload['dropped_count']} queries dropped to keep the trace bound sound")
    return lines
