"""Feature maps for kernel attention, one module and one class each, in a registry (docs/theory.md,
"The models"; docs/adding-a-feature-map.md).

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
``color`` (figures), ``citation`` (paper and arXiv link),
:meth:`FeatureMap.output_size` (the features it really uses for a requested rank) and
``order`` (its place where the maps are listed).  The built-in maps:

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

The base class and the registry are :mod:`.base`; every other module of this package holds
one map and is imported here, found by listing the package, so a new map is a new module
and nothing else (it joins :data:`FEATURE_MAPS` in its :attr:`FeatureMap.order`).
"""

import importlib
import pkgutil

from .base import (
    FEATURE_MAPS,
    FeatureMap,
    MLPFeatureMap,
    ProjectedFeatureMap,
    feature_map_class,
    register_feature_map,
    vocabulary_ids,
)

#: The modules of this package that hold no map.
NOT_MAPS = frozenset({"base"})

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in NOT_MAPS:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "FEATURE_MAPS",
    "FeatureMap",
    "MLPFeatureMap",
    "ProjectedFeatureMap",
    "feature_map_class",
    "register_feature_map",
    "vocabulary_ids",
]
