"""Runs to stacks and back: build a stack, train it, its records and checkpoints.

How a stack of members trains (one loss, per-member stops, product families through their
two-candidate sequences) is in :mod:`.stack`; docs/experiments.md, "Training recipe".
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
from dataclasses import dataclass
from typing import TextIO

import numpy as np
import torch

from ..errors import KernelgapError
from ..models import AttentionModel, build_model
from ..models.external import module_failures
from ..task import EXACT_THRESHOLD, Family, ProductFamily
from .config import DTYPES, RunConfig, TrainConfig, config_hash
from .distill import distill
from .progress import Observer, staged, watch
from .prune import prune
from .restarts import restart_unfit
from .stack import MemberResult, Scored, StackTrainer, configure_worker, training_settings  # noqa: F401


def train_stack(
    model: AttentionModel,
    family: Family,
    cfg: TrainConfig,
    test_family: Family | None = None,
    observer: Observer | None = None,
) -> list[MemberResult]:
    """Train every member of ``model`` on ``family``; one result per member (a product family:
    :mod:`.product`).  ``observer`` is told the progress (it changes no number)."""
    if cfg.lr is None:
        raise ValueError("train_stack needs TrainConfig.lr; RunConfig.resolved() fills in the calibrated one")
    from .product import product_trainer, scored_of

    dtype = DTYPES[cfg.dtype]
    test = scored_of(test_family, model, dtype, cfg.device, test=True) if test_family is not None else None
    if isinstance(family, ProductFamily):
        return product_trainer(model, family, cfg, test, observer).run()
    return StackTrainer(model, Scored.of(family, dtype, cfg.device), cfg, test, observer=observer).run()


def vocabulary(family: Family, test_family: Family | None) -> np.ndarray:
    """Distinct tokens of the train and test families (the ``table`` map's rows)."""
    if test_family is None:
        return family.tokens
    return np.unique(np.concatenate([family.tokens, test_family.tokens]), axis=0)


def train_runs(runs: list[RunConfig], observer: Observer | None = None) -> list[MemberResult]:
    """Train runs that share a :meth:`RunConfig.stack_key` as one stack."""
    return _train(runs, observer)[1]


def _train(runs: list[RunConfig], observer: Observer | None = None) -> tuple[torch.nn.Module, list[MemberResult]]:
    """The trained stack and one result per run."""
    runs = [r.resolved() for r in runs]
    if len({r.stack_key() for r in runs}) != 1:
        raise ValueError("train_runs needs runs that share one stack key")

    def train_from(members: list[RunConfig], seeds: list[int], observer=observer):
        with training_settings(seed=seeds[0]):
            model, family, test_family = build_stack(members, seeds)
            first, before = None, None  # the first stage's record field and entries
            train = members[0].train
            stage = ("distilled", distill, "teacher") if train.distill else ("pruned", prune, "wide")
            if train.distill or train.prune_from > 1:  # the teacher or the wide table, watched as a first stage
                first, fit, name = stage
                before = fit(model, members, seeds, family, lambda r, s: train_from(r, s, staged(observer, name)))
            results = train_stack(model, family, train, test_family, observer)
        if first is None:
            return model, results
        return model, [
            dataclasses.replace(r, wall_time_s=r.wall_time_s + t["wall_time_s"], **{first: t})
            for r, t in zip(results, before)
        ]

    model, results = train_from(runs, [r.seed for r in runs])
    if runs[0].train.restarts:
        results = restart_unfit(runs, model, results, train_from)
    return model, results


def build_stack(runs: list[RunConfig], seeds: list[int] | None = None):
    """The untrained stacked model of ``runs`` (resolved, one stack key) with its training and
    test families; ``seeds``: the members' initialisation seeds (default: the runs')."""
    from .two_candidate import training_family

    first = runs[0]
    family = training_family(first.family.load(), first.model)
    test_family = training_family(first.test_family.load(), first.model) if first.test_family else None
    model = build_model(
        first.model,
        family.m,
        family.length,
        seeds=[r.seed for r in runs] if seeds is None else seeds,
        ranks=[r.model.stack_rank for r in runs],
        vocabulary=vocabulary(family, test_family),
        dtype=DTYPES[first.train.dtype],
        device=first.train.device,
    )
    return model, family, test_family


def run_record(run: RunConfig, result: MemberResult, stack_size: int) -> dict:
    """The JSON record of a finished run (a sweep's ``runs/<id>.json``).  A run scored on a
    test family also says whether it ``fit`` its training family: a test score of a run that
    did not fit measures the optimiser, not the model's capacity."""
    from .. import __version__

    stages = {"restarts": result.tries, "distilled": result.distilled, "pruned": result.pruned}
    top = result.train["max_error"]
    fit = {} if run.test_family is None else {"fit": top is not None and top < EXACT_THRESHOLD}
    return {
        "id": run.run_id(),
        "config": run.as_dict(),
        "seed": run.seed,
        "status": result.status,
        "steps": result.steps,
        "wall_time_s": result.wall_time_s,
        "stack_size": stack_size,
        "features": run.model.feature_count(),
        "map_facts": run.model.map_facts,
        "signed_kernel": run.model.signed_kernel,
        "train": result.train,
        "curve": result.curve,
        "recipe": run.recipe,
        **{k: v for k, v in stages.items() if v is not None},
        "test": result.test,
        **fit,
        "version": __version__,
    }


@dataclass
class TaskOutput:
    """A record per run of one stack, and the stack's weights every record points to."""

    records: list[dict]
    checkpoint: bytes


def train_task(runs: list[RunConfig], observer: Observer | None = None) -> TaskOutput:
    """Train one stack of runs: their records and weights.  Whatever a module written elsewhere
    raises is one line naming it (``SystemExit`` included)."""
    first = runs[0]
    with module_failures(first.model.target, "training", f" at rank {first.model.stack_rank}, seed {first.seed}"):
        model, results = _train(runs, observer)
    where = f"checkpoints/{config_hash([r.run_id() for r in runs])}.pt"  # the hash of its members' ids, in order
    records = [
        {**run_record(r.resolved(), res, len(runs)), "checkpoint": {"file": where, "member": e}}
        for e, (r, res) in enumerate(zip(runs, results))
    ]
    return TaskOutput(records, checkpoint_bytes(runs, model))


def train_records(runs: list[RunConfig], observer: Observer | None = None) -> list[dict]:
    """The records of :func:`train_task`, keeping no weights."""
    return train_task(runs, observer).records


def train_watched(run: RunConfig, stream: TextIO | None) -> dict:
    """The record of one run, its progress shown live on ``stream`` where that is a terminal."""
    with watch(stream) as observer:
        return train_records([run], observer=observer)[0]


#: Version of the checkpoint layout.
CHECKPOINT_FORMAT = 1


def checkpoint_bytes(runs: list[RunConfig], model: torch.nn.Module) -> bytes:
    """``torch.save`` bytes of ``{"format", "runs": [resolved configs], "state": CPU state_dict}``:
    plain values and tensors only, so :func:`load_checkpoint` reads it ``weights_only``."""
    buffer = io.BytesIO()
    state = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    torch.save({"format": CHECKPOINT_FORMAT, "runs": [r.resolved().as_dict() for r in runs], "state": state}, buffer)
    return buffer.getvalue()


def load_checkpoint(path: str | os.PathLike, device: str = "cpu"):
    """``(runs, model, family, test_family)`` of a stack's checkpoint: the model rebuilt
    exactly as it was trained, with its trained weights (member ``e`` is ``runs[e]``)."""
    try:
        data = torch.load(path, map_location=device, weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise KernelgapError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {first})") from None
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise KernelgapError(f"checkpoint {path} is not a kernelgap checkpoint (format {CHECKPOINT_FORMAT})")
    runs = [RunConfig.from_dict(d) for d in data["runs"]]
    runs = [r.model_copy(update={"train": r.train.model_copy(update={"device": device})}) for r in runs]
    model, family, test_family = build_stack(runs)
    model.load_state_dict(data["state"])
    return runs, model, family, test_family
