"""Same config and seed → the same numbers.

Guaranteed and tested bitwise: repeated identical runs (alone, or as the same
stack) in float32 and float64, and whole sweeps (inline, local process pool;
Ray in tests/faults/test_ray_faults.py), on one machine with one
``ATEN_CPU_CAPABILITY`` and one thread count.  Stacking is *not* bitwise in
general: a member trained inside a stack of mixed ranks (padded, masked
features) sees different BLAS kernel shapes, so its numbers agree with the lone
run only to rounding, tested within :func:`stacking_tolerance` (docs/formats.md,
"What bitwise covers").
"""

from __future__ import annotations

import json

import pytest
import torch

from kernelgap.models import FEATURE_MAPS, build_model
from kernelgap.sweeps import run_sweep
from kernelgap.task import build_family
from kernelgap.training import TrainConfig, default_model, train_stack
from kernelgap.training.trainer import configure_worker


@pytest.fixture(scope="module")
def family():
    return build_family("exhaustive", m=2, length=3)


def train(family, fmap, seeds, ranks, dtype):
    configure_worker(seed=seeds[0])
    cfg = TrainConfig(lr=1e-2, mse_steps=10, max_steps=10, stop_below=None, dtype=dtype)
    model = build_model(
        default_model(feature_map=fmap, rank=max(ranks)),
        family.m,
        family.length,
        seeds=seeds,
        ranks=ranks,
        vocabulary=family.tokens,
        dtype=getattr(torch, dtype),
    )
    return [(r.status, r.steps, r.train) for r in train_stack(model, family, cfg)]


def stacking_tolerance(fmap: str, dtype: str) -> float:
    """Relative tolerance between a member trained in a stack and alone, in units of the
    dtype's epsilon.  A nonnegative map's normalized attention is a convex average, which
    rounding moves by a few ε per operation: 2^6 ε (measured over 10 steps under the avx512,
    avx2 and default kernels: at most 4 ε).  A signed map's denominator Σα can come near 0
    and amplify the rounding by 1/|Σα|: 2^15 ε (measured: at most 2,700 ε in float64 and 220 ε in
    float32)."""
    units = 2**6 if FEATURE_MAPS[fmap].nonnegative else 2**15
    return units * torch.finfo(getattr(torch, dtype)).eps


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fmap", sorted(FEATURE_MAPS))
def test_repeated_runs_are_bitwise_equal_alone_and_stacked(family, fmap, dtype):
    maskable = FEATURE_MAPS[fmap].maskable
    seeds, ranks = [0, 1, 2], ([1, 4, 3] if maskable else [4, 4, 4])
    stacked = train(family, fmap, seeds, ranks, dtype)
    assert train(family, fmap, seeds, ranks, dtype) == stacked  # dict == compares floats exactly
    tol = stacking_tolerance(fmap, dtype)
    for e, (seed, rank) in enumerate(zip(seeds, ranks)):
        alone = train(family, fmap, [seed], [rank], dtype)
        assert train(family, fmap, [seed], [rank], dtype) == alone
        (status, steps, metrics), (s_status, s_steps, s_metrics) = alone[0], stacked[e]
        assert (status, steps) == (s_status, s_steps)
        for key in ("max_error", "mean_abs_error", "exact_seq_acc"):
            assert metrics[key] == pytest.approx(s_metrics[key], abs=tol, rel=tol)  # different kernels: rounding
    assert len({json.dumps(m, sort_keys=True) for _, _, m in stacked}) == 3  # seeds do differ


def test_deterministic_algorithms_are_on_in_a_worker():
    configure_worker(seed=3)
    assert torch.are_deterministic_algorithms_enabled()
    a = torch.rand(3)
    configure_worker(seed=3)
    assert torch.equal(a, torch.rand(3))


SWEEP = """
name = "det"
[family]
name = "exhaustive"
params = {m = 3, length = 3}
[model]
feature_map = "mlp_exp"
[train]
mse_steps = 10
max_steps = 10
stop_below = 0.01
[grid]
seed = [0, 1]
model.rank = [2, 5]
"""


def _records(out):
    """Records less the wall time, the record's checksum (which covers the wall time) and
    the checkpoint file's digest (``torch.save`` writes a per-save id into the file: the
    weights in it are compared by :func:`_weights`)."""
    out_records = {}
    for p in (out / "runs").glob("*.json"):
        record = {k: v for k, v in json.loads(p.read_text()).items() if k not in ("wall_time_s", "record_sha256")}
        record["checkpoint"] = {k: v for k, v in record["checkpoint"].items() if k in ("file", "member")}
        out_records[p.name] = record
    return out_records


def _weights(out):
    """Every checkpoint's weights, by file."""
    return {p.name: torch.load(p, weights_only=True)["state"] for p in sorted((out / "checkpoints").glob("*.pt"))}


@pytest.mark.slow
def test_whole_sweeps_are_bitwise_reproducible(tmp_path):
    cfg = tmp_path / "det.toml"
    cfg.write_text(SWEEP)
    a, b, pool = tmp_path / "a", tmp_path / "b", tmp_path / "pool"
    run_sweep(cfg, a, executor="inline", progress=False)
    run_sweep(cfg, b, executor="inline", progress=False)
    run_sweep(cfg, pool, executor="local", workers=1, progress=False)
    ra, rb, rp = _records(a), _records(b), _records(pool)
    assert len(ra) == 4 and ra == rb == rp
    wa, wp = _weights(a), _weights(pool)
    assert wa.keys() == wp.keys() and len(wa) >= 1
    for name, state in wa.items():
        assert state.keys() == wp[name].keys()
        assert all(torch.equal(state[k], wp[name][k]) for k in state)
