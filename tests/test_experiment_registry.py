"""An experiment is one folder: a profile folder's own experiment registers like a built-in one.

The toy below is the worked example of docs/adding-an-experiment.md: a tiny sweep, a step
that writes one file, a summary section with its schema, one sentence computed from its
runs, one figure.  Nothing outside its folder and ``profile.toml`` names it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

import kernelgap
from kernelgap.errors import ConfigError, KernelgapError
from kernelgap.experiments import Experiment
from kernelgap.experiments.profile import load_profile, profile_names
from kernelgap.experiments.registry import BUILTIN, builtin, experiments
from kernelgap.report.integrity import sealed
from kernelgap.reproduction import build_report
from kernelgap.reproduction.pipeline import reproduce
from kernelgap.reproduction.record import read_meta
from kernelgap.reproduction.schema import summary_problem, summary_schema
from kernelgap.reproduction.summary import reproduction_experiments

PACKAGE = Path(kernelgap.__file__).resolve().parent

TOY = {
    "profile.toml": 'experiments = ["toy"]\n\n[toy]\nlabel = "mlp_exp on {0,1}^2"\n',
    "toy/sweep.toml": """name = "toy"
[family]
name = "exhaustive"
params = {m = 2, length = 2}
[model]
feature_map = "mlp_exp"
[train]
mse_steps = 3
max_steps = 3
[grid]
model.rank = [1, 2]
seed = [0]
""",
    "toy/step.py": '''"""After the toy sweep: the size of its family (no training)."""

from kernelgap.experiments.steps import sweep_runs


def count(profile, out, sweep_options):
    family = sweep_runs(profile, "toy")[0].family.build()
    return {"sequences": len(family), "m": family.m, "label": profile.settings["toy"]["label"]}
''',
    "toy/experiment.py": '''"""A toy experiment: mlp_exp at ranks 1 and 2 on every sequence of length 2 over {0,1}^2."""

from kernelgap.experiments import Experiment, Figure
from kernelgap.report.criteria import exact, first_rank
from kernelgap.validation import JsonInt, JsonNumber, Section
from kernelgap.report.figures import band, exact_line, legend, plt, save


def section(results):
    rows = results.rows("toy")
    if not rows:
        return None
    family = results.read("toy", "family.json") or {}
    return ToySection(label=family.get("label"), sequences=family.get("sequences"),
                      runs=[{k: r[k] for k in ToyRun.model_fields} for r in rows],
                      exact_from=first_rank(rows, exact)).dump()


class ToyRun(Section):
    rank: JsonInt
    seed: JsonInt
    max_error: JsonNumber | None
    exact: bool


class ToySection(Section):
    label: str | None
    sequences: JsonInt | None
    runs: list[ToyRun]
    exact_from: JsonInt | None


def sentence(summary):
    toy = summary["toy"]
    best = min(r["max_error"] for r in toy["runs"])
    where = f"exact from rank {toy['exact_from']}" if toy["exact_from"] else "exact at no rank tried"
    return (f"Toy ({toy['label']}): {len(toy['runs'])} runs on {toy['sequences']} sequences, {where}; "
            f"smallest max error {best:.3f}.")


def draw(summary, out_dir):
    fig, ax = plt.subplots(figsize=(5, 3.5))
    band(ax, summary["toy"]["runs"], "rank", "max_error", "mlp_exp", "#d62728")
    exact_line(ax)
    ax.set(xlabel="rank r", ylabel="max |error|", title="The toy experiment")
    legend(ax)
    return save(fig, out_dir, "toy")


EXPERIMENT = Experiment(
    name="toy", title="A toy experiment", section=section, schema=ToySection | None, sentence=sentence,
    figures=(Figure("toy", draw, "Max error against rank on every sequence of the toy family."),),
    settings={"label": "mlp_exp"}, step=".step:count", writes="family.json",
)
''',
}


def write_profile(root: Path, files: dict[str, str] = TOY) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def package_files() -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    before = package_files()
    profile = write_profile(tmp_path_factory.mktemp("profiles") / "toys")
    out = tmp_path_factory.mktemp("out") / "rep"
    reproduce(profile, out, executor="inline", log=lambda *_: None)
    assert package_files() == before  # the toy needs nothing outside its folder
    return profile, out


def test_a_profile_folder_brings_its_own_experiment(toy):
    profile, out = toy
    prof = load_profile(profile)
    assert prof.experiments == ["toy"] and prof.settings["toy"] == {"label": "mlp_exp on {0,1}^2"}
    assert prof.sweep_file("toy") == profile / "toy" / "sweep.toml"
    assert prof.user_experiments == {"toy": str((profile / "toy").resolve())}
    meta = json.loads((out / "reproduce.json").read_text())
    assert meta["user_experiments"] == prof.user_experiments


def test_the_toy_section_is_in_the_summary_and_valid(toy):
    _, out = toy
    summary = json.loads((out / "summary.json").read_text())
    toy_section = summary["toy"]
    assert toy_section["sequences"] == 16 and toy_section["label"] == "mlp_exp on {0,1}^2"
    assert sorted(r["rank"] for r in toy_section["runs"]) == [1, 2]
    assert summary["witness"] is None and summary["length"] == []  # the built-ins, not run
    schema = json.loads((out / "summary.schema.json").read_text())
    assert schema["$defs"]["ToySection"]["required"] == ["label", "sequences", "runs", "exact_from"]
    assert "toy" in schema["required"] and "toy" not in summary_schema()["properties"]
    jsonschema.validate(summary, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**summary, "toy": {"runs": []}}, schema)
    experiments = reproduction_experiments(read_meta(out))  # the models the schema came from agree
    assert summary_problem(summary, experiments) is None
    assert summary_problem({**summary, "toy": {"runs": []}}, experiments) == "toy.label: field required"
    unknown = {**summary, "toy": {**toy_section, "seeds": 2}}  # a key the model does not name
    assert summary_problem(unknown, experiments) == "toy.seeds: extra inputs are not permitted, got 2"


def test_a_section_schema_is_a_model_not_a_json_schema_dict():
    with pytest.raises(ConfigError, match="schema must be the type of its section"):
        Experiment(name="x", title="X", schema={"type": "object"})


@pytest.mark.parametrize("writes", ["../x.json", "/tmp/x.json", "a/b.json", ".."])
def test_a_step_writes_one_file_of_the_results_folder(writes):
    with pytest.raises(ConfigError, match="'writes' .* is not a plain name"):
        Experiment(name="x", title="X", step=".step:f", writes=writes)
    assert Experiment(name="x", title="X", step=".step:f", writes="x.json").writes == "x.json"


def test_the_toy_sentence_and_figure_are_in_the_report(toy):
    _, out = toy
    summary = json.loads((out / "summary.json").read_text())
    page = (out / "report.html").read_text()
    runs = summary["toy"]["runs"]
    best = min(r["max_error"] for r in runs)
    assert "<h2>Beyond the paper</h2>" in page and "<h3>A toy experiment</h3>" in page
    assert "Toy (mlp_exp on {0,1}^2): 2 runs on 16 sequences" in page
    assert f"smallest max error {best:.3f}." in page
    assert '<img alt="toy" src="data:image/png;base64,' in page
    assert "<figcaption>Max error against rank on every sequence of the toy family.</figcaption>" in page
    assert (out / "figures" / "toy.png").stat().st_size > 1000 and (out / "figures" / "toy.svg").is_file()


def test_kernelgap_report_rebuilds_the_toy_section_from_the_files(toy, tmp_path):
    _, out = toy
    copy = tmp_path / "rep"
    shutil.copytree(out, copy)
    (copy / "report.html").unlink()
    before = json.loads((copy / "summary.json").read_text())
    build_report(copy, log=lambda *_: None)
    assert json.loads((copy / "summary.json").read_text())["toy"] == before["toy"]
    assert "<h3>A toy experiment</h3>" in (copy / "report.html").read_text()


def test_a_moved_experiment_folder_is_named(toy, tmp_path):
    _, out = toy
    copy = tmp_path / "rep"
    shutil.copytree(out, copy)
    meta = json.loads((copy / "reproduce.json").read_text())
    meta["user_experiments"]["toy"] = str(tmp_path / "gone" / "toy")
    (copy / "reproduce.json").write_text(json.dumps(sealed(meta)))  # as a reproduction writes it
    with pytest.raises(KernelgapError, match="gone/toy has no experiment.py.*rerun `kernelgap reproduce`"):
        build_report(copy, log=lambda *_: None)


def test_profile_errors_name_the_experiment(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "profile.toml").write_text('experiments = ["nonesuch"]\n')
    with pytest.raises(ConfigError, match="unknown experiment 'nonesuch'"):
        load_profile(tmp_path / "a")
    clash = write_profile(
        tmp_path / "b",
        {
            "profile.toml": 'experiments = ["toy"]\n',
            "toy/experiment.py": TOY["toy/experiment.py"].replace('"toy"', '"other"'),
        },
    )
    with pytest.raises(ConfigError, match="EXPERIMENT is named 'other', its folder 'toy'"):
        load_profile(clash)
    bad = write_profile(tmp_path / "c", {**TOY, "profile.toml": 'experiments = ["toy"]\n[toy]\nlabels = 1\n'})
    with pytest.raises(ConfigError, match=r"profile.toml: toy: unknown key 'labels' \(expected one of label\)$"):
        load_profile(bad)
    from kernelgap.experiments.registry import load_folder

    (tmp_path / "d" / "witness").mkdir(parents=True)
    (tmp_path / "d" / "witness" / "experiment.py").write_text("")
    with pytest.raises(ConfigError, match="'witness' is a built-in experiment"):
        load_folder(tmp_path / "d" / "witness")


def test_every_builtin_experiment_is_one_folder():
    """Each built-in is a folder holding its experiment.py, its sweep files and its step; the
    summary keys, pools and settings come from the registry alone."""
    assert [e.name for e in experiments()] == [e.name for e in BUILTIN] == list(builtin())
    for exp in BUILTIN:
        assert exp.folder == PACKAGE / "experiments" / exp.name
        assert (exp.folder / "experiment.py").is_file()
        if exp.step:
            assert callable(exp.load_step()), exp.name
    for name in profile_names():
        prof = load_profile(name)
        assert sorted(prof.folder.glob("*.toml")) == [prof.folder / "profile.toml"]
        for exp in prof.experiments:
            sweep = prof.sweep_file(exp)
            assert sweep is None or sweep.parent == PACKAGE / "experiments" / exp, (name, exp)
    assert {e.name for e in BUILTIN if "witness" in e.pools} == {"witness", "signed", "heads", "zoo"}
    assert {e.name for e in BUILTIN if "ood" in e.pools} == {"ood", "signed_ood", "zoo_ood"}


@pytest.mark.parametrize(
    "text, message",
    [
        ("experiments = 3", "experiments: input should be a valid list, got 3"),
        ("experiments = []", "experiments: list should have at least 1 item after validation, not 0, got []"),
        ("experiments = [1]", "experiments.0: input should be a valid string, got 1"),
        ("name = 'x'", "experiments: field required"),
        ('experiments = ["witness"]\nbogus = 1', "unknown key 'bogus' (expected one of bound_curve, context, "),
        (
            'experiments = ["witness"]\nlength = 3',
            "length: input should be a valid dictionary or instance of length, got 3",
        ),
        ('experiments = ["witness"]\n[length]\nn = 5', "length: unknown key 'n' (expected one of m)"),
    ],
)
def test_profile_toml_is_a_model(tmp_path, text, message):
    """``profile.toml`` is checked by a model built from the registry: one line naming the key."""
    (tmp_path / "profile.toml").write_text(text + "\n")
    with pytest.raises(ConfigError) as info:
        load_profile(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'profile.toml'}: ") and message in str(info.value)
    (tmp_path / "profile.toml").write_text('experiments = ["length"]\n[length]\nm = 5\n')  # witness: no sweep
    assert load_profile(tmp_path).settings["length"] == {"m": 5}
