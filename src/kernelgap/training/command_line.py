"""The run of ``kernelgap train``'s flags: the same models, defaults and checks as a sweep
file's run (a flag not given is its spec's default), validated before torch is imported."""

from __future__ import annotations

from ..args import key_values
from ..models.specs import FIELDS_ONLY, every_field
from .config import EXPLICIT_MODEL_KEYS, FamilySpec, RunConfig, TrainConfig

#: The model fields (of every kind) and the schedule's that ``train`` takes as flags.
MODEL_FLAGS = ("kind", "feature_map", "rank", "readout", "d_value", "temperature")
TRAIN_FLAGS = ("lr", "mse_steps", "max_steps", "power", "restarts", "distill", "prune_from", "device")


def train_fields() -> dict:
    """The fields ``kernelgap train`` takes as flags, in its ``--help``'s order."""
    model, train = every_field(), TrainConfig.model_fields
    return {
        **{name: model[name] for name in MODEL_FLAGS},
        "seed": RunConfig.model_fields["seed"],
        **{name: train[name] for name in TRAIN_FLAGS},
    }


def command_line_run(family: str, params: list[str], given: dict, early_stop: bool = True) -> RunConfig:
    """The validated run of ``kernelgap train``'s flags (``given``: the fields given, by name),
    every field checked before torch is imported."""
    from ..task.registry import check_family_argument

    check_family_argument(family, key_values(params))  # a family file loaded, parameters checked
    model = {name: given[name] for name in MODEL_FLAGS if name in given}
    train = {name: given[name] for name in TRAIN_FLAGS if name in given}
    raw = {
        "family": FamilySpec.named_or_file(family, params),
        "model": model,
        "train": train if early_stop else {**train, "stop_below": None},
        **({"seed": given["seed"]} if "seed" in given else {}),
    }
    context = {EXPLICIT_MODEL_KEYS: set(model) - {"kind"}}
    RunConfig.parse(raw, context={**context, FIELDS_ONLY: True})
    return RunConfig.parse(raw, context=context).validate()
