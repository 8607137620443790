"""Attention models: feature maps, kernel and softmax heads, constructions (docs/theory.md, "The models").

The names below are imported when first used (PEP 562), so that :mod:`.specs` and
:mod:`.module_spec` — what a run's config is checked with — load without torch.
"""

from .. import lazy_names

#: Each public name and the module of this package that defines it.
_WHERE = {
    "AttentionModel": "attention",
    "Tables": "attention",
    "build_model": "build",
    "resolve_device": "devices",
    "FEATURE_MAPS": "feature_maps",
    "FeatureMap": "feature_maps",
    "feature_map_class": "feature_maps",
    "KernelSpec": "specs",
    "ModelSpec": "specs",
    "ModuleModelSpec": "specs",
    "SoftmaxSpec": "specs",
    "model_spec": "specs",
}

__all__ = sorted(_WHERE)

__getattr__ = lazy_names(__name__, _WHERE, globals())
