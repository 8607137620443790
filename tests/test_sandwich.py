"""The sandwich of the minimal rank: certified below, the smallest exact construction or
trained model above (``report.criteria.sandwich``), and the series' five fields per family."""

from __future__ import annotations

import itertools
import math
import tomllib
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.experiments.series import experiment as series
from kernelgap.experiments.series.step import certificates
from kernelgap.report.criteria import majority, run_row, sandwich
from kernelgap.reproduction.schema import section_problem, section_schema
from kernelgap.sweeps.config import load_sweep
from kernelgap.task import build_family
from kernelgap.theory.certificate import certify

SERIES = Path(series.__file__).resolve().parent


def run(rank, seed, exact, fm="table"):
    return {"rank": rank, "seed": seed, "exact": exact, "feature_map": fm}


# -- sandwich() ------------------------------------------------------------------------


def test_most_is_strictly_more_than_half_of_the_seeds():
    two_of_four = [run(8, s, s < 2) for s in range(4)] + [run(9, s, s < 3) for s in range(4)]
    out = sandwich(8, 12, two_of_four)
    assert out["trained_any"] == 8 and out["trained_most"] == 9  # 2 of 4 is not most, 3 of 4 is
    assert out["determined"]
    two_of_three = [run(5, s, s != 1) for s in range(3)]
    assert sandwich(5, None, two_of_three)["trained_most"] == 5


def test_a_missing_seed_counts_as_not_exact():
    rows = [run(6, 0, True)] + [run(7, s, True) for s in range(3)]  # seeds 1 and 2 missing at rank 6
    out = sandwich(6, 7, rows)
    assert out["trained_any"] == 6 and out["trained_most"] == 7 and out["determined"]
    assert sandwich(6, 7, rows, seeds=1)["trained_most"] == 6  # one seed meant per rank: 1 of 1
    # two of three seeds present at rank 6, both exact: still most of the three
    assert sandwich(6, 7, rows + [run(6, 1, True)])["trained_most"] == 6


def test_no_exact_run_gives_no_trained_bound():
    rows = [run(r, s, False) for r in (4, 8) for s in range(3)] + [run(9, 0, None), run(None, 1, True)]
    out = sandwich(4, 8, rows)
    assert out["trained_any"] is None and out["trained_most"] is None
    assert not out["determined"]  # certified 4, constructed 8
    assert sandwich(8, 8, rows)["determined"] and sandwich(8, 8, [])["trained_any"] is None


def test_determined_logic():
    hit = [run(10, 0, True)]
    assert sandwich(10, 12, hit)["determined"]  # training meets the certificate
    assert sandwich(10, 10, [])["determined"]  # the construction does
    assert not sandwich(10, None, [])["determined"]  # no upper bound at all
    assert sandwich(10, None, hit)["determined"]
    assert not sandwich(None, 10, hit)["determined"]
    assert not sandwich(11, 12, hit)["determined"]  # exact below the certificate: a refutation, not a match
    assert not sandwich(9, 12, hit)["determined"]


def test_groups_are_not_pooled():
    """Most seeds of one map at a rank, not of every run there."""
    rows = [run(6, s, s == 0, "table") for s in range(3)] + [run(6, s, s == 0, "mlp_exp") for s in range(3)]
    assert sandwich(6, 8, rows)["trained_most"] is None  # 1 of 3 each (2 of 6 pooled)
    rows += [run(7, s, s < 2, "mlp_exp") for s in range(3)]
    out = sandwich(6, 8, rows)
    assert out["trained_any"] == 6 and out["trained_most"] == 7


def reference(certified, constructed, rows, seeds_of):
    """Counting over every (map, rank) cell, independently of sandwich()'s bookkeeping."""
    ranks = sorted({r["rank"] for r in rows})
    maps = sorted({r["feature_map"] for r in rows})
    anyr = next((k for k in ranks if any(r["exact"] for r in rows if r["rank"] == k)), None)
    most = None
    for k in ranks:
        for fm in maps:
            won = {r["seed"] for r in rows if r["rank"] == k and r["feature_map"] == fm and r["exact"]}
            if 2 * len(won) > seeds_of[fm]:
                most = k if most is None else min(most, k)
    best = min([u for u in (constructed, anyr) if u is not None], default=None)
    return anyr, most, best is not None and best == certified


