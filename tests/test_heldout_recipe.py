"""The default ``table`` recipe on a family written by a generator of its own (numpy only, no
kernelgap code): exact at the certified rank, never below it; and which runs the map's calibrated
recipe reaches (docs/experiments.md, "Training recipe", "Held-out families")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernelgap.models.feature_maps import FEATURE_MAPS
from kernelgap.models.feature_maps.table import Table
from kernelgap.task import family_from_json
from kernelgap.theory.certificate import certify
from kernelgap.training import FamilySpec, RunConfig, train_records
from kernelgap.training.config import SOFTMAX_LR


def paley_hadamard(q: int) -> np.ndarray:
    """Paley's first construction of order q + 1 (q prime, q ≡ 3 mod 4): the Jacobsthal matrix
    ``χ(j − i)`` bordered by ±1, plus the identity."""
    residues = {(i * i) % q for i in range(1, q)}
    chi = np.array([0] + [1 if a in residues else -1 for a in range(1, q)])
    s = np.zeros((q + 1, q + 1), dtype=np.int64)
    s[0, 1:], s[1:, 0] = 1, -1
    s[1:, 1:] = chi[(np.arange(q)[None, :] - np.arange(q)[:, None]) % q]
    return s + np.eye(q + 1, dtype=np.int64)


def heldout(q: int, n: int, seed: int) -> dict:
    """n random rows of the normalised Paley matrix as 0/1 queries (weight m/2, overlaps m/4), bit
    columns and rows shuffled, their complements as the candidates in a shuffled order."""
    rng = np.random.default_rng(seed)
    h = paley_hadamard(q)
    h = h * h[:, :1]
    h = h * h[:1, :]
    words = (h[1:] > 0).astype(np.int64)[rng.choice(q, n, replace=False)][:, rng.permutation(q + 1)]
    queries = ["".join(map(str, w)) for w in words]
    goods = ["".join(map(str, 1 - w)) for w in words]
    return {
        "m": q + 1,
        "query_position": 1,
        "name": f"heldout-paley{q + 1}-n{n}",
        "queries": queries,
        "candidates": [goods[i] for i in rng.permutation(n)],
        "matching": [[x, g] for x, g in zip(queries, goods)],
    }


def test_the_generator_writes_a_hadamard_code_that_certifies_n():
    h = paley_hadamard(19)
    assert np.array_equal(h @ h.T, 20 * np.eye(20, dtype=np.int64))
    fam = heldout(19, 12, seed=5)
    words = np.array([[int(b) for b in x] for x in fam["queries"]])
    gram = words @ words.T
    assert (np.diag(gram) == 10).all() and (gram[~np.eye(12, dtype=bool)] == 5).all()
    assert certify(family_from_json(fam)).certified_rank == 12


def test_the_default_recipe_is_exact_at_the_certificate_and_never_below(tmp_path):
    path = tmp_path / "heldout.json"
    path.write_text(json.dumps(heldout(19, 12, seed=5)))
    spec = FamilySpec.from_file(path).model_dump(exclude_none=True)
    cert = certify(family_from_json(json.loads(path.read_text()))).certified_rank
    runs = [
        RunConfig.parse({"family": spec, "model": {"kind": "kernel", "feature_map": "table", "rank": r}, "seed": 1})
        for r in (cert, cert - 1)
    ]
    at, below = train_records(runs)  # one stack: ranks of a table map are masked features
    assert at["train"]["max_error"] < 0.5 and at["steps"] < at["config"]["train"]["max_steps"]
    assert below["train"]["max_error"] >= 0.5  # the certificate: no model of rank r₀ − 1 is exact
    assert below["steps"] == below["config"]["train"]["max_steps"]  # it never stopped early


def recipe(model: dict, train: dict | None = None) -> RunConfig:
    return RunConfig.parse({"family": {"name": "witness"}, "model": model, "train": train or {}}).resolved()


def test_a_table_run_that_sets_nothing_gets_the_table_recipe():
    run = recipe({"feature_map": "table"})
    assert (run.train.lr, run.train.mse_steps, run.train.max_steps) == (Table.default_lr, 0, 5000)
    assert run.model.readout == "linear" and run.model.init_scale == 2.0
    assert (
        run.run_id()
        == recipe({"feature_map": "table", "readout": "linear"}, {"max_steps": 5000, "mse_steps": 0}).run_id()
    )


@pytest.mark.parametrize("train", [{"mse_steps": 1000}, {"max_steps": 2000}, {"mse_steps": 10, "max_steps": 20}])
def test_a_schedule_the_run_sets_is_kept_whole(train):
    run = recipe({"feature_map": "table"}, train)
    assert (run.train.mse_steps, run.train.max_steps) == (train.get("mse_steps", 1000), train.get("max_steps", 2000))
    assert recipe({"feature_map": "table", "readout": "mlp"}).model.readout == "mlp"


@pytest.mark.parametrize("name", sorted(set(FEATURE_MAPS) - {"table"}))
def test_every_other_map_keeps_the_generic_recipe(name):
    run = recipe({"feature_map": name})
    assert (run.train.mse_steps, run.train.max_steps, run.model.readout) == (1000, 2000, "mlp")
    assert run.train.lr == FEATURE_MAPS[name].default_lr
    soft = recipe({"kind": "softmax"})
    assert (soft.train.lr, soft.train.mse_steps, soft.model.readout) == (SOFTMAX_LR, 1000, "mlp")
