"""The ``signed`` map: ``φ(x) = MLP(x)``, unconstrained (the signed loophole)."""

from __future__ import annotations

from .base import MLPFeatureMap, register_feature_map


@register_feature_map
class Signed(MLPFeatureMap):
    """``φ(x) = MLP(x)``, unconstrained: the kernel may be negative (the loophole)."""

    name = "signed"
    order = 80
    nonnegative = False
    color = "#bcbd22"
    citation = "unconstrained features (the signed loophole)"
