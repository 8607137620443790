"""Training on product families: the two-candidate reduction against brute force, the exact
worst case, batched schedules, the stop rule, records, the CLI and sweeps."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.models import build_model
from kernelgap.models.worst_case import family_worst_case
from kernelgap.task import build_family
from kernelgap.task.family import MAX_EXPANDED, Family, ProductFamily, as_sequences
from kernelgap.training import FamilySpec, RunConfig, TrainConfig, default_model, train_stack, two_candidate
from kernelgap.training.product import (
    SAMPLED_TUPLES,
    WHOLE_FAMILY,
    BatchedProductTrainer,
    ProductScored,
    product_trainer,
    reducible_spec,
    sampled_family,
)
from kernelgap.training.trainer import Scored, StackTrainer, build_stack, train_task
from kernelgap.training.two_candidate import training_family
from numerics import assert_same_sums

# -- the reduction against every sequence ------------------------------------------------


def random_product(seed: int, m: int, length: int, qpos: int) -> ProductFamily:
    """Random distinct tokens; queries and candidates overlapping (a candidate may be a query)."""
    rng = np.random.default_rng(seed)
    tokens = np.unique(rng.integers(0, 2, (rng.integers(4, 9), m)), axis=0)
    t = len(tokens)
    queries = rng.choice(t, size=rng.integers(1, min(3, t) + 1), replace=False)
    candidates = rng.choice(t, size=rng.integers(1, min(4, t) + 1), replace=False)
    return ProductFamily(tokens, queries, candidates, qpos, [], "random", {}, length)


SPECS = [
    {"feature_map": "table", "rank": 3},
    {"feature_map": "mlp_exp", "rank": 2},
    {"feature_map": "elu1", "rank": 2, "readout": "linear"},
    {"feature_map": "relu", "rank": 2},
    {"kind": "softmax"},
]


def model_for(family, spec: dict, seeds=(0, 1), init_scale: float = 2.0):
    return build_model(
        default_model(**{"init_scale": init_scale, **spec}),
        family.m,
        family.length,
        seeds=list(seeds),
        vocabulary=family.tokens,
        dtype=torch.float64,
    )


def brute_errors(model, family: ProductFamily) -> torch.Tensor:
    """``pred − target`` on every sequence of the family, ``[E, S]`` (the model's own path)."""
    seqs = family.expand()
    scored = Scored.of(seqs, torch.float64, planned=False)
    with torch.no_grad():
        return scored.errors(model)[:, :, 0]


def per_query(err: torch.Tensor, query_ids: np.ndarray, queries: np.ndarray):
    """``[E, Q]`` largest and smallest signed error of each query."""
    hi = torch.stack([err[:, torch.as_tensor(query_ids == q)].amax(1) for q in queries], 1)
    lo = torch.stack([err[:, torch.as_tensor(query_ids == q)].amin(1) for q in queries], 1)
    return hi, lo


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.get("feature_map", s.get("kind")))
@pytest.mark.parametrize("length", [3, 4, 5, 6])
def test_two_candidate_extremes_are_the_whole_familys(spec, length):
    """Per query, the largest and the smallest signed error over the two-candidate sequences
    are those over every sequence (so is the max error): m ≤ 6, N = 3..6, query first and last."""
    for seed in range(3):
        for qpos in (1, length):
            family = random_product(seed * 7 + length, 5 + seed % 2, length, qpos)
            model = model_for(family, spec, seeds=(seed, seed + 10))
            brute = brute_errors(model, family)
            scored = ProductScored.of(family, torch.float64)
            with torch.no_grad():
                two = scored.errors(model)[:, :, 0]
            q, c = len(family.queries), len(family.candidates)
            expanded = family.expand()
            hi, lo = per_query(brute, expanded.index[:, qpos - 1], family.queries)
            two_q = two.reshape(-1, q, c * c)
            assert torch.allclose(two_q.amax(2), hi, atol=1e-9, rtol=0)
            assert torch.allclose(two_q.amin(2), lo, atol=1e-9, rtol=0)
            metrics = scored.whole(model)
            assert torch.allclose(metrics["max"], brute.abs().amax(1), atol=1e-9, rtol=0)


