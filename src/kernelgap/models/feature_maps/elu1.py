"""The ``elu1`` map: ``φ(u) = elu(u) + 1`` of a linear projection."""

from __future__ import annotations

import torch.nn.functional as F

from .base import ProjectedFeatureMap, register_feature_map


@register_feature_map
class Elu1(ProjectedFeatureMap):
    """``φ(u) = elu(u) + 1``: Katharopoulos et al., *Transformers are RNNs*, 2020,
    https://arxiv.org/abs/2006.16236."""

    name = "elu1"
    order = 10
    color = "#2ca02c"
    citation = "Katharopoulos et al. 2020, arXiv:2006.16236"

    def phi(self, u):
        return F.elu(u) + 1
