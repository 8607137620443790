"""Example modules for ``kernelgap probe``: a decayed (gated) linear attention layer, plain
``elu + 1`` linear attention, and uniform attention (the query-blind control).

    kernelgap probe kernelgap.probe.examples:DecayedLinearAttention
    kernelgap probe kernelgap.probe.examples:DecayedLinearAttention --kwargs '{"decay_init": 0.5}'
    kernelgap probe kernelgap.probe.examples:Elu1LinearAttention
    kernelgap probe kernelgap.probe.examples:UniformAttention
    kernelgap probe kernelgap.probe.examples:SoftmaxAttention

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
``γ ≡ 1`` it is plain ``elu1`` linear attention (:class:`Elu1LinearAttention`).

:class:`SoftmaxAttention` is the positive control: torch's ``nn.MultiheadAttention``, whose
softmax kernel ``exp(<q, k>/√d)`` has no finite feature count, so no rank bounds it, its query
tempered as kernelgap's own softmax's.  It takes no rank (``SoftmaxAttention(d_model, *,
heads=1)``): the probe trains it once per seed, rank-free.

The kernel layers each declare their true feature count, ``kernelgap_features(rank)`` (the probe's axis;
docs/experiments.md, "Probe"): ``rank`` for the two kernel layers, 1 for uniform attention.  Uniform attention
(:class:`UniformAttention`) has one constant weight: its runs end at the query-blind
optimum of the training loss (docs/theory.md, "The query-blind floor").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..models.specs import SoftmaxSpec

#: The temperature of kernelgap's dense softmax, the query's divisor in :class:`SoftmaxAttention`.
SOFTMAX_TEMPERATURE = SoftmaxSpec.model_fields["temperature"].default


class DecayedLinearAttention(nn.Module):
    kernelgap_interface = "layer"
    kernelgap_kernel = "elu1"  # the built-in map of its kernel (γ ≡ 1)
    # a ratio of nonnegative rank-r kernels whose maps depend on the positions: the certificate
    # covers it (docs/theory.md, "The lower bound as a certificate"), though the structure check,
    # which sees its order and duplication change the output, cannot tell that from outside
    kernelgap_kind = "normalised kernel"

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

    @staticmethod
    def kernelgap_features(rank: int) -> int:
        return rank

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


class Elu1LinearAttention(nn.Module):
    """Normalized linear attention with ``φ = elu + 1`` of rank ``r``:
    ``y_i = W_o Σ_j <φ(q_i), φ(k_j)> v_j / Σ_j <φ(q_i), φ(k_j)>``."""

    kernelgap_interface = "layer"
    kernelgap_kernel = "elu1"

    def __init__(self, d_model: int, rank: int) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(d_model, rank), nn.Linear(d_model, rank)
        self.v, self.o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    @staticmethod
    def kernelgap_features(rank: int) -> int:
        return rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = F.elu(self.q(x)) + 1, F.elu(self.k(x)) + 1
        alpha = q @ k.transpose(-1, -2)  # [B, N, N], > 0
        return self.o(alpha @ self.v(x) / alpha.sum(-1, keepdim=True))


class UniformAttention(nn.Module):
    """Every position attends to every position with the same weight, ``y_i = W_o mean_j v_j``:
    a query-blind model (its weights ignore the query and the candidates), whatever ``rank``."""

    kernelgap_interface = "layer"

    def __init__(self, d_model: int, rank: int) -> None:
        super().__init__()
        self.v, self.o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    @staticmethod
    def kernelgap_features(rank: int) -> int:
        return 1  # α ≡ 1 = <1, 1>: a kernel of rank 1, whatever the rank argument

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.o(self.v(x).mean(dim=1, keepdim=True)).expand_as(x)


class SoftmaxAttention(nn.Module):
    """torch's multi-head softmax self-attention with its query divided by a temperature τ,
    ``y = MHA(x / τ, x, x)``: ``α_ij = softmax_j(<W_q x_i / τ, W_k x_j> / √(d_model / heads))``
    per head; no rank argument and no ``kernelgap_features`` (a softmax kernel has infinitely
    many features).  τ is kernelgap's dense softmax's (:class:`~kernelgap.models.specs.SoftmaxSpec`,
    docs/experiments.md, "Training recipe"): attention starts near uniform and the scorer moves
    τ times slower than the readout under Adam, which it needs to find the good candidates;
    ``temperature=1`` is torch's layer as it ships (docs/experiments.md, "Probe")."""

    kernelgap_interface = "layer"

    def __init__(self, d_model: int, *, heads: int = 1, temperature: float = SOFTMAX_TEMPERATURE) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, heads, batch_first=True)
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x / self.temperature, x, x, need_weights=False)[0]  # (output, weights): the output
