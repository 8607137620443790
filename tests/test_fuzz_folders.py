"""Fuzzing a week of results in one folder (hypothesis): links into and out of a finished
reproduction, commands aimed at it by mistake and refused, damaged step files and records
copied in from another sweep.  The contract each example checks:

- a link never carries a write out of the folder: every file outside it (the link's target)
  hashes the same after the command, whatever it printed;
- a refused command leaves every earlier result as it was (the whole tree hashed before and
  after) and says one line ``error: …`` with status 2;
- ``report`` never publishes from damage: where ``check`` calls a folder damaged, ``report``
  refuses, or rebuilds a summary equal to the pristine one; and ``check`` finds everything
  ``report`` refuses.

The CLI runs in-process (``test_fuzz_cli.run_cli``); examples are bounded and not shrunk.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from test_bad_input import tree_digest
from test_fuzz_cli import EXAMPLES, FUZZ, assert_refused, damage_file, run_cli
from test_integrity import WITNESS, finished_reproduction, tiny_reproduction

pytestmark = pytest.mark.slow

_counter = iter(range(10**9))
#: Half the examples of the other fuzz tests: each copies a finished reproduction.
FOLDERS = settings(FUZZ, max_examples=max(8, EXAMPLES // 2))


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("folders")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A finished tiny reproduction (one sweep of two runs trained from a family file)."""
    return finished_reproduction(tmp_path_factory)


@pytest.fixture(scope="module")
def stranger(tmp_path_factory) -> Path:
    """Another finished reproduction, its sweep of other ranks: the source of foreign records."""
    return tiny_reproduction(tmp_path_factory, "[2, 3]")[1]


def copy_of(pristine: Path, world: Path, what: str) -> Path:
    return Path(shutil.copytree(pristine, world / f"{next(_counter)}-{what}" / "rep"))


def outcome(code: int, out: str, err: str, argv) -> str:
    shown = f"kernelgap {' '.join(map(str, argv))}\nexit {code}\nstdout: {out[-600:]}\nstderr: {err[-1500:]}"
    assert "Traceback" not in out + err, shown
    assert code in (0, 2), shown
    if code == 2:
        lines = err.strip("\n").splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), shown
    return shown


# -- links: nothing written through them ----------------------------------------------------

#: Where a link may sit in a finished reproduction and the command that would write there:
#: ``(place, kinds of link, command)``.  ``sweep`` first loses one record, so that it redoes a
#: run (claims its lock, writes its record and checkpoint).
LINK_PLACES = {
    "lock": (["symlink", "hardlink", "folder"], "sweep"),
    "checkpoints": (["dir-symlink"], "sweep"),
    "runs": (["dir-symlink"], "sweep"),
    "locks": (["dir-symlink"], "sweep"),
    "record": (["symlink", "hardlink"], "sweep"),
    "summary.json": (["symlink", "hardlink"], "report"),
    "report.html": (["symlink", "hardlink"], "report"),
    "figures": (["dir-symlink"], "report"),
    "results.csv": (["symlink", "hardlink"], "sweep"),
}


@st.composite
def link_case(draw) -> tuple[str, str]:
    place = draw(st.sampled_from(sorted(LINK_PLACES)))
    return place, draw(st.sampled_from(LINK_PLACES[place][0]))


def plant_link(rep: Path, outside: Path, place: str, kind: str) -> list[str]:
    """Put a link of ``kind`` at ``place`` (its target in ``outside``); the command to run."""
    sweep = rep / "witness"
    redo = sorted((sweep / "runs").glob("*.json"))[-1]
    run_id = redo.name.removesuffix(".json")
    command = LINK_PLACES[place][1]
    if command == "sweep":
        redo.unlink()
    victim = outside / "victim.json"
    victim.write_text('{"an": "earlier result"}\n')
    if kind == "dir-symlink":
        inside = {"checkpoints": sweep / "checkpoints", "runs": sweep / "runs", "locks": sweep / "locks"}.get(
            place, rep / place
        )
        inside.mkdir(exist_ok=True)
        shutil.move(inside, outside / place)
        inside.symlink_to(outside / place, target_is_directory=True)
    else:
        path = {
            "lock": sweep / "locks" / f"{run_id}.lock",
            "record": redo,
            "results.csv": sweep / "results.csv",
        }.get(place, rep / place)
        path.parent.mkdir(exist_ok=True)
        path.unlink(missing_ok=True)
        if kind == "symlink":
            path.symlink_to(victim)
        elif kind == "hardlink":
            os.link(victim, path)
        else:
            path.mkdir()
    return [command, sweep] if command == "sweep" else [command, rep]


