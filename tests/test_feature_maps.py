"""Every registered feature map: size, kernel formula, sign (docs/theory.md, "The models")."""

import math

import pytest
import torch

from kernelgap.errors import KernelgapError
from kernelgap.models import FEATURE_MAPS, ModelSpec, build_model, feature_map_class
from kernelgap.models.feature_maps import Favor, Taylor
from kernelgap.models.stacked import init_members
from kernelgap.task.exhaustive import all_tokens

M = 5
TOKENS = all_tokens(M)
ALL = sorted(FEATURE_MAPS)


def make(name, rank=8, heads=1, positions=1, seeds=(0,)):
    cls = feature_map_class(name)
    fm = cls(M, rank, slots=len(seeds) * heads, heads=heads, key_positions=positions,
             vocabulary=TOKENS)
    init_members(fm, list(seeds), [rank] * len(seeds))
    return fm.double()


def test_registry_has_every_map_of_the_spec():
    assert set(ALL) == {"table", "mlp_exp", "elu1", "relu", "favor", "hedgehog", "taylor", "signed",
                        "signed_table"}


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("rank", [1, 7, 16])
def test_output_size_is_declared(name, rank):
    fm = make(name, rank=rank, heads=2, positions=3)
    x = torch.from_numpy(TOKENS).double()
    q, k = fm.query(x), fm.key(x)
    size = type(fm).output_size(rank)
    assert q.shape == (2, len(TOKENS), size)
    assert k.shape == (2, 3, len(TOKENS), size)
    assert size <= rank


@pytest.mark.parametrize("name", ALL)
def test_nonnegative_maps_give_nonnegative_kernels(name):
    model = build_model(ModelSpec(feature_map=name, rank=9, init_scale=3.0), M, 3,
                        seeds=[0, 1], vocabulary=TOKENS, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # anywhere in parameter space, not just at initialisation
        for p in model.scorer.parameters():
            p.add_(3.0 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    scores = model.scorer.scores(torch.from_numpy(TOKENS).double())
    kernel = scores.exp() if model.scorer.log_space else scores
    if feature_map_class(name).nonnegative:
        assert (kernel >= 0).all()
    else:
        assert (kernel < 0).any(), "the signed map should be able to produce a negative kernel"


def test_signed_table_starts_at_the_table_initialisation():
    table, signed = make("table", seeds=(0, 3)), make("signed_table", seeds=(0, 3))
    x = torch.from_numpy(TOKENS).double()
    assert torch.allclose(table.query(x).exp(), signed.query(x), rtol=1e-6)
    assert torch.allclose(table.key(x).exp(), signed.key(x), rtol=1e-6)
    assert not type(signed).nonnegative and not type(signed).log_space


def test_taylor_kernel_is_exact():
    g = torch.Generator().manual_seed(0)
    fm = make("taylor", rank=1 + 4 + 16)
    u, w = torch.randn(20, 4, generator=g, dtype=torch.float64), torch.randn(20, 4, generator=g, dtype=torch.float64)
    dot = (u * w).sum(-1)
    got = (fm.phi(u) * fm.phi(w)).sum(-1)
    assert torch.allclose(got, 1 + dot + dot**2 / 2, atol=1e-12)
    assert Taylor.output_size(21) == 21 and Taylor.output_size(20) == 13


def test_favor_kernel_in_expectation():
    g = torch.Generator().manual_seed(1)
    r, d = 200_000, 3
    omega = torch.randn(d, r, generator=g, dtype=torch.float64)
    u = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)
    w = torch.tensor([0.1, 0.4, -0.3], dtype=torch.float64)
    est = (Favor.log_phi_with(u, omega) + Favor.log_phi_with(w, omega)).exp().sum()
    assert abs(float(est) - math.exp(float(u @ w))) < 0.02


@pytest.mark.parametrize("name", ALL)
def test_log_space_kernel_equals_direct_product(name):
    """The max-shifted log kernel is the log of <φ_Q, φ_K> computed directly."""
    fm = make(name, rank=6)
    x = torch.from_numpy(TOKENS).double()
    q, k = fm.query(x), fm.key(x)[:, 0]
    model = build_model(ModelSpec(feature_map=name, rank=6), M, 3, seeds=[0],
                        vocabulary=TOKENS, dtype=torch.float64)
    scores = model.scorer.scores(x)[0, 0, 0]
    direct = (q.exp() @ k.exp().transpose(-1, -2))[0] if fm.log_space else (q @ k.transpose(-1, -2))[0]
    got = scores.exp() if fm.log_space else scores
    assert torch.allclose(got, direct, rtol=1e-9, atol=1e-12)


def test_log_kernel_survives_huge_log_features():
    """Normalized attention is scale invariant: log features of 1e4 must not overflow."""
    from kernelgap.models.attention import log_kernel

    lq = torch.tensor([[1e4, 0.0]], dtype=torch.float32)
    lk = torch.tensor([[1e4, 0.0], [0.0, 1e4]], dtype=torch.float32)
    out = log_kernel(lq, lk)
    assert torch.isfinite(out).all() and out[0, 0] > out[0, 1]


def test_table_needs_vocabulary_and_rejects_unknown_tokens():
    with pytest.raises(KernelgapError, match="vocabulary"):
        build_model(ModelSpec(feature_map="table", rank=2), M, 3, seeds=[0])
    model = build_model(ModelSpec(feature_map="table", rank=2), M, 3, seeds=[0],
                        vocabulary=TOKENS[:4])
    with pytest.raises(KernelgapError, match="outside its vocabulary"):
        model.tables(torch.from_numpy(TOKENS[4:8]).float())


def test_unknown_map_is_a_user_error():
    with pytest.raises(KernelgapError, match="unknown feature map 'bogus'"):
        build_model(ModelSpec(feature_map="bogus"), M, 3, seeds=[0])


def test_rank_must_be_positive():
    with pytest.raises(KernelgapError, match="rank must be ≥ 1"):
        build_model(ModelSpec(feature_map="elu1", rank=0), M, 3, seeds=[0])
