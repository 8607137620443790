"""The stacked trainer: stack ≡ alone, losses, schedule, early stop, divergence."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernelgap.cli import main
from kernelgap.models import build_model
from kernelgap.task import build_family, pool_split
from kernelgap.training import (
    FamilySpec,
    RunConfig,
    TrainConfig,
    default_model,
    train_records,
    train_stack,
)
from kernelgap.training.stack import cosine_lr, integer_power, power_mean_loss


@pytest.fixture(scope="module")
def family():
    return build_family("exhaustive", m=2, length=3)


def train(family, fmap, seeds, ranks, cfg, **spec):
    model = build_model(
        default_model(feature_map=fmap, rank=max(ranks), **spec),
        family.m,
        family.length,
        seeds=seeds,
        ranks=ranks,
        vocabulary=family.tokens,
    )
    return train_stack(model, family, cfg)


@pytest.mark.parametrize("fmap", ["table", "mlp_exp", "elu1"])
def test_stacked_equals_alone(family, fmap):
    seeds, ranks = [0, 1, 2, 3], [1, 2, 4, 3]
    cfg = TrainConfig(lr=1e-2, mse_steps=15, max_steps=15, stop_below=None)
    stacked = train(family, fmap, seeds, ranks, cfg)
    for e, (s, r) in enumerate(zip(seeds, ranks)):
        (alone,) = train(family, fmap, [s], [r], cfg)
        assert alone.steps == stacked[e].steps == 30
        for key in ("max_error", "mean_abs_error"):
            assert alone.train[key] == pytest.approx(stacked[e].train[key], abs=1e-5)


def test_members_differ_by_seed_and_rank(family):
    cfg = TrainConfig(lr=1e-2, mse_steps=5, max_steps=5, stop_below=None)
    a, b, c = train(family, "table", [0, 1, 0], [2, 2, 1], cfg)
    errors = [m.train["max_error"] for m in (a, b, c)]
    assert len(set(errors)) == 3, errors  # every pair differs (a chained != would skip a vs c)


def test_early_stop_records_each_member_at_its_exact_step():
    fam = build_family("exhaustive", m=2, length=2)  # rank 1 suffices for N = 2 (docs/theory.md, "Constructions")
    cfg = TrainConfig(lr=3e-2, mse_steps=300, max_steps=600)
    stacked = train(fam, "table", [0, 1], [1, 2], cfg)
    for e, (s, r) in enumerate(zip([0, 1], [1, 2])):
        (alone,) = train(fam, "table", [s], [r], cfg)
        assert stacked[e].train["exact"] and alone.train["exact"]
        assert stacked[e].steps == alone.steps < 900
        assert stacked[e].train["max_error"] == pytest.approx(alone.train["max_error"], abs=1e-5)


def test_divergence_keeps_last_finite_metrics(family):
    cfg = TrainConfig.model_construct(lr=math.inf, mse_steps=5, max_steps=5)  # a config refuses it
    (result,) = train(family, "table", [0], [2], cfg)
    assert result.status == "diverged"
    assert result.steps == 1
    assert math.isfinite(result.train["max_error"])


def test_power_mean_loss_value_gradient_and_limit():
    err = torch.tensor([[[0.5], [-2.0], [1.0]]], requires_grad=True)
    naive = err.abs().pow(8).mean().pow(1 / 8)
    ours = power_mean_loss(err, 8.0)
    assert float(ours.detach()) == pytest.approx(float(naive.detach()), rel=1e-6)
    (g1,) = torch.autograd.grad(ours.sum(), err)
    (g2,) = torch.autograd.grad(err.abs().pow(8).mean().pow(1 / 8), err)
    assert torch.allclose(g1, g2, atol=1e-6)
    assert float(power_mean_loss(err, 256.0).detach()) == pytest.approx(2.0, rel=1e-2)
    big = torch.full((1, 4, 1), 1e6)
    assert math.isfinite(float(power_mean_loss(big, 8.0)))


@given(
    st.lists(st.floats(0.0, 1.0, allow_subnormal=False), min_size=1, max_size=8),
    st.one_of(st.integers(1, 20).map(float), st.floats(1.0, 20.0, allow_subnormal=False)),
)
def test_integer_power_equals_pow_in_value_and_gradient(values, power):
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    ours, ref = integer_power(x, power), x.pow(power)
    assert torch.allclose(ours, ref, rtol=1e-12, atol=1e-300)
    (g1,) = torch.autograd.grad(ours.sum(), x)
    (g2,) = torch.autograd.grad(ref.sum(), x)
    assert torch.allclose(g1, g2, rtol=1e-12, atol=1e-300)


def test_cosine_schedule_decays_to_zero():
    assert cosine_lr(0.1, 0, 10) == pytest.approx(0.1)
    assert cosine_lr(0.1, 5, 10) == pytest.approx(0.05)
    assert cosine_lr(0.1, 10, 10) == pytest.approx(0.0, abs=1e-12)


def test_run_ids_and_stack_keys():
    base = RunConfig(FamilySpec("witness"), default_model(feature_map="table", rank=4))
    other_seed = RunConfig(FamilySpec("witness"), default_model(feature_map="table", rank=8), seed=3)
    assert base.run_id() != other_seed.run_id()
    assert base.run_id() == RunConfig(FamilySpec("witness"), default_model(feature_map="table", rank=4)).run_id()
    assert base.stack_key() == other_seed.stack_key()
    taylor = [RunConfig(FamilySpec("witness"), default_model(feature_map="taylor", rank=r)) for r in (3, 7)]
    assert taylor[0].stack_key() != taylor[1].stack_key()
    assert base.resolved().train.lr == 1e-2  # the table recipe (models/feature_maps/table.py)
    soft = RunConfig(FamilySpec("witness"), default_model(kind="softmax"))
    assert soft.resolved().train.lr == 5e-3  # softmax recipe (training/config.py)


def test_records_score_a_test_family():
    run = RunConfig(
        FamilySpec("pool", {"m": 6, "pool_size": 16, "sequences": 64}),
        default_model(feature_map="mlp_exp", rank=4),
        TrainConfig(mse_steps=3, max_steps=3),
        test_family=FamilySpec("pool", {"m": 6, "pool_size": 16, "sequences": 64, "split": "test"}),
    )
    (record,) = train_records([run])
    train_fam, test_fam = pool_split(m=6, pool_size=16, sequences=64)
    assert record["test"]["sequences"] == len(test_fam)
    assert record["train"]["sequences"] == len(train_fam)
    assert record["id"] == run.run_id() and record["version"]


def test_cli_train_json(capsys):
    main(
        [
            "train",
            "--family",
            "exhaustive",
            "-p",
            "m=2",
            "-p",
            "length=2",
            "--feature-map",
            "table",
            "--rank",
            "1",
            "--mse-steps",
            "3",
            "--max-steps",
            "3",
            "--json",
        ]
    )
    import json

    record = json.loads(capsys.readouterr().out)
    assert record["config"]["model"]["rank"] == 1 and record["steps"] <= 6


def test_cli_train_rejects_rank_zero(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--family", "witness", "--rank", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rank" in err[0]


def test_train_stack_without_a_learning_rate_says_how_to_get_one(family):
    with pytest.raises(ValueError, match="RunConfig.resolved"):
        train(family, "table", [0], [2], TrainConfig(mse_steps=1, max_steps=1))


LEAVES_THE_PROCESS = """
import random, numpy as np, torch
from kernelgap.training import FamilySpec, RunConfig, TrainConfig, default_model, train_records
from kernelgap.training.stack import flush_denormal_enabled
torch.set_num_threads(2)
torch.set_flush_denormal(False)
random.seed(123); np.random.seed(123); torch.manual_seed(123)
before = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state())
assert not flush_denormal_enabled() and not torch.are_deterministic_algorithms_enabled()
run = RunConfig(FamilySpec("exhaustive", {"m": 2, "length": 3}), default_model(feature_map="table", rank=2),
                TrainConfig(mse_steps=2, max_steps=2), seed=7)
