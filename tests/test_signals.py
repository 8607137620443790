"""Ctrl-C: every long command ends with status 130 and one line, its workers stop, and what
finished before the interrupt stays valid (real subprocesses of the command line)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # processes, kills or whole probes: `make test-fast` leaves it to `make test`

SRC = str(Path(__file__).resolve().parents[1] / "src")

#: A module that trains normally at rank 1 and, at rank 2, touches ``hang-<rank>`` once it is
#: past the probe's checks (its fifth forward pass) and then sleeps: a long training step.
SLOW = """
import os, time
import torch
from torch import nn

class Slow(nn.Module):
    def __init__(self, m, rank):
        super().__init__()
        self.lin = nn.Linear(m, 1)
        self.rank, self.calls = rank, 0

    def forward(self, tokens):
        self.calls += 1
        if self.rank == 2 and self.calls > 4:
            open(f"hang-{self.rank}-{os.getpid()}", "w").close()
            time.sleep(120)
        return self.lin(tokens).squeeze(-1)

class Interrupts(nn.Module):
    def __init__(self, m, rank):
        super().__init__()
        self.lin = nn.Linear(m, 1)

    def forward(self, tokens):
        raise KeyboardInterrupt
"""

SWEEP = """
name = "slow"
[family]
name = "witness"
[model]
kind = "module"
[model.module]
target = "slow.py:Slow"
[train]
mse_steps = 3
max_steps = 3
[grid]
model.rank = [1, 2]
"""

#: Runs the command line with a marker written at a training step (``KG_MARK_STEP``) of the
#: driver's process: for commands that train in the driver (``train``, ``--executor inline``).
MARKED = textwrap.dedent(
    """
    import os, sys
    from kernelgap.training import stack
    from kernelgap.cli import main

    step_errors = stack.StackTrainer.step_errors

    def marked(self, step):
        if step == int(os.environ["KG_MARK_STEP"]):
            open("started", "w").close()
        return step_errors(self, step)

    stack.StackTrainer.step_errors = marked
    sys.argv[0] = "kernelgap"
    main()
    """
)


def start(cwd: Path, *args: str, marked: bool = False) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC, "KG_MARK_STEP": "20"}
    cmd = [sys.executable, "-c", MARKED, *args] if marked else [sys.executable, "-m", "kernelgap.cli", *args]
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,
    )


def default_sigint() -> None:
    """As a terminal starts a command: SIGINT at its default (a test runner's worker may
    ignore it, and an ignored signal stays ignored across exec, so Python would never see it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(proc: subprocess.Popen, found, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not found():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"ended (status {proc.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no {what} within {limit} s")
        time.sleep(0.05)


def session_processes(sid: int) -> list[int]:
    """Pids of the processes still in session ``sid`` (zombies excluded)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] not in "ZX":
            pids.append(int(entry.name))
    return pids


def interrupt(proc: subprocess.Popen, group: bool) -> tuple[int, str, str]:
    """SIGINT to the driver alone or to its whole process group (a terminal's Ctrl-C); then
    every process of its session must be gone soon after it ends."""
    if group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the command did not end within 60 s of SIGINT")
    deadline = time.monotonic() + 10
    while session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = session_processes(proc.pid)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not left, f"processes left training after the interrupt: {left}"
    return proc.returncode, out, err


def assert_interrupted(code: int, err: str) -> None:
    assert code == 130, err
    assert err.strip().splitlines() == ["error: interrupted"], err
    assert "Traceback" not in err


@pytest.fixture
def world(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW)
    (tmp_path / "sweep.toml").write_text(SWEEP)
    return tmp_path


@pytest.mark.parametrize("group", [False, True], ids=["driver", "group"])
def test_an_interrupted_sweep_is_130_keeps_finished_runs_and_frees_its_claims(world, group, driver):
    proc = start(world, "sweep", "sweep.toml", "--out", "out", "--workers", "2", "--json")  # --json: no bar
    runs = world / "out" / "runs"
    wait_for(
        proc,
        lambda: any(world.glob("hang-2-*")) and runs.is_dir() and any(runs.glob("*.json")),
        "rank-1 record and rank-2 training step",
    )
    code, out, err = interrupt(proc, group)
    assert_interrupted(code, err)
    assert out == ""  # no summary of a sweep that did not finish
    records = [json.loads(p.read_text()) for p in runs.glob("*.json")]
    assert [r["config"]["model"]["rank"] for r in records] == [1]
    status = driver.run(["sweep", "out", "--status", "--json"], cwd=world, env={**os.environ, "PYTHONPATH": SRC})
    counts = json.loads(status.stdout)
    assert (counts["done"], counts["left"], counts["corrupt"]) == (1, 1, 0), counts
    for lock in (world / "out" / "locks").glob("*.lock"):  # left as a file, but its claim free
        with lock.open("rb") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


@pytest.mark.parametrize("group", [False, True], ids=["driver", "group"])
def test_an_interrupted_probe_is_130_and_its_workers_stop(world, group):
    proc = start(world, "probe", "slow.py:Slow", "--ranks", "2", "--steps", "3", "--out", "p", "--no-recipes")
    wait_for(proc, lambda: any(world.glob("hang-2-*")), "a training step of the probed module")
    (marker,) = world.glob("hang-2-*")
    worker = int(marker.name.rsplit("-", 1)[1])
    assert worker != proc.pid  # the step hangs in a pool worker, which must stop too
    code, _, err = interrupt(proc, group)
    assert_interrupted(code, err)
    assert not Path(f"/proc/{worker}").exists() or worker not in session_processes(proc.pid)


def test_a_module_raising_keyboard_interrupt_is_an_interrupt(world, driver):
    """No signal: the module's own ``KeyboardInterrupt`` (the pre-imported command line,
    tests/cli_driver.py)."""
    done = driver.run(["probe", "slow.py:Interrupts", "--ranks", "2", "--steps", "3", "--out", "p"], cwd=world)
    assert_interrupted(done.returncode, done.stderr)


def test_an_interrupted_train_is_130(world):
    proc = start(
        world, "train", "--family", "witness", "--rank", "2", "--max-steps", "100000", "--no-early-stop", marked=True
    )
    wait_for(proc, lambda: (world / "started").exists(), "training step 20")
    code, out, err = interrupt(proc, group=False)
    assert_interrupted(code, err)
    assert out == ""


def test_an_interrupted_reproduce_is_130(world):
    profile = world / "prof"
    profile.mkdir()
    (profile / "profile.toml").write_text('experiments = ["witness"]\n')
    (profile / "witness.toml").write_text(
        textwrap.dedent(
            """
            name = "witness"
            [family]
            name = "witness"
            [model]
            kind = "kernel"
            feature_map = "table"
            [train]
            mse_steps = 100000
            max_steps = 100000
            stop_below = 0.0
            [grid]
            model.rank = [1]
            seed = [0]
            """
        )
    )
    proc = start(world, "reproduce", "--profile", "prof", "--out", "r", "--executor", "inline", marked=True)
    wait_for(proc, lambda: (world / "started").exists(), "training step 20")
    code, _, err = interrupt(proc, group=True)
    assert_interrupted(code, err)
    invocations = json.loads((world / "r" / "reproduce.json").read_text())["invocations"]
    assert [i["status"] for i in invocations] == ["stopped: KeyboardInterrupt"]


def test_an_interrupted_probe_experiment_stops_every_probes_workers(world):
    """The probe experiment drives its probes from threads: an interrupt stops their pools."""
    (world / "prof").mkdir()
    (world / "prof" / "profile.toml").write_text(
        'experiments = ["probe"]\n[[probes]]\nname = "slow"\ntarget = "slow.py:Slow"\n'
        "ranks = [2]\nsteps = 3\nrecipes = false\n"
    )
    proc = start(world, "reproduce", "--profile", "prof", "--out", "r", "--workers", "1")
    wait_for(proc, lambda: any(world.glob("hang-2-*")), "a training step of the probed module")
    code, _, err = interrupt(proc, group=False)
    assert_interrupted(code, err)


#: A process whose exit would wait forever after an interrupt: a thread that never ends and a
#: child that sleeps (``end_interrupted`` must end both within its grace).
HANGING_EXIT = textwrap.dedent(
    """
    import multiprocessing, sys, threading, time
    from kernelgap.sweeps.executors import end_interrupted

    if __name__ == "__main__":
        child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,))
        child.start()
        print(child.pid, flush=True)
        threading.Thread(target=time.sleep, args=(600,)).start()  # not a daemon: exit joins it
        end_interrupted(130, bounded=True, seconds=1.0)
        sys.exit(130)
    """
)


def test_an_interrupted_exit_is_bounded_in_time_and_leaves_no_child(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(HANGING_EXIT)
    proc = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 130, proc.stderr[-2000:]
    child = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and "Z" not in _state(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
