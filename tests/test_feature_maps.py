"""Every registered feature map: size, kernel formula, sign (docs/theory.md, "The models")."""

import math

import pytest
import torch

from kernelgap.errors import KernelgapError
from kernelgap.models import FEATURE_MAPS, KernelSpec, build_model, feature_map_class
from kernelgap.models.feature_maps.favor import Favor
from kernelgap.models.feature_maps.favor_iid import FavorIid
from kernelgap.models.feature_maps.hedgehog import Hedgehog
from kernelgap.models.feature_maps.taylor import Taylor
from kernelgap.models.scorers import KernelScorer
from kernelgap.models.specs import INIT_SCALE
from kernelgap.models.stacked import init_members
from kernelgap.task.families.exhaustive import all_tokens

M = 5
TOKENS = all_tokens(M)
ALL = sorted(FEATURE_MAPS)


def make(name, rank=8, heads=1, positions=1, seeds=(0,)):
    """The kernel scorer of map ``name`` (a spec's initial scale): its projections (or tables) and the map; its
    ``query``/``key`` are the raw features ``[E·H, T, r]`` / ``[E·H, P, T, r]``."""
    cls, ranks = feature_map_class(name), [rank] * len(seeds)
    fm = cls.build(M, rank, slots=len(seeds) * heads, heads=heads)
    scorer = KernelScorer(
        feature_map=fm, ranks=ranks, m=M, heads=heads, key_positions=positions, vocabulary=TOKENS, init_scale=INIT_SCALE
    )
    init_members(scorer, list(seeds), ranks)
    return scorer.double()


def test_a_map_is_the_function_of_a_projected_head():
    """Maps take only what they need; the scorer owns the projections, sized by the map's facts."""
    assert isinstance(feature_map_class("elu1")(), torch.nn.Module) and not list(Taylor().parameters())
    assert Hedgehog(5).phi(torch.zeros(2, 3, 3)).shape == (2, 3, 5)  # 2⌈5/2⌉ entries, 5 kept
    scorer = make("hedgehog", rank=5, heads=2, positions=3, seeds=(0, 1))
    assert scorer.q_proj.weight.shape == (4, M, 3) and scorer.k_proj.weight.shape == (12, M, 3)
    assert not list(scorer.feature_map.parameters())
    favor = make("favor", rank=7)
    assert favor.q_proj.weight.shape == (1, M, M) and favor.feature_map.omega.omega.shape == (1, M, 7)
    mlp = make("mlp_exp", rank=4, positions=2)
    assert mlp.q_proj.out.weight.shape == (1, 64, 4) and mlp.k_proj.inp.weight.shape == (2, M, 64)
    table = make("table", rank=4, positions=2)
    assert table.q_table.theta.shape == (1, len(TOKENS), 4) and table.k_table.theta.shape == (2, len(TOKENS), 4)
    ids = torch.tensor([3, 0, 7])
    x = torch.from_numpy(TOKENS[[3, 0, 7]]).double()
    assert torch.equal(table.query(x), table.query(x, ids)) and torch.equal(
        table.query(x, ids), table.q_table.theta[:, ids]
    )


def test_registry_has_every_common_map():
    assert set(ALL) == {
        "table",
        "mlp_exp",
        "elu1",
        "relu",
        "favor",
        "favor_iid",
        "hedgehog",
        "dpfp",
        "taylor",
        "signed",
        "signed_table",
    }


@pytest.mark.parametrize("name", ALL)
def test_every_map_carries_its_facts(name):
    cls = feature_map_class(name)
    facts = cls.facts()
    assert facts["name"] == name and facts["default_lr"] > 0
    assert facts["color"].startswith("#") and len(facts["color"]) == 7
    assert facts["citation"]
    if "arXiv" in facts["citation"]:
        assert "https://arxiv.org/abs/" in cls.__doc__ + (cls.__mro__[1].__doc__ or "")


def test_colours_tell_the_maps_apart():
    colours = [feature_map_class(n).color for n in ALL]
    assert len(set(colours)) == len(colours)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("rank", [1, 7, 16])
