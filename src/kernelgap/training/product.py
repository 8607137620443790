"""Training on a product family of any length N, scored on the whole family (docs/theory.md,
"Training on product families").

A :class:`~kernelgap.task.family.ProductFamily` of length N holds, for each query x, every
sequence with x at the query position and any N − 1 candidates in the other slots:
``Q·C^(N−1)`` sequences, never materialised.

**The two-candidate reduction.**  Take one head whose key and value maps do not depend on
the position, no causal mask, and a nonnegative kernel.  At x, with ``a(c) = α(x, c) ≥ 0``,
``U(c) = U[x, c]`` and the self terms ``S = α(x, x)``, ``A = S·U[x, x]``, the prediction on
slots ``c_1 … c_(N−1)`` is

    p = (A + Σ_j a(c_j) U(c_j)) / (S + Σ_j a(c_j)) + b[x],

a linear-fractional function of N − 1 independent, identical slots, and the target is
``t = min_j <x, c_j>`` (the query's own overlap ``|x|`` is never below it).  Fix a level t:
the tuples of target t have one slot (by symmetry, the first) at a candidate c of level t
and every other slot at a level ≥ t.  For fixed c let ``λ*`` be the largest p over the free
N − 2 slots (a finite set, so attained).  Every tuple then has
``(A + a(c)U(c) − λ*(S + a(c))) + Σ_{j≥2} a(c_j)(U(c_j) − λ*) ≤ 0``, with equality at the
maximiser; the left side is a sum over independent slots, so its maximum is the sum of the
slot-wise maxima, which all slots attain at one candidate c′ (a maximiser of
``a(c′)(U(c′) − λ*)``).  That tuple, ``(x; c, c′, …, c′)``, reaches ``λ*`` (Dinkelbach's
condition).  The same holds for the smallest p (maximise −p).  So the extreme errors of the
tuples of target t are those of the *two-candidate sequences* ``(x; c, c′, …, c′)``; each of
these is itself a sequence of the family, with target ``min(<x, c>, <x, c′>)``, so

    max over the whole family |p − t|  =  max over the Q·C² two-candidate sequences |p − t|.

Their predictions need only the ``[E, Q, C]`` tables: with k = N − 2 copies of c′,
``p = (A + a(c)U(c) + k·a(c′)U(c′)) / (S + a(c) + k·a(c′)) + b`` — in log space
``p = ū(c) + σ(log a(c′) + log k − log(S + a(c)))·(U(c′) − ū(c))``, ``ū(c)`` the self/c
average, ``σ`` the logistic function — O(Q·C²), no gather over N positions.  The argument
needs positive denominators: in log space they are; a linear-space map whose total weight
falls below the model's guard divides by the guard instead, which a record reports
(``guarded``: then the two-candidate maximum is not claimed for the whole family).

Mean errors and the share of exact sequences are averages over the two-candidate sequences
(``averaged_over``), not over the family, whose tuples they weight differently.

**Other models** (several heads, position-dependent maps, a causal mask, signed kernels,
modules) train on the expanded family where it is small, else on sampled sequences
(:mod:`.sampled`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import FamilyError, KernelgapError
from ..models import ModelSpec
from ..models.attention import DENOMINATOR_GUARD, AttentionModel, guard_denominator
from ..models.pairs import PairPlan
from ..task import EXACT_THRESHOLD
from ..task.family import AnyFamily, ProductFamily, count_json
from . import two_candidate
from .config import TrainConfig
from .sampled import SAMPLED_TUPLES, SampledScored, sampled_family
from .stack import CHECK_EVERY, Scored, StackTrainer, metrics_of
from .two_candidate import firsts_per_step, reducible_spec, two_candidate_count, two_candidate_form

#: Most pairs a step or a chunk must score at least: one query's ``C²`` (a chunk of the
#: whole-family check) or ``Q·C`` (a step with one first-slot candidate); a family with more
#: is refused (each pair holds a few floats per member, forward and backward).
MAX_PAIRS_PER_QUERY = 1 << 26
#: Seed of the batched query schedule: one schedule for every member of a stack, so a
#: member's run does not depend on its stack mates.
SCHEDULE_SEED = 0
#: What a record's ``train.evaluated`` says for the reduction.
WHOLE_FAMILY = "whole product family (two-candidate form)"
#: ... and for a member whose batched training diverged (its last finite batch).
LAST_BATCH = "last finite batch (diverged)"


def reducible(model) -> bool:
    """:func:`two_candidate_form` for a built model."""
    if not isinstance(model, AttentionModel):
        return False
    scorer = model.scorer
    return two_candidate_form(scorer.heads, model.position_dependent, model.causal, scorer.nonnegative)


def block_plan(model: AttentionModel, tokens: torch.Tensor, ids, rows: torch.Tensor, cols: torch.Tensor) -> PairPlan:
    """The ``rows × cols`` block of the model's tables (and the rows' self pairs), as a
    :class:`PairPlan` bound to the tokens (no sequence index: nothing is gathered)."""
    keys, where = torch.unique(torch.cat([rows, cols]), return_inverse=True)
    empty = torch.zeros(0, dtype=torch.long, device=rows.device)
    plan = PairPlan(rows, cols, empty, empty, None, where[len(rows) :], where[: len(rows)], keys)
    return plan.bind(tokens, ids)


def two_candidate_predictions(
    model: AttentionModel, plan: PairPlan, length: int, first: torch.Tensor | None = None
) -> torch.Tensor:
    """Predictions ``[E, R, F, C]`` of the two-candidate sequences ``(x; c, c′ × (N − 2))`` for
    the plan's rows x, the columns ``first`` as c (axis 2; None: every column, F = C) and
    every column as c′ (axis 3) — the closed form of the module docstring (``length`` = N ≥ 3)."""
    block, diag = model.scorer.block_scores(plan)  # [E, 1, 1, R, C], [E, 1, 1, R]
    v_block, v_diag, bias = model.readout.block_tables(plan)
    lc, ls, uc, us = block[:, 0, 0], diag[:, 0, 0], v_block[:, 0, 0], v_diag[:, 0, 0]
    lf, uf = (lc, uc) if first is None else (lc.index_select(-1, first), uc.index_select(-1, first))
    k = length - 2
    ub = uc + bias[:, :, None]  # U(c′) + b, [E, R, C]
    if model.scorer.log_space:
        pair = torch.logaddexp(ls[:, :, None], lf)  # log(S + a(c))
        mean = uf + bias[:, :, None] + torch.sigmoid(ls[:, :, None] - lf) * (us[:, :, None] - uf)  # ū(c) + b
        share = torch.sigmoid(lc[:, :, None, :] + math.log(k) - pair[:, :, :, None])  # of the k copies of c′
        return mean[..., None] + share * (ub[:, :, None, :] - mean[..., None])
    num = (ls * us)[:, :, None] + lf * uf  # A + a(c)U(c)
    den = ls[:, :, None] + lf
    num = num[..., None] + k * (lc * uc)[:, :, None, :]
    den = den[..., None] + k * lc[:, :, None, :]
    return num / guard_denominator(den) + bias[:, :, None, None]


def min_denominators(model: AttentionModel, plan: PairPlan, length: int) -> torch.Tensor:
    """``[E]``: the least total weight ``S + (N − 1)·min_c a(c)`` over the plan's rows — the
    least over every sequence of the family (its argmin is a two-candidate sequence)."""
    block, diag = model.scorer.block_scores(plan)
    lc, ls = block[:, 0, 0], diag[:, 0, 0]
    if model.scorer.log_space:
        lc, ls = lc.exp(), ls.exp()
    return (ls + (length - 1) * lc.amin(-1)).amin(-1)


@dataclass
class ProductScored:
    """A product family scored through its two-candidate sequences (module docstring): the
    :class:`~kernelgap.training.trainer.Scored` of a product.

    ``errors(model)`` are every member's errors on all ``Q·C²`` two-candidate sequences,
    ``[E, Q·C², 1]`` (full batch, ``batch`` None); with ``batch`` first-slot candidates per
    step, ``batch_errors(model, step)`` are those of every query with the step's c and every
    c′ (a seeded schedule: a fresh permutation of the candidates each epoch) and
    :meth:`whole` scores every query in chunks.  Its metrics are over the whole family
    (:meth:`metrics`).
    """

    family: ProductFamily
    tokens: torch.Tensor
    queries: torch.Tensor
    candidates: torch.Tensor
    levels: torch.Tensor  # [Q, C] overlaps <x, c>
    batch: int | None = None
    target: torch.Tensor | None = None  # [Q·C², 1] (full batch)
    found_ids: tuple | None = field(default=None, repr=False)
    plans: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls,
        family: ProductFamily,
        dtype: torch.dtype,
        device: torch.device | str = "cpu",
        pairs: int | None = None,
    ) -> ProductScored:
        q, c = len(family.queries), len(family.candidates)
        if max(c, q) * c > MAX_PAIRS_PER_QUERY:
            raise FamilyError(
                f"product family {family.name!r}: {q:,} queries and {c:,} candidates make "
                f"{max(c, q) * c:,} pairs for one query's check or one candidate's step; at most "
                f"{MAX_PAIRS_PER_QUERY:,} are scored at once"
            )
        bits = family.tokens.astype(np.int64)
        levels = torch.as_tensor(bits[family.queries] @ bits[family.candidates].T, dtype=dtype, device=device)
        batch = firsts_per_step(family, pairs)
        out = cls(
            family,
            torch.as_tensor(family.tokens, dtype=dtype, device=device),
            torch.as_tensor(family.queries, device=device),
            torch.as_tensor(family.candidates, device=device),
            levels,
            batch,
        )
        if batch is None:
            out.target = out.targets(levels).reshape(-1, 1)
        return out

    @property
    def device(self) -> torch.device:
        return self.levels.device

    @property
    def length(self) -> int:
        return self.family.length

    @property
    def steps_per_epoch(self) -> int:
        """Steps that see every candidate pair once (1 at full batch)."""
        return 1 if self.batch is None else -(-len(self.candidates) // self.batch)

    @staticmethod
    def targets(levels: torch.Tensor) -> torch.Tensor:
        """``min(<x, c>, <x, c′>)`` ``[R, C, C]`` of rows of overlaps ``[R, C]``."""
        return torch.minimum(levels[:, :, None], levels[:, None, :])

    def token_ids(self, model) -> torch.Tensor | None:
        """Rows of the family's tokens in ``model``'s vocabulary (found once), or None."""
        vocab = model.vocabulary
        if vocab is None:
            return None
        if self.found_ids is None or self.found_ids[0] is not vocab:
            self.plans.clear()
            self.found_ids = (vocab, model.token_ids(self.tokens))
        return self.found_ids[1]

    def plan(self, model, rows: torch.Tensor | None = None) -> PairPlan:
        """The block of ``rows`` (query positions in ``queries``; None: all, built once)."""
        if not reducible(model):
            raise KernelgapError(
                "the two-candidate form scores one head with position-free maps, no causal mask and a "
                'nonnegative kernel (docs/theory.md, "Training on product families")'
            )
        ids = self.token_ids(model)
        if rows is not None:
            return block_plan(model, self.tokens, ids, self.queries.index_select(0, rows), self.candidates)
        if "all" not in self.plans:
            self.plans["all"] = block_plan(model, self.tokens, ids, self.queries, self.candidates)
        return self.plans["all"]

    def errors(self, model) -> torch.Tensor:
        """``pred − target`` on every two-candidate sequence, ``[E, Q·C², 1]`` (full batch)."""
        if self.batch is not None:
            raise KernelgapError(
                f"{self.family.name}: {two_candidate_count(self.family):,} two-candidate sequences are "
                f"scored in batches (batch_errors, whole)"
            )
        pred = two_candidate_predictions(model, self.plan(model), self.length)
        return pred.reshape(pred.shape[0], -1, 1) - self.target

    def batch_firsts(self, step: int) -> torch.Tensor:
        """The first-slot candidate positions of training step ``step`` (the schedule):
        ``batch`` of them at every step, the epoch's last batch filled up from the start of
        its permutation, so every step's errors have one shape (what the stop bookkeeping
        compares) and every candidate pair is seen at least once per epoch."""
        per = self.steps_per_epoch
        epoch, at = divmod(step, per)
        gen = torch.Generator().manual_seed(SCHEDULE_SEED + epoch)
        order = torch.randperm(len(self.candidates), generator=gen)
        return order[(at * self.batch + torch.arange(self.batch)) % len(order)].to(self.device)

    def batch_errors(self, model, step: int) -> torch.Tensor:
        """``pred − target`` of every query with the step's first-slot candidates,
        ``[E, Q·b·C, 1]``."""
        if self.batch is None:
            return self.errors(model)
        first = self.batch_firsts(step)
        pred = two_candidate_predictions(model, self.plan(model), self.length, first)
        target = torch.minimum(self.levels.index_select(1, first)[:, :, None], self.levels[:, None, :])
        return (pred - target).reshape(pred.shape[0], -1, 1)

    def chunks(self):
        """Query positions in runs of at most :data:`~.two_candidate.PAIRS_PER_STEP` two-candidate sequences."""
        per = max(1, two_candidate.PAIRS_PER_STEP // len(self.candidates) ** 2)
        for lo in range(0, len(self.queries), per):
            yield torch.arange(lo, min(lo + per, len(self.queries)), device=self.device)

    @torch.no_grad()
    def whole(self, model) -> dict[str, torch.Tensor]:
        """Every member's metrics over all two-candidate sequences, in chunks: ``max`` (the
        family's max error), ``abs_sum`` and ``below`` (errors under the exact threshold),
        each ``[E]`` float64 (a NaN error counts as ``inf``)."""
        e = model.members
        top = torch.zeros(e, dtype=torch.float64, device=self.device)
        total = torch.zeros_like(top)
        below = torch.zeros_like(top)
        for rows in self.chunks():
            pred = two_candidate_predictions(model, self.plan(model, rows), self.length)
            err = (pred - self.targets(self.levels.index_select(0, rows))).abs().double().reshape(e, -1)
            err = torch.nan_to_num(err, nan=math.inf)
            top = torch.maximum(top, err.amax(1))
            total += err.sum(1)
            below += (err < EXACT_THRESHOLD).sum(1)
        return {"max": top, "abs_sum": total, "below": below}

    def whole_metrics(self, whole: dict[str, torch.Tensor], model, member: int) -> dict:
        """One member's metrics dict from :meth:`whole`'s sums."""
        pairs = two_candidate_count(self.family)
        top = float(whole["max"][member])
        mean = float(whole["abs_sum"][member]) / pairs
        out = {
            "max_error": top if math.isfinite(top) else None,
            "mean_abs_error": mean if math.isfinite(mean) else None,
            "exact_seq_acc": float(whole["below"][member]) / pairs,
            "exact": top < EXACT_THRESHOLD,
            "sequences": pairs,
        }
        return self.labelled(out, model, member)

    def metrics(self, err: torch.Tensor, model=None, member: int = 0) -> dict:
        """One member's metrics from its errors ``[Q·C², 1]``, over the whole family."""
        return self.labelled(metrics_of(err), model, member)

    def labelled(self, out: dict, model, member: int) -> dict:
        """``out`` with the family's exact sequence count and what was evaluated: the max
        error and ``exact`` hold for the whole family unless ``guarded`` (module docstring)."""
        guarded = False
        if model is not None and not model.scorer.log_space:
            with torch.no_grad():
                guarded = bool(min_denominators(model, self.plan(model), self.length)[member] < DENOMINATOR_GUARD)
        return {
            **out,
            "sequences": count_json(self.family.sequence_count),
            "evaluated": WHOLE_FAMILY if not guarded else "two-candidate sequences (guarded weights)",
            "two_candidate_sequences": two_candidate_count(self.family),
            "averaged_over": "two-candidate sequences",
            "guarded": guarded,
        }


