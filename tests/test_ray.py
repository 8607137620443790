"""The Ray executor against a local ``ray start --head`` gives the local executor's results (issue #4)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kernelgap[ray]')")

from kernelgap.sweeps import run_sweep  # noqa: E402

pytestmark = pytest.mark.ray

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head():
    """A Ray head on a free port, its temp files in a private folder; stopped afterwards."""
    tmp = tempfile.mkdtemp(prefix="kgray", dir="/tmp")  # short: Ray's socket paths have a length limit
    port = free_port()
    env = {**os.environ, "RAY_TMPDIR": tmp, "HOME": tmp}
    ray_bin = str(Path(sys.executable).with_name("ray"))
    head = subprocess.Popen(
        [ray_bin, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", f"--temp-dir={tmp}", "--disable-usage-stats"],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert head.poll() is None, "ray start --head exited"
        time.sleep(0.2)
    time.sleep(1.0)
    old = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = tmp
    try:
        yield address
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        try:
            os.killpg(head.pid, signal.SIGKILL)  # anything of that session left behind
        except ProcessLookupError:
            pass
        if old is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = old
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.timeout(300)
def test_ray_sweep_matches_local(tmp_path, ray_head):
    cfg = tmp_path / "ray.toml"
    cfg.write_text(SWEEP)
    via_ray = run_sweep(cfg, tmp_path / "ray", executor="ray", address=ray_head, progress=False)
    assert via_ray.ran == 8
    local = run_sweep(cfg, tmp_path / "local", executor="local", workers=2, progress=False)
    assert local.ran == 8
    for path in (tmp_path / "local" / "runs").glob("*.json"):
        a = json.loads(path.read_text())
        b = json.loads((tmp_path / "ray" / "runs" / path.name).read_text())
        assert a["status"] == b["status"] and a["steps"] == b["steps"]
        assert a["train"]["max_error"] == pytest.approx(b["train"]["max_error"], abs=1e-6)
    again = run_sweep(tmp_path / "ray", executor="ray", address=ray_head, progress=False)
    assert again.ran == 0 and again.done_before == 8


def test_missing_ray_is_a_one_line_error(monkeypatch, tmp_path):
    from kernelgap.errors import KernelgapError
    from kernelgap.sweeps.executors import make_executor

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray → ImportError
    with pytest.raises(KernelgapError, match="needs Ray"):
        make_executor("ray")
