"""Attention models: feature maps, kernel and softmax heads, constructions (docs/theory.md, "The models")."""

from .attention import AttentionModel, Tables
from .build import build_model
from .devices import resolve_device
from .feature_maps import FEATURE_MAPS, FeatureMap, feature_map_class
from .specs import (
    KernelSpec,
    ModelSpec,
    ModuleModelSpec,
    SoftmaxSpec,
    feature_count,
    model_spec,
    signed_kernel,
    spec_rank,
)

__all__ = [
    "FEATURE_MAPS",
    "AttentionModel",
    "FeatureMap",
    "KernelSpec",
    "ModelSpec",
    "ModuleModelSpec",
    "SoftmaxSpec",
    "Tables",
    "build_model",
    "feature_count",
    "feature_map_class",
    "model_spec",
    "resolve_device",
    "signed_kernel",
    "spec_rank",
]
