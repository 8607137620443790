"""Reference CPU layers of the recurrent attention people run, in plain torch, for ``kernelgap probe``.

    kernelgap probe kernelgap.probe.layers:GatedLinearAttention
    kernelgap probe kernelgap.probe.layers:RetNetRetention --kwargs '{"group_norm": true}'
    kernelgap probe kernelgap.probe.layers:DeltaNet
    kernelgap probe kernelgap.probe.layers:GatedDeltaNet
    kernelgap probe kernelgap.probe.layers:Mamba2SSM

Each is one head of a causal recurrence over the sequence with a matrix state
``S_t ∈ R^{r × d_v}`` (``r = rank`` keys, ``d_v = d_value`` values), written as the one
update :func:`recurrence` computes (docs/experiments.md, "Reference layers"):

    S_t = a_t ⊙ (S_{t-1} − β_t k_t k_tᵀ S_{t-1}) + β_t k_t v_tᵀ,     y_t = W_o S_tᵀ q_t

- :class:`GatedLinearAttention` (GLA): ``a_t = sigmoid(W_α x_t)^{1/τ}`` per key, no erase;
- :class:`RetNetRetention`: ``a_t = γ`` fixed, no erase (optionally a GroupNorm on ``S_tᵀ q_t``);
- :class:`DeltaNet`: ``a_t = 1``, ``β_t = sigmoid(w_β·x_t)``, ``q, k`` of unit length;
- :class:`GatedDeltaNet`: the delta rule with ``a_t = sigmoid(w_α·x_t)``;
- :class:`Mamba2SSM`: ``a_t = exp(−Δ_t A)``, key ``Δ_t B_t``, value ``x_t``, query ``C_t``,
  ``Δ_t = softplus(w·x_t + b)``, no erase.

``kernelgap_features(rank)`` is ``rank``, the key width: the number of terms of the
query–key product ``<q_i, a_{j→i} ⊙ k_j>``, the count the one-head certificate is stated in
(its bound holds whatever the value width); the state holds ``rank × d_value`` numbers
(:meth:`kernelgap_state_size`).  None of these layers divides by an attention mass, and
their query–key weights are signed, so the certificate does not bind them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def recurrence(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor, beta: torch.Tensor | None = None
) -> torch.Tensor:
    """``y_t = S_tᵀ q_t`` for ``S_t = a_t ⊙ (S_{t-1} − β_t k_t k_tᵀ S_{t-1}) + β_t k_t v_tᵀ``, ``S_0 = 0``.

    ``q, k [B, N, r]``, ``v [B, N, d_v]``, ``decay`` (``a_t``) ``[B, N, r]`` or ``[B, N, 1]``
    (scaling the state's rows); ``beta [B, N, 1]`` turns on the delta rule's erase, and
    ``None`` means ``β_t = 1`` without it (the additive update ``a_t ⊙ S_{t-1} + k_t v_tᵀ``)."""
    state = q.new_zeros(q.shape[0], q.shape[-1], v.shape[-1])  # [B, r, d_v]
    out = []
    for t in range(q.shape[1]):
        key = k[:, t, :, None]  # [B, r, 1]
        if beta is None:
            state = decay[:, t, :, None] * state + key * v[:, t, None, :]
        else:
            b = beta[:, t, :, None]
            erased = state - b * key * (key.transpose(1, 2) @ state)
            state = decay[:, t, :, None] * erased + b * key * v[:, t, None, :]
        out.append((q[:, t, None, :] @ state).squeeze(1))  # [B, d_v]
    return torch.stack(out, dim=1)


class _Recurrent(nn.Module):
    """The shared frame: ``q, k [r]`` and ``v [d_v]`` projections of ``x``, the output
    projection ``W_o: d_v → d_model``, and the declared sizes."""

    kernelgap_interface = "layer"

    def __init__(self, d_model: int, rank: int, d_value: int = 32) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(d_model, rank), nn.Linear(d_model, rank)
        self.v, self.o = nn.Linear(d_model, d_value), nn.Linear(d_value, d_model)
        self.d_value = d_value

    @staticmethod
    def kernelgap_features(rank: int) -> int:
        return rank  # the key width (module docstring)

    def kernelgap_state_size(self, rank: int) -> int:
        """The numbers the state ``S_t`` holds: keys × values."""
        return rank * self.d_value


class GatedLinearAttention(_Recurrent):
    """GLA: ``S_t = diag(α_t) S_{t-1} + k_t v_tᵀ``, ``α_t = sigmoid(W_α x_t)^{1/τ}`` (one gate per
    key, ``τ = gate_temperature``, 16 as in GLA), ``y_t = W_o S_tᵀ q_t``."""

    def __init__(self, d_model: int, rank: int, d_value: int = 32, gate_temperature: float = 16.0) -> None:
        super().__init__(d_model, rank, d_value)
        if not gate_temperature > 0:
            raise ValueError(f"gate_temperature must be positive, got {gate_temperature}")
        self.gate, self.tau = nn.Linear(d_model, rank), gate_temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        decay = torch.exp(F.logsigmoid(self.gate(x)) / self.tau)
        return self.o(recurrence(self.q(x), self.k(x), self.v(x), decay))


class RetNetRetention(_Recurrent):
    """RetNet's retention, one head: ``S_t = γ S_{t-1} + k_t v_tᵀ`` with ``γ = decay`` fixed
    (RetNet's first head: ``1 − 2⁻⁵``), ``y_t = W_o S_tᵀ q_t``; ``group_norm`` puts RetNet's
    GroupNorm (one group: the head) on ``S_tᵀ q_t``."""

    def __init__(
        self, d_model: int, rank: int, d_value: int = 32, decay: float = 1 - 2**-5, group_norm: bool = False
    ) -> None:
        super().__init__(d_model, rank, d_value)
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must lie in (0, 1], got {decay}")
        self.decay = decay
        self.norm = nn.GroupNorm(1, d_value) if group_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        decay = x.new_full((*x.shape[:2], 1), self.decay)
        y = recurrence(self.q(x), self.k(x), self.v(x), decay)
        if self.norm is not None:
            y = self.norm(y.flatten(0, 1)).unflatten(0, x.shape[:2])
        return self.o(y)


class DeltaNet(_Recurrent):
    """The delta rule: ``S_t = S_{t-1} + β_t k_t (v_t − S_{t-1}ᵀ k_t)ᵀ``, ``β_t = sigmoid(w_β·x_t)``,
    ``q_t, k_t`` scaled to unit length, ``y_t = W_o S_tᵀ q_t``."""

    def __init__(self, d_model: int, rank: int, d_value: int = 32) -> None:
        super().__init__(d_model, rank, d_value)
        self.beta = nn.Linear(d_model, 1)

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        """``a_t``: 1, the delta rule keeps its state."""
        return x.new_ones(*x.shape[:2], 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = F.normalize(self.q(x), dim=-1), F.normalize(self.k(x), dim=-1)
        return self.o(recurrence(q, k, self.v(x), self.gate(x), torch.sigmoid(self.beta(x))))


class GatedDeltaNet(DeltaNet):
    """The gated delta rule: ``S_t = α_t (S_{t-1} − β_t k_t k_tᵀ S_{t-1}) + β_t k_t v_tᵀ``,
    ``α_t = sigmoid(w_α·x_t)`` (one gate for the state), the rest as :class:`DeltaNet`."""

    def __init__(self, d_model: int, rank: int, d_value: int = 32) -> None:
        super().__init__(d_model, rank, d_value)
        self.alpha = nn.Linear(d_model, 1)

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.alpha(x))


class Mamba2SSM(_Recurrent):
    """A Mamba2-style selective state, one head: ``S_t = exp(−Δ_t A) S_{t-1} + Δ_t B_t x_tᵀ``,
    ``y_t = W_o S_tᵀ C_t``, ``Δ_t = softplus(w·x_t + b)``, ``A = exp(A_log) > 0`` learned;
    ``B_t, C_t ∈ R^rank`` (the ``k`` and ``q`` projections: rank is Mamba's state width ``N``),
    ``x_t`` the ``v`` projection of the layer's input."""

    def __init__(self, d_model: int, rank: int, d_value: int = 32) -> None:
        super().__init__(d_model, rank, d_value)
        self.dt = nn.Linear(d_model, 1)
        self.a_log = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        delta = F.softplus(self.dt(x))  # [B, N, 1]
        decay = torch.exp(-delta * self.a_log.exp())
        return self.o(recurrence(self.q(x), delta * self.k(x), self.v(x), decay))


#: The layers by class name.
LAYERS = {cls.__name__: cls for cls in (GatedLinearAttention, RetNetRetention, DeltaNet, GatedDeltaNet, Mamba2SSM)}
