"""A kernel model held against its certificate (docs/theory.md, "Checking a model").

For a kernel model and a family with matching ``(x_i, g_i)`` the certificate's
matrix is ``B[i, j] = K(x_i, g_j) / K(x_i, g_i)`` with
``K(x, c) = m_2(c) + m_3(c)``: the kernel summed over the non-query key
positions the query attends to.  Its rank is at most the model's feature count
and, if the model is exact, ``0 ≤ B[i, j] ≤ ε_ij`` for every pair the
certificate bounds.  Computed per member and head, in float64 from the
model's score table (log-space maps: ratios of log-sum-exps).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from ..errors import KernelgapError
from ..task.family import Family
from .certificate import check_family
from .chains import chain_pair_bounds
from .pair_bounds import PairBounds

#: Relative singular-value cut-off for the numerical rank.
RANK_RTOL = 1e-6


@dataclass
class ModelMatrix:
    """B of one member and head, with its summary numbers."""

    member: int
    head: int
    matrix: np.ndarray
    offdiag_max: float
    numerical_rank: int
    violations: int  # bounded pairs with B[i, j] > ε_ij

    def to_json(self) -> dict:
        return {
            "member": self.member,
            "head": self.head,
            "offdiag_max": self.offdiag_max,
            "numerical_rank": self.numerical_rank,
            "violations": self.violations,
        }


def log_mass(model, family: Family, qpos: int) -> torch.Tensor:
    """``log K(x, c)`` ``[E, H, T, T]`` (or ``K`` itself if the map is not in log space)."""
    with torch.no_grad():
        scores = model.scorer.scores(torch.as_tensor(family.tokens, dtype=model.dtype))
    scores = scores.double()
    keys = [p for p in range(3) if p != qpos and (not model.causal or p < qpos)]
    if not keys:
        raise KernelgapError("the query attends to no candidate position (causal model, query first)")
    parts = [scores[:, :, p if scores.shape[2] > 1 else 0] for p in keys]
    if model.scorer.log_space:
        return torch.logsumexp(torch.stack(parts), dim=0)
    return torch.stack(parts).sum(0)


def model_matrices(
    model, family: Family, delta: Fraction = Fraction(1, 2), rtol: float = RANK_RTOL
) -> list[ModelMatrix]:
    """B for every member and head of ``model`` on ``family`` (module docstring)."""
    check_family(family)
    qpos = (family.query_position or 1) - 1
    mass = log_mass(model, family, qpos)
    q = torch.tensor([a for a, _ in family.matching])
    g = torch.tensor([b for _, b in family.matching])
    rows = mass[:, :, q][:, :, :, g]  # [E, H, n, n]: K(x_i, g_j)
    diag = mass[:, :, q, g][..., None]  # K(x_i, g_i)
    b = torch.exp(rows - diag) if model.scorer.log_space else rows / diag
    bounds = chain_pair_bounds(family, qpos, delta)
    eps = _eps_matrix(bounds)
    out = []
    for e in range(b.shape[0]):
        for h in range(b.shape[1]):
            mat = b[e, h].numpy()
            off = mat[~np.eye(len(mat), dtype=bool)]
            sv = np.linalg.svd(mat, compute_uv=False)
            rank = int((sv > rtol * sv.max()).sum()) if np.isfinite(sv).all() and sv.max() > 0 else 0
            out.append(ModelMatrix(e, h, mat, float(off.max()) if off.size else 0.0, rank, int((mat > eps).sum())))
    return out


def _eps_matrix(bounds: PairBounds) -> np.ndarray:
    """ε as floats, ``inf`` where unbounded and on the diagonal (never a violation)."""
    eps = bounds.value_floats()[np.maximum(bounds.eps_id, 0)]
    eps[bounds.reason != 0] = np.inf
    np.fill_diagonal(eps, np.inf)
    return eps