def test_exhaustive_on_two_maps_two_ranks_three_seeds():
    cells = [(fm, r, s) for fm in ("table", "mlp_exp") for r in (3, 5) for s in range(3)]
    for bits in itertools.product((False, True), repeat=len(cells)):
        rows = [run(r, s, b, fm) for (fm, r, s), b in zip(cells, bits)]
        out = sandwich(3, 5, rows)
        anyr, most, det = reference(3, 5, rows, {"table": 3, "mlp_exp": 3})
        assert (out["trained_any"], out["trained_most"], out["determined"]) == (anyr, most, det)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["table", "mlp_exp"]), st.integers(1, 6), st.integers(0, 4), st.booleans()),
        max_size=30,
    ),
    st.one_of(st.none(), st.integers(1, 6)),
    st.one_of(st.none(), st.integers(1, 6)),
)
def test_sandwich_matches_the_reference(cells, certified, constructed):
    rows = [run(r, s, b, fm) for fm, r, s, b in cells]
    seeds_of = {fm: len({r["seed"] for r in rows if r["feature_map"] == fm}) for fm in ("table", "mlp_exp")}
    out = sandwich(certified, constructed, rows)
    anyr, most, det = reference(certified, constructed, rows, seeds_of)
    assert out == {
        "certified": certified,
        "constructed": constructed,
        "trained_any": anyr,
        "trained_most": most,
        "determined": certified is not None and det,
    }
    if out["trained_most"] is not None:
        assert out["trained_any"] <= out["trained_most"]
    assert majority(2, 3) and not majority(1, 2)


# -- the series section ----------------------------------------------------------------


def record(kind, params, fm, rank, seed, max_error, sequences):
    return {
        "id": f"{kind}-{params['n']}-{fm}-{rank}-{seed}-{sequences}",
        "config": {
            "model": {"kind": "kernel", "feature_map": fm, "rank": rank, "heads": 1},
            "family": {"name": kind, "params": params},
            "train": {},
        },
        "train": {"max_error": max_error, "exact_seq_acc": 1.0, "mean_abs_error": 0.1, "sequences": sequences},
        "seed": seed,
        "status": "ok",
        "steps": 100,
        "wall_time_s": 1.0,
    }


def fam(kind, params, name, n, sequences, certified, built):
    out = {
        "family": name,
        "params": params,
        "n": n,
        "m": params["m"],
        "sequences": sequences,
        "certified_rank": certified,
        "radon_rank": certified,
        "trace_rank": certified - 1,
        "constructed": {"rank": built, "sequences": sequences, "max_error": 0.01, "exact": built is not None},
    }
    if kind is not None:
        out["kind"] = kind
    return out


HAD, CW, LAD = {"m": 24, "n": 4}, {"m": 16, "n": 8}, {"m": 16, "n": 8}  # cw and ladder share params


class FakeResults:
    def __init__(self, families, records):
        self.families, self._records = families, records

    def read(self, name, file):
        assert (name, file) == ("series", "series.json")
        return self.families

    def records(self, name):
        return self._records

    def rows(self, name):
        return [run_row(r) for r in self._records]


@pytest.fixture
def summary():
    families = [
        fam(None, HAD, "hadamard-m24-n4", 4, 40, 4, 4),  # written before family types were recorded
        fam("cw", CW, "cw-m16-w8-l5-n8", 8, 200, 6, 8),
        fam("ladder", LAD, "ladder-m16-n8-s0", 8, 512, 5, None),
    ]
    records = [record("hadamard", HAD, "table", 4, s, 0.2, 40) for s in range(3)]
    records += [record("hadamard", HAD, "table", 3, s, 0.8, 40) for s in range(3)]
    records += [record("cw", CW, "table", 7, s, 0.3 if s == 0 else 0.7, 200) for s in range(3)]
    records += [record("cw", CW, "table", 8, s, 0.2, 200) for s in range(3)]
    # exact on a sample of the ladder only: no proof by example
    records += [record("ladder", LAD, "table", 5, s, 0.2, 64) for s in range(3)]
    records += [record("ladder", LAD, "table", 7, s, 0.45, 512) for s in range(2)]
    out = series.section(FakeResults(families, records))
    return {"series": out, "feature_maps": {}}