def test_every_two_candidate_sequence_is_a_sequence_of_the_family():
    """Each two-candidate error is the model's error on that very sequence."""
    family = random_product(3, 6, 5, 2)
    model = model_for(family, {"feature_map": "table", "rank": 3})
    seqs = sampled_family(family, tuples=0)
    with torch.no_grad():
        direct = Scored.of(seqs, torch.float64, planned=False).errors(model)[:, :, 0]
        two = ProductScored.of(family, torch.float64).errors(model)[:, :, 0]
    assert torch.allclose(direct, two, atol=1e-12, rtol=0)


@settings(max_examples=25)
@given(
    seed=st.integers(0, 10_000),
    length=st.integers(3, 6),
    first=st.booleans(),
    scale=st.sampled_from([0.5, 2.0, 6.0]),
)
def test_reduction_property(seed, length, first, scale):
    family = random_product(seed, 4, length, 1 if first else length)
    model = model_for(family, {"feature_map": "table", "rank": 2}, seeds=(seed,), init_scale=scale)
    brute = brute_errors(model, family)
    with torch.no_grad():
        two = ProductScored.of(family, torch.float64).errors(model)
    assert float(two.abs().max()) == pytest.approx(float(brute.abs().max()), abs=1e-9)


# -- which path a family takes -------------------------------------------------------------


def test_small_length_3_products_train_expanded_as_before():
    family = build_family("ladder", m=16, n=8)
    for spec in (default_model(feature_map="table"), default_model(heads=2)):
        built = training_family(family, spec)
        assert isinstance(built, Family)
        assert np.array_equal(built.index, as_sequences(family).index)
    run = RunConfig.parse(
        {"family": {"name": "ladder", "params": {"m": 16, "n": 8}}, "model": {"feature_map": "table"}}
    )
    _, fam, _ = build_stack([run.resolved()])
    assert isinstance(fam, Family)


def test_longer_products_stay_products_for_the_reduction_and_expand_otherwise():
    family = build_family("layer", m=6, length=5)
    assert training_family(family, default_model(feature_map="table")) is family
    assert reducible_spec(default_model(kind="softmax"))
    for spec in (
        default_model(heads=2),
        default_model(position_dependent=True),
        default_model(causal=True),
        default_model(feature_map="signed"),
    ):
        assert not reducible_spec(spec)
        assert isinstance(training_family(family, spec), Family)  # small: every sequence
    big = build_family("layer", m=12, length=11)
    assert big.sequence_count > MAX_EXPANDED
    assert training_family(big, default_model(heads=2)) is big  # trains on the sampled sequences


# -- trained models against the exact worst case -----------------------------------------


@pytest.mark.parametrize("length", [3, 4, 5, 6, 7, 8])
def test_recorded_max_error_is_the_exact_worst_case(length):
    """Trained (float64) models' recorded max error is family_worst_case's, N = 3..8."""
    family = build_family("layer", m=6, length=length, query_position=1 + (length % 2))
    model = model_for(family, {"feature_map": "table", "rank": 4}, seeds=(0, 1, 2))
    cfg = TrainConfig(lr=3e-2, mse_steps=30, max_steps=30, stop_below=None, dtype="float64")
    results = train_stack(model, family, cfg)
    found = family_worst_case(model, family)
    for e, r in enumerate(results):
        assert r.train["evaluated"] == WHOLE_FAMILY
        assert r.train["sequences"] == family.sequence_count
        assert r.train["max_error"] == pytest.approx(float(found.max_error[e]), abs=1e-9)
        assert r.train["max_error"] <= float(found.error_bound[e]) + 1e-9


