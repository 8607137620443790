"""The stack of members and its trainer: full-batch Adam with per-member stops (docs/experiments.md,
"Training recipe").

A stack of ``E`` members trains on ``L = Σ_e L_e``: member ``e``'s parameters only reach
``L_e``, so Adam (elementwise) updates each member exactly as if it trained alone.  A member
that becomes exact (max error < ``stop_below``) or diverges is recorded at that step and
dropped from the loss; the stack stops when no member is left.

Training curves: each member's max error and loss (its phase's objective) every
:data:`CURVE_EVERY` steps, kept on the device until a record is written.  The record also
carries the loss of the final errors at the last phase's power (``final``), the number a
probe compares with the query-blind optimum (docs/theory.md, "The query-blind floor").
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..models import AttentionModel
from ..models.scorers import PairPlan
from ..task import Family, error_metrics
from .config import TrainConfig
from .progress import Observer, at_point, finished

#: Steps between the host's readings of the stop marks (results do not depend on it).
CHECK_EVERY = 16


def configure_worker(threads: int = 1, seed: int | None = None) -> None:
    """One intra-op thread, flushed denormals (exp features underflow), deterministic
    algorithms and, given ``seed``, the global generators seeded (models draw from their own
    generators; this only pins down anything that slips in).  For a process that only
    trains; a library call uses :func:`training_settings`, which puts everything back."""
    torch.set_flush_denormal(True)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    torch.use_deterministic_algorithms(True)
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)


def flush_denormal_enabled() -> bool:
    """Whether the CPU flushes denormals (torch has no getter): the smallest denormal
    doubled is a denormal again unless inputs are read as zero.  The denormal is made from
    its bits, not written as a literal: source compiled while denormals are flushed (a
    process that set it, then imported this module) would read ``5e-324`` as 0."""
    smallest = torch.ones(1, dtype=torch.int64).view(torch.float64)
    return float(smallest * 2) == 0.0


@contextlib.contextmanager
def training_settings(threads: int = 1, seed: int | None = None):
    """:func:`configure_worker` for the duration of a ``with`` block, then every process-wide
    setting it touched as it was: thread count, denormal flushing, deterministic mode, the
    cuBLAS workspace variable and the python, numpy and torch global generators."""
    saved = (
        torch.get_num_threads(),
        flush_denormal_enabled(),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        random.getstate(),
        np.random.get_state(),
        torch.get_rng_state(),
    )
    try:
        configure_worker(threads, seed)
        yield
    finally:
        threads_before, flush, det, warn_only, cublas, py_state, np_state, torch_state = saved
        if torch.get_num_threads() != threads_before:
            torch.set_num_threads(threads_before)
        torch.set_flush_denormal(flush)
        torch.use_deterministic_algorithms(det, warn_only=warn_only)
        if cublas is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = cublas
        random.setstate(py_state)
        np.random.set_state(np_state)
        torch.set_rng_state(torch_state)


#: Steps between the points of a training curve.
CURVE_EVERY = 50


def final_power(max_steps: int, power: float) -> float:
    """The power of the trainer's last phase: ``power``, or 2 with no max-error phase."""
    return float(power) if max_steps > 0 else 2.0


def power_mean(err: torch.Tensor, power: float) -> float | None:
    """``(mean |e|^p)^(1/p)`` of one member's errors in float64 (None when not finite)."""
    a = err.detach().to(torch.float64).abs()
    if a.numel() == 0:
        return 0.0
    top = float(a.max())
    if not math.isfinite(top):
        return None
    if top == 0.0:
        return 0.0
    value = top * float((a / top).pow(power).mean()) ** (1.0 / power)
    return value if math.isfinite(value) else None


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


