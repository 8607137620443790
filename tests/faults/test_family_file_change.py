"""A family file rewritten while its sweep runs on the local pool: every record names the
content it was trained on, and a rerun of the sweep file is refused by name."""

import hashlib
import json
import subprocess
import time

import pytest
from fault_helpers import SWEEP, TOTAL, kill_group, results, sweep_cmd

from kernelgap.task import build_family, save_family

pytestmark = pytest.mark.slow  # processes, kills or whole probes: `make test-fast` leaves it to `make test`

FILE_SWEEP = SWEEP.replace('name = "hadamard"\nparams = {m = 12}', 'file = "fam.json"')


@pytest.mark.timeout(240)
def test_a_family_file_changed_mid_sweep(tmp_path):
    source = tmp_path / "fam.json"
    save_family(build_family("hadamard", m=12), source)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    sequences = len(build_family("hadamard", m=12))
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(FILE_SWEEP)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        sweep_cmd(cfg, out), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.time() + 120
        while not results(out):
            assert proc.poll() is None and time.time() < deadline, "no result before the change"
            time.sleep(0.05)
        save_family(build_family("hadamard", m=12, n=5), source, overwrite=True)  # other content
        assert proc.wait() == 0, proc.stderr.read()
    finally:
        kill_group(proc)
    done = results(out)
    assert len(done) == TOTAL
    for record in done.values():
        assert record["config"]["family"]["sha256"] == digest
        assert record["train"]["sequences"] == sequences
    rerun = subprocess.run(sweep_cmd(cfg, out), capture_output=True, text=True)
    assert rerun.returncode == 2 and rerun.stderr.count("\n") == 1
    assert "changed since the sweep" in rerun.stderr
    assert json.loads((out / "sweep.json").read_text())["family_files"] == {"fam.json": digest}