def test_a_trained_exact_model_is_exact_on_the_whole_family():
    """A small layer family learned exactly: the stop step's record and the worst case agree."""
    family = build_family("layer", m=6, length=4)
    model = model_for(family, {"feature_map": "table", "rank": 8}, seeds=(0,))
    (res,) = train_stack(model, family, TrainConfig(lr=3e-2, mse_steps=200, max_steps=400, dtype="float64"))
    assert res.train["exact"], res.train
    found = family_worst_case(model, family)
    assert bool(found.exact[0])
    assert res.train["max_error"] == pytest.approx(float(found.max_error[0]), abs=1e-9)
    assert res.steps < 600  # it stopped early, at its first exact step


# -- batched schedules -------------------------------------------------------------------------


def test_batched_training_scores_the_whole_family(monkeypatch):
    family = build_family("layer", m=8, length=5)  # 10 queries, 10 candidates: 1,000 pairs
    monkeypatch.setattr(two_candidate, "PAIRS_PER_STEP", 300)  # 3 first-slot candidates a step, 4 steps an epoch
    model = model_for(family, {"feature_map": "table", "rank": 6}, seeds=(0, 1))
    cfg = TrainConfig(lr=3e-2, mse_steps=10, max_steps=10, stop_below=None, dtype="float64")
    trainer = product_trainer(model, family, cfg)
    assert isinstance(trainer, BatchedProductTrainer)
    assert trainer.train.batch == 3 and trainer.train.steps_per_epoch == 4
    batches = [trainer.train.batch_firsts(s) for s in range(4)]
    assert {len(b) for b in batches} == {3}  # one shape every step: the last batch is filled up
    assert set(torch.cat(batches).tolist()) == set(range(10))  # every candidate at least once an epoch
    # a step's errors are the whole family's at its first-slot candidates: the same sums (6 features
    # × 5 positions) taken over another batch shape, so within rounding, not bitwise (tests/numerics.py)
    with torch.no_grad():
        full = trainer.train.__class__.of(family, torch.float64, pairs=10**6).errors(model).reshape(2, 10, 10, 10)
        for s, first in enumerate(batches):
            step = trainer.train.batch_errors(model, s).reshape(2, 10, 3, 10)
            assert_same_sums(step, full[:, :, first, :], terms=6 * 5)
    results = trainer.run()
    found = family_worst_case(model, family)
    with torch.no_grad():
        full = ProductScored.of(family, torch.float64, pairs=10**6).errors(model)
    for e, r in enumerate(results):
        assert r.steps == 20
        assert r.train["evaluated"] == WHOLE_FAMILY
        assert r.train["max_error"] == pytest.approx(float(found.max_error[e]), abs=1e-9)
        assert r.train["mean_abs_error"] == pytest.approx(float(full[e].abs().mean()), abs=1e-12)


def test_batched_stop_rule_reads_the_whole_family_at_epoch_starts(monkeypatch):
    """A member stops at the first epoch start whose whole-family max error is below 1/2."""
    family = build_family("layer", m=6, length=4)  # 4 queries, 4 candidates: 64 pairs
    monkeypatch.setattr(two_candidate, "PAIRS_PER_STEP", 32)  # two first-slot candidates a step, 2 steps an epoch

    class Watched(BatchedProductTrainer):  # the trainer, reading the whole family at each epoch start
        seen: list = []

        def stop_marks(self, err, losses, step):
            if step % self.train.steps_per_epoch == 0:
                self.seen.append((step, float(self.train.whole(self.model)["max"][0])))
            return super().stop_marks(err, losses, step)

    model = model_for(family, {"feature_map": "table", "rank": 8}, seeds=(0,))
    cfg = TrainConfig(lr=3e-2, mse_steps=200, max_steps=400, dtype="float64")
    watched = Watched(model, ProductScored.of(family, torch.float64), cfg)
    (res,) = watched.run()
    assert res.train["exact"] and res.steps % 2 == 0 and res.steps < 600
    found = family_worst_case(model, family)
    assert res.train["max_error"] == pytest.approx(float(found.max_error[0]), abs=1e-9)
    before = [(s, v) for s, v in watched.seen if s <= res.steps]  # (the stack runs on to the host's next reading)
    assert [s for s, _ in before] == list(range(0, res.steps + 1, 2))
    assert before[-1] == (res.steps, res.train["max_error"])
    assert all(v >= 0.5 for _, v in before[:-1])


