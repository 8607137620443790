"""Numerical safety: no NaN/inf in the forward pass at 10× the init scale and
10× the learning rate, for every feature map; divergence is a recorded status, never a crash."""

from __future__ import annotations

import json
import math

import pytest
import torch

from kernelgap.models import FEATURE_MAPS, build_model
from kernelgap.models.scorers import log_kernel
from kernelgap.models.specs import INIT_SCALE
from kernelgap.sweeps import run_sweep
from kernelgap.task import build_family
from kernelgap.training import TrainConfig, default_model
from kernelgap.training.trainer import Scored, StackTrainer, configure_worker

MODELS = [("kernel", f) for f in sorted(FEATURE_MAPS)] + [("softmax", None)]


@pytest.fixture(scope="module")
def witness():
    return build_family("witness")


@pytest.mark.parametrize("lr_factor", [1, 10])
@pytest.mark.parametrize("kind, fmap", MODELS, ids=[f"{k}-{f}" for k, f in MODELS])
def test_ten_times_init_scale_and_lr_stay_finite(witness, kind, fmap, lr_factor):
    """Before the fix in ``log_kernel``, mlp_exp and favor turned NaN after one step here."""
    configure_worker()
    fields = {"kind": kind} if kind == "softmax" else {"feature_map": fmap, "rank": 16}
    spec = default_model(**fields, init_scale=10 * INIT_SCALE)
    model = build_model(spec, witness.m, witness.length, seeds=[0, 1, 2], vocabulary=witness.tokens)
    scored = Scored.of(witness, torch.float32)
    cfg = TrainConfig(lr=lr_factor * spec.default_lr, mse_steps=8, max_steps=8, stop_below=None)
    results = StackTrainer(model, scored, cfg).run()
    with torch.no_grad():
        pred = model.predict(scored.tokens, scored.index, scored.positions)
    assert torch.isfinite(pred).all()
    assert [r.status for r in results] == ["ok"] * 3
    assert all(math.isfinite(r.train["max_error"]) for r in results)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log_kernel_is_exact_and_has_finite_gradients_at_extreme_scales(dtype):
    gen = torch.Generator().manual_seed(0)
    for scale in (1.0, 50.0, 1e3, 1e4):
        lq = (torch.randn(2, 1, 1, 7, 5, generator=gen, dtype=torch.float64) * scale).to(dtype).requires_grad_()
        lk = (torch.randn(2, 1, 3, 6, 5, generator=gen, dtype=torch.float64) * scale).to(dtype).requires_grad_()
        out = log_kernel(lq, lk)
        ref = torch.logsumexp(lq[..., :, None, :] + lk[..., None, :, :], dim=-1)
        assert torch.isfinite(out).all()
        assert torch.allclose(out, ref, rtol=1e-5, atol=1e-4 * max(scale, 1.0) * 1e-2)
        (g_q, g_k) = torch.autograd.grad((out * 1e6).sum(), (lq, lk))
        assert torch.isfinite(g_q).all() and torch.isfinite(g_k).all()


DIVERGING = """
name = "diverging"
[family]
name = "exhaustive"
params = {m = 2, length = 3}
[model]
feature_map = "mlp_exp"
rank = 2
[train]
mse_steps = 5
max_steps = 5
[grid]
train.lr = [1e-2, 1e30]
"""


def test_a_diverged_run_is_recorded_not_a_crash(tmp_path):
    cfg = tmp_path / "div.toml"
    cfg.write_text(DIVERGING)
    summary = run_sweep(cfg, tmp_path / "out", executor="inline", progress=False)
    assert summary.ran == 2 and summary.left == 0

    def strict(text):  # NaN/Infinity are not JSON: refuse them
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-finite {c} in a result"))

    records = {
        r["config"]["train"]["lr"]: r
        for r in (strict(p.read_text()) for p in (tmp_path / "out" / "runs").glob("*.json"))
    }
    assert records[1e-2]["status"] == "ok" and records[1e30]["status"] == "diverged"
    bad = records[1e30]
    assert 1 <= bad["steps"] < 10 and bad["test"] is None
    assert all(math.isfinite(v) for v in bad["train"].values() if isinstance(v, float))
    assert run_sweep(cfg, tmp_path / "out", executor="inline", progress=False).ran == 0  # kept as done


def test_divergence_on_the_last_step_keeps_the_last_finite_metrics(witness):
    """A member the very last update makes non-finite is diverged with the previous metrics."""
    fam = build_family("exhaustive", m=2, length=3)
    model = build_model(default_model(feature_map="table", rank=2), fam.m, fam.length, seeds=[0], vocabulary=fam.tokens)
    scored = Scored.of(fam, torch.float32)
    trainer = StackTrainer(model, scored, TrainConfig(lr=1e-2, mse_steps=0, max_steps=1, stop_below=None))
    finite_err = scored.errors(model).detach()
    nan_err = torch.full_like(finite_err, float("nan"))
    trainer.finish(nan_err, 1, finite_err)
    (result,) = trainer.results
    assert result.status == "diverged" and math.isfinite(result.train["max_error"])
