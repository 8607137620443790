"""Distillation from a table (``train.distill``): the teacher is a table trained on the family,
the student's attention is fitted to the teacher's on the pairs the family has, the student
starts from the teacher's readout, its record says so, its checkpoint holds its weights, and it
is never exact below the certificate."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.errors import ConfigError
from kernelgap.experiments.series.experiment import map_of, trained_as
from kernelgap.task import EXACT_THRESHOLD, Family
from kernelgap.training import RunConfig
from kernelgap.training.distill import (
    FIT_KL,
    FIT_STEPS,
    attention_log_probs,
    fit_attention,
    meetings,
    teacher_runs,
)
from kernelgap.training.trainer import build_stack, train_stack
from sweep_helpers import records, rescored_max_error, trained_folder

SWEEP = """name = "distill"
[family]
name = "hadamard"
params = {m = 16, n = 4}
[model]
feature_map = "mlp_exp"
readout = "linear"
[train]
mse_steps = 0
max_steps = 1000
dtype = "float64"
distill = true
[grid]
model.rank = [3, 4]
seed = [0, 1]
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return trained_folder(tmp_path_factory, "distill", SWEEP)


def test_every_run_records_its_teacher_and_its_fit(folder):
    recs = records(folder)
    assert len(recs) == 4
    for r in recs:
        d = r["distilled"]
        assert d["teacher"]["feature_map"] == "table" and d["teacher"]["status"] == "ok"
        assert d["fit_steps"] > 0 and d["kl"] >= -1e-9
        assert r["wall_time_s"] > d["wall_time_s"] > 0  # the run's wall time counts the teacher and the fit


def test_distilled_runs_reach_the_certificate_and_never_go_below_it(folder):
    for r in records(folder):
        teacher = r["distilled"]["teacher"]["max_error"]
        if r["config"]["model"]["rank"] == 3:  # certified rank 4: no model of 3 features is exact
            assert r["train"]["max_error"] >= EXACT_THRESHOLD and teacher >= EXACT_THRESHOLD
        else:
            assert teacher < EXACT_THRESHOLD and r["train"]["max_error"] < EXACT_THRESHOLD


def test_the_checkpoint_holds_the_students_weights(folder):
    for r in records(folder):
        assert rescored_max_error(folder, r) == pytest.approx(r["train"]["max_error"], rel=1e-9, abs=1e-12)


def run(distill: bool, feature_map: str = "mlp_exp", kind: str = "kernel") -> RunConfig:
    model = {"kind": kind} if kind == "softmax" else {"kind": kind, "feature_map": feature_map, "rank": 4}
    raw = {"family": {"name": "hadamard", "params": {"m": 16, "n": 4}}, "model": {**model, "readout": "linear"}}
    return RunConfig.parse({**raw, "train": {"distill": distill, "dtype": "float64", "max_steps": 300}})


def test_a_run_without_distillation_keeps_its_id():
    plain = RunConfig.parse(
        {
            "family": {"name": "hadamard", "params": {"m": 16, "n": 4}},
            "model": {"kind": "kernel", "feature_map": "mlp_exp", "rank": 4, "readout": "linear"},
            "train": {"dtype": "float64", "max_steps": 300},
        }
    )
    assert run(False).run_id() == plain.run_id()
    assert "distill" not in plain.identity()["train"]
    assert run(True).run_id() != plain.run_id()


@pytest.mark.parametrize("feature_map,kind", [("table", "kernel"), ("mlp_exp", "softmax")])
def test_only_a_kernel_map_other_than_the_table_is_distilled(feature_map, kind):
    with pytest.raises(ConfigError, match="train.distill"):
        run(True, feature_map, kind)


def test_the_command_line_refuses_distilling_a_table_in_one_line(cli):
    code, out, err = cli(
        "train", "--family", "hadamard", "-p", "m=16", "-p", "n=4", "--feature-map", "table", "--distill"
    )
    assert code == 2 and not out
    assert "train.distill" in err and len(err.strip().splitlines()) == 1


def test_the_teacher_is_the_students_model_with_the_table_map():
    student = run(True).resolved()
    (teacher,) = teacher_runs([student])
    assert teacher.model.feature_map == "table"
    for field in ("rank", "heads", "readout", "d_value", "hidden", "position_dependent", "causal"):
        assert getattr(teacher.model, field) == getattr(student.model, field)
    assert teacher.seed == student.seed and teacher.family == student.family and not teacher.train.distill


