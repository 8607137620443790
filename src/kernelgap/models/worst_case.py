"""The exact worst error of a model over a family, product families of any length included.

docs/theory.md, "A construction of rank n at any length".  A product family of length N
holds ``Q·C^(N−1)`` sequences; for a single head the worst of them is found per query by
Dinkelbach's method over the N − 1 independent slots (:mod:`kernelgap.task.worst_case`),
from the model's tables on the queries × candidates block, so no tuple is enumerated.  A
sequence-list :class:`~kernelgap.task.family.Family` is simply evaluated on every sequence.

Several heads are refused: their prediction is a sum of ratios, which is not
linear-fractional, so the slot-wise argmax no longer finds the maximum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import KernelgapError
from ..task.family import AnyFamily, Family, ProductFamily
from ..task.minip import EXACT_THRESHOLD
from ..task.worst_case import CHUNK_ELEMENTS, HeadTables, worst_case
from .attention import DENOMINATOR_GUARD, AttentionModel

#: Most sequences of a sequence-list family predicted at once (each ``[E, N]`` scores).
PREDICT_CHUNK = 1 << 16


@dataclass
class FamilyWorstCase:
    """A model's worst case over a family, per member ``[E]`` and query ``[E, Q]``: ``max_error``
    (of a sequence of the family), ``error_bound`` (on every sequence's error), ``exact`` and
    ``margin`` against 1/2, the worst error per query and a sequence attaining it ``[E, Q, N]``;
    ``evaluated``: ``"dinkelbach"`` (product family) or ``"every sequence"``."""

    max_error: np.ndarray
    error_bound: np.ndarray
    exact: np.ndarray
    margin: np.ndarray
    queries: np.ndarray
    query_errors: np.ndarray
    worst_sequences: np.ndarray
    evaluated: str
    guarded: bool = False

    @classmethod
    def of(cls, max_error, error_bound, queries, query_errors, worst, evaluated: str, guarded: bool = False):
        """The worst case with ``exact`` and ``margin`` read off ``error_bound``."""
        exact, margin = error_bound < EXACT_THRESHOLD, EXACT_THRESHOLD - error_bound
        return cls(max_error, error_bound, exact, margin, queries, query_errors, worst, evaluated, guarded)

    def to_json(self, member: int = 0) -> dict:
        """One member's summary as JSON values."""
        return {
            "max_error": float(self.max_error[member]),
            "error_bound": float(self.error_bound[member]),
            "exact": bool(self.exact[member]),
            "margin": float(self.margin[member]),
            "evaluated": self.evaluated,
            "guarded": self.guarded,
        }


def _check_model(model) -> None:
    if model.scorer.heads != 1:
        raise KernelgapError(
            f"the worst case over a product family needs one head, the model has {model.scorer.heads} "
            f"(a sum of ratios is not linear-fractional)"
        )
    if not model.scorer.nonnegative:
        raise KernelgapError("the worst case over a product family needs a nonnegative kernel")


@torch.no_grad()
def family_worst_case(model: AttentionModel, family: AnyFamily, device: str | torch.device = "cpu") -> FamilyWorstCase:
    """The worst error of every member of ``model`` over ``family`` (module docstring).

    ``model`` is a single-head :class:`AttentionModel` (kernel with a nonnegative kernel, or
    softmax), causal or not, with position-dependent maps or not (their key positions must
    be the family's length); ``device``: where the tables are computed (the model is there)."""
    if not isinstance(model, AttentionModel):
        raise KernelgapError("the worst case is computed for attention models (kernel or softmax), not modules")
    if isinstance(family, ProductFamily):
        _check_model(model)
        return _product_worst_case(model, family, device)
    return _sequence_worst_case(model, family, device)


def _tables(model: AttentionModel, tokens: torch.Tensor, queries: np.ndarray, candidates: np.ndarray, qpos: int):
    """``scores, values [E, P, Q, C]`` (values with the bias folded in), the self terms
    ``[E, Q]`` at position ``qpos``, as float64 arrays."""
    scorer, readout = model.scorer, model.readout
    q_tok, c_tok = tokens[torch.as_tensor(queries)], tokens[torch.as_tensor(candidates)]
    q_ids, c_ids = model.token_ids(q_tok), model.token_ids(c_tok)
    qf = scorer.query_features(q_tok, q_ids)  # [E, 1, 1, Q, r]
    kc = scorer.key_features(c_tok, c_ids)  # [E, 1, P, C, r]
    kq = scorer.key_features(q_tok, q_ids)  # [E, 1, P, Q, r]
    scores = scorer.combine(qf, kc)[:, 0]  # [E, P, Q, C]
    self_scores = scorer.combine_diagonal(qf, kq)[:, 0]  # [E, P, Q]
    a = readout.read_vectors(q_tok)  # [E, 1, 1, Q, d]
    u = (a @ readout.values(c_tok).transpose(-1, -2))[:, 0]  # [E, P, Q, C]
    u_self = (a * readout.values(q_tok)).sum(-1)[:, 0]  # [E, P, Q]
    bias = readout.biases(q_tok)  # [E, Q]
    p = qpos if scores.shape[1] > 1 else 0

    def host(x):
        return x.double().cpu().numpy()

    return (
        host(scores),
        host(u + bias[:, None, :, None]),
        host(self_scores[:, p]),
        host(u_self[:, p] + bias),
        host(bias),
    )


def _product_worst_case(model: AttentionModel, family: ProductFamily, device) -> FamilyWorstCase:
    n, qpos = family.length, family.query_position - 1
    key_positions = model.scorer.key_positions
    if model.position_dependent and key_positions != n:
        raise KernelgapError(f"the model has {key_positions} key positions, the family has length {n}")
    tokens = torch.as_tensor(family.tokens, dtype=model.dtype, device=device)
    bits = family.tokens.astype(np.int64)
    queries, candidates = family.queries, family.candidates
    per_query = model.members * key_positions * len(candidates)
    chunk = max(1, CHUNK_ELEMENTS // max(1, per_query))
    errors, bounds, slots, guarded = [], [], [], False
    for lo in range(0, len(queries), chunk):
        qs = queries[lo : lo + chunk]
        scores, values, self_scores, self_values, bias = _tables(model, tokens, qs, candidates, qpos)
        levels = bits[qs] @ bits[candidates].T
        found = worst_case(
            HeadTables(scores, values, self_scores, self_values, levels, bias),
            n,
            family.query_position,
            causal=model.causal,
            log_space=model.scorer.log_space,
            guard=0.0 if model.scorer.log_space else DENOMINATOR_GUARD,
        )
        errors.append(found.error)
        bounds.append(found.bound)
        slots.append(found.slots)
        guarded |= bool(found.guarded.any())
    error, bound, slot = np.concatenate(errors, 1), np.concatenate(bounds, 1), np.concatenate(slots, 1)
    ids = np.where(slot >= 0, candidates[np.maximum(slot, 0)], queries[None, :, None])
    return FamilyWorstCase.of(error.max(axis=1), bound.max(axis=1), queries, error, ids, "dinkelbach", guarded)


def _sequence_worst_case(model: AttentionModel, family: Family, device) -> FamilyWorstCase:
    tokens = torch.as_tensor(family.tokens, dtype=model.dtype, device=device)
    ids = model.token_ids(tokens)
    positions = family.scored_positions
    target = family.targets()[:, positions]  # [S, K]
    errs = []
    for lo in range(0, len(family), PREDICT_CHUNK):
        index = torch.as_tensor(family.index[lo : lo + PREDICT_CHUNK], device=device)
        pred = model.predict(tokens, index, positions, ids=ids).double().cpu().numpy()
        errs.append(np.abs(pred - target[None, lo : lo + PREDICT_CHUNK]))
    err = np.concatenate(errs, axis=1)  # [E, S, K]
    err = np.where(np.isnan(err), np.inf, err)
    e, s, k = err.shape
    query_of = family.index[:, positions].reshape(-1)  # [S·K]
    queries, inverse = np.unique(query_of, return_inverse=True)
    flat = err.reshape(e, s * k)
    query_errors = np.full((e, len(queries)), -np.inf)
    worst = np.zeros((e, len(queries), family.length), dtype=np.int64)
    for member in range(e):
        order = np.lexsort((-flat[member], inverse))  # by query, worst first
        first = order[np.r_[True, inverse[order][1:] != inverse[order][:-1]]]
        query_errors[member, inverse[first]] = flat[member, first]
        worst[member, inverse[first]] = family.index[first // k]
    member_error = flat.max(axis=1)
    return FamilyWorstCase.of(member_error, member_error, queries, query_errors, worst, "every sequence")
