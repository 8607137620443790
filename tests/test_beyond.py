"""Beyond the paper: signed guard, several heads, the report section, the profiles."""

import html
import json
from pathlib import Path

import pytest
import torch

from kernelgap.experiments.profile import load_profile
from kernelgap.experiments.registry import BUILTIN
from kernelgap.models import build_model
from kernelgap.models.attention import DENOMINATOR_GUARD, KEY_AXIS, gather_pairs
from kernelgap.models.sketch import sketch_numbers
from kernelgap.report.criteria import exact, first_rank
from kernelgap.reproduction.render import draw_all, region
from kernelgap.reproduction.summary import build_sections
from kernelgap.sweeps.config import load_sweep
from kernelgap.task import build_family
from kernelgap.training import default_model

BEYOND = ["signed", "signed_ood", "heads", "zoo", "zoo_ood", "precision"]


# -- signed kernels: the denominator guard ----------------------------------------------------


def _signed_model(m=1, rank=1):
    return build_model(default_model(feature_map="signed", rank=rank), m, 3, seeds=[0], dtype=torch.float64)


def test_signed_guard_reports_a_zero_denominator_instead_of_nan():
    model = _signed_model()
    scorer = model.scorer
    # φ_Q ≡ 1, φ_K(0) = −1, φ_K(1) = +1: a sequence's denominator is (#ones − #zeros)
    scorer.query = lambda t, ids=None: torch.ones(1, t.shape[0], 1, dtype=t.dtype)
    scorer.key = lambda t, ids=None: (2 * t - 1).reshape(1, 1, t.shape[0], 1)
    tokens = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    index = torch.tensor([[0, 1, 1], [1, 0, 0], [1, 1, 1], [0, 1, 0]])
    # denominators: −1+1+1 = 1, 1−1−1 = −1, 3, −1+1−1 = −1: no zero yet
    pred = model.predict(tokens, index)
    assert torch.isfinite(pred).all() and float(model.kernel_stats(tokens, index)["guarded_share"][0]) == 0.0
    index = torch.tensor([[0, 1], [1, 0]])  # length 2: every denominator is exactly 0
    pred = model.predict(tokens, index)
    assert torch.isfinite(pred).all()
    # every query of every sequence hit the guard
    assert float(model.kernel_stats(tokens, index)["guarded_share"][0]) == 1.0
    # the unguarded division would not be finite
    t = model.tables(tokens)
    flat = (torch.zeros(2, dtype=torch.long)[:, None, None] * 2 + index[None, :, :1].expand(2, 2, 1)) * 2 + index.T[
        :, :, None
    ]
    denom = gather_pairs(t.scores, flat).sum(KEY_AXIS)
    assert float(denom.abs().max()) < DENOMINATOR_GUARD
    assert not torch.isfinite(gather_pairs(t.scores, flat) / denom.unsqueeze(KEY_AXIS)).all()


def test_kernel_stats_count_negative_weights_denominators_and_guards():
    model = _signed_model()
    scorer = model.scorer
    scorer.query = lambda t, ids=None: torch.ones(1, t.shape[0], 1, dtype=t.dtype)  # α(x, z) = 2z − 1
    scorer.key = lambda t, ids=None: (2 * t - 1).reshape(1, 1, t.shape[0], 1)
    tokens = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    # scored at position 1: weights (−1, 1, 1), (1, −1, −1), (1, 1, 1), (−1, 1, −1)
    index = torch.tensor([[0, 1, 1], [1, 0, 0], [1, 1, 1], [0, 1, 0]])
    stats = model.kernel_stats(tokens, index, positions=[0])
    assert float(stats["negative_weight_share"][0]) == 5 / 12
    assert float(stats["negative_denominator_share"][0]) == 2 / 4  # sums 1, −1, 3, −1
    assert float(stats["guarded_share"][0]) == 0 and float(stats["min_abs_denominator"][0]) == 1
    zero = model.kernel_stats(tokens, torch.tensor([[0, 1], [1, 0]]))  # every sum is 0
    assert float(zero["guarded_share"][0]) == 1 and float(zero["min_abs_denominator"][0]) == 0


