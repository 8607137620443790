"""How big a model of a spec is, and the limits it must keep (:mod:`kernelgap.limits`).

The parameters are counted on the model itself: :func:`~.build.assemble` makes the modules
on PyTorch's ``meta`` device (shapes, no memory), so the estimate is the construction's own
count, never a second description of it.
"""

from __future__ import annotations

import functools

import torch

from ..limits import check_memory, check_rank
from .build import assemble
from .specs import KernelSpec, ModelSpec, SoftmaxSpec

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