def test_output_size_is_declared(name, rank):
    fm = make(name, rank=rank, heads=2, positions=3)
    x = torch.from_numpy(TOKENS).double()
    q, k = fm.query(x), fm.key(x)
    size = feature_map_class(name).output_size(rank)
    assert q.shape == (2, len(TOKENS), size)
    assert k.shape == (2, 3, len(TOKENS), size)
    assert size <= rank


LINEAR_SPACE = [n for n in ALL if not feature_map_class(n).log_space]


@pytest.mark.parametrize("name", LINEAR_SPACE)
def test_linear_space_kernels_have_their_declared_sign(name):
    """Maps that compute the kernel itself (not its log, whose exponential is positive by
    construction): a nonnegative one stays ≥ 0 anywhere in parameter space, a signed one
    can go below 0.  ``taylor``'s features are signed, its kernel is not."""
    model = build_model(
        KernelSpec(feature_map=name, rank=9, init_scale=3.0), M, 3, seeds=[0, 1], vocabulary=TOKENS, dtype=torch.float64
    )
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # anywhere in parameter space, not just at initialisation
        for p in model.scorer.parameters():
            p.add_(3.0 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    kernel = model.scorer.scores(torch.from_numpy(TOKENS).double())
    if feature_map_class(name).nonnegative:
        assert kernel.min() >= 0
    else:
        assert kernel.min() < 0, "a signed map should be able to produce a negative kernel"


def test_taylor_features_are_signed_but_its_kernel_is_not():
    fm = make("taylor", rank=15)
    q = fm.query(torch.from_numpy(TOKENS).double())
    assert q.min() < 0


def test_signed_table_starts_at_the_table_initialisation():
    """The same draws: ``table`` keeps θ₀ at its narrower scale, ``signed_table`` starts at exp(θ₀)."""
    table, signed = make("table", seeds=(0, 3)), make("signed_table", seeds=(0, 3))
    x = torch.from_numpy(TOKENS).double()
    k = feature_map_class("table").table_init_scale / feature_map_class("signed_table").table_init_scale
    assert torch.allclose((table.query(x) / k).exp(), signed.query(x), rtol=1e-6)
    assert torch.allclose((table.key(x) / k).exp(), signed.key(x), rtol=1e-6)
    assert not type(signed.feature_map).nonnegative and not type(signed.feature_map).log_space


@pytest.mark.parametrize("d", [1, 2, 4, 10])
def test_taylor_kernel_is_exact_with_symmetric_features(d):
    g = torch.Generator().manual_seed(d)
    size = 1 + d + d * (d + 1) // 2
    fm = Taylor()
    u, w = torch.randn(20, d, generator=g, dtype=torch.float64), torch.randn(20, d, generator=g, dtype=torch.float64)
    dot = (u * w).sum(-1)
    assert fm.phi(u).shape[-1] == size == Taylor.output_size(size)
    assert torch.allclose((fm.phi(u) * fm.phi(w)).sum(-1), 1 + dot + dot**2 / 2, atol=1e-12)
    assert Taylor.output_size(size - 1) == 1 + (d - 1) + (d - 1) * d // 2
    # the kernel's rank is the feature count: no feature is redundant
    x = torch.randn(4 * size, d, generator=g, dtype=torch.float64)
    assert torch.linalg.matrix_rank(fm.phi(x)) == size


def test_taylor_at_d_10_is_66_features():
    assert Taylor.output_size(66) == 66 and Taylor.projection_dim(66, 0) == 10
    assert Taylor.output_size(77) == 66 and Taylor.output_size(78) == 78  # d = 11: 1 + 11 + 66


def test_favor_draws_orthogonal_blocks_and_iid_when_asked():
    d, rank = M, 12
    favor, iid = Favor(d, rank), FavorIid(d, rank)
    init_members(favor, [0], [rank])
    init_members(iid, [0], [rank])
    omega = favor.omega.omega[0]  # [d, r]
    unit = omega / omega.norm(dim=0)
    block = unit[:, :d].T @ unit[:, :d]
    assert torch.allclose(block, torch.eye(d, dtype=block.dtype), atol=1e-6)  # orthogonal in a block
    other = iid.omega.omega[0] / iid.omega.omega[0].norm(dim=0)
    off = (other[:, :d].T @ other[:, :d] - torch.eye(d, dtype=other.dtype)).abs().max()
    assert off > 1e-3  # independent draws are not orthogonal
    assert not torch.equal(favor.omega.omega, iid.omega.omega)


def test_orthogonal_features_are_marginally_gaussian():
    from kernelgap.models.feature_maps.favor import orthogonal_gaussian

    g = torch.Generator().manual_seed(0)
    cols = orthogonal_gaussian(4, 40_000, g)
    assert abs(float(cols.mean())) < 0.02
    assert torch.allclose(cols @ cols.T / cols.shape[1], torch.eye(4, dtype=cols.dtype), atol=0.03)
    prefix = orthogonal_gaussian(4, 6, torch.Generator().manual_seed(0))
    assert torch.equal(prefix, cols[:, :6])  # a wider draw starts with the narrower one


@pytest.mark.parametrize("orthogonal", [True, False])
def test_favor_kernel_in_expectation(orthogonal):
    from kernelgap.models.feature_maps.favor import orthogonal_gaussian

    g = torch.Generator().manual_seed(1)
    r, d = 200_000, 3
    omega = orthogonal_gaussian(d, r, g) if orthogonal else torch.randn(d, r, generator=g, dtype=torch.float64)
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
    model = build_model(KernelSpec(feature_map=name, rank=6), M, 3, seeds=[0], vocabulary=TOKENS, dtype=torch.float64)
    scores = model.scorer.scores(x)[0, 0, 0]
    direct = (q.exp() @ k.exp().transpose(-1, -2))[0] if fm.log_space else (q @ k.transpose(-1, -2))[0]
    got = scores.exp() if fm.log_space else scores
    assert torch.allclose(got, direct, rtol=1e-9, atol=1e-12)


def test_log_kernel_survives_huge_log_features():
    """Normalized attention is scale invariant: log features of 1e4 must not overflow."""
    from kernelgap.models.scorers import log_kernel

    lq = torch.tensor([[1e4, 0.0]], dtype=torch.float32)
    lk = torch.tensor([[1e4, 0.0], [0.0, 1e4]], dtype=torch.float32)
    out = log_kernel(lq, lk)
    assert torch.isfinite(out).all() and out[0, 0] > out[0, 1]


def test_table_needs_vocabulary_and_rejects_unknown_tokens():
    with pytest.raises(KernelgapError, match="vocabulary"):
        build_model(KernelSpec(feature_map="table", rank=2), M, 3, seeds=[0])
    model = build_model(KernelSpec(feature_map="table", rank=2), M, 3, seeds=[0], vocabulary=TOKENS[:4])
    with pytest.raises(KernelgapError, match="outside its vocabulary"):
        model.tables(torch.from_numpy(TOKENS[4:8]).float())


def test_unknown_map_is_a_user_error():
    with pytest.raises(KernelgapError, match="unknown feature map 'bogus'"):
        build_model(KernelSpec(feature_map="bogus"), M, 3, seeds=[0])


def test_rank_must_be_positive():
    with pytest.raises(KernelgapError, match="model.rank: input should be greater than or equal to 1, got 0"):
        build_model(KernelSpec(feature_map="elu1", rank=0), M, 3, seeds=[0])


def test_train_help_lists_every_registered_map(cli):
    code, out, _ = cli("train", "--help")
    assert code == 0
    listed = out.split("--feature-map", 1)[1].split()[0].strip("[]").split("|")
    assert listed == list(FEATURE_MAPS)


@pytest.mark.parametrize("name", [n for n in ALL if FEATURE_MAPS[n].projection == "linear"])
def test_a_map_serves_one_layer(name):
    """``layer`` is the map of one attention layer (no stack): ``phi`` of ``u [B, N, d]``,
    state of its own drawn from torch's global generator (the probe's twin layer)."""
    cls, d = feature_map_class(name), 6
    width = cls.projection_dim(5, d)
    torch.manual_seed(0)
    first = cls.layer(d, 5).phi(torch.ones(2, 3, width))
    torch.manual_seed(0)
    assert first.shape == (2, 3, cls.output_size(5)) and torch.equal(
        cls.layer(d, 5).phi(torch.ones(2, 3, width)), first
    )
