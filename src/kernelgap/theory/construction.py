"""The two one-hot constructions, checked on a family without torch (docs/theory.md,
"A construction of rank n at any length").

Both restrict the positive rank-2^m construction to a family, with ``v(z) = z``, readout
``p = <x, y>`` and no bias:

* **query one-hot** (rank n = distinct query tokens): ``α(x, z) = exp(−β<x, z>)`` for every
  key token z, the query itself included, with ``β = ln(2(N − 1)) + 1``;
* **candidate one-hot** (rank = distinct candidate tokens): ``α(x, c) = exp(−β<x, c>)`` on
  the candidates and 0 on the other tokens (the query's own token weighs only when it is a
  candidate), with ``β = ln(2(N − 2)) + 1``.

Their weight and value at a query x depend on a key only through its level ``s = <x, z>``
(``α = e^{−βs}``, ``U = s``).  On a product family the worst case over every tuple is
therefore the worst case over the *levels* the query's candidates have (the exact
Dinkelbach search of :mod:`kernelgap.task.worst_case` with one "candidate" per level), with the self term
at level ``|x|``.  Queries with the same levels, weight and self term share one problem.
When those levels would cost more than :data:`LEVEL_PAIRS_LIMIT` overlaps to find, every level
``0..|x|`` is taken instead: a superset of the tuples (every input of length N), so an upper
bound on the error, still below 1/2 (``levels = "all"``; ``"family"`` otherwise).  A sequence
family is evaluated on every sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..task.constructions import ONE_HOT, candidate_tokens, one_hot_beta, query_tokens
from ..task.family import AnyFamily, ProductFamily
from ..task.minip import EXACT_THRESHOLD
from ..task.worst_case import HeadTables, worst_case
from .certificate import certify
from .two_heads import NotTwoLevel, check_two_heads

#: Most query × candidate overlaps computed to find the levels each query sees (under a second
#: of float32 products and scatters, m ≤ 128); above it every level 0..|x| is used instead.
LEVEL_PAIRS_LIMIT = 1 << 25
#: Most sequences of a sequence family evaluated at once.
SEQUENCE_CHUNK = 1 << 15


@dataclass
class ConstructionCheck:
    """One construction on one family: its ``rank``, the largest error found, an upper bound
    on every sequence's error and which ``levels`` the check used ("family", "all"; "every
    sequence" for a list)."""

    construction: str
    rank: int
    max_error: float
    error_bound: float
    levels: str

    @property
    def exact(self) -> bool:
        return self.error_bound < EXACT_THRESHOLD

    @property
    def margin(self) -> float:
        return EXACT_THRESHOLD - self.error_bound

    def to_json(self) -> dict:
        return {
            "construction": self.construction,
            "rank": self.rank,
            "max_error": self.max_error,
            "error_bound": self.error_bound,
            "exact": self.exact,
            "margin": self.margin,
            "levels": self.levels,
        }


def check_construction(family: AnyFamily, construction: str) -> ConstructionCheck:
    """The worst error of ``construction`` on ``family`` (module docstring)."""
    if construction not in ONE_HOT:
        raise ValueError(f"unknown construction {construction!r}")
    keys = query_tokens(family) if construction == "query_one_hot" else candidate_tokens(family)
    rank = len(keys)
    if rank == 0:
        return ConstructionCheck(construction, 0, math.inf, math.inf, "none")
    beta = one_hot_beta(construction, family.length)
    if isinstance(family, ProductFamily):
        error, bound, levels = _product_check(family, construction, beta)
    else:
        error, levels = _sequence_check(family, construction, beta), "every sequence"
        bound = error
    return ConstructionCheck(construction, rank, error, bound, levels)


def constructed(family: AnyFamily) -> dict:
    """Both constructions checked, and ``constructed_rank``: the least rank of an exact one
    (None when neither checks exact), with the construction that has it."""
    checks = [check_construction(family, name) for name in ONE_HOT]
    exact = [c for c in checks if c.exact]
    best = min(exact, key=lambda c: c.rank) if exact else None
    return {
        "constructed_rank": best.rank if best else None,
        "construction": best.to_json() if best else None,
        "constructions": [c.to_json() for c in checks],
    }


