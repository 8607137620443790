"""The certificate: reference values, brute-force re-derivation, bad families, soundness."""

import json
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kernelgap.errors import FamilyError, KernelgapError
from kernelgap.models import KernelSpec, build_model
from kernelgap.rationals import parse_delta
from kernelgap.task import Family, build_family
from kernelgap.theory.certificate import certify, certify_at
from kernelgap.theory.certificate_json import CertificateJson, RadonJson
from kernelgap.theory.chains import chain_pair_bounds as pair_bounds
from kernelgap.theory.model_matrix import model_matrices
from kernelgap.theory.pair_bounds import NO_PATH, RATIO_ABOVE_ONE, UNANCHORED, rho
from kernelgap.theory.trace import certified_rank

HALF = Fraction(1, 2)


# -- reference values --------------------------------------------------------------


def test_rho_and_delta():
    assert rho(6, HALF) == Fraction(1, 5) and rho(2, HALF) == 1
    assert rho(1, Fraction(1, 4)) == 1 and rho(3, Fraction(2, 5)) == Fraction(4, 11)
    with pytest.raises(ValueError):
        rho(1, HALF)
    assert parse_delta("2/5") == Fraction(2, 5) and parse_delta("0.25") == Fraction(1, 4)
    for bad in ("0", "3/5", "x", "1/0"):
        with pytest.raises(KernelgapError):
            parse_delta(bad)


def test_strictness_rule():
    assert certified_rank(Fraction(10), True) == 11 and certified_rank(Fraction(10), False) == 10
    assert certified_rank(Fraction(21, 2), True) == 11 and certified_rank(Fraction(21, 2), False) == 11


def test_hadamard_24_first_16_direct():
    c = certify(build_family("hadamard", m=24, n=16))
    assert (c.queries, c.sum_eps2, c.bound, c.strict, c.trace.rank) == (16, Fraction(48, 5), 10, True, 11)
    assert c.weakest_pair["eps"] == "1/5" and c.unbounded_pairs == [] and c.comparisons == 240
    assert (c.radon.rank, c.radon.max_product, c.certified_rank, c.method) == (16, Fraction(1, 25), 16, "radon")


def test_hadamard_24_all_rows():
    c = certify(build_family("hadamard", m=24))
    assert (c.queries, c.sum_eps2, c.trace.rank) == (23, Fraction(506, 25), 13)
    assert c.radon.rank == c.certified_rank == 23 and c.radon.exact_search


def test_witness_preset_both_readings():
    for reading in ("first", "final"):
        c = certify(build_family("witness", reading=reading))
        assert (c.trace.rank, c.certified_rank) == (11, 16)
        assert c.query_position == (1 if reading == "first" else 3)


def test_delta_below_half_is_not_strict():
    c = certify(build_family("witness"), "2/5")  # ρ(6, 2/5) = 2/13
    assert c.sum_eps2 == 240 * Fraction(4, 169) and c.bound == Fraction(2704, 229)
    assert not c.strict and c.trace.rank == 12
    assert c.radon.max_product == Fraction(4, 169) and c.certified_rank == 16


def test_chains_amplify():
    direct = certify(build_family("hadamard", m=48))
    chained = certify(build_family("hadamard", m=48, chain_step=4))  # 0 → 4 → 8 → 12
    assert direct.weakest_pair["eps"] == "1/11" and chained.weakest_pair["eps"] == "1/27"
    assert (direct.trace.rank, chained.trace.rank) == (35, 45)
    assert direct.certified_rank == chained.certified_rank == 47


