"""The command line: output shapes, --version, one-line errors with exit 2."""

import json
import os
import re
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


@pytest.mark.parametrize("args", [["verify", "--m", "1", "--json"], ["verify", "--m", "0"]], ids=["ok", "refused"])
def test_the_pre_imported_command_line_answers_as_the_console_script(driver, tmp_path, args):
    """tests/cli_driver.py, which tests of a command's output and status use in place of a
    fresh process: the same status, standard output and standard error, from the same folder."""
    fresh = subprocess.run(
        [str(Path(sys.executable).parent / "kernelgap"), *args], capture_output=True, text=True, cwd=tmp_path
    )
    ours = driver.run(args, cwd=tmp_path)
    assert (ours.returncode, ours.stdout, ours.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert ours.pid != os.getpid() and fresh.returncode == (0 if args[-1] == "--json" else 2)


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


#: Every flag ``train`` and ``probe`` have always taken (those made from config fields included).
FLAGS = {
    "train": "--family -p --param --kind --feature-map --rank --readout --d-value --temperature --seed --lr "
    "--mse-steps --max-steps --power --no-early-stop --restarts --distill --prune-from --device --json",
    "probe": "--kwargs --out --profile --ranks --seeds --steps --lr --interface --arg --output --d-model "
    "--executor --workers --address --recipes --no-recipes --time-limit --features --kernel --device --baseline --json",
}


@pytest.mark.parametrize("command", sorted(FLAGS))
def test_the_help_lists_every_flag_and_each_config_fields_description(cli, command):
    from kernelgap.probe.config import ProbeConfig
    from kernelgap.training.command_line import train_fields

    code, out, _ = cli(command, "--help")
    text = " ".join(out.split())
    listed = set(re.findall(r"(?<![\w-])--?[\w-]+", text))
    assert code == 0 and set(FLAGS[command].split()) <= listed, set(FLAGS[command].split()) - listed
    fields = train_fields() if command == "train" else ProbeConfig.model_fields
    described = [f.description for f in fields.values()]
    assert all(description[1:] in text for description in described), text


def test_only_the_command_run_imports_its_config_models():
    """The flags made from config fields are made for the command run: another command (here
    ``bound transcript``) imports neither the training nor the probe's config models."""
    models = ("kernelgap.training.config", "kernelgap.probe.config", "kernelgap.models.specs")
    code = (
        "import sys; from kernelgap.cli import main; "
        "main(['bound', 'transcript', '--answers', '2', '--values', '3']); "
        f"print([m for m in {models!r} if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "[]", proc.stdout + proc.stderr
