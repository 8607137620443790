"""The probe is as safe as a sweep: whatever the module does — NaN, infinities, failures at
import, in a check or in training, ``SystemExit`` — the user gets either a result (a
diverged run is one) or one line ``error: …`` with exit status 2, naming the module and
the phase, and nothing already written is lost or changed.

The cases that are about the command line run through it (in process with the ``cli``
fixture, or through the installed console script where a worker process is involved).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelgap.errors import KernelgapError
from kernelgap.probe import ProbeConfig, run_probe
from kernelgap.sweeps import run_sweep
from test_bad_input import _check, tree_digest

QUIET = {"log": lambda *_: None, "executor": "inline"}


def probe_module(target, kwargs=None, log=print, **settings) -> dict:
    """:func:`run_probe` of the :class:`ProbeConfig` these settings make."""
    return run_probe(ProbeConfig(target, kwargs or {}, **settings), log=log)


FAST = ["--steps", "3", "--executor", "inline"]

MODULES = '''
import sys

import torch
from torch import nn


class Mean(nn.Module):
    """'sequence' interface: tokens [B, N, m] -> [B, N]."""

    def __init__(self, m, rank, alpha=1.0):
        super().__init__()
        self.rank = rank
        self.lin = nn.Linear(m, rank)
        self.out = nn.Linear(rank, 1)

    def forward(self, tokens):
        h = self.lin(tokens).mean(dim=1, keepdim=True)
        return self.out(h + self.lin(tokens)).squeeze(-1)


class NaNFromTheStart(Mean):
    def forward(self, tokens):
        return super().forward(tokens) * float("nan")


class NeedsGradients(Mean):
    """Fails under torch.no_grad, as fla's layers do on the CPU."""

    def forward(self, tokens):
        if not torch.is_grad_enabled():
            raise RuntimeError("this kernel has no inference path")
        return super().forward(tokens)


class SmallBatchesOnly(Mean):
    def forward(self, tokens):
        if tokens.shape[0] > 2:
            raise RuntimeError("out of shared memory\\n(a second line)")
        return super().forward(tokens)


class FailsOnTheCausalityBatch(Mean):
    def forward(self, tokens):
        if tokens.shape[0] == 64:
            raise RuntimeError("batch of 64")
        return super().forward(tokens)


class FailsInTrainingAtRank3(Mean):
    def forward(self, tokens):
        if self.rank == 3:
            raise RuntimeError("rank 3 breaks\\nover two lines")
        return super().forward(tokens)


class ExitsInTrainingAtRank3(Mean):
    def forward(self, tokens):
        if self.rank == 3:
            sys.exit(5)
        return super().forward(tokens)


class ExitsWhenBuilt(Mean):
    def __init__(self, m, rank):
        raise SystemExit("no thanks")


class ExitsInTheCheck(Mean):
    def forward(self, tokens):
        raise SystemExit(4)


class Constant(nn.Module):
    def __init__(self, m, rank):
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(1))

    def forward(self, tokens):
        return torch.zeros(tokens.shape[:2])


class Library(nn.Module):
    """A library-style layer: its own argument names."""

    def __init__(self, dim, nb_features=8, heads=4):
        super().__init__()
        self.q = nn.Linear(dim, nb_features)
        self.o = nn.Linear(nb_features, dim)

    def forward(self, x):
        return self.o(self.q(x))
