"""Stacked training of attention models on Min-IP families (docs/experiments.md, "Training recipe")."""

from .config import (
    DEFAULT_LR, DTYPES, FALLBACK_LR, FamilySpec, RunConfig, TrainConfig, config_hash, default_lr, default_model,
)
from .trainer import (
    MemberResult, configure_worker, run_record, train_records, train_runs, train_stack,
)

__all__ = [
    "DEFAULT_LR", "DTYPES", "FALLBACK_LR", "FamilySpec", "MemberResult", "RunConfig", "TrainConfig", "config_hash",
    "configure_worker", "default_lr", "default_model", "run_record", "train_records", "train_runs", "train_stack",
]