class Curve:
    """Each member's ``(step, max error, loss)`` every ``every`` steps of one stack."""

    def __init__(self, mse_steps: int, max_steps: int, power: float, every: int = CURVE_EVERY) -> None:
        self.every, self.mse_steps = every, mse_steps
        self.power = final_power(max_steps, power)
        self.steps: list[int] = []
        self.pending: list[torch.Tensor] = []  # [2, E] per point, on the device
        self.read: list[list[list[float]]] = []  # points read to the host: [max errors, losses]

    def observe(self, step: int, err: torch.Tensor, losses: torch.Tensor) -> None:
        """At every ``every``-th step: every member's max error and loss (before the update)."""
        if step % self.every:
            return
        with torch.no_grad():
            point = torch.stack([err.detach().abs().amax(dim=(1, 2)), losses.detach()]).to(torch.float64)
        self.steps.append(step)
        self.pending.append(point)

    def latest(self) -> tuple[int, torch.Tensor | list[list[float]]] | None:
        """The latest point's step and ``[max errors, losses]`` (a tensor while on the device), or
        None; reads nothing."""
        if not self.steps:
            return None
        return self.steps[-1], self.pending[-1] if self.pending else self.read[-1]

    def of(self, member: int, step: int, final_err: torch.Tensor) -> dict:
        """The curve of ``member`` up to its last step, with ``final``: its step, max error and
        the power-mean loss of ``final_err``."""
        if self.pending:
            self.read += torch.stack(self.pending).tolist()
            self.pending = []
        points = [(s, p) for s, p in zip(self.steps, self.read) if s <= step]
        top = float(final_err.detach().abs().max()) if final_err.numel() else 0.0
        return {
            "every": self.every,
            "mse_steps": self.mse_steps,
            "step": [s for s, _ in points],
            "max_error": [_finite(p[0][member]) for _, p in points],
            "loss": [_finite(p[1][member]) for _, p in points],
            "final": {
                "step": step,
                "max_error": _finite(top),
                "power": self.power,
                "loss": power_mean(final_err, self.power),
            },
        }


def mse_loss(err: torch.Tensor) -> torch.Tensor:
    """``mean e²`` per member: ``err [E, S, Q]`` → ``[E]``."""
    return err.square().mean(dim=(1, 2))


def power_mean_loss(err: torch.Tensor, power: float) -> torch.Tensor:
    """``(mean |e|^p)^(1/p)`` per member, as ``M·(mean (|e|/M)^p)^(1/p)`` with ``M = max |e|``
    (detached) so ``|e|^p`` cannot overflow; it tends to ``max |e|`` as ``p → ∞``."""
    a = err.abs()
    scale = a.detach().amax(dim=(1, 2), keepdim=True).clamp_min(1e-12)
    return scale.reshape(-1) * integer_power(a / scale, power).mean(dim=(1, 2)).pow(1.0 / power)


def integer_power(x: torch.Tensor, power: float) -> torch.Tensor:
    """``x^power``; an integer power by repeated squaring (on CPU a tenth of ``pow``'s time,
    forward and backward), any other by ``pow``."""
    if power != int(power):
        return x.pow(power)
    out, base, n = None, x, int(power)
    while n:
        if n & 1:
            out = base if out is None else out * base
        n >>= 1
        if n:
            base = base.square()
    return out


def cosine_lr(base: float, step: int, total: int) -> float:
    """``base · (1 + cos(π·step/total)) / 2``: from ``base`` down to 0 over a phase."""
    return base * 0.5 * (1.0 + math.cos(math.pi * step / max(total, 1)))