'''


@pytest.fixture()
def world(tmp_path, monkeypatch):
    """A folder holding the modules (``mods.py``), a module whose import exits, and a
    file in the way; the current folder, so targets are given as a user types them."""
    (tmp_path / "mods.py").write_text(MODULES)
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "raises.py").write_text("raise ValueError('broken\\nat import')\n")
    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def strict(path: Path):
    return json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{path} holds {c}"))


# -- arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--arg", "m=m", "--arg", "rank=rank", "--arg", "alpha=NaN"], "args.alpha: must be a finite number, got nan"),
        (
            ["--arg", "m=m", "--arg", "rank=rank", "--arg", "alpha=Infinity"],
            "args.alpha: must be a finite number, got inf",
        ),
        (["--arg", "m=m", "--arg", "rank=rank", "--arg", "alpha=-Infinity"], "got -inf"),
        (["--kwargs", '{"alpha": NaN}'], "kwargs.alpha: must be a finite number, got nan"),
        (["--kwargs", '{"alpha": 1e999}'], "kwargs.alpha: must be a finite number, got inf"),
        (["--kwargs", '{"alpha": [1, {"beta": -Infinity}]}'], "kwargs.alpha[1].beta: must be a finite number"),
    ],
    ids=["arg-nan", "arg-inf", "arg-minus-inf", "kwargs-nan", "kwargs-overflow", "kwargs-nested"],
)
def test_non_finite_arguments_are_refused_before_anything_is_written(world, cli, flags, needle):
    before = tree_digest(world)
    code, out, err = cli("probe", "mods.py:Mean", "--ranks", "2", *FAST, "--out", "p", *flags)
    _check(code, out, err, needle)
    assert tree_digest(world) == before and not (world / "p").exists()


def test_non_finite_arguments_are_refused_in_a_sweep_file_and_through_python(world):
    (world / "nan.toml").write_text(SWEEP.replace("[train]", "[model.module.kwargs]\nalpha = nan\n[train]"))
    with pytest.raises(KernelgapError, match=r"model\.module\.kwargs\.alpha: must be a finite number, got nan"):
        run_sweep(world / "nan.toml", world / "s", executor="inline", progress=False)
    with pytest.raises(KernelgapError, match=r"kwargs\.alpha: must be a finite number, got inf"):
        probe_module("mods.py:Mean", {"alpha": float("inf")}, out=world / "p", ranks=[2], steps=3, **QUIET)
    assert not (world / "s").exists() and not (world / "p").exists()


def test_an_argument_map_must_bind_the_rank(world, cli):
    before = tree_digest(world)
    code, out, err = cli(
        "probe",
        "mods.py:Library",
        "--interface",
        "layer",
        "--arg",
        "dim=d_model",
        "--ranks",
        "2,4",
        *FAST,
        "--out",
        "p",
    )
    _check(code, out, err, "binds no constructor argument to rank")
    assert "--arg nb_features=rank" in err  # the argument to bind, named
    code, out, err = cli(
        "probe",
        "mods.py:Library",
        "--interface",
        "layer",
        "--arg",
        "dim=d_model",
        "--arg",
        "nb_features=rank",
        "--kwargs",
        '{"nb_features": 8}',
        *FAST,
        "--out",
        "p",
    )
    _check(code, out, err, "'nb_features' is given both in kwargs and in the argument map args")
    assert tree_digest(world) == before


# -- what the module does ----------------------------------------------------------------


def test_a_module_giving_nan_from_its_first_forward_is_a_diverged_result(world, cli):
    code, _, err = cli("probe", "mods.py:NaNFromTheStart", "--ranks", "2", *FAST, "--out", "p")
    assert code == 0, err
    meta = strict(world / "p" / "probe.json")
    records = sorted((world / "p" / meta["runs"]).rglob("runs/*.json"))
    assert len(records) == 2  # witness and ood-n4, one rank each
    for path in records:
        record = strict(path)
        assert record["status"] == "diverged" and record["train"]["max_error"] is None
    strict(world / "p" / "summary.json")


def test_checks_and_evaluation_run_with_gradients_enabled(world):
    """A module whose forward fails under torch.no_grad trains: the checks, the causality
    reading and the trainer's final evaluation all run it as a training step does."""
    meta = probe_module("mods.py:NeedsGradients", out=world / "p", ranks=[2], steps=3, **QUIET)
    assert meta["reading"] == "first"
    for path in (world / "p" / meta["runs"]).rglob("runs/*.json"):
        assert strict(path)["status"] == "ok"


@pytest.mark.parametrize(
    "cls, needle",
    [
        (
            "SmallBatchesOnly",
            (
                "module mods.py:SmallBatchesOnly failed while checking a training step at rank 2 "
                "on the witness family (736 sequences): RuntimeError: out of shared memory (a second line)"
            ),
        ),
        (
            "FailsOnTheCausalityBatch",
            (
                "module mods.py:FailsOnTheCausalityBatch failed while checking causality "
                "on tokens [64, 3, 24]: RuntimeError: batch of 64"
            ),
        ),
        (
            "ExitsInTheCheck",
            (
                "module mods.py:ExitsInTheCheck failed while checking the interface at rank 2 "
                "on tokens [2, 3, 24]: SystemExit(4)"
            ),
        ),
        ("ExitsWhenBuilt", "ExitsWhenBuilt(24, 2) failed at rank 2 (sequence interface): SystemExit('no thanks')"),
        ("Constant", "Constant at rank 2 (sequence interface): its predictions do not depend on its parameters"),
    ],
)
def test_a_module_failing_in_a_check_is_one_line_naming_it_and_the_phase(world, cli, cls, needle):
    before = tree_digest(world)
    code, out, err = cli("probe", f"mods.py:{cls}", "--ranks", "2", *FAST, "--out", "p")
    _check(code, out, err, needle)
    assert tree_digest(world) == before


@pytest.mark.parametrize(
    "target, needle",
    [
        ("exits.py:X", "module exits.py:X failed while importing: SystemExit(3)"),
        ("raises.py:X", "module raises.py:X failed while importing: ValueError: broken at import"),
    ],
)
def test_a_module_failing_at_import_is_one_line_not_its_exit_status(driver, world, target, needle):
    """As the console script runs it (a process of its own, tests/cli_driver.py): a module's
    ``sys.exit(3)`` must not become the exit status."""
    before = tree_digest(world)
    proc = driver.run(["probe", target, "--out", "p"], cwd=world)
    _check(proc.returncode, proc.stdout, proc.stderr, needle)
    assert tree_digest(world) == before


def test_a_module_failing_in_a_pool_worker_is_one_line_and_finished_runs_stay(driver, world):
    """Rank 2 passes every check and trains; rank 3 raises in its worker.  The error comes
    back through the process pool as one line naming module, phase and rank; rank 2's
    result is written and no probe.json claims a finished probe."""
    proc = driver.run(
        [
            "probe",
            "mods.py:FailsInTrainingAtRank3",
            "--ranks",
            "2,3",
            "--steps",
            "3",
            "--executor",
            "local",
            "--workers",
            "2",
            "--out",
            "p",
        ],
        cwd=world,
    )
    _check(
        proc.returncode,
        proc.stdout,
        proc.stderr,
        "module mods.py:FailsInTrainingAtRank3 failed while "
        "training at rank 3, seed 0: RuntimeError: rank 3 breaks over two lines",
    )
    (runs,) = (world / "p").glob("runs-*")
    records = [strict(p) for p in (runs / "witness" / "runs").glob("*.json")]
    assert [r["config"]["model"]["rank"] for r in records] == [2] and records[0]["status"] == "ok"
    assert not (world / "p" / "probe.json").exists()


def test_a_module_exiting_in_training_is_one_line_and_finished_runs_stay(world, cli):
    code, out, err = cli("probe", "mods.py:ExitsInTrainingAtRank3", "--ranks", "2,3", *FAST, "--out", "p")
    _check(
        code, out, err, "module mods.py:ExitsInTrainingAtRank3 failed while training at rank 3, seed 0: SystemExit(5)"
    )
    (runs,) = (world / "p").glob("runs-*")
    assert [strict(p)["config"]["model"]["rank"] for p in (runs / "witness" / "runs").glob("*.json")] == [2]


# -- the results folder ------------------------------------------------------------------


@pytest.mark.parametrize(
    "out, needle",
    [
        ("a-file", "probe folder a-file is a file, not a folder"),
        ("a-file/p", "cannot write to probe folder a-file/p"),
    ],
)
def test_out_on_a_file_is_refused_and_the_file_untouched(world, cli, out, needle):
    before = tree_digest(world)
    code, stdout, err = cli("probe", "mods.py:Mean", "--ranks", "2", *FAST, "--out", out)
    _check(code, stdout, err, needle)
    assert tree_digest(world) == before


# -- module runs from a sweep file -------------------------------------------------------

SWEEP = """
name = "module"
[family]
name = "witness"
[model]
kind = "module"
[model.module]
target = "mods.py:Mean"
[train]
mse_steps = 1
max_steps = 1
[grid]
model.rank = [2]
"""


def test_a_sweep_file_names_its_module_runs_by_the_source(world):
    """A hand-written module sweep hashes the module's source into the run id: an edited
    module trains anew (it is a new sweep), and a given hash that no longer matches is refused."""
    (world / "sweep.toml").write_text(SWEEP)

    def runs(folder: str) -> dict[str, dict]:
        run_sweep(world / "sweep.toml", world / folder, executor="inline", progress=False)
        return {p.stem: strict(p) for p in (world / folder / "runs").glob("*.json")}

    first = runs("one")
    (record,) = first.values()
    assert len(record["config"]["model"]["module"]["source_hash"]) == 64
    assert runs("one").keys() == first.keys()  # unchanged module: the same run, reused
    (world / "mods.py").write_text(MODULES + "\n# an edit\n")
    edited = runs("two")
    assert edited.keys() != first.keys()
    (changed,) = edited.values()
    assert changed["config"]["model"]["module"]["source_hash"] != record["config"]["model"]["module"]["source_hash"]
    with pytest.raises(KernelgapError, match="holds a different sweep"):  # the old folder is not mixed in
        run_sweep(world / "sweep.toml", world / "one", executor="inline", progress=False)
    stale = SWEEP.replace("[train]", f'source_hash = "{record["config"]["model"]["module"]["source_hash"]}"\n[train]')
    (world / "stale.toml").write_text(stale)
    with pytest.raises(KernelgapError, match="does not match the source of mods.py:Mean"):
        run_sweep(world / "stale.toml", world / "three", executor="inline", progress=False)
    assert not (world / "three").exists()


def test_a_sweep_file_whose_module_exits_at_import_is_one_line(world, cli):
    (world / "exits.toml").write_text(SWEEP.replace("mods.py:Mean", "exits.py:X"))
    before = tree_digest(world)
    code, out, err = cli("sweep", "exits.toml", "--out", "s", "--executor", "inline")
    _check(code, out, err, "module exits.py:X failed while importing: SystemExit(3)")
    assert tree_digest(world) == before


def test_a_module_failing_in_a_sweep_is_one_line_and_finished_runs_stay(world):
    (world / "fails.toml").write_text(
        SWEEP.replace("mods.py:Mean", "mods.py:FailsInTrainingAtRank3").replace(
            "model.rank = [2]", "model.rank = [2, 3]"
        )
    )
    with pytest.raises(KernelgapError) as info:
        run_sweep(world / "fails.toml", world / "s", executor="inline", progress=False)
    assert "module mods.py:FailsInTrainingAtRank3 failed while training at rank 3, seed 0" in str(info.value)
    assert "\n" not in str(info.value)
    assert [strict(p)["config"]["model"]["rank"] for p in (world / "s" / "runs").glob("*.json")] == [2]


def test_a_worker_refuses_a_module_whose_source_changed_after_its_run_was_configured(world):
    import torch

    from kernelgap.models.external import ModuleFailure, ModuleSpec, build_external

    spec = ModuleSpec(target="mods.py:Mean")
    build_external(spec, 24, 2, 0, torch.float32)
    (world / "mods.py").write_text(MODULES + "\n# edited meanwhile\n")
    with pytest.raises(ModuleFailure, match="changed after the run was configured"):
        build_external(spec, 24, 2, 0, torch.float32)


def test_a_switch_named_like_a_state_size_is_not_taken_for_the_rank():
    """The rank-binding check passes over an argument whose default is a bool (a switch, as
    x-transformers' ``low_rank_silu_gates=True``) and names the first size-named one left."""
    from types import SimpleNamespace

    from kernelgap.models.module_spec import likely_rank

    class Layer:
        def __init__(self, dim, low_rank_gates=True, gate_rank=None, dim_head=64): ...

    bound = SimpleNamespace(args={"dim": "d_model"}, kwargs={})
    assert likely_rank(Layer, bound) == "gate_rank"
    bound.args["gate_rank"] = 1
    assert likely_rank(Layer, bound) == "dim_head"
    bound.args["dim_head"] = "d_model"
    assert likely_rank(Layer, bound) is None


def test_a_missing_module_file_is_a_module_not_installed(tmp_path):
    """A file target that is not there is refused as an import (so a profile run elsewhere than
    the repository lists that probe as not probed); a folder in its place stays an error."""
    from kernelgap.models.module_spec import ModuleError, ModuleImportError, load_target

    with pytest.raises(ModuleImportError, match=r"module file .*nowhere\.py does not exist"):
        load_target(f"{tmp_path}/nowhere.py:Mine")
    (tmp_path / "dir.py").mkdir()
    with pytest.raises(ModuleError, match="is a folder") as caught:
        load_target(f"{tmp_path}/dir.py:Mine")
    assert not isinstance(caught.value, ModuleImportError)


def test_a_profile_probe_of_a_missing_file_is_skipped_saying_so(tmp_path):
    """The probe step lists a module file that is not there as not probed, naming the file
    (not a library to install); a missing library still names its extra."""
    from kernelgap.experiments.probe import step
    from kernelgap.experiments.probe.section import SKIPPED
    from kernelgap.probe.config import parse_probes
    from kernelgap.report.integrity import unsealed

    missing = {"name": "mine", "target": f"{tmp_path}/nowhere.py:Mine"}
    library = {"name": "lib", "target": "no_such_library_here:Attention", "requires": "no-such-library"}
    for entry in parse_probes([missing, library], tmp_path / "p.toml"):
        step._probe_one(entry, tmp_path, {})
    why = {name: unsealed(json.loads((tmp_path / name / SKIPPED).read_text()))["why"] for name in ("mine", "lib")}
    assert why["mine"].startswith("module file") and "nowhere.py does not exist" in why["mine"]
    assert "zoo" not in why["mine"]
    assert why["lib"].startswith("no-such-library is not installed (pip install 'kernelgap[zoo]')")
