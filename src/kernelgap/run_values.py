"""A run's seed, device and loss settings, checked by their values alone: before torch is imported (a
refusal costs no torch import), by the run's config models and by the command line alike.
Whether a device exists here is :func:`kernelgap.models.devices.resolve_device`'s question.
A type whose pydantic errors would not say what it takes says it with
:class:`~kernelgap.validation.Says`."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, StringConstraints

from .limits import MAX_LR, MAX_PRUNE_FROM
from .validation import Int, Number, Says

#: Seeds run from 0 to ``2^64 − 1``: every generator a run seeds takes them (numpy's
#: ``default_rng`` refuses a negative seed, torch's ``manual_seed`` one of 2^64 or more).
SEED_LIMIT = 2**64
SEED_TEXT = " must be an integer in 0..2^64 − 1, got {value}"
Seed = Annotated[Int, Field(ge=0, lt=SEED_LIMIT), Says(SEED_TEXT)]


def seed_problem(value: int) -> str | None:
    """Why ``value`` is not a :data:`Seed` (the text after its name), or None."""
    return None if 0 <= value < SEED_LIMIT else SEED_TEXT.format(value=value)


#: The device types a model trains on, each alone or with an index (``cuda:1``); torch names
#: others (``meta``, ``hpu``…) that hold no data or that kernelgap never trains on.
TRAINING_DEVICES = ("cpu", "cuda", "mps")


#: A device's spelling: one of :data:`TRAINING_DEVICES`, alone or with an index of up to 4 digits.
DEVICE_PATTERN = f"^({'|'.join(TRAINING_DEVICES)})(:[0-9]{{1,4}})?$"


def device_problem(device: str) -> str | None:
    """Why ``device`` does not name a device a model trains on (its spelling alone, without
    asking torch: whether it exists here is :func:`kernelgap.models.devices.resolve_device`),
    or None."""
    if re.fullmatch(DEVICE_PATTERN, device):
        return None
    return f"{device!r:.60} is not a device to train on (cpu, cuda, cuda:N or mps)"


#: A device's name, checked by its spelling (:data:`DEVICE_PATTERN`).
Device = Annotated[
    str, StringConstraints(pattern=DEVICE_PATTERN), Says("must be cpu, cuda, cuda:N or mps, got {shown:.60}")
]


#: The power of the power-mean loss (``train.power``) and the error a member stops below (``train.stop_below``).
Power = Annotated[Number, Field(ge=1), Says("must be a finite number ≥ 1, got {value}")]
StopBelow = Annotated[Number, Field(ge=0), Says("must be a finite number ≥ 0 (0: never stop early), got {value}")]
#: How many times its rank a pruned run starts (``train.prune_from``; 1: off).
PruneFrom = Annotated[
    Number, Field(ge=1, le=MAX_PRUNE_FROM), Says(f"must be a number from 1 (off) to {MAX_PRUNE_FROM}, got {{value}}")
]


#: Adam's learning rate (``train.lr``): finite, > 0 and at most :data:`~kernelgap.limits.MAX_LR`.
LearningRate = Annotated[
    Number, Field(gt=0, le=MAX_LR), Says(f"must be a finite number in (0, {MAX_LR:g}], got {{value}}")
]
