"""The built-in map of a probed module's kernel, as a module in the same wrapper.

A module that fails may fail for its kernel or for its implementation (initialisation,
scaling, normalisation).  Where kernelgap has a map of the same kernel, the probe also
trains :class:`BuiltinMapAttention` — that map in plain normalized linear attention,
behind the ``layer`` interface, so the same embedding and readout — at the module's true
feature count (docs/experiments.md, "Probe"); :data:`TWINS` says which map, in one place.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import KernelgapError
from ..models.feature_maps import FEATURE_MAPS, feature_map_class

#: Built-in map of a module's kernel: (class path, constructor arguments it must carry) → map,
#: first match wins (None: no built-in map has that kernel).  A module of its own may declare
#: ``kernelgap_kernel = "MAP"`` instead.
TWINS: list[tuple[str, dict, str | None]] = [
    ("kernelgap.probe.examples.Elu1LinearAttention", {}, "elu1"),
    ("kernelgap.probe.examples.DecayedLinearAttention", {}, "elu1"),  # γ ≡ 1 is elu1
    ("kernelgap.probe.zoo.FlaLinearAttention", {"feature_map": "t2r"}, "relu"),  # relu(Wx)
    ("kernelgap.probe.zoo.FlaLinearAttention", {"feature_map": "relu"}, "relu"),
    ("kernelgap.probe.zoo.FlaLinearAttention", {"feature_map": "taylor"}, "taylor"),  # 1 + t + t²/2
    ("kernelgap.probe.zoo.FlaLinearAttention", {"feature_map": "dpfp"}, "dpfp"),  # parameter-free: the same map
    ("kernelgap.probe.zoo.FlaLinearAttention", {}, "hedgehog"),  # softmax([Wx, −Wx])
    # generalized attention: relu(ωᵀx) features (its default kernel_fn), not FAVOR+'s exp
    ("performer_pytorch.performer_pytorch.SelfAttention", {"generalized_attention": True}, "relu"),
    ("performer_pytorch.performer_pytorch.SelfAttention", {}, "favor"),  # FAVOR+, orthogonal ω
]
#: The attribute by which a module names the built-in map of its kernel.
KERNEL_ATTR = "kernelgap_kernel"
#: Where the twin lives, as a probe target.
TWIN_TARGET = "kernelgap.probe.twin:BuiltinMapAttention"


def checked_twin(name: str, where: str = "--kernel") -> str:
    """``name`` where it is a registered map with a linear projection (one a twin can hold),
    else a one-line error naming those."""
    accepted = [n for n, c in FEATURE_MAPS.items() if c.projection == "linear"]
    if name not in accepted:
        raise KernelgapError(f"{where}: no built-in map {name!r} a twin can hold; choose from {', '.join(accepted)}")
    return name


def twin_map(cls: type, kwargs: dict) -> str | None:
    """The built-in map of ``cls``'s kernel with these constructor keyword arguments (``kwargs``
    and an argument map's constants: the first row of :data:`TWINS` whose arguments they
    carry), or None."""
    declared = getattr(cls, KERNEL_ATTR, None)
    if isinstance(declared, str):
        return checked_twin(declared, f"{cls.__name__}.{KERNEL_ATTR}")
    path = f"{cls.__module__}.{cls.__qualname__}"
    for where, needs, name in TWINS:
        if where == path and all(kwargs.get(k) == v for k, v in needs.items()):
            return name
    return None


class BuiltinMapAttention(nn.Module):
    """``y_i = W_o Σ_j α_ij v_j / Σ_j α_ij`` with ``α = <φ(W_q x_i), φ(W_k x_j)>`` and φ a
    registered map with a linear projection (``elu1``, ``relu``, ``hedgehog``, ``dpfp``, ``taylor``,
    ``favor``, ``favor_iid``); maps in log space are normalized by a softmax of ``log α``."""

    kernelgap_interface = "layer"

    def __init__(self, d_model: int, rank: int, feature_map: str = "elu1") -> None:
        super().__init__()
        cls = feature_map_class(feature_map)
        if cls.projection != "linear":
            raise ValueError(f"feature map {feature_map!r} has no linear projection to put in a layer")
        self.cls, self.rank = cls, rank
        d = cls.projection_dim(rank, d_model)
        self.q, self.k = nn.Linear(d_model, d), nn.Linear(d_model, d)
        self.v, self.o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.phi = cls.layer(d_model, rank)  # after the projections: state drawn from the global generator

    def kernelgap_features(self, rank: int) -> int:
        return self.cls.output_size(rank)

    def features(self, u: torch.Tensor) -> torch.Tensor:
        return self.phi.phi(u)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.features(self.q(x)), self.features(self.k(x)), self.v(x)
        if self.cls.log_space:
            log_alpha = torch.logsumexp(q[:, :, None, :] + k[:, None, :, :], dim=-1)  # [B, N, N]
            return self.o(torch.softmax(log_alpha, dim=-1) @ v)
        alpha = q @ k.transpose(-1, -2)
        return self.o(alpha @ v / alpha.sum(-1, keepdim=True).clamp_min(1e-6))
