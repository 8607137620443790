"""Training on a large product family a model the two-candidate form does not cover: its
two-candidate sequences plus :data:`SAMPLED_TUPLES` random tuples, the record adding the exact
worst case over the whole family where it applies (one head, a nonnegative kernel).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import FamilyError, KernelgapError
from ..task.family import MAX_EXPANDED, Family, ProductFamily
from .stack import Scored, metrics_of

SAMPLED_TUPLES = 1 << 16
SAMPLE_SEED = 0


def sampled_family(family: ProductFamily, tuples: int = SAMPLED_TUPLES, seed: int = SAMPLE_SEED) -> Family:
    """The two-candidate sequences of ``family`` and ``tuples`` random ones, as a sequence family."""
    q, c, n = len(family.queries), len(family.candidates), family.length
    pairs = q * c * c  # (x; c, c′, …, c′) for every query x and candidates c, c′
    if pairs + tuples > MAX_EXPANDED:
        raise FamilyError(
            f"product family {family.name!r}: a model the two-candidate form does not cover trains on the "
            f"{pairs:,} two-candidate sequences and {tuples:,} sampled ones; at most {MAX_EXPANDED:,} are formed"
        )
    others = [p for p in range(n) if p != family.query_position - 1]
    grid = np.meshgrid(np.arange(q), np.arange(c), np.arange(c), indexing="ij")
    qi, ci, di = (g.ravel() for g in grid)
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, c, size=(tuples, n - 1))
    index = np.empty((pairs + tuples, n), dtype=np.int64)
    index[:pairs, family.query_position - 1] = family.queries[qi]
    index[:pairs, others[0]] = family.candidates[ci]
    index[:pairs, others[1:]] = family.candidates[di][:, None]
    index[pairs:, family.query_position - 1] = family.queries[rng.integers(0, q, size=tuples)]
    index[pairs:, others] = family.candidates[drawn]
    return Family(family.tokens, index, family.query_position, [], family.name, dict(family.meta))


def sampled_evaluated(tuples: int = SAMPLED_TUPLES) -> str:
    """What a record's ``train.evaluated`` says for a model trained on :func:`sampled_family`."""
    return f"two-candidate sequences and {tuples:,} sampled tuples (not the whole family)"


def whole_family_check(model, family: ProductFamily) -> list[dict] | None:
    """Per member, the exact worst case over the whole family, or None where it does not apply."""
    from ..models.worst_case import family_worst_case

    try:
        found = family_worst_case(model, family, device=next(model.parameters()).device)
    except KernelgapError:
        return None
    return [found.to_json(e) for e in range(model.members)]


@dataclass
class SampledScored(Scored):
    """:func:`sampled_family`'s sequences; each record adds ``whole_family``."""

    product: ProductFamily | None = None
    tuples: int = SAMPLED_TUPLES
    checked: tuple | None = field(default=None, repr=False)  # (parameter versions, per-member checks)

    def metrics(self, err: torch.Tensor, model=None, member: int = 0) -> dict:
        out = {**metrics_of(err), "evaluated": sampled_evaluated(self.tuples)}
        if model is not None and self.product is not None:
            out["whole_family"] = self.check(model)[member]
        return out

    def check(self, model) -> list:
        """:func:`whole_family_check` of the present parameters (once per update)."""
        versions = tuple(p._version for p in model.parameters())
        if self.checked is None or self.checked[0] != versions:
            found = whole_family_check(model, self.product)
            self.checked = (versions, found if found is not None else [None] * model.members)
        return self.checked[1]
