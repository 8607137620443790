"""``kernelgap compare``: the conclusions two reproductions of one profile differ on."""

import copy
import json
import shutil

import pytest

from kernelgap.errors import KernelgapError
from kernelgap.experiments.registry import BUILTIN
from kernelgap.reproduction.compare import PAPER_ROW, compare, compare_folders, conclusions, markdown
from kernelgap.reproduction.pipeline import reproduce
from kernelgap.reproduction.schema import summary_problem

#: A profile that reproduces in seconds: the length experiment, one run of 3 steps.
TINY = {
    "profile.toml": 'experiments = ["length"]\n[length]\nm = 2\n',
    "length.toml": 'name = "length"\n[family]\nname = "exhaustive"\nparams = {m = 2, length = 2}\n'
    '[model]\nfeature_map = "mlp_exp"\nrank = 1\n[train]\nmse_steps = 3\nmax_steps = 3\n',
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A reproduction of the tiny profile (``--executor inline``)."""
    profile = tmp_path_factory.mktemp("configs") / "tiny"
    profile.mkdir()
    for name, text in TINY.items():
        (profile / name).write_text(text)
    out = tmp_path_factory.mktemp("out") / "rep"
    reproduce(profile, out, executor="inline", log=lambda *_: None)
    return out


def copy_of(folder, tmp_path, name="copy", edit=None):
    """A copy of a reproduction folder, its summary.json changed by ``edit(summary)``."""
    dst = tmp_path / name
    shutil.copytree(folder, dst)
    if edit is not None:
        summary = json.loads((dst / "summary.json").read_text())
        edit(summary)
        (dst / "summary.json").write_text(json.dumps(summary))
    return dst


def test_a_folder_and_its_copy_agree(tiny, tmp_path, cli):
    copy = copy_of(tiny, tmp_path)
    assert compare(tiny, copy) == []
    code, out, err = cli("compare", str(tiny), str(copy))
    assert code == 0, err
    assert "conclusions agree" in out and "differ" not in out
    code, out, _ = cli("compare", str(tiny), str(copy), "--json")
    payload = json.loads(out)
    assert code == 0 and payload["differences"] == [] and payload["compared"] >= 4 and payload["profile"] == "tiny"


def flip_construction_at_3(summary):
    for row in summary["length"]:
        if row["source"] == "constructed" and row["N"] == 3:
            row["exact"] = not row["exact"]


def test_a_planted_difference_is_reported_with_both_values(tiny, tmp_path, cli):
    copy = copy_of(tiny, tmp_path, edit=flip_construction_at_3)
    diffs = {d.conclusion: d for d in compare(tiny, copy)}
    assert ("not exact", "exact") == (
        diffs["rank 1, constructed, N = 3"].value_a,
        diffs["rank 1, constructed, N = 3"].value_b,
    )
    assert {d.experiment for d in diffs.values()} == {"length"}
    assert any(k.startswith(PAPER_ROW) for k in diffs)  # the paper-beside-ours row changed too
    page = tmp_path / "diff.md"
    code, out, err = cli("compare", str(tiny), str(copy), "--out", str(page))
    assert code == 1, err
    assert "rank 1, constructed, N = 3" in out and "not exact" in out and f"{len(diffs)} of" in out
    assert "| length | rank 1, constructed, N = 3 | not exact | exact |" in page.read_text()
    code, out, _ = cli("compare", str(tiny), str(copy), "--json")
    assert code == 1 and {(d["a"], d["b"]) for d in json.loads(out)["differences"]} >= {("not exact", "exact")}


def test_a_conclusion_only_one_folder_has_is_a_difference(tiny, tmp_path):
    def add_trained_n3(summary):
        summary["length"].append({"N": 3, "rank": 1, "seed": 0, "source": "trained", "max_error": 0.9, "exact": False})

    copy = copy_of(tiny, tmp_path, edit=add_trained_n3)
    (diff,) = [d for d in compare(tiny, copy) if d.conclusion == "rank 1, trained, N = 3"]
    assert diff.value_a is None and diff.value_b == "0 of 1 seeds exact"
    assert "(absent)" in markdown(compare_folders(tiny, copy))


def test_a_changed_max_error_is_no_conclusion(tiny, tmp_path):
    def nudge(summary):
        for row in summary["length"]:
            if row["source"] == "trained":
                row["max_error"] = row["max_error"] * 1.001

    assert compare(tiny, copy_of(tiny, tmp_path, edit=nudge)) == []


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "does not exist"),
        ("no summary", "holds no summary.json"),
        ("not json", "is damaged (not valid JSON)"),
        ("off schema", "is damaged ("),
        ("other profile", "reproduce different profiles ('tiny' and 'other')"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tiny, tmp_path, cli, case, message):
    if case == "missing":
        other = tmp_path / "nothing"
    elif case == "no summary":
        other = tmp_path / "empty"
        other.mkdir()
    elif case == "not json":
        other = copy_of(tiny, tmp_path)
        (other / "summary.json").write_text('{"length": [')
    elif case == "off schema":
        other = copy_of(tiny, tmp_path, edit=lambda s: s.update(length=[{"N": "three"}]))
    else:
        other = copy_of(tiny, tmp_path, edit=lambda s: s.update(profile="other"))
    code, out, err = cli("compare", str(tiny), str(other))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    with pytest.raises(KernelgapError):
        compare(other, tiny)


# -- every experiment's conclusions on a realistic summary ------------------------------


def run(fm, rank, seed, max_error, **extra):
    """A run row as :func:`kernelgap.report.criteria.run_row` reads it (every key)."""
    return {
        "id": f"{fm}-{rank}-{seed}",
        "feature_map": fm,
        "kind": "module" if fm == "module" else "kernel",
        "rank": rank,
        "heads": 1,
        "features": rank,
        "signed": False,
        "seed": seed,
        "status": "ok",
        "steps": 100,
        "wall_time_s": 1.0,
        "family": "witness",
        "params": {},
        "family_sha256": None,
        "max_error": max_error,
        "exact_seq_acc": 1.0 if max_error < 0.5 else 0.5,
        "mean_abs_error": max_error / 2,
        "tries": 1,
        "distilled": False,
        "pruned_from": None,
        "exact": max_error < 0.5,
        **extra,
    }


def trained_family(m, n, length=None):
    runs = [
        {"feature_map": "table", "rank": r, "seed": s, "max_error": e, "exact": e < 0.5, "whole_family": True}
        for r, s, e in ((n, 0, 0.3), (n, 1, 0.7), (2 * n, 0, 0.1), (2 * n, 1, 0.2))
    ]
    return {
        "family": "layer" if length else "ladder",
        "kind": "layer" if length else "ladder",
        "params": {"m": m, "n": n, **({"length": length} if length else {})},
        "sha256": None,
        "m": m,
        "length": length,
        "n": n,
        "sequences": 1000,
        "certified_rank": n,
        "method": "radon",
        "constructed_rank": n,
        "runs": runs,
        "ranks": [
            {"rank": n, "seeds": 2, "exact": 1, "best_max_error": 0.3},
            {"rank": 2 * n, "seeds": 2, "exact": 2, "best_max_error": 0.1},
        ],
        "exact_from": 2 * n,
        "exact_not_on_whole_family": 0,
        "exact_below_certificate": [],
        "certified": n,
        "constructed": n,
        "trained_any": n,
        "trained_most": 2 * n,
        "determined": True,
    }


def series_family(name, kind, n, cert, constructed, exact_from):
    runs = [
        {"rank": r, "seed": s, "max_error": 0.2 if r >= exact_from else 0.9, "exact": r >= exact_from, "steps": 9}
        for r in sorted({cert - 1, cert, n})
        for s in (0, 1)
    ]
    return {
        "family": name,
        "kind": kind,
        "n": n,
        "m": 24,
        "sequences": 500,
        "certified_rank": cert,
        "trace_rank": cert - 1,
        "constructed_rank": constructed,
        "constructed_exact": True,
        "constructed_max_error": 0.0,
        "trained": {
            "table": {"exact_from": exact_from, "seeds": 2, "ranks": sorted({cert - 1, cert, n}), "runs": runs}
        },
        "exact_below_certificate": [],
        "exact_not_on_every_sequence": 0,
        "certified": cert,
        "constructed": constructed,
        "trained_any": exact_from,
        "trained_most": exact_from,
        "determined": cert == min(constructed, exact_from),
    }


def verdict(rank, what, baseline="exact"):
    return {
        "rank_argument": rank,
        "features": rank,
        "compared": "features",
        "verdict": what,
        "seeds": 2,
        "fitted": 2 if what == "exact" else 0,
        "collapsed": 2 if what == "collapsed" else 0,
        "max_error": 0.2,
        "recipe": None,
        "tried": [],
        "baseline": baseline,
        "twin": None,
    }


def wall_entry(m: int, delta: str, lower: int, upper: int) -> dict:
    """One entry of the exact wall as its step writes it (the table's head scored at N = 3)."""
    mode = "strict" if delta != "1/2" else "upper"
    score = {"length": 3, "rank": upper, "sequences": 512, "max_error": 0.45, "error_bound": "9/20", "exact": True}
    call = {"solver": "z3", "rank": upper, "status": "sat", "work": 10, "seconds": 0.01}
    tables = {mode: {"mode": mode, "rank": upper, "lower": lower, "calls": [call], "scores": [score]}}
    if mode == "upper":
        tables["lower"] = {"mode": "lower", "rank": lower, "lower": lower, "calls": [call], "scores": []}
    return {
        "m": m,
        "delta": delta,
        "pair_maximum": lower,
        "pair_ceiling": lower,
        "middle_binomial": 3,
        "two_to_m": 8,
        "tables": tables,
        "lower": lower,
        "upper": upper,
        "from_length": 3,
        "seconds": 0.1,
        "work": 10,
    }


def full_summary() -> dict:
    """A summary with every built-in section, shaped as the sections write them."""
    witness_runs = [
        run(fm, r, s, 0.2 if r >= 16 else 0.9) for fm in ("mlp_exp", "table") for r in (8, 16) for s in (0, 1)
    ]
    ood_runs = [run("mlp_exp", r, s, 0.1, test_max_error=0.4, test_exact_seq_acc=0.97) for r in (4, 8) for s in (0, 1)]
    return {
        "schema_version": 3,
        "version": "0.1.0",
        "profile": "quick",
        "paper": {},
        "witness": {
            "m": 24,
            "sequences": 736,
            "certified_rank": 16,
            "certificate": {"method": "radon", "bounds": {"radon": {"rank": 16}, "trace": {"rank": 12}}},
            "constructed": {"rank": 16, "exact": True, "sequences": 736, "max_error": 0.1},
            "runs": witness_runs,
            "softmax": [{"seed": s, "max_error": 0.01, "exact": True} for s in (0, 1)],
            "transition_rank": {"mlp_exp": 16, "table": 16},
            "exact_all_seeds_rank": {"mlp_exp": 16, "table": None},
            "below_certificate_min_error": 0.87,
        },
        "series": [
            series_family("hadamard-n4", "hadamard", 4, 4, 4, 4),
            series_family("cw-m16-n16", "cw", 16, 7, 16, 16),
        ],
        "ood": {
            "scales": [
                {
                    "label": "n=4",
                    "n": 4,
                    "m": 12,
                    "train_sequences": 100,
                    "test_sequences": 50,
                    "test_gap_share": 0.4,
                    "transition_rank": 4,
                    "transition_rank_max_error": 8,
                    "transition_rank_fitted": 4,
                    "unfitted_runs": [],
                    "runs": ood_runs,
                    "softmax": [
                        {
                            "seed": 0,
                            "max_error": 0.1,
                            "test_max_error": 0.6,
                            "test_exact_seq_acc": 0.99,
                            "exact": False,
                            "train_exact": True,
                            "solved": True,
                        }
                    ],
                }
            ]
        },
        "length": [
            {"N": n, "rank": 1, "source": "constructed", "max_error": 0.0 if n < 3 else 0.67, "exact": n < 3}
            for n in (1, 2, 3)
        ]
        + [{"N": 3, "rank": 1, "seed": 0, "source": "trained", "max_error": 0.9, "exact": False}],
        "bound_curve": {
            "code": "ladder",
            "points": [
                {
                    "m": 32,
                    "queries": 11,
                    "certified": 11,
                    "trace": 9,
                    "limit_reached": False,
                    "softmax": {"exact": True, "max_error": 0.2, "sampled": 1000},
                }
            ],
            "skipped_m": [],
            "growth": None,
            "trained": [trained_family(32, 11)],
        },
        "exact_wall": {"rlimit": 1000, "entries": [wall_entry(3, "2/5", 3, 3), wall_entry(3, "1/2", 1, 2)]},
        "context": {
            "deltas": ["1/2"],
            "length_curves": [
                {
                    "m": 12,
                    "n": 80,
                    "layer_size": 924,
                    "positive_construction": 4096,
                    "full_from": 11,
                    "last_short": {"length": 10, "certified": 70},
                    "points": [
                        {"length": n, "certified": c, "trace": 5, "radon": c, "method": "radon"}
                        for n, c in ((10, 70), (11, 80), (12, 80))
                    ],
                }
            ],
            "wall": [
                {
                    "m": 12,
                    "n": 80,
                    "predicted_length": 11,
                    "length": 11,
                    "certified": 80,
                    "below_length": 10,
                    "certified_below": 70,
                    "formula_holds": True,
                    "log2_rank_per_m": 0.53,
                    "log2_layer_per_m": 0.82,
                    "layer_size": 924,
                    "positive_construction": 4096,
                    "constructed_rank": 80,
                    "proved_equals_constructed": True,
                }
            ],
            "growth": None,
            "skipped": [{"m": 10, "why": "no class"}],
            "trained": [trained_family(12, 80, length=11)],
        },
        "loopholes": {
            "certified_rank": 16,
            "signed": {
                "witness": {
                    "transition": {
                        "signed": {"transition": 4, "max_tried": 32},
                        "table": {"transition": 16, "max_tried": 32},
                    },
                    "runs": [run("signed", 4, 0, 0.1, signed=True)],
                    "nonnegative_runs": [],
                },
                "ood": [
                    {
                        "n": 4,
                        "transition_solved": {"signed": {"transition": None, "max_tried": 16}},
                        "runs": [run("signed", 16, 0, 0.1, signed=True)],
                    }
                ],
            },
            "heads": {
                "families": [
                    {
                        "family": "witness",
                        "params": {},
                        "name": "witness",
                        "levels": 2,
                        "certified_rank": 16,
                        "constructed_total": 7,
                        "per_map": {
                            "table": {
                                "1": {"transition_total": 16, "max_total": 32},
                                "4": {"transition_total": 32, "max_total": 32},
                            }
                        },
                    }
                ],
                "runs": [run("table", 16, 0, 0.2, heads=1)],
            },
        },
        "zoo": {
            "certified_rank": 16,
            "ood_label": "n=8",
            "table": [
                {
                    "feature_map": "elu1",
                    "witness_transition": None,
                    "witness_max_features": 32,
                    "ood_transition_solved": 16,
                    "ood_max_features": 32,
                    "ood_best_test_acc": 0.97,
                    "witness_verdict": "not exact within 32 features",
                },
                {
                    "feature_map": "table",
                    "witness_transition": 16,
                    "witness_max_features": 32,
                    "witness_verdict": "at the certificate",
                },
            ],
            "witness_runs": [],
            "ood_runs": [],
        },
        "precision": {
            "bits": [2, 4, 8],
            "quantizers": ["uniform"],
            "transcript": {"bits_needed": 40.5, "bits_needed_ceil": 41, "answers": 16, "values": 5},
            "collapse": [
                {
                    "feature_map": "table",
                    "rank": 16,
                    "quantizer": "uniform",
                    "collapse_bits": [4, 8],
                    "sketch_bits_at_collapse": [256, 512],
                    "sketch_numbers": 64,
                }
            ],
            "models": [
                {
                    "id": f"table-16-{s}",
                    "feature_map": "table",
                    "rank": 16,
                    "heads": 1,
                    "seed": s,
                    "sketch_numbers": 64,
                    "steps": 100,
                    "max_error": 0.1,
                    "exact": True,
                    "exact_seq_acc": 1.0,
                    "record_max_error": 0.1,
                    "matches_record": True,
                    "quantized": [
                        {"quantizer": "uniform", "bits": b, "max_error": e, "exact": e < 0.5, "exact_seq_acc": 1.0}
                        for b, e in ((2, 0.9), (4, 0.1), (8, 0.1))
                    ],
                    "collapse_bits": {"uniform": 4},
                }
                for s in (0, 1)
            ],
            "record_mismatches": [],
            "not_exact_at_full_precision": [],
        },
        "probes": [
            {"name": "skipped-lib", "target": "lib:Class", "skipped": "not installed"},
            {
                "name": "decayed",
                "target": "kernelgap.probe.examples:DecayedLinearAttention",
                "baseline": "elu1",
                "suites": [
                    {
                        "name": "witness",
                        "criterion": "train max error < 1/2",
                        "ood": False,
                        "certified_rank": 16,
                        "transition_rank": 32,
                        "max_rank": 32,
                        "baseline_transition": None,
                        "baseline_max_rank": 32,
                        "fitted_runs": 2,
                        "diverged": [],
                        "verdicts": [verdict(8, "at the wall", "at the wall"), verdict(32, "exact", "collapsed")],
                        "recipes": [],
                        "twin": None,
                        "runs": [run("module", 32, s, 0.2) for s in (0, 1)],
                        "baseline": [],
                    }
                ],
            },
        ],
    }


def test_the_realistic_summary_follows_the_schema():
    assert summary_problem(full_summary()) is None


def test_every_experiment_with_a_section_states_its_conclusions_as_text():
    """Each built-in experiment that writes a section defines ``conclusions``; one without a
    section (a sweep whose runs only join a pool) defines none.  On a realistic summary each
    gives a non-empty ``{str: str}``."""
    summary = full_summary()
    for exp in BUILTIN:
        assert (exp.conclusions is None) == (exp.section is None), exp.name
        if exp.conclusions is not None:
            found = exp.conclusions(summary)
            assert found and all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()), exp.name
    every = conclusions(summary, BUILTIN)
    assert set(every) == {e.name for e in BUILTIN if e.conclusions}
    assert every["witness"]["table: exact from (every seed, features)"] == "not reached up to r = 16"
    assert every["series"]["cw-m16-n16: minimal rank"] == "7 … 16 (open)"
    assert every["heads"]["witness: several heads exact below what one head needs"] == "no"
    assert every["probe"]["decayed, witness, rank 8: verdict"] == "at the wall"
    assert every["probe"]["skipped-lib"] == "skipped"
    # a paper row whose "ours" is a continuous number compares by its verdict instead
    assert every["witness"][PAPER_ROW + "Witness: smallest max error below the bound"] == (
        "a run below the certificate is exact: no"
    )


def test_each_experiment_reports_a_flipped_verdict(tmp_path):
    """One changed outcome per experiment is found, under that experiment, with both values."""
    a = full_summary()
    b = copy.deepcopy(a)
    b["witness"]["transition_rank"]["table"] = 8
    b["series"][0]["trained"]["table"]["exact_from"] = 3
    b["ood"]["scales"][0]["transition_rank"] = 8
    b["length"][3]["exact"] = True
    b["bound_curve"]["trained"][0]["ranks"][0]["exact"] = 2
    b["context"]["wall"][0]["formula_holds"] = False
    b["exact_wall"]["entries"][1]["lower"] = 2
    b["loopholes"]["signed"]["ood"][0]["transition_solved"]["signed"]["transition"] = 16
    b["loopholes"]["heads"]["families"][0]["per_map"]["table"]["4"]["transition_total"] = 8
    b["zoo"]["table"][0]["witness_transition"] = 32
    b["precision"]["collapse"][0]["collapse_bits"] = [4, 4]  # a measurement: not a conclusion
    b["precision"]["models"][0]["exact"] = False
    b["probes"][1]["suites"][0]["verdicts"][0]["verdict"] = "not fitted"
    for name, s in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(s))
    found = compare_folders(tmp_path / "a", tmp_path / "b")
    by = {}
    for d in found.differences:
        assert d.value_a != d.value_b and d.value_a is not None and d.value_b is not None
        by.setdefault(d.experiment, []).append(d)
    assert set(by) == {e.name for e in BUILTIN if e.conclusions}
    assert ("r = 16", "r = 8") in {(d.value_a, d.value_b) for d in by["witness"]}
    assert ("no", "yes") in {(d.value_a, d.value_b) for d in by["heads"]}
    assert ("at the wall", "not fitted") in {(d.value_a, d.value_b) for d in by["probe"]}
    assert found.compared > len(found.differences) > 10


