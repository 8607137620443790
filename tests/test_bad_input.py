"""Bad input, as a user meets it: CLI flags, sweep configs, family files and
results folders.  Every case gives exactly one stderr line ``error: …`` naming the
problem, exit status 2, no traceback, and leaves every existing file byte-identical
(the whole folder is hashed before and after; nothing new appears either).

The README's "Troubleshooting" section lists these cases and their messages.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelgap.sweeps import run_sweep
from kernelgap.task import build_family
from kernelgap.task.family_file import save_family
from sweep_helpers import TINY

KERNELGAP = str(Path(sys.executable).parent / "kernelgap")
EXAMPLE = "kernelgap.probe.examples:DecayedLinearAttention"

CONFIG_EDITS = {  # file name → (text to replace in TINY, replacement)
    "unknown-key.toml": ("[train]", "[train]\nlearning_rate = 0.1"),
    "wrong-type.toml": ("mse_steps = 4", 'mse_steps = "two"'),
    "empty-grid.toml": ("model.rank = [1, 2]", "model.rank = []"),
    "rank-zero.toml": ("model.rank = [1, 2]", "model.rank = [0, 2]"),
    "zero-heads.toml": ('feature_map = "table"', 'feature_map = "table"\nheads = 0'),
    "bad-toml.toml": ("[grid]", "[grid"),
    "bad-dtype.toml": ("mse_steps = 4", 'mse_steps = 4\ndtype = "float16"'),
    "infinite-lr.toml": ("mse_steps = 4", "mse_steps = 4\nlr = inf"),
    "bad-readout.toml": ('feature_map = "table"', 'feature_map = "table"\nreadout = "deep"'),
    "unknown-map.toml": ('feature_map = "table"', 'feature_map = "cosine"'),
    "other-sweep.toml": ("model.rank = [1, 2]", "model.rank = [1, 2, 3]"),
    "huge-int.toml": ("mse_steps = 4", "mse_steps = 1" + "0" * 5000),  # past Python's digit limit
}


def tree_digest(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file (and ``<dir>`` for every folder) below root."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """Configs, family files and results folders, good and bad, in one folder."""
    w = tmp_path_factory.mktemp("world")
    (w / "ok.toml").write_text(TINY)
    for name, (old, new) in CONFIG_EDITS.items():
        assert old in TINY
        (w / name).write_text(TINY.replace(old, new))
    run_sweep(w / "ok.toml", w / "results", executor="inline", progress=False)
    for name, text in {"corrupt-meta": "{not json", "list-meta": "[1, 2, 3]"}.items():
        run_sweep(w / "ok.toml", w / name, executor="inline", progress=False)
        (w / name / "sweep.json").write_text(text)
    (w / "stranger").mkdir()
    (w / "stranger" / "notes.txt").write_text("someone else's folder\n")
    (w / "a-file").write_text("not a folder\n")

    fam = build_family("hadamard", m=8, n=3)
    save_family(fam, w / "good.json")
    good = json.loads((w / "good.json").read_text())
    bad_bits = json.loads(json.dumps(good))
    bad_bits["sequences"][0][1] = "0101x101"
    unequal = json.loads(json.dumps(good))
    unequal["sequences"][1] = unequal["sequences"][1][:2]
    short = json.loads(json.dumps(good))
    short["sequences"][2][0] = "0101"
    one_order = fam.subset(np.flatnonzero(fam.index[:, 1] <= fam.index[:, 2]), "one-order")
    save_family(one_order, w / "one-order.json")
    for name, data in {"bad-bits.json": bad_bits, "unequal.json": unequal, "short-bits.json": short}.items():
        (w / name).write_text(json.dumps(data))
    (w / "not-json.json").write_text('{"m": 8, "sequences": [')
    (w / "huge-int.json").write_text('{"m": 1' + "0" * 5000 + ', "sequences": [["0"]]}')
    (w / "huge-profile").mkdir()
    (w / "huge-profile" / "profile.toml").write_text('experiments = ["witness"]\n[length]\nm = 1' + "0" * 5000)
    (w / "family-folder.json").mkdir()
    (w / "probe-corrupt").mkdir()
    (w / "probe-corrupt" / "probe.json").write_text('{"target": "x", "runs": [')
    (w / "probe-other").mkdir()
    (w / "probe-other" / "probe.json").write_text(json.dumps({"target": "another.py:Module", "runs": "runs-x"}))
    return w


# (case id, argv with {w} for the world folder, text the one error line must contain,
#  run through the installed console script too)
CASES = [
    # -- command-line flags
    ("flag-not-an-int", ["verify", "--m", "two"], "Invalid value for '--m'", True),
    ("flag-unknown", ["verify", "--m", "2", "--bogus"], "--bogus", False),
    (
        "flag-rank-zero",
        ["train", "--family", "exhaustive", "-p", "m=2", "--rank", "0"],
        "model.rank: input should be greater than or equal to 1, got 0",
        False,
    ),
    (
        "flag-negative-lr",
        ["train", "--family", "exhaustive", "-p", "m=2", "--lr", "-1"],
        "train.lr: must be a finite number in (0, 1e+100]",
        True,
    ),
    (
        "flag-negative-steps",
        ["train", "--family", "exhaustive", "-p", "m=2", "--mse-steps", "-3"],
        "train.mse_steps: input should be greater than or equal to 0, got -3",
        False,
    ),
    (
        "flag-bad-readout",
        ["train", "--family", "exhaustive", "-p", "m=2", "--readout", "deep"],
        "model.readout: input should be 'linear' or 'mlp', got 'deep'",
        False,
    ),
    ("flag-unknown-family", ["train", "--family", "nonesuch"], "unknown family 'nonesuch'", False),
    ("flag-family-param", ["train", "--family", "exhaustive", "-p", "m"], "key=value", False),
    (
        "flag-workers-zero",
        ["sweep", "{w}/ok.toml", "--out", "{w}/new", "--workers", "0"],
        "--workers must be ≥ 1",
        False,
    ),
    (
        "flag-unknown-executor",
        ["sweep", "{w}/ok.toml", "--out", "{w}/new", "--executor", "dask"],
        "unknown executor 'dask'",
        False,
    ),
    ("flag-missing-out", ["sweep", "{w}/ok.toml"], "--out DIR is required", False),
    ("flag-bad-delta", ["certify", "{w}/good.json", "--delta", "3/4"], "delta must lie in (0, 1/2]", False),
    # -- sweep configs
    ("config-missing", ["sweep", "{w}/nope.toml", "--out", "{w}/new"], "does not exist", False),
    (
        "config-unknown-key",
        ["sweep", "{w}/unknown-key.toml", "--out", "{w}/new"],
        "train: unknown key 'learning_rate'",
        True,
    ),
    (
        "config-wrong-type",
        ["sweep", "{w}/wrong-type.toml", "--out", "{w}/new"],
        "train.mse_steps: input should be a valid integer, got 'two'",
        False,
    ),
    (
        "config-empty-grid",
        ["sweep", "{w}/empty-grid.toml", "--out", "{w}/new"],
        "grid.model.rank: the grid axis is empty",
        False,
    ),
    (
        "config-rank-zero",
        ["sweep", "{w}/rank-zero.toml", "--out", "{w}/new"],
        "model.rank: input should be greater than or equal to 1, got 0",
        False,
    ),
    (
        "config-zero-heads",
        ["sweep", "{w}/zero-heads.toml", "--out", "{w}/new"],
        "model.heads: input should be greater than or equal to 1, got 0",
        False,
    ),
    ("config-bad-toml", ["sweep", "{w}/bad-toml.toml", "--out", "{w}/new"], "not valid TOML", False),
    (
        "config-bad-dtype",
        ["sweep", "{w}/bad-dtype.toml", "--out", "{w}/new"],
        "train.dtype: input should be 'float32' or 'float64'",
        False,
    ),
    (
        "config-infinite-lr",
        ["sweep", "{w}/infinite-lr.toml", "--out", "{w}/new"],
        "train.lr: must be a finite number in (0, 1e+100], got inf",
        False,
    ),
    (
        "config-bad-readout",
        ["sweep", "{w}/bad-readout.toml", "--out", "{w}/new"],
        "model.readout: input should be 'linear' or 'mlp', got 'deep'",
        False,
    ),
    (
        "config-unknown-map",
        ["sweep", "{w}/unknown-map.toml", "--out", "{w}/new"],
        "unknown feature map 'cosine'",
        False,
    ),
    # -- family files
    ("family-bad-bits", ["certify", "{w}/bad-bits.json"], "has characters other than '0' and '1'", True),
    ("family-unequal-lengths", ["certify", "{w}/unequal.json"], "sequence 1 has length 2, the first has 3", False),
    ("family-wrong-bit-count", ["certify", "{w}/short-bits.json"], "has length 4, expected m = 8", False),
    ("family-not-json", ["certify", "{w}/not-json.json"], "is not valid JSON", False),
    ("family-huge-int", ["certify", "{w}/huge-int.json"], "is not usable JSON (Exceeds the limit", False),
    ("config-huge-int", ["sweep", "{w}/huge-int.toml", "--out", "{w}/new"], "not valid TOML (Exceeds the limit", False),
    (
        "config-profile-huge-int",
        ["reproduce", "--profile", "{w}/huge-profile", "--out", "{w}/new"],
        "profile.toml: not valid TOML (Exceeds the limit",
        False,
    ),
    ("family-missing", ["certify", "{w}/nope.json"], "does not exist", False),
    ("family-is-a-folder", ["certify", "{w}/family-folder.json"], "is a folder, not a file", False),
    ("family-missing-mixed-orders", ["certify", "{w}/one-order.json"], "are the mixed orders missing?", True),
    ("family-exists", ["family", "hadamard", "-p", "m=8", "--out", "{w}/good.json"], "--force", False),
    (
        "family-unwritable",
        ["family", "hadamard", "-p", "m=8", "--out", "{w}/a-file/fam.json"],
        "cannot write family file",
        False,
    ),
    # -- results folders
    ("results-other-sweep", ["sweep", "{w}/other-sweep.toml", "--out", "{w}/results"], "holds a different sweep", True),
    ("results-is-a-file", ["sweep", "{w}/ok.toml", "--out", "{w}/a-file"], "is a file, not a folder", False),
    (
        "results-under-a-file",
        ["sweep", "{w}/ok.toml", "--out", "{w}/a-file/results"],
        "cannot write to results folder",
        False,
    ),
    (
        "results-not-a-sweep",
        ["sweep", "{w}/ok.toml", "--out", "{w}/stranger"],
        "is not a kernelgap sweep folder",
        False,
    ),
    (
        "results-corrupt-meta",
        ["sweep", "{w}/ok.toml", "--out", "{w}/corrupt-meta"],
        "sweep.json is corrupted (not valid JSON)",
        False,
    ),
    (
        "results-meta-not-a-sweep",
        ["sweep", "{w}/ok.toml", "--out", "{w}/list-meta"],
        "sweep.json is corrupted (expected a JSON object, got list)",
        False,
    ),
    ("results-status-corrupt", ["sweep", "{w}/corrupt-meta", "--status"], "is corrupted", False),
    ("results-status-not-a-sweep", ["sweep", "{w}/stranger", "--status"], "no sweep.json", False),
    (
        "results-probe-corrupt",
        ["probe", EXAMPLE, "--ranks", "2", "--steps", "3", "--out", "{w}/probe-corrupt"],
        "probe.json is corrupted (not valid JSON)",
        False,
    ),
    (
        "results-probe-other-settings",
        ["probe", EXAMPLE, "--ranks", "2", "--steps", "3", "--out", "{w}/probe-other"],
        "holds a probe of another module or other settings",
        False,
    ),
]


def _argv(args: list[str], w: Path) -> list[str]:
    return [a.replace("{w}", str(w)) for a in args]


def _check(code: int, out: str, err: str, needle: str) -> None:
    lines = err.strip("\n").splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and err.endswith("\n"), err
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    assert "Traceback" not in out + err


@pytest.mark.parametrize("case, args, needle, _script", CASES, ids=[c[0] for c in CASES])
def test_bad_input_in_process(world, cli, case, args, needle, _script):
    before = tree_digest(world)
    code, out, err = cli(*_argv(args, world))
    _check(code, out, err, needle)
    assert tree_digest(world) == before, "existing files changed (or new ones appeared)"


SCRIPT_CASES = [c for c in CASES if c[3]]


@pytest.mark.slow
@pytest.mark.parametrize("case, args, needle, _script", SCRIPT_CASES, ids=[c[0] for c in SCRIPT_CASES])
def test_bad_input_through_the_console_script(world, case, args, needle, _script):
    before = tree_digest(world)
    proc = subprocess.run([KERNELGAP, *_argv(args, world)], capture_output=True, text=True)
    _check(proc.returncode, proc.stdout, proc.stderr, needle)
    assert tree_digest(world) == before


def test_there_are_enough_cases_in_every_area():
    areas = {c[0].split("-")[0] for c in CASES}
    assert areas == {"flag", "config", "family", "results"} and len(CASES) >= 12
    assert len({c[0] for c in CASES}) == len(CASES)
