"""The ``dpfp`` map: deterministic parameter-free projection of a linear projection."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import TruncatedFeatureMap, register_feature_map


@register_feature_map
class Dpfp(TruncatedFeatureMap):
    """DPFP: Schlag et al., *Linear Transformers Are Secretly Fast Weight Programmers*, 2021,
    https://arxiv.org/abs/2102.11174.

    With ``s = [relu(u), relu(−u)]`` (``2d`` entries), ``φ(u)_{(k, i)} = s_i · s_{i−k}`` for
    ``k = 1 … ν`` (indices mod ``2d``, ``ν = 4`` as fla's ``DPFPFeatureMap``): ``2νd``
    nonnegative products of pairs, no parameter of its own.  A request for rank r projects to
    ``d = ⌈r/2ν⌉`` and keeps the first r features (all of them when ``2ν`` divides r).
    """

    name = "dpfp"
    order = 55
    color = "#393b79"
    citation = "Schlag et al. 2021, arXiv:2102.11174"
    #: ``ν``: how many rolled copies of ``s`` multiply it.
    nu = 4

    @classmethod
    def projection_dim(cls, rank, m):
        return -(-rank // (2 * cls.nu))

    def phi(self, u):
        s = torch.cat([F.relu(u), F.relu(-u)], dim=-1)
        rolled = torch.cat([s.roll(shifts=k, dims=-1) for k in range(1, self.nu + 1)], dim=-1)
        return (torch.cat([s] * self.nu, dim=-1) * rolled)[..., : self.rank]
