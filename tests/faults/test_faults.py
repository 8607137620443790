"""Faults a long sweep meets: SIGKILL at random points, corrupted results,
two sweeps on one folder, stale locks, an unwritable results folder.

Every sweep here runs in a process of its own, through the real console script where it is
killed or runs beside another (else the pre-imported command line, tests/cli_driver.py), and
compares its results bitwise (float64, minus wall-clock fields) with an uninterrupted reference.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest
from fault_helpers import SWEEP, TOTAL, kill_group, results, stable, sweep_cmd

from kernelgap.cli import main

#: One worker runs this module (make test: --dist loadfile), so the reference sweep below is
#: trained once.


@pytest.fixture(scope="module")
def reference(tmp_path_factory, driver) -> tuple[Path, dict[str, dict]]:
    """The config file and the results of one uninterrupted sweep."""
    root = tmp_path_factory.mktemp("reference")
    cfg = root / "faults.toml"
    cfg.write_text(SWEEP)
    done = driver.run(sweep_cmd(cfg, root / "clean")[1:])
    assert done.returncode == 0, done.stderr
    ref = results(root / "clean")
    assert len(ref) == TOTAL
    return cfg, ref


def assert_same_results(out: Path, ref: dict[str, dict]) -> None:
    got = results(out)
    assert sorted(got) == sorted(ref)
    for run_id, record in ref.items():
        assert stable(got[run_id]) == stable(record), run_id  # bitwise: floats compared with ==


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_random_sigkills_end_with_the_uninterrupted_results(tmp_path, reference, driver):
    cfg, ref = reference
    out = tmp_path / "killed"
    rng = random.Random(7)
    # One kill during start-up, then three at distinct points strictly inside the sweep: after
    # `target` finished tasks of two runs, plus a random delay of at most one task's wall time
    # (measured in the reference sweep), so that a fast machine does not run past the end.
    task_s = max(record["wall_time_s"] for record in ref.values())
    targets = [0, *sorted(rng.sample(range(1, TOTAL // 2 - 2), 3))]
    seen: dict[str, dict] = {}
    interrupted, stale_locks = 0, 0
    for target in targets:
        log = tmp_path / f"sweep-{target}.err"
        with log.open("wb") as err:
            proc = subprocess.Popen(sweep_cmd(cfg, out), start_new_session=True, stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.time() + 120
            while len(results(out)) < 2 * target and proc.poll() is None and time.time() < deadline:
                time.sleep(0.02)
            assert len(results(out)) >= 2 * target, (
                f"the sweep stopped short of {2 * target} results: {log.read_text()}"
            )
            time.sleep(rng.uniform(0.0, task_s if target else 0.6))  # inside the next task, or a write
        finally:
            kill_group(proc)
        now = results(out)
        assert proc.returncode != 0, "the sweep finished before it was killed: the test has no teeth"
        for run_id, record in seen.items():  # a finished result is never lost nor redone
            assert now[run_id] == record
        seen = now
        interrupted += 0 < len(now) < TOTAL
        stale_locks += len(list((out / "locks").glob("*.lock"))) if (out / "locks").is_dir() else 0
    assert interrupted >= 2, "the kills should land mid-sweep"
    assert stale_locks >= 1, "some kill should leave a claimed run's lock behind"
    final = driver.run(sweep_cmd(cfg, out)[1:])
    assert final.returncode == 0, final.stderr
    summary = json.loads(final.stdout)
    assert summary["done_before"] == len(seen) and summary["ran"] == TOTAL - len(seen)
    assert_same_results(out, ref)
    for run_id, record in seen.items():
        assert results(out)[run_id]["wall_time_s"] == record["wall_time_s"]  # kept, not redone
    assert not list((out / "locks").glob("*.lock")), "stale locks are taken over and removed"
    assert not [n for n in os.listdir(out / "runs") if n.endswith(".tmp") and not n.startswith(".")]


CORRUPTIONS = {
    "truncated": lambda raw: raw[: len(raw) // 2],
    "empty": lambda raw: b"",
    "binary": lambda raw: b"\x00\xff\xfe garbage \x80",
    "wrong-config": lambda raw: raw.replace(b'"rank": 4', b'"rank": 5'),
    "no-metrics": lambda raw: json.dumps({k: v for k, v in json.loads(raw).items() if k != "train"}).encode(),
    # valid JSON syntax, but an integer past Python's digit limit: json.loads raises ValueError
    "huge-integer": lambda raw: b'{"x": 1' + b"0" * 5000 + b", " + raw.lstrip()[1:],
}


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_corrupted_results_are_kept_aside_and_redone(tmp_path, reference, driver):
    cfg, ref = reference
    out = tmp_path / "out"
    assert driver.run(sweep_cmd(cfg, out)[1:]).returncode == 0
    ids = sorted(ref)
    damaged = {}
    for (kind, damage), run_id in zip(CORRUPTIONS.items(), ids):
        path = out / "runs" / f"{run_id}.json"
        damaged[run_id] = damage(path.read_bytes())
        path.write_bytes(damaged[run_id])
    status = driver.run(["sweep", out, "--status", "--json"])
    assert json.loads(status.stdout)["corrupt"] == len(CORRUPTIONS)
    proc = driver.run(sweep_cmd(cfg, out)[1:])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["ran"] == len(CORRUPTIONS) and sorted(summary["set_aside"]) == sorted(damaged)
    for run_id, raw in damaged.items():
        (aside,) = (out / "runs").glob(f"{run_id}.json.corrupt-*")
        assert aside.read_bytes() == raw  # kept byte for byte
    # Each redone run trains alone (its stack-mate is intact): same numbers within
    # float64 rounding, and statuses and step counts identical.
    got = results(out)
    for run_id, record in ref.items():
        if run_id in damaged:
            assert got[run_id]["steps"] == record["steps"] and got[run_id]["status"] == record["status"]
            assert got[run_id]["train"]["max_error"] == pytest.approx(record["train"]["max_error"], rel=1e-9)
        else:
            assert stable(got[run_id]) == stable(record)


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_two_sweeps_on_one_folder_never_run_a_run_twice(tmp_path, reference):
    """Every attempt trains each run once; some attempt must have both sweeps training (on a
    machine where one sweep ends before the other has claimed a run, the next attempt tries
    again, so the test depends on no speed)."""
    cfg, ref = reference
    overlapped = []
    for attempt in range(3):
        out = tmp_path / f"shared-{attempt}"
        procs = [
            subprocess.Popen(sweep_cmd(cfg, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        summaries = []
        for proc in procs:
            stdout, stderr = proc.communicate()
            assert proc.returncode == 0, stderr
            summaries.append(json.loads(stdout))
        ran = [s["ran"] for s in summaries]
        assert sum(ran) == TOTAL, f"runs trained twice or never: {ran}"  # a broken claim gives 2 × TOTAL
        assert_same_results(out, ref)
        assert not list((out / "locks").glob("*.lock"))
        overlapped.append(min(ran) > 0)
        if overlapped[-1]:
            break
    assert any(overlapped), "the two sweeps never trained at once: the test has no teeth"


def _no_executor(monkeypatch):
    made = []
    monkeypatch.setattr(
        "kernelgap.sweeps.runner.make_executor", lambda *a, **k: made.append(a) or pytest.fail("training started")
    )
    return made


@pytest.mark.parametrize("where", ["under-a-file", "is-a-file", "name-too-long"])
def test_unwritable_results_folder_fails_before_training(tmp_path, monkeypatch, capsys, where):
    """Root may write anywhere, so the folder is made unwritable by the path itself:
    a path below a regular file, a regular file, or a name over NAME_MAX."""
    cfg = tmp_path / "faults.toml"
    cfg.write_text(SWEEP)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    out = {"under-a-file": blocker / "results", "is-a-file": blocker, "name-too-long": tmp_path / ("x" * 300)}[where]
    made = _no_executor(monkeypatch)
    with pytest.raises(SystemExit) as exc:
        main(["sweep", str(cfg), "--out", str(out), "--workers", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("error: ")
    assert ("cannot write" in err[0] or "is a file" in err[0]) and "Traceback" not in err[0]
    assert made == [] and blocker.read_text() == "a file, not a folder\n"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_unwritable_results_folder_through_the_console_script(tmp_path):
    cfg = tmp_path / "faults.toml"
    cfg.write_text(SWEEP)
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    proc = subprocess.run(sweep_cmd(cfg, blocker / "results"), capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: cannot write to results folder")
