"""Pruned from a wider table: a ``table`` trained at a larger rank first, cut to its own rank,
trained on (``train.prune_from``; docs/experiments.md, "Pruned from a wider table").

At a rank the certificate pins, a table must give (nearly) every query a feature of its own.
From a random start two queries often share one feature and Adam does not move a query off
it, so the run stalls; a wider table has features to spare.  With ``prune_from = f``:

1. **Wide.**  The same run at rank ``⌈f·r⌉`` trains from the member seeds.
2. **Cut.**  The share of feature ``k`` in query ``x``'s attention, averaged over keys ``z``,

       s(x, k) = mean_z  φ_Q(x)_k φ_K(z)_k / Σ_j φ_Q(x)_j φ_K(z)_j;

   the cut keeps each query's own feature ``argmax_k s(x, k)`` (the most used first), then
   the most used others by ``max_x s(x, k)``, up to r; their columns and the whole readout
   are copied into the rank-r model.
3. **Training.**  The rank-r model trains on its own schedule and is judged as any run is.
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
    """Each run at its wide rank, without ``prune_from`` (step 1)."""
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
    distinct own features."""
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
    """Steps 1 and 2 for a stack ``narrow`` of ``runs``: the wide stack trained by ``train(runs,
    seeds)``, then cut into ``narrow``; one ``pruned`` record entry per member."""
    wide, taught = train(wide_runs(runs), seeds)
    start = time.perf_counter()
    owned = cut(narrow, wide, [run.model.rank for run in runs], family)
    cut_s = time.perf_counter() - start
    return [
        {
            "from_rank": wide_rank(run.model.rank, run.train.prune_from),
            "wide": t.summary(),
            "own_features": own,
            "wall_time_s": t.wall_time_s + cut_s,
        }
        for run, t, own in zip(runs, taught, owned)
    ]
