"""A probe a user can read and steer: a module that takes no rank (the softmax example), the
verdicts printed at the end (and as JSON), progress lines without a terminal, ``--features``,
``--kernel``, ``--device``, twins chosen by constructor arguments, fla's maps, and
``kernelgap results`` over probe folders.  Every refusal is one line and exit status 2."""

from __future__ import annotations

import json

import pytest

from kernelgap.models.module_spec import ModuleSpec
from kernelgap.probe import ProbeConfig
from kernelgap.probe.module import module_spec, sole_size
from kernelgap.probe.suites import PROFILES
from kernelgap.probe.twin import twin_map
from test_bad_input import _check

SOFTMAX = "kernelgap.probe.examples:SoftmaxAttention"
FAST = ["--steps", "3", "--seeds", "0", "--executor", "inline", "--no-recipes"]

MODULES = """
from torch import nn


class Sized(nn.Module):
    kernelgap_interface = "layer"

    def __init__(self, d_model, rank):
        super().__init__()
        self.lin = nn.Linear(d_model, d_model)

    def forward(self, x):
        return self.lin(x).mean(dim=1, keepdim=True).expand_as(x)


class Library(nn.Module):
    '''Takes its width by another name and no rank: rank-free through an argument map.'''

    def __init__(self, dim, heads=1):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        return self.lin(x).mean(dim=1, keepdim=True).expand_as(x)
"""


@pytest.fixture
def mods(tmp_path, monkeypatch):
    (tmp_path / "mods.py").write_text(MODULES)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_module_that_takes_no_rank_is_rank_free():
    """``Class(d_model, *, heads=1)`` gets its width by name and no rank; a class whose second
    positional argument exists (even with a default) is given the rank as before."""
    import torch.nn as nn

    from kernelgap.probe.examples import Elu1LinearAttention, SoftmaxAttention

    assert sole_size(SoftmaxAttention) == "d_model"
    assert sole_size(Elu1LinearAttention) is None and sole_size(nn.MultiheadAttention) is None
    _, spec = module_spec(SOFTMAX, interface="layer")
    assert spec.args == {"d_model": "d_model"} and spec.rank_free
    _, sized = module_spec("kernelgap.probe.examples:Elu1LinearAttention")
    assert sized.args == {} and not sized.rank_free


def test_a_rank_free_module_trains_once_per_seed_at_each_suites_largest_rank():
    for name, profile in PROFILES.items():
        free = ProbeConfig(SOFTMAX, profile=name).suites(rank_free=True)
        assert [s.ranks for s in free] == [[max(s.ranks)] for s in profile]
        assert [s.seeds for s in free] == [s.seeds for s in profile]
        assert [s.train for s in free] == [s.train for s in profile]  # the suite's schedule
    given = ProbeConfig(SOFTMAX, ranks=[2, 8, 4]).suites(rank_free=True)
    assert [s.ranks for s in given] == [[8], [8]]


def test_an_argument_map_without_rank_is_rank_free_unless_a_state_size_is_left_unbound(mods):
    spec = ModuleSpec.parse({"target": "mods.py:Library", "interface": "layer", "args": {"dim": "d_model"}})
    assert spec.rank_free


def test_the_softmax_example_through_the_cli_prints_its_verdicts(cli, tmp_path):
    out = tmp_path / "p"
    code, stdout, err = cli("probe", SOFTMAX, *FAST, "--ranks", "witness=4", "--ranks", "ood-n4=2", "--out", str(out))
    assert code == 0, err
    meta = json.loads((out / "probe.json").read_text())
    assert meta["args"] == {"d_model": "d_model"} and [s["ranks"] for s in meta["suites"]] == [[4], [2]]
    lines = stdout.strip().splitlines()
    # one verdict line per suite and rank, last, as the report words it
    assert lines[-2].startswith("SoftmaxAttention witness: rank 4 ") and lines[-1].startswith(
        "SoftmaxAttention ood-n4: rank 2 "
    )
    # stderr is no terminal here: a progress line per finished task (module and baseline, 2 suites)
    progress = [line for line in stdout.splitlines() if line.startswith("[probe] sweep: ")]
    assert progress[-1].startswith("[probe] sweep: 4/4 runs, 0 left") and len(progress) == 4
    code, stdout, err = cli(
        "probe", SOFTMAX, *FAST, "--ranks", "witness=4", "--ranks", "ood-n4=2", "--out", str(out), "--json"
    )
    assert code == 0, err
    rows = json.loads(stdout)["verdicts"]  # stdout is the JSON alone; the log went to stderr
    assert [(r["module"], r["suite"], r["rank"], r["features"]) for r in rows] == [
        ("SoftmaxAttention", "witness", 4, None),
        ("SoftmaxAttention", "ood-n4", 2, None),
    ]
    assert all(r["verdict"] in ("exact", "collapsed", "not fitted", "at the wall") for r in rows)
    code, stdout, err = cli("results", str(out), str(out))
    assert code == 0, err
    table = [line for line in stdout.splitlines() if line.startswith(f"| {out} | SoftmaxAttention |")]
    assert len(table) == 4 and "| witness | 4 | – |" in table[0]


