"""What the exact constructions take from a family, without torch (docs/theory.md,
"Constructions" and "A construction of rank n at any length").

The models are built in :mod:`kernelgap.models.constructions` and checked on a family in
:mod:`kernelgap.theory.construction`; both read their temperature and the tokens that get a
feature from here.
"""

from __future__ import annotations

import math

import numpy as np

from .family import AnyFamily, ProductFamily


def softmax_beta(length: int) -> float:
    """``β = ln(2(N−1)) + 1``, dense softmax's temperature at length N (its error is at most
    ``(N − 1)e^{−β} = 1/(2e)``); lengths below 2 use the N = 2 value."""
    return math.log(2 * (max(length, 2) - 1)) + 1


#: The two one-hot restrictions of the positive construction to a family, in the order a tie
#: in rank is broken.
ONE_HOT = ("query_one_hot", "candidate_one_hot")


def one_hot_beta(construction: str, length: int) -> float:
    """β of a one-hot construction at length N: ``softmax_beta(N)`` for the query one-hot (its
    weights are softmax's on all N positions), ``softmax_beta(N − 1)`` for the candidate
    one-hot (at most N − 1 weighted terms above the minimum: error ``≤ (N − 1)/(2e(N − 2)) ≤ 1/e``)."""
    return softmax_beta(length) if construction == "query_one_hot" else softmax_beta(length - 1)


def query_tokens(family: AnyFamily) -> np.ndarray:
    """The distinct query tokens (ids): a product family's queries, or the tokens at the
    scored positions of a sequence family."""
    if isinstance(family, ProductFamily):
        return family.queries
    return np.unique(family.index[:, family.scored_positions])


def candidate_tokens(family: AnyFamily) -> np.ndarray:
    """The distinct candidate tokens (ids): a product family's candidates, or the tokens at a
    sequence family's other positions (every token, when every position is scored)."""
    if isinstance(family, ProductFamily):
        return family.candidates
    if family.query_position is None:
        return np.unique(family.index)
    others = [p for p in range(family.length) if p != family.query_position - 1]
    return np.unique(family.index[:, others]) if others else np.zeros(0, dtype=np.int64)
