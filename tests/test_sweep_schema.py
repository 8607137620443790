"""Configs are pydantic models: the sweep-file JSON schema built from them, their strict
types, the fields a model's kind does not use, and the dataclass-style uses they keep."""

from __future__ import annotations

import json
import math
import pickle
import tomllib
from pathlib import Path

import jsonschema
import pydantic
import pytest

from kernelgap.errors import ConfigError
from kernelgap.models import KernelSpec, model_spec
from kernelgap.sweeps.config import load_sweep
from kernelgap.sweeps.schema import SCHEMA_FILE, sweep_schema
from kernelgap.training import FamilySpec, RunConfig, TrainConfig, default_model
from sweep_helpers import TINY
from sweep_helpers import write_sweep as write

ROOT = Path(__file__).resolve().parents[1]
SWEEP_FILES = sorted([*ROOT.glob("examples/*.toml"), *ROOT.glob("src/kernelgap/experiments/*/*.toml")])


def test_the_committed_schema_is_the_generated_one():
    assert SWEEP_FILES
    assert json.loads(SCHEMA_FILE.read_text()) == sweep_schema(), "run `make schema` and commit the file"


@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_and_profile_sweep_follows_the_schema(path):
    jsonschema.Draft202012Validator(sweep_schema()).validate(tomllib.loads(path.read_text()))


@pytest.mark.parametrize(
    "edit",
    [
        ("[train]", "[train]\nlearning_rate = 0.1"),
        ("mse_steps = 4", 'mse_steps = "four"'),
        ("mse_steps = 4", "mse_steps = 4.5"),
        ("mse_steps = 4", "mse_steps = true"),
        ("model.rank = [1, 2]", "model.rank = []"),
        ("model.rank = [1, 2]", "model.rank = [0, 2]"),
        ('feature_map = "table"', 'feature_map = "table"\nreadout = "deep"'),
        ("[train]", '[train]\ndtype = "float16"'),
        ("[family]", '[family]\nsha256 = "ab"'),
        ("params = {m = 2, length = 2}", "params = {m = 0, length = 2}"),
        ("params = {m = 2, length = 2}", "params = {m = 2, length = true}"),
        ("params = {m = 2, length = 2}", "params = {m = 2, nosuch = 1}"),
        ('name = "exhaustive"', 'name = "witness"'),  # a family without m and length
    ],
)
def test_the_schema_refuses_what_the_loader_refuses(tmp_path, edit):
    text = TINY.replace(*edit)
    validator = jsonschema.Draft202012Validator(sweep_schema())
    assert not validator.is_valid(tomllib.loads(text))
    with pytest.raises(ConfigError):
        load_sweep(write(tmp_path, text))
    assert validator.is_valid(tomllib.loads(TINY))


def test_types_are_strict_and_ints_become_floats():
    assert TrainConfig(power=8).power == 8.0 and isinstance(TrainConfig(power=8).power, float)
    assert TrainConfig(stop_below=0).stop_below is None  # one spelling of "never stop early"
    for bad, message in [
        ({"mse_steps": True}, "train.mse_steps: input should be a valid integer, got True"),
        ({"mse_steps": "2"}, "train.mse_steps: input should be a valid integer, got '2'"),
        ({"lr": True}, "train.lr: must be a finite number in (0, 1e+100], got True"),
        ({"lr": -1}, "train.lr: must be a finite number in (0, 1e+100], got -1"),
        ({"power": math.nan}, "train.power: must be a finite number ≥ 1, got nan"),
        ({"learning_rate": 1}, "train: unknown key 'learning_rate' (expected one of device, distill, dtype, "),
    ]:
        with pytest.raises(ConfigError) as info:
            TrainConfig(**bad)
        assert str(info.value).startswith(message) and "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"^model\.feature_map: unknown feature map 'bogus'"):
        model_spec(feature_map="bogus")
    with pytest.raises(ConfigError, match=r"^test_family\.name: unknown family 'nonesuch'"):
        RunConfig.parse({"family": {"name": "witness"}, "test_family": {"name": "nonesuch"}})
    with pytest.raises(ConfigError, match=r"^model\.module: is given exactly when kind = 'module'"):
        RunConfig.parse({"family": {"name": "witness"}, "model": {"kind": "module"}})


