"""Finite-precision sketches: quantizers and the sketch read-out."""

import pytest
import torch

from kernelgap.errors import KernelgapError
from kernelgap.experiments.precision.step import collapse_bits, family_transcript, quantized_runs
from kernelgap.models import build_model, feature_map_class
from kernelgap.models.sketch import float_half_step, quantize, sketch_numbers, sketch_predict, uniform_step
from kernelgap.task import build_family
from kernelgap.training import FamilySpec, RunConfig, TrainConfig, default_model


def _samples():
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(64, 5, 7, generator=gen, dtype=torch.float64)
    return [base, base * 1e-3, base.abs() * 50, torch.cat([base, torch.zeros(64, 5, 1, dtype=torch.float64)], -1)]


@pytest.mark.parametrize("bits", [2, 3, 4, 8, 16])
def test_uniform_round_trip_within_half_a_step(bits):
    for u in _samples():
        q = quantize(u, bits, "uniform", dims=(-2, -1))
        step = uniform_step(u, bits, (-2, -1))
        assert bool(((q - u).abs() <= step / 2 * (1 + 1e-9) + 1e-300).all())
        # at most 2^b − 1 levels per sketch, and the largest magnitude is kept exactly
        levels = torch.round(q / torch.where(step > 0, step, torch.ones_like(step)))
        assert float(levels.abs().max()) <= 2 ** (bits - 1) - 1
        big = u.abs().amax(dim=(-2, -1))
        assert torch.allclose(q.abs().amax(dim=(-2, -1)), big)


@pytest.mark.parametrize("bits", [1, 2, 4, 10, 23])
def test_float_round_trip_within_half_a_step(bits):
    for u in _samples():
        q = quantize(u, bits, "float")
        nz = u != 0
        assert bool(((q - u).abs() <= float_half_step(u, bits))[nz].all())
        assert bool(((q - u).abs()[nz] <= u.abs()[nz] * 2.0 ** -bits).all())
        assert bool((q[~nz] == 0).all())


def test_quantizer_is_not_the_identity_and_rejects_bad_bits():
    u = torch.linspace(-1, 1, 101, dtype=torch.float64)
    assert len(torch.unique(quantize(u, 3))) == 7  # 2^3 − 1 levels
    assert float((quantize(u, 3) - u).abs().max()) > 0.05
    with pytest.raises(KernelgapError):
        quantize(u, 1, "uniform")
    with pytest.raises(KernelgapError):
        quantize(u, 4, "posit")


@pytest.mark.parametrize("fmap,heads,causal", [("table", 1, False), ("mlp_exp", 2, True),
                                               ("elu1", 2, False), ("signed", 1, False),
                                               ("taylor", 1, False)])
def test_sketch_equals_the_model_at_full_precision(fmap, heads, causal):
    fam = build_family("exhaustive", m=3, length=3)
    tok, idx = torch.from_numpy(fam.tokens).double(), torch.from_numpy(fam.index)
    ranks = [7, 7] if fmap == "taylor" else [3, 6]
    model = build_model(default_model(feature_map=fmap, rank=max(ranks), heads=heads, causal=causal),
                        3, 3, seeds=[0, 1], ranks=ranks, vocabulary=fam.tokens, dtype=torch.float64)
    with torch.no_grad():
        ref = model.predict(tok, idx)
    assert torch.allclose(sketch_predict(model, tok, idx), ref, atol=1e-8)
    assert torch.allclose(sketch_predict(model, tok, idx, bits=40, mode="uniform"), ref, atol=1e-5)
    assert not torch.allclose(sketch_predict(model, tok, idx, bits=2), ref, atol=1e-3)
    d_v = default_model().d_value
    widths = [feature_map_class(fmap).output_size(r) for r in ranks]  # taylor at 7: 1 + 2 + 3 features
    assert sketch_numbers(model) == [heads * w * (d_v + 1) for w in widths]


def test_collapse_bits_is_the_smallest_exact_b_from_the_top():
    rows = [{"bits": b, "exact": ok} for b, ok in [(2, False), (3, True), (4, False), (6, True), (8, True)]]
    assert collapse_bits(rows) == 6
    assert collapse_bits([{"bits": 8, "exact": False}]) is None


def test_quantized_runs_end_to_end_small():
    runs = [RunConfig(FamilySpec("exhaustive", {"m": 2, "length": 3}),
                      default_model(feature_map="table", rank=r), TrainConfig(mse_steps=10, max_steps=10),
                      seed=0) for r in (2, 4)]
    out = quantized_runs(runs, [2, 8], ["uniform", "float"])
    assert out["transcript"]["answers"] >= 1 and out["transcript"]["values"] >= 2
    assert [m["rank"] for m in out["models"]] == [2, 4]
    for m in out["models"]:
        assert {(q["quantizer"], q["bits"]) for q in m["quantized"]} == {
            ("uniform", 2), ("uniform", 8), ("float", 2), ("float", 8)}
    fam = build_family("witness")
    assert family_transcript(fam)["bits_needed"] == pytest.approx(16.0)  # 16 queries, targets {0, 6}


def test_retraining_follows_the_sweeps_stacks():
    """A run is retrained padded to the rank its sweep stack was padded to, so it
    reproduces its record bit for bit whichever runs the sweep trained beside it."""
    from kernelgap.training import train_records

    runs = [RunConfig(FamilySpec("witness"), default_model(feature_map="table", rank=r),
                      TrainConfig(mse_steps=150, max_steps=150, stop_below=0.0), seed=0) for r in (4, 16)]
    alone = {rec["id"]: rec for run in runs for rec in train_records([run])}
    assert sorted(rec["stack_rank"] for rec in alone.values()) == [4, 16]
    rows = quantized_runs(runs, [8], ["float"], alone)["models"]
    assert [row["matches_record"] for row in rows] == [True, True]
    assert all(row["max_error"] == pytest.approx(alone[row["id"]]["train"]["max_error"], rel=1e-6) for row in rows)
    assert quantized_runs(runs, [8], ["float"], alone, workers=2)["models"] == rows  # two stacks side by side
    together = {rec["id"]: rec for rec in train_records(runs)}
    assert {rec["stack_rank"] for rec in together.values()} == {16}
    assert [row["matches_record"] for row in quantized_runs(runs, [8], ["float"], together)["models"]] == [True, True]
