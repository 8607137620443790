"""A probed module cannot lift its limits nor move the probe's results: the probe never runs
its code in its own process, every phase of it (import, check, training step, exit) is
stopped from outside on its limit, and Ctrl-C is one line and status 130 whenever it comes
(real subprocesses of the command line; docs/experiments.md, "Time limits")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_signals import wait_for

pytestmark = pytest.mark.slow  # processes, kills or whole probes: `make test-fast` leaves it to `make test`

SRC = str(Path(__file__).resolve().parents[1] / "src")

#: ``{top}`` runs at import, ``{init}`` in the constructor, ``{body}`` in a forward pass once
#: ``self.big >= {big}`` (the k-th pass on a whole family: a check instance makes one, a
#: run's k-th is its training step k-1; 0: every pass, the interface check first).
TEMPLATE = """
import atexit, os, signal, threading, time
import torch
from torch import nn
{top}

class M(nn.Module):
    def __init__(self, m, rank):
        super().__init__()
        {init}
        self.lin = nn.Linear(m, 1)
        self.big = 0

    def forward(self, tokens):
        self.big += tokens.shape[0] not in (2, 64)
        out = self.lin(tokens).squeeze(-1)
        if self.big >= {big}:
            {body}
        return out
"""

#: Switches its own alarm off, then never returns.
NO_ALARM = "signal.signal(signal.SIGALRM, signal.SIG_IGN); signal.alarm(0)\n            while True: pass"
LIMITS = ["--time-limit", "import=20", "--time-limit", "check=20", "--time-limit", "step=20"]


def module(folder: Path, top: str = "", init: str = "pass", body: str = "pass", big: int = 0) -> str:
    (folder / "m.py").write_text(TEMPLATE.format(top=top, init=init, body=body, big=big))
    return "m.py:M"


def env() -> dict:
    return {**os.environ, "PYTHONPATH": SRC}


def probe(driver, folder: Path, *flags: str, timeout: float = 150) -> tuple[int, str, str, int]:
    """``kernelgap probe m.py:M`` on one rank, three steps, one worker, into ``p``, in a
    session of its own (tests/cli_driver.py): status, stdout, stderr and the driver's pid.
    A probe that hangs fails the test at ``timeout``."""
    argv = ["probe", "m.py:M", "--ranks", "2", "--steps", "3", "--out", "p", "--no-recipes", "--workers", "1"]
    try:
        proc = driver.run([*argv, *flags], cwd=folder, env=env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the probe did not end within {timeout} s")
    return proc.returncode, proc.stdout, proc.stderr, proc.pid


def one_line(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], err


@pytest.mark.parametrize(
    "parts, limit, needle",
    [
        ({"top": "time.sleep(600)"}, "import=1", "did not finish importing within its time limit of 1 s"),
        ({"init": "while True: pass"}, "check=1", "did not finish being checked within its time limit of 1 s"),
        ({"body": NO_ALARM, "big": 1}, "step=1", "did not finish checking a training step within its time limit"),
        ({"body": NO_ALARM, "big": 3}, "step=2", "did not finish training step 2 within its time limit of 2 s"),
    ],
    ids=["sleep-in-import", "loop-in-init", "no-alarm-in-check", "no-alarm-in-training"],
)
def test_a_module_that_hangs_is_stopped_on_its_limit(driver, tmp_path, parts, limit, needle):
    """Each phase (import, check, the check's step, a run's training step in its worker) held
    to its own limit, the message naming the flag that sets it; the module may switch its
    alarm off."""
    module(tmp_path, **parts)
    code, _, err, _ = probe(driver, tmp_path, *LIMITS, "--time-limit", limit)
    phase = limit.split("=")[0]
    one_line(code, err, f"module m.py:M {needle}", f"--time-limit {phase}=SECONDS")
    assert not (tmp_path / "p" / "probe.json").exists()


def test_the_probe_never_imports_the_module_itself(driver, tmp_path):
    """Imported once by the checking child, then by the pool's worker: never by the driver,
    where a second import that hangs would hang the probe with no limit."""
    module(tmp_path, top="open('imports', 'a').write(f'{os.getpid()}\\n')")
    code, _, err, command = probe(driver, tmp_path, *LIMITS)
    assert code == 0, err
    pids = [int(p) for p in (tmp_path / "imports").read_text().split()]
    assert pids and command not in pids


def test_a_module_whose_second_import_hangs_is_held_to_the_step_limit(driver, tmp_path):
    module(tmp_path, top="if os.path.exists('imported'): time.sleep(600)\nopen('imported', 'w').close()")
    code, _, err, _ = probe(driver, tmp_path, *LIMITS[:4], "--time-limit", "step=2")
    one_line(code, err, "module m.py:M did not finish being built within its time limit of 2 s")


#: At import: an exit handler that sleeps, a non-daemon thread that never ends, the working
#: folder moved (``{elsewhere}``); each alone would hold the probe or move its ``--out``.
LEFT_RUNNING = (
    "atexit.register(time.sleep, 600)\n"
    "threading.Thread(target=time.sleep, args=(600,)).start()\n"
    "os.chdir({elsewhere!r})"
)


@pytest.mark.parametrize("executor", ["local", "inline"])
def test_a_module_that_leaves_things_running_and_changes_folder_holds_nothing(driver, tmp_path, executor):
    """What a module leaves running at exit does not hold the probe, and a folder it moves to
    moves no result.  ``--executor inline`` runs the module in the driver itself, without
    limits (docs/experiments.md): there only the moved folder is tried."""
    (tmp_path / "elsewhere").mkdir()
    top = LEFT_RUNNING.format(elsewhere=str(tmp_path / "elsewhere"))
    if executor == "inline":
        top = top.split("\n")[-1]  # the driver runs an inline module's import itself
    module(tmp_path, top=top)
    code, _, err, _ = probe(driver, tmp_path, *LIMITS, "--executor", executor)
    assert code == 0, err
    assert (tmp_path / "p" / "probe.json").is_file() and (tmp_path / "p" / "report.html").is_file()
    assert list((tmp_path / "elsewhere").iterdir()) == []


# -- Ctrl-C ----------------------------------------------------------------------------

SWEEP = """
name = "m"
[family]
name = "witness"
[model]
kind = "module"
[model.module]
target = "m.py:M"
[train]
mse_steps = 3
max_steps = 3
[grid]
model.rank = [1, 2]
"""


def start(cwd: Path, *args: str, script: str | None = None) -> subprocess.Popen:
    """The command line in a session of its own, SIGINT at its default (as a terminal starts it)."""
    cmd = [sys.executable, "-c", script] if script else [sys.executable, "-m", "kernelgap.cli", *args]
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def forkserver_importing(sid: int) -> bool:
    """Whether a forkserver of session ``sid`` has begun to load torch (its preload, seconds
    long, when Python's own Ctrl-C handler would answer with a traceback)."""
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and b"forkserver" in (entry / "cmdline").read_bytes():
                return "libtorch" in (entry / "maps").read_text()
        except (OSError, ValueError, IndexError):
            continue
    return False


def ctrl_c(proc: subprocess.Popen) -> tuple[int, str, str]:
    """SIGINT to the command's whole process group, as a terminal's Ctrl-C sends it."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the command did not end within 60 s of SIGINT")
    return proc.returncode, out, err


def interrupted(code: int, out: str, err: str) -> None:
    assert code == 130, err
    assert err.strip().splitlines() == ["error: interrupted"], err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("command", ["sweep", "probe"])
def test_ctrl_c_while_the_pool_starts_is_one_line_and_130(tmp_path, command):
    """The forkserver, still importing torch, is in the terminal's process group: it must not
    answer the Ctrl-C (with a traceback of its own); the driver does."""
    module(tmp_path, body="time.sleep(600)", big=3)
    (tmp_path / "sweep.toml").write_text(SWEEP)
    args = (
        ["sweep", "sweep.toml", "--out", "out", "--json"] if command == "sweep" else ["probe", "m.py:M", "--out", "p"]
    )
    proc = start(tmp_path, *args)
    wait_for(proc, lambda: forkserver_importing(proc.pid), "forkserver loading torch")
    interrupted(*ctrl_c(proc))


def test_ctrl_c_while_a_probe_trains_is_one_line_and_130(tmp_path):
    module(tmp_path, body="open(f'training-{os.getpid()}', 'w').close(); time.sleep(600)", big=3)
    proc = start(tmp_path, "probe", "m.py:M", "--ranks", "2", "--steps", "3", "--out", "p", "--no-recipes")
    wait_for(proc, lambda: any(tmp_path.glob("training-*")), "a training step in a worker")
    interrupted(*ctrl_c(proc))


#: A command that is done and exits, its exit held by a thread (as a pool's threads hold it).
HELD_EXIT = textwrap.dedent(
    """
    import sys, threading, time
    from kernelgap.cli import main

    threading.Thread(target=time.sleep, args=(60,)).start()
    sys.argv = ["kernelgap", "bound", "transcript", "--answers", "2", "--values", "2"]
    main()
    open("done", "w").close()
    """
)


def test_ctrl_c_while_the_command_exits_is_130_not_0(tmp_path):
    proc = start(tmp_path, script=HELD_EXIT)
    wait_for(proc, lambda: (tmp_path / "done").exists(), "the command's end")
    code, out, err = ctrl_c(proc)
    interrupted(code, out, err)
    assert out.strip()  # the command's own output, printed before the interrupt
