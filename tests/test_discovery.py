"""A new feature map, family or built-in experiment is one new module or folder, nothing else.

The package is copied, one map module (``models/feature_maps/gauss.py``), one family module
(``task/families/pairs.py``) and one experiment folder (``experiments/toy/``) are added to
the copy, and not one other file of it is touched.  One process on the copy then shows that
each is registered in its place and reachable from everything that lists or takes one:
``train --help`` and ``train --feature-map``, ``family``'s list of names and its parameter
checks, a profile naming the experiment, and the summary of its reproduction.
(docs/adding-a-feature-map.md, docs/adding-a-family.md, docs/adding-an-experiment.md.)
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "kernelgap"

NEW_FILES = {
    "models/feature_maps/gauss.py": '''
"""The ``gauss`` map: ``φ(u) = exp(−|u_i|²)`` per feature, in log space (a test's new map)."""

from .base import ProjectedFeatureMap, register_feature_map


@register_feature_map
class Gauss(ProjectedFeatureMap):
    name = "gauss"
    order = 25  # between relu (20) and favor (30)
    log_space = True
    color = "#123456"
    citation = "a map a test adds"

    def phi(self, u):
        return -(u * u)
''',
    "task/families/pairs.py": '''
"""The ``pairs`` family: every sequence of two tokens over {0,1}^m (a test's new family)."""

from typing import Annotated

from pydantic import Field

from ...validation import Int
from ..family import Family
from ..registry import register_family
from .exhaustive import all_tokens, exhaustive_count, iter_exhaustive_index


@register_family("pairs")
def pairs(m: Annotated[Int, Field(ge=1, le=6)] = 2) -> Family:
    """Every sequence of two tokens over {0,1}^m."""
    index = next(iter_exhaustive_index(m, 2, exhaustive_count(m, 2)))
    return Family(all_tokens(m), index, None, [], f"pairs-m{m}", {"m": m})
''',
    "experiments/toy/__init__.py": '"""A test\'s new built-in experiment."""\n',
    "experiments/toy/sweep.toml": """
name = "toy"
[family]
name = "pairs"
params = {m = 2}
[model]
feature_map = "gauss"
[train]
mse_steps = 2
max_steps = 2
[grid]
model.rank = [2]
seed = [0]
""",
    "experiments/toy/experiment.py": '''
"""The toy's report part: how many runs, and the map they trained."""

from ...validation import Record
from ..base import Experiment


class ToySection(Record):
    runs: int
    maps: list[str]


def section(results):
    rows = results.rows("toy")
    return {"runs": len(rows), "maps": sorted({r["feature_map"] for r in rows})} if rows else None


EXPERIMENT = Experiment(
    name="toy",
    order=15,  # between witness (10) and series (20)
    title="A new built-in experiment",
    section=section,
    schema=ToySection | None,
    sentence=lambda summary: f"The toy trained {summary['toy']['runs']} run.",
    settings={"label": "toy"},
)
''',
}

#: Runs in the copy: the registries, then the command line, in one process.
DRIVER = """
import contextlib, io, json, sys
import kernelgap
from kernelgap.cli import main
from kernelgap.experiments.registry import BUILTIN
from kernelgap.models import FEATURE_MAPS
from kernelgap.task import FAMILIES
from kernelgap.task.registry import describe_parameters

runs = []
for argv in json.loads(sys.argv[1]):
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code or 0
    runs.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps({
    "file": kernelgap.__file__, "maps": list(FEATURE_MAPS), "families": list(FAMILIES),
    "experiments": [e.name for e in BUILTIN], "pairs": describe_parameters("pairs"), "runs": runs,
}))
"""


def differing(original: Path, copy: Path) -> list[str]:
    """Every file of ``original`` that ``copy`` lacks or holds changed (caches aside)."""
    out = []
    for path in original.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            twin = copy / path.relative_to(original)
            if not (twin.is_file() and filecmp.cmp(path, twin, shallow=False)):
                out.append(str(path.relative_to(original)))
    return out


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
    """The driver's report on a copy of the package with the three new things added."""
    root = tmp_path_factory.mktemp("extended")
    copy = root / "src" / "kernelgap"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in NEW_FILES.items():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text(text.lstrip())
    assert differing(PACKAGE, copy) == []  # no file of the package is edited, only files added
    added = {str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file()} - {
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*") if p.is_file()
    }
    assert added == set(NEW_FILES)
    profile = root / "toys"
    profile.mkdir()
    (profile / "profile.toml").write_text('experiments = ["toy"]\n')
    out = root / "out"
    argv = [
        ["train", "--help"],
        ["train", "--family", "pairs", "-p", "m=2", "--feature-map", "gauss", "--rank", "2"]
        + ["--mse-steps", "2", "--max-steps", "2", "--json"],
        ["family", "pairs", "-p", "m=3", "--out", str(root / "pairs.json"), "--json"],
        ["family", "pairs", "-p", "m=7", "--out", str(root / "big.json")],
        ["family", "nonesuch", "--out", str(root / "none.json")],
        ["reproduce", "--profile", str(profile), "--out", str(out), "--executor", "inline"],
    ]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "COLUMNS": "250"}
    run = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(argv)], capture_output=True, text=True, env=env, cwd=root
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.splitlines()[-1])
    assert Path(report["file"]).is_relative_to(copy)  # the copy ran, not the checkout
    return report, root, out


def test_a_new_feature_map_module_is_registered_in_its_place(extended):
    report, _, _ = extended
    assert report["maps"][:4] == ["elu1", "relu", "gauss", "favor"]
    listed = report["runs"][0]["out"].split("--feature-map", 1)[1].split()[0].strip("[]").split("|")
    assert listed == report["maps"]


def test_train_takes_the_new_map_and_the_new_family(extended):
    report, _, _ = extended
    train = report["runs"][1]
    assert train["code"] == 0, train["err"]
    record = json.loads(train["out"])
    assert record["map_facts"]["name"] == "gauss" and record["map_facts"]["color"] == "#123456"
    assert record["config"]["family"]["name"] == "pairs"


def test_a_new_family_module_is_built_and_its_parameters_checked(extended):
    report, root, _ = extended
    assert "pairs" in report["families"]
    assert report["pairs"] == ["m: an integer ≥ 1 and ≤ 6 (default 2)"]
    built = report["runs"][2]
    assert built["code"] == 0, built["err"]
    assert json.loads(built["out"])["sequences"] == 64 and (root / "pairs.json").is_file()
    too_big = report["runs"][3]
    assert too_big["code"] == 2 and not (root / "big.json").exists()
    assert too_big["err"] == "error: family 'pairs': m: input should be less than or equal to 6, got 7\n"
    unknown = report["runs"][4]
    assert unknown["code"] == 2 and ", pairs, " in unknown["err"]


def test_a_new_experiment_folder_is_built_in_and_a_profile_runs_it(extended):
    report, _, out = extended
    assert report["experiments"][:3] == ["witness", "toy", "series"]
    reproduce = report["runs"][5]
    assert reproduce["code"] == 0, reproduce["err"][-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["toy"] == {"runs": 1, "maps": ["gauss"]}
    assert summary["feature_maps"]["gauss"]["citation"] == "a map a test adds"
    required = json.loads((out / "summary.schema.json").read_text())["required"]
    assert required[required.index("witness") + 1] == "toy"  # the sections in registry order
    assert "A new built-in experiment" in (out / "report.html").read_text()


def test_every_builtin_sets_its_own_distinct_place():
    """The built-in maps and experiments each state their place, so no listing falls back on
    names; the places are distinct and the registries follow them."""
    from kernelgap.experiments.registry import BUILTIN
    from kernelgap.models.feature_maps import FEATURE_MAPS

    maps = [(vars(cls).get("order"), name) for name, cls in FEATURE_MAPS.items()]
    assert all(isinstance(order, int) for order, _ in maps), maps
    assert maps == sorted(maps) and len({order for order, _ in maps}) == len(maps)
    places = [e.order for e in BUILTIN]
    assert all(isinstance(order, int) for order in places) and places == sorted(set(places))


def test_a_second_map_or_family_of_a_taken_name_is_refused():
    """A copied module left unrenamed fails loudly instead of replacing a built-in."""
    from kernelgap.models.feature_maps import FEATURE_MAPS, ProjectedFeatureMap, register_feature_map
    from kernelgap.task import FAMILIES
    from kernelgap.task.registry import register_family

    maps, families = dict(FEATURE_MAPS), dict(FAMILIES)

    class Copied(ProjectedFeatureMap):
        name = "elu1"

    with pytest.raises(TypeError, match="feature map 'elu1' is registered twice"):
        register_feature_map(Copied)

    def witness():
        raise AssertionError("never built")

    with pytest.raises(TypeError, match="family 'witness' is registered twice"):
        register_family("witness")(witness)
    assert list(FEATURE_MAPS.items()) == list(maps.items()) and FAMILIES == families


@pytest.mark.parametrize(
    "doc, module",
    [("adding-a-feature-map.md", "models/feature_maps/gauss.py"), ("adding-a-family.md", "task/families/pairs.py")],
)
def test_the_guides_show_the_modules_this_test_adds(doc, module):
    """The worked example of each guide is the very module the tests above add and run."""
    text = (PACKAGE.parents[1] / "docs" / doc).read_text()
    assert f"```python\n{NEW_FILES[module].strip()}\n```" in text
