"""Probed modules on a leash: a module that hangs, exits or changes its output shape in any
phase (import, check, training step) is stopped and reported in one line naming it, the
phase and the limit; one raising ``KeyboardInterrupt`` interrupts (docs/experiments.md,
"Time limits")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernelgap.args import number_map
from kernelgap.errors import ConfigError, KernelgapError
from kernelgap.probe.config import TIME_LIMITS, ProbeConfig
from kernelgap.sweeps import run_sweep
from kernelgap.sweeps.executors import step_limit

pytestmark = pytest.mark.slow  # processes, kills or whole probes: `make test-fast` leaves it to `make test`

SRC = str(Path(__file__).resolve().parents[1] / "src")

#: ``{top}`` runs at import; ``{body}`` once ``{cond}`` holds: ``True`` (the first forward pass,
#: the interface check), or ``self.big >= k``, the k-th pass on a whole family (a check
#: instance makes one, the probe's training-step check; a run's k-th is its training step k-1;
#: the other checks give batches of 2 and 64).
TEMPLATE = """
import os, signal, time
import torch
from torch import nn
{top}

class M(nn.Module):
    def __init__(self, m, rank):
        super().__init__()
        self.lin = nn.Linear(m, 1)
        self.big = 0

    def forward(self, tokens):
        self.big += tokens.shape[0] not in (2, 64)
        out = self.lin(tokens).squeeze(-1)
        if {cond}:
            {body}
        return out
