"""A sweep driver killed with -9 leaves no process behind: its workers notice and exit, and
then the forkserver and the resource tracker, whose pipes they held, exit too."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from fault_helpers import KERNELGAP

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


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (zombies excluded), from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def test_killing_the_driver_leaves_no_process(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP)
    driver = subprocess.Popen([KERNELGAP, "sweep", str(cfg), "--out", str(tmp_path / "out"), "--workers", "2",
                               "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
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
