"""Training on a product family of any length N, scored on the whole family (docs/theory.md,
"Training on product families").

A product family of length N holds ``Q·C^(N−1)`` sequences, never materialised.  For one
head with position-free maps, no causal mask and a nonnegative kernel, the prediction is a
linear-fractional function of N − 1 independent slots, so by Dinkelbach's condition the
extreme errors over the whole family are those of the ``Q·C²`` *two-candidate sequences*
``(x; c, c′, …, c′)`` (the proof: docs/theory.md).  With ``k = N − 2`` copies of c′,

    p = (A + a(c)U(c) + k·a(c′)U(c′)) / (S + a(c) + k·a(c′)) + b,

in log space ``ū(c) + σ(log a(c′) + log k − log(S + a(c)))·(U(c′) − ū(c))``.  A linear-space
map whose total weight falls below the guard divides by the guard instead, which a record
reports (``guarded``: nothing is then claimed for the whole family).  Mean errors and the
share of exact sequences are over the two-candidate sequences (``averaged_over``).

Other models train on the expanded family where it is small, else on its two-candidate
sequences plus :data:`SAMPLED_TUPLES` random tuples, the record adding the exact worst case
over the whole family where it applies (one head, a nonnegative kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import FamilyError, KernelgapError
from ..models import ModelSpec
from ..models.attention import DENOMINATOR_GUARD, AttentionModel, guard_denominator
from ..models.scorers import PairPlan
from ..task import EXACT_THRESHOLD
from ..task.family import MAX_EXPANDED, AnyFamily, Family, ProductFamily, count_json, count_text
from . import two_candidate
from .config import TrainConfig
from .stack import CHECK_EVERY, Scored, StackTrainer, metrics_of
from .two_candidate import firsts_per_step, reducible_spec, two_candidate_count, two_candidate_form

#: Most pairs a step or a chunk must score at least (one query's ``C²``, or ``Q·C``).
MAX_PAIRS_PER_QUERY = 1 << 26
#: Seed of the batched schedule: one for every member, so no run depends on its stack mates.
SCHEDULE_SEED = 0
#: What a record's ``train.evaluated`` says for the reduction, and for a diverged batched member.
WHOLE_FAMILY = "whole product family (two-candidate form)"
LAST_BATCH = "last finite batch (diverged)"


SAMPLED_TUPLES = 1 << 16
SAMPLE_SEED = 0


def sampled_family(family: ProductFamily, tuples: int = SAMPLED_TUPLES, seed: int = SAMPLE_SEED) -> Family:
    """The two-candidate sequences of ``family`` and ``tuples`` random ones, as a sequence family."""
    q, c, n = len(family.queries), len(family.candidates), family.length
    pairs = q * c * c  # (x; c, c′, …, c′) for every query x and candidates c, c′
    if pairs + tuples > MAX_EXPANDED:
        raise FamilyError(
            f"product family {family.name!r}: a model the two-candidate form does not cover trains on the "
            f"{pairs:,} two-candidate sequences and {tuples:,} sampled ones; at most {MAX_EXPANDED:,} are formed"
        )
    others = [p for p in range(n) if p != family.query_position - 1]
    grid = np.meshgrid(np.arange(q), np.arange(c), np.arange(c), indexing="ij")
    qi, ci, di = (g.ravel() for g in grid)
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, c, size=(tuples, n - 1))
    index = np.empty((pairs + tuples, n), dtype=np.int64)
    index[:pairs, family.query_position - 1] = family.queries[qi]
    index[:pairs, others[0]] = family.candidates[ci]
    index[:pairs, others[1:]] = family.candidates[di][:, None]
    index[pairs:, family.query_position - 1] = family.queries[rng.integers(0, q, size=tuples)]
    index[pairs:, others] = family.candidates[drawn]
    return Family(family.tokens, index, family.query_position, [], family.name, dict(family.meta))


def whole_family_check(model, family: ProductFamily) -> list[dict] | None:
    """Per member, the exact worst case over the whole family, or None where it does not apply."""
    from ..models.worst_case import family_worst_case

    try:
        found = family_worst_case(model, family, device=next(model.parameters()).device)
    except KernelgapError:
        return None
    return [found.to_json(e) for e in range(model.members)]


@dataclass
class SampledScored(Scored):
    """:func:`sampled_family`'s sequences; each record adds ``whole_family``."""

    product: ProductFamily | None = None
    tuples: int = SAMPLED_TUPLES
    checked: tuple | None = field(default=None, repr=False)  # (parameter versions, per-member checks)

    def metrics(self, err: torch.Tensor, model=None, member: int = 0) -> dict:
        evaluated = f"two-candidate sequences and {self.tuples:,} sampled tuples (not the whole family)"
        out = {**metrics_of(err), "evaluated": evaluated}
        if model is not None and self.product is not None:
            out["whole_family"] = self.check(model)[member]
        return out

    def check(self, model) -> list:
        """:func:`whole_family_check` of the present parameters (once per update)."""
        versions = tuple(p._version for p in model.parameters())
        if self.checked is None or self.checked[0] != versions:
            found = whole_family_check(model, self.product)
            self.checked = (versions, found if found is not None else [None] * model.members)
        return self.checked[1]


