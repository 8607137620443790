"""Fresh starts (``train.restarts``): a run that ends not exact trains again from a new
initialisation, keeps its best try, says so in its record, and its checkpoint holds the kept
try's weights; a run without fresh starts keeps its id."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelgap.task import EXACT_THRESHOLD
from kernelgap.training import RunConfig
from kernelgap.training.restarts import restart_seed
from sweep_helpers import records, rescored_max_error, trained_folder

SWEEP = """name = "restarts"
[family]
name = "hadamard"
params = {m = 16, n = 4}
[model]
feature_map = "table"
[train]
mse_steps = 0
max_steps = 1000
dtype = "float64"
restarts = 2
[grid]
model.rank = [2, 4]
seed = [0, 1]
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return trained_folder(tmp_path_factory, "restarts", SWEEP)


def badness(t):
    return (0 if t["status"] == "ok" and t["max_error"] < EXACT_THRESHOLD else 1, t["max_error"])


def test_a_run_below_the_certificate_uses_every_try_and_keeps_its_best(folder):
    below = [r for r in records(folder) if r["config"]["model"]["rank"] == 2]  # certified rank: 4
    assert len(below) == 2
    for r in below:
        tries = r["restarts"]
        assert len(tries) == 3  # never exact: the first try and both fresh starts
        assert len({t["seed"] for t in tries}) == 3 and tries[0]["seed"] == r["seed"]
        best = min(tries, key=badness)
        assert r["train"]["max_error"] == best["max_error"] and r["steps"] == best["steps"]
        assert r["wall_time_s"] == pytest.approx(sum(t["wall_time_s"] for t in tries))


def test_tries_stop_at_the_first_exact_one(folder):
    for r in records(folder):
        tries = r["restarts"]
        exact = [badness(t)[0] == 0 for t in tries]
        assert not any(exact[:-1])  # an exact try is the last
        assert (r["train"]["max_error"] < EXACT_THRESHOLD) == exact[-1]


def test_the_checkpoint_holds_the_kept_tries_weights(folder):
    # the rank-4 runs end exact at once, so the rank-2 runs start afresh in a narrower stack
    assert any(len(r["restarts"]) == 1 for r in records(folder) if r["config"]["model"]["rank"] == 4)
    for r in records(folder):
        assert rescored_max_error(folder, r) == pytest.approx(r["train"]["max_error"], rel=1e-12, abs=1e-12)


def run(restarts):
    raw = {"family": {"name": "witness"}, "model": {"kind": "kernel", "feature_map": "table", "rank": 8}}
    return RunConfig.parse({**raw, "train": {"restarts": restarts}})


def test_a_run_without_fresh_starts_keeps_its_id():
    plain = RunConfig.parse(
        {"family": {"name": "witness"}, "model": {"kind": "kernel", "feature_map": "table", "rank": 8}}
    )
    assert run(0).run_id() == plain.run_id()
    assert "restarts" not in plain.identity()["train"]
    assert run(1).run_id() != plain.run_id() and run(1).run_id() != run(2).run_id()


@given(st.integers(0, 2**64 - 1), st.integers(1, 64))
def test_a_fresh_start_seed_is_a_function_of_seed_and_try(seed, attempt):
    s = restart_seed(seed, attempt)
    assert s == restart_seed(seed, attempt) and 0 <= s < 2**63
    assert s != restart_seed(seed, attempt + 1)
