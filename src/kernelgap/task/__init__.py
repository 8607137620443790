"""The Min-IP task: targets, metrics and families (docs/theory.md, "The task").

Importing the package registers every family builder: each module of :mod:`.families`
(exhaustive, pool, witness codes, OOD pools, ladder, layer), found by listing it.
"""

from . import families  # noqa: F401  (imports every builder module, and each registers its builders)
from .families.exhaustive import iter_exhaustive_index, pool_split
from .family import AnyFamily, Family, ProductFamily, as_sequences
from .family_file import family_from_json, family_to_json, load_family, parse_family_bytes, save_family
from .minip import EXACT_THRESHOLD, error_metrics, targets
from .registry import FAMILIES, build_family, family_names, family_parameters, parse_params

__all__ = [
    "EXACT_THRESHOLD",
    "FAMILIES",
    "AnyFamily",
    "Family",
    "ProductFamily",
    "as_sequences",
    "build_family",
    "error_metrics",
    "family_from_json",
    "family_names",
    "family_parameters",
    "family_to_json",
    "iter_exhaustive_index",
    "load_family",
    "parse_family_bytes",
    "parse_params",
    "pool_split",
    "save_family",
    "targets",
]
