"""Linear attention with a feature map of ``fla-core`` (flash-linear-attention), for ``kernelgap probe``.

    kernelgap probe kernelgap.probe.zoo:FlaLinearAttention --kwargs '{"feature_map": "hedgehog"}'

fla ships its feature maps as modules ``φ(x)`` (Hedgehog, T2R, DPFP, …) for its
own attention layers, whose kernels need a GPU; this wraps one in plain
normalized linear attention, ``y_i = Σ_j <φ_q(q_i), φ_k(k_j)> v_j / Σ_j <φ_q(q_i), φ_k(k_j)>``,
with ``rank`` the width the map is given (``pip install 'kernelgap[zoo]'``).  Queries and keys
get a map each, as fla's own ``LinearAttention`` builds them (``tie_feature_map_qk=False``, its
default): a map with a trainable layer (Hedgehog, T2R) is two layers, not one shared.
``map_layer=False`` (an ablation, docs/experiments.md "Why a library layer fails") replaces
that layer by the identity: Hedgehog is then ``softmax([2u, −2u])`` of the projection ``u``.  The feature
count is the map's output size, read off the map (``kernelgap_features``): Hedgehog gives
``2·rank`` features, T2R and ReLU ``rank``, DPFP ``2·ν·rank`` (256 at rank 32), Taylor
``1 + rank + rank(rank+1)/2`` (its kernel ``1 + t + t²/2`` of ``t = <q, k>/√rank`` is positive,
though some of its features are negative).  An unknown map is refused naming those of :data:`MAPS`.
"""

import torch
from fla.modules import feature_map as fla_maps  # the optional extra: a missing library is a skip
from torch import nn

#: fla's maps by kernelgap's name for them (each runs on a CPU).
MAPS = {
    "hedgehog": "HedgehogFeatureMap",
    "t2r": "T2RFeatureMap",
    "dpfp": "DPFPFeatureMap",
    "taylor": "TaylorFeatureMap",
    "relu": "ReLUFeatureMap",
}
#: The maps fla builds without the head width (elementwise).
WIDTHLESS = frozenset({"relu"})


class FlaLinearAttention(nn.Module):
    kernelgap_interface = "layer"

    def __init__(self, d_model: int, rank: int, feature_map: str = "hedgehog", map_layer: bool = True) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d_model, rank), nn.Linear(d_model, rank), nn.Linear(d_model, d_model)
        if feature_map not in MAPS:
            raise ValueError(f"no fla feature map {feature_map!r} here; choose from {', '.join(MAPS)}")
        cls = getattr(fla_maps, MAPS[feature_map])
        self.phi_q, self.phi_k = ((cls() if feature_map in WIDTHLESS else cls(rank)) for _ in "qk")
        if not map_layer:
            if not hasattr(self.phi_q, "layer"):
                raise ValueError(f"fla's {feature_map} map has no trainable layer to leave out (map_layer=False)")
            self.phi_q.layer, self.phi_k.layer = nn.Identity(), nn.Identity()

    def kernelgap_features(self, rank: int) -> int:
        """The map's output size on a head of width ``rank`` (one forward of a zero head)."""
        with torch.enable_grad():
            return int(self.phi_q(torch.zeros(1, 1, rank)).shape[-1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = self.phi_q(self.q(x)), self.phi_k(self.k(x))
        weights = q @ k.transpose(-1, -2)  # [B, N, N], nonnegative for these maps
        return weights @ self.v(x) / weights.sum(-1, keepdim=True).clamp_min(1e-6)
