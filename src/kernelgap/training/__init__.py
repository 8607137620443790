"""Stacked training of attention models on Min-IP families (docs/experiments.md, "Training recipe").

The names below are imported when first used (PEP 562), so that :mod:`.config` — how a run
is made and checked — loads without the trainer (and torch).
"""

import importlib

_CONFIG = (
    "DTYPES",
    "FALLBACK_LR",
    "SOFTMAX_LR",
    "FamilySpec",
    "RunConfig",
    "TrainConfig",
    "config_hash",
    "default_lr",
    "default_model",
    "file_sha256",
    "run_identity",
)
_TRAINER = ("MemberResult", "configure_worker", "run_record", "train_records", "train_runs", "train_stack")
#: Each public name and the module of this package that defines it.
_WHERE = {**dict.fromkeys(_CONFIG, "config"), **dict.fromkeys(_TRAINER, "trainer")}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