def product_cost(family: ProductFamily, model: ModelSpec) -> tuple[int, int]:
    """``(slots, block)`` of one member's training step on a product family that trains as a
    product (:func:`.two_candidate.training_family`), for the sweep planner's cost model: three weighted
    terms per two-candidate sequence of a step (N per sequence of :func:`sampled_family` for
    the models the reduction does not cover), and the ``Q × (C + 1)`` block of tables."""
    q, c = len(family.queries), len(family.candidates)
    if not reducible_spec(model):
        return (two_candidate_count(family) + SAMPLED_TUPLES) * family.length, q * (c + 1)
    return 3 * q * (firsts_per_step(family) or c) * c, q * (c + 1)


class BatchedProductTrainer(StackTrainer):
    """:class:`~kernelgap.training.trainer.StackTrainer` on a product family scored in batches
    of queries (:class:`ProductScored` with ``batch``).

    Each step trains on every query with its batch of first-slot candidates and every c′.  The
    stop rule is the sequence families' — a member stops at the first step whose errors before
    the update are all below ``stop_below`` — read on the whole family at the first step of each
    epoch of the schedule (every pair seen once since the last reading): there
    :meth:`ProductScored.whole` scores every query (only when some member's batch is below it
    already, since the whole family's max error is at least the batch's).  A member that diverges stops at once, with
    the metrics of its last finite batch.  Records carry the whole family's metrics at the stop
    step or after the last one.
    """

    def __init__(
        self, model, train: ProductScored, cfg: TrainConfig, test=None, check_every: int = CHECK_EVERY, observer=None
    ) -> None:
        super().__init__(model, train, cfg, test, check_every, observer)
        self.whole_at: list[dict | None] = [None] * model.members

    def step_errors(self, step: int) -> torch.Tensor:
        return self.train.batch_errors(self.model, step)

    def stop_marks(self, err, losses, step: int):
        diverged, below = super().stop_marks(err, losses, step)
        exact = torch.zeros_like(diverged)
        if self.cfg.stop_below is None or step % self.train.steps_per_epoch or not bool(below.any()):
            return diverged, exact
        whole = self.train.whole(self.model)
        exact = below & (whole["max"] < self.cfg.stop_below)
        for e in exact.nonzero().flatten().tolist():
            self.whole_at[e] = self.train.whole_metrics(whole, self.model, e)
        return diverged, exact

    def final_errors(self, step: int) -> torch.Tensor:
        """The whole family's metrics of every member still training (kept for its record),
        and the errors of the schedule's next batch, non-finite for a member whose whole-family
        error is not finite (it is then recorded as diverged)."""
        whole = self.train.whole(self.model)
        for e, r in enumerate(self.results):
            if r is None:
                self.whole_at[e] = self.train.whole_metrics(whole, self.model, e)
        with torch.no_grad():
            err = self.train.batch_errors(self.model, step)
        finite = torch.isfinite(whole["max"])[:, None, None]
        return torch.where(finite, err, torch.full_like(err, math.nan))

    def record(self, e: int, status: str, step: int, train_err, test_err, stats=None) -> None:
        super().record(e, status, step, train_err, test_err, stats)
        result = self.results[e]
        if status == "ok" and self.whole_at[e] is not None:
            result.train = self.whole_at[e]
        else:
            result.train = {**metrics_of(train_err), "evaluated": LAST_BATCH}