def test_features_and_kernel_steer_the_twin(cli, mods):
    code, stdout, err = cli(
        "probe", "mods.py:Sized", *FAST, "--ranks", "2", "--features", "3", "--kernel", "relu", "--out", "p"
    )
    assert code == 0, err
    meta = json.loads((mods / "p" / "probe.json").read_text())
    assert meta["twin"] == "relu" and [s["features"] for s in meta["suites"]] == [[3], [3]]
    assert [s["twin_ranks"] for s in meta["suites"]] == [[3], [3]]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--kernel", "softmax"], "--kernel: no built-in map 'softmax' a twin can hold; choose from elu1, relu"),
        (["--kernel", "table"], "choose from elu1, relu"),  # a map without a linear projection
        (["--features", "0"], "features"),
        (["--device", "tpu"], "must be cpu, cuda, cuda:N or mps"),
    ],
)
def test_a_bad_steering_flag_is_one_line(cli, mods, args, needle):
    code, out, err = cli("probe", "mods.py:Sized", *FAST, "--ranks", "2", "--out", "p", *args)
    _check(code, out, err, needle)
    assert not (mods / "p").exists() or not (mods / "p" / "probe.json").exists()


def test_results_refuses_probe_and_reproduction_folders_together(cli, tmp_path):
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "probe.json").write_text("{}")
    code, out, err = cli("results", str(probe), str(tmp_path))
    _check(code, out, err, "is a probe folder: give probe folders alone, or reproduction folders alone")


def test_the_device_is_the_schedules_only_off_the_cpu():
    assert "device" not in ProbeConfig(SOFTMAX).suites()[0].train  # CPU runs keep their folders
    assert ProbeConfig(SOFTMAX, device="cuda:1").suites()[0].train["device"] == "cuda:1"


def test_twins_follow_the_constructor_arguments():
    performer = pytest.importorskip("performer_pytorch").performer_pytorch.SelfAttention
    assert twin_map(performer, {}) == "favor"
    assert twin_map(performer, {"generalized_attention": False}) == "favor"
    assert twin_map(performer, {"generalized_attention": True}) == "relu"


def test_fla_maps_the_zoo_lists_and_one_it_does_not(cli):
    pytest.importorskip("fla")
    import torch

    from kernelgap.probe.zoo import MAPS, FlaLinearAttention

    counts = {name: FlaLinearAttention(8, 4, feature_map=name).kernelgap_features(4) for name in MAPS}
    assert counts == {"hedgehog": 8, "t2r": 4, "dpfp": 32, "taylor": 1 + 4 + 10, "relu": 4}
    for name in ("taylor", "relu"):
        layer = FlaLinearAttention(8, 4, feature_map=name)
        with torch.enable_grad():
            assert torch.isfinite(layer(torch.randn(2, 3, 8))).all()
        assert twin_map(FlaLinearAttention, {"feature_map": name}) == name
    kwargs = '{"feature_map": "rebased"}'
    code, out, err = cli("probe", "kernelgap.probe.zoo:FlaLinearAttention", "--kwargs", kwargs, *FAST, "--out", "z")
    _check(code, out, err, "no fla feature map 'rebased' here; choose from hedgehog, t2r, dpfp, taylor, relu")


LIBRARY_SHAPES = """
import torch
from torch import nn


class Pair(nn.Module):
    kernelgap_interface = "layer"

    def __init__(self, d_model, rank):
        super().__init__()
        self.lin = nn.Linear(d_model, d_model)

    def forward(self, x):
        return self.lin(x), None


class Head(nn.Module):
    kernelgap_interface = "layer"

    def __init__(self, d_model, rank):
        super().__init__()
        self.lin = nn.Linear(d_model, 8)

    def forward(self, x):
        return self.lin(x)


class Torch(nn.MultiheadAttention):
    kernelgap_interface = "layer"

    def __init__(self, d_model, rank):
        super().__init__(d_model, 1, batch_first=True)
"""


