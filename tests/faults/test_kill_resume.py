"""A witness sweep killed with SIGKILL mid-run resumes to exactly one result per run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # processes, kills or whole probes: `make test-fast` leaves it to `make test`

SWEEP = """
name = "witness-kill"
[family]
name = "witness"
[model]
feature_map = "table"
[train]
mse_steps = 60
max_steps = 120
stop_below = 0.5
dtype = "float64"  # bitwise-stable enough to compare a resumed sweep tightly
[grid]
model.rank = [2, 16]
train.lr = [0.03, 0.02, 0.015, 0.01]
"""


def sweep_cmd(cfg: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "kernelgap.cli", "sweep", str(cfg), "--out", str(out), "--workers", "1", "--json"]


def results(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (out / "runs").glob("*.json")}


@pytest.mark.timeout(240)
def test_sigkill_mid_sweep_then_resume(tmp_path, driver):
    """Killed as it runs (the real command line, its session SIGKILLed), resumed and run clean
    through the pre-imported one (tests/cli_driver.py)."""
    cfg = tmp_path / "kill.toml"
    cfg.write_text(SWEEP)
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    proc = subprocess.Popen(
        sweep_cmd(cfg, killed), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (killed / "runs").is_dir() or not list((killed / "runs").glob("*.json")):
            assert proc.poll() is None, "the sweep finished before it could be killed"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the pool workers of that sweep
        except ProcessLookupError:
            pass
    partial = results(killed)
    assert 0 < len(partial) < 8
    for out in (killed, clean):
        done = driver.run(sweep_cmd(cfg, out)[3:])
        assert done.returncode == 0, done.stderr
    resumed, reference = results(killed), results(clean)
    assert sorted(resumed) == sorted(reference) and len(reference) == 8
    assert all(not name.endswith(".tmp") for name in os.listdir(killed / "runs") if not name.startswith("."))
    for run_id, record in reference.items():
        assert resumed[run_id]["status"] == record["status"]
        assert resumed[run_id]["train"]["exact"] == record["train"]["exact"]
        assert resumed[run_id]["train"]["max_error"] == pytest.approx(record["train"]["max_error"], abs=1e-6)
    for run_id, record in partial.items():  # finished runs were not redone
        assert resumed[run_id]["wall_time_s"] == record["wall_time_s"]