def test_batched_stop_on_an_uneven_schedule(monkeypatch):
    """Candidates that do not split evenly into batches (4 candidates, 3 a step): a member that
    becomes exact at an epoch start after a short batch stops and is recorded (its errors
    there have the shape of every other step's)."""
    family = build_family("layer", m=6, length=4)
    monkeypatch.setattr(two_candidate, "PAIRS_PER_STEP", 48)
    model = model_for(family, {"feature_map": "table", "rank": 8}, seeds=(0, 1))
    cfg = TrainConfig(lr=3e-2, mse_steps=200, max_steps=400, dtype="float64")
    trainer = product_trainer(model, family, cfg)
    assert trainer.train.batch == 3 and trainer.train.steps_per_epoch == 2
    results = trainer.run()
    for e, res in enumerate(results):
        assert res.train["exact"] and res.steps % 2 == 0 and res.steps > 0
        assert res.train["max_error"] == pytest.approx(float(family_worst_case(model, family).max_error[e]), abs=1e-9)


def test_batched_runs_are_deterministic_and_independent_of_stack_mates(monkeypatch):
    family = build_family("layer", m=8, length=4)
    monkeypatch.setattr(two_candidate, "PAIRS_PER_STEP", 400)
    cfg = TrainConfig(lr=3e-2, mse_steps=8, max_steps=8, stop_below=None)

    def run(seeds):
        model = build_model(
            default_model(feature_map="table", rank=5), family.m, family.length, seeds=seeds, vocabulary=family.tokens
        )
        return [(r.steps, r.train) for r in product_trainer(model, family, cfg).run()]

    first, second = run([0, 1]), run([0, 1])
    assert first == second  # bitwise, on the CPU
    (alone,) = run([1])
    assert alone[0] == first[1][0]
    assert alone[1]["max_error"] == pytest.approx(first[1][1]["max_error"], abs=1e-5)


# -- models the reduction does not cover ------------------------------------------------------


def big_small_product(length: int = 7) -> ProductFamily:
    """4 queries × 12 candidates, length 7: 4·12⁶ ≈ 12M sequences (above the expansion limit)."""
    rng = np.random.default_rng(5)
    tokens = np.unique(rng.integers(0, 2, (40, 8)), axis=0)[:16]
    return ProductFamily(tokens, np.arange(4), np.arange(4, 16), 1, [], "big", {}, length)


def test_uncovered_models_train_on_sampled_sequences_with_the_exact_check():
    family = big_small_product()
    assert family.sequence_count > MAX_EXPANDED
    cfg = TrainConfig(lr=3e-2, mse_steps=3, max_steps=3, stop_below=None, dtype="float64")
    for spec, checked in (({"position_dependent": True}, True), ({"heads": 2}, False)):
        model = model_for(family, {"feature_map": "table", "rank": 3, **spec}, seeds=(0,))
        trainer = product_trainer(model, family, cfg)
        assert type(trainer) is StackTrainer
        (res,) = trainer.run()
        assert res.train["evaluated"].startswith("two-candidate sequences and 65,536 sampled tuples")
        assert res.train["sequences"] == 4 * 12 * 12 + SAMPLED_TUPLES
        if checked:
            found = family_worst_case(model, family)
            assert res.train["whole_family"]["max_error"] == pytest.approx(float(found.max_error[0]), abs=1e-12)
            assert res.train["whole_family"]["max_error"] >= res.train["max_error"] - 1e-9
        else:
            assert res.train["whole_family"] is None


