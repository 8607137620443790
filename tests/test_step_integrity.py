"""Every file a report is built from is verified as a run record is: a step's file
(``certificate.json``), ``sweep.toml``, ``probe.json``, a probe's ``summary.json`` and every
record in ``runs/`` (one of another sweep copied in too).  Damaged any way (cut, one value
flipped, deleted), ``report`` refuses in one line and keeps the summary, or rebuilds it as it
was; ``check`` names the damage exactly when ``report`` refuses; ``sweep DIR --status`` names
what lies in a sweep folder; a resumed ``reproduce`` redoes a damaged step file."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from kernelgap.io import record_digest
from kernelgap.reproduction.pipeline import reproduce
from kernelgap.training import config_hash, run_identity
from test_integrity import WITNESS, is_refusal, tiny_reproduction

PROBE = "kernelgap.probe.examples:DecayedLinearAttention"
#: Where a flip changes one character: the first letter or digit after this text.
MARKERS = {
    "certificate.json": '"certified_rank": ',
    "sweep.toml": "max_steps = ",
    "probe.json": '"certified_rank": ',
    "summary.json": '"certified_rank": ',
    "reproduce.json": '"profile": "',
}
HOWS = ["truncate", "flip", "delete"]


def damage(path: Path, how: str) -> None:
    """Cut ``path`` in half, change one character of a value (the file stays parseable), or delete it."""
    if how == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "delete":
        path.unlink()
    else:
        text = path.read_text()
        at = text.index(MARKERS[path.name]) + len(MARKERS[path.name])
        while not text[at].isalnum():
            at += 1
        swap = {"1": "2", "a": "b"}.get(text[at], "1" if text[at].isdigit() else "a")  # still JSON
        path.write_text(text[:at] + swap + text[at + 1 :])


def run_cli(*args: str) -> int:
    from kernelgap.cli import main

    try:
        main(list(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path]:
    """``(profile, finished reproduction)`` of one tiny witness sweep and its certificate step."""
    return tiny_reproduction(tmp_path_factory)


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> Path:
    """A finished probe folder (two suites, one rank each, three steps) with its report."""
    out = tmp_path_factory.mktemp("probe") / "probe"
    argv = ["probe", PROBE, "--ranks", "witness=2", "--ranks", "ood-n4=2", "--steps", "3", "--out", str(out)]
    assert run_cli(*argv, "--executor", "inline") == 0
    return out


@pytest.fixture
def rep(made, tmp_path) -> Path:
    return Path(shutil.copytree(made[1], tmp_path / "rep"))


@pytest.fixture
def probe_dir(probed, tmp_path) -> Path:
    return Path(shutil.copytree(probed, tmp_path / "probe"))


def summary_of(folder: Path):
    path = folder / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("file", ["witness/certificate.json", "witness/sweep.toml"])
def test_report_refuses_a_damaged_step_or_sweep_file_and_check_names_it(rep, cli, file, how):
    path = rep / file
    damage(path, how)
    kept = (rep / "summary.json").read_bytes()
    code, _, err = cli("report", str(rep))
    assert is_refusal(code, err) and path.name in err, (code, err)
    assert (rep / "summary.json").read_bytes() == kept
    code, out, err = cli("check", str(rep))
    assert is_refusal(code, err) and f"{file}:" in out, out
    if path.name == "sweep.toml":
        status = json.loads(cli("sweep", str(rep / "witness"), "--status", "--json")[1])
        assert any(line.startswith("sweep.toml: ") for line in status["file_damage"]), status
        code, _, err = cli("sweep", str(rep / "witness"), "--executor", "inline")
        assert is_refusal(code, err) and "sweep.toml" in err


def test_a_sweep_file_is_restored_from_the_one_the_folder_was_made_with(made, rep, cli):
    profile, _ = made
    damage(rep / "witness" / "sweep.toml", "flip")
    code, _, err = cli("sweep", str(profile / "witness.toml"), "--out", str(rep / "witness"), "--executor", "inline")
    assert code == 0, err
    assert (rep / "witness" / "sweep.toml").read_text() == WITNESS
    assert list((rep / "witness").glob("sweep.toml.corrupt-*"))  # renamed aside, never deleted
    assert cli("check", str(rep))[0] == 0


@pytest.mark.parametrize("how", HOWS)
def test_a_damaged_probe_record_is_refused_by_report_and_check(probe_dir, cli, how):
    damage(probe_dir / "probe.json", how)
    kept = (probe_dir / "summary.json").read_bytes()
    code, _, err = cli("report", str(probe_dir))
    assert is_refusal(code, err), (code, err)
    assert (probe_dir / "summary.json").read_bytes() == kept
    code, out, err = cli("check", str(probe_dir))
    assert is_refusal(code, err), out
    assert "probe.json:" in out or how == "delete"  # without it, no probe summary can be rebuilt
    assert "summary.json:" in out or how != "delete"


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_an_edited_probe_summary_is_named_by_check_and_rebuilt_by_report(probed, probe_dir, cli, how):
    damage(probe_dir / "summary.json", how)
    code, out, err = cli("check", str(probe_dir))
    assert is_refusal(code, err) and "summary.json:" in out, out
    code, _, err = cli("report", str(probe_dir))
    assert code == 0, err
    assert summary_of(probe_dir) == summary_of(probed)
    assert cli("check", str(probe_dir))[0] == 0


def foreign_record(rep: Path, probed: Path) -> Path:
    """A run record of the probe's baseline sweep, copied into the reproduction's witness sweep."""
    record = sorted((probed / "baseline").glob("witness-*/runs/*.json"))[0]
    return Path(shutil.copy(record, rep / "witness" / "runs" / record.name))


def extra_run(rep: Path) -> Path:
    """A sound record of a run the witness sweep does not plan (another seed), written beside its runs."""
    record = json.loads(sorted((rep / "witness" / "runs").glob("*.json"))[0].read_text())
    record["config"]["seed"] = 7
    record["id"] = config_hash(run_identity(record["config"]))
    record["record_sha256"] = record_digest(record)
    path = rep / "witness" / "runs" / f"{record['id']}.json"
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize("make", ["foreign", "extra"])
def test_a_record_the_sweep_does_not_plan_is_never_counted(made, probed, rep, cli, make):
    path = foreign_record(rep, probed) if make == "foreign" else extra_run(rep)
    kept = (rep / "summary.json").read_bytes()
    code, _, err = cli("report", str(rep))
    assert is_refusal(code, err) and path.name in err, (code, err)
    assert (rep / "summary.json").read_bytes() == kept
    code, out, _ = cli("check", str(rep))
    assert code == 2 and f"witness/runs/{path.name}: is not a run of this sweep" in out
    status = json.loads(cli("sweep", str(rep / "witness"), "--status", "--json")[1])
    assert [line.split(":")[0] for line in status["file_damage"]] == [f"runs/{path.name}"]
    code, _, err = cli("sweep", str(rep / "witness"), "--executor", "inline")
    assert code == 0 and not path.exists() and list(path.parent.glob(f"{path.name}.corrupt-*")), err
    assert cli("check", str(rep))[0] == 0 and cli("report", str(rep))[0] == 0
    assert summary_of(rep) == summary_of(made[1])


def test_a_record_whose_config_is_not_its_id_is_refused_by_report(rep, cli):
    path = sorted((rep / "witness" / "runs").glob("*.json"))[0]
    record = json.loads(path.read_text())
    record["config"]["seed"] = 7  # another run's config under this run's id, its checksum made anew
    record["record_sha256"] = record_digest(record)
    path.write_text(json.dumps(record))
    kept = (rep / "summary.json").read_bytes()
    code, _, err = cli("report", str(rep))
    assert is_refusal(code, err) and path.name in err and "does not hash to its id" in err
    assert (rep / "summary.json").read_bytes() == kept
    assert cli("check", str(rep))[0] == 2


@pytest.mark.parametrize("how", HOWS)
def test_a_resumed_reproduction_redoes_a_damaged_step_file(made, rep, how):
    from kernelgap.report.integrity import sealed_problem

    profile, pristine = made
    path = rep / "witness" / "certificate.json"
    damage(path, how)
    reproduce(profile, rep, executor="inline", log=lambda *_: None)
    assert sealed_problem(path) is None
    was = json.loads((pristine / "witness" / "certificate.json").read_text())
    assert json.loads(path.read_text())["certified_rank"] == was["certified_rank"]
    assert bool(list(path.parent.glob("certificate.json.corrupt-*"))) == (how != "delete")
    now, then = summary_of(rep)["witness"], summary_of(pristine)["witness"]
    assert now.pop("certificate")["certified_rank"] == then.pop("certificate")["certified_rank"] == 2
    assert now == then  # (the certificate's search times differ)


def test_step_files_carry_their_checksum(made, probed):
    from kernelgap.report.integrity import sealed_problem

    _, pristine = made
    assert sealed_problem(pristine / "witness" / "certificate.json") is None
    assert sealed_problem(probed / "probe.json") is None
    meta = json.loads((pristine / "witness" / "sweep.json").read_text())
    sha = hashlib.sha256((pristine / "witness" / "sweep.toml").read_bytes()).hexdigest()
    assert meta["toml_sha256"] == sha


#: Damage to the files a report is built from: ``(file, how)``; ``None``: none.
INPUTS = [
    *[(f, how) for f in ("witness/certificate.json", "witness/sweep.toml") for how in HOWS],
    ("witness/sweep.json", "truncate"),
    ("witness/record", "truncate"),
    ("witness/record", "delete"),
    ("witness/checkpoint", "truncate"),
    ("witness/foreign", "copy"),
    ("reproduce.json", "flip"),
    ("reproduce.json", "truncate"),
    ("summary.json", "flip"),
    ("summary.json", "truncate"),
    ("summary.json", "delete"),
    (None, None),
]


def apply(rep: Path, probed: Path, file: str | None, how: str | None) -> None:
    if file == "witness/foreign":
        foreign_record(rep, probed)
    elif file == "witness/record":
        damage(sorted((rep / "witness" / "runs").glob("*.json"))[0], how)
    elif file == "witness/checkpoint":
        damage(next((rep / "witness" / "checkpoints").glob("*.pt")), how)
    elif file is not None:
        damage(rep / file, how)


@pytest.mark.parametrize(("file", "how"), INPUTS)
def test_check_fails_exactly_when_report_refuses(made, probed, rep, cli, file, how):
    apply(rep, probed, file, how)
    checked = cli("check", str(rep))[0]
    status = cli("sweep", str(rep / "witness"), "--status", "--json")
    code, _, err = cli("report", str(rep))
    assert code in (0, 2) and (code == 0 or is_refusal(code, err)), err
    if file != "summary.json":  # an output: report rebuilds it (check names the edit)
        assert (checked != 0) == (code != 0), (checked, code, err)
    if code == 0:  # never published from damage: the summary is the sound folder's
        assert summary_of(rep) == summary_of(made[1])
    if file is not None and file.startswith("witness/") and file != "witness/certificate.json":
        flagged = status[0] != 0 or any(json.loads(status[1])[k] for k in ("damage", "family_damage", "file_damage"))
        assert flagged or (file == "witness/record" and how == "delete"), status  # a missing run is left, not damage


@pytest.mark.parametrize("how", ["none", "truncate", "unsealed"])
def test_a_skipped_probe_note_is_sealed_and_checked(rep, how):
    """A profile's probe whose library is missing leaves a sealed ``skipped.json``, read back
    by the probe section; cut, or without its checksum in a folder whose files carry one, it
    is named by the check behind ``report`` and ``check``."""
    from kernelgap.experiments.probe.section import probes_section
    from kernelgap.report.integrity import sealed
    from kernelgap.reproduction.report import step_problems

    note = {"name": "lib", "target": "lib:Attention", "why": "lib is not installed"}
    path = rep / "probe" / "lib" / "skipped.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(note if how == "unsealed" else sealed(note)))
    if how == "truncate":
        path.write_bytes(path.read_bytes()[:20])
    problems = [p for p in step_problems(rep) if p.startswith("probe/lib/skipped.json")]
    if how == "none":
        assert problems == []
        assert probes_section(rep / "probe") == [{"name": "lib", "target": "lib:Attention", "skipped": note["why"]}]
    else:
        assert len(problems) == 1, step_problems(rep)