def scored_of(family: AnyFamily, model, dtype: torch.dtype, device, test: bool = False):
    """The scored form of a family: a sequence family's :class:`Scored`; a product's
    :class:`ProductScored` (full batch only for a test family)."""
    if not isinstance(family, ProductFamily):
        return Scored.of(family, dtype, device)
    what = "test family" if test else "family"
    if not reducible(model):
        raise KernelgapError(
            f"{what} {family.name!r}: {_count(family)} sequences are too many to expand for a model the "
            f"two-candidate form does not cover (one head, position-free maps, no causal mask, nonnegative kernel)"
        )
    scored = ProductScored.of(family, dtype, device)
    if test and scored.batch is not None:
        raise KernelgapError(
            f"test family {family.name!r}: its {two_candidate_count(family):,} two-candidate sequences are more "
            f"than the {two_candidate.PAIRS_PER_STEP:,} a test family is scored on at once"
        )
    return scored


def _count(family: ProductFamily) -> str:
    from ..task.family import count_text

    return count_text(count_json(family.sequence_count))


def product_trainer(model, family: ProductFamily, cfg: TrainConfig, test=None, observer=None) -> StackTrainer:
    """The trainer of a stack on a product family (module docstring): the two-candidate form
    (full batch or batched) for the models it covers, else the sampled sequences; ``observer``
    is told its progress (:mod:`.progress`)."""
    from .config import DTYPES

    dtype = DTYPES[cfg.dtype]
    if reducible(model):
        scored = ProductScored.of(family, dtype, cfg.device)
        trainer = StackTrainer if scored.batch is None else BatchedProductTrainer
        return trainer(model, scored, cfg, test, observer=observer)
    scored = SampledScored.of(sampled_family(family), dtype, cfg.device)
    scored.product = family
    return StackTrainer(model, scored, cfg, test, observer=observer)
