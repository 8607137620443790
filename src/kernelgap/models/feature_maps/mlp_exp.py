"""The ``mlp_exp`` map: ``φ(x) = exp(MLP(x))``, in log space."""

from __future__ import annotations

from .base import MLPFeatureMap, register_feature_map


@register_feature_map
class MlpExp(MLPFeatureMap):
    """``φ(x) = exp(MLP(x))``: positive, generalises to unseen tokens (log space: ``phi``
    returns ``log φ = u``); a learned positive map in the spirit of Hedgehog's trained
    feature maps (https://arxiv.org/abs/2402.04347)."""

    name = "mlp_exp"
    order = 70
    log_space = True
    color = "#d62728"
    citation = "learned exp-MLP map (cf. arXiv:2402.04347)"
