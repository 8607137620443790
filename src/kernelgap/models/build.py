"""A stack of models from a spec (docs/theory.md, "The models").

:func:`assemble` makes the modules of a spec's model, uninitialised; :func:`build_model`
initialises every member from its seed.  The memory estimate (:mod:`.sizing`) counts what
:func:`assemble` makes, so a model and its estimate cannot drift apart.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import KernelgapError
from .attention import AttentionModel, Readout
from .external import ModuleModel, build_external
from .specs import KernelSpec, ModelSpec, SoftmaxSpec
from .stacked import init_members


def assemble(
    spec: KernelSpec | SoftmaxSpec, m: int, length: int, ranks: list[int | None], vocabulary=None
) -> AttentionModel:
    """The uninitialised attention model of ``spec`` (kernel or softmax) with one member per
    entry of ``ranks`` on ``m``-bit tokens at sequence length ``length``; a table map indexes
    ``vocabulary [V, m]`` (uint8 bits, an array or a tensor)."""
    key_positions, members = (length if spec.position_dependent else 1), len(ranks)
    readout = Readout(m, spec.d_value, members, spec.heads, key_positions, spec.readout, spec.hidden, spec.init_scale)
    return AttentionModel(
        spec.scorer(m, ranks, key_positions, vocabulary), readout, spec.causal, spec.position_dependent
    )


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
    if spec.built_elsewhere:
        if len(seeds) != 1:
            raise KernelgapError("a module model trains alone (one seed per stack)")
        return build_external(spec.module, m, (ranks or [spec.rank])[0], seeds[0], dtype, device)
    ranks = ranks or [spec.stack_rank] * len(seeds)
    model = assemble(spec, m, length, ranks, vocabulary)
    init_members(model, seeds, ranks)
    return model.to(device=device, dtype=dtype)
