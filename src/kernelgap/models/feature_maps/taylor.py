"""The ``taylor`` map: Based's second-order Taylor features of a linear projection."""

from __future__ import annotations

import math

import torch

from .base import ProjectedFeatureMap, register_feature_map


@register_feature_map
class Taylor(ProjectedFeatureMap):
    """Based's second-order Taylor map with ``u = Wx``: Arora et al., *Simple linear
    attention language models balance the recall-throughput tradeoff*, 2024,
    https://arxiv.org/abs/2402.18668.

    ``φ(u) = [1, u, u_i²/√2 (i), u_i·u_j (i < j)]``: the symmetric part of ``u⊗u`` once,
    so ``φ(u)·φ(w) = 1 + <u,w> + <u,w>²/2 > 0`` with ``1 + d + d(d + 1)/2`` features (the
    full ``u⊗u`` would count ``d²`` for a kernel of no higher rank).  Features are signed,
    the kernel positive.  A request for rank r uses the largest d with
    ``1 + d + d(d + 1)/2 ≤ r``.
    """

    name = "taylor"
    order = 60
    maskable = False
    projection_is_feature_axis = False
    color = "#7f7f7f"
    citation = "Arora et al. 2024, arXiv:2402.18668"

    @staticmethod
    def size(d: int) -> int:
        return 1 + d + d * (d + 1) // 2

    @classmethod
    def projection_dim(cls, rank, m):
        d = 0
        while cls.size(d + 1) <= rank:
            d += 1
        return d

    @classmethod
    def output_size(cls, rank):
        return cls.size(cls.projection_dim(rank, 0))

    def phi(self, u):
        d = u.shape[-1]
        i, j = torch.triu_indices(d, d, device=u.device)
        scale = torch.ones(len(i), dtype=u.dtype, device=u.device).masked_fill(i == j, 1 / math.sqrt(2))
        ones = u.new_ones(*u.shape[:-1], 1)
        return torch.cat([ones, u, u[..., i] * u[..., j] * scale], dim=-1)
