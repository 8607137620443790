"""Feature maps for kernel attention, one class each, in a registry (docs/theory.md, "The models").

A feature map gives query features ``φ_Q(x) ∈ R^r`` and key features
``φ_K^(j)(z) ∈ R^r`` (one key map per key position when position-dependent),
so the kernel is ``α(x, z) = <φ_Q(x), φ_K(z)>``.

Maps with ``log_space = True`` return **log-features** ``log φ``: the kernel is
then formed as ``log α = logsumexp_r(log φ_Q + log φ_K)`` (by a max-shifted
matmul), so exponentials never overflow — normalized attention is invariant to
a per-query scale.  ``nonnegative`` says whether the kernel is guaranteed
``≥ 0``; ``maskable`` whether a rank-r model equals a wider one with its extra
features masked (so models of different ranks can share one stacked tensor).
Each map also carries its own facts: ``default_lr`` (the calibrated learning
rate), ``color`` (figures), ``citation`` (paper and arXiv link) and
:meth:`FeatureMap.output_size` (the features it really uses for a requested rank).

| name       | features                                   | kernel                         |
|------------|--------------------------------------------|--------------------------------|
| table      | exp(θ[token]) free per distinct token      | any nonnegative (finite family)|
| mlp_exp    | exp(MLP(x))                                | nonnegative                    |
| elu1       | elu(Wx + c) + 1                            | nonnegative                    |
| relu       | relu(Wx + c)                               | nonnegative                    |
| favor      | exp(ω·u − |u|²/2)/√r, u = Wx (orthogonal ω)| E = exp(<u, w>)  (Performer)   |
| favor_iid  | the same with iid ω ~ N(0, I)              | E = exp(<u, w>)                |
| hedgehog   | softmax([Wx, −Wx])                         | nonnegative                    |
| taylor     | [1, u, sym(u⊗u)], 1 + d + d(d+1)/2 of them | 1 + <u,w> + <u,w>²/2 (exact)   |
| signed     | MLP(x), unconstrained                      | may be negative (loophole)     |
| signed_table | θ[token] free real, starts at exp(θ₀)    | any rank-r kernel (finite fam.)|
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import KernelgapError
from .stacked import StackedLinear, StackedMLP, StackedModule, normal_

FEATURE_MAPS: dict[str, type["FeatureMap"]] = {}


def register_feature_map(cls: type["FeatureMap"]) -> type["FeatureMap"]:
    FEATURE_MAPS[cls.name] = cls
    return cls


def feature_map_class(name: str) -> type["FeatureMap"]:
    if name not in FEATURE_MAPS:
        raise KernelgapError(
            f"unknown feature map {name!r}; choose from {', '.join(sorted(FEATURE_MAPS))}"
        )
    return FEATURE_MAPS[name]


class FeatureMap(nn.Module):
    """Base class: query features ``[S, T, r]`` and key features ``[S, P, T, r]``.

    ``S`` is the number of slots (members × heads), ``P`` the number of key
    positions (1 unless position-dependent), ``r`` = :meth:`output_size`.
    """

    name: ClassVar[str]
    log_space: ClassVar[bool] = False
    nonnegative: ClassVar[bool] = True
    maskable: ClassVar[bool] = True
    #: Adam learning rate of the calibrated recipe (docs/experiments.md, "Training recipe").
    default_lr: ClassVar[float] = 3e-3
    #: Colour of the map in every figure.
    color: ClassVar[str] = "black"
    #: Where the map comes from: paper and arXiv link (shown in the report).
    citation: ClassVar[str] = ""

    def __init__(self, m: int, rank: int, slots: int = 1, heads: int = 1,
                 key_positions: int = 1, hidden: int = 64, init_scale: float = 1.0,
                 vocabulary: np.ndarray | None = None) -> None:
        super().__init__()
        if rank < 1:
            raise KernelgapError(f"rank must be ≥ 1, got {rank}")
        self.m, self.rank, self.slots, self.heads = m, rank, slots, heads
        self.key_positions = key_positions
        self.features = self.output_size(rank)

    @classmethod
    def output_size(cls, rank: int) -> int:
        """Number of features a map built for ``rank`` produces (the kernel's rank bound)."""
        return rank

    @classmethod
    def facts(cls) -> dict:
        """What a report needs to know of the map, as plain values."""
        return {"name": cls.name, "color": cls.color, "citation": cls.citation, "default_lr": cls.default_lr,
                "nonnegative": cls.nonnegative, "log_space": cls.log_space}

    def query(self, tokens: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def key(self, tokens: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class ProjectedFeatureMap(FeatureMap):
    """``φ(Wx + c)``: a linear projection per role (and key position), then ``phi``."""

    def __init__(self, m, rank, slots=1, heads=1, key_positions=1, hidden=64,
                 init_scale=1.0, vocabulary=None) -> None:
        super().__init__(m, rank, slots, heads, key_positions, hidden, init_scale, vocabulary)
        d = self.projection_dim(rank, m)
        feat = self.projection_is_feature_axis
        self.q_proj = StackedLinear(slots, m, d, heads, feature_out=feat, init_scale=init_scale)
        self.k_proj = StackedLinear(slots * key_positions, m, d, heads * key_positions,
                                    feature_out=feat, init_scale=init_scale)

    projection_is_feature_axis: ClassVar[bool] = True

    @classmethod
    def projection_dim(cls, rank: int, m: int) -> int:
        return rank

    def phi(self, u: torch.Tensor) -> torch.Tensor:
        """Features (or log-features) of projected inputs ``u [..., d]``."""
        raise NotImplementedError

    def query(self, tokens):
        return self.phi(self.q_proj(tokens))

    def key(self, tokens):
        k = self.phi(self.k_proj(tokens))
        return k.reshape(self.slots, self.key_positions, *k.shape[1:])


@register_feature_map
class Elu1(ProjectedFeatureMap):
    """``φ(u) = elu(u) + 1``: Katharopoulos et al., *Transformers are RNNs*, 2020,
    https://arxiv.org/abs/2006.16236."""

    name = "elu1"
    color = "#2ca02c"
    citation = "Katharopoulos et al. 2020, arXiv:2006.16236"

    def phi(self, u):
        return F.elu(u) + 1


@register_feature_map
class Relu(ProjectedFeatureMap):
    """``φ(u) = relu(u)``: nonnegative, may give an all-zero row (as in Qin et al.,
    *cosFormer*, 2022, https://arxiv.org/abs/2202.08791)."""

    name = "relu"
    color = "#9467bd"
    citation = "Qin et al. 2022, arXiv:2202.08791"

    def phi(self, u):
        return F.relu(u)


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
    independently.
    """

    name = "favor"
    log_space = True
    projection_is_feature_axis = False
    color = "#8c564b"
    citation = "Choromanski et al. 2021, arXiv:2009.14794"
    orthogonal: ClassVar[bool] = True

    def __init__(self, m, rank, slots=1, heads=1, key_positions=1, hidden=64,
                 init_scale=1.0, vocabulary=None) -> None:
        super().__init__(m, rank, slots, heads, key_positions, hidden, init_scale, vocabulary)
        self.omega = _OmegaBuffer(slots, heads, m, rank, self.orthogonal)

    @classmethod
    def projection_dim(cls, rank, m):
        return m

    def phi(self, u):
        return self.log_phi_with(u, self.omega.omega)

    def key(self, tokens):
        u = self.k_proj(tokens).reshape(self.slots, self.key_positions, tokens.shape[-2], -1)
        return self.log_phi_with(u, self.omega.omega[:, None])

    @staticmethod
    def log_phi_with(u: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
        r = omega.shape[-1]
        return u @ omega - 0.5 * (u * u).sum(-1, keepdim=True) - 0.5 * math.log(r)


@register_feature_map
class FavorIid(Favor):
    """:class:`Favor` with independent ``ω_i ~ N(0, I_d)`` (no orthogonal blocks)."""

    name = "favor_iid"
    color = "#c49c94"
    orthogonal = False


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


@register_feature_map
class Hedgehog(ProjectedFeatureMap):
    """``φ(u) = softmax([u, −u])`` over ``2⌈r/2⌉`` entries, first ``r`` kept (log space):
    Zhang et al., *The Hedgehog & the Porcupine*, 2024, https://arxiv.org/abs/2402.04347."""

    name = "hedgehog"
    color = "#e377c2"
    citation = "Zhang et al. 2024, arXiv:2402.04347"
    log_space = True
    maskable = False  # the softmax normalises over all 2⌈r/2⌉ entries
    projection_is_feature_axis = False

    @classmethod
    def projection_dim(cls, rank, m):
        return (rank + 1) // 2

    def phi(self, u):
        return torch.log_softmax(torch.cat([u, -u], dim=-1), dim=-1)[..., : self.rank]


@register_feature_map
class Taylor(ProjectedFeatureMap):
    """Based's second-order Taylor map with ``u = Wx``: Arora et al., *Simple linear
    attention language models balance the recall-throughput tradeoff*, 2024,
    https://arxiv.org/abs/2402.18668.

    ``φ(u) = [1, u, u_i²/√2 (i), u_i·u_j (i < j)]``: the symmetric part of ``u⊗u`` once,
    so ``φ(u)·φ(w) = 1 + <u,w> + <u,w>²/2 > 0`` with ``1 + d + d(d + 1)/2`` features (the
    full ``u⊗u`` would count ``d²`` for a kernel of no higher rank).  Features are signed,
    the kernel positive.  A request for rank r uses the largest d with
    ``1 + d + d(d + 1)/2 ≤ r``.
    """

    name = "taylor"
    maskable = False
    projection_is_feature_axis = False
    color = "#7f7f7f"
    citation = "Arora et al. 2024, arXiv:2402.18668"

    @staticmethod
    def size(d: int) -> int:
        return 1 + d + d * (d + 1) // 2

    @classmethod
    def projection_dim(cls, rank, m):
        d = 0
        while cls.size(d + 1) <= rank:
            d += 1
        return d

    @classmethod
    def output_size(cls, rank):
        return cls.size(cls.projection_dim(rank, 0))

    def phi(self, u):
        d = u.shape[-1]
        i, j = torch.triu_indices(d, d, device=u.device)
        scale = torch.ones(len(i), dtype=u.dtype, device=u.device).masked_fill(i == j, 1 / math.sqrt(2))
        ones = u.new_ones(*u.shape[:-1], 1)
        return torch.cat([ones, u, u[..., i] * u[..., j] * scale], dim=-1)


class MLPFeatureMap(FeatureMap):
    """``φ = g(MLP(x))`` with separate MLPs for queries and (each position's) keys."""

    def __init__(self, m, rank, slots=1, heads=1, key_positions=1, hidden=64,
                 init_scale=1.0, vocabulary=None) -> None:
        super().__init__(m, rank, slots, heads, key_positions, hidden, init_scale, vocabulary)
        self.q_mlp = StackedMLP(slots, m, hidden, rank, heads, feature_out=True, init_scale=init_scale)
        self.k_mlp = StackedMLP(slots * key_positions, m, hidden, rank, heads * key_positions,
                                feature_out=True, init_scale=init_scale)

    def query(self, tokens):
        return self.q_mlp(tokens)

    def key(self, tokens):
        k = self.k_mlp(tokens)
        return k.reshape(self.slots, self.key_positions, *k.shape[1:])


@register_feature_map
class MlpExp(MLPFeatureMap):
    """``φ(x) = exp(MLP(x))``: positive, generalises to unseen tokens (log space); a
    learned positive map in the spirit of Hedgehog's trained feature maps
    (https://arxiv.org/abs/2402.04347)."""

    name = "mlp_exp"
    log_space = True
    color = "#d62728"
    citation = "learned exp-MLP map (cf. arXiv:2402.04347)"


@register_feature_map
class Signed(MLPFeatureMap):
    """``φ(x) = MLP(x)``, unconstrained: the kernel may be negative (the loophole)."""

    name = "signed"
    nonnegative = False
    color = "#bcbd22"
    citation = "unconstrained features (the signed loophole)"


@register_feature_map
class Table(FeatureMap):
    """A free positive vector per distinct token: ``φ(x) = exp(θ[x])`` (log space).

    The most expressive map — what the theorem's "arbitrary φ" allows — but it
    only knows the tokens of its vocabulary (a finite family).
    """

    name = "table"
    log_space = True
    default_lr = 3e-2  # a free parameter per token moves slowly at 3e-3
    color = "#1f77b4"
    citation = "an arbitrary nonnegative map (the lower bound's model)"
    exp_init: ClassVar[bool] = False  # θ holds log-features, initialised N(0, (init_scale/2)²)

    def __init__(self, m, rank, slots=1, heads=1, key_positions=1, hidden=64,
                 init_scale=1.0, vocabulary=None) -> None:
        super().__init__(m, rank, slots, heads, key_positions, hidden, init_scale, vocabulary)
        if vocabulary is None:
            raise KernelgapError("the 'table' feature map needs a vocabulary (the family's tokens)")
        vocab = np.ascontiguousarray(vocabulary, dtype=np.uint8)
        self._rows = {row.tobytes(): i for i, row in enumerate(vocab)}
        self.register_buffer("vocabulary", torch.from_numpy(vocab.copy()))
        v = len(vocab)
        self.q_table = _TableParam(slots, heads, v, rank, init_scale, self.exp_init)
        self.k_table = _TableParam(slots * key_positions, heads * key_positions, v, rank, init_scale,
                                   self.exp_init)
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def rows(self, tokens: torch.Tensor) -> torch.Tensor:
        """Vocabulary row of each token ``[T, m]``; unknown tokens are an error.  The rows of the
        last few token tensors are kept (the same tensors come back every training step)."""
        hit = self._cache.get(id(tokens))
        if hit is not None and hit[0] is tokens:
            return hit[1]
        bits = tokens.detach().to("cpu", torch.uint8).numpy()
        try:
            ids = [self._rows[row.tobytes()] for row in np.ascontiguousarray(bits)]
        except KeyError:
            raise KernelgapError(f"the '{self.name}' map met a token outside its vocabulary") from None
        out = torch.tensor(ids, dtype=torch.long, device=tokens.device)
        if len(self._cache) >= 8:
            self._cache.clear()
        self._cache[id(tokens)] = (tokens, out)
        return out

    def query(self, tokens):
        return self.q_table.theta[:, self.rows(tokens)]

    def key(self, tokens):
        k = self.k_table.theta[:, self.rows(tokens)]
        return k.reshape(self.slots, self.key_positions, *k.shape[1:])


@register_feature_map
class SignedTable(Table):
    """A free real vector per distinct token, ``φ(x) = θ[x]``: any rank-r kernel, signs included.

    The signed counterpart of ``table`` (the most expressive signed map on a
    finite family).  It starts at exactly the features of ``table``'s
    initialisation, ``θ = exp(θ₀)`` (a positive kernel), and is then trained
    without a sign constraint, so it separates what signs buy from how hard a
    kernel that starts with denominators of both signs is to train (``signed``).
    """

    name = "signed_table"
    log_space = False
    nonnegative = False
    default_lr = 3e-3  # not table's 3e-2: linear-space features move further per step (docs/experiments.md)
    color = "#17becf"
    citation = "an arbitrary real map (the signed loophole, finite families)"
    exp_init = True


class _TableParam(StackedModule):
    def __init__(self, slots, heads, v, r, init_scale, exp_init=False):
        super().__init__(slots, heads)
        self.theta = nn.Parameter(torch.zeros(slots, v, r))
        self.init_scale, self.exp_init = init_scale, exp_init

    def init_member(self, member, gen, rank):
        cols = min(rank or self.theta.shape[-1], self.theta.shape[-1])
        with torch.no_grad():
            for s in self.member_slots(member):
                normal_(self.theta[s, :, :cols], 0.5 * self.init_scale, gen)
                if self.exp_init:
                    self.theta[s, :, :cols].exp_()
