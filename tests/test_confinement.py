"""Names read from files stay inside their folder: an experiment of ``profile.toml`` or a
probe's name (each a folder of ``--out``) is one plain name, and the folders ``probe.json``
names lie inside the probe folder.  An escaping name is refused in one line before any
file is written anywhere (the parent of every folder involved is hashed before and after)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelgap.errors import ConfigError, KernelgapError
from kernelgap.experiments.probe.section import read_probe_meta
from kernelgap.io import confined, plain_name
from test_bad_input import EXAMPLE, TINY, tree_digest

ESCAPES = ["../other/witness", "..", ".", "a/b", "/tmp/x", "a\\b", "x\0y", "", "x" * 256]


@pytest.mark.parametrize("name", ESCAPES)
def test_plain_name_refuses_anything_but_one_folder_name(name):
    with pytest.raises(KernelgapError, match="is not a plain name"):
        plain_name(name, "experiment", KernelgapError)


@pytest.mark.parametrize("name", ["witness", "ood-n4", "my probe", "v1.2", "é" * 100])
def test_plain_names_pass(name):
    assert plain_name(name, "experiment", KernelgapError) == name


def test_confined_refuses_what_leads_out(tmp_path):
    (tmp_path / "folder" / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "folder" / "link").symlink_to(tmp_path / "outside")
    folder = tmp_path / "folder"
    assert confined(folder, "sub", "runs", KernelgapError) == folder / "sub"
    assert confined(folder, "sub/new", "runs", KernelgapError) == folder / "sub" / "new"
    for name in ("../outside", "sub/../../outside", "link", str(tmp_path / "outside")):
        with pytest.raises(KernelgapError, match="runs"):
            confined(folder, name, "runs", KernelgapError)


@pytest.fixture
def world(tmp_path) -> Path:
    """A profile folder beside another folder holding a sweep file an escape would find."""
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "witness.toml").write_text(TINY)
    (tmp_path / "prof").mkdir()
    return tmp_path


def assert_refused_untouched(cli, world: Path, argv: list[str], words: str) -> None:
    before = tree_digest(world)
    code, out, err = cli(*map(str, argv))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and words in err, err
    assert "Traceback" not in out + err
    assert tree_digest(world) == before  # nothing written, inside --out or outside it


@pytest.mark.parametrize("name", ["../other/witness", "../other", ".", "sub/witness"])
def test_a_profile_experiment_cannot_lead_out_of_out(cli, world, name):
    """``experiments = ["../other/witness"]`` once trained 3 runs in ``other/`` before failing."""
    (world / "prof" / "profile.toml").write_text(f"experiments = {json.dumps([name])}\n")
    (world / "prof" / "sub").mkdir()
    (world / "prof" / "sub" / "witness.toml").write_text(TINY)
    argv = ["reproduce", "--profile", world / "prof", "--out", world / "prof" / "out", "--executor", "inline"]
    assert_refused_untouched(cli, world, argv, f"experiment {name!r} is not a plain name")


@pytest.mark.parametrize("name", ["../../x", "..", "a/b"])
def test_a_probe_name_cannot_lead_out_of_out(cli, world, name):
    """A ``[[probes]]`` name is the folder ``probe/<name>/`` of the results."""
    (world / "prof" / "profile.toml").write_text(
        f'experiments = ["probe"]\n[[probes]]\nname = {json.dumps(name)}\ntarget = "{EXAMPLE}"\n'
    )
    argv = ["reproduce", "--profile", world / "prof", "--out", world / "prof" / "out", "--executor", "inline"]
    assert_refused_untouched(cli, world, argv, f"probes[0].name {name!r} is not a plain name")


def probe_record(**suite) -> dict:
    return {"target": "m.py:C", "runs": "runs-x", "suites": [{"name": "w", "family": "witness", "params": {}, **suite}]}


@pytest.mark.parametrize(
    "record, key",
    [
        ({**probe_record(), "runs": "../../elsewhere"}, "runs"),
        ({**probe_record(), "runs": "/tmp"}, "runs"),
        (probe_record(folder="../../elsewhere"), "suites[0].folder"),
        (probe_record(recipe_folder="../x"), "suites[0].recipe_folder"),
        (probe_record(baseline_folder="../../x"), "suites[0].baseline_folder"),
        (probe_record(twin_folder="/etc"), "suites[0].twin_folder"),
    ],
)
def test_probe_json_names_only_folders_inside_it(tmp_path, record, key):
    (tmp_path / "probe.json").write_text(json.dumps(record))
    with pytest.raises(ConfigError) as info:
        read_probe_meta(tmp_path)
    assert f"probe.json: {key} " in str(info.value) and "\n" not in str(info.value), info.value


def test_a_probe_json_with_its_own_folders_is_read(tmp_path):
    """A baseline folder shared by several probes may lie beside the probe folder."""
    record = {**probe_record(folder="w-1", baseline_folder="w-2", twin_folder="t"), "baseline_dir": "../shared"}
    (tmp_path / "probe.json").write_text(json.dumps(record))
    assert read_probe_meta(tmp_path)["runs"] == "runs-x"
