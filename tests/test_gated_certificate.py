"""The gated certificate (docs/theory.md, "The gated certificate"): the structure check tells
a module whose candidates meet only through a scalar gate of the later one's token, the bound
``G`` is exact, sound against such models and checked by a second search, and such a module is
certified at every rank where ``G ≥ 1/2``."""

from __future__ import annotations

import itertools
from fractions import Fraction
from functools import partial

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from kernelgap.experiments.probe.text import structure_text
from kernelgap.probe import layers
from kernelgap.probe.floor import additive_floor, gated_floor
from kernelgap.probe.structure import ZERO, structure
from kernelgap.probe.verdicts import GATED, RANK_FREE, certified_verdict, needs_recipe, rank_verdicts
from kernelgap.task import build_family


def built(cls, seed: int, **kwargs) -> nn.Module:
    torch.manual_seed(seed)
    return cls(32, 8, **kwargs)


class _GatedTables(nn.Module):
    """A ``sequence`` module from random tables: at each position ``i``, with ``a < b`` the first
    two others, ``F(x_i) + H_b(x_i, x_b) + γ·H_a(x_i, x_a)``, the gate ``γ = sigmoid(<g, x_b> +
    leak·<g, x_a>)``: scalar-gated by the later token alone when ``leak = 0`` (an ``exp`` would
    factor into a gate of ``x_b`` times a term of ``x_a``, scalar-gated still)."""

    def __init__(self, m: int, seed: int, leak: float) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = nn.Parameter(torch.randn(3, m, m, generator=g))
        self.g = nn.Parameter(torch.randn(m, generator=g))
        self.leak = leak

    def forward(self, t):
        out = []
        for i in range(t.shape[1]):
            a, b = [j for j in range(t.shape[1]) if j != i][:2]
            h = lambda k, j: torch.einsum("bm,mn,bn->b", t[:, i], self.w[k], t[:, j])  # noqa: E731
            gate = torch.sigmoid(t[:, b] @ self.g + self.leak * (t[:, a] @ self.g))
            out.append(h(0, i) + h(1, b) + gate * h(2, a))
        return torch.stack(out, 1)


@pytest.mark.parametrize(
    "cls, kwargs, kind",
    [
        (layers.Mamba2SSM, {}, "scalar-gated"),  # a_t = exp(−Δ(x_t)A): one scalar of each token
        (layers.GatedLinearAttention, {}, "gated/other"),  # a gate per key
        (layers.DeltaNet, {}, "gated/other"),  # the erase reads the state
        (layers.GatedDeltaNet, {}, "gated/other"),
        (layers.RetNetRetention, {}, "additive"),  # a fixed decay: the gate is one constant
        (layers.RetNetRetention, {"group_norm": True}, "gated/other"),
    ],
)
def test_the_structure_check_tells_a_scalar_gate_from_other_gates(cls, kwargs, kind):
    got = structure(partial(built, cls, **kwargs), 12, "layer")
    assert got.kind == kind
    assert (got.gate <= ZERO) == (kind in ("scalar-gated", "additive"))
    assert (got.interaction <= ZERO) == (kind == "additive")


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([0.0, 1e-2, 1.0]))
def test_a_gate_that_reads_the_earlier_candidate_is_not_scalar_gated(seed, leak):
    got = structure(lambda s: _GatedTables(6, seed + s, leak), 6)
    assert got.kind == ("scalar-gated" if leak == 0.0 else "gated/other")


# -- the bound -------------------------------------------------------------------------------


def _brute_force(family) -> Fraction:
    """``G`` over every pair of constraints, no pruning (the second search of the bound)."""
    index, targets = np.asarray(family.index), family.targets()
    found: dict[tuple, list] = {}
    for p in family.scored_positions:
        a, b = [o for o in range(3) if o != p]
        seen = {(int(r[p]), int(r[a]), int(r[b])): Fraction(int(targets[k, p])) for k, r in enumerate(index)}
        for (x, c, u), (x2, c2, w) in itertools.product(seen, repeat=2):
            if x2 == x and c2 != c and u != w and (x, c2, u) in seen and (x, c, w) in seen:
                small, big = abs(seen[x, c, u] - seen[x, c2, u]), abs(seen[x, c, w] - seen[x, c2, w])
                if big > small:
                    found.setdefault((p, u, w), []).append((small, big))
    best = Fraction(0)
    for (p, u, w), there in found.items():
        for (c, a_), (d, b_) in itertools.product(there, found.get((p, w, u), [])):
            best = max(best, (a_ * b_ - c * d) / (2 * (a_ + b_ + c + d)))
    return best


def test_the_gated_floor_of_the_witness_family_is_three_halves_either_reading():
    for reading in ("first", "final"):
        family = build_family("witness", reading=reading)
        assert gated_floor(family) == additive_floor(family) == Fraction(3, 2)
    assert gated_floor(build_family("ood", n=4, queries_per_class=8, split="train")) == 0


