"""Feature maps for kernel attention, one class each, in a registry (docs/theory.md, "The models").

A feature map is the function ``φ`` of an **already projected head**: the scorer
(:class:`~kernelgap.models.scorers.KernelScorer`) owns, per role (queries, and
keys at each key position), the projection ``u`` of a token — a linear map
``u = Wx + c``, an MLP ``u = MLP(x)`` or, for table maps, a free row ``u = θ[id]``
per distinct token of the family (indexed by token id) — sized by the map's class
facts (:attr:`FeatureMap.projection`, :meth:`FeatureMap.projection_dim`); the map
keeps only ``phi(u)`` and any fixed state of its own (``favor``'s random ``ω``).
Query features are ``φ_Q(x) = φ(u_Q(x)) ∈ R^r`` and key features
``φ_K^(j)(z) = φ(u_K^(j)(z))`` (one key projection per key position when
position-dependent), so the kernel is ``α(x, z) = <φ_Q(x), φ_K(z)>``.

Maps with ``log_space = True`` return **log-features** ``log φ``: the kernel is
then formed as ``log α = logsumexp_r(log φ_Q + log φ_K)`` (by a max-shifted
matmul), so exponentials never overflow — normalized attention is invariant to
a per-query scale.  ``nonnegative`` says whether the kernel is guaranteed
``≥ 0``; ``maskable`` whether a rank-r model equals a wider one with its extra
features masked (so models of different ranks can share one stacked tensor).
Each map also carries its own facts: ``default_lr`` (the calibrated learning
rate; with ``recipe_model`` and ``recipe_schedule``, the map's calibrated recipe),
``color`` (figures), ``citation`` (paper and arXiv link) and
:meth:`FeatureMap.output_size` (the features it really uses for a requested rank).

| name       | projection u      | features φ(u)                               | kernel                         |
|------------|-------------------|---------------------------------------------|--------------------------------|
| table      | θ[token], free    | exp(u)                                      | any nonnegative (finite family)|
| mlp_exp    | MLP(x)            | exp(u)                                      | nonnegative                    |
| elu1       | Wx + c            | elu(u) + 1                                  | nonnegative                    |
| relu       | Wx + c            | relu(u)                                     | nonnegative                    |
| favor      | Wx + c, d = m     | exp(ω·u − |u|²/2)/√r (orthogonal ω)         | E = exp(<u, w>)  (Performer)   |
| favor_iid  | Wx + c, d = m     | the same with iid ω ~ N(0, I)               | E = exp(<u, w>)                |
| hedgehog   | Wx + c, d = ⌈r/2⌉ | softmax([u, −u])                            | nonnegative                    |
| taylor     | Wx + c            | [1, u, sym(u⊗u)], 1 + d + d(d+1)/2 of them  | 1 + <u,w> + <u,w>²/2 (exact)   |
| signed     | MLP(x)            | u, unconstrained                            | may be negative (loophole)     |
| signed_table | θ[token], free  | u, starts at exp(θ₀)                        | any rank-r kernel (finite fam.)|
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import KernelgapError
from .stacked import StackedModule, normal_

FEATURE_MAPS: dict[str, type[FeatureMap]] = {}


def register_feature_map(cls: type[FeatureMap]) -> type[FeatureMap]:
    FEATURE_MAPS[cls.name] = cls
    return cls


def feature_map_class(name: str) -> type[FeatureMap]:
    if name not in FEATURE_MAPS:
        raise KernelgapError(f"unknown feature map {name!r}; choose from {', '.join(sorted(FEATURE_MAPS))}")
    return FEATURE_MAPS[name]


class FeatureMap(nn.Module):
    """``φ`` of a projected head: :meth:`phi` maps ``u [S, T, d]`` (queries) or
    ``u [S, P, T, d]`` (keys at ``P`` positions) to ``[..., T, r]`` features, or
    log-features when ``log_space``; ``S`` is the number of slots (members × heads),
    ``r`` = :meth:`output_size`.

    The class facts size what the scorer builds around the map: :attr:`projection`
    (which ``u``), :meth:`projection_dim` (its width ``d``), and
    :attr:`projection_is_feature_axis` (whether ``d`` is the feature axis, so a member
    of rank r initialises only its first r columns).
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
    #: What gives the map its input ``u``: ``"linear"`` (``Wx + c``), ``"mlp"`` (``MLP(x)``)
    #: or ``"table"`` (a free row ``θ[id]`` per distinct token, by token id).
    projection: ClassVar[str] = "linear"
    #: Whether the projection's output axis is the feature axis (rank-r members use its first r).
    projection_is_feature_axis: ClassVar[bool] = True
    #: Table maps: the rows start at ``exp(θ₀)`` instead of ``θ₀ ~ N(0, (init_scale/2)²)``.
    exp_init: ClassVar[bool] = False
    #: Table maps: ``θ₀`` is drawn at this multiple of the model's ``init_scale``.
    table_init_scale: ClassVar[float] = 1.0
    #: Model fields of the map's calibrated recipe, for a run that leaves them unset
    #: (:func:`kernelgap.training.config.with_recipe`; docs/experiments.md, "Training recipe").
    recipe_model: ClassVar[dict] = {}
    #: The map's calibrated ``mse_steps`` and ``max_steps``, for a run that sets neither
    #: (empty: :class:`~kernelgap.training.config.TrainConfig`'s; docs/experiments.md, "Training recipe").
    recipe_schedule: ClassVar[dict] = {}

    @classmethod
    def build(cls, m: int, rank: int, slots: int = 1, heads: int = 1) -> FeatureMap:
        """The map of a stack of ``slots`` heads (``heads`` per member) of rank ``rank`` on
        ``m``-bit tokens; only a map with state of its own reads the arguments."""
        return cls()

    @classmethod
    def projection_dim(cls, rank: int, m: int) -> int:
        """Width ``d`` of the projection ``u`` for a requested rank on ``m``-bit tokens."""
        return rank

    @classmethod
    def output_size(cls, rank: int) -> int:
        """Number of features a map built for ``rank`` produces (the kernel's rank bound)."""
        return rank

    @classmethod
    def facts(cls) -> dict:
        """What a report needs to know of the map, as plain values."""
        return {
            "name": cls.name,
            "color": cls.color,
            "citation": cls.citation,
            "default_lr": cls.default_lr,
            "nonnegative": cls.nonnegative,
            "log_space": cls.log_space,
        }

    def phi(self, u: torch.Tensor) -> torch.Tensor:
        """Features (or log-features) of projected inputs ``u [S, …, T, d]``."""
        raise NotImplementedError


