"""The ``favor_iid`` map: Performer's random features with independent ``ω``."""

from __future__ import annotations

from .base import register_feature_map
from .favor import Favor


@register_feature_map
class FavorIid(Favor):
    """:class:`Favor` with independent ``ω_i ~ N(0, I_d)`` (no orthogonal blocks)."""

    name = "favor_iid"
    order = 40
    color = "#c49c94"
    orthogonal = False
