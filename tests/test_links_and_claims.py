"""No write through a link, none outside ``--out``, every flag checked before a folder is
claimed: each refused command leaves the results folder and whatever a link in it points
to exactly as they were (:func:`tree_digest` before and after)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from sweep_helpers import TINY, trained_folder, write_sweep


def tree_digest(path: Path) -> str:
    """A hash of everything under ``path`` (or of ``path`` itself, a file), links not
    followed: each entry's relative name, its kind, a file's bytes, a link's target."""
    path = Path(path)
    h = hashlib.sha256()
    entries = [path] + (sorted(path.rglob("*")) if path.is_dir() and not path.is_symlink() else [])
    for p in entries:
        name = p.relative_to(path).as_posix() if p != path else "."
        if p.is_symlink():
            h.update(f"L {name} -> {os.readlink(p)}\n".encode())
        elif p.is_dir():
            h.update(f"D {name}\n".encode())
        else:
            h.update(f"F {name} {p.stat().st_nlink}\n".encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return trained_folder(tmp_path_factory, "links", TINY)


@pytest.fixture
def sweep_dir(trained, tmp_path) -> Path:
    """A copy of a finished tiny sweep, beside a folder ``outside`` holding a copy of one of
    its records (what a link in it will point to)."""
    out = tmp_path / "sweep"
    shutil.copytree(trained, out, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    first = sorted((out / "runs").glob("*.json"))[0]
    shutil.copy(first, outside / "summary.json")
    return out


def refused(cli, *args: str, watch: list[Path]) -> str:
    """Run the CLI; it must exit 2 with one line ``error: …`` and change nothing under ``watch``."""
    before = [tree_digest(p) for p in watch]
    code, _, err = cli(*args)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert [tree_digest(p) for p in watch] == before
    return lines[0]


def _redo_first(out: Path) -> str:
    """Remove the first run's record, so that a resumed sweep claims and trains it again."""
    record = sorted((out / "runs").glob("*.json"))[0]
    record.unlink()
    return record.stem


# -- lock files -----------------------------------------------------------------------


def test_a_symlinked_lock_file_is_refused(cli, sweep_dir):
    outside = sweep_dir.parent / "outside"
    run_id = _redo_first(sweep_dir)
    (sweep_dir / "locks").mkdir(exist_ok=True)
    (sweep_dir / "locks" / f"{run_id}.lock").symlink_to(outside / "summary.json")
    line = refused(cli, "sweep", str(sweep_dir), "--executor", "inline", watch=[sweep_dir, outside])
    assert "symbolic link" in line and f"{run_id}.lock" in line


def test_a_hard_linked_lock_file_is_refused(cli, sweep_dir):
    outside = sweep_dir.parent / "outside"
    run_id = _redo_first(sweep_dir)
    (sweep_dir / "locks").mkdir(exist_ok=True)
    os.link(outside / "summary.json", sweep_dir / "locks" / f"{run_id}.lock")
    line = refused(cli, "sweep", str(sweep_dir), "--executor", "inline", watch=[sweep_dir, outside])
    assert "hard link" in line


def test_a_lock_file_that_is_a_folder_is_refused(cli, sweep_dir):
    run_id = _redo_first(sweep_dir)
    (sweep_dir / "locks" / f"{run_id}.lock").mkdir(parents=True)
    line = refused(cli, "sweep", str(sweep_dir), "--executor", "inline", watch=[sweep_dir])
    assert "is a folder" in line


def test_claim_opens_the_lock_without_following_a_link(sweep_dir):
    """The claim itself, past the folder's check (a link made while the sweep runs)."""
    from kernelgap.errors import ConfigError
    from kernelgap.sweeps.store import ResultsDir

    outside = sweep_dir.parent / "outside"
    before = tree_digest(outside)
    run_id = _redo_first(sweep_dir)
    (sweep_dir / "locks").mkdir(exist_ok=True)
    (sweep_dir / "locks" / f"{run_id}.lock").symlink_to(outside / "summary.json")
    with pytest.raises(ConfigError, match="symbolic link"):
        ResultsDir(sweep_dir).claim(run_id)
    assert tree_digest(outside) == before


# -- folders and files of a sweep that are links ----------------------------------------


@pytest.mark.parametrize("sub", ["checkpoints", "runs", "locks", "families"])
def test_a_symlinked_subfolder_is_refused(cli, sweep_dir, sub):
    elsewhere = sweep_dir.parent / "outside" / sub
    _redo_first(sweep_dir)
    if (sweep_dir / sub).exists():
        shutil.move(sweep_dir / sub, elsewhere)
    else:
        elsewhere.mkdir()
    (sweep_dir / sub).symlink_to(elsewhere, target_is_directory=True)
    line = refused(cli, "sweep", str(sweep_dir), "--executor", "inline", watch=[sweep_dir, elsewhere])
    assert f"{sub} is a symbolic link" in line


def test_a_symlinked_record_is_refused(cli, sweep_dir):
    outside = sweep_dir.parent / "outside"
    record = sorted((sweep_dir / "runs").glob("*.json"))[0]
    record.unlink()
    record.symlink_to(outside / "summary.json")
    line = refused(cli, "sweep", str(sweep_dir), "--executor", "inline", watch=[sweep_dir, outside])
    assert record.name in line


def test_an_atomic_write_within_a_folder_refuses_a_link_on_its_way(tmp_path):
    from kernelgap.errors import KernelgapError
    from kernelgap.io import atomic_write_bytes

    (tmp_path / "outside").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "checkpoints").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(KernelgapError, match="symbolic link"):
        atomic_write_bytes(tmp_path / "out" / "checkpoints" / "a.pt", b"x", within=tmp_path / "out")
    assert list((tmp_path / "outside").iterdir()) == []
    # the folder the user named may itself be a link: only what lies below it is checked
    (tmp_path / "named").symlink_to(tmp_path / "outside", target_is_directory=True)
    atomic_write_bytes(tmp_path / "named" / "a.json", b"{}", within=tmp_path / "named")
    assert (tmp_path / "outside" / "a.json").read_bytes() == b"{}"


def test_a_hard_linked_record_is_replaced_not_written_through(sweep_dir):
    """An atomic write gives the name a fresh file: the other name keeps its bytes."""
    from kernelgap.io import atomic_write_bytes

    outside = sweep_dir.parent / "outside" / "summary.json"
    record = sorted((sweep_dir / "runs").glob("*.json"))[0]
    record.unlink()
    os.link(outside, record)
    before = outside.read_bytes()
    atomic_write_bytes(record, b"{}")
    assert outside.read_bytes() == before and record.read_bytes() == b"{}"


def test_figures_are_written_atomically_not_through_a_link(tmp_path):
    import matplotlib.pyplot as plt

    from kernelgap.report.figures import save

    (tmp_path / "target.png").write_bytes(b"earlier")
    (tmp_path / "figs").mkdir()
    os.link(tmp_path / "target.png", tmp_path / "figs" / "f.png")
    fig, _ = plt.subplots()
    assert save(fig, tmp_path / "figs", "f") == ["f.png", "f.svg"]
    assert (tmp_path / "target.png").read_bytes() == b"earlier"
    assert (tmp_path / "figs" / "f.png").read_bytes().startswith(b"\x89PNG")


# -- reproduce: every flag before the folder ---------------------------------------------


def _reproduction(folder: Path) -> Path:
    """A reproduction folder of the quick profile as an earlier run left it (its record,
    summary and report), without running one."""
    folder.mkdir(parents=True)
    meta = {"profile": "quick", "version": "0", "invocations": [{"command": "kernelgap reproduce", "status": "done"}]}
    (folder / "reproduce.json").write_text(json.dumps(meta))
    (folder / "summary.json").write_text('{"profile": "quick"}\n')
    (folder / "report.html").write_text("<html>earlier</html>\n")
    return folder


@pytest.mark.parametrize("flags", [["--workers", "0"], ["--executor", "nope"]])
def test_a_refused_reproduce_leaves_reproduce_json_as_it_was(cli, tmp_path, flags):
    out = _reproduction(tmp_path / "rep")
    refused(cli, "reproduce", "--out", str(out), *flags, watch=[out])


def test_a_refused_reproduce_creates_no_folder(cli, tmp_path):
    refused(cli, "reproduce", "--out", str(tmp_path / "new"), "--workers", "0", watch=[tmp_path])
    assert not (tmp_path / "new").exists()


def test_reproduce_refuses_a_link_in_its_folder(cli, tmp_path):
    out = _reproduction(tmp_path / "rep")
    (tmp_path / "outside").mkdir()
    (out / "witness").symlink_to(tmp_path / "outside", target_is_directory=True)
    line = refused(cli, "reproduce", "--out", str(out), "--executor", "inline", watch=[out, tmp_path / "outside"])
    assert "witness is a symbolic link" in line


# -- probe and bound-curve: never into another kind's folder -----------------------------

MODULE = """
import torch
from torch import nn


class Plain(nn.Module):
    def __init__(self, m, rank):
        super().__init__()
        self.lin = nn.Linear(m, rank)
        self.out = nn.Linear(rank, 1)

    def forward(self, tokens):
        return self.out(self.lin(tokens)).squeeze(-1)
"""
#: A probe that runs in seconds, where the folder lets it run.
QUICK = ("--ranks", "witness=2", "--ranks", "ood-n4=2", "--steps", "2", "--no-recipes", "--executor", "inline")


def _module(tmp_path: Path) -> str:
    (tmp_path / "plain.py").write_text(MODULE)
    return f"{tmp_path / 'plain.py'}:Plain"


def test_probe_into_a_reproduction_folder_is_refused(cli, tmp_path):
    out = _reproduction(tmp_path / "rep")
    line = refused(cli, "probe", _module(tmp_path), *QUICK, "--out", str(out), watch=[out])
    assert "reproduction" in line


def test_probe_into_a_sweep_folder_is_refused(cli, sweep_dir, tmp_path):
    line = refused(cli, "probe", _module(tmp_path), *QUICK, "--out", str(sweep_dir), watch=[sweep_dir])
    assert "sweep" in line


def test_probe_refuses_a_link_in_its_folder(cli, tmp_path):
    out, elsewhere = tmp_path / "probe", tmp_path / "outside"
    out.mkdir()
    elsewhere.mkdir()
    (out / "sweeps").symlink_to(elsewhere, target_is_directory=True)
    line = refused(cli, "probe", _module(tmp_path), *QUICK, "--out", str(out), watch=[out, elsewhere])
    assert "symbolic link" in line


CURVE = ("bound-curve", "--code", "hadamard", "--m", "12..16..4", "--queries", "8")


def test_bound_curve_replaces_an_earlier_curve_only_with_force(cli, tmp_path):
    out = tmp_path / "curve"
    code, _, err = cli(*CURVE, "--out", str(out))
    assert code == 0, err
    (out / "bound-curve-hadamard.json").write_text("{}\n")  # stands for an earlier curve
    line = refused(cli, *CURVE, "--out", str(out), watch=[out])
    assert "--force" in line
    code, _, err = cli(*CURVE, "--out", str(out), "--force")
    assert code == 0, err
    assert json.loads((out / "bound-curve-hadamard.json").read_text())["code"] == "hadamard"


def test_bound_curve_into_a_sweep_or_reproduction_folder_is_refused(cli, sweep_dir, tmp_path):
    rep = _reproduction(tmp_path / "rep")
    for out in (sweep_dir, sweep_dir / "runs", rep, rep / "bound_curve"):
        line = refused(cli, *CURVE, "--out", str(out), "--force", watch=[sweep_dir, rep])
        assert "sweep" in line or "reproduction" in line


def test_bound_curve_refuses_a_symlinked_curve_file(cli, tmp_path):
    out, target = tmp_path / "curve", tmp_path / "summary.json"
    out.mkdir()
    target.write_text('{"earlier": true}\n')
    (out / "bound-curve-hadamard.png").symlink_to(target)
    line = refused(cli, *CURVE, "--out", str(out), "--force", watch=[out, target])
    assert "symbolic link" in line


# -- report ------------------------------------------------------------------------------


def test_report_refuses_a_symlinked_summary(cli, tmp_path):
    out = _reproduction(tmp_path / "rep")
    target = tmp_path / "elsewhere.json"
    target.write_text('{"earlier": true}\n')
    (out / "summary.json").unlink()
    (out / "summary.json").symlink_to(target)
    line = refused(cli, "report", str(out), watch=[out, target])
    assert "summary.json is a symbolic link" in line


# -- names too long ----------------------------------------------------------------------

LONG = "x" * 300


@pytest.mark.parametrize(
    "args",
    [
        ("reproduce", "--out", f"{{tmp}}/{LONG}", "--executor", "inline"),
        ("probe", "{module}", *QUICK, "--out", f"{{tmp}}/{LONG}"),
        (*CURVE, "--out", f"{{tmp}}/{LONG}"),
        ("sweep", "{sweep}", "--out", f"{{tmp}}/{LONG}", "--executor", "inline"),
        ("report", f"{{tmp}}/{LONG}"),
    ],
    ids=["reproduce", "probe", "bound-curve", "sweep", "report"],
)
def test_a_name_too_long_is_one_line(cli, tmp_path, args):
    values = {"tmp": tmp_path, "module": _module(tmp_path), "sweep": write_sweep(tmp_path)}
    refused(cli, *(a.format(**values) for a in args), watch=[tmp_path])


def test_a_profile_with_a_bad_sweep_file_is_refused_before_the_folder(cli, tmp_path):
    profile = tmp_path / "mine"
    profile.mkdir()
    (profile / "profile.toml").write_text('experiments = ["tiny"]\n')
    write_sweep(profile, TINY.replace("mse_steps = 4", "mse_steps = -4"), "tiny.toml")
    out = _reproduction(tmp_path / "rep")
    meta = json.loads((out / "reproduce.json").read_text())
    (out / "reproduce.json").write_text(json.dumps({**meta, "profile": "mine"}))
    line = refused(cli, "reproduce", "--profile", str(profile), "--out", str(out), "--executor", "inline", watch=[out])
    assert "tiny.toml" in line
