"""A stack of models from a spec (docs/theory.md, "The models").

:func:`assemble` makes the modules of a spec's model, uninitialised; :func:`build_model`
initialises every member from its seed.  The memory estimate (:func:`parameter_count`)
counts what :func:`assemble` makes, on PyTorch's ``meta`` device (shapes, no memory), so a
model and its estimate cannot drift apart.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ..errors import KernelgapError
from ..limits import check_memory, check_rank
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
    Limits are :func:`check_model`'s, checked where the run is configured."""
    if spec.built_elsewhere:
        if len(seeds) != 1:
            raise KernelgapError("a module model trains alone (one seed per stack)")
        return build_external(spec.module, m, (ranks or [spec.rank])[0], seeds[0], dtype, device)
    ranks = ranks or [spec.stack_rank] * len(seeds)
    model = assemble(spec, m, length, ranks, vocabulary)
    init_members(model, seeds, ranks)
    return model.to(device=device, dtype=dtype)


#: Bytes per parameter the estimate counts (float32).
PARAMETER_BYTES = 4
#: What a count too large for a tensor's shape stands for: more than any machine holds.
BEYOND_INDEXING = 1 << 63


@functools.lru_cache(maxsize=256)
def parameter_count(spec: KernelSpec | SoftmaxSpec, m: int = 1, tokens: int = 1, members: int = 1) -> int:
    """Numbers a stack of ``members`` models of ``spec`` (kernel or softmax) holds on ``m``-bit
    tokens of a family of ``tokens`` distinct tokens, one key position: its parameters and
    its floating-point buffers (``favor``'s fixed projections; the rank mask).  Remembered
    per spec and sizes: the runs of a sweep differ mostly in their seed."""
    ranks = [spec.stack_rank] * max(members, 1)
    try:
        with torch.device("meta"):
            vocabulary = torch.zeros(max(tokens, 1), max(m, 1), dtype=torch.uint8)
            model = assemble(spec, max(m, 1), 1, ranks, vocabulary)
    except (RuntimeError, TypeError, OverflowError) as exc:
        if "overflow" not in str(exc).lower():
            raise
        return BEYOND_INDEXING  # a shape past int64: more memory than any machine has
    tensors = [*model.parameters(), *(b for b in model.buffers() if b.is_floating_point())]
    return sum(t.numel() for t in tensors)


def check_model(
    spec: ModelSpec, where: str = "model", *, m: int | None = None, tokens: int | None = None, members: int = 1
) -> ModelSpec:
    """The limits of :mod:`kernelgap.limits` for ``spec``: the rank is at most
    :data:`kernelgap.limits.MAX_RANK`, and the parameters (:func:`parameter_count`, at
    :data:`PARAMETER_BYTES` each) fit the memory limit.  Without the family's ``m`` and
    number of distinct ``tokens`` both count as 1, so the estimate is a floor: a refused
    spec could never be built."""
    if spec.stack_rank is not None:
        check_rank(spec.rank, f"{where}.rank")
    if spec.built_elsewhere:
        return spec
    params = parameter_count(spec, m or 1, tokens or 1, members)
    check_memory(
        f"{where} with at least {params:,} parameters ({PARAMETER_BYTES} bytes each)", PARAMETER_BYTES * params
    )
    return spec