def test_the_five_fields_per_family(summary):
    had, cw, lad = summary["series"]
    assert {k: had[k] for k in ("kind", "certified", "constructed", "trained_any", "trained_most", "determined")} == {
        "kind": "hadamard",
        "certified": 4,
        "constructed": 4,
        "trained_any": 4,
        "trained_most": 4,
        "determined": True,
    }
    assert (cw["certified"], cw["constructed"], cw["trained_any"], cw["trained_most"]) == (6, 8, 7, 8)
    assert not cw["determined"] and cw["trained"]["table"]["ranks"] == [7, 8]  # the ladder's runs are not its
    assert (lad["constructed"], lad["trained_any"], lad["trained_most"], lad["determined"]) == (None, 7, 7, False)
    assert lad["exact_not_on_every_sequence"] == 3 and cw["exact_not_on_every_sequence"] == 0
    # the theorem's check still reads every exact run
    assert [b["rank"] for b in lad["exact_below_certificate"]] == [] and lad["trained"]["table"]["exact_from"] == 5


def test_the_section_validates_against_its_model_and_generated_schema(summary):
    fragment = section_schema(series.EXPERIMENT)
    jsonschema.validate(summary["series"], fragment)
    assert section_problem(series.EXPERIMENT, summary["series"]) is None
    assert {name for name, field in series.SeriesRow.model_fields.items() if field.is_required()} >= {
        "certified",
        "constructed",
        "trained_any",
        "trained_most",
        "determined",
    }
    for key, bad in (("determined", None), ("trained_any", "7"), ("certified", None)):
        broken = [dict(f) for f in summary["series"]]
        broken[1][key] = bad
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, fragment)
        assert section_problem(series.EXPERIMENT, broken).startswith(f"series.1.{key}: input should be a valid ")
    missing = [{k: v for k, v in f.items() if k != "determined"} for f in summary["series"]]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(missing, fragment)
    assert section_problem(series.EXPERIMENT, missing) == "series.0.determined: field required"


def test_the_sentence_table_and_figure(summary, tmp_path):
    text = series.sentence(summary)
    assert "determined on 1 of 3 families" in text
    assert "open on cw-m16-w8-l5-n8 (certified 6, constructed 8, trained 7)" in text
    assert "ladder-m16-n8-s0 (certified 5, no exact construction, trained 7)" in text
    assert "3 exact runs were not scored on every sequence" in text
    assert text.startswith("On 1 of 1 Hadamard witness families") and "no trained model is exact below" in text
    rows = series.sandwich_rows(summary["series"])
    assert [r["minimal rank"] for r in rows] == ["= 4", "6 … 7 (open)", "5 … 7 (open)"]
    assert series.draw_sandwich(summary, tmp_path) == ["series_sandwich.png", "series_sandwich.svg"]
    assert (tmp_path / "series_sandwich.png").stat().st_size > 1000
    assert series.draw(summary, tmp_path) == ["series.png", "series.svg"]  # the Hadamard families only


def test_a_construction_below_the_certificate_is_named(summary):
    summary["series"][1]["constructed"] = 5
    assert "exact BELOW the certificate, which the theorem forbids, on cw-m16-w8-l5-n8" in series.sentence(summary)


# -- the step and the sweep files ------------------------------------------------------

TINY = """name = "series"
[family]
name = "hadamard"
[model]
feature_map = "table"
[train]
mse_steps = 1
max_steps = 1
[grid]
seed = [0]
[[variants]]
family.params = {m = 12, n = 3}
grid.model.rank = [3]
[[variants]]
family.name = "ladder"
family.params = {m = 16, n = 8}
grid.model.rank = [5]
[[variants]]
family.name = "cw"
family.params = {m = 16, weight = 8, max_overlap = 4, n = 12}
grid.model.rank = [10]
"""


