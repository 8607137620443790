"""Ray: a worker killed mid-task is retried, and Ray gives the local numbers
bitwise.  Marked ``ray``; skipped when Ray is not installed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kernelgap[ray]')")

from fault_helpers import KERNELGAP, SWEEP, TOTAL, results, stable  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _task_workers() -> list[int]:
    """Pids of Ray workers executing one of our tasks right now (process title ``ray::_call``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cmd.startswith("ray::_call"):
                out.append(int(entry.name))
    return out


@pytest.mark.timeout(300)
def test_a_killed_ray_worker_is_retried_and_numbers_match_local(tmp_path, ray_head, driver):
    """The local reference runs on the pre-imported command line (tests/cli_driver.py), the
    Ray sweep through the console script."""
    address, env = ray_head
    cfg = tmp_path / "faults.toml"
    cfg.write_text(SWEEP)
    local = tmp_path / "local"
    done = driver.run(["sweep", cfg, "--out", local, "--workers", "2", "--json"])
    assert done.returncode == 0, done.stderr
    out = tmp_path / "ray"
    proc = subprocess.Popen(
        [
            KERNELGAP,
            "sweep",
            str(cfg),
            "--out",
            str(out),
            "--executor",
            "ray",
            "--address",
            address,
            "--workers",
            "2",
            "--json",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed = None
    deadline = time.time() + 120
    while killed is None and time.time() < deadline and proc.poll() is None:
        busy = _task_workers()
        if busy:
            time.sleep(0.2)  # mid-task
            try:
                os.kill(busy[0], signal.SIGKILL)  # the worker's own pid, found above
                killed = busy[0]
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    stdout, stderr = proc.communicate()
    assert killed is not None, "no Ray worker was caught mid-task: the test has no teeth"
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout[stdout.index("{") :])
    assert summary["ran"] == TOTAL and summary["left"] == 0  # the killed task was retried
    ref, got = results(local), results(out)
    assert sorted(ref) == sorted(got)
    for run_id in ref:  # same stacks (same --workers), same numbers, bitwise
        assert stable(got[run_id]) == stable(ref[run_id])