# -- records, the CLI and sweeps ------------------------------------------------------------------


def test_records_and_checkpoints_of_a_product_run(tmp_path):
    run = RunConfig.parse(
        {
            "family": {"name": "layer", "params": {"m": 6, "length": 5}},
            "model": {"feature_map": "table", "rank": 4},
            "train": {"mse_steps": 5, "max_steps": 5},
        }
    )
    out = train_task([run.validate()])
    (rec,) = out.records
    assert rec["train"]["evaluated"] == WHOLE_FAMILY
    assert rec["train"]["sequences"] == 4 * 4**4
    assert rec["train"]["two_candidate_sequences"] == 4 * 4 * 4
    path = tmp_path / "c.pt"
    path.write_bytes(out.checkpoint)
    from kernelgap.training.trainer import load_checkpoint

    _, model, family, _ = load_checkpoint(path)
    assert isinstance(family, ProductFamily)
    found = family_worst_case(model, family)
    assert rec["train"]["max_error"] == pytest.approx(float(found.max_error[0]), abs=1e-5)  # float32 tables


def test_cli_trains_on_the_layer_family_of_length_11(cli):
    code, out, err = cli(
        "train", "--family", "layer", "-p", "m=12", "-p", "length=11", "--feature-map", "table",
        "--rank", "80", "--seed", "0", "--mse-steps", "3", "--max-steps", "3", "--json",
    )  # fmt: skip
    assert code == 0, err
    rec = json.loads(out)
    assert rec["train"]["sequences"] == 80 * 80**10
    assert rec["train"]["evaluated"] == WHOLE_FAMILY
    assert rec["steps"] == 6
    code, out, err = cli(
        "train", "--family", "layer", "-p", "m=6", "-p", "length=5", "--rank", "4",
        "--mse-steps", "2", "--max-steps", "2",
    )  # fmt: skip
    assert code == 0, err
    assert "whole product family (two-candidate form), 1,024 sequences" in out
    code, out, err = cli(
        "train", "--family", "layer", "-p", "m=6", "-p", "length=5", "--rank", "4",
        "--mse-steps", "0", "--max-steps", "2", "--power", "16", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["config"]["train"]["power"] == 16
    code, out, err = cli("train", "--family", "layer", "-p", "m=6", "-p", "length=5", "--power", "0.5")
    assert code == 2 and "power" in err and len(err.strip().splitlines()) == 1


def test_a_sweep_over_a_product_family(tmp_path):
    from kernelgap.sweeps.runner import run_sweep
    from sweep_helpers import write_sweep

    cfg = write_sweep(
        tmp_path,
        """
        name = "layer"
        [family]
        name = "layer"
        params = {m = 8, length = 6}
        [model]
        feature_map = "table"
        [train]
        mse_steps = 3
        max_steps = 3
        [grid]
        model.rank = [4, 10]
        seed = [0, 1]
        """,
    )
    summary = run_sweep(cfg, tmp_path / "out", executor="inline", progress=False)
    assert summary.ran == 4
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "out" / "runs").glob("*.json"))]
    assert len(records) == 4
    for rec in records:
        assert rec["train"]["evaluated"] == WHOLE_FAMILY
        assert rec["train"]["sequences"] == 10 * 10**5


def test_a_test_family_may_be_a_product():
    train_fam = build_family("layer", m=6, length=5)
    test_fam = build_family("layer", m=6, length=7)
    model = model_for(train_fam, {"feature_map": "table", "rank": 4}, seeds=(0,))
    cfg = TrainConfig(lr=3e-2, mse_steps=3, max_steps=3, stop_below=None, dtype="float64")
    (res,) = train_stack(model, train_fam, cfg, test_fam)
    assert res.test["sequences"] == test_fam.sequence_count
    assert FamilySpec(name="layer", params={"m": 6, "length": 7}).load().length == 7