@given(link_case())
@FOLDERS
def test_fuzz_links(world, pristine, case):
    place, kind = case
    rep = copy_of(pristine, world, "links")
    outside = rep.parent / "outside"
    outside.mkdir()
    argv = plant_link(rep, outside, place, kind)
    before = tree_digest(outside)
    code, out, err = run_cli([*argv, "--executor", "inline"] if argv[0] == "sweep" else argv, world)
    shown = outcome(code, out, err, argv)
    assert tree_digest(outside) == before, f"{place} {kind}: a file outside the folder changed\n{shown}"


# -- refused commands aimed at an earlier result ---------------------------------------------

BAD_REPRODUCE_FLAGS = [
    ["--workers", "0"],
    ["--workers", "-3"],
    ["--workers", str(10**30)],
    ["--executor", "nope"],
    ["--executor", ""],
    ["--address", "nowhere:1", "--executor", "inline"],
    ["--profile", "no-such-profile"],
]


@st.composite
def misaimed(draw, rep: Path, world: Path) -> list:
    """A command that must be refused on ``rep`` without touching it."""
    kind = draw(st.sampled_from(["reproduce", "probe", "bound-curve", "sweep"]))
    if kind == "reproduce":
        return ["reproduce", "--out", rep, *draw(st.sampled_from(BAD_REPRODUCE_FLAGS))]
    if kind == "probe":
        out = draw(st.sampled_from([rep, rep / "witness"]))
        return [
            "probe",
            "kernelgap.probe.examples:DecayedLinearAttention",
            "--ranks",
            "2",
            "--steps",
            "2",
            "--out",
            out,
        ]
    if kind == "bound-curve":
        out = draw(st.sampled_from([rep, rep / "witness"]))
        return ["bound-curve", "--code", "ladder", "--m", "32", "--out", out]
    toml = world / f"{next(_counter)}-other.toml"
    toml.write_text(WITNESS.replace('file = "fam.json"', 'name = "witness"').replace("[1, 4]", "[1, 5]"))
    return ["sweep", toml, "--out", rep / "witness", "--executor", "inline"]


@given(st.data())
@FOLDERS
def test_fuzz_refused_commands_change_nothing(world, pristine, data):
    rep = copy_of(pristine, world, "aimed")
    assert_refused(rep.parent, data.draw(misaimed(rep, world)))


# -- damaged step files and foreign records: report never publishes from damage --------------

#: Step files and records of a finished reproduction (relative globs) a damage may hit.
STEP_FILES = [
    "witness/certificate.json",
    "witness/sweep.toml",
    "witness/sweep.json",
    "witness/runs/*.json",
    "witness/families/*.json",
    "reproduce.json",
]
#: Outputs ``report`` rebuilds from the rest.
OUTPUTS = ["summary.json", "report.html", "witness/results.csv"]


def check_then_report(world: Path, rep: Path, pristine: Path) -> None:
    """``check`` exits 2 exactly when the folder is damaged; ``report`` then refuses, or
    rebuilds the pristine summary; where ``check`` passes, ``report`` passes too."""
    code_check, out, err = run_cli(["check", rep], world)
    shown_check = outcome(code_check, out, err, ["check", rep])
    code_report, out, err = run_cli(["report", rep], world)
    shown = shown_check + "\n---\n" + outcome(code_report, out, err, ["report", rep])
    if code_check == 0:
        assert code_report == 0, "check passed a folder report refuses\n" + shown
    if code_report == 0:
        summary = json.loads((rep / "summary.json").read_text())
        assert summary == json.loads((pristine / "summary.json").read_text()), (
            "report published a changed summary\n" + shown
        )
        code_after, out, err = run_cli(["check", rep], world)
        assert code_after == 0, "check refuses what report just wrote\n" + outcome(code_after, out, err, ["check", rep])


@st.composite
def step_damage(draw) -> tuple[str, str, object]:
    from test_fuzz_cli import folder_damage

    _, kind, arg = draw(folder_damage())
    return draw(st.sampled_from(STEP_FILES + OUTPUTS)), kind, arg


@given(step_damage())
@FOLDERS
def test_fuzz_damaged_step_files(world, pristine, case):
    artefact, kind, arg = case
    rep = copy_of(pristine, world, "damaged")
    assume(damage_file(sorted(rep.glob(artefact))[0], kind, arg))
    check_then_report(world, rep, pristine)


@given(st.sampled_from(["copy", "foreign", "foreign-renamed"]))
@FOLDERS
def test_fuzz_foreign_records(world, pristine, stranger, how):
    """A record copied under another run's name, or in from another sweep: never counted."""
    rep = copy_of(pristine, world, "foreign")
    runs = rep / "witness" / "runs"
    if how == "copy":
        first = sorted(runs.glob("*.json"))[0]
        shutil.copy(first, runs / "0123456789abcdef.json")
    else:
        source = sorted((stranger / "witness" / "runs").glob("*.json"))[0]
        name = "fedcba9876543210.json" if how == "foreign-renamed" else source.name
        shutil.copy(source, runs / name)
    check_then_report(world, rep, pristine)
