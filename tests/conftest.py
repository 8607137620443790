"""Shared test settings: CPU, deterministic, one thread, a fixed hypothesis profile."""

import compileall
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
import torch
from hypothesis import settings

#: src/ compiled once, in the controller only, before the workers start (every fresh interpreter
#: a test starts, a console script or a pool's forkserver, reads it instead of compiling the
#: package), and before denormals are flushed below: a literal compiled while they are read as
#: zero would be 0 in the cached bytecode
if "PYTEST_XDIST_WORKER" not in os.environ:
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "src", quiet=1)
torch.set_num_threads(1)
torch.set_flush_denormal(True)
#: Bytecode is written while the tests are collected, even where PYTHONDONTWRITEBYTECODE is set
#: (every xdist worker collects every test module: half of that is compiling them as pytest
#: rewrites them); the tests themselves run under the setting as it was (a module a test writes
#: and imports leaves no cache beside it)
WRITE_BYTECODE = not sys.dont_write_bytecode
sys.dont_write_bytecode = False

#: test modules whose assertions rest on floating-point results (models, training, product
#: families, theory, determinism): marked ``numerics``, and run again by ``make test-capabilities``
#: under every other ``ATEN_CPU_CAPABILITY`` this CPU has (tests/capabilities.py)
NUMERICS = {
    "test_block_tables",
    "test_bound_curve",
    "test_certificate",
    "test_certificate_fuzz",
    "test_checkpoints",
    "test_constructions",
    "test_constructions_length",
    "test_delta_exact",
    "test_determinism",
    "test_feature_maps",
    "test_heldout_recipe",
    "test_length_n",
    "test_level_search",
    "test_models",
    "test_numerical_safety",
    "test_product_family",
    "test_quantize",
    "test_radon",
    "test_sandwich",
    "test_softmax_recipe",
    "test_train_product",
    "test_trainer",
    "test_two_heads",
    "test_verify_length",
    "test_witness",
    "test_worst_case",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "numerics: floating-point results; rerun under other CPU capabilities")


def pytest_collection_finish(session):
    sys.dont_write_bytecode = not WRITE_BYTECODE


#: the longest test modules (`pytest --junitxml`, time summed per file), started first so that
#: the workers of `make test` (one module each at a time) finish together rather than one
#: running a long module alone at the end; `make test` passes `--no-loadscope-reorder`, or
#: xdist would hand out the modules with the most tests first instead
LONGEST_FIRST = (
    "test_fuzz_cli",
    "test_module_sandbox",
    "test_faults",
    "test_probe_leash",
    "test_beyond_pairs",
    "test_signals",
    "test_probe",
    "test_reproduce",
    "test_probe_structure",
    "test_heldout_layer",
    "test_probe_ux",
    "test_distill",
    "test_probe_safety",
    "test_prune",
    "test_product_family",
    "test_progress",
    "test_ray_faults",
    "test_probe_verdicts",
    "test_ray",
    "test_length_n",
    "test_kill_resume",
    "test_fuzz_folders",
    "test_sweeps",
    "test_bound_curve",
    "test_family_file_change",
    "test_restarts",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.stem in NUMERICS:
            item.add_marker(pytest.mark.numerics)
    order = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: order.get(item.path.stem, len(order)))  # stable: the rest as collected


settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.load_profile("ci")


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process: returns (exit_code, stdout, stderr)."""
    from kernelgap.cli import main

    def run(*args: str):
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture(scope="module")
def ray_head():
    """A ``ray start --head`` on a free port with 2 CPUs, its temp files in a private short
    folder (Ray's socket paths have a length limit); yields ``(address, env)`` and kills the
    head's whole process session afterwards.  ``RAY_TMPDIR`` is set while it runs."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'kernelgap[ray]')")
    tmp = tempfile.mkdtemp(prefix="kgray", dir="/tmp")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_TMPDIR": tmp, "HOME": tmp}
    head = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            f"--temp-dir={tmp}",
            "--disable-usage-stats",
        ],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
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
        yield f"127.0.0.1:{port}", env
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # raylet, GCS and workers share the session
        head.wait()
        if old is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = old
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def driver():
    """The command line pre-imported (tests/cli_driver.py): ``driver.run(argv, cwd, env)``
    for tests that check only a command's output and exit status."""
    from cli_driver import Driver

    server = Driver()
    try:
        yield server
    finally:
        server.close()
