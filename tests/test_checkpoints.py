"""Every run keeps its weights: a sweep writes one checkpoint per stack, every record names
its file and member, and the loaded model gives back the record's numbers exactly."""

from __future__ import annotations

import json

import pytest
import torch

from kernelgap.errors import KernelgapError
from kernelgap.sweeps import run_sweep
from kernelgap.task import error_metrics
from kernelgap.training.trainer import load_checkpoint

SWEEP = """name = "weights"
[family]
name = "hadamard"
params = {m = 8, n = 4}
[model]
feature_map = "table"
[train]
mse_steps = 30
max_steps = 30
dtype = "float64"
[grid]
model.rank = [2, 4]
seed = [0, 1]
[[variants]]
model.feature_map = "table"
[[variants]]
model.kind = "softmax"
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("weights")
    (tmp / "sweep.toml").write_text(SWEEP)
    run_sweep(tmp / "sweep.toml", tmp / "out", executor="inline", progress=False)
    return tmp / "out"


def records(out):
    return [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))]


def test_every_record_names_a_checkpoint_that_exists(folder):
    recs = records(folder)
    assert len(recs) == 6  # 4 table runs, 2 softmax (one per seed)
    for r in recs:
        assert (folder / r["checkpoint"]["file"]).is_file()
    files = {r["checkpoint"]["file"] for r in recs}
    assert len(files) < len(recs)  # a stack's runs share one file


def test_a_loaded_checkpoint_gives_back_the_recorded_errors(folder):
    for r in records(folder):
        runs, model, family, _ = load_checkpoint(folder / r["checkpoint"]["file"])
        e = r["checkpoint"]["member"]
        assert runs[e].run_id() == r["id"]
        tokens, index = torch.from_numpy(family.tokens).double(), torch.from_numpy(family.index)
        with torch.no_grad():
            pred = model.predict(tokens, index, family.scored_positions)[e]
        got = error_metrics(pred, torch.from_numpy(family.targets()[:, family.scored_positions]).double())
        assert got.max_error == pytest.approx(r["train"]["max_error"], rel=1e-12, abs=1e-12)


def test_a_damaged_checkpoint_is_one_line(tmp_path):
    bad = tmp_path / "x.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(KernelgapError, match="cannot be read") as info:
        load_checkpoint(bad)
    assert "\n" not in str(info.value)
