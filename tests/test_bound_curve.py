"""Certified rank against m for family series (PNG + JSON), the ladder series included."""

import json
import math
from fractions import Fraction

import pytest

from kernelgap.args import parse_range
from kernelgap.errors import KernelgapError
from kernelgap.task import build_family
from kernelgap.theory.bound_curve import SERIES, PointSeries, bound_curve, common, curve_lines, figure_of, series
from kernelgap.theory.certificate import certify
from kernelgap.theory.layer_curve import growth_rate


def parse_m_range(text: str) -> list[int]:
    return parse_range(text, "--m", "m", least=2)


def test_parse_m_range():
    assert parse_m_range("12..16") == [12, 13, 14, 15, 16]
    assert parse_m_range("12..24..4") == [12, 16, 20, 24]
    assert parse_m_range("12,24") == [12, 24]
    for bad in ("x", "12..", "1..1", "4..2"):
        with pytest.raises(KernelgapError):
            parse_m_range(bad)


def test_hadamard_curve_numbers():
    payload = bound_curve("hadamard", parse_m_range("20..28"), chain_step=4)
    assert [p["m"] for p in payload["points"]] == [20, 24] and 28 in payload["skipped_m"]
    p24 = payload["points"][1]
    # every one of the 23 queries is certified (Radon); the trace bound alone gives 13
    assert (p24["queries"], p24["certified_direct"], p24["certified_chained"]) == (23, 23, 23)
    assert (p24["trace_direct"], p24["trace_chained"]) == (13, 13)
    assert p24["positive_construction"] == 2**24 and p24["softmax_score_dim"] == 24


def test_chains_lift_the_trace_bound():
    (p,) = bound_curve("hadamard", [48], chain_step=4)["points"]
    assert (p["trace_direct"], p["trace_chained"]) == (35, 45)
    assert p["certified_direct"] == p["certified_chained"] == 47


def test_ladder_series_grows_and_softmax_is_exact():
    payload = bound_curve("ladder", [32, 48, 64], queries=256)
    pts = payload["points"]
    certified = [p["certified"] for p in pts]
    assert certified == sorted(certified) and certified[-1] >= 64
    for p in pts:
        assert p["certified"] == p["queries"] and p["softmax"]["exact"]
        failed = [t for t in p["tried"] if t["n"] > p["queries"]]
        assert p["limit_reached"] or all(t["certified"] is None or t["certified"] < t["n"] for t in failed)
    assert payload["growth"]["log2_per_m"] > 0.05


def test_the_series_registry():
    assert list(SERIES) == ["hadamard", "cw", "ladder", "layer"]
    assert all(s.name == code for code, s in SERIES.items())
    assert [code for code, s in SERIES.items() if s.against_length] == ["layer"]
    assert SERIES["hadamard"].has_family(16) and not SERIES["hadamard"].has_family(14)
    assert SERIES["cw"].has_family(14) and SERIES["ladder"].default_queries == 8192
    assert figure_of({"code": "cw"}) == ("bound-curve-cw", "bound")
    assert figure_of({"code": "layer", "against": "m"}) == ("bound-curve-layer", "wall")
    assert figure_of({"code": "layer", "against": "length"}) == ("bound-curve-layer-length", "length")
    with pytest.raises(KernelgapError, match="--code must be one of hadamard, cw, ladder, layer, got 'rs'"):
        series("rs")
    with pytest.raises(KernelgapError, match="--length applies to --code layer only, got --code cw"):
        bound_curve("cw", [16], lengths=[3])


def test_the_cw_series():
    payload = bound_curve("cw", [16, 24], queries=6, chain_step=2)
    assert payload["code"] == "cw" and payload["chain_step"] == 2 and payload["queries_max"] == 6
    assert [p["m"] for p in payload["points"]] == [16, 24] and payload["skipped_m"] == []
    for p in payload["points"]:
        assert 2 <= p["certified_direct"] <= p["queries"] <= 6 and p["sequences_chained"] > p["sequences_direct"]
    assert curve_lines(payload)[0].split() == ["m", "n", "direct", "chained", "trace", "softmax", "d", "2^m"]