train_records([run])
assert torch.get_num_threads() == 2, torch.get_num_threads()
assert not flush_denormal_enabled()
assert not torch.are_deterministic_algorithms_enabled()
assert random.getstate() == before[0]
assert (np.random.get_state()[1] == before[1]).all()
assert torch.equal(torch.get_rng_state(), before[2])
print("unchanged")
"""


def test_training_leaves_the_process_as_it_was():
    """A library call changes no process-wide state: threads, denormal flushing,
    deterministic mode and the global generators are all put back (checked in a fresh
    interpreter: this test process flushes denormals for the whole suite)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LEAVES_THE_PROCESS], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "unchanged", done.stderr


def test_a_run_id_hashes_only_what_applies():
    witness = FamilySpec("witness")
    soft = [  # a table from elsewhere (the CLI, a record) may name fields other kinds use
        RunConfig.parse({"family": {"name": "witness"}, "model": {"kind": "softmax", "feature_map": fm, "rank": r}})
        for fm in ("table", "elu1")
        for r in (1, 16)
    ]
    assert len({r.run_id() for r in soft}) == 1
    assert len({r.stack_key() for r in soft}) == 1
    kernel = [RunConfig(witness, default_model(feature_map="table", rank=r)) for r in (1, 16)]
    assert len({kernel[0].run_id(), kernel[1].run_id(), soft[0].run_id()}) == 3
    never = [RunConfig(witness, default_model(), TrainConfig(stop_below=s)) for s in (None, 0.0, 0)]
    assert len({r.run_id() for r in never}) == 1
    assert RunConfig(witness, default_model(), TrainConfig(stop_below=0.5)).run_id() != never[0].run_id()
    # a linear-space map ignores the temperature; a log-space one does not
    elu = [RunConfig(witness, default_model(feature_map="elu1", temperature=t)) for t in (1.0, 4.0)]
    exp = [RunConfig(witness, default_model(feature_map="mlp_exp", temperature=t)) for t in (1.0, 4.0)]
    assert elu[0].run_id() == elu[1].run_id() and exp[0].run_id() != exp[1].run_id()


def test_the_denormal_getter_reads_both_settings_whenever_its_module_was_compiled(tmp_path):
    """``flush_denormal_enabled`` says what ``torch.set_flush_denormal`` set, in a process that
    compiled the package while denormals were flushed (where a ``5e-324`` literal reads as 0);
    an empty bytecode folder makes it compile from source."""
    import os
    import subprocess
    import sys

    script = """
import torch
torch.set_flush_denormal(True)
from kernelgap.training.stack import flush_denormal_enabled
seen = []
for flag in (True, False, True, False):
    torch.set_flush_denormal(flag)
    seen.append(flush_denormal_enabled())
print(seen)
"""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, False, True, False]"
