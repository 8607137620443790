"""The reference recurrent layers (kernelgap.probe.layers): each equals its recurrence written
here independently (the decayed layers in their parallel form, the delta rules as products of
matrices ``a_t (I − β_t k_t k_tᵀ)``), is causal, and runs through ``kernelgap probe``."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.probe import ProbeConfig, run_probe
from kernelgap.probe.layers import (
    LAYERS,
    DeltaNet,
    GatedDeltaNet,
    GatedLinearAttention,
    Mamba2SSM,
    RetNetRetention,
)


def parallel(q, k, v, log_decay):
    """``y_i = Σ_{j ≤ i} <q_i, exp(L_i − L_j) ⊙ k_j> v_j``, ``L_i = Σ_{t ≤ i} log a_t``: the
    additive recurrence ``S_t = a_t ⊙ S_{t-1} + k_t v_tᵀ`` unrolled."""
    cum = log_decay.expand_as(q).cumsum(1)  # [B, N, r]
    n = q.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    gap = (cum[:, :, None, :] - cum[:, None, :, :]).masked_fill(~mask[None, :, :, None], float("-inf"))
    weights = torch.einsum("bir,bjr,bijr->bij", q, k, gap.exp())
    return weights @ v


def products(q, k, v, decay, beta):
    """``S_t = a_t (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ`` one sequence, one step at a time."""
    out = torch.zeros_like(v)
    for s in range(q.shape[0]):
        state = torch.zeros(q.shape[-1], v.shape[-1], dtype=q.dtype)
        eye = torch.eye(q.shape[-1], dtype=q.dtype)
        for t in range(q.shape[1]):
            a, b, key = decay[s, t, 0], beta[s, t, 0], k[s, t]
            state = a * (eye - b * torch.outer(key, key)) @ state + b * torch.outer(key, v[s, t])
            out[s, t] = state.T @ q[s, t]
    return out


def reference(layer, x):
    """The layer's output by the formula its docstring states, computed here."""
    q, k, v = layer.q(x), layer.k(x), layer.v(x)
    if isinstance(layer, GatedLinearAttention):
        y = parallel(q, k, v, F.logsigmoid(layer.gate(x)) / layer.tau)
    elif isinstance(layer, RetNetRetention):
        y = parallel(q, k, v, torch.full((1, 1, 1), layer.decay, dtype=x.dtype).log())
        if layer.norm is not None:
            y = F.group_norm(y.reshape(-1, y.shape[-1]), 1, layer.norm.weight, layer.norm.bias).reshape(y.shape)
    elif isinstance(layer, Mamba2SSM):
        delta = F.softplus(layer.dt(x))
        y = parallel(q, delta * k, v, -delta * layer.a_log.exp())
    else:
        gate = torch.sigmoid(layer.alpha(x)) if isinstance(layer, GatedDeltaNet) else torch.ones_like(x[..., :1])
        q, k = q / q.norm(dim=-1, keepdim=True), k / k.norm(dim=-1, keepdim=True)
        y = products(q, k, v, gate, torch.sigmoid(layer.beta(x)))
    return layer.o(y)


def build(name: str, d_model: int, rank: int, seed: int, **kwargs) -> torch.nn.Module:
    torch.manual_seed(seed)
    layer = LAYERS[name](d_model, rank, d_value=5, **kwargs).double()
    with torch.no_grad():  # larger weights than the init's, so decays and gates spread out
        for p in layer.parameters():
            p.mul_(3.0)
    return layer


VARIANTS = [(name, {}) for name in LAYERS] + [("RetNetRetention", {"group_norm": True})]


@pytest.mark.parametrize(("name", "kwargs"), VARIANTS)
@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 3), length=st.integers(1, 6), rank=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_each_layer_equals_its_recurrence(name, kwargs, batch, length, rank, seed):
    layer = build(name, 4, rank, seed, **kwargs)
    x = torch.randn(batch, length, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    got, want = layer(x), reference(layer, x)
    assert got.shape == (batch, length, 4)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


@pytest.mark.parametrize(("name", "kwargs"), VARIANTS)
def test_each_layer_is_causal(name, kwargs):
    layer = build(name, 4, 3, 0, **kwargs)
    x = torch.randn(8, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for t in range(5):
        moved = x.clone()
        moved[:, t:] = torch.randn(8, 5 - t, 4, dtype=torch.float64)
        before, after = layer(x), layer(moved)
        assert torch.equal(before[:, :t], after[:, :t])
        assert not torch.allclose(before[:, t], after[:, t])  # the changed token is seen


def rectangle(layer, seed: int) -> float:
    """``|y(g, g') + y(b, b') − y(g, b') − y(b, g')|`` at the query (position 3) of sequences
    ``(c_1, c_2, x)``, ``c_1 ∈ {g, b}``, ``c_2 ∈ {g', b'}``: zero for every ``x, g, b`` exactly
    when the output is additive in the two candidates (docs/experiments.md)."""
    gen = torch.Generator().manual_seed(seed)
    x, g, b, g2, b2 = torch.randn(5, 4, 4, dtype=torch.float64, generator=gen)

    def y(c1, c2):
        return layer(torch.stack([c1, c2, x], dim=1))[:, -1]

    with torch.no_grad():
        return float((y(g, g2) + y(b, b2) - y(g, b2) - y(b, g2)).abs().max())


def test_retention_without_its_norm_is_additive_in_the_candidates_and_the_others_are_not():
    for seed in range(5):
        assert rectangle(build("RetNetRetention", 4, 3, seed), seed) < 1e-12
        others = [build(name, 4, 3, seed) for name in LAYERS if name != "RetNetRetention"]
        others.append(build("RetNetRetention", 4, 3, seed, group_norm=True))
        assert all(rectangle(layer, seed) > 1e-3 for layer in others)


def test_sizes_and_bad_arguments():
    layer = GatedDeltaNet(32, 8, d_value=16)
    assert layer.kernelgap_features(8) == 8 and layer.kernelgap_state_size(8) == 128
    assert layer.kernelgap_interface == "layer"
    with pytest.raises(ValueError, match="decay"):
        RetNetRetention(32, 8, decay=0.0)
    with pytest.raises(ValueError, match="gate_temperature"):
        GatedLinearAttention(32, 8, gate_temperature=0.0)
    assert isinstance(DeltaNet(32, 8), torch.nn.Module)


@pytest.mark.parametrize("name", list(LAYERS))
def test_each_layer_runs_through_the_probe(name, tmp_path):
    config = ProbeConfig(
        f"kernelgap.probe.layers:{name}",
        ranks={"witness": [2], "ood-n4": []},
        steps=3,
        recipes=False,
        out=tmp_path,
        executor="inline",
    )
    meta = run_probe(config, log=lambda *_: None)
    assert meta["reading"] == "final" and meta["interface"] == "layer"
    (suite,) = meta["suites"]
    assert suite["features"] == [2] and suite["certified_rank"] == 16
    runs = list((tmp_path / meta["runs"]).rglob("runs/*.json"))
    assert len(runs) == 1 and json.loads(runs[0].read_text())["steps"] == 3


def test_the_recurrence_agrees_with_fla_reference_recurrences():
    """fla-core's own torch references (float32, q scaled by ``K^{-1/2}``), where installed."""
    naive_gla = pytest.importorskip("fla.ops.gla.naive").naive_recurrent_gla
    naive_simple = pytest.importorskip("fla.ops.simple_gla.naive").naive_recurrent_simple_gla
    naive_delta = pytest.importorskip("fla.ops.delta_rule.naive").delta_rule_recurrence
    naive_gated = pytest.importorskip("fla.ops.gated_delta_rule.naive").naive_recurrent_gated_delta_rule
    from kernelgap.probe.layers import recurrence

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 7, d, generator=gen) for d in (4, 4, 3))
    log_a = F.logsigmoid(torch.randn(2, 7, 4, generator=gen))
    beta, log_g = torch.rand(2, 7, 1, generator=gen), F.logsigmoid(torch.randn(2, 7, 1, generator=gen))
    kn = F.normalize(k, dim=-1)

    def head(t):  # [B, T, D] → [B, T, 1, D], fla's layout
        return t[:, :, None]

    close = {"atol": 1e-5, "rtol": 1e-5}
    got = naive_gla(head(q), head(k), head(v), head(log_a))[0][:, :, 0]
    torch.testing.assert_close(got, recurrence(q, k, v, log_a.exp()) / 2, **close)
    got = naive_simple(head(q), head(k), head(v), log_g, scale=1.0)[0][:, :, 0]
    torch.testing.assert_close(got, recurrence(q, k, v, log_g.exp()), **close)
    got = naive_delta(*(t[:, None] for t in (q, kn, v)), beta[:, None, :, 0])[0][:, 0]
    torch.testing.assert_close(got, recurrence(q, kn, v, torch.ones_like(beta), beta) / 2, **close)
    got = naive_gated(head(q), head(kn), head(v), beta, log_g, scale=1.0)[0][:, :, 0]
    torch.testing.assert_close(got, recurrence(q, kn, v, log_g.exp(), beta), **close)
