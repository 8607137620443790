"""A stack of models from a spec (docs/theory.md, "The models").

:func:`assemble` makes the modules of a spec's model, uninitialised; :func:`build_model`
initialises every member from its seed.  The memory estimate (:mod:`.sizing`) counts what
:func:`assemble` makes, so a model and its estimate cannot drift apart.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import KernelgapError
from .attention import AttentionModel, Readout
from .external import ModuleModel, build_external
from .scorers import KernelScorer, Scorer, SoftmaxScorer
from .specs import KernelSpec, ModelSpec, ModuleModelSpec, SoftmaxSpec, spec_rank
from .stacked import init_members


def assemble(
    spec: KernelSpec | SoftmaxSpec, m: int, length: int, ranks: list[int | None], vocabulary=None
) -> AttentionModel:
    """The uninitialised attention model of ``spec`` (kernel or softmax) with one member per
    entry of ``ranks`` on ``m``-bit tokens at sequence length ``length``; a table map indexes
    ``vocabulary [V, m]`` (uint8 bits, an array or a tensor)."""
    key_positions = length if spec.position_dependent else 1
    members = len(ranks)
    if isinstance(spec, KernelSpec):
        fm = spec.map_class.build(m, max(ranks), members * spec.heads, spec.heads)
        scorer: Scorer = KernelScorer(
            feature_map=fm,
            ranks=ranks,
            m=m,
            heads=spec.heads,
            key_positions=key_positions,
            hidden=spec.hidden,
            init_scale=spec.init_scale,
            vocabulary=vocabulary,
            temperature=spec.temperature,
        )
    else:
        d = spec.score_dim or m
        tau = spec.temperature * (math.sqrt(d) if spec.scaled_scores else 1.0)
        scorer = SoftmaxScorer(m, d, members, spec.heads, key_positions, tau, spec.init_scale)
    readout = Readout(m, spec.d_value, members, spec.heads, key_positions, spec.readout, spec.hidden, spec.init_scale)
    return AttentionModel(scorer, readout, spec.causal, spec.position_dependent)


def build_model(
    spec: ModelSpec,
    m: int,
    length: int,
    seeds: list[int],
    ranks: list[int] | None = None,
    vocabulary: np.ndarray | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> AttentionModel | ModuleModel:
    """A stack of ``len(seeds)`` models of one spec; ``ranks`` pads to the largest (a softmax
    model has none).  A module (``kind = "module"``) trains alone: one seed, one rank.
    Limits are :func:`.sizing.check_model`'s, checked where the run is configured."""
    if isinstance(spec, ModuleModelSpec):
        if len(seeds) != 1:
            raise KernelgapError("a module model trains alone (one seed per stack)")
        return build_external(spec.module, m, (ranks or [spec.rank])[0], seeds[0], dtype, device)
    ranks = ranks or [spec_rank(spec)] * len(seeds)
    model = assemble(spec, m, length, ranks, vocabulary)
    init_members(model, seeds, ranks)
    return model.to(device=device, dtype=dtype)
