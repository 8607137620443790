"""The trace bound of the certificate (docs/theory.md, "The lower bound as a certificate").

Schur's ``|tr B|² ≤ rank B · ‖B‖_F²`` gives ``r ≥ n²/(n + Σ_{i≠j} ε_ij²)`` from the pair bounds ε
(:mod:`.pair_bounds`); it holds for any real B.  An entry with no chain, ``R > 1``, or in an
unanchored row can be arbitrarily large, so capping it would be unsound: the bound works on a
principal submatrix instead (any principal submatrix of B has rank ≤ rank B), dropping queries
greedily (most unbounded pairs first) until every remaining pair is bounded, then while that
raises the bound (:func:`select_queries`).  At δ = 1/2 every non-empty chain is a strict bound,
so the rank is ``⌊bound⌋ + 1`` where any such ε is used, else ``⌈bound⌉``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .pair_bounds import PairBounds


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
    """Kept entry indices and dropped ``(entry, why)`` (module docstring)."""
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
    """The trace bound on the kept entries; ``skipped``: why it was not computed (then rank 0)."""

    rank: int
    bound: Fraction
    sum_eps2: Fraction
    strict: bool
    kept: np.ndarray
    dropped: list[tuple[int, str]]
    skipped: str | None = None


def skipped_trace(why: str) -> TraceBound:
    return TraceBound(0, Fraction(0), Fraction(0), False, np.zeros(0, dtype=np.int64), [], why)


def trace_certificate(bounds: PairBounds) -> TraceBound:
    kept, dropped = select_queries(bounds)
    total = sum_eps2(bounds, kept)
    bound = trace_bound(len(kept), total)
    strict = bool(bounds.strict[np.ix_(kept, kept)].any())
    return TraceBound(certified_rank(bound, strict), bound, total, strict, kept, dropped)