def _product_check(family: ProductFamily, construction: str, beta: float) -> tuple[float, float, str]:
    """Largest error and bound over the level problems of a product family's queries."""
    queries, candidates = family.queries, family.candidates
    weight = _weights(family.tokens, queries)  # |x|, O(n·m)
    m = family.m
    if construction == "query_one_hot":
        self_in = np.ones(len(queries), dtype=bool)
    else:
        self_in = np.isin(queries, candidates)
    if len(queries) * len(candidates) <= LEVEL_PAIRS_LIMIT:
        present, used = _levels_seen(family.tokens, queries, candidates, m), "family"
        keys = np.concatenate([present, weight[:, None], self_in[:, None]], axis=1).astype(np.int64)
        groups = np.unique(keys, axis=0)
        present, weight, self_in = groups[:, : m + 1].astype(bool), groups[:, m + 1], groups[:, m + 2].astype(bool)
    else:  # every level 0..|x|: every input of length N (one problem per weight and self term)
        groups = np.unique(weight * 2 + self_in)
        weight, self_in, used = groups // 2, (groups % 2).astype(bool), "all"
        present = np.arange(m + 1)[None, :] <= weight[:, None]
    width = int(present.sum(axis=1).max())
    # each problem's levels, padded by repeating its least level (a repeated candidate changes nothing)
    order = np.argsort(~present, axis=1, kind="stable")[:, :width]
    count = present.sum(axis=1)
    levels = np.where(np.arange(width)[None, :] < count[:, None], order, order[:, :1])
    scores = (-beta * levels)[None, None].astype(np.float64)
    values = levels[None, None].astype(np.float64)
    self_scores = np.where(self_in, -beta * weight, -np.inf)[None].astype(np.float64)
    self_values = weight[None].astype(np.float64)
    found = worst_case(
        HeadTables(scores, values, self_scores, self_values, levels), family.length, family.query_position
    )
    return float(found.error.max()), float(found.bound.max()), used


def _weights(tokens: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``|z|`` of the tokens ``ids``, in chunks of :data:`SEQUENCE_CHUNK` rows (no ``n × m`` copy)."""
    out = np.empty(len(ids), dtype=np.int64)
    for lo in range(0, len(ids), SEQUENCE_CHUNK):
        out[lo : lo + SEQUENCE_CHUNK] = tokens[ids[lo : lo + SEQUENCE_CHUNK]].sum(axis=1, dtype=np.int64)
    return out


def _levels_seen(tokens: np.ndarray, queries: np.ndarray, candidates: np.ndarray, m: int) -> np.ndarray:
    """``present [Q, m + 1]``: which overlaps ``<x, c>`` each query has with some candidate."""
    q_bits = tokens[queries].astype(np.float32)
    c_bits = tokens[candidates].astype(np.float32).T
    present = np.zeros((len(queries), m + 1), dtype=bool)
    chunk = max(1, (1 << 22) // max(1, len(candidates)))
    for lo in range(0, len(queries), chunk):
        levels = np.rint(q_bits[lo : lo + chunk] @ c_bits).astype(np.int64)  # exact: integers ≤ m
        present[np.arange(lo, lo + len(levels))[:, None], levels] = True
    return present


def _sequence_check(family, construction: str, beta: float) -> float:
    """The largest error of the construction on every scored position of every sequence."""
    bits = family.tokens.astype(np.int64)
    keyed = np.zeros(len(family.tokens), dtype=bool)
    if construction == "query_one_hot":
        keyed[:] = True
    else:
        keyed[candidate_tokens(family)] = True
    worst = 0.0
    for lo in range(0, len(family), SEQUENCE_CHUNK):
        index = family.index[lo : lo + SEQUENCE_CHUNK]  # [S, N]
        seq = bits[index]  # [S, N, m]
        for pos in family.scored_positions:
            s = (seq * seq[:, pos : pos + 1]).sum(-1)  # [S, N]: <x, z_j>
            target = s.min(axis=1)
            g = s - target[:, None]
            w = np.exp(-beta * g) * keyed[index]  # relative to the least level
            pred = (w * s).sum(1) / w.sum(1)
            worst = max(worst, float(np.abs(pred - target).max()))
    return worst


def constructed_rank(family: AnyFamily) -> int | None:
    """The least rank of an exact one-hot construction on ``family`` (:func:`constructed`)."""
    return constructed(family)["constructed_rank"]


def certify_and_construct(family: AnyFamily, delta, budget_s: float) -> dict:
    """The certificate's JSON (:func:`~.certificate.certify`) with the least rank of an exact
    one-hot construction beside it, and whether the two agree (``proved_equals_constructed``)."""
    payload = certify(family, delta, budget_s).to_json()
    built = constructed(family)
    payload["constructed_rank"] = built["constructed_rank"]
    payload["construction"] = built["construction"]
    payload["proved_equals_constructed"] = payload["certified_rank"] == built["constructed_rank"]
    payload["two_heads"] = two_heads(family)
    return payload


def two_heads(family: AnyFamily) -> dict:
    """The two-head construction checked on ``family`` (:mod:`.two_heads`), or why it does
    not apply (``{"applies": False, "reason": ...}``)."""
    try:
        return {"applies": True, **check_two_heads(family).to_json()}
    except NotTwoLevel as exc:
        return {"applies": False, "reason": str(exc)}
