"""A sweep driver killed with -9 leaves no process behind — also while it is a zombie that its
parent has not reaped: its forkserver and workers notice and exit, and then the resource
tracker, whose pipe they held, exits too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from fault_helpers import KERNELGAP, group_members, proc_stat, sweep_processes

pytestmark = pytest.mark.slow  # processes, kills or whole probes: `make test-fast` leaves it to `make test`

#: Long enough that the workers are busy when the driver dies.
SWEEP = """
name = "orphans"
[family]
name = "witness"
[model]
feature_map = "mlp_exp"
[train]
mse_steps = 4000
max_steps = 4000
stop_below = 0.0
[grid]
model.rank = [8, 16]
seed = [0, 1]
"""


def test_killing_the_driver_leaves_no_process(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP)
    driver = subprocess.Popen(
        [KERNELGAP, "sweep", str(cfg), "--out", str(tmp_path / "out"), "--workers", "2", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while len(group_members(driver.pid)) < 4 and time.monotonic() < deadline:  # driver, forkserver, workers
        time.sleep(0.2)
    assert len(group_members(driver.pid)) >= 4, "the sweep never started its workers"
    try:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 15
        while group_members(driver.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert group_members(driver.pid) == []
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


#: Starts the command in its argv as a new session, prints its pid and never reaps it: once
#: killed, it stays a zombie until this process exits (at EOF on its stdin).
UNREAPING_PARENT = """
import subprocess, sys
child = subprocess.Popen(sys.argv[1:], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(child.pid, flush=True)
sys.stdin.read()
"""


@pytest.mark.timeout(180)
def test_a_killed_driver_left_a_zombie_leaves_no_process(tmp_path):
    """The driver's parent never reaps it; a zombie still answers ``kill(pid, 0)``."""
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP)
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            UNREAPING_PARENT,
            KERNELGAP,
            "sweep",
            str(cfg),
            "--out",
            str(tmp_path / "out"),
            "--workers",
            "2",
            "--json",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    driver = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 60
        wanted = ["driver", "forkserver", "resource tracker", "worker", "worker"]
        while sorted(roles := sweep_processes(driver).values()) != sorted(wanted) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sorted(roles) == sorted(wanted), f"the sweep never started its workers: {list(roles)}"
        time.sleep(1.0)  # the workers are training (the whole sweep takes tens of seconds)
        before = sweep_processes(driver)
        assert sorted(before.values()) == sorted(wanted), f"the sweep ended early: {before}"

        os.kill(driver, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while (proc_stat(driver) or ("",))[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (proc_stat(driver) or ("gone",))[0] == "Z", "the killed driver is not a zombie"

        deadline = time.monotonic() + 10
        while group_members(driver) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = {pid: before.get(pid, "other") for pid in group_members(driver)}
        assert left == {}, f"processes outlived the zombie driver: {left}"
        assert (proc_stat(driver) or ("gone",))[0] == "Z"  # still unreaped: the case under test
    finally:
        try:
            os.killpg(driver, signal.SIGKILL)
        except ProcessLookupError:
            pass
        parent.stdin.close()
        parent.wait(timeout=30)