def test_configs_round_trip_and_copy_like_dataclasses():
    run = RunConfig(FamilySpec("witness"), default_model(feature_map="table", rank=4), TrainConfig(), seed=3)
    again = RunConfig.from_dict(run.as_dict())
    assert again.as_dict() == run.as_dict() and again.run_id() == run.run_id()
    assert pickle.loads(pickle.dumps(run)).run_id() == run.run_id()
    assert set(run.model.identity()) == set(KernelSpec.model_fields)  # no score_dim, scaled_scores, module
    assert run.identity()["model"] == run.model.identity()
    with pytest.raises(pydantic.ValidationError):
        run.model.rank = 8  # a model spec is frozen, as the dataclass was


KIND_SWEEP = TINY


def test_a_field_its_kind_does_not_use_is_refused_where_the_kind_is_chosen(tmp_path):
    # the base table spans the variants and the grid spans every kind: a softmax model has
    # no rank, so the grid's ranks give one softmax run per seed
    runs = load_sweep(write(tmp_path, KIND_SWEEP + '[[variants]]\n[[variants]]\nmodel.kind = "softmax"\n')).runs()
    assert sorted((r.model.kind, r.model.stack_rank or 0) for r in runs if r.seed == 0) == [
        ("kernel", 1),
        ("kernel", 2),
        ("softmax", 0),
    ]
    for text, key in [
        (KIND_SWEEP + '[[variants]]\nmodel.kind = "softmax"\nmodel.rank = 1\n', "rank"),
        (KIND_SWEEP + '[[variants]]\nmodel.kind = "softmax"\nmodel.feature_map = "elu1"\n', "feature_map"),
        (KIND_SWEEP.replace('feature_map = "table"', 'kind = "softmax"\nfeature_map = "elu1"'), "feature_map"),
        (KIND_SWEEP + "[[variants]]\nmodel.score_dim = 4\n", "score_dim"),
    ]:
        with pytest.raises(ConfigError) as info:
            load_sweep(write(tmp_path, text, "bad.toml"))
        assert f"model.{key}: does not apply to kind = " in str(info.value) and "\n" not in str(info.value)
    # defaults are no mistake; a table from elsewhere (the CLI, a record) loses what its kind
    # does not use, and a spec of one kind has no field of another
    load_sweep(write(tmp_path, KIND_SWEEP + '[[variants]]\nmodel.kind = "softmax"\nmodel.feature_map = "mlp_exp"\n'))
    table = {"family": {"name": "witness"}, "model": {"kind": "softmax", "feature_map": "elu1", "rank": 3}}
    assert RunConfig.parse(table).run_id() == RunConfig(FamilySpec("witness"), default_model(kind="softmax")).run_id()
    with pytest.raises(ConfigError, match=r"^model: unknown key 'feature_map' \(expected one of"):
        default_model(kind="softmax", feature_map="elu1")


def test_the_file_layout_is_a_model_with_one_line_errors(tmp_path):
    """:class:`SweepFile` and :class:`Variant` check the layout before any run is made."""
    for text, message in [
        ("bogus = 1\n" + TINY, "unknown key 'bogus' (expected one of family, grid, model, name, seed, test_family,"),
        (TINY.replace('name = "tiny"', "name = 3"), "name: input should be a valid string, got 3"),
        (
            TINY.replace('name = "tiny"', 'name = "tiny"\nvariants = []'),
            "variants: list should have at least 1 item after validation, not 0, got []",
        ),
        (
            TINY.replace('name = "tiny"', "name = 'tiny'\nvariants = [3]"),
            "variants.0: input should be a valid dictionary or instance of Variant, got 3",
        ),
        (TINY + "[[variants]]\nnosuch = 1\n", "variants.0: unknown key 'nosuch' (expected one of family, grid, model,"),
        (TINY + '[[variants]]\nseed = "x"\n', "variants.0.seed: input should be a valid integer, got 'x'"),
        (TINY + "[[variants]]\ngrid.model.rank = []\n", "variants.0.grid.model.rank: the grid axis is empty"),
        (TINY.replace("[family]", "[family.x]"), "family: unknown key 'x'"),
    ]:
        with pytest.raises(ConfigError) as info:
            load_sweep(write(tmp_path, text, "bad.toml"))
        assert message in str(info.value) and "\n" not in str(info.value), str(info.value)
    sweep = load_sweep(write(tmp_path, TINY + "[[variants]]\nseed = 7\n[[variants]]\nmodel.rank = 3\n"))
    assert [v for v in sweep.variants] == [{"seed": 7}, {"model.rank": 3}]
