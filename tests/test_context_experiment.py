"""The wall in context length: the layer curves against direct certificates, the CLI's flags
and refusals, and the experiment's section, schema, sentences and figures on synthetic
results (the trained runs are records written here, not trained)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelgap.args import parse_range
from kernelgap.errors import ConfigError, KernelgapError
from kernelgap.experiments.context import experiment as ctx
from kernelgap.experiments.context.step import curves
from kernelgap.experiments.profile import load_profile
from kernelgap.experiments.registry import BUILTIN
from kernelgap.limits import MAX_CURVE_POINTS
from kernelgap.report.criteria import Results
from kernelgap.report.html import Page
from kernelgap.reproduction.schema import section_problem, section_schema
from kernelgap.reproduction.summary import paper
from kernelgap.sweeps.config import load_sweep
from kernelgap.task import build_family
from kernelgap.task.families.layer import class_sizes
from kernelgap.task.family import MAX_PRODUCT_LENGTH
from kernelgap.theory import layer_curve as lc
from kernelgap.theory.bound_curve import bound_curve
from kernelgap.theory.certificate import certify
from kernelgap.theory.text import layer_lines

#: The section's JSON schema, generated from its model.
SCHEMA = section_schema(ctx.EXPERIMENT)

HAS_CONSTRUCTION = importlib.util.find_spec("kernelgap.theory.construction") is not None


def direct(m: int, length: int):
    return certify(build_family("layer", m=m, length=length), lc.LAYER_DELTA, budget_s=lc.LAYER_BUDGET_S)


# -- the curves ---------------------------------------------------------------------------


def test_wall_guess_is_the_least_length_with_the_pair_bound_below_one_over_n_minus_one():
    for n in range(1, 3000):
        least = next(N for N in range(3, 100) if (N - 2) ** 2 >= n - 1)
        assert lc.wall_guess(n) == least, n


@given(st.integers(3, 400), st.integers(3, 400))
def test_smallest_full_finds_the_threshold_from_any_guess(threshold, guess):
    calls = []

    def full(n):
        calls.append(n)
        return n >= threshold

    assert lc._smallest_full(full, guess) == threshold
    if guess == threshold:
        assert calls == ([threshold] if threshold == 3 else [threshold, threshold - 1])


def test_smallest_full_reports_none_when_no_length_is_full():
    assert lc._smallest_full(lambda n: False, 3) is None
    assert lc._smallest_full(lambda n: n >= MAX_PRODUCT_LENGTH, MAX_PRODUCT_LENGTH) == MAX_PRODUCT_LENGTH


def test_length_curve_matches_direct_certificates():
    payload = lc.length_curve([8, 12], list(range(3, 14)))
    assert payload["against"] == "length" and payload["deltas"] == ["1/2"]
    for c in payload["curves"]:
        m = c["m"]
        assert (c["n"], c["layer_size"], c["positive_construction"]) == (
            max(class_sizes(m, m // 2)),
            math.comb(m, m // 2),
            2**m,
        )
        assert [p["length"] for p in c["points"]] == list(range(3, 14))
        for p in c["points"]:
            cert = direct(m, p["length"])
            assert (p["certified"], p["trace"], p["radon"], p["method"]) == (
                cert.certified_rank,
                cert.trace.rank,
                cert.radon.rank,
                cert.method,
            )
        certified = [p["certified"] for p in c["points"]]
        assert certified == sorted(certified)  # ρ_N falls with N
        full = [p["length"] for p in c["points"] if p["certified"] == c["n"]]
        assert c["full_from"] == full[0] == lc.wall_guess(c["n"])
    c12 = payload["curves"][1]
    assert (c12["n"], c12["full_from"], c12["last_short"]) == (80, 11, {"length": 10, "certified": 65})


def test_length_curve_adds_the_wall_points():
    (c,) = lc.length_curve([12], [3, 20], wall=True)["curves"]
    assert [p["length"] for p in c["points"]] == [3, 10, 11, 20]
    assert c["last_short"] == {"length": 10, "certified": 65} and c["full_from"] == 11


def test_wall_curve_is_the_smallest_length_certifying_every_word():
    payload = lc.wall_curve([4, 6, 8, 10, 12])
    assert payload["against"] == "m"
    for p in payload["points"]:
        m, n = p["m"], p["n"]
        family = build_family("layer", m=m, length=p["length"])
        assert n == len(family.matching) == max(class_sizes(m, m // 2))
        assert p["length"] == p["predicted_length"] == lc.wall_guess(n) and p["formula_holds"]
        assert p["certified"] == direct(m, p["length"]).certified_rank == n
        for shorter in range(3, p["length"]):  # every shorter context certifies fewer
            assert direct(m, shorter).certified_rank < n
        assert p["certified_below"] == (direct(m, p["below_length"]).certified_rank if p["below_length"] else None)
        assert p["log2_rank_per_m"] == pytest.approx(math.log2(n) / m)
        assert p["log2_layer_per_m"] == pytest.approx(math.log2(math.comb(m, m // 2)) / m)
        if HAS_CONSTRUCTION:
            assert p["constructed_rank"] == n and p["proved_equals_constructed"] is True
        else:
            assert p["constructed_rank"] is None and p["proved_equals_constructed"] is None
    by_m = {p["m"]: p for p in payload["points"]}
    assert (by_m[4]["length"], by_m[4]["below_length"], by_m[4]["certified_below"]) == (3, None, None)
    assert [(by_m[m]["n"], by_m[m]["length"], by_m[m]["certified_below"]) for m in (8, 10, 12)] == [
        (10, 5, 5),
        (26, 7, 17),
        (80, 11, 65),
    ]
    assert payload["growth"]["1/2"]["points"] == 5 and payload["growth"]["1/2"]["log2_per_m"] > 0


def test_the_wall_at_m16_matches_the_theory_table():
    (p,) = lc.wall_curve([16])["points"]
    assert (p["n"], p["length"], p["certified"], p["below_length"], p["certified_below"]) == (810, 31, 810, 30, 785)


def test_a_wrong_guess_is_corrected_by_the_certificates(monkeypatch):
    for shift in (-3, 4):
        monkeypatch.setattr(lc, "wall_guess", lambda n, delta=None, s=shift: 11 + s)
        (p,) = lc.wall_curve([12])["points"]
        assert (p["predicted_length"], p["length"], p["certified"], p["certified_below"]) == (11 + shift, 11, 80, 65)
        assert p["formula_holds"] is False
        assert {t["length"] for t in p["tried"]} >= {10, 11}
        assert "is NOT the smallest N at m = 12" in "\n".join(layer_lines({"against": "m", "points": [p]}))


def test_parse_length_range():
    def parse_length_range(text):
        return parse_range(text, "--length", "N", least=3)

    assert parse_length_range("3..6") == [3, 4, 5, 6]
    assert parse_length_range("3..11..4") == [3, 7, 11]
    assert parse_length_range("11,31") == [11, 31]
    for bad, why in (
        ("2", "each N must be ≥ 3, got 2"),
        ("10..5", "the range 10..5 is empty"),
        ("x", "--length must look like"),
        ("3..", "--length must look like"),
        (f"3..{MAX_CURVE_POINTS + 3}", "a range has at most"),
    ):
        with pytest.raises(KernelgapError, match=why):
            parse_length_range(bad)


def small_memory(monkeypatch, largest_m: int) -> None:
    """A memory limit that lets the layer family be built up to ``largest_m`` and no further."""
    import kernelgap.limits
    from kernelgap.task.registry import check_values, memory_estimate

    need = memory_estimate("layer", check_values("layer", {"m": largest_m}))
    monkeypatch.setattr(kernelgap.limits, "memory_limit", lambda: need)


def test_a_refused_m_is_refused_before_any_certificate(monkeypatch):
    small_memory(monkeypatch, 8)
    made = []
    monkeypatch.setattr(lc, "certify", lambda *a, **k: made.append(a))
    with pytest.raises(KernelgapError, match="m=12.*needs about"):
        lc.wall_curve([8, 12])
    with pytest.raises(KernelgapError, match="m=12.*needs about"):
        lc.length_curve([8, 12], [3, 4])
    assert made == []


def test_curve_refusals_before_any_certificate():
    for call, why in (
        (lambda: bound_curve("hadamard", [12], lengths=[3]), "--length applies to --code layer only"),
        (lambda: bound_curve("layer", [13], lengths=[3]), "needs even m"),
        (lambda: lc.length_curve([2], [3]), "a curve needs m ≥ 4"),
        (lambda: lc.length_curve([8, 10], list(range(3, 600))), "1,194 points; a curve has at most"),
        (
            lambda: lc.length_curve([12], [MAX_PRODUCT_LENGTH + 1]),
            "length: input should be less than or equal to 65536",
        ),
        (lambda: bound_curve("layer", [12], queries=4), "--queries does not apply"),
    ):
        with pytest.raises(KernelgapError, match=why):
            call()


# -- the CLI --------------------------------------------------------------------------------


def test_cli_length_curve_writes_json_png_svg(cli, tmp_path):
    code, out, _ = cli(
        "bound-curve", "--code", "layer", "--m", "8,12", "--length", "3..12", "--out", str(tmp_path), "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert [c["full_from"] for c in data["curves"]] == [5, 11]
    assert (tmp_path / "bound-curve-layer-length.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "bound-curve-layer-length.svg").is_file()
    assert json.loads((tmp_path / "bound-curve-layer-length.json").read_text())["curves"] == data["curves"]
    code, out, _ = cli("bound-curve", "--code", "layer", "--m", "12", "--length", "9..11")
    assert code == 0 and "all 80 words certified from N = 11 (65 at N = 10)" in out


def test_cli_wall_curve(cli, tmp_path):
    code, out, _ = cli("bound-curve", "--code", "layer", "--m", "8..12..2", "--out", str(tmp_path))
    assert code == 0
    assert "is the smallest N certifying all n words at every m" in out
    row = next(line.split() for line in out.splitlines() if line.split()[:1] == ["12"])
    assert row[:5] == ["12", "80", "11", "80", "65"]
    assert (tmp_path / "bound-curve-layer.png").is_file() and (tmp_path / "bound-curve-layer.svg").is_file()
    points = json.loads((tmp_path / "bound-curve-layer.json").read_text())["points"]
    assert [p["length"] for p in points] == [5, 7, 11]


@pytest.mark.parametrize(
    "args, why",
    [
        (["--m", "12", "--length", "2"], "--length '2': each N must be ≥ 3, got 2"),
        (["--m", "12", "--length", "10..5"], "--length '10..5': the range 10..5 is empty"),
        (["--m", "8,10", "--length", "3..600"], "a curve has at most 1,000"),
        (["--m", "12", "--length", "3..100000"], "gives 99,998 values of N; a range has at most"),
        (["--m", "13"], "--code layer needs even m"),
        (["--m", "12", "--queries", "8"], "--queries does not apply to --code layer"),
        (["--m", "2"], "a curve needs m ≥ 4"),
        (["--m", "96"], "m: input should be less than or equal to 64, got 96"),
    ],
)
def test_cli_refuses_bad_layer_input_in_one_line(cli, args, why):
    code, out, err = cli("bound-curve", "--code", "layer", *args)
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_length_needs_the_layer_code(cli):
    code, _, err = cli("bound-curve", "--code", "hadamard", "--m", "12", "--length", "3..5")
    assert code == 2 and "--length applies to --code layer only" in err and len(err.strip().splitlines()) == 1


# -- the experiment: registry, profiles, sweep files -------------------------------------------


def test_registered_after_the_bound_curve_and_in_both_profiles():
    names = [e.name for e in BUILTIN]
    assert names.index("context") == names.index("bound_curve") + 1
    exp = dict(zip(names, BUILTIN))["context"]
    assert exp.title == "The wall in context length" and exp.step and exp.writes == "curves.json"
    m10 = {(10, 6, r) for r in (26, 39)} | {(10, 7, r) for r in (26, 39)}
    for profile, grid, seeds in (
        ("quick", m10, {(10, 6): [0, 1], (10, 7): [0, 1]}),
        ("paper", m10 | {(12, 11, 80), (12, 11, 120)}, {(10, 6): [0, 1, 2], (10, 7): [0, 1, 2], (12, 11): [0, 1]}),
    ):
        prof = load_profile(profile)
        assert "context" in prof.experiments
        runs = load_sweep(prof.sweep_file("context")).runs()
        # every trained family a layer family: N* (all words certified) and a length below it
        assert {r.family.name for r in runs} == {"layer"}
        assert {(r.family.params["m"], r.family.params["length"], r.model.rank) for r in runs} == grid
        for (m, n), want in seeds.items():
            mine = [r for r in runs if (r.family.params["m"], r.family.params["length"]) == (m, n)]
            assert sorted({r.seed for r in mine}) == want
        assert {(r.model.kind, r.model.feature_map) for r in runs} == {("kernel", "table")}
        assert len(runs) == sum(len(s) * 2 for s in seeds.values())
        # no schedule in the sweep: the runs train the table map's recipe (its lr, 5,000 power
        # steps), the power sized by the family (above 8 at N > 3)
        assert {(r.train.lr, r.train.mse_steps, r.train.max_steps) for r in runs} == {(None, 0, 5000)}
        assert all(r.resolved().train.power > 8 for r in runs)
        for spec in prof.settings["context"]["curves"]:
            parse_range(spec["length"], "--length", "N", least=3)
        ms = parse_range(prof.settings["context"]["m"], "--m", "m", least=2)
        assert all(m % 2 == 0 for m in ms) and {12, 16} <= {c["m"] for c in prof.settings["context"]["curves"]}
        whole = prof.settings["context"]
        assert whole["whole_layer_delta"] == "2/5" and {c["m"] for c in whole["whole_layer_curves"]} == {12}
        assert parse_range(whole["whole_layer_m"], "--m", "m", least=2)[-1] == (24 if profile == "paper" else 12)
    assert paper(BUILTIN)["context"] == ctx.PAPER


# -- the step, on a tiny profile ----------------------------------------------------------------


def tiny_profile(tmp_path: Path, settings: dict) -> SimpleNamespace:
    sweep = tmp_path / "context.toml"
    sweep.write_text(
        'name = "context"\n[family]\nname = "layer"\nparams = {m = 8, length = 5}\n[model]\nkind = "kernel"\n'
        'feature_map = "table"\n[train]\nmse_steps = 2\nmax_steps = 2\n[grid]\nmodel.rank = [8, 10]\nseed = [0]\n'
    )
    return SimpleNamespace(settings={"context": settings}, sweep_file=lambda name: sweep)


def test_the_step_writes_both_curves_and_the_trained_certificate(tmp_path, monkeypatch):
    small_memory(monkeypatch, 8)
    prof = tiny_profile(tmp_path, {"curves": [{"m": 8, "length": "3..6"}, {"m": 12, "length": "3"}], "m": "6,8,12"})
    data = curves(prof, tmp_path, {})
    (c,) = data["length_curves"]
    assert [p["length"] for p in c["points"]] == [3, 4, 5, 6] and c["full_from"] == 5
    assert [p["m"] for p in data["wall"]] == [6, 8]
    assert [(k["m"], k["curve"]) for k in data["skipped"]] == [(12, "length"), (12, "m")]
    assert all("needs about" in k["why"] for k in data["skipped"])
    (fam,) = data["trained_families"]
    assert (fam["kind"], fam["params"], fam["n"], fam["certified_rank"]) == ("layer", {"m": 8, "length": 5}, 10, 10)
    assert fam["sequences"] == 10 * 10**4 and fam["constructed_rank"] == (10 if HAS_CONSTRUCTION else None)
    with pytest.raises(ConfigError, match="curves must be a list"):
        curves(tiny_profile(tmp_path, {"curves": [{"m": 8}], "m": "8"}), tmp_path, {})


def test_the_step_certifies_the_whole_layer_below_one_half(tmp_path):
    """``whole_layer_delta`` adds its curves and wall: the whole middle layer at δ = 2/5, each m
    certified in full from N = 3 + ⌊√(16(n − 1))⌋, at the pair ceiling; the time per δ recorded."""
    settings = {
        "curves": [],
        "m": "8",
        "whole_layer_delta": "2/5",
        "whole_layer_curves": [{"m": 6, "length": "3..21..6"}],
        "whole_layer_m": "4,6",
    }
    data = curves(tiny_profile(tmp_path, settings), tmp_path, {})
    assert data["deltas"] == ["1/2", "2/5"] and set(data["seconds_by_delta"]) == {"1/2", "2/5"}
    assert [(p["delta"], p["m"], p["n"], p["length"], p["certified_below"]) for p in data["wall"]] == [
        ("1/2", 8, 10, 5, 5),
        ("2/5", 4, 6, 11, 4),
        ("2/5", 6, 20, 20, 19),
    ]
    assert all(p["at_ceiling"] for p in data["wall"] if p["delta"] == "2/5")
    (c,) = data["length_curves"]
    assert (c["delta"], c["distance"], c["full_from"]) == ("2/5", 2, 20)
    assert [p["length"] for p in c["points"]] == [3, 9, 15, 19, 20, 21]
    assert set(data["growth"]) == {"1/2", "2/5"}
    for bad, why in (("1/2", "must lie below 1/2"), ("x", "whole_layer_delta: delta must be a rational")):
        with pytest.raises(ConfigError, match=why):
            curves(tiny_profile(tmp_path, {**settings, "whole_layer_delta": bad}), tmp_path, {})


# -- the section, on synthetic results ---------------------------------------------------------

SEQUENCES = 80 * 80**10


def ratios(m, n, ceiling_gap=1):
    """The share-of-2^m fields of a wall row whose ceiling is the gap-1 bound C(m, ⌊m/2⌋)."""
    layer = math.comb(m, m // 2)
    return {
        "ratio_to_positive": n / 2**m,
        "layer_ratio": layer / 2**m,
        "layer_asymptote": math.sqrt(2 / (math.pi * m)),
        "ceiling": layer,
        "ceiling_gap": ceiling_gap,
        "ceiling_ratio": layer / 2**m,
        "log2_ceiling_per_m": math.log2(layer) / m,
        "at_ceiling": n >= layer,
    }


def wall_point(m, n, length, below, formula=True, constructed=None, delta="1/2"):
    half = delta == "1/2"
    return {
        "delta": delta,
        "distance": 4 if half else 2,
        "length_rule": "2 + ⌈√(n − 1)⌉" if half else "3 + ⌊√(16(n − 1))⌋",
        "m": m,
        "n": n,
        "layer_size": math.comb(m, m // 2),
        "positive_construction": 2**m,
        "predicted_length": length if formula else length - 1,
        "length": length,
        "certified": n,
        "method": "radon",
        "below_length": length - 1,
        "certified_below": below,
        "formula_holds": formula,
        "log2_rank_per_m": math.log2(n) / m,
        "log2_layer_per_m": math.log2(math.comb(m, m // 2)) / m,
        "constructed_rank": constructed,
        "construction_error": None if constructed is None else 0.155,
        "proved_equals_constructed": None if constructed is None else constructed == n,
        **ratios(m, n),
        "tried": [],
    }


def length_curve_of(m, n, points, delta="1/2"):
    full = next((N for N, r in points if r == n), None)
    short = [(N, r) for N, r in points if r < n and (full is None or N < full)]
    return {
        "delta": delta,
        "distance": 4 if delta == "1/2" else 2,
        "m": m,
        "n": n,
        "layer_size": math.comb(m, m // 2),
        "positive_construction": 2**m,
        "wall_guess": 2 + math.isqrt(n - 2) + 1 if delta == "1/2" else 3 + math.isqrt(16 * (n - 1)),
        "points": [{"length": N, "certified": r, "trace": r, "radon": r, "method": "radon"} for N, r in points],
        "full_from": full,
        "last_short": {"length": short[-1][0], "certified": short[-1][1]} if short else None,
    }


#: The whole middle layer at δ = 2/5: per m, n = C(m, m/2) from N = 3 + ⌊√(16(n − 1))⌋ (one shorter certifies fewer).
WHOLE = [(8, 70, 36, 69), (10, 252, 66, 249), (12, 924, 124, 916)]

CURVES = {
    "deltas": ["1/2", "2/5"],
    "length_curves": [
        length_curve_of(12, 80, [(3, 5), (10, 65), (11, 80), (15, 80)]),
        length_curve_of(16, 810, [(3, 10), (30, 785), (31, 810), (39, 810)]),
        length_curve_of(12, 924, [(3, 8), (99, 871), (123, 916), (124, 924), (131, 924)], delta="2/5"),
    ],
    "wall": [wall_point(12, 80, 11, 65, constructed=80), wall_point(16, 810, 31, 785, constructed=810)]
    + [wall_point(m, n, length, below, constructed=n, delta="2/5") for m, n, length, below in WHOLE],
    "growth": None,
    "skipped": [],
    "trained_families": [
        {
            "family": "layer-m12-w6-class3-N11",
            "kind": "layer",
            "params": {"m": 12, "length": 11},
            "m": 12,
            "length": 11,
            "n": 80,
            "sequences": SEQUENCES,
            "certified_rank": 80,
            "method": "radon",
            "constructed_rank": 80,
        }
    ],
}


def record(rank: int, seed: int, max_error: float, sequences=SEQUENCES, params=None) -> dict:
    return {
        "id": f"r{rank}s{seed}",
        "config": {
            "family": {"name": "layer", "params": params or {"m": 12, "length": 11}},
            "model": {"kind": "kernel", "feature_map": "table", "rank": rank, "heads": 1},
        },
        "seed": seed,
        "status": "ok",
        "steps": 10,
        "wall_time_s": 1.0,
        "train": {
            "max_error": max_error,
            "exact_seq_acc": 1.0 if max_error < 0.5 else 0.5,
            "mean_abs_error": max_error / 4,
            "sequences": sequences,
        },
    }


def results_of(tmp_path: Path, data: dict | None, records: list[dict]) -> Results:
    folder = tmp_path / "context"
    (folder / "runs").mkdir(parents=True)
    if data is not None:
        (folder / "curves.json").write_text(json.dumps(data))
    for rec in records:
        (folder / "runs" / f"{rec['id']}.json").write_text(json.dumps(rec))
    return Results(tmp_path, BUILTIN)


def summary_of(section: dict) -> dict:
    return {"context": section, "paper": paper(BUILTIN)}


RECORDS = [
    record(80, 0, 0.3),
    record(80, 1, 0.7),
    record(96, 0, 0.2),
    record(96, 1, 0.4),
    record(128, 0, 0.1, sequences=512_000),  # exact on the two-candidate sequences only: bounds nothing
    record(128, 1, 0.9),
]


def test_section_schema_and_sentence_on_synthetic_results(tmp_path):
    section = ctx.section(results_of(tmp_path, CURVES, RECORDS))
    jsonschema.validate(section, SCHEMA)
    (t,) = section["trained"]
    assert [(r["rank"], r["seeds"], r["exact"]) for r in t["ranks"]] == [(80, 2, 1), (96, 2, 2), (128, 2, 0)]
    assert (t["trained_any"], t["trained_most"], t["exact_from"], t["determined"]) == (80, 96, 96, True)
    assert t["exact_not_on_whole_family"] == 1 and t["exact_below_certificate"] == []
    text = ctx.sentence(summary_of(section))
    assert "at m = 16 the certificate reaches all 810 code words from N = 31 (785 at N = 30)" in text
    assert "at m = 12 the certificate reaches all 80 code words from N = 11 (65 at N = 10)" in text
    assert "each time N = 2 + ⌈√(n − 1)⌉" in text
    assert f"log2 r / m is {math.log2(80) / 12:.2f} (m = 12), {math.log2(810) / 16:.2f} (m = 16)" in text
    assert "m = 16 stays at n = 810 from N = 31 to N = 39" in text and "stops at the code size" in text
    assert "Proved = constructed at 2 of 2 m (m = 12, 16)" in text
    assert "exact on the whole family (most seeds) from rank 96, some seed from rank 80" in text
    assert "the minimal rank is exactly 80 (certified = constructed)" in text
    assert "1 exact runs were not scored on the whole family" in text
    assert "no run is exact below the certificate" in text
    assert "Proved = constructed at 3 of 3 m (m = 8, 10, 12)" in text
    (row,) = ctx.paper_rows(summary_of(section))
    assert ctx.PAPER["claim"] in row["paper"] and "m = 16: r = 810 from N = 31" in row["ours"]
    assert (
        "δ = 2/5: m = 8: r = 70 from N = 36, m = 10: r = 252 from N = 66, m = 12: r = 924 from N = 124" in row["ours"]
    )
    assert (
        "longer contexts add nothing" in row["note"]
        and "at δ = 2/5 the whole weight-m/2 layer, reached from N = 3 + ⌊" in row["note"]
    )


def test_trained_equals_certified_says_when_it_took_fresh_starts(tmp_path):
    """Most seeds exact at the certificate: "trained = certified", and how many of those exact
    seeds needed fresh starts (the record's ``restarts``) and the most tries one took."""
    restarted = {
        **record(80, 1, 0.45),
        "restarts": [{"seed": 1, "max_error": 0.8}] * 2 + [{"seed": 9, "max_error": 0.45}],
    }
    recs = [record(80, 0, 0.4), restarted, record(80, 2, 0.9)]
    section = ctx.section(results_of(tmp_path, CURVES, recs))
    jsonschema.validate(section, SCHEMA)
    (t,) = section["trained"]
    assert [r["tries"] for r in t["runs"]] == [1, 3, 1]
    text = ctx.sentence(summary_of(section))
    assert "; trained = certified (1 of 2 exact seeds after fresh starts, at most 3 tries)" in text
    plain = ctx.section(results_of(tmp_path / "plain", CURVES, [record(80, 0, 0.4), record(80, 1, 0.45)]))
    assert "; trained = certified;" in ctx.sentence(summary_of(plain))


def how_close(m, n, length, code):
    """The expected 'how close to 2^m' clause of one tolerance, from its numbers."""
    share = f"log2 r / m = {math.log2(n) / m:.2f}, r/2^m = {n / 2**m:.3g}"
    if code == "layer":
        return f"covers the whole middle layer, C(m, m/2) = {n:,} at m = {m} from N = {length:,} ({share})"
    return f"gets to r = {n:,} at m = {m} (the largest Graham–Sloane class; {share})"


def test_the_report_says_how_close_to_2m_and_the_ceiling(tmp_path):
    """At δ = 1/2 and at δ = 2/5 how close to 2^m the run gets, the ceiling of pair certificates,
    what "approaches 2^m" means exactly and what would go further: all from the rows."""
    summary = summary_of(ctx.section(results_of(tmp_path, CURVES, RECORDS)))
    text = ctx.sentence(summary)
    assert text.startswith("Layer codes: at δ = 1/2, the largest Graham–Sloane class: at m = 12")
    assert (
        "At δ = 2/5, the whole weight-m/2 layer: at m = 8 the certificate reaches all 70 code words from N = 36" in text
    )
    assert "each time N = 3 + ⌊√(16(n − 1))⌋, the least N the pair bound ρ_N(1, δ)² predicts" in text
    assert "At δ = 2/5 the certificate " + how_close(12, 924, 124, "layer") in text
    assert "At δ = 1/2 the certificate " + how_close(16, 810, 31, "class") in text
    assert "At δ = 2/5 the ceiling of every pair certificate is C(m, ⌊m/2⌋) (gap 1), reached at every m run " in text
    assert "(8, 10, 12): no pair certificate gets closer" in text
    assert "At δ = 1/2 the ceiling of every pair certificate is C(m, ⌊m/2⌋) (proven at gap 1, so at gap 2 too)" in text
    assert f"the certificate reaches {810 / 12870:.3g} of it at m = 16" in text
    limit = (
        f"C(m, m/2) = 2^m √(2/(πm))(1 + o(1)) (at m = 16: C(m, m/2)/2^m = {12870 / 2**16:.3g}, "
        f"√(2/(πm)) = {math.sqrt(2 / (math.pi * 16)):.3g}, log2 C(m, m/2) / m = {math.log2(12870) / 16:.2f})"
    )
    assert limit in text and "the bound approaches 2^m in the exponent, not in the ratio" in text
    assert (
        "since at δ = 2/5 the run already meets the ceiling, going further needs a certificate that is not pairwise"
        in text
    )
    (row,) = ctx.paper_rows(summary)
    assert limit in row["note"] and "not pairwise" in row["note"] and how_close(12, 924, 124, "layer") in row["note"]
    found = ctx.conclusions(summary)
    assert found["wall δ = 2/5, m = 12: all 924 code words certified from N"] == "124"
    assert found["wall δ = 2/5, m = 12: N = 3 + ⌊√(16(n − 1))⌋ is the least such N"] == "yes"
    assert found["wall δ = 2/5, m = 12: r/2^m"] == f"{924 / 4096:.4g}"
    assert found["wall δ = 2/5, m = 12: at the pair certificates' ceiling"] == "yes"
    assert found["wall m = 16: at the pair certificates' ceiling"] == "no"
    assert found["N-curve δ = 2/5, m = 12: all 924 certified from N"] == "124"


def test_the_ceiling_sentences_follow_the_numbers(tmp_path):
    """A whole layer short of its ceiling at its largest m: the closest row is the next m, the
    sentence gives the share of the ceiling reached, and no longer says the run meets it."""
    data = json.loads(json.dumps(CURVES))
    short = data["wall"][-1]
    short.update(length=None, certified=916, at_ceiling=False, ratio_to_positive=916 / 4096)
    section = ctx.section(results_of(tmp_path, data, []))
    jsonschema.validate(section, SCHEMA)
    text = ctx.sentence(summary_of(section))
    assert "At δ = 2/5 the certificate " + how_close(10, 252, 66, "layer") in text
    assert f"the certificate reaches {916 / 924:.3g} of it at m = 12 (all of it at m = 8, 10)" in text
    assert "not pairwise" not in text and "no pair certificate gets closer" not in text
    assert "at m = 12 the certificate reaches 916 of 924 code words, never all" in text


def test_sentences_follow_the_numbers(tmp_path):
    data = json.loads(json.dumps(CURVES))
    data["wall"][1] = wall_point(16, 810, 32, 800, formula=False)  # a guess that is off
    data["wall"][0]["constructed_rank"] = data["wall"][0]["proved_equals_constructed"] = None
    data["length_curves"][1] = length_curve_of(16, 810, [(3, 10), (30, 785)])  # never all n
    data["skipped"] = [{"m": 24, "curve": "m", "why": "family 'layer' (m=24) needs about 851 GiB"}]
    data["trained_families"][0]["constructed_rank"] = None
    section = ctx.section(results_of(tmp_path, data, [record(72, 0, 0.1), record(80, 0, 0.9)]))
    jsonschema.validate(section, SCHEMA)
    text = ctx.sentence(summary_of(section))
    assert "NOT the least such N at m = 16 (predicted 31, found 32)" in text
    half = text.split("At δ = 2/5")[0]
    assert "m = 16 reaches 785 of n = 810 by N = 30" in half and "stops at the code size" not in half
    assert "No constructed rank was recorded, so proved = constructed is not checked" in text
    assert "Skipped: m = 24 (family 'layer' (m=24) needs about 851 GiB)" in text
    assert "exact BELOW the certificate, which the theorem forbids: table r = 72 seed 0" in text
    assert "minimal rank is exactly" not in text
    assert ctx.paper_rows(summary_of(section))[0]["note"].startswith("At δ = 1/2 log2 r / m grows with m")


def test_section_without_the_step_or_without_anything(tmp_path):
    assert ctx.section(results_of(tmp_path / "a", None, [])) is None
    section = ctx.section(results_of(tmp_path / "b", None, [record(80, 0, 0.3)]))
    jsonschema.validate(section, SCHEMA)
    (t,) = section["trained"]
    assert t["certified_rank"] is None and not t["runs"][0]["whole_family"] and t["determined"] is False
    assert "not certified yet" in ctx.sentence(summary_of(section))
    section = ctx.section(results_of(tmp_path / "c", {**CURVES, "trained_families": None}, []))
    assert section["trained"] == [] and section["wall"]


def test_schema_rejects_a_broken_section(tmp_path):
    section = ctx.section(results_of(tmp_path, CURVES, RECORDS))
    broken = json.loads(json.dumps(section))
    del broken["wall"][0]["length"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)
    assert section_problem(ctx.EXPERIMENT, broken) == "context.wall.0.length: field required"
    broken = {**section, "trained": [{**section["trained"][0], "determined": "yes"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)
    assert (
        section_problem(ctx.EXPERIMENT, broken)
        == "context.trained.0.determined: input should be a valid boolean, got 'yes'"
    )


def test_figures_and_html(tmp_path):
    summary = summary_of(ctx.section(results_of(tmp_path, CURVES, RECORDS)))
    out = tmp_path / "figures"
    drawn = {f.name: f.draw(summary, out) for f in ctx.EXPERIMENT.figures}
    assert drawn == {
        "context_length": ["context_length.png", "context_length.svg"],
        "context_wall": ["context_wall.png", "context_wall.svg"],
        "context_ratio": ["context_ratio.png", "context_ratio.svg"],
        "context_trained": ["context_trained.png", "context_trained.svg"],
    }
    assert all((out / f).stat().st_size > 1000 for files in drawn.values() for f in files)
    page = Page(summary, drawn, out, {f.name: f for f in ctx.EXPERIMENT.figures})
    (block,) = ctx.EXPERIMENT.html(summary, page).values()
    html = "".join(block)
    assert "<h3>The wall in context length</h3>" in html and html.count("<img") == 4
    assert "from N = 31 (785 at N = 30)" in html and "<th>proved_equals_constructed</th>" in html
    empty = summary_of({**summary["context"], "trained": [], "length_curves": [], "wall": []})
    assert [f.draw(empty, tmp_path / "none") for f in ctx.EXPERIMENT.figures] == [[], [], [], []]


def test_the_ratio_figure_draws_the_rows_numbers(tmp_path, monkeypatch):
    """The ratio figure plots each tolerance's r/2^m and log2 r / m, the pair ceiling over every
    m run, √(2/(πm)) and 2^m, all read from the rows; rows without the ratios draw nothing."""
    from kernelgap.report import figures as layer_figures

    figs = []
    monkeypatch.setattr(layer_figures, "save", lambda fig, out, stem: figs.append(fig) or [stem])
    summary = summary_of(ctx.section(results_of(tmp_path, CURVES, [])))
    assert ctx.draw_ratio(summary, tmp_path) == ["context_ratio"]
    share, exponent = figs[0].axes
    drawn = {line.get_label(): list(line.get_ydata()) for line in share.lines}
    powers = {line.get_label(): list(line.get_ydata()) for line in exponent.lines}
    whole, half = "δ = 2/5: certified r (whole layer)", "δ = 1/2: certified r (Graham–Sloane class)"
    assert drawn[whole] == [n / 2**m for m, n, _, _ in WHOLE] and drawn[half] == [80 / 2**12, 810 / 2**16]
    assert powers[whole] == pytest.approx([math.log2(n) / m for m, n, _, _ in WHOLE])
    ms = [8, 10, 12, 16]
    assert drawn["ceiling of every pair certificate (gap 1)"] == [math.comb(m, m // 2) / 2**m for m in ms]
    assert drawn["√(2/(πm)): C(m, m/2)/2^m → 0"] == pytest.approx([math.sqrt(2 / (math.pi * m)) for m in ms])
    assert powers["ceiling of every pair certificate (gap 1)"] == pytest.approx(
        [math.log2(math.comb(m, m // 2)) / m for m in ms]
    )
    caption = {f.name: f for f in ctx.EXPERIMENT.figures}["context_ratio"].caption_for(summary)
    assert "at δ = 1/2 (Graham–Sloane classes) and δ = 2/5 (the whole layer)" in caption
    legacy = [{k: v for k, v in p.items() if k not in ratios(p["m"], p["n"])} for p in CURVES["wall"]]
    assert layer_figures.draw_ratio_curve({"points": legacy}, tmp_path) == []
