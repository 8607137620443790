"""Distillation from a table: a map's attention fitted to a trained table's first
(``train.distill``; docs/experiments.md, "Distilled from the table").

A run that ends not exact may have a map that cannot reach the family at its rank, or one
whose training from a random start does not find how; distillation tells the two apart:

1. **Teacher.**  The same model with the ``table`` map is trained from the same seeds.
2. **Fit.**  The student's scorer is fitted by Adam to the teacher's attention
   ``p(z | x) ∝ α(x, z)`` over the tokens ``z`` each query token ``x`` meets, on
   ``Σ_x KL(p_teacher ‖ p_student)`` (Hedgehog's loss, arXiv:2402.04347, with a table as the
   teacher).  Where they agree the two attend alike on every sequence (a sequence's attention
   is ``p`` restricted to its tokens).  The student's readout starts as the teacher's.
3. **Training.**  The student then trains on its own schedule and is judged as any run is.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..errors import KernelgapError
from ..models.feature_maps import feature_map_class
from ..task import Family
from .two_candidate import training_family

#: The fit stops once every member's KL (nats, mean over its rows) is below FIT_KL, checked
#: every FIT_CHECK_EVERY steps, or after FIT_STEPS.
FIT_KL = 1e-3
FIT_CHECK_EVERY = 100
FIT_STEPS = 10_000
#: Most (query token, key token) pairs a fit scores per member and head (its memory bound).
MAX_FIT_PAIRS = 1 << 22
#: Model fields the teacher copies from its student (its readout shape and attention layout).
SHARED_FIELDS = ("rank", "heads", "readout", "d_value", "hidden", "position_dependent", "causal")


def student_model(spec):
    """A distilled run's model spec, with the table's calibrated readout where it gives none."""
    if "readout" in spec.model_fields_set:
        return spec
    return spec.model_copy(update={"readout": feature_map_class("table").recipe_model["readout"]})


def teacher_runs(runs: list):
    """The teacher of each run: the same family, seed and shape with the ``table`` map's recipe."""
    out = []
    for run in runs:
        model = {"kind": "kernel", "feature_map": "table", **{k: getattr(run.model, k) for k in SHARED_FIELDS}}
        train = {"dtype": run.train.dtype, "device": run.train.device}
        raw = {"family": run.family.model_dump(), "model": model, "train": train, "seed": run.seed}
        out.append(type(run).parse(raw).resolved())
    return out


def meetings(family: Family) -> tuple[np.ndarray, np.ndarray]:
    """``(queries, mask)``: the tokens at a scored position of some sequence, and
    ``mask [len(queries), T]``, whether each meets each token in a sequence (itself included)."""
    index = family.index
    scored = index[:, family.scored_positions]
    queries = np.unique(scored)
    row = np.full(len(family.tokens), -1)
    row[queries] = np.arange(len(queries))
    mask = np.zeros((len(queries), len(family.tokens)), dtype=bool)
    for q in range(scored.shape[1]):
        for j in range(index.shape[1]):
            mask[row[scored[:, q]], index[:, j]] = True
    return queries, mask


def attention_log_probs(model, tokens: torch.Tensor, queries: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``log p(z | x)`` ``[E, H, P, Q, T]``: the query tokens' scores against every token,
    restricted to ``mask`` and normalised."""
    scorer = model.scorer
    ids = model.token_ids(tokens)
    q = scorer.query_features(tokens[queries], None if ids is None else ids[queries])
    k = scorer.key_features(tokens, ids)
    scores = scorer.combine(q, k)
    if not scorer.log_space:
        scores = torch.log(scores.clamp_min(torch.finfo(scores.dtype).tiny))
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.log_softmax(scores, dim=-1)


def check_distillable(run) -> None:
    """Refuse, before any training, a distilled run whose family the fit cannot read."""
    if not run.train.distill:
        return
    family = training_family(run.family.load(), run.model)
    if not isinstance(family, Family):
        raise KernelgapError(
            "train.distill needs a family trained in full; this product family trains on its two-candidate "
            "sequences (too many to fit attention on)"
        )
    queries = np.unique(family.index[:, family.scored_positions])
    if len(queries) * len(family.tokens) > MAX_FIT_PAIRS:
        raise KernelgapError(
            f"train.distill fits attention on every query-key pair of the family: {len(queries)} query tokens × "
            f"{len(family.tokens)} tokens is over {MAX_FIT_PAIRS:,} pairs"
        )


def fit_attention(student, teacher, family: Family, lr: float, steps: int = FIT_STEPS) -> tuple[list[float], int]:
    """Step 2: the final KL per member (nats, mean over query tokens, heads and key positions)
    and the steps taken."""
    queries, mask = meetings(family)
    first = next(student.parameters())
    device, dtype = first.device, first.dtype
    tokens = torch.as_tensor(family.tokens, dtype=dtype, device=device)
    rows = torch.as_tensor(queries, device=device)
    allowed = torch.as_tensor(mask, device=device)
    with torch.no_grad():
        target = attention_log_probs(teacher, tokens, rows, allowed)
        weight = target.exp()
    student.readout.load_state_dict(teacher.readout.state_dict())
    params = list(student.scorer.parameters())
    opt = torch.optim.Adam(params, lr=lr)

    def member_kl() -> torch.Tensor:
        log_p = attention_log_probs(student, tokens, rows, allowed)
        terms = torch.where(weight > 0, weight * (target - log_p), torch.zeros_like(weight))
        return terms.sum(-1).flatten(1).mean(1)  # [E]

    step = 0
    while True:
        kl = member_kl()
        if step == steps or (step % FIT_CHECK_EVERY == 0 and bool((kl.detach() < FIT_KL).all())):
            return [float(v) for v in kl.detach()], step
        opt.zero_grad(set_to_none=True)
        kl.sum().backward()
        opt.step()
        step += 1


def distill(student, runs: list, seeds: list[int], family: Family, train) -> list[dict]:
    """Steps 1 and 2 for a stack ``student`` of ``runs`` from member ``seeds``, the teacher trained
    by ``train(runs, seeds)`` (the trained stack and one result per run); one ``distilled``
    record entry per member."""
    teachers = teacher_runs(runs)
    teacher, taught = train(teachers, seeds)
    fit_start = time.perf_counter()
    kl, fitted = fit_attention(student, teacher, family, runs[0].train.lr)
    fit_s = time.perf_counter() - fit_start
    return [
        {
            "teacher": {"feature_map": "table", "lr": teachers[0].train.lr, **t.summary()},
            "fit_steps": fitted,
            "kl": k,
            "wall_time_s": t.wall_time_s + fit_s,
        }
        for t, k in zip(taught, kl)
    ]
