"""Stacked training of attention models on Min-IP families (docs/experiments.md, "Training recipe").

The names below are imported when first used (PEP 562), so that :mod:`.config` — how a run
is made and checked — loads without the trainer (and torch).
"""

from .. import lazy_names

_CONFIG = (
    "DTYPES",
    "FALLBACK_LR",
    "SOFTMAX_LR",
    "FamilySpec",
    "RunConfig",
    "TrainConfig",
    "config_hash",
    "default_model",
    "file_sha256",
    "run_identity",
)
_TRAINER = (
    "MemberResult",
    "configure_worker",
    "run_record",
    "train_records",
    "train_runs",
    "train_stack",
    "train_watched",
)
_PROGRESS = ("TrainingProgress", "watch")
#: Each public name and the module of this package that defines it.
_WHERE = {
    **dict.fromkeys(_CONFIG, "config"),
    **dict.fromkeys(_TRAINER, "trainer"),
    **dict.fromkeys(_PROGRESS, "progress"),
}

__all__ = sorted(_WHERE)

__getattr__ = lazy_names(__name__, _WHERE, globals())
