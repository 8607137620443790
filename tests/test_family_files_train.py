"""Family files everywhere: ``train --family F.json`` and ``[family] file = …`` in a sweep train
on a file of either layout, and the file's content hash is part of the run."""

from __future__ import annotations

import json

import pytest

from kernelgap.errors import KernelgapError
from kernelgap.sweeps import run_sweep
from kernelgap.sweeps.config import load_sweep
from kernelgap.task import build_family, save_family
from kernelgap.theory.certificate import certify
from kernelgap.training import FamilySpec


def test_a_file_certified_at_20_is_not_fitted_at_16(cli, tmp_path):
    family = build_family("hadamard", m=24, n=20)
    path = tmp_path / "h20.json"
    save_family(family, path)
    assert certify(family).certified_rank == 20
    code, out, err = cli(
        "train", "--family", str(path), "--feature-map", "table", "--rank", "16",
        "--mse-steps", "0", "--max-steps", "500", "--json",
    )  # fmt: skip
    assert code == 0, err
    record = json.loads(out)
    assert record["config"]["family"]["file"] == str(path.resolve()) and len(record["config"]["family"]["sha256"]) == 64
    assert record["train"]["max_error"] >= 0.5  # the theorem: 16 features cannot be exact


def test_a_sweep_trains_on_a_product_file_relative_to_itself(tmp_path):
    save_family(build_family("ladder", m=24, n=3, rungs=1, step=3), tmp_path / "ladder.json")
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(
        'name = "f"\n[family]\nfile = "ladder.json"\n[model]\nfeature_map = "table"\n'
        "[train]\nmse_steps = 5\nmax_steps = 5\n[grid]\nmodel.rank = [2, 4]\n"
    )
    (run,) = {r.family.sha256 for r in load_sweep(cfg).runs()}
    summary = run_sweep(cfg, tmp_path / "out", executor="inline", progress=False)
    assert summary.ran == 2
    records = [json.loads(p.read_text()) for p in (tmp_path / "out" / "runs").glob("*.json")]
    assert all(r["train"]["sequences"] == 3 * 6**2 for r in records)  # the product, expanded
    (tmp_path / "ladder.json").write_text((tmp_path / "ladder.json").read_text().replace('"name"', '"name" ', 1))
    assert {r.family.sha256 for r in load_sweep(cfg).runs()} != {run}  # a changed file is another run


@pytest.mark.parametrize(
    "text, message",
    [
        ('[family]\nfile = "missing.json"\n', "missing.json does not exist"),
        ('[family]\nfile = "bad.json"\n', "not valid JSON"),
        ('[family]\nname = "witness"\nfile = "bad.json"\n', "either name (a registered family) or file"),
        ('[family]\nfile = "ok.json"\nparams = {m = 3}\n', "params apply to a registered family"),
    ],
)
def test_bad_family_files_in_sweeps_are_one_line_errors(tmp_path, text, message):
    (tmp_path / "bad.json").write_text("{not json")
    save_family(build_family("hadamard", m=8, n=3), tmp_path / "ok.json")
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(text)
    with pytest.raises(KernelgapError) as info:
        load_sweep(cfg)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_cli_train_errors_for_files(cli, tmp_path):
    code, _, err = cli("train", "--family", str(tmp_path / "nope.json"))
    assert code == 2 and "does not exist" in err
    save_family(build_family("hadamard", m=8, n=3), tmp_path / "h.json")
    code, _, err = cli("train", "--family", str(tmp_path / "h.json"), "-p", "m=3")
    assert code == 2 and "not to a family file" in err
    assert FamilySpec.from_file(tmp_path / "h.json").build().m == 8
