"""Attention models: feature maps, kernel and softmax heads, constructions (SPEC §2–3)."""

from .attention import AttentionModel, ModelSpec, Tables, build_model, feature_count
from .feature_maps import FEATURE_MAPS, FeatureMap, feature_map_class

__all__ = [
    "FEATURE_MAPS", "AttentionModel", "FeatureMap", "ModelSpec", "Tables",
    "build_model", "feature_count", "feature_map_class",
]
