"""The command line: output shapes, --version, one-line errors with exit 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgap import __version__


def test_version(cli):
    code, out, _ = cli("--version")
    assert code == 0 and out.strip() == f"kernelgap {__version__}"


def test_verify_json_schema(cli):
    code, out, _ = cli("verify", "--m", "3", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["m"] == 3
    assert {(c["construction"], c["N"]) for c in data["checks"]} == {
        (name, n) for name in ("rank1", "softmax", "positive_2m") for n in (1, 2, 3)
    }
    for c in data["checks"]:
        assert set(c) == {"construction", "N", "sequences", "max_error", "exact", "expected_exact", "as_expected"}
        expected = not (c["construction"] == "rank1" and c["N"] == 3)
        assert c["exact"] is expected


def test_verify_human_table(cli):
    code, out, _ = cli("verify", "--m", "2")
    assert code == 0 and "positive_2m" in out and "rank1" in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["verify", "--m", "0"], "--m must be ≥ 1"),
        (["verify", "--m", "12"], "too large for exhaustive"),
        (["verify", "--m", "two"], "Invalid value for '--m'"),
        (["verify"], "--m"),
        (["verify", "--m", "2", "--bogus"], "--bogus"),
        (["nonsense"], "nonsense"),
        (["verify", "--m", "2", "--device", "cuda:9"], "cuda"),
    ],
)
def test_bad_input_is_one_line_exit_2(cli, args, needle):
    code, out, err = cli(*args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
    assert "Traceback" not in err + out


def test_console_script_runs():
    exe = str(Path(sys.executable).parent / "kernelgap")
    proc = subprocess.run([exe, "verify", "--m", "1", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0 and json.loads(proc.stdout)["m"] == 1


def test_train_value_width_reaches_the_record(cli):
    args = "--family exhaustive -p m=2 --d-value 8 --mse-steps 1 --max-steps 1 --json"
    code, out, _ = cli("train", *args.split())
    assert code == 0
    record = json.loads(out)
    assert record["config"]["model"]["d_value"] == 8


def test_train_without_flags_trains_the_specs_defaults(cli, monkeypatch):
    """``kernelgap train`` with no model or schedule flags trains ``KernelSpec()`` — the spec's
    defaults are the command line's — and the run a ``RunConfig`` makes from the spec alone."""
    from kernelgap.models import KernelSpec
    from kernelgap.training import FamilySpec, RunConfig, trainer

    trained = []

    def capture(run, stream):
        trained.append(run)
        raise SystemExit(0)

    monkeypatch.setattr(trainer, "train_watched", capture)
    assert cli("train", "--family", "witness")[0] == 0
    (run,) = trained
    spec = KernelSpec()
    assert run.model == spec and (spec.feature_map, spec.rank, spec.readout) == ("table", 16, "linear")
    assert (
        run == RunConfig(family=FamilySpec(name="witness"), model=spec) == RunConfig(family=FamilySpec(name="witness"))
    )
    assert run.run_id() == RunConfig(family=FamilySpec(name="witness")).run_id()
    assert (run.train.mse_steps, run.train.max_steps) == (0, 5000)  # the table's own schedule
