"""A decayed (gated) linear attention layer: an example for ``kernelgap probe``.

    kernelgap probe kernelgap.probe.examples:DecayedLinearAttention
    kernelgap probe kernelgap.probe.examples:DecayedLinearAttention --kwargs '{"decay_init": 0.5}'

It follows the probe's ``"layer"`` interface (see ``kernelgap.probe``):
``DecayedLinearAttention(d_model, rank, **kwargs)`` maps ``x [B, N, d_model]``
to ``[B, N, d_model]``; kernelgap adds the token embedding and the readout.

Kernel attention with ``elu + 1`` features (rank ``r``) whose every feature
``k`` decays with the distance between positions at its own learned rate
``γ_k ∈ (0, 1)`` — the bidirectional form of RetNet / gated linear attention
decay (a causal decay would leave position 1, the witness family's query,
seeing only itself):

    α_ij = Σ_k φ(q_i)_k φ(k_j)_k γ_k^{|i − j|},     y_i = W_o Σ_j α_ij v_j / Σ_j α_ij

The kernel stays nonnegative, so the paper's wall applies to it; with
``γ ≡ 1`` it is plain ``elu1`` linear attention.
"""

import torch
import torch.nn.functional as F
from torch import nn


class DecayedLinearAttention(nn.Module):
    kernelgap_interface = "layer"

    def __init__(self, d_model: int, rank: int, decay_init: float = 0.9, d_value: int = 32) -> None:
        super().__init__()
        if not 0.0 < decay_init < 1.0:
            raise ValueError(f"decay_init must lie in (0, 1), got {decay_init}")
        self.q = nn.Linear(d_model, rank)
        self.k = nn.Linear(d_model, rank)
        self.v = nn.Linear(d_model, d_value)
        self.o = nn.Linear(d_value, d_model)
        logit = torch.logit(torch.tensor(float(decay_init)))
        self.decay_logit = nn.Parameter(torch.full((rank,), float(logit)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        q = F.elu(self.q(x)) + 1  # [B, N, r]
        k = F.elu(self.k(x)) + 1
        v = self.v(x)  # [B, N, d_v]
        pos = torch.arange(n, device=x.device)
        dist = (pos[:, None] - pos[None, :]).abs().to(x.dtype)  # [N, N]
        log_gamma = F.logsigmoid(self.decay_logit)  # [r], log γ_k < 0
        decay = torch.exp(dist[:, :, None] * log_gamma)  # [N, N, r]
        alpha = torch.einsum("bir,bjr,ijr->bij", q, k, decay)  # [B, N, N], ≥ 0
        y = alpha @ v / alpha.sum(-1, keepdim=True).clamp_min(1e-6)
        return self.o(y)
