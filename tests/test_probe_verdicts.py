"""Probe verdicts: the query-blind floor (exact), training curves, true feature counts, the
same kernel in the same wrapper, the recipe search, and the verdict per rank — exact,
collapsed, at the wall, not fitted."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.errors import ConfigError
from kernelgap.experiments.probe.section import probe_section
from kernelgap.experiments.probe.text import probe_sentence
from kernelgap.models.external import ModuleError, ModuleSpec, build_module, module_features
from kernelgap.probe import ProbeConfig, run_probe
from kernelgap.probe.config import parse_probes
from kernelgap.probe.floor import Problem, loss_optimum, lp_errors, minimax_floor, minimax_problem, problems
from kernelgap.probe.suites import RECIPES
from kernelgap.probe.twin import TWINS, BuiltinMapAttention, twin_map
from kernelgap.probe.verdicts import COLLAPSE_TOLERANCE, collapsed, needs_recipe, rank_verdicts, recipe_rows
from kernelgap.report.criteria import run_row
from kernelgap.task import build_family
from kernelgap.training import FamilySpec, RunConfig, TrainConfig, default_model, train_records
from kernelgap.training.stack import CURVE_EVERY

EXAMPLES = "kernelgap.probe.examples"
QUIET = {"log": lambda *_: None, "executor": "inline"}


def probe_module(target, kwargs=None, log=print, **settings) -> dict:
    """:func:`run_probe` of the :class:`ProbeConfig` these settings make."""
    return run_probe(ProbeConfig(target, kwargs or {}, **settings), log=log)


#: The witness family's query-blind loss optimum at p = 8 in closed form (docs/theory.md):
#: per query one duplicated good (error a), 15 duplicated bad and 30 mixed (error ±c),
#: a + 3c = −6 and a⁷ = 15 c⁷, so a = 6r/(r + 3), c = 6/(r + 3) with r = 15^(1/7).
R = 15 ** (1 / 7)
WITNESS_A, WITNESS_C = 6 * R / (R + 3), 6 / (R + 3)


def module_run(cls: str, rank: int, **train) -> dict:
    spec = ModuleSpec(target=f"{EXAMPLES}:{cls}", interface="layer")
    run = RunConfig(
        family=FamilySpec("witness"),
        model=default_model(kind="module", module=spec, rank=rank),
        train=TrainConfig(**{"stop_below": 0.25, **train}),
    )
    (record,) = train_records([run])
    return record


def row_of(record: dict) -> dict:
    row = run_row(record)
    final = record["curve"]["final"]
    return {**row, "final_loss": final["loss"], "final_power": final["power"], "rank_argument": row["rank"]}


@pytest.fixture(scope="module")
def witness_qb():
    from kernelgap.probe.floor import query_blind

    return query_blind(build_family("witness"), 8.0)


# -- the query-blind floor ----------------------------------------------------------------


def test_the_witness_floor_is_three_halves_and_its_loss_optimum_is_in_closed_form(witness_qb):
    family = build_family("witness")
    probs = problems(family)
    assert len(probs) == 16 and len(set(probs)) == 1  # every query's problem is the same one
    (prob,) = set(probs)
    assert prob.candidates == 16 and sum(w for _, _, w in prob.rows) == 46 and len(prob.rows) == 31
    assert minimax_floor(family) == Fraction(3, 2)
    assert witness_qb["floor"] == "3/2" and witness_qb["power"] == 8.0
    # the loss optimum is found numerically (Newton on the power mean), to about 1e-9 relative
    assert witness_qb["max_error"] == pytest.approx(WITNESS_A, rel=1e-7)
    assert witness_qb["mean_abs_error"] == pytest.approx((WITNESS_A + 45 * WITNESS_C) / 46, rel=1e-7)
    assert witness_qb["loss"] == pytest.approx(((WITNESS_A**8 + 45 * WITNESS_C**8) / 46) ** (1 / 8), rel=1e-7)
    q = (15 / 31) ** (1 / 7)  # the attention's output ignored: 31 targets 0 and 15 targets 6 per query
    assert witness_qb["query_only"]["max_error"] == pytest.approx(6 / (1 + q), rel=1e-7)
    value, z, dual = minimax_problem(prob)  # the certificate by hand: g/4 with the gap g = 6
    assert value == Fraction(3, 2) and sum(abs(x) for x in dual) == 1
    # least squares: a + c − 2d = −6 with a = 15c = −15d (the good, a bad, a mixed error): |a| = 5
    assert loss_optimum(family, 2.0).max_error == pytest.approx(5.0)


def test_the_floor_does_not_depend_on_the_reading_and_vanishes_on_ood_pools():
    assert minimax_floor(build_family("witness", reading="final")) == Fraction(3, 2)
    assert minimax_floor(build_family("ood", n=4, queries_per_class=8, split="train")) == 0


def _problem(data) -> Problem:
    cands = data.draw(st.integers(1, 4))
    width = data.draw(st.integers(1, 2))
    rows = data.draw(
        st.lists(
            st.tuples(
                st.lists(st.integers(0, cands - 1), min_size=width, max_size=width).map(lambda c: tuple(sorted(c))),
                st.integers(0, 4),
            ),
            min_size=1,
            max_size=8,
            unique=True,
        )
    )
    weights = data.draw(st.lists(st.integers(1, 3), min_size=len(rows), max_size=len(rows)))
    used = sorted({c for cs, _ in rows for c in cs})
    new = {c: k for k, c in enumerate(used)}
    return Problem(len(used), tuple(sorted((tuple(new[c] for c in cs), t, w) for (cs, t), w in zip(rows, weights))))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_floor_is_certified_both_ways_and_sandwiched_by_the_power_means(data):
    """The exact value is reached by its model and bounded by its dual, checked here again;
    independently, every L^p optimum has a max error at least the floor, and its optimality
    condition gives a dual vector whose bound is at most the floor."""
    prob = _problem(data)
    value, z, dual = minimax_problem(prob)
    a, t, w = prob.matrix()
    exact_a = [[Fraction(int(x)) for x in row] for row in a]
    errors = [sum(ar[k] * z[k] for k in range(len(z))) - int(tr) for ar, tr in zip(exact_a, t)]
    assert max(abs(e) for e in errors) == value
    assert all(sum(exact_a[r][k] * dual[r] for r in range(len(dual))) == 0 for k in range(len(z)))
    assert sum(abs(x) for x in dual) <= 1 and sum(int(tr) * d for tr, d in zip(t, dual)) == value
    for p in (8.0, 32.0):
        e = np.abs(lp_errors(prob, p))
        assert e.max() >= float(value) - 1e-7
        if e.max() > 1e-6:
            assert (w * e**p).sum() / (w * e ** (p - 1)).sum() <= float(value) + 1e-6


# -- curves, feature counts, twins ----------------------------------------------------------


def test_a_record_carries_its_training_curve():
    record = module_run("Elu1LinearAttention", 4, lr=1e-2, mse_steps=40, max_steps=80)
    curve = record["curve"]
    assert curve["every"] == CURVE_EVERY and curve["mse_steps"] == 40
    assert curve["step"] == list(range(0, record["steps"] + 1, CURVE_EVERY))[: len(curve["step"])]
    assert len(curve["max_error"]) == len(curve["loss"]) == len(curve["step"]) >= 2
    final = curve["final"]
    assert final["step"] == record["steps"] == 120 and final["power"] == 8.0
    assert final["max_error"] == pytest.approx(record["train"]["max_error"])
    assert final["max_error"] * (1 / 736) ** (1 / 8) <= final["loss"] <= final["max_error"]
    json.dumps(record, allow_nan=False)


def test_true_feature_counts_are_declared_or_read():
    def count(target: str, rank: int, **kwargs):
        from kernelgap.models.external import load_target

        spec = ModuleSpec(target=target, interface="layer", kwargs=kwargs)
        return module_features(build_module(load_target(target), spec, 24, rank, seed=0), rank)

    assert count(f"{EXAMPLES}:Elu1LinearAttention", 12) == 12
    assert count(f"{EXAMPLES}:DecayedLinearAttention", 7) == 7
    assert count(f"{EXAMPLES}:UniformAttention", 32) == 1  # α ≡ <1, 1>
    assert count("kernelgap.probe.twin:BuiltinMapAttention", 12, feature_map="taylor") == 10  # 1 + 3 + 6
    pytest.importorskip("fla")
    zoo = "kernelgap.probe.zoo:FlaLinearAttention"
    assert [count(zoo, 32, feature_map=m) for m in ("hedgehog", "t2r", "dpfp")] == [64, 32, 256]


def test_library_feature_counts_and_bad_declarations():
    from torch import nn

    from kernelgap.models.external import SequenceWrapper

    class Declares(nn.Module):
        kernelgap_features = 0

    with pytest.raises(ModuleError, match="must give a positive integer feature count, got 0"):
        module_features(SequenceWrapper(Declares(), None), 4)
    Declares.kernelgap_features = True  # a bool is no count
    with pytest.raises(ModuleError, match="must give a positive integer feature count, got True"):
        module_features(SequenceWrapper(Declares(), None), 4)
    assert module_features(SequenceWrapper(nn.Linear(2, 2), None), 4) is None  # cannot be told
    pp = pytest.importorskip("performer_pytorch")
    layer = pp.SelfAttention(dim=16, heads=1, dim_head=16, nb_features=12)
    assert module_features(SequenceWrapper(layer, None), 12) == 12


@pytest.mark.parametrize("name", ["elu1", "relu", "hedgehog", "taylor", "favor", "favor_iid"])
def test_the_twin_is_the_built_in_map_behind_the_layer_interface(name):
    import torch

    from kernelgap.models.feature_maps import feature_map_class

    torch.manual_seed(0)
    layer = BuiltinMapAttention(8, 6, name)
    y = layer(torch.randn(4, 3, 8))
    assert y.shape == (4, 3, 8) and torch.isfinite(y).all()
    assert layer.kernelgap_features(6) == feature_map_class(name).output_size(6)


def test_the_twin_table():
    from kernelgap.probe.examples import DecayedLinearAttention, Elu1LinearAttention, UniformAttention

    assert twin_map(Elu1LinearAttention, {}) == twin_map(DecayedLinearAttention, {"decay_init": 0.5}) == "elu1"
    assert twin_map(UniformAttention, {}) is None
    assert all(name is None or name in {"elu1", "relu", "hedgehog", "dpfp", "favor", "taylor"} for _, _, name in TWINS)
    zoo = pytest.importorskip("kernelgap.probe.zoo")
    cls = zoo.FlaLinearAttention
    assert [twin_map(cls, k) for k in ({}, {"feature_map": "t2r"}, {"feature_map": "dpfp"})] == [
        "hedgehog",
        "relu",
        "dpfp",
    ]


def test_the_dpfp_twin_is_fla_dpfp_layer_for_layer():
    """fla's DPFP has no parameter of its own, so its twin with the same projections is the
    same function: the twin says "the same kernel" of it, not a likeness."""
    zoo = pytest.importorskip("kernelgap.probe.zoo")
    from kernelgap.probe.twin import BuiltinMapAttention

    torch.manual_seed(0)
    fla = zoo.FlaLinearAttention(d_model=12, rank=3, feature_map="dpfp")
    features = fla.kernelgap_features(3)
    twin = BuiltinMapAttention(d_model=12, rank=features, feature_map="dpfp")
    assert features == twin.kernelgap_features(features) == 24
    for name in "qkv":
        getattr(twin, name).load_state_dict(getattr(fla, name).state_dict())
    twin.o = torch.nn.Identity()
    x = torch.randn(5, 7, 12)
    torch.testing.assert_close(twin(x), fla(x))


# -- verdicts -----------------------------------------------------------------------------


def synthetic(rank: int, seed: int, state: str, qb: dict) -> dict:
    """A run row: ``exact``, ``collapsed`` (at the query-blind loss), ``failed`` (below it,
    not exact), ``diverged`` or ``old`` (no curve, ending at the query-blind max error)."""
    max_error, loss, power = {
        "exact": (0.3, 0.1, 8.0),
        "collapsed": (2.0, qb["loss"] * (1 - COLLAPSE_TOLERANCE / 2), 8.0),
        "failed": (1.2, qb["loss"] * 0.7, 8.0),
        "diverged": (None, None, 8.0),
        "old": (qb["max_error"] * 1.001, None, None),
    }[state]
    return {
        "rank": rank,
        "seed": seed,
        "max_error": max_error,
        "exact": max_error is not None and max_error < 0.5,
        "final_loss": loss,
        "final_power": power,
    }


def test_collapse_is_the_query_blind_loss_or_worse(witness_qb):
    assert collapsed(synthetic(8, 0, "collapsed", witness_qb), witness_qb)
    assert collapsed({**synthetic(8, 0, "collapsed", witness_qb), "final_loss": 3.0}, witness_qb)  # worse
    assert not collapsed(synthetic(8, 0, "failed", witness_qb), witness_qb)
    assert not collapsed(synthetic(8, 0, "exact", witness_qb), witness_qb)
    assert not collapsed(synthetic(8, 0, "diverged", witness_qb), witness_qb)
    assert collapsed(synthetic(8, 0, "old", witness_qb), witness_qb)  # no curve: by the max error
    other = {**synthetic(8, 0, "collapsed", witness_qb), "final_power": 2.0}
    assert not collapsed(other, witness_qb)  # another loss than the optimum's: not judged
    ood = {**witness_qb, "floor": "0", "loss": 0.0, "max_error": 0.0}
    assert not collapsed(synthetic(8, 0, "collapsed", witness_qb), ood)  # a query-blind model fits there


def test_verdicts_exhaustively_on_small_grids(witness_qb):
    """Every mix of up to three seeds, a certificate or none, a known feature count or
    not, a recipe that fits or not: the verdict is the first of exact (most seeds, or the
    recipe), collapsed (most seeds), at the wall (features below the certificate), not fitted."""
    states = ("exact", "collapsed", "failed", "diverged")
    for seeds in (1, 2, 3):
        for mix in itertools.product(states, repeat=seeds):
            for certified, (rank, count), recipe_fits in itertools.product(
                (None, 16), ((8, 8), (8, 32), (24, None), (8, None)), (None, False, True)
            ):
                rows = [synthetic(rank, k, s, witness_qb) for k, s in enumerate(mix)]
                recipes = []
                if recipe_fits is not None:
                    tried = {**synthetic(rank, 0, "exact" if recipe_fits else "failed", witness_qb)}
                    recipes = [({"name": "lr-third", "schedule": "lr ÷ 3"}, [tried])]
                (v,) = rank_verdicts(rows, {rank: count}, certified, witness_qb, recipes)
                compared = count if count is not None else rank
                if 2 * mix.count("exact") > seeds or recipe_fits:
                    want = "exact"
                elif 2 * mix.count("collapsed") > seeds:
                    want = "collapsed"
                elif certified is not None and compared < certified:
                    want = "at the wall"
                else:
                    want = "not fitted"
                assert v["verdict"] == want, (mix, certified, rank, count, recipe_fits)
                assert v["compared"] == ("features" if count is not None else "rank argument")
                assert v["recipe"] == ("lr-third" if want == "exact" and 2 * mix.count("exact") <= seeds else None)
                assert len(v["tried"]) == (recipe_fits is not None)
                assert needs_recipe(v, certified) == (want != "exact" and not (certified and compared < certified))


def test_uniform_attention_is_collapsed_at_the_query_blind_floor(witness_qb):
    record = module_run("UniformAttention", 16, lr=1e-2, mse_steps=30, max_steps=60)
    row = {**row_of(record), "features": 1}
    assert row["final_loss"] >= witness_qb["loss"] * (1 - 1e-9)  # nothing query-blind does better
    assert row["max_error"] >= witness_qb["floor_value"]
    (v,) = rank_verdicts([row], {16: 1}, 16, witness_qb)
    assert v["verdict"] == "collapsed" and v["features"] == 1


def test_the_elu1_example_is_exact_at_a_small_rank(witness_qb):
    record = module_run("Elu1LinearAttention", 24, lr=1e-2, mse_steps=100, max_steps=500)
    (v,) = rank_verdicts([row_of(record)], {24: 24}, 16, witness_qb)
    assert v["verdict"] == "exact" and record["train"]["max_error"] < 0.25


def test_a_probe_records_features_twin_floor_and_the_recipes_it_tried(tmp_path):
    meta = probe_module(
        f"{EXAMPLES}:Elu1LinearAttention", ranks={"witness": [16], "ood-n4": [2]}, steps=6, out=tmp_path, **QUIET
    )
    witness, ood = meta["suites"]
    assert meta["twin"] == "elu1" and witness["features"] == [16] and witness["twin_ranks"] == [16]
    assert witness["query_blind"]["floor"] == "3/2" and ood["query_blind"]["floor"] == "0"
    # 6 steps fit nothing: each rank the certificate allows (16 ≥ 16; ood-n4 has none) tries every recipe
    for suite in (witness, ood):
        assert [r["name"] for r in suite["recipes"]] == [r.name for r in RECIPES]
        assert [(r["train"]["max_steps"], r["train"]["lr"] / suite["train"]["lr"]) for r in suite["recipes"]] == [
            (4, pytest.approx(3.0)),
            (8, pytest.approx(1 / 3)),
        ]
        tried = recipe_rows(tmp_path / suite["recipe_folder"], suite["recipes"])
        assert [[row["rank"] for row in rows] for _, rows in tried] == [suite["ranks"]] * len(RECIPES)
    assert len(list((tmp_path / "baseline").glob("twin-elu1-*/runs/*.json"))) == 2
    section = probe_section(tmp_path)
    (v,) = section["suites"][0]["verdicts"]
    assert v["verdict"] in ("collapsed", "not fitted") and len(v["tried"]) == len(RECIPES)
    assert v["baseline"] is not None and v["twin"] in ("collapsed", "not fitted")
    assert section["suites"][0]["axis"] == "features" and section["suites"][0]["runs"][0]["rank_argument"] == 16
    text = probe_sentence({**section, "name": "elu"})
    assert "on its training family by rank argument: 16 " in text and "tried lr × 3, lr ÷ 3 over 2× steps" in text
    assert "built-in elu1 in the same wrapper: 16 features" in text and "query-blind floor 3/2 (max error" in text
    again = probe_module(
        f"{EXAMPLES}:Elu1LinearAttention", ranks={"witness": [16], "ood-n4": [2]}, steps=6, out=tmp_path, **QUIET
    )
    assert again == meta  # rerun: every run reused, the same record
    assert math.isfinite(witness["query_blind"]["loss"])


def test_the_recipe_search_runs_on_the_suites_named_only(tmp_path):
    meta = probe_module(
        f"{EXAMPLES}:Elu1LinearAttention",
        ranks={"witness": [16], "ood-n4": [2]},
        steps=6,
        out=tmp_path,
        recipes=["witness"],
        **QUIET,
    )
    witness, ood = meta["suites"]
    assert [r["name"] for r in witness["recipes"]] == [r.name for r in RECIPES]
    assert ood["recipes"] == [] and "recipe_folder" not in ood


@pytest.mark.parametrize("value", ["witness", 3, [1]])
def test_a_probe_entry_with_bad_recipes_is_refused(tmp_path, value):
    with pytest.raises(ConfigError, match="recipes: must be true, false or a list of suite names, got "):
        parse_probes([{"name": "x", "target": "a:b", "recipes": value}], tmp_path / "p.toml")


@pytest.mark.parametrize(
    "entry, needle",
    [
        ({"name": "x", "target": "a:b", "colour": 1}, "probes[0]: unknown key 'colour'"),
        ({"name": "", "target": "a:b"}, "probes[0].name: must be a non-empty string, got ''"),
        ({"name": "x"}, "probes[0].target: field required"),
        ({"name": "x", "target": "a:b", "ranks": [1.5]}, "probes[0].ranks: must be a list of ranks"),
        (
            {"name": "x", "target": "a:b", "seeds": [True]},
            "probes[0].seeds.0: must be an integer in 0..2^64 − 1, got True",
        ),
        (
            {"name": "x", "target": "a:b", "lr": "fast"},
            "probes[0].lr: must be a finite number in (0, 1e+100], got 'fast'",
        ),
        ({"name": "x", "target": "a:b", "out": "elsewhere"}, "probes[0]: unknown key 'out'"),  # the reproduction's
        ({"name": "x", "target": "a:b", "executor": "inline"}, "probes[0]: unknown key 'executor'"),
        ({"name": "x", "target": "a:b", "ranks": {"w": [2]}}, "probes[0].ranks: names no suite 'w'"),
    ],
)
def test_a_probe_entry_is_checked_against_its_model(tmp_path, entry, needle):
    with pytest.raises(ConfigError) as caught:
        parse_probes([entry], tmp_path / "p.toml")
    assert str(caught.value).startswith(f"{tmp_path / 'p.toml'}: ") and needle in str(caught.value)
