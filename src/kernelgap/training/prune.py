"""Pruned from a wider table: a ``table`` trained at a larger rank first, cut to its own rank,
trained on (``train.prune_from``; docs/experiments.md, "Pruned from a wider table").

At a rank the certificate pins, a table must give (nearly) every query a feature of its own,
as the query one-hot construction does.  From a random start two queries often come to share
one feature and leave another query without one; Adam does not move a query off a shared
feature (a feature's gradient in a row is its share of that row), so the run stalls above the
exact threshold.  A wider table has features to spare.  A run with ``prune_from = f`` trains
in three steps:

1. **Wide.**  The same run at rank ``R = ⌈f·r⌉`` trains on its schedule from the member seeds
   (:func:`wide_runs`).
2. **Cut.**  For each query token ``x`` of the family and feature ``k``, the share of ``k`` in
   the row, averaged over the keys ``z``,

       s(x, k) = mean_z  φ_Q(x)_k φ_K(z)_k / Σ_j φ_Q(x)_j φ_K(z)_j,

   says how much of x's attention runs through k.  The cut keeps each query's own feature
   (``argmax_k s(x, k)``) — the ones most used first where there are more than r of them —
   then the most used others, ``max_x s(x, k)``, up to r (:func:`kept_features`); their
   columns of ``θ_Q`` and ``θ_K`` and the whole readout are copied into the rank-r model.
3. **Training.**  The rank-r model then trains on its own schedule and is judged as any run is.

Only the weights of the rank-r model are kept; the record's ``pruned`` keeps the wide run's
outcome and how many distinct own features the cut found.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from ..task import Family

#: Most ``(query, key, feature)`` shares computed at once by :func:`kept_features` (memory).
SHARE_CHUNK = 1 << 24


def wide_rank(rank: int, factor: float) -> int:
    """``⌈factor·rank⌉``, at least ``rank + 1`` (a cut that drops nothing prunes nothing)."""
    return max(rank + 1, math.ceil(factor * rank - 1e-9))


def wide_runs(runs: list) -> list:
    """Each run at its wide rank (:func:`wide_rank`), without ``prune_from`` (step 1)."""
    out = []
    for run in runs:
        model = run.model.model_copy(update={"rank": wide_rank(run.model.rank, run.train.prune_from)})
        train = run.train.model_copy(update={"prune_from": 1.0})
        out.append(run.model_copy(update={"model": model, "train": train}))
    return out


def query_tokens(family) -> np.ndarray:
    """The token ids at a scored (query) position of some sequence of the family."""
    if isinstance(family, Family):
        return np.unique(family.index[:, family.scored_positions])
    return np.asarray(family.queries)


def feature_shares(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``s [Q, R]`` (module docstring, step 2) from log-features ``q [Q, R]`` and ``k [K, R]``."""
    rows = max(1, SHARE_CHUNK // max(1, k.shape[0] * k.shape[1]))
    return torch.cat(
        [torch.softmax(q[i : i + rows, None, :] + k[None], dim=-1).mean(1) for i in range(0, len(q), rows)]
    )


def kept_features(share: torch.Tensor, rank: int) -> tuple[torch.Tensor, int]:
    """The ``rank`` columns the cut keeps (ascending) from ``share [Q, R]``, and the number of
    distinct own features (module docstring, step 2)."""
    usage = share.max(0).values
    own = torch.unique(share.argmax(1))
    own = own[torch.argsort(usage[own], descending=True, stable=True)]
    others = torch.ones_like(usage, dtype=torch.bool)
    others[own] = False
    rest = torch.nonzero(others).flatten()
    rest = rest[torch.argsort(usage[rest], descending=True, stable=True)]
    return torch.sort(torch.cat([own, rest])[:rank]).values, len(own)


@torch.no_grad()
def cut(narrow, wide, ranks: list[int], family) -> list[int]:
    """Copy the kept columns (step 2) of every member and head of ``wide`` into ``narrow``, and
    its readout; the number of distinct own features per member (its heads' least)."""
    scorer, source = narrow.scorer, wide.scorer
    vocab = source.vocabulary
    ids = torch.arange(len(vocab), device=vocab.device)
    q = source.query_features(vocab, ids)  # [E, H, 1, V, R]
    rows = source.token_ids(torch.as_tensor(family.tokens[query_tokens(family)])).to(q.device)
    k = source.key_features(vocab, ids)  # [E, H, P, V, R]
    heads, positions = scorer.heads, scorer.key_positions
    owned = []
    for e, rank in enumerate(ranks):
        least = None
        for h in range(heads):
            keys = k[e, h].reshape(-1, k.shape[-1])
            keep, own = kept_features(feature_shares(q[e, h, 0, rows], keys), rank)
            least = own if least is None else min(least, own)
            slot = e * heads + h
            scorer.q_table.theta[slot, :, :rank] = source.q_table.theta[slot][:, keep]
            for p in range(positions):
                scorer.k_table.theta[slot * positions + p, :, :rank] = source.k_table.theta[slot * positions + p][
                    :, keep
                ]
        owned.append(least)
    narrow.readout.load_state_dict(wide.readout.state_dict())
    return owned


def prune(narrow, runs: list, seeds: list[int], family, train) -> list[dict]:
    """Steps 1 and 2 of the module docstring for a stack ``narrow`` of ``runs`` (one stack key)
    started from member seeds ``seeds``: the wide stack trained by ``train(runs, seeds)`` (which
    gives the trained stack and one result per run), then cut into ``narrow``.  One ``pruned``
    record entry per member."""
    wide, taught = train(wide_runs(runs), seeds)
    start = time.perf_counter()
    owned = cut(narrow, wide, [run.model.rank for run in runs], family)
    cut_s = time.perf_counter() - start
    return [
        {
            "from_rank": wide_rank(run.model.rank, run.train.prune_from),
            "wide": {"status": t.status, "steps": t.steps, "max_error": t.train.get("max_error")},
            "own_features": own,
            "wall_time_s": t.wall_time_s + cut_s,
        }
        for run, t, own in zip(runs, taught, owned)
    ]
