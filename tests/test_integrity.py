"""Nothing damaged goes unnoticed: every artefact of a finished reproduction (a run record,
a checkpoint, a family copy, ``sweep.json``, ``summary.json``), damaged each way (cut in
half, deleted, one byte altered, replaced by a folder), is redone or refused by ``sweep
DIR``, reported by ``sweep DIR --status``, refused by ``report`` (a summary never counts
fewer runs than planned) and found by ``check``, which changes nothing."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest

from kernelgap.errors import KernelgapError
from kernelgap.reproduction.pipeline import reproduce
from kernelgap.sweeps import ResultsDir, load_sweep
from kernelgap.task import build_family, save_family
from test_bad_input import tree_digest

WITNESS = """name = "witness"
[family]
file = "fam.json"
[model]
kind = "kernel"
feature_map = "table"
[train]
mse_steps = 3
max_steps = 3
[grid]
model.rank = [1, 4]
seed = [0]
"""

ARTEFACTS = ["record", "checkpoint", "family", "sweep.json", "summary.json"]
DAMAGES = ["truncate", "delete", "alter", "folder"]
#: Where "alter" changes a character of a text file: the first letter or digit after this.
MARKERS = {"record": '"max_error": ', "sweep.json": '"fingerprint": "', "summary.json": '"certified_rank": '}


def tiny_reproduction(tmp_path_factory, ranks: str = "[1, 4]") -> tuple[Path, Path]:
    """``(profile, folder)``: a finished reproduction of one tiny sweep (model ranks
    ``ranks``) that trains from a family file, and the profile it ran."""
    profile = tmp_path_factory.mktemp("profile")
    (profile / "profile.toml").write_text('experiments = ["witness"]\n')
    (profile / "witness.toml").write_text(WITNESS.replace("[1, 4]", ranks))
    save_family(build_family("hadamard", m=8, n=3), profile / "fam.json")
    out = tmp_path_factory.mktemp("rep") / "rep"
    reproduce(profile, out, executor="inline", log=lambda *_: None)
    return profile, out


def finished_reproduction(tmp_path_factory) -> Path:
    """A finished reproduction of one tiny sweep that trains from a family file."""
    return tiny_reproduction(tmp_path_factory)[1]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return finished_reproduction(tmp_path_factory)


@pytest.fixture
def rep(pristine, tmp_path) -> Path:
    """A fresh copy of the finished reproduction."""
    return Path(shutil.copytree(pristine, tmp_path / "rep"))


def target(rep: Path, artefact: str) -> Path:
    sweep = rep / "witness"
    if artefact == "record":
        return sorted((sweep / "runs").glob("*.json"))[0]
    if artefact == "checkpoint":
        return next((sweep / "checkpoints").glob("*.pt"))
    if artefact == "family":
        return next((sweep / "families").glob("*.json"))
    return sweep / "sweep.json" if artefact == "sweep.json" else rep / "summary.json"


def damage(path: Path, artefact: str, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "delete":
        path.unlink()
    elif how == "folder":
        path.unlink()
        path.mkdir()
    elif artefact in MARKERS:
        text = data.decode()
        at = text.index(MARKERS[artefact]) + len(MARKERS[artefact])
        while not text[at].isalnum():
            at += 1
        swap = {"0": "1", "a": "b"}.get(text[at], "0" if text[at].isdigit() else "a")
        path.write_text(text[:at] + swap + text[at + 1 :])
    else:
        path.write_bytes(data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1 :])


def is_refusal(code: int, err: str) -> bool:
    lines = err.strip().splitlines()
    return code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err


#: Artefacts whose damage ``sweep DIR`` cannot redo (the sweep itself, its family file).
REFUSED_BY_SWEEP = {"family", "sweep.json"}


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("artefact", ARTEFACTS)
def test_check_finds_every_damage_and_changes_nothing(rep, cli, artefact, how):
    path = target(rep, artefact)
    damage(path, artefact, how)
    before = tree_digest(rep)
    code, out, err = cli("check", str(rep))
    assert tree_digest(rep) == before
    if artefact == "summary.json" and how == "delete":  # a report not built yet: nothing to compare
        assert code == 0 and "0 problem(s)" in out
        return
    assert is_refusal(code, err), (code, out, err)
    assert f"{path.relative_to(rep).as_posix()}:" in out or path.name in out, out


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("artefact", ARTEFACTS)
def test_report_refuses_damage_and_keeps_the_summary(rep, cli, artefact, how):
    path = target(rep, artefact)
    damage(path, artefact, how)
    summary = rep / "summary.json"
    kept = summary.read_bytes() if summary.is_file() else None
    code, out, err = cli("report", str(rep))
    if artefact == "summary.json" and how != "folder":  # an output, rebuilt from sound runs
        assert code == 0, err
        assert cli("check", str(rep))[0] == 0
        return
    assert is_refusal(code, err), (code, out, err)
    assert (path.name if artefact != "summary.json" else "summary.json") in err
    if artefact == "summary.json":
        assert summary.is_dir()  # left as it was
    else:
        assert summary.read_bytes() == kept  # never rewritten from fewer runs


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("artefact", ARTEFACTS)
def test_status_reports_and_sweep_redoes_or_refuses(rep, cli, artefact, how):
    path = target(rep, artefact)
    damage(path, artefact, how)
    folder = rep / "witness"
    code, out, err = cli("sweep", str(folder), "--status", "--json")
    if artefact == "sweep.json":
        assert is_refusal(code, err) and "sweep.json" in err
    else:
        status = json.loads(out)
        broken = {"record": 0 if how == "delete" else 1, "checkpoint": 2}.get(artefact, 0)
        assert status["corrupt"] == broken and status["done"] == 2 - broken - (artefact == "record" and how == "delete")
        if broken:
            assert all(path.name in why for why in status["damage"].values())
        if artefact == "family":
            assert len(status["family_damage"]) == 1 and path.name in status["family_damage"][0]
    code, out, err = cli("sweep", str(folder), "--executor", "inline", "--json")
    if artefact in REFUSED_BY_SWEEP:
        assert is_refusal(code, err) and path.name in err, err
        return
    assert code == 0, err
    summary = json.loads(out)
    if artefact in ("record", "checkpoint") and how != "delete" or artefact == "checkpoint":
        assert len(summary["set_aside"]) == broken and summary["ran"] == broken
        assert all(path.name in why for why in summary["damage"].values())
        if how != "delete":  # the damaged file is renamed aside, never deleted
            assert list(path.parent.glob(f"{path.name}.corrupt-*"))
    assert summary["left"] == 0
    assert cli("check", str(folder))[0] == 0  # whole again


def test_records_name_their_checkpoint_by_sha256_and_size(pristine):
    import hashlib

    for path in (pristine / "witness" / "runs").glob("*.json"):
        where = json.loads(path.read_text())["checkpoint"]
        data = (pristine / "witness" / where["file"]).read_bytes()
        assert where["sha256"] == hashlib.sha256(data).hexdigest() and where["bytes"] == len(data)


def test_records_written_before_checksums_stay_valid(rep, cli):
    folder = rep / "witness"
    for path in (folder / "runs").glob("*.json"):
        record = json.loads(path.read_text())
        del record["record_sha256"], record["checkpoint"]["sha256"], record["checkpoint"]["bytes"]
        path.write_text(json.dumps(record))
    code, out, _ = cli("check", str(rep))
    assert code == 0 and "written without a sha256: present only" in out
    code, out, _ = cli("sweep", str(folder), "--executor", "inline", "--json")
    assert code == 0 and json.loads(out)["ran"] == 0
    next((folder / "checkpoints").glob("*.pt")).unlink()  # a missing one is still missing
    assert json.loads(cli("sweep", str(folder), "--status", "--json")[1])["corrupt"] == 2


def test_a_checkpoint_is_never_replaced_by_other_bytes(rep):
    store = ResultsDir(rep / "witness")
    existing = next(store.root.glob("checkpoints/*.pt"))
    kept = existing.read_bytes()
    relative = existing.relative_to(store.root).as_posix()
    assert store.write_checkpoint(relative, kept) == relative
    other = store.write_checkpoint(relative, b"other weights")
    assert other != relative and (store.root / other).read_bytes() == b"other weights"
    assert existing.read_bytes() == kept


def test_the_precision_step_verifies_a_checkpoint_before_loading_it(rep):
    from kernelgap.experiments.precision.step import quantized_runs

    folder = rep / "witness"
    runs = load_sweep(folder / "sweep.toml", ResultsDir(folder).family_copies()).runs()
    path = target(rep, "checkpoint")
    damage(path, "checkpoint", "alter")
    with pytest.raises(KernelgapError, match=rf"{path.name} with sha256 .* \(altered\)"):
        quantized_runs(folder, runs, [4], ["uniform"])


@pytest.mark.parametrize("value", [["fam.json"], "fam.json", 3, {"fam.json": 3}, {"fam.json": "not-a-sha"}])
def test_a_sweep_json_with_family_files_of_the_wrong_type_is_corrupted(rep, cli, value):
    path = rep / "witness" / "sweep.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps({**meta, "family_files": value}))
    for argv in (["sweep", str(path.parent)], ["sweep", str(path.parent), "--status"], ["report", str(rep)]):
        code, _, err = cli(*argv)
        assert is_refusal(code, err) and "sweep.json" in err and "corrupted" in err, (argv, err)


def test_a_run_record_that_is_a_folder_is_set_aside(rep, cli):
    path = target(rep, "record")
    damage(path, "record", "folder")
    (path / "inside").write_text("kept")
    code, out, err = cli("sweep", str(rep / "witness"), "--executor", "inline", "--json")
    assert code == 0, err
    assert json.loads(out)["set_aside"] == [path.stem]
    (aside,) = path.parent.glob(f"{path.name}.corrupt-*")
    assert (aside / "inside").read_text() == "kept" and path.is_file()


def test_report_on_a_read_only_folder_is_one_line_and_loses_nothing(rep, cli, monkeypatch):
    before = tree_digest(rep)

    def read_only(self, *_args, **_kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "write_bytes", read_only)
    code, _, err = cli("report", str(rep))
    assert is_refusal(code, err) and "Read-only file system" in err
    assert tree_digest(rep) == before


def test_check_refuses_what_is_not_a_results_folder(tmp_path, cli):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    for folder, why in (("empty", "holds no sweep folder"), ("file", "is a file"), ("gone", "does not exist")):
        code, _, err = cli("check", str(tmp_path / folder))
        assert is_refusal(code, err) and why in err


@pytest.mark.parametrize("file", ["../outside.pt", "/tmp/outside.pt", 3, None])
def test_a_record_naming_a_checkpoint_outside_its_folder_is_set_aside_alone(rep, cli, file):
    from kernelgap.io import record_digest

    outside = rep / "outside.pt"
    outside.write_bytes(b"not ours")
    path = target(rep, "record")
    record = json.loads(path.read_text())
    record["checkpoint"]["file"] = file
    record["record_sha256"] = record_digest(record)
    path.write_text(json.dumps(record))
    status = json.loads(cli("sweep", str(rep / "witness"), "--status", "--json")[1])
    (why,) = status["damage"].values()
    assert list(status["damage"]) == [path.stem] and why.startswith(f"runs/{path.name} names no valid checkpoint file")
    assert "checkpoint" in why.split("(", 1)[1] and repr(file) in why  # the key and the value
    code, out, err = cli("sweep", str(rep / "witness"), "--executor", "inline", "--json")
    assert code == 0 and json.loads(out)["set_aside"] == [path.stem], err
    assert outside.read_bytes() == b"not ours"


def test_status_and_check_say_what_is_wrong_in_words(rep, cli):
    record, summary = target(rep, "record"), rep / "summary.json"
    damage(record, "record", "truncate")
    damage(summary, "summary.json", "alter")
    code, out, _ = cli("sweep", str(rep / "witness"), "--status")
    assert code == 0 and f"corrupted: runs/{record.name} is corrupted (not valid JSON)" in out
    code, out, err = cli("check", str(rep))
    assert f"witness/runs/{record.name}: is corrupted (not valid JSON)" in out
    assert "summary.json: 'witness' is not what the result files give" in out  # and what the cut record changes
    assert out.strip().splitlines()[-1].startswith(f"{rep}: 6 problem(s)")
    assert err.strip() == f"error: {rep}: 6 problem(s) found; nothing was changed"


def test_a_record_that_lost_its_checksum_key_is_altered(rep, cli):
    # a renamed key (one flipped byte in "record_sha256") must not pass for a record written
    # before checksums: those named no checkpoint sha256 either
    path = target(rep, "record")
    path.write_text(path.read_text().replace('"record_sha256"', '"record_sha25G"'))
    code, out, _ = cli("check", str(rep))
    assert code == 2 and f"runs/{path.name}: was altered (it names its checkpoint's sha256 but has no" in out
    status = json.loads(cli("sweep", str(rep / "witness"), "--status", "--json")[1])
    assert path.stem in status["damage"]


@pytest.mark.parametrize("key", ['"heads"', '"feature_map"', '"max_error"'])
def test_a_record_with_a_renamed_key_is_named_not_read(rep, cli, key):
    # the summary rebuilt by `check` reads records through the same reader as the report:
    # an altered one is skipped there and named, never parsed into a row
    path = target(rep, "record")
    path.write_text(path.read_text().replace(key, key[:-2] + 'Q"', 1))
    code, out, err = cli("check", str(rep))
    assert code == 2 and f"runs/{path.name}: was altered" in out and "Traceback" not in out + err


@pytest.mark.parametrize(
    "edit, line",
    [
        ({"runs": ["../x"]}, "is corrupted (runs.0: '../x' is not a run id)"),
        ({"family_files": {"fam.json": "abc"}}, "is corrupted (family_files.fam.json: 'abc' is not a sha256)"),
        ({"toml_sha256": None}, "is corrupted (toml_sha256: None is not a sha256)"),
        ({"colour": 1}, "is corrupted (colour: extra inputs are not permitted, got 1)"),
        ({"fingerprint": "0" * 16}, "was altered (its fingerprint is not the hash of its run ids)"),
        ({"name": "other"}, "was altered (its content does not match its record_sha256)"),
    ],
)
def test_a_damaged_sweep_json_is_one_line_naming_the_key(pristine, tmp_path, edit, line):
    from kernelgap.report.integrity import read_sweep_meta

    meta = json.loads((pristine / "witness" / "sweep.json").read_text())
    (tmp_path / "sweep.json").write_text(json.dumps({**meta, **edit}))
    assert read_sweep_meta(tmp_path) == (None, line)
    assert read_sweep_meta(pristine / "witness")[0].runs == meta["runs"]


@pytest.mark.parametrize(
    "edit, line",
    [
        ({"steps": "3"}, "is corrupted (steps: input should be a valid integer, got '3')"),
        ({"train": {}}, "is corrupted (train.max_error: field required)"),
        ({"id": "0" * 16}, "is corrupted (its id is '0000000000000000')"),
        ({"curve": None}, "was altered (its content does not match its record_sha256)"),
    ],
)
def test_a_damaged_record_is_one_line_naming_the_key(pristine, edit, line):
    from kernelgap.report.integrity import record_fault

    path = target(pristine, "record")
    record = json.loads(path.read_text())
    assert record_fault(record, path.stem) is None
    assert record_fault({**record, **edit}, path.stem) == line
