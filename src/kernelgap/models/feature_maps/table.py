"""The ``table`` map: a free positive vector per distinct token, in log space."""

from __future__ import annotations

from .base import FeatureMap, register_feature_map


@register_feature_map
class Table(FeatureMap):
    """A free positive vector per distinct token: ``φ(x) = exp(θ[x])`` (log space).

    The most expressive map — what the theorem's "arbitrary φ" allows — but it
    only knows the tokens of its vocabulary (a finite family).  There is no
    projection: the scorer holds the parameter table ``θ [S, V, r]`` over the
    family's ``V`` distinct tokens and indexes it by token id; ``phi`` returns the
    rows as log-features.
    """

    name = "table"
    order = 90
    log_space = True
    # Calibrated on held-out families (docs/experiments.md, "Training recipe", "Held-out families"):
    # at 3e-2, from θ₀ of std init_scale/2 or after an MSE phase, two good candidates often come to
    # share one feature (at the certified rank another is then left without one), and an MLP
    # readout extrapolates its values around the self-attention term instead of ranking candidates.
    default_lr = 1e-2
    table_init_scale = 0.25  # θ₀ ~ N(0, (init_scale/8)²): nearly flat kernels at the start
    recipe_model = {"readout": "linear"}
    recipe_schedule = {"mse_steps": 0, "max_steps": 5000}
    color = "#1f77b4"
    citation = "an arbitrary nonnegative map (the lower bound's model)"
    projection = None
    distillable = False  # the teacher itself
    prunable = True
    # At N > 3 with a feature per query at most, from a random start two queries often end on one
    # feature; a table 1.5x wider, cut, gives each its own (docs/experiments.md, "Training recipe").
    recipe_prune_from = 1.5
    exp_init = False  # θ holds log-features

    def phi(self, u):
        return u
