"""Feature maps for kernel attention, one module and one class each, in a registry (docs/theory.md,
"The models"; docs/adding-a-feature-map.md).

A feature map is ``φ`` of an **already projected head** ``u`` (the scorer owns the projection,
sized by the map's class facts), so ``α(x, z) = <φ(u_Q(x)), φ(u_K(z))>``.  A map in
``log_space`` returns ``log φ``, so exponentials never overflow.  Each map carries its own
facts on its class (:class:`FeatureMap`).  The built-in maps:

| name       | projection u      | features φ(u)                               | kernel                         |
|------------|-------------------|---------------------------------------------|--------------------------------|
| table      | θ[token], free    | exp(u)                                      | any nonnegative (finite family)|
| mlp_exp    | MLP(x)            | exp(u)                                      | nonnegative                    |
| elu1       | Wx + c            | elu(u) + 1                                  | nonnegative                    |
| relu       | Wx + c            | relu(u)                                     | nonnegative                    |
| favor      | Wx + c, d = m     | exp(ω·u − |u|²/2)/√r (orthogonal ω)         | E = exp(<u, w>)  (Performer)   |
| favor_iid  | Wx + c, d = m     | the same with iid ω ~ N(0, I)               | E = exp(<u, w>)                |
| hedgehog   | Wx + c, d = ⌈r/2⌉ | softmax([u, −u])                            | nonnegative                    |
| dpfp       | Wx + c, d = ⌈r/8⌉ | s_i·s_{i−k}, s = [relu(u), relu(−u)], k ≤ 4 | nonnegative                    |
| taylor     | Wx + c            | [1, u, sym(u⊗u)], 1 + d + d(d+1)/2 of them  | 1 + <u,w> + <u,w>²/2 (exact)   |
| signed     | MLP(x)            | u, unconstrained                            | may be negative (loophole)     |
| signed_table | θ[token], free  | u, starts at exp(θ₀)                        | any rank-r kernel (finite fam.)|

Every module of this package but :mod:`.base` holds one map and is imported here, so a new
map is a new module and nothing else.
"""

import importlib
import pkgutil

from .base import (
    FEATURE_MAPS,
    FeatureMap,
    MLPFeatureMap,
    ProjectedFeatureMap,
    TruncatedFeatureMap,
    feature_map_class,
    register_feature_map,
    vocabulary_ids,
)

NOT_MAPS = frozenset({"base"})

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in NOT_MAPS:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "FEATURE_MAPS",
    "FeatureMap",
    "MLPFeatureMap",
    "ProjectedFeatureMap",
    "TruncatedFeatureMap",
    "feature_map_class",
    "register_feature_map",
    "vocabulary_ids",
]
