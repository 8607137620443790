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

Beside them, :func:`one_hot_candidates` restricts (3) to a family: one feature
per distinct candidate token, so the witness families are solved with as many
features as they have good candidates, the rank the certificate proves
necessary.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from ..errors import KernelgapError
from ..task.exhaustive import all_tokens
from ..task.family import Family
from .attention import AttentionModel, ModelSpec, build_model

Construction = Callable[[int, int], AttentionModel]
CONSTRUCTIONS: dict[str, Construction] = {}

#: Log-feature standing in for log 0 (exp underflows to exactly 0).
LOG_ZERO = -1.0e4


def register_construction(name: str) -> Callable[[Construction], Construction]:
    def deco(fn: Construction) -> Construction:
        CONSTRUCTIONS[name] = fn
        return fn

    return deco


def softmax_beta(length: int) -> float:
    """``β = ln(2(N−1)) + 1``; lengths below 2 use the N = 2 value."""
    return math.log(2 * (max(length, 2) - 1)) + 1


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
    spec = ModelSpec(kind="kernel", feature_map="mlp_exp", rank=1, d_value=m, readout="linear")
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
    spec = ModelSpec(kind="softmax", score_dim=m, d_value=m, readout="linear")
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
    spec = ModelSpec(kind="kernel", feature_map="table", rank=1 << m, d_value=m, readout="linear")
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


def one_hot_candidates(family: Family, dtype: torch.dtype = torch.float64) -> AttentionModel:
    """A nonnegative kernel of rank = distinct candidates, exact on every sequence of ``family``.

    ``φ_K(z) = e_z`` on the tokens at the non-query positions (0 on query-only
    tokens, which then get no weight), ``φ_Q(x)_c = exp(−β<x, c>)`` with
    ``β = ln 2 + 1``, ``v(z) = z`` and ``p = <x, y>``.  Since ``<x, c> ≤ |x|``,
    the target at the query position is the smaller candidate overlap, and
    softmax over the two candidates misses it by at most ``e^{−β} < 1/2``.
    """
    if family.query_position is None or family.length != 3:
        raise KernelgapError("the one-hot construction needs length-3 sequences with one query position")
    qpos = family.query_position - 1
    others = [p for p in range(3) if p != qpos]
    candidates = np.unique(family.index[:, others])
    r, t, m = len(candidates), len(family.tokens), family.m
    spec = ModelSpec(kind="kernel", feature_map="table", rank=r, d_value=m, readout="linear")
    model = build_model(spec, m, 3, seeds=[0], vocabulary=family.tokens, dtype=dtype)
    bits = torch.from_numpy(family.tokens).to(dtype)
    beta = softmax_beta(2)
    one_hot_log = torch.full((t, r), LOG_ZERO, dtype=dtype)
    one_hot_log[torch.from_numpy(candidates), torch.arange(r)] = 0.0
    scorer = model.scorer
    with torch.no_grad():
        scorer.q_table.theta.copy_((-beta * bits @ bits[torch.from_numpy(candidates)].T)[None])
        scorer.k_table.theta.copy_(one_hot_log[None])
    _identity_readout(model, m, read_scale=1.0, bias_per_bit=0.0)
    return model