def reducible(model) -> bool:
    """:func:`two_candidate_form` for a built model."""
    if not isinstance(model, AttentionModel):
        return False
    scorer = model.scorer
    return two_candidate_form(scorer.heads, model.position_dependent, model.causal, scorer.nonnegative)


def block_plan(model: AttentionModel, tokens: torch.Tensor, ids, rows: torch.Tensor, cols: torch.Tensor) -> PairPlan:
    """The ``rows × cols`` block of the model's tables and the rows' self pairs (nothing gathered)."""
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
    """The :class:`~.stack.Scored` of a product family, through its two-candidate sequences:
    full batch (``batch`` None), or ``batch`` first-slot candidates per step from a seeded
    schedule, the whole family then scored in chunks (:meth:`whole`)."""

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

    token_ids = Scored.token_ids

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
        """The first-slot candidate positions of step ``step``: ``batch`` of a fresh permutation
        per epoch, the last batch filled up from its start (every step's errors one shape)."""
        per = self.steps_per_epoch
        epoch, at = divmod(step, per)
        gen = torch.Generator().manual_seed(SCHEDULE_SEED + epoch)
        order = torch.randperm(len(self.candidates), generator=gen)
        return order[(at * self.batch + torch.arange(self.batch)) % len(order)].to(self.device)

    def batch_errors(self, model, step: int) -> torch.Tensor:
        """``pred − target`` of every query with the step's first-slot candidates, ``[E, Q·b·C, 1]``."""
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
        """Every member's ``max``, ``abs_sum`` and ``below`` (the exact threshold) error over all
        two-candidate sequences, in chunks, each ``[E]`` float64 (NaN counts as ``inf``)."""
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
        """``out`` with the family's sequence count and what was evaluated (``guarded``: the
        max error holds for the two-candidate sequences only)."""
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
    """``(slots, block)`` of one member's step on a product family, for the sweep planner: three
    weighted terms per two-candidate sequence (N per sampled sequence for the models the
    reduction does not cover), and the ``Q × (C + 1)`` block of tables."""
    q, c = len(family.queries), len(family.candidates)
    if not reducible_spec(model):
        return (two_candidate_count(family) + SAMPLED_TUPLES) * family.length, q * (c + 1)
    return 3 * q * (firsts_per_step(family) or c) * c, q * (c + 1)


class BatchedProductTrainer(StackTrainer):
    """:class:`~.stack.StackTrainer` on a product family scored in batches.  A member stops when
    the whole family's max error is below ``stop_below``, read at the first step of each epoch
    (only when its batch is below it already: the family's max is at least the batch's); one
    that diverges stops at once with its last finite batch's metrics."""

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
        """The next batch's errors, after keeping every member's whole-family metrics for its
        record; non-finite (diverged) for a member whose whole-family error is not finite."""
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
            f"{what} {family.name!r}: {count_text(count_json(family.sequence_count))} sequences are too many to "
            f"expand for a model the two-candidate form does not cover (one head, position-free maps, no causal "
            f"mask, nonnegative kernel)"
        )
    scored = ProductScored.of(family, dtype, device)
    if test and scored.batch is not None:
        raise KernelgapError(
            f"test family {family.name!r}: its {two_candidate_count(family):,} two-candidate sequences are more "
            f"than the {two_candidate.PAIRS_PER_STEP:,} a test family is scored on at once"
        )
    return scored


def product_trainer(model, family: ProductFamily, cfg: TrainConfig, test=None, observer=None) -> StackTrainer:
    """The trainer of a stack on a product family: the two-candidate form (full batch or
    batched) for the models it covers, else the sampled sequences."""
    from .config import DTYPES

    dtype = DTYPES[cfg.dtype]
    if reducible(model):
        scored = ProductScored.of(family, dtype, cfg.device)
        trainer = StackTrainer if scored.batch is None else BatchedProductTrainer
        return trainer(model, scored, cfg, test, observer=observer)
    scored = SampledScored.of(sampled_family(family), dtype, cfg.device)
    scored.product = family
    return StackTrainer(model, scored, cfg, test, observer=observer)
