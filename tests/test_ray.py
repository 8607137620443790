"""The Ray executor against a local ``ray start --head`` gives the local executor's results.
(The console script on Ray, its ``--json`` output parsing whole: tests/test_install.py.)"""

import json
import subprocess
import sys

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kernelgap[ray]')")

from kernelgap.sweeps import run_sweep  # noqa: E402

pytestmark = pytest.mark.ray  # one worker runs this file (make test: --dist loadfile)

SWEEP = """
name = "ray-check"
[family]
name = "witness"
[model]
feature_map = "table"
[train]
mse_steps = 40
max_steps = 80
dtype = "float64"
[grid]
model.rank = [2, 16]
seed = [0, 1]
train.lr = [0.03, 0.01]
"""


@pytest.mark.timeout(300)
def test_ray_sweep_matches_local(tmp_path, ray_head):
    cfg = tmp_path / "ray.toml"
    cfg.write_text(SWEEP)
    via_ray = run_sweep(cfg, tmp_path / "ray", executor="ray", address=ray_head[0], progress=False)
    assert via_ray.ran == 8
    local = run_sweep(cfg, tmp_path / "local", executor="local", workers=2, progress=False)
    assert local.ran == 8
    for path in (tmp_path / "local" / "runs").glob("*.json"):
        a = json.loads(path.read_text())
        b = json.loads((tmp_path / "ray" / "runs" / path.name).read_text())
        assert a["status"] == b["status"] and a["steps"] == b["steps"]
        assert a["train"]["max_error"] == pytest.approx(b["train"]["max_error"], abs=1e-6)
    again = run_sweep(tmp_path / "ray", executor="ray", address=ray_head[0], progress=False)
    assert again.ran == 0 and again.done_before == 8


RAY_SAYS = """
import sys
from ray._private.worker import print_to_stdstream
from kernelgap.sweeps.executors import make_executor

pool = make_executor("ray", address=sys.argv[1])
print_to_stdstream({"lines": ["ray-says-a-worker-died"], "pid": "raylet", "is_err": False}, ignore_prefix=False)
pool.shutdown()
print("kernelgap-json")
"""


@pytest.mark.timeout(120)
def test_ray_messages_never_reach_standard_output(ray_head):
    """Ray prints its own messages ("a worker died …") to sys.stdout from a thread of its own,
    whatever ``log_to_driver`` says; while the executor is up they go to standard error, so a
    ``--json`` summary printed after the work parses whole (a process of its own: under pytest's
    capture sys.stdout does not write to file descriptor 1)."""
    done = subprocess.run([sys.executable, "-c", RAY_SAYS, ray_head[0]], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ray-says-a-worker-died" in done.stderr
    assert done.stdout == "kernelgap-json\n"


def test_missing_ray_is_a_one_line_error(monkeypatch, tmp_path):
    from kernelgap.errors import KernelgapError
    from kernelgap.sweeps.executors import make_executor

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray → ImportError
    with pytest.raises(KernelgapError, match="needs Ray"):
        make_executor("ray")
