"""A recipe sized by its family: the facts it reads (overlap rank, level span) and the fields it fills.

The facts are checked against direct computations (the overlap matrix formed and its rank
taken; each query's levels walked one by one) on generated 0/1 matrices and on small registered
families; the sizing against the rule of docs/experiments.md, "A recipe sized by its family":
value width ``max(32, rank)``, temperature 1/2 and twice the steps on a steep log-space map,
nothing filled that the run set, and a run read back from its record the same run.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.task import build_family
from kernelgap.task.constructions import candidate_tokens, query_tokens
from kernelgap.training import RunConfig
from kernelgap.training.recipe import (
    POWER_PER_LOG,
    STEEP_SPAN,
    STEEP_STEPS,
    STEEP_TEMPERATURE,
    family_shape,
    level_span,
    overlap_rank,
)

bits = st.integers(1, 12).flatmap(
    lambda m: st.tuples(
        st.lists(st.lists(st.integers(0, 1), min_size=m, max_size=m), min_size=1, max_size=14),
        st.lists(st.lists(st.integers(0, 1), min_size=m, max_size=m), min_size=1, max_size=14),
    )
)


@settings(max_examples=200, deadline=None)
@given(bits)
def test_the_overlap_rank_is_that_of_the_formed_matrix(pair):
    q, a = (np.array(x, dtype=np.int64) for x in pair)
    assert overlap_rank(q, a) == np.linalg.matrix_rank((q @ a.T).astype(float))


def naive_span(overlaps: np.ndarray) -> float:
    worst = 0.0
    for row in overlaps:
        levels = sorted(set(int(v) for v in row))
        worst = max(worst, sum(math.log(2 * (b - a) - 1) for a, b in zip(levels, levels[1:])))
    return worst


rows_of_one_width = st.integers(1, 8).flatmap(
    lambda width: st.lists(st.lists(st.integers(0, 9), min_size=width, max_size=width), min_size=1, max_size=6)
)


@settings(max_examples=200, deadline=None)
@given(rows_of_one_width)
def test_the_level_span_walks_each_querys_distinct_levels(rows):
    overlaps = np.array(rows, dtype=np.int64)
    assert level_span(overlaps) == pytest.approx(naive_span(overlaps), abs=1e-9)


@pytest.mark.parametrize(
    "name, params",
    [("witness", {}), ("hadamard", {"n": 12}), ("ladder", {"m": 32, "n": 11}), ("layer", {"m": 10, "length": 7})],
)
def test_the_shape_of_a_small_family_is_its_direct_computation(name, params):
    family = build_family(name, **params)
    shape = family_shape(family)
    tokens = family.tokens.astype(np.int64)
    queries, candidates = query_tokens(family), candidate_tokens(family)
    attended = np.union1d(queries, candidates)
    assert shape.overlap_rank == np.linalg.matrix_rank((tokens[queries] @ tokens[attended].T).astype(float))
    assert shape.span == pytest.approx(naive_span(tokens[queries] @ tokens[candidates].T))
    assert (shape.length, shape.queries, shape.tokens) == (family.length, len(queries), len(attended))


def run(family: dict, model: dict, train: dict | None = None) -> RunConfig:
    return RunConfig.parse({"family": family, "model": model, "train": train or {}})


WITNESS = {"name": "witness"}
STEEP = {"name": "ladder", "params": {"m": 32, "n": 11}}  # span 4.34 > STEEP_SPAN


def test_a_family_within_the_defaults_changes_no_field():
    plain = run(WITNESS, {"feature_map": "table"})
    sized = plain.resolved()
    assert sized.model == plain.model and sized.train.max_steps == plain.train.max_steps
    assert sized.recipe["sized"] == {} and sized.recipe["family"]["overlap_rank"] == 16


def test_a_steep_family_gets_half_the_temperature_and_more_steps_on_a_log_space_map():
    assert family_shape(build_family(STEEP["name"], **STEEP["params"])).span > STEEP_SPAN
    table = run(STEEP, {"feature_map": "table"}).resolved()
    assert table.model.temperature == STEEP_TEMPERATURE
    assert table.train.max_steps == 5000 * STEEP_STEPS
    assert table.recipe["sized"] == {"temperature": STEEP_TEMPERATURE, "max_steps": 5000 * STEEP_STEPS}
    mlp = run(STEEP, {"feature_map": "mlp_exp"}).resolved()  # log-space, generic schedule: kept
    assert (mlp.model.temperature, mlp.train.max_steps) == (STEEP_TEMPERATURE, 2000)
    relu = run(STEEP, {"feature_map": "relu"}).resolved()  # linear space: no temperature
    assert (relu.model.temperature, relu.train.max_steps) == (1.0, 2000)


def test_what_a_run_sets_is_never_sized():
    given_all = run(
        STEEP,
        {"feature_map": "table", "temperature": 1.0, "d_value": 8},
        {"max_steps": 300, "power": 8.0, "prune_from": 1.0},
    ).resolved()
    assert (given_all.model.temperature, given_all.model.d_value, given_all.train.max_steps) == (1.0, 8, 300)
    assert given_all.recipe is None
    mse_only = run(STEEP, {"feature_map": "table"}, {"mse_steps": 10}).resolved()
    assert mse_only.train.max_steps == 2000  # a schedule the run chose is not lengthened


def test_the_value_width_follows_the_overlap_rank_for_kernel_and_softmax():
    wide = {"name": "ladder", "params": {"m": 40, "n": 40}}
    rank = family_shape(build_family(wide["name"], **wide["params"])).overlap_rank
    assert rank > 32
    assert run(wide, {"feature_map": "table"}).resolved().model.d_value == rank
    assert run(wide, {"kind": "softmax"}).resolved().model.d_value == rank
    assert run(WITNESS, {"kind": "softmax"}).resolved().model.d_value == 32


@pytest.mark.parametrize(("m", "length"), [(8, 4), (10, 6), (10, 7), (12, 11)])
def test_at_length_n_the_power_follows_the_sequences_a_step_scores(m, length):
    layer = {"name": "layer", "params": {"m": m, "length": length}}
    family = build_family("layer", m=m, length=length)
    shape = family_shape(family)
    assert shape.sequences == len(family.queries) * len(family.candidates) ** 2  # two-candidate, full batch
    sized = run(layer, {"feature_map": "table"}).resolved()
    want = max(8.0, float(round(POWER_PER_LOG * math.log(shape.sequences))))
    assert sized.train.power == want > 8.0 and sized.recipe["sized"]["power"] == want
    assert run(layer, {"feature_map": "table"}, {"power": 12.0}).resolved().train.power == 12.0  # set: kept


@pytest.mark.parametrize("family", [WITNESS, STEEP, {"name": "ladder", "params": {"m": 40, "n": 40}}])
def test_at_length_3_the_calibrated_power_stands(family):
    sized = run(family, {"feature_map": "table"}).resolved()
    assert sized.train.power == 8.0 and "power" not in sized.recipe["sized"]


@pytest.mark.parametrize("family", [WITNESS, STEEP])
def test_sizing_is_idempotent_and_a_record_reads_back_as_the_same_run(family):
    first = run(family, {"feature_map": "table"})
    sized = first.resolved()
    assert sized.resolved().as_dict() == sized.as_dict()
    back = RunConfig.from_dict(first.as_dict())
    assert back.run_id() == first.run_id() and back.as_dict() == first.as_dict()
    assert back.resolved().recipe is None  # every field set: nothing left to size
