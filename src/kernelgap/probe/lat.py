"""linear-attention-transformer's ``SelfAttention`` with its normalisation as a switch, for
``kernelgap probe`` and the ablation that places its failure (docs/experiments.md, "Why a
library layer fails"; ``pip install 'kernelgap[zoo]'``).

    kernelgap probe kernelgap.probe.lat:LatSelfAttention --kwargs '{"normalise": "max"}'

One head of width ``rank``.  lat's global attention is ``y_i = Σ_j α_ij v_j / √rank`` with
``α_ij = Σ_f softmax(q_i)_f · exp(k_jf) / Z_f``, ``Z_f = Σ_j exp(k_jf)``: each key feature is a
softmax over the sequence, so every feature carries the same mass and each query's weights sum
to 1 with no denominator.  ``normalise`` keeps the kernel ``Σ_f softmax(q_i)_f exp(k_jf)`` and
changes only how it is normalised:

* ``"sequence"`` — lat as it ships (its own function runs);
* ``"max"`` — each key feature divided by its largest value over the sequence, ``exp(k_jf − max_j
  k_jf)``, and the weights by their mass;
* ``"mass"`` — the kernel itself, one constant per sequence taken out for range, the weights
  divided by their mass: normalised linear attention, features fixed per token.

Under ``"sequence"`` and ``"max"`` a key's features depend on the other keys of its sequence,
so the layer is no fixed kernel and the rank certificate does not speak of it: the structure
check's ``context`` measure finds it (kind ``normalised``, rank-free; docs/theory.md, "The
additivity certificate"), as it does for lat's own ``SelfAttention`` probed directly.
"""

from __future__ import annotations

import torch
from linear_attention_transformer.linear_attention_transformer import SelfAttention  # the optional extra
from torch import nn

#: The normalisations by name (module docstring).
NORMALISE = ("sequence", "max", "mass")


def _normalised_by_mass(per_feature: bool):
    """lat's ``linear_attn(q, k, v)`` with the keys' softmax over the sequence replaced by
    ``exp(k − M)`` (``M`` the max over the sequence per feature, or over everything) and the
    weights divided by their mass."""

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_mask=None) -> torch.Tensor:
        if kv_mask is not None:
            raise ValueError("this normalisation takes no mask")
        q = q.softmax(dim=-1)
        k = (k - k.amax(dim=-2 if per_feature else (-2, -1), keepdim=True)).exp()
        weights = q @ k.transpose(-1, -2)  # [B, H, N, N]
        return weights @ v / weights.sum(-1, keepdim=True) * q.shape[-1] ** -0.5  # lat's scale kept

    return attend


class LatSelfAttention(nn.Module):
    kernelgap_interface = "layer"

    def __init__(self, d_model: int, rank: int, normalise: str = "sequence") -> None:
        super().__init__()
        if normalise not in NORMALISE:
            raise ValueError(f"no normalisation {normalise!r}; choose from {', '.join(NORMALISE)}")
        self.attention = SelfAttention(dim=d_model, heads=1, dim_head=rank)
        if normalise != "sequence":
            self.attention.global_attn_fn = _normalised_by_mass(per_feature=normalise == "max")

    @staticmethod
    def kernelgap_features(rank: int) -> int:
        return rank  # the head width: one feature per query dimension

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x)