class ProjectedFeatureMap(FeatureMap):
    """``φ(u)`` of a linear projection ``u = Wx + c`` (per role and key position)."""


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
    independently.  The map holds ``ω [S, d, r]``, one draw per slot (shared by the
    slot's queries and keys at every position).
    """

    name = "favor"
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

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    @classmethod
    def build(cls, m, rank, slots=1, heads=1):
        return cls(rank)

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
    """``φ = g(u)`` of a two-layer MLP ``u = MLP(x)`` (one per role and key position,
    ``d = r``); ``g`` is the identity on log-features (``exp``) or on features."""

    projection = "mlp"

    def phi(self, u):
        return u


@register_feature_map
class MlpExp(MLPFeatureMap):
    """``φ(x) = exp(MLP(x))``: positive, generalises to unseen tokens (log space: ``phi``
    returns ``log φ = u``); a learned positive map in the spirit of Hedgehog's trained
    feature maps (https://arxiv.org/abs/2402.04347)."""

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
    only knows the tokens of its vocabulary (a finite family).  There is no
    projection: the scorer holds the parameter table ``θ [S, V, r]`` over the
    family's ``V`` distinct tokens and indexes it by token id; ``phi`` returns the
    rows as log-features.
    """

    name = "table"
    log_space = True
    # Calibrated on held-out families (docs/experiments.md, "Training recipe", "Held-out families"):
    # at 3e-2, from θ₀ of std init_scale/2 or after an MSE phase, two good candidates often come to
    # share one feature (at the certified rank another is then left without one), and an MLP
    # readout extrapolates its values around the self-attention term instead of ranking candidates.
    default_lr = 1e-2
    table_init_scale = 0.25  # θ₀ ~ N(0, (init_scale/8)²): nearly flat kernels at the start
    recipe_model = {"readout": "linear"}
    recipe_schedule = {"mse_steps": 0, "max_steps": 5000}
    color = "#1f77b4"
    citation = "an arbitrary nonnegative map (the lower bound's model)"
    projection = "table"
    exp_init = False  # θ holds log-features

    def phi(self, u):
        return u


@register_feature_map
class SignedTable(Table):
    """A free real vector per distinct token, ``φ(x) = θ[x]``: any rank-r kernel, signs included.

    The signed counterpart of ``table`` (the most expressive signed map on a
    finite family).  It starts at positive features, ``θ = exp(θ₀)`` with
    ``θ₀ ~ N(0, (init_scale/2)²)`` (a positive kernel), and is then trained
    without a sign constraint, so it separates what signs buy from how hard a
    kernel that starts with denominators of both signs is to train (``signed``).
    It keeps the generic recipe (not ``table``'s).
    """

    name = "signed_table"
    log_space = False
    nonnegative = False
    default_lr = 3e-3  # linear-space features move further per step than log-features (docs/experiments.md)
    table_init_scale = 1.0
    recipe_model: ClassVar[dict] = {}
    recipe_schedule: ClassVar[dict] = {}
    color = "#17becf"
    citation = "an arbitrary real map (the signed loophole, finite families)"
    exp_init = True


def vocabulary_ids(vocabulary: torch.Tensor, tokens: torch.Tensor, name: str = "table") -> torch.Tensor:
    """Row of each token ``[T, m]`` in ``vocabulary [V, m]`` (uint8 bits), ``[T]`` on
    ``tokens``' device; a token outside the vocabulary is a one-line error naming the map.

    One sort of the vocabulary and the tokens together (``torch.unique`` over rows): rows
    that compare equal share a class, and each token takes its class's vocabulary row."""
    bits = tokens.detach().to("cpu", torch.uint8)
    vocab = vocabulary.detach().to("cpu")
    if bits.dim() != 2 or bits.shape[1] != vocab.shape[1]:
        raise KernelgapError(f"the '{name}' map met a token outside its vocabulary")
    _, inverse = torch.unique(torch.cat([vocab, bits]), dim=0, return_inverse=True)
    row_of = torch.full((len(vocab) + len(bits),), -1, dtype=torch.long)
    row_of[inverse[: len(vocab)]] = torch.arange(len(vocab))
    ids = row_of[inverse[len(vocab) :]]
    if bool((ids < 0).any()):
        raise KernelgapError(f"the '{name}' map met a token outside its vocabulary")
    return ids.to(tokens.device)