@dataclass
class Scored:
    """Tensors to evaluate a family: float tokens, ids, scored positions, targets ``[S, Q]``;
    ``planned``: predict through the block of pairs the family uses where it is smaller than
    the dense tables."""

    tokens: torch.Tensor
    index: torch.Tensor
    positions: list[int]
    target: torch.Tensor
    planned: bool = True
    plans: dict = field(default_factory=dict, repr=False)
    found_ids: tuple | None = field(default=None, repr=False)  # (vocabulary, ids of the tokens in it)

    @classmethod
    def of(cls, family: Family, dtype: torch.dtype, device: torch.device | str = "cpu", planned: bool = True) -> Scored:
        positions = family.scored_positions
        target = torch.as_tensor(family.targets()[:, positions], dtype=dtype, device=device)
        return cls(
            torch.as_tensor(family.tokens, dtype=dtype, device=device),
            torch.as_tensor(family.index, device=device),
            positions,
            target,
            planned,
        )

    @property
    def device(self) -> torch.device:
        return self.target.device

    def metrics(self, err: torch.Tensor, model=None, member: int = 0) -> dict:
        """One member's metrics from its errors ``[S, Q]`` (:func:`metrics_of`)."""
        return metrics_of(err)

    def token_ids(self, model) -> torch.Tensor | None:
        """Rows of the family's tokens in ``model``'s vocabulary (found once per vocabulary),
        or None for a model that reads the token vectors."""
        vocab = model.vocabulary if isinstance(model, AttentionModel) else None
        if vocab is None:
            return None
        if self.found_ids is None or self.found_ids[0] is not vocab:
            if self.found_ids is not None:
                self.plans.clear()  # their ids are rows of the other vocabulary
            self.found_ids = (vocab, model.token_ids(self.tokens))
        return self.found_ids[1]

    def plan(self, model) -> PairPlan | None:
        """The model's pair block on this family (built once), or None for the dense tables."""
        if not (self.planned and isinstance(model, AttentionModel)):
            return None
        ids = self.token_ids(model)
        key = (model.position_dependent, model.causal, ids is not None)
        if key not in self.plans:
            plan = model.plan(self.tokens, self.index, self.positions, ids=ids)
            self.plans[key] = plan if plan.size < len(self.tokens) ** 2 else None
        return self.plans[key]

    def errors(self, model) -> torch.Tensor:
        """``pred − target`` of every member, ``[E, S, Q]``."""
        given = {"plan": self.plan(model), "ids": self.token_ids(model)}
        given = {k: v for k, v in given.items() if v is not None}  # a module takes neither
        return model.predict(self.tokens, self.index, self.positions, **given) - self.target


@dataclass
class MemberResult:
    """Outcome of one member: status ``ok``/``diverged``, metrics at its last step; a run
    with fresh starts, distilled or pruned adds its tries, teacher or wide run."""

    status: str
    steps: int
    wall_time_s: float
    train: dict
    test: dict | None
    curve: dict | None = None
    tries: list[dict] | None = None
    distilled: dict | None = None
    pruned: dict | None = None

    def summary(self) -> dict:
        """Its status, steps and max error (a try, teacher or wide run in a record)."""
        return {"status": self.status, "steps": self.steps, "max_error": self.train.get("max_error")}


def metrics_of(err: torch.Tensor) -> dict:
    """The task's metrics of one member's errors ``[S, Q]``; a non-finite number becomes
    None, so every record is strict JSON (a run diverged at step 0 has no finite error)."""
    out = error_metrics(err, torch.zeros_like(err)).as_dict()
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()}


