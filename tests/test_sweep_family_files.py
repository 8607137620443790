"""A sweep owns its family files: it copies each into its results folder when it begins,
trains and resumes only from that copy, and names a changed source file as such."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

import kernelgap.sweeps.runner as runner
from kernelgap.errors import ConfigError, FamilyError, KernelgapError
from kernelgap.sweeps import ResultsDir, load_sweep, run_sweep
from kernelgap.task import build_family, save_family
from kernelgap.training import FamilySpec

SWEEP = """name = "files"
[family]
file = "fam.json"
[model]
feature_map = "table"
[train]
mse_steps = 3
max_steps = 3
[grid]
model.rank = [2, 40]
seed = [0]
"""


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def small_sweep(folder: Path, n: int = 4) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_family(build_family("hadamard", m=8, n=n), folder / "fam.json", overwrite=True)
    cfg = folder / "sweep.toml"
    cfg.write_text(SWEEP)
    return cfg


def records(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))]


def test_the_folder_holds_a_copy_and_records_name_it(tmp_path):
    cfg = small_sweep(tmp_path / "src")
    digest = sha(tmp_path / "src" / "fam.json")
    out = tmp_path / "out"
    run_sweep(cfg, out, executor="inline", progress=False)
    copy = out / "families" / f"{digest}.json"
    assert copy.read_bytes() == (tmp_path / "src" / "fam.json").read_bytes()
    assert json.loads((out / "sweep.json").read_text())["family_files"] == {"fam.json": digest}
    for record in records(out):
        assert record["config"]["family"]["file"] == str(copy.resolve())
        assert record["config"]["family"]["sha256"] == digest and record["config"]["family"]["name"] == "fam"


def test_resume_from_the_folder_alone_with_a_relative_file_that_moved(tmp_path, cli):
    cfg = small_sweep(tmp_path / "src")
    out = tmp_path / "out"
    run_sweep(cfg, out, executor="inline", progress=False)
    first = records(out)
    (out / "runs" / f"{first[0]['id']}.json").unlink()  # one run to redo
    shutil.rmtree(tmp_path / "src")  # the original file is gone
    code, _, err = cli("sweep", str(out), "--executor", "inline")
    assert code == 0, err
    again = records(out)
    assert [r["id"] for r in again] == [r["id"] for r in first]
    assert again[0]["train"] == first[0]["train"]


def test_a_changed_source_is_reported_by_name(tmp_path, cli):
    cfg = small_sweep(tmp_path / "src")
    out = tmp_path / "out"
    run_sweep(cfg, out, executor="inline", progress=False)
    before = sha(tmp_path / "src" / "fam.json")
    small_sweep(tmp_path / "src", n=5)  # same name, other content
    after = sha(tmp_path / "src" / "fam.json")
    listing = sorted(p.name for p in out.rglob("*"))
    code, _, err = cli("sweep", str(cfg), "--out", str(out), "--executor", "inline")
    assert code == 2 and err.count("\n") == 1
    assert "changed since the sweep" in err and before[:12] in err and after[:12] in err
    assert sorted(p.name for p in out.rglob("*")) == listing


def test_a_file_changed_mid_sweep_cannot_mislabel_a_record(tmp_path, monkeypatch):
    """Between two stacks the source file is rewritten with other sequences: every record
    still names the content it was trained on (the copy), and trained on all of it."""
    cfg = small_sweep(tmp_path / "src")
    source = tmp_path / "src" / "fam.json"
    digest, sequences = sha(source), len(build_family("hadamard", m=8, n=4))
    real = runner.train_task
    calls = []

    def train_then_change(group):
        calls.append(len(group))
        out = real(group)
        save_family(build_family("hadamard", m=8, n=6), source, overwrite=True)
        return out

    monkeypatch.setattr(runner, "train_task", train_then_change)
    out = tmp_path / "out"
    run_sweep(cfg, out, executor="inline", progress=False, max_stack=1)
    assert len(calls) == 2 and sha(source) != digest
    for record in records(out):
        assert record["config"]["family"]["sha256"] == digest
        assert record["train"]["sequences"] == sequences


def test_a_spec_refuses_bytes_other_than_its_hash(tmp_path):
    path = tmp_path / "f.json"
    save_family(build_family("hadamard", m=8, n=3), path)
    spec = FamilySpec.from_file(path)
    save_family(build_family("hadamard", m=8, n=4), path, overwrite=True)
    with pytest.raises(FamilyError, match="changed since the run was configured"):
        spec.build()


def test_run_ids_name_content_not_location(tmp_path):
    cfg = small_sweep(tmp_path / "a")
    other = small_sweep(tmp_path / "b")
    assert [r.run_id() for r in load_sweep(cfg).runs()] == [r.run_id() for r in load_sweep(other).runs()]


def test_a_refused_sweep_leaves_no_folder(tmp_path, monkeypatch):
    cfg = small_sweep(tmp_path / "src")

    def refuse(*_, **__):
        raise KernelgapError("no executor today")

    monkeypatch.setattr(runner, "make_executor", refuse)
    out = tmp_path / "new" / "out"
    with pytest.raises(KernelgapError):
        run_sweep(cfg, out, executor="local", progress=False)
    assert not out.exists()


def test_a_refused_sweep_keeps_a_folder_it_did_not_make(tmp_path, monkeypatch):
    cfg = small_sweep(tmp_path / "src")
    out = tmp_path / "out"
    run_sweep(cfg, out, executor="inline", progress=False)
    (out / "runs" / f"{records(out)[0]['id']}.json").unlink()
    monkeypatch.setattr(runner, "make_executor", lambda *a, **k: (_ for _ in ()).throw(ConfigError("no")))
    with pytest.raises(ConfigError):
        run_sweep(out, executor="local", progress=False)
    assert len(records(out)) == 1


def test_lock_files_follow_the_umask(tmp_path):
    store = ResultsDir(tmp_path / "out")
    store.open_for("x", "", ["abc"])
    old = os.umask(0o002)
    try:
        claim = store.claim("abc")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(claim.path).st_mode) == 0o664
    store.release(claim, finished=False)


def test_a_missing_copy_is_one_line(tmp_path, cli):
    cfg = small_sweep(tmp_path / "src")
    out = tmp_path / "out"
    run_sweep(cfg, out, executor="inline", progress=False)
    shutil.rmtree(out / "families")
    code, _, err = cli("sweep", str(out), "--executor", "inline")
    assert code == 2 and err.count("\n") == 1 and "is missing" in err
