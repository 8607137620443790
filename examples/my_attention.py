"""An attention module written in a file, probed by path (README, "probe"):

    kernelgap probe examples/my_attention.py:MyAttention

Normalised linear attention with the ``softplus`` feature map of ``rank`` features,
``y_i = Σ_j <φ(q_i), φ(k_j)> v_j / Σ_j <φ(q_i), φ(k_j)>`` with ``φ = softplus`` (positive):
a ratio of nonnegative rank-``rank`` kernels, which the witness certificate binds
(docs/theory.md).  It imports only torch, as a user's own module would.
"""

import torch
from torch import nn
from torch.nn.functional import softplus


class MyAttention(nn.Module):
    kernelgap_interface = "layer"  # Class(d_model, rank), [B, N, d_model] -> [B, N, d_model]

    def __init__(self, d_model: int, rank: int) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d_model, rank), nn.Linear(d_model, rank), nn.Linear(d_model, d_model)

    @staticmethod
    def kernelgap_features(rank: int) -> int:
        """One feature per query/key coordinate."""
        return rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = softplus(self.q(x)), softplus(self.k(x))
        weights = q @ k.transpose(-1, -2)  # [B, N, N], positive
        return weights @ self.v(x) / weights.sum(-1, keepdim=True)