class StackTrainer:
    """Trains one stack.  The stop marks stay on the device: each step marks the members
    that just stopped, snapshots their errors and holds their Adam moments at zero, so their
    parameters stay as at their stop step.  The host reads the marks every
    :data:`CHECK_EVERY` steps (no synchronisation per step) and writes the results — the
    same numbers a per-step reading would give."""

    def __init__(
        self,
        model: AttentionModel,
        train: Scored,
        cfg: TrainConfig,
        test: Scored | None = None,
        check_every: int = CHECK_EVERY,
        observer: Observer | None = None,
    ) -> None:
        self.model, self.train, self.test, self.cfg = model, train, test, cfg
        self.check_every = check_every
        self.observer, self.told = observer, -1  # the last curve step the observer was told
        e, device = model.members, train.device
        self.results: list[MemberResult | None] = [None] * e
        self.active = torch.ones(e, dtype=torch.bool, device=device)
        self.stopped_at = torch.full((e,), -1, dtype=torch.long, device=device)
        self.diverged = torch.zeros(e, dtype=torch.bool, device=device)
        self.snapshot: torch.Tensor | None = None  # errors of each member at its stop step
        self.start = time.perf_counter()
        self.curve = Curve(cfg.mse_steps, cfg.max_steps, cfg.power)

    def phases(self):
        power = self.cfg.power
        return [(mse_loss, self.cfg.mse_steps), (lambda err: power_mean_loss(err, power), self.cfg.max_steps)]

    def run(self) -> list[MemberResult]:
        params = list(self.model.parameters())
        opt = torch.optim.Adam(params, lr=self.cfg.lr, fused=True)
        step, last_err = 0, None
        for loss_fn, n_steps in self.phases():
            for k in range(n_steps):
                err = self.step_errors(step)
                losses = loss_fn(err)
                self.curve.observe(step, err, losses)
                self.mark_stops(err, losses, last_err, step)
                if step % self.check_every == 0 and not self.collect():
                    return self.done()
                for group in opt.param_groups:
                    group["lr"] = cosine_lr(self.cfg.lr, k, n_steps)
                opt.zero_grad(set_to_none=True)
                torch.where(self.active, losses, torch.zeros_like(losses)).sum().backward()
                self.hold_stopped(params, opt)
                opt.step()
                step, last_err = step + 1, err.detach()
        if self.collect():
            with torch.no_grad():
                self.finish(self.final_errors(step), step, last_err)
        return self.done()

    def done(self) -> list[MemberResult]:
        """The results, the observer (if any) told the recorded outcome first."""
        if self.observer is not None:
            self.observer(finished(self.results, self.cfg))
        return self.results

    def read_stops(self) -> list[int]:
        """Each member's stop step (−1: still training), read to the host: the trainer's one
        synchronisation per reading.  With an observer, the latest curve point it has not seen
        comes back in the same transfer and is told (:mod:`.progress`): no reading of its own."""
        point = self.curve.latest() if self.observer is not None else None
        if point is None or point[0] <= self.told:
            return self.stopped_at.tolist()
        step, values = point
        e = len(self.results)
        if isinstance(values, torch.Tensor):  # still on the device: one transfer with the stop marks
            packed = torch.cat([self.stopped_at.to(values.dtype), values.flatten()]).tolist()
            stopped, values = [int(s) for s in packed[:e]], (packed[e : 2 * e], packed[2 * e :])
        else:
            stopped = self.stopped_at.tolist()
        self.told = step
        self.observer(at_point(step, self.cfg, values[0], values[1], sum(s < 0 for s in stopped)))
        return stopped

    def step_errors(self, step: int) -> torch.Tensor:
        """The errors training step ``step`` is scored on (the whole training family)."""
        return self.train.errors(self.model)

    final_errors = step_errors  # the errors after the last step

    def stop_marks(self, err: torch.Tensor, losses: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """On the device, ``[E]`` masks of the active members that diverged (a non-finite loss
        or error) and of those now exact (max error below ``stop_below``), before the update."""
        max_err = err.abs().amax(dim=(1, 2))
        finite = torch.isfinite(losses.detach()) & torch.isfinite(max_err)
        diverged = self.active & ~finite
        stop = self.cfg.stop_below
        exact = self.active & finite & (max_err < stop) if stop is not None else torch.zeros_like(diverged)
        return diverged, exact

    def mark_stops(self, err, losses, last_err, step: int) -> None:
        """On the device: members that just became exact or diverged (before this step's update)."""
        with torch.no_grad():
            err = err.detach()
            diverged, exact = self.stop_marks(err, losses, step)
            new = diverged | exact
            if new.device.type == "cpu" and not bool(new.any()):
                return  # nothing stopped this step (the usual case; reading it is free on the CPU)
            source = torch.where(diverged[:, None, None], last_err if last_err is not None else err, err)
            self.snapshot = source if self.snapshot is None else torch.where(new[:, None, None], source, self.snapshot)
            self.stopped_at = torch.where(new, step, self.stopped_at)
            self.diverged |= diverged
            self.active &= ~new

    def hold_stopped(self, params: list[torch.Tensor], opt: torch.optim.Optimizer) -> None:
        """Zero the gradients and first Adam moments of stopped members: their update is then
        exactly zero (a member's parameters are the leading slots of each stacked tensor)."""
        if self.active.device.type == "cpu" and bool(self.active.all()):
            return  # none stopped (reading that is free on the CPU; an accelerator masks unread)
        with torch.no_grad():
            held: dict[tuple[int, int], torch.Tensor] = {}  # one mask per slot count and rank of tensor
            for p in params:
                key = (p.shape[0], p.dim())
                if key not in held:
                    keep = self.active.repeat_interleave(max(1, p.shape[0] // len(self.active)))
                    keep = keep.reshape(-1, *([1] * (p.dim() - 1))) if len(keep) == p.shape[0] else self.active.all()
                    held[key] = ~keep
                if p.grad is not None:
                    p.grad.masked_fill_(held[key], 0.0)
                state = opt.state.get(p)
                if state:
                    state["exp_avg"].masked_fill_(held[key], 0.0)

    def collect(self) -> bool:
        """Write the results of members stopped since the last reading; False when none is left."""
        stopped = self.read_stops()
        new = [e for e, at in enumerate(stopped) if at >= 0 and self.results[e] is None]
        if new:
            diverged = self.diverged.tolist()
            finite = [e for e in new if not diverged[e]]
            test_err = self.test_errors() if finite else None
            stats = self.kernel_stats() if finite else None
            for e in new:
                status = "diverged" if diverged[e] else "ok"
                self.record(e, status, stopped[e], self.snapshot[e], None if diverged[e] else test_err, stats)
        return any(r is None for r in self.results)

    def test_errors(self) -> torch.Tensor | None:
        if self.test is None:
            return None
        with torch.no_grad():
            return self.test.errors(self.model)

    def kernel_stats(self) -> dict[str, torch.Tensor] | None:
        """Sign use of a kernel that may be negative, on the training family (else ``None``)."""
        if not self.model.signed_kernel:
            return None
        return self.model.kernel_stats(
            self.train.tokens, self.train.index, self.train.positions, ids=self.train.token_ids(self.model)
        )

    def record(self, e: int, status: str, step: int, train_err, test_err, stats=None) -> None:
        """Freeze member ``e``'s outcome (test metrics only for finite members; for signed
        kernels ``train["kernel"]``, see :meth:`AttentionModel.kernel_stats`)."""
        test = self.test.metrics(test_err[e], self.model, e) if test_err is not None else None
        train = self.train.metrics(train_err, self.model, e)
        if stats is not None:
            train["kernel"] = {k: float(v[e]) for k, v in stats.items()}
        curve = self.curve.of(e, step, train_err)
        self.results[e] = MemberResult(status, step, time.perf_counter() - self.start, train, test, curve)

    def finish(self, err: torch.Tensor, step: int, last_err: torch.Tensor | None = None) -> None:
        """Final metrics of members still training after the last step; a member
        the last update made non-finite is ``diverged`` with its last finite metrics."""
        finite = torch.isfinite(err).flatten(1).all(dim=1).tolist()
        left = [e for e, r in enumerate(self.results) if r is None]
        test_err = self.test_errors() if any(finite[e] for e in left) else None
        stats = self.kernel_stats()
        for e in left:
            if finite[e]:
                self.record(e, "ok", step, err[e], test_err, stats)
            else:
                self.record(e, "diverged", step, (last_err if last_err is not None else err)[e], None)
