"""The base of every feature map, and the registry the maps join (docs/adding-a-feature-map.md)."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from ...errors import KernelgapError

#: Every registered map by name, in listing order (:attr:`FeatureMap.order`, then name).
FEATURE_MAPS: dict[str, type[FeatureMap]] = {}


def register_feature_map(cls: type[FeatureMap]) -> type[FeatureMap]:
    """Class decorator: enter ``cls`` under ``cls.name``, in its place; a second class of a name
    already taken (a copied module left unrenamed) is refused."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"feature map {cls.__qualname__} has no name")
    other = FEATURE_MAPS.get(name)
    if other is not None and (other.__module__, other.__qualname__) != (cls.__module__, cls.__qualname__):
        raise TypeError(f"feature map {name!r} is registered twice: {other.__module__} and {cls.__module__}")
    FEATURE_MAPS[name] = cls
    ordered = sorted(FEATURE_MAPS.items(), key=lambda item: (item[1].order, item[0]))
    FEATURE_MAPS.clear()
    FEATURE_MAPS.update(ordered)
    return cls


def feature_map_class(name: str) -> type[FeatureMap]:
    if name not in FEATURE_MAPS:
        raise KernelgapError(f"unknown feature map {name!r}; choose from {', '.join(sorted(FEATURE_MAPS))}")
    return FEATURE_MAPS[name]


class FeatureMap(nn.Module):
    """``φ`` of a projected head: :meth:`phi` maps ``u [S, T, d]`` (queries) or ``u [S, P, T, d]``
    (keys at ``P`` positions) to ``[..., T, r]`` features (log-features when ``log_space``);
    ``S``: slots (members × heads), ``r`` = :meth:`output_size`.  ``nonnegative``: the kernel
    is ``≥ 0``; ``maskable``: a rank-r model equals a wider one with features masked."""

    name: ClassVar[str]
    #: Place of the map in every listing of the maps (ties by name; the built-ins: 10 … 100).
    order: ClassVar[float] = float("inf")
    log_space: ClassVar[bool] = False
    nonnegative: ClassVar[bool] = True
    maskable: ClassVar[bool] = True
    #: Adam learning rate of the calibrated recipe; the map's colour in figures, its paper.
    default_lr: ClassVar[float] = 3e-3
    color: ClassVar[str] = "black"
    citation: ClassVar[str] = ""
    #: What gives the map its input ``u``: ``"linear"`` (``Wx + c``), ``"mlp"`` (``MLP(x)``)
    #: or None (no projection: a free row ``θ[id]`` per distinct token, by token id).
    projection: ClassVar[str | None] = "linear"
    #: Whether the projection's output axis is the feature axis (rank-r members use its first r).
    projection_is_feature_axis: ClassVar[bool] = True
    #: Table maps: the rows start at ``exp(θ₀)`` instead of ``θ₀ ~ N(0, (init_scale/2)²)``.
    exp_init: ClassVar[bool] = False
    #: Table maps: ``θ₀`` is drawn at this multiple of the model's ``init_scale``.
    table_init_scale: ClassVar[float] = 1.0
    #: The calibrated recipe's model fields and ``mse_steps``/``max_steps``, for a run that
    #: leaves them unset (docs/experiments.md, "Training recipe").
    recipe_model: ClassVar[dict] = {}
    recipe_schedule: ClassVar[dict] = {}
    #: Whether a run may start from a table trained first (``train.distill``; the teacher is not).
    distillable: ClassVar[bool] = True
    #: Whether a run may start from a wider model of the map cut to its rank (``train.prune_from``).
    prunable: ClassVar[bool] = False
    #: The ``prune_from`` of the calibrated recipe for a run at length N > 3 with no more
    #: features than queries, where it sets none (1: off; docs/experiments.md, "Training recipe").
    recipe_prune_from: ClassVar[float] = 1.0

    @classmethod
    def build(cls, m: int, rank: int, slots: int = 1, heads: int = 1) -> FeatureMap:
        """The map of a stack of ``slots`` heads (``heads`` per member) of rank ``rank`` on
        ``m``-bit tokens; only a map with state of its own reads the arguments."""
        return cls()

    @classmethod
    def layer(cls, m: int, rank: int) -> FeatureMap:
        """The map of one attention layer of rank ``rank`` on width-``m`` inputs, ``phi`` of
        ``u [B, N, d]``; state of its own is drawn from torch's global generator."""
        return cls.build(m, rank)

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


class TruncatedFeatureMap(ProjectedFeatureMap):
    """A projected map that computes more entries than a rank asks for and keeps the first
    ``rank`` (built for its rank; a rank-r model is no wider one masked)."""

    maskable = False
    projection_is_feature_axis = False

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    @classmethod
    def build(cls, m, rank, slots=1, heads=1):
        return cls(rank)


class MLPFeatureMap(FeatureMap):
    """``φ = g(u)`` of a two-layer MLP ``u = MLP(x)`` (one per role and key position,
    ``d = r``); ``g`` is the identity on log-features (``exp``) or on features."""

    projection = "mlp"

    def phi(self, u):
        return u


def vocabulary_ids(vocabulary: torch.Tensor, tokens: torch.Tensor, name: str = "table") -> torch.Tensor:
    """Row of each token ``[T, m]`` in ``vocabulary [V, m]`` (uint8 bits), on ``tokens``' device,
    by one ``torch.unique`` over both; a token outside it is a one-line error."""
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
