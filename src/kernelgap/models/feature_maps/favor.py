"""The ``favor`` map: Performer's positive orthogonal random features, in log space."""

from __future__ import annotations

import math
from typing import ClassVar

import torch

from ..stacked import StackedModule, normal_
from .base import ProjectedFeatureMap, register_feature_map


@register_feature_map
class Favor(ProjectedFeatureMap):
    """Performer's positive random features (FAVOR+), in log space: Choromanski et al.,
    *Rethinking Attention with Performers*, 2021, https://arxiv.org/abs/2009.14794.

    ``φ(u) = exp(ω_i·u − |u|²/2)/√r`` with fixed ``ω_i``, ``d = m``;
    ``E_ω[φ(u)·φ(w)] = exp(<u, w>)``.  The ``ω_i`` are **orthogonal** random features,
    as Performer draws them: blocks of ``d`` orthonormal directions (QR of a Gaussian
    matrix), each scaled by the norm of an independent ``N(0, I_d)`` vector, so every
    ``ω_i`` is still marginally ``N(0, I_d)`` (the estimate stays unbiased) while those
    of one block are exactly orthogonal (a lower variance).  ``favor_iid`` draws them
    independently.  The map holds ``ω [S, d, r]``, one draw per slot (shared by the
    slot's queries and keys at every position).
    """

    name = "favor"
    order = 30
    log_space = True
    projection_is_feature_axis = False
    color = "#8c564b"
    citation = "Choromanski et al. 2021, arXiv:2009.14794"
    orthogonal: ClassVar[bool] = True

    def __init__(self, m: int, rank: int, slots: int = 1, heads: int = 1) -> None:
        super().__init__()
        self.omega = _OmegaBuffer(slots, heads, m, rank, self.orthogonal)

    @classmethod
    def build(cls, m, rank, slots=1, heads=1):
        return cls(m, rank, slots, heads)

    @classmethod
    def layer(cls, m, rank):
        gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
        omega = orthogonal_gaussian(m, rank, gen).float() if cls.orthogonal else torch.randn(m, rank, generator=gen)
        return _LayerFavor(omega)

    @classmethod
    def projection_dim(cls, rank, m):
        return m

    def phi(self, u):
        omega = self.omega.omega
        while omega.dim() < u.dim():  # [S, d, r] against keys [S, P, T, d]: one ω for every position
            omega = omega.unsqueeze(1)
        return self.log_phi_with(u, omega)

    @staticmethod
    def log_phi_with(u: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
        r = omega.shape[-1]
        return u @ omega - 0.5 * (u * u).sum(-1, keepdim=True) - 0.5 * math.log(r)


def orthogonal_gaussian(d: int, cols: int, gen: torch.Generator) -> torch.Tensor:
    """``[d, cols]`` columns, each marginally ``N(0, I_d)``, orthogonal within blocks of ``d``:
    block ``b`` is ``Q_b·diag(‖g_i‖)`` with ``Q_b`` from the QR of a Gaussian ``d × d``
    matrix (signs fixed by ``R``'s diagonal, so ``Q_b`` is Haar-distributed) and ``g_i``
    independent ``N(0, I_d)`` draws.  The first ``c`` columns do not depend on ``cols ≥ c``."""
    blocks = []
    for _ in range(-(-cols // d)):
        g = torch.randn(d, d, generator=gen, dtype=torch.float64)
        q, r = torch.linalg.qr(g)
        q = q * torch.sign(torch.diagonal(r))
        norms = torch.randn(d, d, generator=gen, dtype=torch.float64).norm(dim=0)
        blocks.append(q * norms)
    return torch.cat(blocks, dim=1)[:, :cols]


class _LayerFavor(ProjectedFeatureMap):
    """The map of one layer: ``ω [d, r]``, fixed."""

    log_space = True

    def __init__(self, omega: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("omega", omega)

    def phi(self, u):
        return Favor.log_phi_with(u, self.omega.to(u.dtype))


class _OmegaBuffer(StackedModule):
    """Fixed random projections ``ω [S, d, r]`` drawn from each member's seed."""

    def __init__(self, slots, heads, d, r, orthogonal: bool = True):
        super().__init__(slots, heads)
        self.orthogonal = orthogonal
        self.register_buffer("omega", torch.zeros(slots, d, r))

    def init_member(self, member, gen, rank):
        d, width = self.omega.shape[-2:]
        cols = min(rank or width, width)
        for s in self.member_slots(member):
            if self.orthogonal:
                self.omega[s, :, :cols] = orthogonal_gaussian(d, cols, gen).to(self.omega.dtype)
            else:
                normal_(self.omega[s, :, :cols], 1.0, gen)
