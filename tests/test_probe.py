"""The probe (issue #6, item 4): any attention module through the witness and OOD suites."""

import json
from pathlib import Path

import pytest
import torch

from kernelgap.errors import KernelgapError
from kernelgap.probe import ProbeAdapter, load_target, parse_kwargs, run_probe
from kernelgap.probe.interface import build_module

EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "decayed_linear_attention.py")
TARGET = f"{EXAMPLE}:DecayedLinearAttention"

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


class WrongShape(nn.Module):
    def __init__(self, m, rank):
        super().__init__()
        self.lin = nn.Linear(m, 1)

    def forward(self, tokens):
        return self.lin(tokens)          # [B, N, 1], not [B, N]


class NoRank(nn.Module):
    def __init__(self, m):
        super().__init__()


class NotAModule:
    pass


class BadLayer(nn.Module):
    kernelgap_interface = "layer"

    def __init__(self, d_model, rank):
        super().__init__()
        self.lin = nn.Linear(d_model, rank)

    def forward(self, x):
        return self.lin(x)               # [B, N, rank], not [B, N, d_model]
'''


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "user_modules.py"
    path.write_text(USER_MODULES)
    return str(path)


def test_probe_runs_the_example_from_the_cli(cli, tmp_path):
    out = tmp_path / "probe"
    code, stdout, err = cli("probe", TARGET, "--ranks", "2", "--steps", "6", "--out", str(out),
                            "--kwargs", '{"decay_init": 0.8}')
    assert code == 0, err
    data = json.loads((out / "probe.json").read_text())
    assert data["interface"] == "layer" and data["kwargs"] == {"decay_init": 0.8}
    assert [(r["suite"], r["rank"], r["steps"]) for r in data["runs"]] == [("witness", 2, 6), ("ood n=4", 2, 6)]
    assert data["runs"][1]["test"]["sequences"] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert [s["label"] for s in summary["probe"]["suites"]] == ["witness", "ood n=4"]
    page = (out / "report.html").read_text()
    assert "Beyond the paper" in page and "DecayedLinearAttention" in page and "<img" in page


def test_probe_runs_the_example_from_python(tmp_path):
    payload = run_probe(TARGET, {"decay_init": 0.5}, out=tmp_path, ranks=[2], steps=3, report=True,
                        log=lambda *_: None)
    assert payload["class"] == "DecayedLinearAttention" and payload["d_model"] == 32
    assert json.loads((tmp_path / "probe.json").read_text())["runs"] == payload["runs"]
    assert (tmp_path / "report.html").is_file() and (tmp_path / "figures" / "beyond_probe.png").is_file()


def test_an_interrupted_probe_resumes_without_retraining(user_file, tmp_path, monkeypatch):
    from kernelgap.probe import runner

    target = f"{user_file}:MeanModel"
    trained = []
    real = runner._train_one

    def counting(cls, kwargs, suite, *args):
        trained.append((suite.label, args[2]))
        if len(trained) == 2:
            raise KeyboardInterrupt  # interrupted while training the second run
        return real(cls, kwargs, suite, *args)

    monkeypatch.setattr(runner, "_train_one", counting)
    with pytest.raises(KeyboardInterrupt):
        run_probe(target, ranks=[2], steps=6, out=tmp_path, log=lambda *_: None)
    assert not (tmp_path / "probe.json").exists()
    saved = json.loads((tmp_path / "probe.partial.json").read_text())["runs"]
    assert [r["suite"] for r in saved] == ["witness"]

    trained.clear()
    monkeypatch.setattr(runner, "_train_one", lambda *a: trained.append(a[2].label) or real(*a))
    payload = run_probe(target, ranks=[2], steps=6, out=tmp_path, log=lambda *_: None)
    assert trained == ["ood n=4"]  # the witness run was reused, not retrained
    assert payload["runs"][0] == saved[0]
    assert not (tmp_path / "probe.partial.json").exists()

    trained.clear()
    assert run_probe(target, ranks=[2], steps=6, out=tmp_path, log=lambda *_: None) == payload
    assert trained == []  # a finished probe is read back, not redone


def test_probe_workers_give_the_same_records(tmp_path):
    def strip(payload):
        return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in payload["runs"]]

    one = run_probe(TARGET, ranks=[2, 3], steps=6, log=lambda *_: None)
    two = run_probe(TARGET, ranks=[2, 3], steps=6, out=tmp_path, workers=2, log=lambda *_: None)
    assert strip(one) == strip(two)  # same runs, same order, same numbers
    assert [(r["suite"], r["rank"]) for r in two["runs"]] == [("witness", 2), ("witness", 3),
                                                               ("ood n=4", 2), ("ood n=4", 3)]
    with pytest.raises(KernelgapError, match="--workers must be ≥ 1"):
        run_probe(TARGET, ranks=[2], steps=3, workers=0)


def test_a_probe_folder_of_other_settings_is_refused_not_overwritten(user_file, tmp_path):
    target = f"{user_file}:MeanModel"
    run_probe(target, ranks=[2], steps=3, out=tmp_path, log=lambda *_: None)
    before = (tmp_path / "probe.json").read_bytes()
    with pytest.raises(KernelgapError, match="another module or other settings"):
        run_probe(target, {"scale": 2.0}, ranks=[2], steps=3, out=tmp_path, log=lambda *_: None)
    assert (tmp_path / "probe.json").read_bytes() == before


def test_probe_runs_a_sequence_module_from_python(user_file):
    payload = run_probe(f"{user_file}:MeanModel", {"scale": 0.5}, ranks=[3], steps=9, log=lambda *_: None)
    assert payload["interface"] == "sequence"
    assert {r["suite"] for r in payload["runs"]} == {"witness", "ood n=4"}
    for rec in payload["runs"]:
        assert rec["steps"] == 9 and rec["train"]["max_error"] > 0
    # the standard trainer really trains the module: 90 steps beat the untrained module
    untrained = run_probe(f"{user_file}:MeanModel", {"scale": 0.5}, ranks=[3], steps=0, log=lambda *_: None)
    longer = run_probe(f"{user_file}:MeanModel", {"scale": 0.5}, ranks=[3], steps=90, log=lambda *_: None)
    for before, after in zip(untrained["runs"], longer["runs"]):
        assert after["train"]["max_error"] < before["train"]["max_error"]


@pytest.mark.parametrize("name,message", [
    ("WrongShape", "does not follow the probe interface: forward(tokens [B, N, m]) must return predictions [B, N]"),
    ("NoRank", "NoRank(m, rank, **kwargs) failed: TypeError"),
    ("NotAModule", "is not a torch.nn.Module subclass"),
    ("BadLayer", "a 'layer' module must map [B, N, 32] to [B, N, 32]"),
    ("Missing", "has no attribute 'Missing'"),
])
def test_a_module_off_the_interface_is_a_one_line_error(cli, user_file, tmp_path, name, message):
    code, out, err = cli("probe", f"{user_file}:{name}", "--out", str(tmp_path / "x"))
    assert code == 2
    assert err.startswith("error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "x" / "probe.json").exists()  # nothing trained, nothing written


@pytest.mark.parametrize("args,message", [
    (["no_colon_here"], "must look like package.module:Class"),
    (["/nope/missing.py:X"], "does not exist"),
    (["kernelgap_no_such_pkg.mod:X"], "cannot import module"),
    ([TARGET, "--kwargs", "{bad"], "--kwargs is not valid JSON"),
    ([TARGET, "--ranks", "a,b"], "--ranks expects comma-separated integers"),
    ([TARGET, "--profile", "huge"], "unknown probe profile"),
    ([TARGET, "--steps", "-3"], "--steps must be ≥ 0"),
])
def test_probe_user_errors(cli, args, message):
    code, _, err = cli("probe", *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_adapter_scores_positions_as_a_stack_of_one(user_file):
    cls = load_target(f"{user_file}:MeanModel")
    module = build_module(cls, m=4, rank=2, kwargs={}, seed=0)
    tokens = torch.randint(0, 2, (5, 4)).float()
    index = torch.randint(0, 5, (7, 3))
    pred = ProbeAdapter(module).predict(tokens, index, [0])
    assert pred.shape == (1, 7, 1)
    assert torch.allclose(pred[0, :, 0], module(tokens[index])[:, 0])
    # seeding makes construction reproducible
    again = build_module(cls, m=4, rank=2, kwargs={}, seed=0)
    assert torch.equal(again.lin.weight, module.lin.weight)


def test_parse_kwargs():
    assert parse_kwargs(None) == {} and parse_kwargs('{"a": 1}') == {"a": 1}
    with pytest.raises(KernelgapError):
        parse_kwargs("[1, 2]")