"""

#: Limits short enough for a test, long enough for a loaded machine's import of a small module.
LIMITS = ["--time-limit", "import=20", "--time-limit", "check=20", "--time-limit", "step=20"]


def module(folder: Path, top: str = "", body: str = "pass", cond: str = "True", name: str = "m.py") -> str:
    (folder / name).write_text(TEMPLATE.format(top=top, body=body, cond=cond))
    return f"{name}:M"


def probe(driver, folder: Path, target: str, *flags: str, timeout: float = 240) -> tuple[int, str, str]:
    """``kernelgap probe`` as a user runs it (a process of its own, tests/cli_driver.py: a
    module's exit ends nothing of the test), on one rank with three steps."""
    proc = driver.run(
        ["probe", target, "--ranks", "2", "--steps", "3", "--out", "p", "--no-recipes", "--workers", "1", *flags],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=timeout,
    )
    return proc.returncode, proc.stdout, proc.stderr


def one_line(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


@pytest.mark.parametrize("status", [0, 3])
def test_a_module_exiting_at_import_is_one_line_never_status_0(driver, tmp_path, status):
    target = module(tmp_path, top=f"os._exit({status})")
    code, out, err = probe(driver, tmp_path, target)
    one_line(code, err, f"m.py:M ended its process while importing (exit status {status})")
    assert not (tmp_path / "p").exists()


def test_a_module_exiting_in_a_check_names_the_phase(driver, tmp_path):
    target = module(tmp_path, body="os._exit(0)")
    code, _, err = probe(driver, tmp_path, target)
    one_line(code, err, "m.py:M ended its process while being checked (exit status 0)")


def test_a_module_exiting_in_a_worker_is_one_line_naming_it(driver, tmp_path):
    target = module(tmp_path, body="os._exit(0)", cond="self.big >= 3")
    code, _, err = probe(driver, tmp_path, target, *LIMITS)
    one_line(code, err, "m.py:M failed while training at rank 2", "SystemExit(0)")
    assert "BrokenProcessPool" not in err


def test_a_worker_killed_outright_is_one_line(driver, tmp_path):
    target = module(tmp_path, body="os.kill(os.getpid(), signal.SIGKILL)", cond="self.big >= 3")
    code, _, err = probe(driver, tmp_path, target, *LIMITS)
    one_line(code, err, "a worker process ended abruptly")
    assert "BrokenProcessPool" not in err and "Traceback" not in err


@pytest.mark.parametrize("executor", ["local", "inline"])
def test_an_output_shape_that_changes_between_steps_is_refused_at_that_step(driver, tmp_path, executor):
    target = module(tmp_path, body="out = out[:, :1]", cond="self.big >= 3")  # a [S, 1] output broadcasts silently
    code, _, err = probe(driver, tmp_path, target, *LIMITS, "--executor", executor)
    line = one_line(code, err, "m.py:M returned predictions of shape [", "at training step 2", "where step 0 gave [")
    first, changed = line.split("where step 0 gave ")[1].split("]")[0], line.split("of shape ")[1].split("]")[0]
    assert changed.endswith(", 1") and not first.endswith(", 1")


def test_a_module_raising_keyboard_interrupt_at_import_interrupts(driver, tmp_path):
    target = module(tmp_path, top="raise KeyboardInterrupt")
    code, _, err = probe(driver, tmp_path, target)
    assert code == 130 and err.strip().splitlines() == ["error: interrupted"], err


def test_a_well_behaved_module_trains_under_the_leash_as_without_it(driver, tmp_path):
    """The same probe twice, without and then with tight limits: the same records."""
    target = module(tmp_path)
    assert probe(driver, tmp_path, target, "--executor", "inline")[0] == 0
    first = {p.name: json.loads(p.read_text())["train"] for p in (tmp_path / "p").rglob("runs/*.json")}
    (tmp_path / "p").rename(tmp_path / "before")
    assert probe(driver, tmp_path, target, *LIMITS)[0] == 0
    second = {p.name: json.loads(p.read_text())["train"] for p in (tmp_path / "p").rglob("runs/*.json")}
    assert first and first.keys() == second.keys()
    for name in first:
        assert first[name]["max_error"] == pytest.approx(second[name]["max_error"], abs=1e-5)


@pytest.mark.parametrize(
    "flag, needle",
    [
        ("train=3", "time_limits: unknown key 'train' (expected one of check, import, step)"),
        ("step=0", "time_limits.step: must be a positive number of seconds (at most 1,000,000), got 0.0"),
        ("check=nan", "time_limits.check: must be a positive number of seconds"),
        ("import=-1", "time_limits.import: must be a positive number of seconds"),
        ("step", "--time-limit 'step' is not key=value"),
    ],
)
def test_bad_time_limits_are_refused_before_the_module_is_touched(cli, tmp_path, monkeypatch, flag, needle):
    monkeypatch.chdir(tmp_path)
    module(tmp_path, top="open('imported', 'w').close()")
    code, _, err = cli("probe", "m.py:M", "--out", "p", "--time-limit", flag)
    one_line(code, err, needle)
    assert not (tmp_path / "imported").exists() and not (tmp_path / "p").exists()


def test_time_limits_default_and_override():
    assert ProbeConfig("m.py:M").limits == TIME_LIMITS
    limits = number_map(["step=2.5"], "--time-limit")
    assert ProbeConfig("m.py:M", time_limits=limits).limits == {**TIME_LIMITS, "step": 2.5}
    with pytest.raises(
        ConfigError,
        match=r"^time_limits\.import: must be a positive number of seconds \(at most 1,000,000\), got True$",
    ):
        ProbeConfig("m.py:M", time_limits={"import": True})


SWEEP = """
name = "m"
[family]
name = "witness"
[model]
kind = "module"
[model.module]
target = "m.py:M"
[train]
mse_steps = 2
max_steps = 2
[grid]
model.rank = [2]
"""


def test_a_sweep_of_a_module_holds_its_steps_to_the_step_limit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module(tmp_path, body="time.sleep(600)", cond="self.big >= 2")
    (tmp_path / "sweep.toml").write_text(SWEEP)
    with step_limit(1.0), pytest.raises(KernelgapError, match=r"m\.py:M did not finish training step 1 within"):
        run_sweep(tmp_path / "sweep.toml", tmp_path / "out", workers=1, progress=False)
    assert not list((tmp_path / "out" / "runs").glob("*.json"))


def reproduce(driver, folder: Path, limits: str) -> tuple[int, str, str]:
    (folder / "prof").mkdir()
    (folder / "prof" / "profile.toml").write_text(
        f'experiments = ["probe"]\n[[probes]]\nname = "m"\ntarget = "m.py:M"\ntime_limits = {limits}\n'
    )
    proc = driver.run(
        ["reproduce", "--profile", "prof", "--out", "r", "--workers", "1"],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=240,
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_a_profiles_probe_entry_sets_its_time_limits(driver, tmp_path):
    module(tmp_path, body="time.sleep(600)")
    code, _, err = reproduce(driver, tmp_path, "{check = 1}")
    one_line(code, err, "m.py:M did not finish being checked within its time limit of 1 s")


def test_a_profiles_bad_time_limit_is_refused_before_any_work(driver, tmp_path):
    module(tmp_path, top="open('imported', 'w').close()")
    code, _, err = reproduce(driver, tmp_path, "{step = 0}")
    one_line(code, err, "profile.toml: probes[0].time_limits.step: must be a positive number of seconds")
    assert not (tmp_path / "imported").exists() and not (tmp_path / "r").exists()


def test_the_leash_holds_in_process_whatever_folder_the_pool_began_in(tmp_path, monkeypatch):
    """Through Python, from a folder other than the one the process's forkserver started in:
    the child checks the module the caller names (relative to the caller's folder)."""
    from kernelgap.models.external import ModuleFailure
    from kernelgap.probe import ProbeConfig
    from kernelgap.probe.runner import run_probe
    from kernelgap.sweeps.executors import forkserver_context

    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    forkserver_context()  # started here, if not running yet
    monkeypatch.chdir(tmp_path)
    module(tmp_path, top="time.sleep(60)")
    config = ProbeConfig("m.py:M", out=tmp_path / "p", ranks=[2], executor="inline", time_limits={"import": 1})
    with pytest.raises(ModuleFailure, match=r"m\.py:M did not finish importing within its time limit of 1 s"):
        run_probe(config, log=lambda *_: None)
