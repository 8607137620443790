"""The ``hedgehog`` map: ``φ(u) = softmax([u, −u])`` of a linear projection, in log space."""

from __future__ import annotations

import torch

from .base import TruncatedFeatureMap, register_feature_map


@register_feature_map
class Hedgehog(TruncatedFeatureMap):
    """``φ(u) = softmax([u, −u])`` over ``2⌈r/2⌉`` entries, first ``r`` kept (log space):
    Zhang et al., *The Hedgehog & the Porcupine*, 2024, https://arxiv.org/abs/2402.04347."""

    name = "hedgehog"
    order = 50
    color = "#e377c2"
    citation = "Zhang et al. 2024, arXiv:2402.04347"
    log_space = True  # not maskable: the softmax normalises over all 2⌈r/2⌉ entries

    @classmethod
    def projection_dim(cls, rank, m):
        return (rank + 1) // 2

    def phi(self, u):
        return torch.log_softmax(torch.cat([u, -u], dim=-1), dim=-1)[..., : self.rank]
