"""The probe: any attention module through the witness and OOD suites, beside the built-in
elu1, every run through the sweep machinery."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelgap.errors import KernelgapError
from kernelgap.probe import ProbeConfig, run_probe

pytestmark = pytest.mark.slow  # processes, kills or whole probes: `make test-fast` leaves it to `make test`

TARGET = "kernelgap.probe.examples:DecayedLinearAttention"
QUIET = {"log": lambda *_: None, "executor": "inline"}


def probe_module(target, kwargs=None, log=print, **settings) -> dict:
    """:func:`run_probe` of the :class:`ProbeConfig` these settings make."""
    return run_probe(ProbeConfig(target, kwargs or {}, **settings), log=log)


USER_MODULES = '''
import torch
from torch import nn


class MeanModel(nn.Module):
    """'sequence' interface: tokens [B, N, m] -> [B, N]."""

    def __init__(self, m, rank, scale=1.0):
        super().__init__()
        self.lin = nn.Linear(m, rank)
        self.out = nn.Linear(rank, 1)
        self.scale = scale

    def forward(self, tokens):
        h = self.lin(tokens).mean(dim=1, keepdim=True) * self.scale
        return self.out(h + self.lin(tokens)).squeeze(-1)


class CausalModel(MeanModel):
    """Position i sees positions 1..i only: position 1 sees itself alone."""

    def forward(self, tokens):
        h = self.lin(tokens).cumsum(dim=1) / torch.arange(1, tokens.shape[1] + 1)[None, :, None]
        return self.out(h * self.scale).squeeze(-1)


class Exploding(MeanModel):
    def forward(self, tokens):
        return super().forward(tokens) * float("inf")


class WrongShape(nn.Module):
    def __init__(self, m, rank):
        super().__init__()
        self.lin = nn.Linear(m, 1)

    def forward(self, tokens):
        return self.lin(tokens)          # [B, N, 1], not [B, N]


class NoRank(nn.Module):
    def __init__(self, m):
        super().__init__()


class EightsOnly(MeanModel):
    def __init__(self, m, rank):
        if rank % 8:
            raise ValueError("rank must be a multiple of 8")
        super().__init__(m, rank)


class NotAModule:
    pass


class LibraryLayer(nn.Module):
    """A library-style layer: its own argument names, a tuple out."""

    def __init__(self, dim, nb_features, heads=4):
        super().__init__()
        assert heads == 1, "this test binds heads=1"
        self.q = nn.Linear(dim, nb_features)
        self.o = nn.Linear(nb_features, dim)

    def forward(self, x):
        a = torch.softmax(self.q(x) @ self.q(x).transpose(1, 2), dim=-1)
        return self.o(a @ self.q(x)), a
'''


@pytest.fixture()
def user_file(tmp_path):
    path = tmp_path / "user_modules.py"
    path.write_text(USER_MODULES)
    return path


def test_the_example_through_the_cli_stands_alone(cli, tmp_path):
    out = tmp_path / "probe"
    code, stdout, err = cli(
        "probe",
        TARGET,
        "--ranks",
        "witness=2,4",
        "--ranks",
        "ood-n4=2",
        "--steps",
        "6",
        "--out",
        str(out),
        "--kwargs",
        '{"decay_init": 0.8}',
        "--executor",
        "inline",
    )
    assert code == 0, err
    meta = json.loads((out / "probe.json").read_text())
    assert meta["interface"] == "layer" and meta["kwargs"] == {"decay_init": 0.8} and meta["reading"] == "first"
    assert len(meta["source_hash"]) == 64 and meta["parameters"]["module"] > 0 and meta["parameters"]["wrapper"] > 0
    assert [s["ranks"] for s in meta["suites"]] == [[2, 4], [2]]
    assert meta["suites"][0]["certified_rank"] == 16
    module_runs = sorted((out / meta["runs"] / "witness" / "runs").glob("*.json"))
    baseline = sorted((out / "baseline" / meta["suites"][0]["baseline_folder"] / "runs").glob("*.json"))
    assert len(module_runs) == 2 and len(baseline) == 2
    assert json.loads(module_runs[0].read_text())["steps"] == 6
    (summary,) = json.loads((out / "summary.json").read_text())["probes"]
    assert [s["name"] for s in summary["suites"]] == ["witness", "ood-n4"]
    assert summary["suites"][0]["baseline"][0]["feature_map"] == "elu1"
    page = (out / "report.html").read_text()
    assert "DecayedLinearAttention" in page and "Beyond the paper" not in page and "<img" in page
    assert "decay_init" in page and "certified rank" in page and "every run (steps and time)" in page


def test_rerun_reuses_runs_and_an_edited_module_retrains(user_file, tmp_path):
    target = f"{user_file}:MeanModel"
    logs = []
    meta = probe_module(target, ranks=[2], steps=6, out=tmp_path, log=logs.append, executor="inline")
    first = sorted((tmp_path / meta["runs"]).rglob("runs/*.json"))
    stamps = {p: p.stat().st_mtime_ns for p in first}
    logs.clear()
    again = probe_module(target, ranks=[2], steps=6, out=tmp_path, log=logs.append, executor="inline")
    assert again == meta and {p: p.stat().st_mtime_ns for p in first} == stamps
    assert all("0 trained" in line for line in logs if "runs," in line)
    user_file.write_text(USER_MODULES + "\n# an edit\n")
    edited = probe_module(target, ranks=[2], steps=6, out=tmp_path, **QUIET)
    assert edited["runs"] != meta["runs"] and edited["source_hash"] != meta["source_hash"]
    assert len(list((tmp_path / edited["runs"]).rglob("runs/*.json"))) == 2  # trained anew ...
    assert all(p.exists() for p in first)  # ... and the earlier results are kept


def test_a_probe_folder_of_other_settings_is_refused_not_overwritten(user_file, tmp_path):
    target = f"{user_file}:MeanModel"
    probe_module(target, ranks=[2], steps=3, out=tmp_path, **QUIET)
    before = (tmp_path / "probe.json").read_bytes()
    with pytest.raises(KernelgapError, match="another module or other settings"):
        probe_module(target, {"scale": 2.0}, ranks=[2], steps=3, out=tmp_path, **QUIET)
    assert (tmp_path / "probe.json").read_bytes() == before


def test_a_causal_module_gets_the_final_query_reading(user_file, tmp_path):
    meta = probe_module(f"{user_file}:CausalModel", ranks=[2], steps=3, out=tmp_path, **QUIET)
    assert meta["reading"] == "final"
    assert all(s["params"]["reading"] == "final" for s in meta["suites"])
    record = json.loads(next((tmp_path / meta["runs"] / "witness-final" / "runs").glob("*.json")).read_text())
    assert record["config"]["family"]["params"]["reading"] == "final"
    from kernelgap.reproduction import build_probe_report

    build_probe_report(tmp_path, log=lambda *_: None)
    assert "causal final-query reading" in (tmp_path / "report.html").read_text()


def test_a_diverging_module_leaves_strict_json(user_file, tmp_path):
    from kernelgap.reproduction import build_probe_report

    meta = probe_module(f"{user_file}:Exploding", ranks=[2], steps=3, out=tmp_path, **QUIET)
    build_probe_report(tmp_path, log=lambda *_: None)
    for path in (tmp_path / meta["runs"]).rglob("runs/*.json"):
        record = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{path} holds {c}"))
        assert record["status"] == "diverged" and record["train"]["max_error"] is None
    json.loads((tmp_path / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert "diverged at step 0" in (tmp_path / "report.html").read_text()


def test_a_library_class_through_an_argument_map(user_file, tmp_path):
    meta = probe_module(
        f"{user_file}:LibraryLayer",
        ranks=[2],
        steps=3,
        out=tmp_path,
        interface="layer",
        args={"dim": "d_model", "nb_features": "rank", "heads": 1},
        output=0,
        **QUIET,
    )
    assert meta["args"] == {"dim": "d_model", "nb_features": "rank", "heads": 1} and meta["output"] == 0


@pytest.mark.parametrize(
    "cls, kwargs, message",
    [
        ("WrongShape", {}, "WrongShape at rank 16 (sequence interface) does not follow the interface"),
        ("NoRank", {}, "NoRank has no trainable parameters"),  # no rank: built rank-free, NoRank(m=24)
        (
            "EightsOnly",
            {},
            "EightsOnly(24, 4) failed at rank 4 (sequence interface): ValueError: rank must be a multiple of 8",
        ),
        ("NotAModule", {}, "is not a torch.nn.Module subclass"),
        ("Missing", {}, "has no attribute 'Missing'"),
        ("MeanModel", {"bogus": 1}, "unexpected keyword argument 'bogus'"),
    ],
)
def test_modules_off_the_interface_are_one_line_errors(user_file, tmp_path, cls, kwargs, message):
    ranks = {"witness": [4], "ood-n4": [8]} if cls == "EightsOnly" else None
    with pytest.raises(KernelgapError) as info:
        probe_module(f"{user_file}:{cls}", kwargs, ranks=ranks, out=tmp_path / "p", **QUIET)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "p").exists()  # nothing written before the module was accepted


def test_import_errors_say_how_to_name_a_local_file(cli, tmp_path, monkeypatch):
    (tmp_path / "mymod.py").write_text(USER_MODULES)
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("probe", "mymod:MeanModel")
    assert code == 2 and "give it as mymod.py:MeanModel, or run with PYTHONPATH=." in err
    code, _, err = cli("probe", "no_such_pkg.mod:X")
    assert code == 2 and "cannot import module 'no_such_pkg.mod'" in err
    code, _, err = cli("probe", "nonsense")
    assert code == 2 and "package.module:Class or file.py:Class" in err


def test_probe_workers_give_the_same_records(user_file, tmp_path):
    """A module trains alone, so a pool of two gives its records bit for bit; the baseline's
    ranks stack differently in a pool (other BLAS shapes), so they agree within tolerance."""

    def records(folder: Path) -> dict:
        return {p.name: json.loads(p.read_text()) for p in sorted(folder.rglob("runs/*.json"))}

    target = f"{user_file}:MeanModel"
    meta = probe_module(target, ranks=[2, 3], steps=6, out=tmp_path / "one", **QUIET)
    probe_module(target, ranks=[2, 3], steps=6, out=tmp_path / "two", workers=2, log=lambda *_: None)
    for part in (meta["runs"], "baseline"):
        one, two = records(tmp_path / "one" / part), records(tmp_path / "two" / part)
        assert one.keys() == two.keys() and len(one) == 4  # 2 suites × 2 ranks
        for name in one:
            a, b = one[name]["train"], two[name]["train"]
            if part == meta["runs"]:
                assert a == b
            else:
                assert a["max_error"] == pytest.approx(b["max_error"], rel=1e-5)


@pytest.mark.parametrize("executor", ["inline", "local"])
def test_a_profile_probes_several_modules_and_skips_a_missing_library(user_file, tmp_path, executor):
    """Inline, probes run one after the other; on a local pool of 2, side by side (the
    shared baseline runs are trained once, by whichever probe claims them first)."""
    from kernelgap.reproduction.pipeline import reproduce

    profile = tmp_path / "tiny"
    profile.mkdir()
    (profile / "profile.toml").write_text(f'''experiments = ["probe"]
[[probes]]
name = "mean"
steps = 6
target = "{user_file}:MeanModel"
ranks = {{witness = [2], ood-n4 = [2]}}
[[probes]]
name = "wider"        # other witness ranks: its own baseline runs beside the shared ones; no OOD suite
steps = 6
target = "{user_file}:MeanModel"
ranks = {{witness = [3], ood-n4 = []}}
[[probes]]
name = "causal"
steps = 6
target = "{user_file}:CausalModel"
ranks = {{witness = [2], ood-n4 = [2]}}
[[probes]]
name = "missing"
target = "no_such_library_here:Attention"
requires = "no-such-library"
''')
    out = tmp_path / "out"
    reproduce(profile, out, executor=executor, workers=2, log=lambda *_: None)
    probes = {p["name"]: p for p in json.loads((out / "summary.json").read_text())["probes"]}
    assert set(probes) == {"mean", "wider", "causal", "missing"}
    assert [r["rank"] for r in probes["wider"]["suites"][0]["baseline"]] == [3]
    assert [s["name"] for s in probes["wider"]["suites"]] == ["witness"]  # an empty rank list leaves a suite out
    assert [s["name"] for s in probes["mean"]["suites"]] == ["witness", "ood-n4"]
    assert "no-such-library is not installed" in probes["missing"]["skipped"]
    assert probes["causal"]["reading"] == "final" and probes["mean"]["reading"] == "first"
    # mean: 2 suites; wider: witness at rank 3 only (no ood-n4); causal: 2 final-query suites
    assert len(list((out / "probe" / "baseline").rglob("runs/*.json"))) == 2 + 1 + 2
    page = (out / "report.html").read_text()
    assert "missing (no_such_library_here:Attention) was not probed: no-such-library is not installed" in page


def test_a_probe_config_names_its_folders_and_sweep_options():
    config = ProbeConfig(TARGET, executor="inline", workers=2)
    assert config.folder("Decayed") == Path("results/probe-Decayed")
    assert config.baseline_folder("Decayed") == Path("results/probe-baseline")  # beside every default folder
    assert ProbeConfig(TARGET, out="x").baseline_folder("Decayed") == Path("x/baseline")
    assert ProbeConfig(TARGET, out="x", baseline="b").baseline_folder("Decayed") == Path("b")
    assert config.sweep_options == {"executor": "inline", "workers": 2, "address": None}
    with pytest.raises(TypeError):
        ProbeConfig(TARGET, {}, "out")  # the module and its kwargs by position, the rest by name


def test_an_empty_rank_list_leaves_a_suite_out():
    from kernelgap.probe.suites import suites

    assert [s.name for s in suites("quick", {"ood-n4": []})] == ["witness"]
    assert [s.name for s in suites("quick", {"witness": [2]})] == ["witness", "ood-n4"]  # not named: its ranks
    with pytest.raises(KernelgapError, match="^ranks: leaves out every suite"):
        ProbeConfig(TARGET, ranks={"witness": [], "ood-n4": []})
