"""The Min-IP task: targets, metrics and families (SPEC §1, §5)."""

from .families import FAMILIES, build_family, family_names, iter_exhaustive_index, pool_split
from .family import Family, load_family, save_family
from .minip import EXACT_THRESHOLD, Metrics, MetricsAccumulator, error_metrics, targets

__all__ = [
    "EXACT_THRESHOLD", "FAMILIES", "Family", "Metrics", "MetricsAccumulator",
    "build_family", "error_metrics", "family_names", "iter_exhaustive_index",
    "load_family", "pool_split", "save_family", "targets",
]