def test_cli_certify_witness_json(cli):
    code, out, _ = cli("certify", "--family", "witness", "--json")
    data = json.loads(out)
    assert code == 0 and data["certified_rank"] == 16 and data["method"] == "radon"
    assert (data["queries"], data["sequences"], data["delta"], data["bound"], data["sum_eps2"]) == (
        16,
        736,
        "1/2",
        "10/1",
        "48/5",
    )
    trace, radon = data["bounds"]["trace"], data["bounds"]["radon"]
    assert (trace["rank"], trace["bound"], trace["sum_eps2"]) == (11, "10/1", "48/5")
    assert (radon["rank"], radon["max_product"], radon["exact_search"]) == (16, "1/25", True)
    words = {"".join(map(str, t)) for t in build_family("witness").tokens}
    assert len(set(radon["queries"])) == 16 and set(radon["queries"]) <= words
    assert data["weakest_pair"]["eps"] == "1/5" and data["unbounded_pairs"] == []


def test_cli_family_file_then_certify(cli, tmp_path):
    path = str(tmp_path / "h.json")
    assert cli("family", "hadamard", "-p", "m=12", "--out", path)[0] == 0
    code, _, err = cli("family", "hadamard", "-p", "m=12", "--out", path)
    assert code == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    code, out, _ = cli("certify", path, "--delta", "1/2", "--json")
    assert code == 0 and json.loads(out)["certified_rank"] == 5  # 11 queries, ε = 1/2: Radon 5, trace 4
    code, out, _ = cli("certify", path)
    assert code == 0 and "r ≥ 5 (radon bound" in out and "r ≥ 4" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (("certify",), "either a family file"),
        (("certify", "--family", "witness", "--delta", "3/4"), "delta"),
        (("certify", "--family", "hadamard", "-p", "m=25"), "divisible by 4"),
        (("certify", "--family", "hadamard", "-p", "m"), "key=value"),
        (("certify", "/nonexistent.json"), "does not exist"),
    ],
)
def test_cli_errors_are_one_line(cli, args, message):
    code, _, err = cli(*args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


# -- bad families --------------------------------------------------------------------


def _witness_without(predicate, name="cut"):
    f = build_family("hadamard", m=12, n=4)
    keep = np.array([not predicate(f, row) for row in f.index])
    return f.subset(np.flatnonzero(keep), name)


def test_missing_mixed_order_is_reported_and_the_query_dropped():
    f = build_family("hadamard", m=12, n=4)
    (x0, g0), (_, g1) = f.matching[0], f.matching[1]
    cut = _witness_without(lambda fam, r: tuple(r) == (x0, g1, g0))
    c = certify(cut)
    bad = [p for p in c.unbounded_pairs]
    assert len(bad) == 1 and "no chain" in bad[0]["reason"]
    words = lambda i: "".join(map(str, f.tokens[i]))  # noqa: E731
    assert (bad[0]["query"], bad[0]["bad"]) == (words(x0), words(g1))
    assert c.queries == 3 and c.dropped_queries[0]["why"] == "has unbounded pairs"
    assert c.certified_rank == certify(build_family("hadamard", m=12, n=3)).certified_rank


def test_missing_good_duplicate_unanchors_the_row():
    f = build_family("hadamard", m=12, n=4)
    x0, g0 = f.matching[0]
    cut = _witness_without(lambda fam, r: tuple(r) == (x0, g0, g0))
    bounds = pair_bounds(cut, 0, HALF)
    assert (bounds.reason[0, 1:] == NO_PATH).all() and (bounds.reason[1:, 1:] == 0).all()
    assert certify(cut).queries == 3


def test_ratio_one_above_one_and_unanchored_rows():
    off = ~np.eye(3, dtype=bool)
    # δ = 1/2 and gap 2: ρ = 1, a strict bound, so the rows are anchored: ε = 1, r > 1.
    c = certify(build_family("hadamard", m=8, n=3))
    assert (c.sum_eps2, c.bound, c.strict, c.certified_rank) == (6, 1, True, 2)
    # δ = 1/4 and gap 1: ρ = 1 but not strict, K(x, g_x) > 0 is not proven.
    family = build_family("hadamard", m=4, n=3)
    assert (pair_bounds(family, 0, Fraction(1, 4)).reason[off] == UNANCHORED).all()
    c = certify(family, "1/4")
    assert (c.queries, c.certified_rank, len(c.unbounded_pairs)) == (1, 1, 6)
    assert "K(x, g_x) > 0" in c.unbounded_pairs[0]["reason"]
    # δ = 1/3 and gap 1: ρ = 2 > 1.
    assert (pair_bounds(family, 0, Fraction(1, 3)).reason[off] == RATIO_ABOVE_ONE).all()


def test_non_binary_length_and_matching_errors():
    f = build_family("hadamard", m=8, n=3)
    tokens = f.tokens.copy()
    tokens[0, 0] = 2
    with pytest.raises(FamilyError, match="non-binary"):
        certify(Family(tokens, f.index, 1, f.matching))
    with pytest.raises(FamilyError, match="length-3"):
        certify(Family(f.tokens, f.index[:, :2], 1, f.matching))
    with pytest.raises(FamilyError, match="no matching"):
        certify(Family(f.tokens, f.index, 1, []))


def test_cli_family_file_with_absent_good_candidate(cli, tmp_path):
    f = build_family("hadamard", m=8, n=3)
    data = {
        "m": 8,
        "query_position": 1,
        "sequences": [["".join(map(str, f.tokens[i])) for i in row] for row in f.index.tolist()],
        "matching": [["11110000", "00000000"]],
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    code, _, err = cli("certify", str(path))
    assert code == 2 and "appears in no sequence" in err and len(err.strip().splitlines()) == 1


def test_every_position_is_tried_when_all_are_scored():
    f = build_family("witness", reading="final")
    both = Family(f.tokens, f.index, None, f.matching, "all-scored")
    c = certify(both)
    assert c.query_position == 3 and c.certified_rank == 16


# -- brute force re-derivation (hypothesis) -------------------------------------------


def brute_ratio(family, qpos, delta, x, src, dst):
    """min over *all* comparison chains src → dst of Π ρ, in Fractions (None: no chain)."""
    others = [p for p in range(3) if p != qpos]
    seqs = {(r[qpos], r[others[0]], r[others[1]]) for r in family.index.tolist()}
    tok = family.tokens.astype(int)
    s = lambda c: int(tok[x] @ tok[c])  # noqa: E731
    cands = [c for c in range(len(tok)) if (x, c, c) in seqs]

    def walk(c):
        if c == dst:
            yield Fraction(1)
        for d in cands:
            g = s(d) - s(c)
            if g > 2 * delta and (x, c, d) in seqs and (x, d, c) in seqs and (x, c, c) in seqs:
                for rest in walk(d):
                    yield rho(g, delta) * rest

    values = list(walk(src))
    return min(values) if values else None


@st.composite
def small_families(draw):
    """Random queries, goods (often complements), extra candidates, a random subset of
    every (x; a, b), a random query position and δ."""
    m = draw(st.integers(4, 6))
    word = st.integers(0, 2**m - 1)
    n = draw(st.integers(2, 3))
    queries = draw(st.lists(word, min_size=n, max_size=n))
    goods = [q ^ (2**m - 1) if draw(st.integers(0, 3)) else draw(word) for q in queries]
    extras = draw(st.lists(word, max_size=2))
    extras += [(q ^ (2**m - 1)) | (q & draw(word)) for q in queries for _ in range(draw(st.integers(0, 3)))]
    pool = sorted(set(queries + goods + extras))
    tokens = ((np.array(pool)[:, None] >> np.arange(m)) & 1).astype(np.uint8)
    tid = {w: k for k, w in enumerate(pool)}
    cands = sorted({tid[w] for w in goods + extras})
    rows = np.array([(tid[q], a, b) for q in set(queries) for a in cands for b in cands])
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    rows = rows[rng.random(len(rows)) >= draw(st.sampled_from([0.0, 0.0, 0.05, 0.2]))]
    qpos = draw(st.integers(0, 2))
    index = np.zeros((max(len(rows), 1), 3), dtype=np.int64)
    index[: len(rows), [qpos] + [p for p in range(3) if p != qpos]] = rows
    delta = draw(st.sampled_from([HALF, Fraction(2, 5), Fraction(1, 3), Fraction(1, 4), Fraction(1, 8)]))
    # a family refuses a query matched twice and a pair that never meets (query at qpos,
    # good candidate elsewhere in the same sequence): keep the first entry of each query
    # among those that meet
    others = [p for p in range(3) if p != qpos]
    meets = {(r[qpos], r[o]) for r in index.tolist() for o in others}
    matching = list(
        {tid[q]: (tid[q], tid[g]) for q, g in reversed(list(zip(queries, goods))) if (tid[q], tid[g]) in meets}.values()
    )[::-1]
    return Family(tokens, index, qpos + 1, matching, "random"), qpos, delta


@settings(max_examples=200)
@given(small_families())
def test_certificate_matches_brute_force(case):
    family, qpos, delta = case
    bounds = pair_bounds(family, qpos, delta)
    match = family.matching
    n = len(match)
    brute = [
        [brute_ratio(family, qpos, delta, match[i][0], match[i][1], match[j][1]) for j in range(n)] for i in range(n)
    ]
    nonempty = lambda i, j: match[i][1] != match[j][1]  # noqa: E731
    anchored = [
        any(
            nonempty(i, j) and brute[i][j] is not None and (brute[i][j] < 1 or (delta == HALF and brute[i][j] <= 1))
            for j in range(n)
        )
        for i in range(n)
    ]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            r, reason = brute[i][j], bounds.reason[i, j]
            if r is None:
                assert reason == NO_PATH
                continue
            assert bounds.values[bounds.eps_id[i, j]] == r
            if r > 1:
                assert reason == RATIO_ABOVE_ONE
            else:
                assert reason == (0 if anchored[i] else UNANCHORED)
    cert = certify_at(family, qpos, delta)
    kept = cert.kept
    total = sum((brute[i][j] ** 2 for i in kept for j in kept if i != j), Fraction(0))
    assert all(brute[i][j] is not None and brute[i][j] <= 1 and anchored[i] for i in kept for j in kept if i != j)
    assert cert.sum_eps2 == total and cert.bound == Fraction(len(kept) ** 2) / (len(kept) + total)
    strict = delta == HALF and any(nonempty(i, j) for i in kept for j in kept if i != j)
    assert cert.strict == strict and cert.trace.rank == certified_rank(cert.bound, strict)


# -- soundness -------------------------------------------------------------------------


def _exact_rank_n_table_model(family):
    """A rank-n positive table model, exact on a disjoint-support cw witness family.

    φ_Q(x_i) = e_i + η·1, φ_K(g_j) = e_j, φ_K(x_i) = ν e_i, readout <x, z>:
    K(x_i, g_j) = δ_ij + η and the self weight is ν(1 + η), so every prediction is
    within ~1e-3 of its target.
    """
    n = len(family.matching)
    spec = KernelSpec(feature_map="table", rank=n, d_value=family.m, readout="linear")
    model = build_model(spec, family.m, 3, seeds=[0], vocabulary=family.tokens, dtype=torch.float64)
    eta, nu = 1e-4, 1e-9
    q_feat = np.full((len(family.tokens), n), 1e-300)
    k_feat = np.full((len(family.tokens), n), 1e-300)
    for i, (q, g) in enumerate(family.matching):
        q_feat[q] = eta
        q_feat[q, i] = 1 + eta
        k_feat[g, i] = 1.0
        k_feat[q, i] = nu
    scorer = model.scorer
    eye = torch.eye(family.m, dtype=torch.float64)
    with torch.no_grad():
        scorer.q_table.theta[0] = torch.from_numpy(np.log(q_feat))
        scorer.k_table.theta[0] = torch.from_numpy(np.log(k_feat))
        ro = model.readout
        ro.value.weight[:] = eye
        ro.read.weight[:] = eye
        for p in (ro.value.bias, ro.read.bias, ro.bias.weight, ro.bias.bias):
            p.zero_()
    return model


def _max_error(model, family):
    tokens = torch.as_tensor(family.tokens, dtype=torch.float64)
    with torch.no_grad():
        pred = model.predict(tokens, torch.as_tensor(family.index), [family.query_position - 1])
    return (pred[:, :, 0].numpy() - family.targets()[None, :, family.query_position - 1]).__abs__().max(axis=1)


def test_certificate_is_tight_against_an_exact_rank_n_construction():
    family = build_family("cw", m=16, weight=4, max_overlap=0, n=4, method="greedy")
    cert = certify(family)
    model = _exact_rank_n_table_model(family)
    assert _max_error(model, family)[0] < 0.01  # exact with 4 features ...
    assert cert.certified_rank <= 4  # ... so the certificate may not claim more
    assert cert.certified_rank == 4 and cert.bound == 3 and cert.strict and cert.radon.rank == 4
    (mat,) = model_matrices(model, family)
    assert mat.numerical_rank == 4 and mat.violations == 0 and mat.offdiag_max < 1e-3


def _train_table(family, ranks, steps=1500, lr=0.03):
    spec = KernelSpec(feature_map="table", rank=max(ranks), d_value=16, readout="mlp", hidden=32)
    model = build_model(
        spec, family.m, 3, seeds=list(range(len(ranks))), ranks=ranks, vocabulary=family.tokens, dtype=torch.float32
    )
    tokens = torch.as_tensor(family.tokens, dtype=torch.float32)
    index = torch.as_tensor(family.index)
    qp = family.query_position - 1
    target = torch.as_tensor(family.targets()[:, qp], dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for step in range(steps):
        err = model.predict(tokens, index, [qp])[:, :, 0] - target
        loss = (err**2).mean(1).sum() if step < steps // 2 else ((err**8).mean(1) ** 0.125).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        return model, (model.predict(tokens, index, [qp])[:, :, 0] - target).abs().max(1).values.numpy()


def test_no_trained_model_beats_the_certificate():
    family = build_family("hadamard", m=12)  # 11 queries, ε = 1/2: certified r ≥ 5 (Radon)
    cert = certify(family)
    assert cert.certified_rank == 5
    ranks = [1, 2, 3, 4, 5, 11, 16, 16]
    model, errors = _train_table(family, ranks)
    for rank, err in zip(ranks, errors):
        assert err >= 0.5 or rank >= cert.certified_rank, (rank, err)
    assert min(errors[-3:]) < 0.5, errors  # the test has teeth: some model is exact
    for mat in model_matrices(model, family):  # an exact model's B obeys B[x, y] ≤ ε(x, g_y)
        assert mat.numerical_rank <= ranks[mat.member]
        assert errors[mat.member] >= 0.5 or (mat.violations == 0 and mat.offdiag_max < 0.5)


def test_positive_2m_construction_is_exact_on_a_certified_family():
    from kernelgap.models.constructions import CONSTRUCTIONS

    family = build_family("hadamard", m=4)  # the construction needs all 2^m keys: small m
    model = CONSTRUCTIONS["positive_2m"](4, 3)
    assert _max_error(model, family)[0] < 0.5


def test_large_family_certifies():
    family = build_family("cw", m=32, weight=16, max_overlap=10, n=150)
    assert len(family) > 60_000
    cert = certify(family, budget_s=1)  # uneven ε: the trace bound wins here
    assert cert.queries == 150 and cert.certified_rank == cert.trace.rank > 30 and cert.method == "trace"


def test_the_certificate_json_is_its_model():
    """``to_json`` is :class:`CertificateJson`, field for field in the order written; a value
    of the wrong JSON type, or a key it does not name, is refused."""
    payload = certify(build_family("witness"), "1/4", 1).to_json()
    assert list(payload) == list(CertificateJson.model_fields)
    assert list(payload["bounds"]["radon"]) == list(RadonJson.model_fields)
    assert CertificateJson.model_validate(payload).model_dump() == payload
    for bad in ({"m": True}, {"certified_rank": "16"}, {"method": "both"}, {"extra": 1}):
        with pytest.raises(ValidationError):
            CertificateJson.model_validate({**payload, **bad})
