"""Finite-precision sketches: quantizers and the sketch read-out."""

import json

import pytest
import torch

from kernelgap.errors import KernelgapError
from kernelgap.experiments.precision.step import collapse_bits, family_transcript, quantized_runs
from kernelgap.models import build_model, feature_map_class
from kernelgap.models.sketch import quantize, sketch_numbers, sketch_predict, uniform_step
from kernelgap.task import build_family
from kernelgap.training import FamilySpec, RunConfig, default_model


def float_half_step(u: torch.Tensor, bits: int) -> torch.Tensor:
    """Half the float quantizer's step at ``u``: ``2^{e−b−1}`` with ``u = f·2^e``."""
    _, exp = torch.frexp(u)
    return torch.ldexp(torch.ones_like(u), exp - bits - 1)


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
        assert bool(((q - u).abs()[nz] <= u.abs()[nz] * 2.0**-bits).all())
        assert bool((q[~nz] == 0).all())


def test_quantizer_is_not_the_identity_and_rejects_bad_bits():
    u = torch.linspace(-1, 1, 101, dtype=torch.float64)
    assert len(torch.unique(quantize(u, 3))) == 7  # 2^3 − 1 levels
    assert float((quantize(u, 3) - u).abs().max()) > 0.05
    with pytest.raises(KernelgapError):
        quantize(u, 1, "uniform")
    with pytest.raises(KernelgapError):
        quantize(u, 4, "posit")


@pytest.mark.parametrize(
    "fmap,heads,causal",
    [("table", 1, False), ("mlp_exp", 2, True), ("elu1", 2, False), ("signed", 1, False), ("taylor", 1, False)],
)
def test_sketch_equals_the_model_at_full_precision(fmap, heads, causal):
    fam = build_family("exhaustive", m=3, length=3)
    tok, idx = torch.from_numpy(fam.tokens).double(), torch.from_numpy(fam.index)
    ranks = [7, 7] if fmap == "taylor" else [3, 6]
    model = build_model(
        default_model(feature_map=fmap, rank=max(ranks), heads=heads, causal=causal),
        3,
        3,
        seeds=[0, 1],
        ranks=ranks,
        vocabulary=fam.tokens,
        dtype=torch.float64,
    )
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


PRECISION_SWEEP = """name = "precision"
[family]
name = "{family}"
params = {params}
[model]
feature_map = "table"
[train]
mse_steps = {steps}
max_steps = {steps}
stop_below = 0.0
[grid]
model.rank = {ranks}
seed = [0]
"""


def _trained(tmp_path, family="exhaustive", params="{m = 2, length = 3}", ranks=(2, 4), steps=10):
    from kernelgap.sweeps import load_sweep, run_sweep

    cfg = tmp_path / "precision.toml"
    cfg.write_text(PRECISION_SWEEP.format(family=family, params=params, ranks=list(ranks), steps=steps))
    run_sweep(cfg, tmp_path / "out", executor="inline", progress=False)
    return tmp_path / "out", load_sweep(cfg).runs()


def test_quantized_runs_end_to_end_small(tmp_path):
    out_dir, runs = _trained(tmp_path)
    out = quantized_runs(out_dir, runs, [2, 8], ["uniform", "float"])
    # every sequence over {0,1}^2 scores each of its 3 positions: the 4 tokens are the queries,
    # and min overlaps take the values 0, 1, 2
    assert (out["transcript"]["answers"], out["transcript"]["values"]) == (4, 3)
    assert [m["rank"] for m in out["models"]] == [2, 4]
    for m in out["models"]:
        assert {(q["quantizer"], q["bits"]) for q in m["quantized"]} == {
            ("uniform", 2),
            ("uniform", 8),
            ("float", 2),
            ("float", 8),
        }
    fam = build_family("witness")
    assert family_transcript(fam)["bits_needed"] == pytest.approx(16.0)  # 16 queries, targets {0, 6}


def test_precision_loads_the_trained_weights_and_trains_nothing(tmp_path, monkeypatch):
    """The models scored are the sweep's own, loaded from its checkpoints: each gives back
    its record's max error, whichever ranks were stacked beside it, and nothing trains."""
    import kernelgap.training.trainer as trainer

    out_dir, runs = _trained(tmp_path, "witness", "{}", (4, 16), 150)
    records = [json.loads(p.read_text()) for p in (out_dir / "runs").glob("*.json")]
    assert {r["checkpoint"]["file"] for r in records} == {records[0]["checkpoint"]["file"]}  # one stack
    monkeypatch.setattr(trainer, "train_stack", lambda *a, **k: pytest.fail("precision trained a model"))
    rows = quantized_runs(out_dir, runs, [8], ["float"])["models"]
    assert [row["matches_record"] for row in rows] == [True, True]
    assert all(row["max_error"] == pytest.approx(row["record_max_error"], rel=1e-5) for row in rows)


def test_precision_needs_the_sweep_first(tmp_path):
    runs = [RunConfig(FamilySpec("witness"), default_model(feature_map="table", rank=4))]
    (tmp_path / "runs").mkdir()
    with pytest.raises(KernelgapError, match="has no record with a checkpoint"):
        quantized_runs(tmp_path, runs, [8], ["float"])
