"""The stacked trainer (schedule and losses calibrated (docs/experiments.md)).

A stack of ``E`` members (one :class:`~kernelgap.models.AttentionModel`)
trains on the loss ``L = Σ_e L_e``: member ``e``'s parameters only reach
``L_e``, so ``∂L/∂θ_e = ∂L_e/∂θ_e`` and Adam (elementwise) updates each member
exactly as if it trained alone.  Every step evaluates the train family anyway,
so each member's max error is known per step: a member that becomes exact
(max error < ``stop_below``) or diverges (non-finite loss) is recorded at that
step — the same step it would be recorded at alone — and dropped from the
loss; the stack stops when no member is left.
"""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..models import AttentionModel, build_model, feature_count, signed_kernel
from ..task import Family, error_metrics
from .config import DTYPES, RunConfig, TrainConfig


def configure_worker(threads: int = 1, seed: int | None = None) -> None:
    """One intra-op thread, flushed denormals (exp features underflow) and
    determinism: deterministic algorithms on and, given ``seed``, the
    python, numpy and torch global generators seeded.  Models draw their
    initialisation from per-member generators and train full batch, so the
    global generators are never meant to matter: seeding them only pins down
    anything that would otherwise slip in."""
    torch.set_flush_denormal(True)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    torch.use_deterministic_algorithms(True)
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)


def mse_loss(err: torch.Tensor) -> torch.Tensor:
    """``mean e²`` per member: ``err [E, S, Q]`` → ``[E]``."""
    return err.square().mean(dim=(1, 2))


def power_mean_loss(err: torch.Tensor, power: float) -> torch.Tensor:
    """``(mean |e|^p)^(1/p)`` per member, computed as ``M·(mean (|e|/M)^p)^(1/p)``.

    ``M = max |e|`` (detached) keeps ``|e|^p`` from overflowing; the value is
    unchanged and tends to ``max |e|`` as ``p → ∞``.
    """
    a = err.abs()
    scale = a.detach().amax(dim=(1, 2), keepdim=True).clamp_min(1e-12)
    return scale.reshape(-1) * (a / scale).pow(power).mean(dim=(1, 2)).pow(1.0 / power)


def cosine_lr(base: float, step: int, total: int) -> float:
    """``base · (1 + cos(π·step/total)) / 2``: from ``base`` down to 0 over a phase."""
    return base * 0.5 * (1.0 + math.cos(math.pi * step / max(total, 1)))


@dataclass
class Scored:
    """Tensors to evaluate a family: float tokens, ids, scored positions, targets ``[S, Q]``."""

    tokens: torch.Tensor
    index: torch.Tensor
    positions: list[int]
    target: torch.Tensor

    @classmethod
    def of(cls, family: Family, dtype: torch.dtype, device: torch.device | str = "cpu") -> "Scored":
        positions = family.scored_positions
        target = torch.as_tensor(family.targets()[:, positions], dtype=dtype, device=device)
        return cls(torch.as_tensor(family.tokens, dtype=dtype, device=device),
                   torch.as_tensor(family.index, device=device), positions, target)

    def errors(self, model: AttentionModel) -> torch.Tensor:
        """``pred − target`` of every member, ``[E, S, Q]``."""
        return model.predict(self.tokens, self.index, self.positions) - self.target


@dataclass
class MemberResult:
    """Outcome of one member: status ``ok``/``diverged``, metrics at its last step."""

    status: str
    steps: int
    wall_time_s: float
    train: dict
    test: dict | None


def metrics_of(err: torch.Tensor) -> dict:
    """The task's metrics of one member's errors ``[S, Q]``; a non-finite number becomes
    None, so every record is strict JSON (a run diverged at step 0 has no finite error)."""
    out = error_metrics(err, torch.zeros_like(err)).as_dict()
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()}