@pytest.mark.parametrize("m, query", list(itertools.product([1, 2], [None, 1, 3])))
def test_the_pruned_search_equals_every_pair_and_stays_below_the_additive_floor(m, query):
    """A scalar-gated model with γ ≡ 1 is additive, so ``G`` never passes the additive floor."""
    family = build_family("exhaustive", m=m, length=3, query_position=query)
    bound = gated_floor(family)
    assert bound == _brute_force(family) and bound <= additive_floor(family)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["first", "final"]))
def test_no_scalar_gated_predictor_beats_the_bound_on_the_witness_family(seed, reading):
    """Random tables ``F, H_a, H_b`` and gates ``γ`` (signed, some zero), the best affine rescale
    of their prediction included: the max error is at least ``G`` (3/2)."""
    family = build_family("witness", reading=reading)
    index, targets = np.asarray(family.index), family.targets().astype(float)
    (p,) = family.scored_positions
    a, b = [o for o in range(3) if o != p]
    rng = np.random.default_rng(seed)
    n = int(index.max()) + 1
    f, ha, hb = rng.normal(size=n), rng.normal(size=(n, n)), rng.normal(size=(n, n))
    gate = rng.normal(size=n) * (rng.random(n) < 0.8)
    x, ca, cb = index[:, p], index[:, a], index[:, b]
    pred = f[x] + hb[x, cb] + gate[cb] * ha[x, ca]
    # the best query-wise affine map of the prediction (one scale and shift per query token) is scalar-gated too
    worst = 0.0
    for q in np.unique(x):
        rows = x == q
        design = np.stack([pred[rows], np.ones(rows.sum())], 1)
        fit = design @ np.linalg.lstsq(design, targets[rows, p], rcond=None)[0]
        worst = max(worst, float(np.abs(fit - targets[rows, p]).max()))
    assert worst >= float(gated_floor(family)) - 1e-9 and gated_floor(family) == Fraction(3, 2)


# -- the verdicts ------------------------------------------------------------------------------


def _rows(rank: int, errors: list[float]) -> list[dict]:
    return [
        {"rank": rank, "seed": s, "max_error": e, "final_loss": e, "final_power": 8.0, "rank_argument": rank}
        for s, e in enumerate(errors)
    ]


def test_a_scalar_gated_module_is_certified_at_every_rank_where_the_bound_speaks():
    certified = {"kind": "scalar-gated", "additive_floor": None, "gated_floor": "3/2"}
    assert certified_verdict(certified) == GATED and "scalar-gated" in RANK_FREE
    for rank in (4, 16, 64):
        (v,) = rank_verdicts(_rows(rank, [1.9, 2.0, 1.2]), {rank: rank}, 16, None, None, certified)
        assert v["verdict"] == GATED and not needs_recipe(v, 16, certified)
        (fit,) = rank_verdicts(_rows(rank, [0.1, 0.2, 1.2]), {rank: rank}, 16, None, None, certified)
        assert fit["verdict"] == "exact"  # a measurement that contradicted the bound would show
    weak = {**certified, "gated_floor": "1/4"}
    (v,) = rank_verdicts(_rows(4, [1.9]), {4: 4}, 16, None, None, weak)
    assert certified_verdict(weak) is None and v["verdict"] == "not fitted"  # rank-free: never at the wall
    said = structure_text({**certified, "interaction": 0.07, "gate": 4e-15})
    assert "structure: scalar-gated (interaction 0.07, gate 4e-15" in said
    assert "gated floor 3/2: no rank is exact" in said


def test_the_mamba2_reference_probed_end_to_end_is_certified_at_every_rank(tmp_path):
    """The probe reads Mamba2SSM at its final query, finds it scalar-gated, stores the witness
    family's gated floor and gives every rank the certified verdict, with no recipe search."""
    from kernelgap.experiments.probe.section import probe_section
    from kernelgap.experiments.probe.text import probe_sentence
    from kernelgap.probe import ProbeConfig, run_probe

    out = tmp_path / "probe"
    config = ProbeConfig(
        "kernelgap.probe.layers:Mamba2SSM",
        ranks={"witness": [2, 32], "ood-n4": []},
        steps=6,
        out=out,
        executor="inline",
    )
    logged = []
    (suite,) = run_probe(config, log=logged.append)["suites"]
    assert suite["structure"]["kind"] == "scalar-gated" and suite["structure"]["gated_floor"] == "3/2"
    assert suite["structure"]["additive_floor"] is None and suite["recipes"] == []
    assert any("is scalar-gated" in line and "gated floor 3/2" in line for line in logged)
    section = probe_section(out)
    assert [v["verdict"] for v in section["suites"][0]["verdicts"]] == [GATED, GATED]
    assert "gated floor 3/2: no rank is exact" in probe_sentence(section)
