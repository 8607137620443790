"""The ``relu`` map: ``φ(u) = relu(u)`` of a linear projection."""

from __future__ import annotations

import torch.nn.functional as F

from .base import ProjectedFeatureMap, register_feature_map


@register_feature_map
class Relu(ProjectedFeatureMap):
    """``φ(u) = relu(u)``: nonnegative, may give an all-zero row (as in Qin et al.,
    *cosFormer*, 2022, https://arxiv.org/abs/2202.08791)."""

    name = "relu"
    order = 20
    color = "#9467bd"
    citation = "Qin et al. 2022, arXiv:2202.08791"

    def phi(self, u):
        return F.relu(u)