@pytest.mark.parametrize(
    "cls, needle",
    [
        ("Pair", "got a tuple of 2: pass --output INDEX"),
        ("Head", "its width 8 is not d_model 32; pass --d-model 8, or bind its width argument to d_model"),
        ("Torch", "its forward needs key, value besides the input, and kernelgap calls forward(x) alone; wrap it"),
    ],
)
def test_interfaces_as_libraries_ship_them_are_refused_saying_what_to_pass(cli, tmp_path, monkeypatch, cls, needle):
    (tmp_path / "shapes.py").write_text(LIBRARY_SHAPES)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("probe", f"shapes.py:{cls}", *FAST, "--ranks", "2", "--out", "p")
    _check(code, out, err, needle)
    assert not (tmp_path / "p" / "probe.json").exists()
    if cls == "Pair":  # and what the line says to pass is enough
        code, out, err = cli("probe", f"shapes.py:{cls}", *FAST, "--ranks", "2", "--out", "p", "--output", "0")
        assert code == 0, err


@pytest.mark.slow
def test_the_softmax_example_is_exact_at_the_default_schedule(tmp_path):
    """The positive control: torch's softmax attention (the shipped example, rank-free) fits
    the witness family at the witness suite's own schedule, seed 0, no recipe needed."""
    from kernelgap.probe import run_probe
    from kernelgap.probe.verdicts import probe_rows

    config = ProbeConfig(SOFTMAX, ranks={"witness": [16], "ood-n4": []}, out=tmp_path / "p", executor="inline")
    meta = run_probe(config, log=lambda *_: None)
    (row,) = probe_rows(tmp_path / "p" / meta["runs"] / "witness")
    assert row["exact"] and row["max_error"] < 0.5 and meta["suites"][0]["recipes"] == []


def test_probes_naming_one_baseline_folder_share_its_runs(cli, mods):
    """The second probe reuses the first's finished elu1 runs (by run id) instead of training them."""
    ranks = ["--ranks", "witness=2", "--ranks", "ood-n4=2"]
    first = cli("probe", "mods.py:Sized", *FAST, *ranks, "--out", "a", "--baseline", "shared")
    second = cli("probe", SOFTMAX, *FAST, *ranks, "--out", "b", "--baseline", "shared")
    assert first[0] == 0 and second[0] == 0, first[2] + second[2]
    assert "elu1-witness: 1 runs, 0 reused, 1 trained" in first[1]
    assert "elu1-witness: 1 runs, 1 reused, 0 trained" in second[1]
    assert json.loads((mods / "b" / "probe.json").read_text())["baseline_dir"] == "../shared"
    code, stdout, err = cli("results", "a", "b")
    assert code == 0, err
    modules = [line.split(" | ")[1] for line in stdout.splitlines()[2:]]
    assert modules == ["Sized", "Sized", "SoftmaxAttention", "SoftmaxAttention"]  # a row per suite and rank


@pytest.mark.parametrize("where", ["args", "kwargs"])
def test_performers_generalized_attention_twins_relu_however_it_is_given(where):
    """The twin is read off the constructor's arguments, constants of an argument map too."""
    pytest.importorskip("performer_pytorch")
    from kernelgap.probe.leash import rehearse

    args = {"dim": "d_model", "heads": 1, "dim_head": "d_model", "nb_features": "rank"}
    given = {"generalized_attention": True}
    config = ProbeConfig(
        "performer_pytorch:SelfAttention",
        given if where == "kwargs" else {},
        interface="layer",
        args={**args, **given} if where == "args" else args,
        ranks={"witness": [4], "ood-n4": []},
    )
    assert rehearse(config, config.limits)["twin"] == "relu"


def test_a_device_this_machine_lacks_is_one_line_before_anything_is_written(cli, mods):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, out, err = cli("probe", "mods.py:Sized", *FAST, "--ranks", "2", "--out", "p", "--device", "cuda")
    _check(code, out, err, "train.device: device 'cuda' requested but CUDA is not available")
    assert not (mods / "p").exists()