def test_a_new_series_is_one_registry_entry(monkeypatch):
    """A series registered in SERIES alone is a --code: its curve, text and figure."""

    class Squares(PointSeries):
        name = "squares"

        def family(self, m, options):
            return "hadamard", {"m": 8, "n": 2}

        def point(self, m, options, log=None):
            return None if m == 5 else {**common(m), "certified": m * m}

        def lines(self, payload):
            return [f"{p['m']}: {p['certified']}" for p in payload["points"]]

    monkeypatch.setitem(SERIES, "squares", Squares())
    payload = bound_curve("squares", [3, 4, 5])
    assert [p["certified"] for p in payload["points"]] == [9, 16] and payload["skipped_m"] == [5]
    assert payload["queries_max"] == 128 and curve_lines(payload) == ["3: 9", "4: 16"]
    assert figure_of(payload) == ("bound-curve-squares", "bound")
    with pytest.raises(KernelgapError, match="no m in 5..5 has a squares family"):
        bound_curve("squares", [5])


def test_softmax_check_on_a_ladder_family():
    from kernelgap.models.verify import softmax_check

    family = build_family("ladder", m=16, n=4)
    check = softmax_check(family, samples=64)
    assert check["sampled"] == 64 and check["exact"] and 0 <= check["max_error"] < 0.5
    assert softmax_check(family, samples=64) == check  # seeded


def test_growth_rate_is_a_least_squares_fit():
    fit = growth_rate([{"m": 10, "certified": 4}, {"m": 20, "certified": 16}, {"m": 30, "certified": 64}])
    assert fit["log2_per_m"] == pytest.approx(0.2) and fit["intercept"] == pytest.approx(0.0, abs=1e-9)