def test_probe_folders_compare_on_their_verdicts(tmp_path, tiny):
    a = {"version": "0.1.0", "profile": "quick", "probes": full_summary()["probes"], "feature_maps": {}}
    b = copy.deepcopy(a)
    b["probes"][1]["suites"][0]["verdicts"][1]["verdict"] = "collapsed"
    for name, s in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(s))
    found = compare_folders(tmp_path / "a", tmp_path / "b")
    assert found.kind == "probe" and [(d.conclusion, d.value_a, d.value_b) for d in found.differences] == [
        ("decayed, witness, rank 32: verdict", "exact", "collapsed")
    ]
    with pytest.raises(KernelgapError, match="is a probe folder and .* a reproduction folder"):
        compare_folders(tmp_path / "a", tiny)


def test_a_verdict_on_one_seed_or_on_disagreeing_seeds_is_at_the_edge():
    from kernelgap.experiments.probe.text import edge_note
    from kernelgap.experiments.series.experiment import sentence
    from kernelgap.report.criteria import at_edge

    assert [at_edge(h, s) for h, s in ((0, 3), (3, 3), (1, 3), (2, 3), (1, 1), (0, 1))] == [
        False,
        False,
        True,
        True,
        True,
        True,
    ]
    assert edge_note(verdict(8, "exact")) == "" and edge_note(verdict(8, "collapsed")) == ""
    assert edge_note({**verdict(8, "exact"), "seeds": 1, "fitted": 1}) == " (at the edge: one seed)"
    assert edge_note({**verdict(8, "not fitted"), "seeds": 3, "fitted": 1}) == " (at the edge: 1 of 3 seeds exact)"
    assert edge_note({**verdict(8, "exact"), "seeds": 1, "recipe": "lr-x3"}) == ""  # a recipe decided it
    firm = series_family("hadamard-a", "hadamard", 8, 8, 8, 8)
    split = series_family("hadamard-b", "hadamard", 12, 12, 12, 12)
    split["trained"]["table"]["runs"][2]["exact"] = False  # seed 0 at the certificate: not exact
    text = sentence({"series": [firm, split]})
    assert "at the edge, seeds exact at the certificate disagree: n = 12: 1 of 2 seeds)" in text
    assert "n = 8" not in text.split("at the edge")[1]


def test_a_page_never_replaces_a_result(tiny, cli, tmp_path):
    """``--out`` naming a summary.json (or any file that is not Markdown) is refused, the file kept."""
    out = tiny
    before = (out / "summary.json").read_bytes()
    for argv in (
        ("compare", str(out), str(out), "--out", str(out / "summary.json")),
        ("results", str(out), "--out", str(out / "summary.json")),
    ):
        code, _, err = cli(*argv)
        assert code == 2 and err.count("\n") == 1 and "is not a Markdown (.md) file" in err, err
        assert (out / "summary.json").read_bytes() == before
    code, _, err = cli("results", str(out), "--out", str(tmp_path / "page.md"))
    assert code == 0 and (tmp_path / "page.md").read_text().startswith("# Measured results")
