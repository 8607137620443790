"""Stacked training of attention models on Min-IP families (docs/experiments.md, "Training recipe")."""

from .config import (
    DTYPES,
    FALLBACK_LR,
    SOFTMAX_LR,
    FamilySpec,
    RunConfig,
    TrainConfig,
    config_hash,
    default_lr,
    default_model,
    file_sha256,
    run_identity,
)
from .trainer import (
    MemberResult,
    configure_worker,
    run_record,
    train_records,
    train_runs,
    train_stack,
)

__all__ = [
    "DTYPES",
    "FALLBACK_LR",
    "SOFTMAX_LR",
    "FamilySpec",
    "MemberResult",
    "RunConfig",
    "TrainConfig",
    "config_hash",
    "configure_worker",
    "default_lr",
    "default_model",
    "file_sha256",
    "run_identity",
    "run_record",
    "train_records",
    "train_runs",
    "train_stack",
]
