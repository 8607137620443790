"""The exact constructions (docs/theory.md, "Constructions"), as instances of the ordinary model classes.

Weights are *set*, not trained; the same ``predict`` code path evaluates them.

1. ``rank1`` — ``α ≡ 1``, ``v(z) = z``, ``a(x) = 2x``, ``b(x) = −|x|``: exact for
   ``N ≤ 2`` (``p_1 = <x_1, x_1 + x_2> − |x_1| = <x_1, x_2>``), fails at ``N = 3``.
2. ``softmax`` — ``q(x) = −βx``, ``k(z) = z``, ``v(z) = z``, ``p = <x, y>``: the
   error is ``Σ_j w_j g_j ≤ (N−1) e^{−β}`` for gaps ``g ≥ 1``, so
   ``β = ln(2(N−1)) + 1`` keeps it below ``1/2`` for every input of length N.
3. ``positive_2m`` — ``φ_K(z) = e_z`` (one-hot over all ``2^m`` keys) and
   ``φ_Q(x)_z = exp(−β<x, z>)``: the weights of (2) from a nonnegative kernel of
   rank ``2^m``.

Beside them, two restrictions of (3) to a family, at any length N
(docs/theory.md, "A construction of rank n at any length"):
:func:`one_hot_candidates` has one feature per distinct candidate token, so the
witness families are solved with as many features as they have good candidates,
and :func:`query_one_hot` one feature per distinct query token, the rank n the
certificate reaches when its Radon clique is every query.  Both are checked
without torch by :mod:`kernelgap.theory.construction`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..errors import KernelgapError
from ..task.constructions import candidate_tokens, one_hot_beta, query_tokens, softmax_beta
from ..task.families.exhaustive import all_tokens
from ..task.family import AnyFamily
from .attention import AttentionModel
from .build import build_model
from .sizing import check_model
from .specs import KernelSpec, SoftmaxSpec

Construction = Callable[[int, int], AttentionModel]
CONSTRUCTIONS: dict[str, Construction] = {}

#: Log-feature standing in for log 0 (exp underflows to exactly 0).
LOG_ZERO = -1.0e4


def register_construction(name: str) -> Callable[[Construction], Construction]:
    def deco(fn: Construction) -> Construction:
        CONSTRUCTIONS[name] = fn
        return fn

    return deco


def _identity_readout(model: AttentionModel, m: int, read_scale: float, bias_per_bit: float) -> None:
    """``v(z) = z``, ``a(x) = read_scale·x``, ``b(x) = bias_per_bit·|x|`` (linear readout)."""
    ro = model.readout
    eye = torch.eye(m, dtype=ro.value.weight.dtype)
    with torch.no_grad():
        ro.value.weight.copy_(eye.expand_as(ro.value.weight))
        ro.value.bias.zero_()
        ro.read.weight.copy_((read_scale * eye).expand_as(ro.read.weight))
        ro.read.bias.zero_()
        ro.bias.weight.fill_(bias_per_bit)
        ro.bias.bias.zero_()


@register_construction("rank1")
def rank1(m: int, length: int = 2, dtype: torch.dtype = torch.float64) -> AttentionModel:
    """Rank-1 kernel attention with ``α ≡ 1`` (exact for N ≤ 2)."""
    spec = KernelSpec(feature_map="mlp_exp", rank=1, d_value=m, readout="linear")
    model = build_model(spec, m, length, seeds=[0], dtype=dtype)
    with torch.no_grad():
        for proj in (model.scorer.q_proj, model.scorer.k_proj):
            for p in proj.parameters():
                p.zero_()  # log φ = 0  ⇒  φ = 1  ⇒  α ≡ 1
    _identity_readout(model, m, read_scale=2.0, bias_per_bit=-1.0)
    return model


@register_construction("softmax")
def softmax(m: int, length: int = 3, dtype: torch.dtype = torch.float64) -> AttentionModel:
    """Dense softmax with ``q = −βx``, ``k = z`` and ``β = ln(2(N−1)) + 1``."""
    beta = softmax_beta(length)
    spec = SoftmaxSpec(score_dim=m, d_value=m, readout="linear", temperature=1.0, scaled_scores=False)
    model = build_model(spec, m, length, seeds=[0], dtype=dtype)
    eye = torch.eye(m, dtype=dtype)
    with torch.no_grad():
        model.scorer.q.weight.copy_(-beta * eye[None])
        model.scorer.q.bias.zero_()
        model.scorer.k.weight.copy_(eye[None])
        model.scorer.k.bias.zero_()
    _identity_readout(model, m, read_scale=1.0, bias_per_bit=0.0)
    return model


@register_construction("positive_2m")
def positive_2m(m: int, length: int = 3, dtype: torch.dtype = torch.float64) -> AttentionModel:
    """Nonnegative rank-``2^m`` kernel reproducing the softmax construction's weights."""
    if m > 12:
        raise KernelgapError(f"the positive rank-2^m construction is built for m ≤ 12, got m = {m}")
    beta = softmax_beta(length)
    vocab = all_tokens(m)
    spec = KernelSpec(feature_map="table", rank=1 << m, d_value=m, readout="linear")
    model = build_model(spec, m, length, seeds=[0], vocabulary=vocab, dtype=dtype)
    bits = torch.from_numpy(vocab).to(dtype)
    scorer = model.scorer
    with torch.no_grad():
        scorer.q_table.theta.copy_((-beta * bits @ bits.T)[None])  # log φ_Q(x)_z = −β<x, z>
        one_hot_log = torch.full((1 << m, 1 << m), LOG_ZERO, dtype=dtype)
        one_hot_log.fill_diagonal_(0.0)  # log φ_K(z) = log e_z
        scorer.k_table.theta.copy_(one_hot_log[None])
    _identity_readout(model, m, read_scale=1.0, bias_per_bit=0.0)
    return model


