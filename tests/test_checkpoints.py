"""Every run keeps its weights: a sweep writes one checkpoint per stack, every record names
its file and member, and the loaded model gives back the record's numbers exactly."""

from __future__ import annotations

import pytest

from kernelgap.errors import KernelgapError
from kernelgap.training.trainer import load_checkpoint
from sweep_helpers import records, rescored_max_error, trained_folder

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
    return trained_folder(tmp_path_factory, "weights", SWEEP)


def test_every_record_names_a_checkpoint_that_exists(folder):
    recs = records(folder)
    assert len(recs) == 6  # 4 table runs, 2 softmax (one per seed)
    for r in recs:
        assert (folder / r["checkpoint"]["file"]).is_file()
    files = {r["checkpoint"]["file"] for r in recs}
    assert len(files) < len(recs)  # a stack's runs share one file


def test_a_loaded_checkpoint_gives_back_the_recorded_errors(folder):
    for r in records(folder):
        assert rescored_max_error(folder, r) == pytest.approx(r["train"]["max_error"], rel=1e-12, abs=1e-12)


def test_a_damaged_checkpoint_is_one_line(tmp_path):
    bad = tmp_path / "x.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(KernelgapError, match="cannot be read") as info:
        load_checkpoint(bad)
    assert "\n" not in str(info.value)
