"""The same code on a CUDA device (skipped where there is none): a short training run and
`verify` give the CPU's numbers within float tolerance."""

from __future__ import annotations

import pytest
import torch

from kernelgap.models.verify import verify_constructions
from kernelgap.training import FamilySpec, RunConfig, TrainConfig, default_model, train_records

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _run(device: str) -> list[dict]:
    runs = [
        RunConfig(
            FamilySpec("witness"),
            default_model(feature_map=fm, rank=16),
            TrainConfig(mse_steps=60, max_steps=120, dtype="float64", device=device),
            seed=0,
        )
        for fm in ("table", "mlp_exp")
    ]
    return [r for run in runs for r in train_records([run])]


def test_training_on_cuda_matches_the_cpu():
    for cpu, gpu in zip(_run("cpu"), _run("cuda")):
        assert gpu["status"] == cpu["status"] == "ok" and gpu["steps"] == cpu["steps"]
        assert gpu["train"]["max_error"] == pytest.approx(cpu["train"]["max_error"], rel=1e-6, abs=1e-8)


def test_verify_on_cuda_matches_the_cpu():
    cpu, gpu = verify_constructions(4, device="cpu"), verify_constructions(4, device="cuda")
    for a, b in zip(cpu["checks"], gpu["checks"]):
        assert (a["construction"], a["N"], a["exact"]) == (b["construction"], b["N"], b["exact"])
        assert b["max_error"] == pytest.approx(a["max_error"], abs=1e-9)