def test_signed_runs_record_their_sign_use_and_nonnegative_runs_do_not():
    from kernelgap.training import FamilySpec, RunConfig, TrainConfig
    from kernelgap.training.trainer import train_records

    def run(fm):
        cfg = RunConfig(
            FamilySpec("exhaustive", {"m": 3, "length": 3}),
            default_model(feature_map=fm, rank=4),
            TrainConfig(mse_steps=3, max_steps=3),
        )
        return train_records([cfg])[0]["train"]

    kernel = run("signed_table")["kernel"]
    assert set(kernel) == {
        "negative_weight_share",
        "negative_denominator_share",
        "guarded_share",
        "min_abs_denominator",
    }
    assert kernel["min_abs_denominator"] > 0 and 0 <= kernel["negative_weight_share"] <= 1
    assert "kernel" not in run("table")


def test_signed_kernel_really_can_be_negative():
    model = _signed_model(m=6, rank=8)
    fam = build_family("exhaustive", m=6, length=1)
    with torch.no_grad():
        k = model.tables(torch.from_numpy(fam.tokens).double()).scores
    assert not model.scorer.log_space and float(k.min()) < 0 < float(k.max())


# -- several heads ----------------------------------------------------------------------------


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
def test_multi_head_shapes_and_sum_over_heads(heads):
    fam = build_family("exhaustive", m=3, length=3)
    tok, idx = torch.from_numpy(fam.tokens).double(), torch.from_numpy(fam.index)
    total = 8
    spec = default_model(feature_map="table", rank=total // heads, heads=heads)
    model = build_model(spec, 3, 3, seeds=[0, 1], vocabulary=fam.tokens, dtype=torch.float64)
    t = model.tables(tok)
    T = len(fam.tokens)
    assert t.scores.shape == (2, heads, 1, T, T) and t.values.shape == (2, heads, 1, T, T)
    assert spec.feature_count() == total
    assert sketch_numbers(model) == [total * (spec.d_value + 1)] * 2
    with torch.no_grad():
        pred = model.predict(tok, idx)
    assert pred.shape == (2, len(fam), 3)
    # p = Σ_h Σ_j softmax_j(L_h) U_h + b: each head normalised on its own, then summed
    q = idx[:, :, None].expand(-1, 3, 3)  # query id at each (s, i, j)
    k = idx[:, None, :].expand(-1, 3, 3)
    manual = torch.zeros_like(pred)
    for h in range(heads):
        w = torch.softmax(t.scores[:, h, 0][:, q, k], dim=-1)
        manual += (w * t.values[:, h, 0][:, q, k]).sum(-1)
    manual += t.bias[:, idx]
    assert torch.allclose(pred, manual, atol=1e-10)


# -- the report section from synthetic result folders -------------------------------------------


def _record(
    folder: Path,
    fm,
    rank,
    seed,
    max_error,
    heads=1,
    family="witness",
    params=None,
    test_acc=None,
    kernel=None,
    sha=None,
):
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    rid = f"{fm}-{rank}-{heads}-{seed}-{(params or {}).get('n', 0)}" + (f"-{sha[:4]}" if sha else "")
    spec = default_model(feature_map=fm, rank=rank, heads=heads)
    rec = {
        "id": rid,
        "seed": seed,
        "status": "ok",
        "steps": 10,
        "wall_time_s": 1.0,
        "features": spec.feature_count(),
        "signed_kernel": spec.signed_kernel,
        "config": {
            "model": {"kind": "kernel", "feature_map": fm, "rank": rank, "heads": heads},
            "family": {"name": family, "params": params or {}, **({"sha256": sha} if sha else {})},
        },
        "train": {
            "max_error": max_error,
            "exact_seq_acc": 1.0 if max_error < 0.5 else 0.0,
            "mean_abs_error": max_error / 2,
        },
        "test": {"max_error": 1.0, "exact_seq_acc": test_acc} if test_acc is not None else None,
    }
    if kernel:
        rec["train"]["kernel"] = kernel
    (folder / "runs" / f"{rid}.json").write_text(json.dumps(rec))


def test_sections_transitions_and_html(tmp_path):
    for seed in (0, 1, 2):
        for r, err in ((8, 1.5), (16, 0.3 if seed else 0.9), (32, 0.1)):
            _record(tmp_path / "signed", "signed", r, seed, err)
            _record(tmp_path / "zoo", "signed", r, seed, err)  # the same run in two pooled sweeps
            _record(tmp_path / "zoo", "relu", r, seed, 1.2)
            _record(tmp_path / "zoo", "taylor", r, seed, err)
            _record(
                tmp_path / "zoo",
                "signed_table",
                r,
                seed,
                0.2 if r == 32 else 1.1,
                kernel={
                    "negative_weight_share": 0.25 if r == 32 else 0.5,
                    "negative_denominator_share": 0.0,
                    "guarded_share": 0.0,
                    "min_abs_denominator": 0.5 + r,
                },
            )
        for h in (1, 2, 4):
            _record(tmp_path / "heads", "table", 16 // h, seed, 0.2 if h < 4 else 0.9, heads=h)
            _record(tmp_path / "heads", "mlp_exp", 16 // h, seed, 0.2, heads=h)
        for r, acc in ((4, 0.5), (16, 0.995)):
            _record(tmp_path / "zoo_ood", "elu1", r, seed, 0.1, family="ood", params={"n": 8}, test_acc=acc)
    (tmp_path / "signed" / "certificates.json").write_text(
        json.dumps({"w": {"family": "witness", "params": {}, "certified_rank": 11}})
    )
    built = {"applies": True, "heads": [1, 6], "total": 7, "exact": True, "max_error": "6/25", "sequences": 736}
    (tmp_path / "heads" / "certificates.json").write_text(
        json.dumps({"w": {"family": "witness", "params": {}, "certified_rank": 11, "two_heads": built}})
    )
    (tmp_path / "precision").mkdir()
    (tmp_path / "precision" / "quantized.json").write_text(
        json.dumps(
            {
                "bits": [2, 4, 8],
                "quantizers": ["uniform"],
                "transcript": {"answers": 16, "values": 2, "bits_needed": 16.0, "bits_needed_ceil": 16},
                "models": [
                    {
                        "id": "r16",
                        "feature_map": "table",
                        "rank": 16,
                        "heads": 1,
                        "seed": 0,
                        "sketch_numbers": 528,
                        "steps": 100,
                        "exact": True,
                        "max_error": 0.1,
                        "exact_seq_acc": 1.0,
                        "record_max_error": 0.1,
                        "matches_record": True,
                        "collapse_bits": {"uniform": 4},
                        "quantized": [
                            {"quantizer": "uniform", "bits": b, "max_error": e, "exact": e < 0.5, "exact_seq_acc": 1.0}
                            for b, e in ((2, 3.0), (4, 0.3), (8, 0.1))
                        ],
                    }
                ],
            }
        )
    )
    s = sections(tmp_path)
    signed = s["loopholes"]["signed"]["witness"]["transition"]["signed"]
    assert signed == {"transition": 16, "max_tried": 32}  # seeds 1, 2 exact at 16: a majority
    # every map whose kernel may be negative pools into the signed item, from the zoo too
    witness = s["loopholes"]["signed"]["witness"]
    assert witness["transition"]["signed_table"] == {"transition": 32, "max_tried": 32}
    assert {r["feature_map"] for r in witness["runs"]} == {"signed", "signed_table"}
    assert len(witness["runs"]) == 2 * 9  # the run in both folders counts once
    # every single-head witness run of any sweep pools in: the zoo's maps and the heads sweep's H = 1
    assert {r["feature_map"] for r in witness["nonnegative_runs"]} == {"relu", "taylor", "table", "mlp_exp"}
    assert s["loopholes"]["certified_rank"] == 11
    (witness_heads,) = s["loopholes"]["heads"]["families"]
    assert (witness_heads["certified_rank"], witness_heads["constructed_total"]) == (11, 7)
    per_h = witness_heads["per_map"]["table"]
    assert per_h["1"]["transition_total"] == 16 and per_h["4"]["transition_total"] is None
    # each map has its own transitions: mlp_exp is exact with 4 heads where table is not
    assert witness_heads["per_map"]["mlp_exp"]["4"]["transition_total"] == 16
    assert s["loopholes"]["two_heads"] == {k: built[k] for k in ("heads", "total", "exact", "max_error", "sequences")}
    zoo = {r["feature_map"]: r for r in s["zoo"]["table"]}
    assert zoo["relu"]["witness_transition"] is None and zoo["relu"]["witness_max_features"] == 32
    # taylor's features are 1 + d + d(d + 1)/2 ≤ r: r = 16 → 15, r = 32 → 28
    assert zoo["taylor"]["witness_transition"] == 15
    assert zoo["elu1"]["ood_transition_solved"] == 16  # accuracy 0.995 ≥ 0.95 at r = 16, 0.5 at 4
    # against the certificate (11 here): relu never exact; taylor exact from 15, nothing tried
    # between 11 and 15 (its 6 features are below the certificate); signed maps have none
    assert zoo["relu"]["witness_verdict"] == "not exact within 32 features"
    assert zoo["taylor"]["witness_verdict"] == "exact from 15 features (none tried from the certificate 11 up to it)"
    assert zoo["signed"]["witness_verdict"] == "no certificate (a signed kernel)"
    assert s["precision"]["collapse"][0]["sketch_bits_at_collapse"] == [4 * 528]
    assert s["probes"] is None
    summary = {**s, "witness": None}
    drawn = draw_all(summary, tmp_path / "figures")
    page = "".join(region(summary, drawn, tmp_path / "figures", "beyond"))
    assert "Beyond the paper" in page and "not reached up to 32" in page
    assert "one head certified r ≥ 11; two heads constructed at total 7)" in page
    assert "H = 2: exact from H·r = 16, H = 4: exact from H·r = 16" in page  # the best map per head count
    assert "The two-head construction on the witness family: ranks 1 + 6, exact on all 736 sequences" in page
    assert "signed: exact from r = 16, signed_table: exact from r = 32" in page
    assert "table, uniform: 4 bits" in page  # the smallest exact b per map and quantizer
    # sign use, from the runs that recorded it (exact models only where there are some)
    assert (
        "signed_table: its exact models give 25 % of the weights a negative sign, 0 % of its "
        "denominators, smallest |Σα| 8.5, guarded 0 %"
    ) in html.unescape(page)
    assert "<td>not run</td>" in page  # signed_table has witness runs but no OOD runs
    # signed, zoo, precision, and the smallest exact total against H per family
    assert page.count("<img") == 4 and "heads" in drawn
    for stem in ("beyond_signed", "beyond_zoo", "beyond_precision", "beyond_heads"):
        assert (tmp_path / "figures" / f"{stem}.png").is_file()


def test_heads_tells_two_family_files_of_one_stem_apart(tmp_path):
    """Two family files with one stem and parameters but other contents are two families, each
    with its own certificate (the step's entries carry the file's SHA-256, as the runs do)."""
    shas = {"a" * 64: (4, 0.3), "b" * 64: (9, 0.9)}  # certificate, max error of the two-head runs
    certs = {}
    for sha, (cert, err) in shas.items():
        for seed in (0, 1, 2):
            _record(tmp_path / "heads", "table", 2, seed, err, heads=2, family="f", sha=sha)
        certs[sha] = {"family": "f", "params": {}, "sha256": sha, "name": "f", "levels": 3, "certified_rank": cert}
    (tmp_path / "heads" / "certificates.json").write_text(json.dumps(certs))
    families = sections(tmp_path)["loopholes"]["heads"]["families"]
    got = {f["certified_rank"]: f["per_map"]["table"]["2"]["transition_total"] for f in families}
    assert got == {4: 4, 9: None}


def sections(root: Path) -> dict:
    built = build_sections(root)
    return {key: built[key] for key in ("loopholes", "zoo", "precision", "probes")}


@pytest.mark.parametrize(
    ("transition", "certified", "tried", "signed", "verdict"),
    [
        (16, 16, [8, 16, 32], False, "at the certificate"),
        (32, 16, [8, 16, 32], False, "above the certificate: 32 features, 16 more (2×)"),
        (32, 16, [24, 32], False, "above the certificate: 32 features, 16 more (2×)"),
        (32, 16, [8, 32], False, "exact from 32 features (none tried from the certificate 16 up to it)"),
        (None, 16, [16, 64], False, "not exact within 64 features"),
        (8, 16, [8, 16], False, "below the certificate (8 features): contradicts the theorem"),
        (8, 16, [8, 16], True, "no certificate (a signed kernel)"),
        (24, None, [24], False, "exact from 24 features"),
        (None, 16, [], False, "not trained"),
    ],
)
def test_a_maps_verdict_against_the_certificate(transition, certified, tried, signed, verdict):
    from kernelgap.experiments.zoo.experiment import wall_verdict

    assert wall_verdict(transition, certified, tried, signed) == verdict


def test_transition_needs_a_strict_majority():
    rows = [{"features": 4, "max_error": e} for e in (0.1, 0.9)] + [{"features": 8, "max_error": 0.1}]
    assert first_rank(rows, exact, "features") == 8


def test_no_beyond_results_means_no_sections(tmp_path):
    assert sections(tmp_path) == {"loopholes": None, "zoo": None, "precision": None, "probes": None}
    assert region({}, {}, tmp_path, "beyond") == []


# -- the profiles ------------------------------------------------------------------------------

#: The quick profile leaves the zoo on an OOD pool to the paper profile (time budget).
PAPER_ONLY = {"quick": {"zoo_ood"}, "paper": set()}


@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_profiles_list_every_beyond_experiment(profile):
    prof = load_profile(profile)
    expected = set(BEYOND) - PAPER_ONLY[profile]
    assert expected <= set(prof.experiments)
    for exp in expected:
        runs = load_sweep(prof.sweep_file(exp)).runs()
        assert runs, exp
    assert {"signed", "heads", "zoo", "precision", "probe", "bound_curve"} <= {e.name for e in BUILTIN if e.step}
    from kernelgap.models import FEATURE_MAPS

    # every map reaches the zoo: trained by it, or by a sweep its summary pools
    pooled = [
        r
        for e in BUILTIN
        if "witness" in e.pools
        for r in load_sweep(prof.sweep_file(e.name)).runs()
        if r.model.kind == "kernel" and r.model.heads == 1 and r.family.name == "witness"
    ]
    assert {r.model.feature_map for r in pooled} == set(FEATURE_MAPS)
    heads = load_sweep(prof.sweep_file("heads")).runs()
    assert {r.model.heads for r in heads} == ({1, 2, 4, 8} if profile == "paper" else {2})
    # two-level families (witness, Hadamard) and ones whose queries see more levels (cw, ladder)
    assert {"witness", "hadamard", "cw", "ladder"} <= {r.family.name for r in heads}


def test_paper_zoo_reaches_64():
    runs = load_sweep(load_profile("paper").sweep_file("zoo")).runs()
    assert max(r.model.rank for r in runs) == 64


def test_a_section_is_built_as_its_model_and_refuses_what_it_does_not_name(tmp_path):
    """A step file that breaks its section's model is one line naming the key; a section
    written from its model keeps each value as given (an int in a number field stays one)."""
    from kernelgap.errors import KernelgapError

    transcript = {"answers": 16, "values": 2, "bits_needed": 16, "bits_needed_ceil": 16}
    data = {"bits": [2], "quantizers": ["uniform"], "transcript": transcript, "models": []}
    (tmp_path / "precision").mkdir()
    (tmp_path / "precision" / "quantized.json").write_text(json.dumps(data))
    assert sections(tmp_path)["precision"]["transcript"]["bits_needed"] == 16
    assert type(sections(tmp_path)["precision"]["transcript"]["bits_needed"]) is int
    data["transcript"] = {**transcript, "bits": 3}
    (tmp_path / "precision" / "quantized.json").write_text(json.dumps(data))
    with pytest.raises(KernelgapError) as caught:
        build_sections(tmp_path)
    assert str(caught.value) == (
        "summary.json cannot be built: PrecisionSection.transcript.bits: extra inputs are not permitted, got 3"
    )