def test_the_fitted_student_attends_as_its_teacher_and_reads_out_as_it():
    student_run = run(True).resolved()
    (teacher_run,) = teacher_runs([student_run])
    teacher, family, _ = build_stack([teacher_run])
    train_stack(teacher, family, teacher_run.train)
    student, _, _ = build_stack([student_run])
    kl, steps = fit_attention(student, teacher, family, student_run.train.lr)
    assert 0 < steps <= FIT_STEPS and (kl[0] < FIT_KL or steps == FIT_STEPS)
    assert kl[0] < 0.05
    for (name, a), (_, b) in zip(student.readout.state_dict().items(), teacher.readout.state_dict().items()):
        assert torch.equal(a, b), name
    queries, mask = meetings(family)
    tokens = torch.as_tensor(family.tokens, dtype=torch.float64)
    rows, allowed = torch.as_tensor(queries), torch.as_tensor(mask)
    with torch.no_grad():
        p_t = attention_log_probs(teacher, tokens, rows, allowed).exp()
        p_s = attention_log_probs(student, tokens, rows, allowed).exp()
    assert float((p_t - p_s).abs().max()) < 0.1
    assert torch.all(p_s[..., ~allowed] == 0)  # no mass where the family never pairs the tokens


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.integers(1, 3),
            st.lists(st.lists(st.integers(0, n - 1), min_size=3, max_size=3), min_size=1, max_size=6),
            st.one_of(st.none(), st.integers(1, 3)),
        )
    )
)
def test_meetings_are_the_pairs_some_sequence_holds(case):
    n, m_extra, index, query_position = case
    m = n + m_extra
    tokens = np.eye(n, m, dtype=np.uint8)  # n distinct tokens
    family = Family(tokens=tokens, index=np.array(index), query_position=query_position)
    queries, mask = meetings(family)
    scored = family.scored_positions
    expected_queries = sorted({seq[p] for seq in index for p in scored})
    assert list(queries) == expected_queries
    for (i, q), z in itertools.product(enumerate(queries), range(n)):
        held = any(seq[p] == q and z in seq for seq in index for p in scored)
        assert bool(mask[i, z]) == held


def test_the_series_names_a_distilled_run_apart_from_its_map():
    assert trained_as({"feature_map": "mlp_exp", "distilled": True}) == "mlp_exp (distilled)"
    assert trained_as({"feature_map": "mlp_exp", "distilled": False}) == "mlp_exp"
    assert trained_as({"feature_map": "table"}) == "table"
    assert map_of("mlp_exp (distilled)") == "mlp_exp" and map_of("table") == "table"


def test_a_distilled_run_defaults_to_its_teachers_readout_and_the_power_mean_alone():
    family = {"name": "hadamard", "params": {"m": 16, "n": 4}}
    plain = RunConfig.parse({"family": family, "model": {"kind": "kernel", "feature_map": "mlp_exp"}}).resolved()
    taught = RunConfig.parse(
        {"family": family, "model": {"kind": "kernel", "feature_map": "mlp_exp"}, "train": {"distill": True}}
    ).resolved()
    assert plain.model.readout == "mlp" and plain.train.mse_steps > 0
    assert taught.model.readout == "linear" and taught.train.mse_steps == 0
    assert taught.train.max_steps == plain.train.max_steps
    (teacher,) = teacher_runs([taught])
    assert teacher.model.readout == taught.model.readout
    given = RunConfig.parse(
        {
            "family": family,
            "model": {"kind": "kernel", "feature_map": "mlp_exp", "readout": "mlp"},
            "train": {"distill": True, "mse_steps": 10},
        }
    ).resolved()
    assert given.model.readout == "mlp" and given.train.mse_steps == 10  # what a run gives is kept


def test_a_distilled_mlp_map_is_as_wide_as_twice_the_tokens_it_must_tell_apart():
    from kernelgap.training.recipe import HIDDEN_PER_TOKEN, shape_of

    def hidden(distill: bool, **model) -> int:
        raw = {"family": {"name": "hadamard", "params": {"m": 48, "n": 47}}, "train": {"distill": distill}}
        run = RunConfig.parse({**raw, "model": {"kind": "kernel", "feature_map": "mlp_exp", "rank": 47, **model}})
        return run.resolved().model.hidden

    tokens = shape_of(RunConfig.parse({"family": {"name": "hadamard", "params": {"m": 48, "n": 47}}}).family).tokens
    assert tokens == 94  # 47 queries and their 47 complements
    assert hidden(True) == HIDDEN_PER_TOKEN * tokens
    assert hidden(False) == 64 and hidden(True, hidden=80) == 80  # trained alone, or given: kept


def test_a_product_family_trained_on_its_two_candidate_sequences_is_refused_before_training(cli):
    code, out, err = cli(
        "train", "--family", "layer", "-p", "m=8", "-p", "length=5", "--feature-map", "mlp_exp", "--distill"
    )
    assert code == 2 and not out
    assert "train.distill needs a family trained in full" in err and len(err.strip().splitlines()) == 1


def test_train_says_what_the_run_was_distilled_from(cli):
    code, out, _ = cli(
        "train",
        "--family",
        "hadamard",
        "-p",
        "m=16",
        "-p",
        "n=4",
        "--feature-map",
        "mlp_exp",
        "--rank",
        "4",
        "--distill",
        "--max-steps",
        "300",
    )
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("distilled from a table of the same rank"))
    assert "teacher max_error=" in line and "attention fitted in" in line and "KL" in line
