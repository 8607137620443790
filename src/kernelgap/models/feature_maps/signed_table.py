"""The ``signed_table`` map: a free real vector per distinct token."""

from __future__ import annotations

from typing import ClassVar

from .base import register_feature_map
from .table import Table


@register_feature_map
class SignedTable(Table):
    """A free real vector per distinct token, ``φ(x) = θ[x]``: any rank-r kernel, signs included.

    The signed counterpart of ``table`` (the most expressive signed map on a
    finite family).  It starts at positive features, ``θ = exp(θ₀)`` with
    ``θ₀ ~ N(0, (init_scale/2)²)`` (a positive kernel), and is then trained
    without a sign constraint, so it separates what signs buy from how hard a
    kernel that starts with denominators of both signs is to train (``signed``).
    It keeps the generic recipe (not ``table``'s).
    """

    name = "signed_table"
    order = 100
    log_space = False
    nonnegative = False
    default_lr = 3e-3  # linear-space features move further per step than log-features (docs/experiments.md)
    table_init_scale = 1.0
    recipe_model: ClassVar[dict] = {}
    recipe_schedule: ClassVar[dict] = {}
    distillable = True
    prunable = False
    color = "#17becf"
    citation = "an arbitrary real map (the signed loophole, finite families)"
    exp_init = True