def build_construction(name: str, m: int, length: int, dtype: torch.dtype = torch.float64) -> AttentionModel:
    if name not in CONSTRUCTIONS:
        raise KernelgapError(f"unknown construction {name!r}; choose from {', '.join(CONSTRUCTIONS)}")
    return CONSTRUCTIONS[name](m, length, dtype)


def _table_model(family: AnyFamily, rank: int, q_log: torch.Tensor, k_log: torch.Tensor, dtype) -> AttentionModel:
    """A one-member ``table`` kernel of ``rank`` with the given log-features over the family's
    tokens, ``v(z) = z`` and ``p = <x, y>``; refused in one line when it would not fit."""
    t, m = len(family.tokens), family.m
    spec = KernelSpec(feature_map="table", rank=rank, d_value=m, readout="linear")
    check_model(spec, "construction", m=m, tokens=t)
    model = build_model(spec, m, family.length, seeds=[0], vocabulary=family.tokens, dtype=dtype)
    with torch.no_grad():
        model.scorer.q_table.theta.copy_(q_log[None])
        model.scorer.k_table.theta.copy_(k_log[None])
    _identity_readout(model, m, read_scale=1.0, bias_per_bit=0.0)
    return model


def one_hot_candidates(family: AnyFamily, dtype: torch.dtype = torch.float64) -> AttentionModel:
    """A nonnegative kernel of rank = distinct candidates, exact on every sequence of ``family``.

    ``φ_K(z) = e_z`` on the candidate tokens (0 on query-only tokens, which then get no
    weight), ``φ_Q(x)_c = exp(−β<x, c>)``, ``v(z) = z`` and ``p = <x, y>``, with
    ``β = ln(2(N − 2)) + 1`` (:func:`softmax_beta` of N − 1; ``ln 2 + 1`` at N = 3).  Since
    ``<x, c> ≤ |x|`` the target is the least candidate overlap; at most N − 1 weighted terms
    (the candidates and the query itself when it is a candidate) sit a gap ``g ≥ 1`` above
    it, each adding at most ``g·e^{−βg} ≤ e^{−β}`` to the error (relative to the minimum's
    weight), so the error is at most ``(N − 1)e^{−β} ≤ 1/e < 1/2`` (docs/theory.md,
    "A construction of rank n at any length").
    """
    candidates = candidate_tokens(family)
    if not len(candidates):
        raise KernelgapError("the candidate one-hot construction needs a family with candidates")
    r, t = len(candidates), len(family.tokens)
    bits = torch.from_numpy(family.tokens).to(dtype)
    beta = one_hot_beta("candidate_one_hot", family.length)
    cols = torch.from_numpy(candidates)
    one_hot_log = torch.full((t, r), LOG_ZERO, dtype=dtype)
    one_hot_log[cols, torch.arange(r)] = 0.0
    return _table_model(family, r, -beta * bits @ bits[cols].T, one_hot_log, dtype)


def query_one_hot(family: AnyFamily, dtype: torch.dtype = torch.float64) -> AttentionModel:
    """A nonnegative kernel of rank n = distinct query tokens, exact on every input of length N.

    With the queries ``x_1..x_n``: ``φ_Q(x_i) = e_i``, ``φ_K(z)_i = exp(−β<x_i, z>)`` for
    every token z (the queries included), ``v(z) = z``, ``p = <x, y>`` and
    ``β = ln(2(N − 1)) + 1`` (:func:`softmax_beta`).  Then ``α(x_i, z) = exp(−β<x_i, z>)``,
    dense softmax's weights, so it is exact wherever softmax is: on every sequence of length
    N whose scored tokens are queries (docs/theory.md, "A construction of rank n at any length").
    Tokens that are never scored get ``φ_Q = 0`` (no row is ever read for them).
    """
    queries = query_tokens(family)
    n, t = len(queries), len(family.tokens)
    bits = torch.from_numpy(family.tokens).to(dtype)
    beta = one_hot_beta("query_one_hot", family.length)
    rows = torch.from_numpy(queries)
    one_hot_log = torch.full((t, n), LOG_ZERO, dtype=dtype)
    one_hot_log[rows, torch.arange(n)] = 0.0
    return _table_model(family, n, one_hot_log, -beta * bits @ bits[rows].T, dtype)