class StackTrainer:
    """Trains one stack; see the module docstring for the per-member bookkeeping."""

    def __init__(self, model: AttentionModel, train: Scored, cfg: TrainConfig,
                 test: Scored | None = None) -> None:
        self.model, self.train, self.test, self.cfg = model, train, test, cfg
        self.results: list[MemberResult | None] = [None] * model.members
        self.active = torch.ones(model.members, dtype=torch.bool, device=train.target.device)
        self.start = time.perf_counter()

    def phases(self):
        power = self.cfg.power
        return [(mse_loss, self.cfg.mse_steps),
                (lambda err: power_mean_loss(err, power), self.cfg.max_steps)]

    def run(self) -> list[MemberResult]:
        opt = torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr, foreach=True)
        step, last_err = 0, None
        for loss_fn, n_steps in self.phases():
            for k in range(n_steps):
                err = self.train.errors(self.model)
                losses = loss_fn(err)
                self.record_events(err, losses, last_err, step)
                if not bool(self.active.any()):
                    return self.results
                for group in opt.param_groups:
                    group["lr"] = cosine_lr(self.cfg.lr, k, n_steps)
                opt.zero_grad(set_to_none=True)
                torch.where(self.active, losses, torch.zeros_like(losses)).sum().backward()
                opt.step()
                step, last_err = step + 1, err.detach()
        with torch.no_grad():
            err = self.train.errors(self.model)
        self.finish(err, step, last_err)
        return self.results

    def record_events(self, err, losses, last_err, step: int) -> None:
        """Record members that just became exact or diverged (before this step's update)."""
        with torch.no_grad():
            max_err = err.detach().abs().amax(dim=(1, 2))
            finite = torch.isfinite(losses.detach()) & torch.isfinite(max_err)
            diverged = self.active & ~finite
            stop = self.cfg.stop_below
            exact = self.active & finite & (max_err < stop) if stop is not None else None
        if bool(diverged.any()):
            for e in diverged.nonzero().flatten().tolist():
                source = last_err if last_err is not None else err.detach()
                self.record(e, "diverged", step, source[e], None)
        if exact is not None and bool(exact.any()):
            test_err, stats = self.test_errors(), self.kernel_stats()
            for e in exact.nonzero().flatten().tolist():
                self.record(e, "ok", step, err.detach()[e], test_err, stats)

    def test_errors(self) -> torch.Tensor | None:
        if self.test is None:
            return None
        with torch.no_grad():
            return self.test.errors(self.model)

    def kernel_stats(self) -> dict[str, torch.Tensor] | None:
        """Sign use of a kernel that may be negative, on the training family (else ``None``)."""
        if not self.model.signed_kernel:
            return None
        return self.model.kernel_stats(self.train.tokens, self.train.index, self.train.positions)

    def record(self, e: int, status: str, step: int, train_err, test_err, stats=None) -> None:
        """Freeze member ``e``'s outcome (test metrics only for finite members; for signed
        kernels ``train["kernel"]``, see :meth:`AttentionModel.kernel_stats`)."""
        test = metrics_of(test_err[e]) if test_err is not None else None
        train = metrics_of(train_err)
        if stats is not None:
            train["kernel"] = {k: float(v[e]) for k, v in stats.items()}
        self.results[e] = MemberResult(status, step, time.perf_counter() - self.start, train, test)
        self.active[e] = False

    def finish(self, err: torch.Tensor, step: int, last_err: torch.Tensor | None = None) -> None:
        """Final metrics of members still training after the last step; a member
        the last update made non-finite is ``diverged`` with its last finite metrics."""
        finite = torch.isfinite(err).flatten(1).all(dim=1)
        test_err, stats = self.test_errors(), self.kernel_stats()
        for e in self.active.nonzero().flatten().tolist():
            if bool(finite[e]):
                self.record(e, "ok", step, err[e], test_err, stats)
            else:
                self.record(e, "diverged", step, (last_err if last_err is not None else err)[e], None)


def train_stack(model: AttentionModel, family: Family, cfg: TrainConfig,
                test_family: Family | None = None) -> list[MemberResult]:
    """Train every member of ``model`` on ``family``; one result per member."""
    dtype = DTYPES[cfg.dtype]
    test = Scored.of(test_family, dtype, cfg.device) if test_family is not None else None
    return StackTrainer(model, Scored.of(family, dtype, cfg.device), cfg, test).run()


def vocabulary(family: Family, test_family: Family | None) -> np.ndarray:
    """Distinct tokens of the train and test families (the ``table`` map's rows)."""
    if test_family is None:
        return family.tokens
    return np.unique(np.concatenate([family.tokens, test_family.tokens]), axis=0)


def train_runs(runs: list[RunConfig]) -> list[MemberResult]:
    """Train runs that share a :meth:`RunConfig.stack_key` as one stack."""
    runs = [r.resolved() for r in runs]
    if len({r.stack_key() for r in runs}) != 1:
        raise ValueError("train_runs needs runs that share one stack key")
    first = runs[0]
    configure_worker(seed=first.seed)
    family = first.family.build()
    test_family = first.test_family.build() if first.test_family else None
    model = build_model(first.model, family.m, family.length, seeds=[r.seed for r in runs],
                        ranks=[r.model.rank for r in runs],
                        vocabulary=vocabulary(family, test_family), dtype=DTYPES[first.train.dtype],
                        device=first.train.device)
    return train_stack(model, family, first.train, test_family)


def run_record(run: RunConfig, result: MemberResult, stack_size: int) -> dict:
    """The JSON record of a finished run (what a sweep writes as ``runs/<id>.json``)."""
    from .. import __version__

    return {
        "id": run.run_id(),
        "config": run.as_dict(),
        "seed": run.seed,
        "status": result.status,
        "steps": result.steps,
        "wall_time_s": result.wall_time_s,
        "stack_size": stack_size,
        "features": feature_count(run.model),
        "signed_kernel": signed_kernel(run.model),
        "train": result.train,
        "test": result.test,
        "version": __version__,
    }


def train_records(runs: list[RunConfig]) -> list[dict]:
    """Train one stack of runs and return their records (the executors' task)."""
    results = train_runs(runs)
    return [run_record(r.resolved(), res, len(runs)) for r, res in zip(runs, results)]