def test_cli_writes_png_svg_and_json(cli, tmp_path):
    code, out, _ = cli("bound-curve", "--code", "hadamard", "--m", "12,24", "--out", str(tmp_path), "--json")
    data = json.loads(out)
    assert code == 0 and [p["certified_direct"] for p in data["points"]] == [5, 23]  # m = 12: ε = 1/2, products 1/4
    assert (tmp_path / "bound-curve-hadamard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "bound-curve-hadamard.json").read_text())["points"] == data["points"]
    code, out, _ = cli("bound-curve", "--code", "ladder", "--m", "32,40", "--queries", "64", "--out", str(tmp_path))
    assert code == 0 and "growth: log2(certified)" in out and (tmp_path / "bound-curve-ladder.svg").is_file()
    code, _, err = cli("bound-curve", "--code", "rs", "--m", "12")
    assert code == 2 and "--code" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("bound-curve", "--code", "hadamard", "--m", "28")
    assert code == 2 and "no m" in err


# -- trained points on the bound curve ----------------------------------------------------------


def test_both_profiles_train_table_on_ladder_families_at_their_certificate():
    from kernelgap.experiments.profile import load_profile
    from kernelgap.sweeps.config import load_sweep

    for profile, fams in (("quick", {(32, 11)}), ("paper", {(32, 11), (48, 40)})):
        runs = load_sweep(load_profile(profile).sweep_file("bound_curve")).runs()
        assert {(r.family.name, r.model.feature_map) for r in runs} == {("ladder", "table")}
        assert {(r.family.params["m"], r.family.params["n"]) for r in runs} == fams
        for m, n in fams:  # the certificate (n, every query) is trained at and below
            ranks = {r.model.rank for r in runs if r.family.params["m"] == m}
            assert {n - 1, n} <= ranks
            long = {r.train.max_steps for r in runs if r.family.params["m"] == m and r.model.rank >= n}
            assert m < 48 or long == {30000}  # the m = 48 family needs the long schedule at its certificate


def test_the_wall_profile_trains_the_m64_ladder_at_its_certificate_only():
    """The exponential regime: m = 64, 144 queries, every one certified (the curve's m = 64
    point), trained at rank 144 and nowhere else (below, the certificate already decides)."""
    from kernelgap.experiments.profile import load_profile
    from kernelgap.experiments.steps import sweep_runs

    prof = load_profile("wall")
    assert prof.experiments == ["bound_curve"]
    runs = sweep_runs(prof, "bound_curve")
    assert {(r.family.name, r.model.feature_map, r.model.rank) for r in runs} == {("ladder", "table", 144)}
    assert {tuple(sorted(r.family.params.items())) for r in runs} == {(("m", 64), ("n", 144))}
    assert 64 in parse_m_range(prof.settings["bound_curve"]["m"])


def test_the_step_certifies_the_trained_family_and_the_section_pins_the_minimal_rank(tmp_path):
    from types import SimpleNamespace

    from kernelgap.experiments.bound_curve import experiment as bc
    from kernelgap.experiments.bound_curve.step import curve
    from kernelgap.experiments.registry import BUILTIN
    from kernelgap.report.criteria import Results

    sweep = tmp_path / "bound_curve.toml"
    sweep.write_text(
        'name = "bound_curve"\n[family]\nname = "ladder"\nparams = {m = 16, n = 8}\n[model]\nkind = "kernel"\n'
        'feature_map = "table"\n[train]\nmse_steps = 2\nmax_steps = 2\n[grid]\nmodel.rank = [5, 8]\nseed = [0]\n'
    )
    prof = SimpleNamespace(
        settings={"bound_curve": {"code": "ladder", "m": "16", "queries": 8}}, sweep_file=lambda name: sweep
    )
    data = curve(prof, tmp_path, {})
    (fam,) = data["trained_families"]
    assert (fam["kind"], fam["n"], fam["certified_rank"]) == ("ladder", 8, 5)  # certified 5 of 8 queries
    folder = tmp_path / "out" / "bound_curve"
    (folder / "runs").mkdir(parents=True)
    (folder / "curve.json").write_text(json.dumps(data))
    for rank, seed, err, seqs in ((5, 0, 0.4, fam["sequences"]), (5, 1, 0.9, fam["sequences"]), (4, 0, 0.3, 7)):
        rec = {
            "id": f"r{rank}s{seed}",
            "config": {
                "family": {"name": "ladder", "params": {"m": 16, "n": 8}},
                "model": {"kind": "kernel", "feature_map": "table", "rank": rank, "heads": 1},
            },
            "seed": seed,
            "status": "ok",
            "steps": 10,
            "wall_time_s": 1.0,
            "train": {"max_error": err, "exact_seq_acc": 1.0, "mean_abs_error": err / 4, "sequences": seqs},
        }
        (folder / "runs" / f"{rec['id']}.json").write_text(json.dumps(rec))
    section = bc.section(Results(tmp_path / "out", BUILTIN))
    (t,) = section["trained"]
    # rank 4's run was scored on 7 sequences only: not an exact model of the family, so no refutation
    assert t["exact_not_on_whole_family"] == 1 and t["exact_below_certificate"] == []
    assert (t["trained_any"], t["trained_most"], t["determined"]) == (5, None, True)
    text = bc.caption({"bound_curve": section})
    assert "ladder m = 16, n = 8 (certified 5): 1 of 2 seeds exact at the certificate" in text
    assert "some seed exact from rank 5" in text and "most seeds" not in text
    assert section["points"] and bc.draw_bound_curve(section, tmp_path / "fig")


@pytest.mark.parametrize("profile", ["quick", "paper", "wall"])
def test_trained_ladder_runs_can_reproduce_the_overlaps(profile):
    """A ladder run's readout must reproduce ``<x, c>``, a bilinear form of rank m: every run of
    the bound-curve sweeps has a value width of at least m (docs/experiments.md, "The bound curve")."""
    from pathlib import Path

    import kernelgap.experiments.bound_curve as bc
    from kernelgap.sweeps import load_sweep

    runs = load_sweep(Path(bc.__file__).parent / f"{profile}.toml").runs()
    assert runs
    for run in runs:
        assert run.family.name == "ladder"
        assert run.model.d_value >= run.family.params["m"], (run.family.params, run.model.d_value)


def test_the_report_reads_the_shape_of_the_points_not_the_code(tmp_path):
    """A curve whose points are certified in full (one ``certified`` rank per m) reads as the
    ladder's whatever its code; one certified directly and with chains reads as a code's."""
    from kernelgap.experiments.bound_curve import experiment as bc
    from kernelgap.report.figures import certified_in_full

    softmax = {"exact": True, "max_error": 0.1, "sampled": 10}
    in_full = {
        "code": "squares",
        "points": [{"m": 4, "certified": 3, "trace": 2, "queries": 5, "limit_reached": True, "softmax": softmax}],
        "skipped_m": [],
        "trained": [],
    }
    coded = {
        "code": "ladder",
        "points": [{"m": 8, "certified_direct": 4, "certified_chained": 6, "trace_chained": 5, "queries": 7}],
        "skipped_m": [],
        "trained": [],
        "chain_step": 4,
    }
    assert certified_in_full(in_full) and not certified_in_full(coded) and not certified_in_full({"points": []})
    full = bc.conclusions({"bound_curve": in_full})
    assert full["m = 4: certified rank"] == "3" and full["m = 4: search limit reached"] == "yes"
    assert "every one of 5 queries is certified (the search limit)" in bc.caption({"bound_curve": in_full})
    assert bc.conclusions({"bound_curve": coded})["m = 8: certified rank (direct / chained)"] == "4 / 6"
    assert "queries is certified" not in bc.caption({"bound_curve": coded})
    assert bc.draw_bound_curve(in_full, tmp_path / "a") and bc.draw_bound_curve(coded, tmp_path / "b")


# -- the layer series below δ = 1/2: the whole middle layer, the pair ceiling ---------------------


def least_full_length(n: int, delta: Fraction) -> int:
    """The least N ≥ 3 whose pair bound ρ_N(1, δ)² = (2δ/((N − 2)(1 − 2δ)))² is below 1/(n − 1)."""
    return next(N for N in range(3, 10**6) if (2 * delta / ((N - 2) * (1 - 2 * delta))) ** 2 < Fraction(1, n - 1))


def test_wall_guess_below_half_is_the_least_length_the_strict_test_passes():
    from kernelgap.theory import layer_curve as lc

    for delta in (Fraction(2, 5), Fraction(1, 4), Fraction(3, 10), Fraction(1, 3)):
        for n in list(range(2, 400)) + [924, 12870, 2_704_156]:
            assert lc.wall_guess(n, delta) == least_full_length(n, delta), (delta, n)
    n = math.comb(26, 13)
    assert lc.wall_guess(n, Fraction(2, 5)) == 3 + math.isqrt(16 * (n - 1)) == 12902
    assert lc.wall_rule(Fraction(2, 5)) == "3 + ⌊√(16(n − 1))⌋" and lc.wall_rule() == "2 + ⌈√(n − 1)⌉"
    assert lc.wall_rule(Fraction(3, 10)) == "3 + ⌊√((9/4)(n − 1))⌋"
    assert (lc.layer_distance(Fraction(1, 2)), lc.layer_distance(Fraction(2, 5))) == (4, 2)
    assert (lc.code_size(12, Fraction(2, 5)), lc.code_size(12)) == (924, 80)


def test_the_whole_layer_at_two_fifths_reaches_the_pair_ceiling():
    """At δ = 2/5 the whole middle layer is certified from N = 3 + ⌊√(16(n − 1))⌋ (one shorter
    certifies fewer), the query one-hot construction has rank n within δ there, and n is the
    ceiling C(m, ⌊m/2⌋) of every pair certificate."""
    from kernelgap.theory import layer_curve as lc

    payload = lc.wall_curve([4, 6, 8, 10], deltas=[Fraction(2, 5)])
    assert payload["deltas"] == ["2/5"] and set(payload["growth"]) == {"2/5"}
    for p in payload["points"]:
        m, n = p["m"], math.comb(p["m"], p["m"] // 2)
        assert (p["delta"], p["distance"], p["n"], p["certified"]) == ("2/5", 2, n, n)
        assert p["length"] == p["predicted_length"] == 3 + math.isqrt(16 * (n - 1)) and p["formula_holds"]
        family = build_family("layer", m=m, distance=2, length=p["length"] - 1)
        assert p["certified_below"] == certify(family, Fraction(2, 5), budget_s=0).certified_rank < n
        assert p["constructed_rank"] == n and p["construction_error"] < 0.4 and p["proved_equals_constructed"]
        assert (p["ceiling"], p["ceiling_gap"], p["at_ceiling"]) == (n, 1, True)
        assert p["ratio_to_positive"] == n / 2**m and p["log2_rank_per_m"] == pytest.approx(math.log2(n) / m)
        assert p["layer_asymptote"] == pytest.approx(math.sqrt(2 / (math.pi * m)))
    for m in (4, 6):  # every shorter length certifies fewer
        top = next(p for p in payload["points"] if p["m"] == m)["length"]
        ranks = [
            certify(build_family("layer", m=m, distance=2, length=N), Fraction(2, 5), budget_s=0).certified_rank
            for N in range(3, top)
        ]
        assert max(ranks) < math.comb(m, m // 2)


def test_both_tolerances_share_one_payload():
    payload = bound_curve("layer", [8], deltas=[Fraction(1, 2), Fraction(2, 5)])
    half, whole = payload["points"]
    assert (half["delta"], half["n"], half["length"], whole["delta"], whole["n"], whole["length"]) == (
        "1/2",
        10,
        5,
        "2/5",
        70,
        36,
    )
    assert whole["ceiling"] == 70 and whole["at_ceiling"] is True
    # at δ = 1/2 the ceiling is the gap-2 bound where one is stated, else the gap-1 one (a gap-2 pair is a gap-1 pair)
    assert half["certified"] <= half["ceiling"] <= 70 and half["ceiling_gap"] in (1, 2)
    assert half["at_ceiling"] == (half["certified"] >= half["ceiling"])
    lines = curve_lines(payload)
    assert "δ = 1/2, the largest Graham–Sloane class:" in lines and "δ = 2/5, the whole weight-m/2 layer:" in lines
    assert "N* = 3 + ⌊√(16(n − 1))⌋ is the smallest N certifying all n words at every m" in "\n".join(lines)
    with pytest.raises(KernelgapError, match="--delta applies to --code layer only, got --code cw"):
        bound_curve("cw", [16], deltas=[Fraction(2, 5)])


def test_cli_layer_at_two_fifths_json(cli, tmp_path):
    """``bound-curve --code layer --delta 2/5`` at small m: certified = C(m, m/2) at the stated N,
    fewer at N − 1, in the JSON printed and written; both tolerances draw the ratio figure."""
    code, out, _ = cli("bound-curve", "--code", "layer", "--m", "6,8", "--delta", "2/5", "--json")
    assert code == 0
    points = json.loads(out)["points"]
    for p in points:
        n = math.comb(p["m"], p["m"] // 2)
        assert p["length"] == 3 + math.isqrt(16 * (n - 1)) and p["certified"] == n > p["certified_below"]
        assert p["below_length"] == p["length"] - 1 and p["ceiling"] == n and p["at_ceiling"] is True
    assert [(p["m"], p["length"], p["certified"], p["certified_below"]) for p in points] == [
        (6, 20, 20, 19),
        (8, 36, 70, 69),
    ]
    code, out, _ = cli("bound-curve", "--code", "layer", "--m", "8", "--delta", "2/5", "--length", "35,36", "--json")
    (curve,) = json.loads(out)["curves"]
    assert [(p["length"], p["certified"]) for p in curve["points"]] == [(35, 69), (36, 70)]
    assert (curve["delta"], curve["full_from"], curve["last_short"]) == ("2/5", 36, {"length": 35, "certified": 69})
    code, out, _ = cli("bound-curve", "--code", "layer", "--m", "6,8", "--delta", "1/2,2/5", "--out", str(tmp_path))
    assert code == 0 and "the certificate reaches the proven ceiling of every pair certificate" in out
    for name in ("bound-curve-layer", "bound-curve-layer-ratio"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (
            tmp_path / f"{name}.svg"
        ).is_file()
    written = json.loads((tmp_path / "bound-curve-layer.json").read_text())
    assert written["deltas"] == ["1/2", "2/5"] and [p["delta"] for p in written["points"]] == ["1/2"] * 2 + ["2/5"] * 2


@pytest.mark.parametrize(
    "args, why",
    [
        (["--code", "layer", "--m", "8", "--delta", "3/5"], "delta must lie in (0, 1/2], got '3/5'"),
        (["--code", "layer", "--m", "8", "--delta", "1/2,"], "delta must be a rational"),
        (["--code", "cw", "--m", "16", "--delta", "2/5"], "--delta applies to --code layer only"),
    ],
)
def test_cli_refuses_a_bad_delta_in_one_line(cli, args, why):
    code, _, err = cli("bound-curve", *args)
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
