"""Attention models: feature maps, kernel and softmax heads, constructions (docs/theory.md, "The models")."""

from .attention import AttentionModel, ModelSpec, Tables, build_model, feature_count, signed_kernel
from .devices import resolve_device
from .feature_maps import FEATURE_MAPS, FeatureMap, feature_map_class

__all__ = [
    "FEATURE_MAPS",
    "AttentionModel",
    "FeatureMap",
    "ModelSpec",
    "Tables",
    "build_model",
    "feature_count",
    "feature_map_class",
    "resolve_device",
    "signed_kernel",
]
