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

Beside them, two restrictions of (3) to a family, at any length N: one feature per distinct
candidate token (:func:`one_hot_candidates`) or per distinct query token
(:func:`query_one_hot`, the rank n the certificate reaches when its Radon clique is every query).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..errors import KernelgapError
from ..task.constructions import candidate_tokens, one_hot_beta, query_tokens, softmax_beta
from ..task.families.exhaustive import all_tokens
from ..task.family import AnyFamily
from .attention import AttentionModel
from .build import build_model, check_model
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
    vocab = all_tokens(m)
    bits = torch.from_numpy(vocab).to(dtype)
    q_log = -softmax_beta(length) * bits @ bits.T  # log φ_Q(x)_z = −β<x, z>
    k_log = _one_hot_log(1 << m, torch.arange(1 << m), dtype)  # log φ_K(z) = log e_z
    return table_model(vocab, length, q_log, k_log, dtype, check=False)


def build_construction(name: str, m: int, length: int, dtype: torch.dtype = torch.float64) -> AttentionModel:
    if name not in CONSTRUCTIONS:
        raise KernelgapError(f"unknown construction {name!r}; choose from {', '.join(CONSTRUCTIONS)}")
    return CONSTRUCTIONS[name](m, length, dtype)


def _one_hot_log(rows: int, hot: torch.Tensor, dtype) -> torch.Tensor:
    """``[rows, len(hot)]`` log-features ``log e_i`` at the rows ``hot`` (:data:`LOG_ZERO` elsewhere)."""
    out = torch.full((rows, len(hot)), LOG_ZERO, dtype=dtype)
    out[hot, torch.arange(len(hot))] = 0.0
    return out


def table_model(vocab, length: int, q_log: torch.Tensor, k_log: torch.Tensor, dtype, check: bool = True):
    """A one-member ``table`` kernel with the log-features ``[T, r]`` over the tokens ``vocab``,
    ``v(z) = z`` and ``p = <x, y>``; ``check``: refused in one line when it would not fit."""
    m = vocab.shape[1]
    spec = KernelSpec(feature_map="table", rank=k_log.shape[1], d_value=m, readout="linear")
    if check:
        check_model(spec, "construction", m=m, tokens=len(vocab))
    model = build_model(spec, m, length, seeds=[0], vocabulary=vocab, dtype=dtype)
    with torch.no_grad():
        model.scorer.q_table.theta.copy_(q_log[None])
        model.scorer.k_table.theta.copy_(k_log[None])
    _identity_readout(model, m, read_scale=1.0, bias_per_bit=0.0)
    return model


def one_hot_candidates(family: AnyFamily, dtype: torch.dtype = torch.float64) -> AttentionModel:
    """A nonnegative kernel of rank = distinct candidates, exact on every sequence of ``family``:
    ``φ_K(z) = e_z`` on the candidates (0 on query-only tokens), ``φ_Q(x)_c = exp(−β<x, c>)``,
    ``v(z) = z``, ``p = <x, y>``, ``β = ln(2(N − 2)) + 1``; the error is at most
    ``(N − 1)e^{−β} ≤ 1/e < 1/2`` (docs/theory.md, "A construction of rank n at any length")."""
    candidates = candidate_tokens(family)
    if not len(candidates):
        raise KernelgapError("the candidate one-hot construction needs a family with candidates")
    bits, cols = torch.from_numpy(family.tokens).to(dtype), torch.from_numpy(candidates)
    beta = one_hot_beta("candidate_one_hot", family.length)
    one_hot_log = _one_hot_log(len(family.tokens), cols, dtype)
    return table_model(family.tokens, family.length, -beta * bits @ bits[cols].T, one_hot_log, dtype)


def query_one_hot(family: AnyFamily, dtype: torch.dtype = torch.float64) -> AttentionModel:
    """A nonnegative kernel of rank n = distinct query tokens, exact on every input of length N:
    ``φ_Q(x_i) = e_i``, ``φ_K(z)_i = exp(−β<x_i, z>)``, ``v(z) = z``, ``p = <x, y>``,
    ``β = ln(2(N − 1)) + 1``, so ``α(x_i, z)`` are dense softmax's weights and it is exact
    wherever softmax is (docs/theory.md, "A construction of rank n at any length")."""
    queries = query_tokens(family)
    bits, rows = torch.from_numpy(family.tokens).to(dtype), torch.from_numpy(queries)
    beta = one_hot_beta("query_one_hot", family.length)
    one_hot_log = _one_hot_log(len(family.tokens), rows, dtype)
    return table_model(family.tokens, family.length, one_hot_log, -beta * bits @ bits[rows].T, dtype)