def test_the_step_certifies_and_builds_every_family_type(tmp_path):
    path = tmp_path / "series.toml"
    path.write_text(TINY)

    class Profile:
        def sweep_file(self, name):
            return path

    out = certificates(Profile(), tmp_path, {})
    assert [(f["kind"], f["n"], f["certified_rank"]) for f in out] == [
        ("hadamard", 3, 3),
        ("cw", 12, 10),
        ("ladder", 8, 5),
    ]
    assert [f["constructed"]["rank"] for f in out] == [3, 12, 8]  # one feature per distinct candidate
    assert all(f["constructed"]["exact"] for f in out)
    assert out[2]["sequences"] == 8**3 and out[2]["constructed"]["sequences"] == 512  # the product, expanded


def variant_families(profile):
    """``{(name, params as a tuple): ranks}`` of the families the series trains below n."""
    runs = load_sweep(SERIES / f"{profile}.toml").runs()
    out: dict = {}
    for r in runs:
        if r.family.name != "hadamard":
            out.setdefault((r.family.name, tuple(sorted(r.family.params.items()))), set()).add(r.model.rank)
    return out


@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_the_sweeps_train_where_the_certificate_says(profile):
    """Each family below n is trained at and just below its certified rank and up to n."""
    families = variant_families(profile)
    kinds = {name for name, _ in families}
    assert kinds == {"cw", "ladder"}
    for (name, params), ranks in families.items():
        family = build_family(name, **dict(params))
        c, n = certify(family).certified_rank, len(family.matching)
        assert c < n, (name, params)  # the point: a certificate below n
        assert {c - 1, c, n} <= ranks and max(ranks) >= n, (name, params, c, n, sorted(ranks))
        if profile == "quick":
            assert ranks == {c - 1, c, math.ceil((c + n) / 2), n - 1, n}
    assert tomllib.loads((SERIES / f"{profile}.toml").read_text())["name"] == "series"


def test_the_constructed_rank_is_the_smaller_exact_one_hot_construction():
    from kernelgap.experiments.steps import constructed

    # a ladder with rungs: 12 queries and 24 candidates, so one feature per query is cheaper
    family = build_family("ladder", m=16, n=12, max_overlap=4, step=1)
    got = constructed(family)
    assert (got["rank"], got["construction"], got["exact"]) == (12, "queries", True)
    assert got["max_error"] < 0.5 and got["sequences"] == 12 * 24**2
    # the witness family: 16 queries, 16 candidates; the candidates' construction is kept on a tie
    got = constructed(build_family("witness"))
    assert (got["rank"], got["construction"], got["exact"]) == (16, "candidates", True)


# -- trained families are told apart by content -----------------------------------------


def test_two_family_files_of_one_stem_are_two_families():
    """Runs on two family files with the same stem and parameters but other bytes are not
    pooled: each family's sandwich counts only the runs on its own content."""
    from kernelgap.report.trained import trained

    def row(sha, exact, seed):
        return {
            "id": f"{sha}-{seed}",
            "family": "fam",
            "params": {},
            "family_sha256": sha,
            "feature_map": "table",
            "rank": 4,
            "seed": seed,
            "max_error": 0.1 if exact else 1.0,
            "exact": exact,
            "status": "ok",
        }

    rows = [row("aa", True, s) for s in range(3)] + [row("bb", False, s) for s in range(3)]
    train_of = {r["id"]: {"sequences": 10} for r in rows}

    def fam(sha):
        return {
            "family": "fam",
            "kind": "fam",
            "params": {},
            "sha256": sha,
            "sequences": 10,
            "certified_rank": 4,
            "constructed_rank": 5,
        }

    a, b = trained(fam("aa"), rows, train_of), trained(fam("bb"), rows, train_of)
    assert [r["seed"] for r in a["runs"]] == [0, 1, 2] and all(r["exact"] for r in a["runs"])
    assert a["trained_most"] == 4 and a["determined"]
    assert len(b["runs"]) == 3 and b["trained_any"] is None and not b["determined"]
