"""Model specs: one class per kind, told apart by ``kind`` (docs/formats.md, "Sweep files");
what a run id hashes and what a record lists; the run ids of the example sweeps."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kernelgap.errors import ConfigError
from kernelgap.models import KernelSpec, ModuleModelSpec, SoftmaxSpec, model_spec
from kernelgap.models.specs import every_field, model_identity
from kernelgap.training import RunConfig
from kernelgap.training.config import EXPLICIT_MODEL_KEYS, record_model

ROOT = Path(__file__).resolve().parents[1]
WITNESS = {"name": "witness"}
MODULE = {"target": "kernelgap.probe.twin:BuiltinMapAttention", "kwargs": {"feature_map": "elu1"}, "d_model": 8}


def run(model: dict, context: dict | None = None) -> RunConfig:
    return RunConfig.parse({"family": WITNESS, "model": model}, context=context)


def _digest_module():
    spec = importlib.util.spec_from_file_location("run_id_digest", ROOT / "benchmarks" / "run_id_digest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_sweeps_keep_their_run_ids():
    """Pinned when the model specs became one class per kind: a change to how configs are
    modelled must not move a run id (``benchmarks/run_id_digest.py`` covers the profiles).
    The example files of that day are pinned; one added later has ids of its own."""
    digest = _digest_module()
    pinned = ("examples/ood_n32_schedules.toml", "examples/witness_sweep.toml")
    sweeps = digest.example_sweeps()
    assert digest.digest({label: sweeps[label] for label in pinned}) == (
        "791198008007a887bfb2283c316502d6f3bc2b8d8fb9255a80f7565aff97ed06",
        78,
    )


def test_each_kind_is_its_own_class():
    assert type(run({"kind": "softmax"}).model) is SoftmaxSpec
    assert type(run({"feature_map": "table"}).model) is KernelSpec  # kernel by default
    module = run({"kind": "module", "module": MODULE, "rank": 3}).model
    assert type(module) is ModuleModelSpec and module.rank == 3 and module.module.d_model == 8
    assert type(model_spec(kind="softmax", heads=2)) is SoftmaxSpec
    with pytest.raises(ConfigError, match=r"^model\.kind: must be one of kernel, softmax, module, got 'dense'$"):
        model_spec(kind="dense")


@pytest.mark.parametrize(
    "model, message",
    [
        ({"kind": "dense"}, "model.kind: must be one of kernel, softmax, module, got 'dense'"),
        ({"kind": 3}, "model.kind: must be one of kernel, softmax, module, got 3"),
        ({"kind": "softmax", "heads": 0}, "model.heads: input should be greater than or equal to 1, got 0"),
        ({"kind": "softmax", "score_dim": "x"}, "model.score_dim: input should be a valid integer, got 'x'"),
        ({"kind": "softmax", "bogus": 1}, "model: unknown key 'bogus' (expected one of causal, d_value, heads, "),
        ({"feature_map": "table", "rank": 0}, "model.rank: input should be greater than or equal to 1, got 0"),
        ({"kind": "module", "module": MODULE, "rank": "two"}, "model.rank: input should be a valid integer, got 'two'"),
        (
            {"kind": "module", "module": {**MODULE, "d_model": 0}},
            "model.module.d_model: input should be greater than or equal to 1, got 0",
        ),
        ({"kind": "module"}, "model.module: is given exactly when kind = 'module'"),
        ({"module": MODULE}, "model.module: is given exactly when kind = 'module'"),
    ],
)
def test_an_error_is_named_by_its_key_not_by_the_kind(model, message):
    with pytest.raises(ConfigError) as info:
        run(model)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_fields_of_other_kinds_are_dropped_or_refused():
    # from the CLI or a record: dropped, the id is the kind's
    assert run({"kind": "softmax", "feature_map": "elu1", "rank": 3}).run_id() == run({"kind": "softmax"}).run_id()
    # set explicitly in a sweep file: refused unless at its default
    explicit = {EXPLICIT_MODEL_KEYS: {"rank"}}
    with pytest.raises(ConfigError, match=r"^model\.rank: does not apply to kind = 'softmax', got 1 "):
        run({"kind": "softmax", "rank": 1}, explicit)
    assert run({"kind": "softmax", "rank": 16}, explicit).run_id() == run({"kind": "softmax"}).run_id()


def test_a_record_lists_every_field_and_reads_back():
    """One layout for every kind; the fields a kind does not use are null, so a record names
    only what its model was computed from."""
    soft = run({"kind": "softmax", "heads": 2})
    record = soft.as_dict()["model"]
    assert list(record) == list(every_field())  # one layout for every kind
    assert record["heads"] == 2 and record["scaled_scores"] is True and record["temperature"] == 4.0
    assert record["rank"] is None and record["feature_map"] is None and record["module"] is None
    assert {k for k, v in record.items() if v is not None} <= set(SoftmaxSpec.model_fields)
    assert model_identity(record) == soft.model.identity() == soft.identity()["model"]
    assert RunConfig.from_dict(soft.as_dict()).run_id() == soft.run_id()
    module = run({"kind": "module", "module": MODULE})
    written = record_model(module.model)
    assert list(written) == list(every_field()) and written["rank"] == 16 and written["module"] is not None
    assert written["init_scale"] is None and written["heads"] is None  # a module is built from neither
    assert RunConfig.from_dict(module.as_dict()).model == module.model
    kernel = run({"feature_map": "elu1", "rank": 3})
    written = kernel.as_dict()["model"]
    assert written["rank"] == 3 and written["score_dim"] is None and written["scaled_scores"] is None
    assert RunConfig.from_dict(kernel.as_dict()).run_id() == kernel.run_id()


def test_the_kernel_identity_drops_temperature_only_in_linear_space():
    assert "temperature" not in run({"feature_map": "elu1", "temperature": 3.0}).model.identity()
    assert run({"feature_map": "mlp_exp", "temperature": 3.0}).model.identity()["temperature"] == 3.0


def test_a_run_looks_its_feature_map_up_once(monkeypatch):
    """Parsing, identifying and building a kernel run resolve the map's name once."""
    from kernelgap.models import feature_maps
    from kernelgap.training.trainer import build_stack, run_record

    names = []

    def counted(name):
        names.append(name)
        return feature_maps.FEATURE_MAPS[name]

    monkeypatch.setattr(feature_maps, "feature_map_class", counted)  # what a spec looks maps up with
    parsed = RunConfig.parse(
        {
            "family": {"name": "exhaustive", "params": {"m": 2, "length": 2}},
            "model": {"feature_map": "table", "rank": 2},
        }
    )
    resolved = parsed.resolved()
    assert parsed.model.readout == "linear" and resolved.train.max_steps == 5000  # the map's recipe
    resolved.run_id(), resolved.stack_key(), resolved.as_dict()
    model, family, _ = build_stack([resolved])
    assert model.scorer.tabled and run_record(resolved, _result(), 1)["map_facts"]["name"] == "table"
    assert names == ["table"]


def _result():
    from kernelgap.training import MemberResult

    return MemberResult(status="ok", steps=0, wall_time_s=0.0, train={"max_error": 0.0}, test=None)
