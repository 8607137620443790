"""Context length N (docs/theory.md, "Context length N"): gap domination ρ_N, product and
sequence families of length N, the layer family and the whole-set Radon test."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgap.errors import FamilyError
from kernelgap.task import Family, ProductFamily, build_family, family_from_json, family_to_json
from kernelgap.task.families.layer import class_sizes, layer_code
from kernelgap.theory import radon
from kernelgap.theory.certificate import certify
from kernelgap.theory.chains import chain_pair_bounds
from kernelgap.theory.levels import level_pair_bounds, split_length
from kernelgap.theory.pair_bounds import finish_pair_bounds, log_rho, min_gap, rho

HALF = Fraction(1, 2)
DELTAS = [HALF, Fraction(2, 5), Fraction(1, 3), Fraction(1, 4), Fraction(1, 7), Fraction(49, 100)]


# -- ρ_N -------------------------------------------------------------------------------------


def _errors(n, gap, A, U, mg, ug, mc, uc):
    """Signed errors of the N + 1 sequences of one comparison (s_g = 0, s_c = gap), written out
    from the model: self weight A and value U, per-slot weights and values of g and c."""
    slots = range(n - 1)
    out = []
    for j in slots:  # g in slot j, c elsewhere: target s_g = 0
        w = [mg[j] if k == j else mc[k] for k in slots]
        v = [ug[j] if k == j else uc[k] for k in slots]
        out.append((A * U + sum(a * b for a, b in zip(w, v))) / (A + sum(w)) - 0)
    out.append((A * U + sum(a * b for a, b in zip(mg, ug))) / (A + sum(mg)) - 0)
    out.append((A * U + sum(a * b for a, b in zip(mc, uc))) / (A + sum(mc)) - gap)
    return out


def test_rho_n_is_exact_and_reduces_to_length_3():
    for delta in DELTAS + [Fraction(1, 10**40)]:
        for g in range(min_gap(delta), 8):
            assert rho(g, delta) == rho(g, delta, 3) == 2 * delta / (g - 2 * delta)
            for n in (4, 5, 11, 124, 10**30):
                assert rho(g, delta, n) == rho(g, delta) / (n - 2)
                assert math.isclose(log_rho([g], delta, n)[0], math.log(rho(g, delta) / (n - 2)), rel_tol=1e-12)
    assert rho(2, HALF, 11) == Fraction(1, 9) and rho(1, Fraction(2, 5), 124) == Fraction(2, 61)
    with pytest.raises(ValueError):
        rho(2, HALF, 2)


@pytest.mark.parametrize("n", [3, 4, 5, 7])
def test_rho_n_bounds_every_model_brute_force(n):
    """Random models (exact rationals, position-dependent weights and values): with e the
    largest |error| over the N + 1 sequences, every one with gap > 2e has M(c)/M(g) ≤ ρ_N(gap, e)."""
    rng = np.random.default_rng(n)
    checked = 0
    for _ in range(3000):
        gap = int(rng.integers(2, 8))
        frac = lambda hi: Fraction(int(rng.integers(0, 1000)), 1000) * hi  # noqa: E731
        A = frac(Fraction(1, 4)) if rng.random() < 0.5 else Fraction(0)
        mg = [frac(1) + Fraction(1, 10**6) for _ in range(n - 1)]
        mc = [frac(Fraction(2, n - 2) if rng.random() < 0.8 else 3) for _ in range(n - 1)]
        # values near the targets, so that some models are nearly exact
        U = frac(gap)
        ug = [frac(Fraction(1, 2)) - Fraction(1, 4) for _ in range(n - 1)]
        uc = [gap + frac(Fraction(1, 2)) - Fraction(1, 4) for _ in range(n - 1)]
        if rng.random() < 0.5:  # a perturbation of the attaining model (below): near the boundary
            d, r = Fraction(1, 4), rho(gap, Fraction(1, 4), n)
            jitter = lambda: Fraction(int(rng.integers(-50, 51)), 10**4)  # noqa: E731
            A, U = max(Fraction(0), jitter()), jitter()
            mg = [1 + jitter() for _ in range(n - 1)]
            mc = [max(Fraction(0), r + jitter()) for _ in range(n - 1)]
            ug = [-d + jitter() for _ in range(n - 1)]
            uc = [gap - d + jitter() for _ in range(n - 1)]
        e = max(abs(x) for x in _errors(n, gap, A, U, mg, ug, mc, uc))
        if gap > 2 * e and e > 0:
            checked += 1
            assert (A + sum(mc)) / (A + sum(mg)) <= rho(gap, e, n)
    assert checked > 1000


@pytest.mark.parametrize("n", [3, 4, 6, 11])
def test_rho_n_is_attained(n):
    """A = 0, equal slots: errors +δ on every S_j and −δ on the all-g and all-c sequences, and
    M(c)/M(g) = ρ_N exactly: the bound cannot be improved."""
    for delta in (HALF, Fraction(2, 5), Fraction(1, 7)):
        for gap in range(min_gap(delta), 5):
            r = rho(gap, delta, n)
            mgs = [Fraction(1)] * (n - 1)
            mcs = [r] * (n - 1)
            errs = _errors(n, gap, Fraction(0), Fraction(0), mgs, [-delta] * (n - 1), mcs, [gap - delta] * (n - 1))
            assert errs[:-2] == [delta] * (n - 1) and errs[-2:] == [-delta, -delta]
            assert sum(mcs) / sum(mgs) == r


def test_rho_n_identity():
    """Σ E(S_j) − E(all-g) − (N − 2)E(all-c) = (N − 2)·gap·M(c): every value term cancels."""
    rng = np.random.default_rng(0)
    for n in (3, 4, 5, 9):
        for _ in range(50):
            r = lambda: Fraction(int(rng.integers(1, 100)), int(rng.integers(1, 100)))  # noqa: E731
            sg, gap = r(), int(rng.integers(1, 5))
            A, U = r(), r()
            mg, ug, mc, uc = ([r() for _ in range(n - 1)] for _ in range(4))
            slots = range(n - 1)

            def E(w, v, t, A=A, U=U):
                return A * (U - t) + sum(a * (b - t) for a, b in zip(w, v))

            total = sum(
                E([mg[j] if k == j else mc[k] for k in slots], [ug[j] if k == j else uc[k] for k in slots], sg)
                for j in slots
            )
            total -= E(mg, ug, sg) + (n - 2) * E(mc, uc, sg + gap)
            assert total == (n - 2) * gap * (A + sum(mc))


def test_split_length_for_every_length():
    """Both gaps ≥ T(δ, N): splitting never hurts; T is the least integer with the exact test."""
    for delta in DELTAS:
        for n in (3, 4, 5, 6, 11, 100):
            t = split_length(delta, n)
            assert t >= min_gap(delta)
            for g1 in range(t, t + 12):
                for g2 in range(t, t + 12):
                    assert rho(g1, delta, n) * rho(g2, delta, n) <= rho(g1 + g2, delta, n)
            k = n - 2
            real = 2 * float(delta) + 2 * float(delta) * (1 + math.sqrt(k + 1)) / k
            assert t - 1 < max(real, min_gap(delta)) + 1e-12
            assert t <= split_length(delta, 3)


# -- families of length N ----------------------------------------------------------------------


def test_product_length_field_count_and_file():
    tok = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 1, 1], [1, 0, 1, 0]], dtype=np.uint8)
    fam = ProductFamily(tok, [0, 3], [1, 2], 2, [(0, 1)], "p", {}, 5)
    assert fam.length == 5 and len(fam) == fam.sequence_count == 2 * 2**4
    seqs = fam.expand()
    assert seqs.length == 5 and len(seqs) == 32 and (seqs.index[:, 1] == np.repeat([0, 3], 16)).all()
    assert len(np.unique(seqs.index, axis=0)) == 32
    data = family_to_json(fam)
    assert data["length"] == 5
    again = family_from_json(data)
    assert isinstance(again, ProductFamily) and again.length == 5 and again.query_position == 2
    assert "length" not in family_to_json(ProductFamily(tok, [0], [1, 2], 1, [(0, 1)]))
    for bad in (2, 0, True, "4", 1 << 17):
        with pytest.raises(FamilyError, match="length"):
            family_from_json({**data, "length": bad})
        with pytest.raises(FamilyError, match="length"):
            ProductFamily(tok, [0], [1, 2], 1, [(0, 1)], length=bad)
    with pytest.raises(FamilyError, match="query_position"):
        family_from_json({**data, "length": 3, "query_position": 4})
    with pytest.raises(FamilyError, match="length"):
        fam.length = 2
    assert fam.length == 5
    huge = ProductFamily(tok, [0], [1, 2], 1, [(0, 1)], length=200)
    assert huge.sequence_count == 2**199
    with pytest.raises(FamilyError, match="sequence_count"):
        len(huge)
    with pytest.raises(FamilyError, match=r"at most .* are expanded"):
        huge.expand()
    cert = certify(huge)
    assert cert.to_json()["sequences"] == 2**199 and cert.to_json()["length"] == 200


def _random_product(rng, n_len):
    m = int(rng.integers(3, 9))
    nq = int(rng.integers(1, 4))
    queries = (rng.random((nq, m)) < 0.5).astype(np.uint8)
    goods = np.where(rng.random((nq, 1)) < 0.7, 1 - queries, rng.random((nq, m)) < 0.4).astype(np.uint8)
    extra = (rng.random((int(rng.integers(0, 3)), m)) < 0.5).astype(np.uint8)
    tokens, inverse = np.unique(np.concatenate([queries, goods, extra]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    first = {}
    for q, g in zip(inverse[:nq].tolist(), inverse[nq : 2 * nq].tolist()):
        first.setdefault(q, g)
    return ProductFamily(
        tokens, inverse[:nq], inverse[nq:], int(rng.integers(1, n_len + 1)), list(first.items()), "rand", {}, n_len
    )


def _same(a, b):
    assert a.comparisons == b.comparisons
    assert (a.reason == b.reason).all() and (a.strict == b.strict).all()
    reached = a.eps_id >= 0
    assert (reached == (b.eps_id >= 0)).all()
    assert all(a.values[x] == b.values[y] for x, y in zip(a.eps_id[reached], b.eps_id[reached]))


def _brute_levels(family: ProductFamily, delta: Fraction):
    """Exact chains over every pair of present levels, in Fractions (no floats, no look-back)."""
    tok = family.tokens.astype(np.int64)
    n = len(family.matching)
    vid, values = np.full((n, n), -1), [Fraction(1)]
    comparisons = 0
    for i, (q, g) in enumerate(family.matching):
        s = tok[family.candidates] @ tok[q]
        present = sorted(set(s.tolist()))
        counts = {v: int((s == v).sum()) for v in present}
        comparisons += sum(counts[a] * counts[b] for a in present for b in present if b - a >= min_gap(delta))
        src = int(tok[g] @ tok[q])
        best = {src: Fraction(1)}
        for b in present:
            if b <= src:
                continue
            options = [best[a] * rho(b - a, delta, family.length) for a in best if b - a >= min_gap(delta)]
            if options:
                best[b] = min(options)
        for j, (_, gj) in enumerate(family.matching):
            level = int(tok[gj] @ tok[q])
            if level in best and level != src:
                values.append(best[level])
                vid[i, j] = len(values) - 1
    goods = np.array([g for _, g in family.matching])
    return finish_pair_bounds(vid, goods[:, None] == goods[None, :], values, delta, comparisons)


@pytest.mark.parametrize("n_len", [4, 5])
def test_product_of_length_n_equals_its_expansion_and_brute_force(n_len):
    rng = np.random.default_rng(n_len)
    for trial in range(25):
        fam = _random_product(rng, n_len)
        if fam.sequence_count > 20_000:
            continue
        delta = DELTAS[trial % len(DELTAS)]
        seqs = fam.expand()
        level = level_pair_bounds(fam, delta)
        _same(level, chain_pair_bounds(seqs, fam.query_position - 1, delta))
        _same(level, _brute_levels(fam, delta))
        if len(fam.candidates) >= 2:
            a, b = certify(fam, delta), certify(seqs, delta)
            assert (a.certified_rank, a.trace.bound, a.radon.rank) == (b.certified_rank, b.trace.bound, b.radon.rank)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.sampled_from([3, 4, 6, 9, 30]), st.sampled_from(DELTAS))
def test_level_search_at_length_n_equals_brute_force(seed, n_len, delta):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 30))
    nq = int(rng.integers(1, 5))
    queries = (rng.random((nq, m)) < 0.5).astype(np.uint8)
    goods = 1 - queries
    extra = (rng.random((int(rng.integers(0, 10)), m)) < rng.choice([0.2, 0.5, 0.8])).astype(np.uint8)
    tokens, inverse = np.unique(np.concatenate([queries, goods, extra]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    first = {}
    for q, g in zip(inverse[:nq].tolist(), inverse[nq : 2 * nq].tolist()):
        first.setdefault(q, g)
    fam = ProductFamily(tokens, inverse[:nq], inverse[nq:], 1, list(first.items()), length=n_len)
    _same(level_pair_bounds(fam, delta), _brute_levels(fam, delta))


def test_a_sequence_family_needs_every_slot():
    """Dropping one of the N + 1 sequences of a comparison removes it."""
    tok = np.array([[1, 1, 1, 0], [0, 0, 0, 1], [1, 1, 0, 1]], dtype=np.uint8)  # s = 0 and 2
    fam = ProductFamily(tok, [0], [1, 2], 1, [(0, 1)], length=4).expand()
    full = chain_pair_bounds(fam, 0, HALF)
    assert full.comparisons == 1
    for drop in range(len(fam)):
        row = fam.index[drop]
        kept = np.delete(np.arange(len(fam)), drop)
        part = Family(fam.tokens, fam.index[kept], 1, fam.matching)
        needed = len(set(row[1:].tolist())) == 1 or sorted(row[1:].tolist()).count(1) == 1
        assert chain_pair_bounds(part, 0, HALF).comparisons == (0 if needed else 1), row


def test_sequence_family_of_length_n_certifies_with_rho_n():
    """A witness-like family of length 5 listed as sequences: its ε is ρ_5 = ρ/3."""
    code = build_family("hadamard", m=8, n=3)
    queries = [q for q, _ in code.matching]
    cands = sorted({g for _, g in code.matching})
    prod = ProductFamily(code.tokens, queries, cands, 1, code.matching, length=5)
    cert = certify(prod.expand())
    assert cert.weakest_pair["eps"] == "1/3" and cert.to_json()["length"] == 5  # ρ_5(2, 1/2) = 1/3
    assert cert.certified_rank == certify(prod).certified_rank == 3


def test_short_families_are_refused():
    f = build_family("hadamard", m=8, n=3)
    with pytest.raises(FamilyError, match="length-3 or longer"):
        certify(Family(f.tokens, f.index[:, :2], 1, f.matching))


# -- the layer family ---------------------------------------------------------------------------


def test_graham_sloane_classes():
    assert max(class_sizes(12, 6)) == 80 and max(class_sizes(16, 8)) == 810
    assert sum(class_sizes(12, 6)) == math.comb(12, 6)
    for m, w in ((8, 4), (10, 3), (12, 6)):
        code, a = layer_code(m, w, 4, None, None)
        assert len(code) == max(class_sizes(m, w)) and a == int(np.argmax(class_sizes(m, w)))
        assert ((code * np.arange(m)).sum(1) % m == a).all()
        d = (code[:, None, :] != code[None, :, :]).sum(2)
        assert d[~np.eye(len(code), dtype=bool)].min() >= 4
        brute = sum(1 for s in __import__("itertools").combinations(range(m), w) if sum(s) % m == a)
        assert brute == len(code)


def test_layer_family_checks():
    fam = build_family("layer", m=12, length=11)
    assert isinstance(fam, ProductFamily) and fam.length == 11 and len(fam.queries) == 80
    assert fam.sequence_count == 80 * 80**10
    assert len(build_family("layer", m=12, n=7).queries) == 7
    assert len(build_family("layer", m=12, distance=2).queries) == 924
    for params, needle in [
        ({"m": 11}, "even"),
        ({"distance": 3}, "distance"),
        ({"n": 81}, "81"),
        ({"residue": 12}, "residue"),
        ({"distance": 2, "residue": 1}, "residue"),
        ({"length": 3, "query_position": 4}, "query_position"),
        ({"w": 12}, "w must"),
        ({"length": 2}, "length"),
    ]:
        with pytest.raises(FamilyError, match=needle):
            build_family("layer", **params)


def _certify_cli(cli, *params, delta=None):
    args = ["certify", "--family", "layer", *sum((["-p", p] for p in params), []), "--json"]
    if delta:
        args += ["--delta", delta]
    code, out, err = cli(*args)
    assert code == 0, err
    return json.loads(out)


def test_layer_m12_certifies_all_80_at_length_11(cli):
    full = _certify_cli(cli, "m=12", "length=11")
    assert full["certified_rank"] == 80 and full["length"] == 11 and full["queries_total"] == 80
    assert full["method"] == "radon" and full["bounds"]["radon"]["whole_set"] is True
    assert full["bounds"]["radon"]["max_product"] == "1/81"  # ε = ρ_11(2, 1/2) = 1/9
    short = _certify_cli(cli, "m=12", "length=10")
    assert short["certified_rank"] < 80 and short["bounds"]["radon"]["whole_set"] is False


def test_layer_m16_certifies_all_810_at_length_31(cli):
    full = _certify_cli(cli, "m=16", "length=31")
    assert full["certified_rank"] == 810 and full["bounds"]["radon"]["whole_set"] is True
    assert _certify_cli(cli, "m=16", "length=30")["certified_rank"] < 810


def test_layer_whole_m12_at_delta_two_fifths_certifies_924_at_length_124(cli):
    full = _certify_cli(cli, "m=12", "distance=2", "length=124", delta="2/5")
    assert full["certified_rank"] == 924 and full["bounds"]["radon"]["whole_set"] is True
    assert full["bounds"]["radon"]["max_product"] == "4/3721"  # (ρ_124(1, 2/5) = 2/61)²


@pytest.mark.slow
def test_layer_whole_m12_falls_short_at_length_100(cli):
    assert _certify_cli(cli, "m=12", "distance=2", "length=100", delta="2/5")["certified_rank"] < 924


# -- the whole-set Radon test --------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, delta",
    [
        ({"m": 12, "length": 11}, HALF),
        ({"m": 12, "length": 10}, HALF),
        ({"m": 10, "length": 7}, HALF),
        ({"m": 10, "length": 9}, HALF),
        ({"m": 10, "distance": 2, "length": 60}, Fraction(2, 5)),
    ],
)
def test_whole_set_agrees_with_the_clique_search(monkeypatch, params, delta):
    fam = build_family("layer", **params)
    fast = certify(fam, delta)
    monkeypatch.setattr(radon, "whole_set_qualifies", lambda bounds: False)
    slow = certify(fam, delta)
    assert fast.radon.rank == slow.radon.rank and fast.radon.max_product == slow.radon.max_product
    assert fast.radon.whole_set == (fast.radon.rank == len(fam.matching))


def test_whole_set_strictness():
    """Below δ = 1/2 a pair with ε_ij ε_ji = 1/(n − 1) exactly does not qualify; at δ = 1/2 it does."""
    from kernelgap.theory.pair_bounds import PairBounds

    for strict, expect in ((True, True), (False, False)):
        eps = np.array([[0, 1], [1, 0]])
        b = PairBounds(
            eps,
            np.zeros((2, 2), np.int8),
            np.full((2, 2), strict) & ~np.eye(2, dtype=bool),
            [Fraction(1), Fraction(1)],
            1,
        )
        assert radon.whole_set_qualifies(b) is expect


def test_huge_counts_stay_readable(cli, tmp_path):
    from kernelgap.task.family import count_json, count_text

    assert count_json(2**100) == 2**100 and count_text(10**6) == "1,000,000"
    assert count_json(80 * 80**65535) == "about 10^124720" and count_text("about 10^5") == "about 10^5"
    code, out, err = cli(
        "family", "layer", "-p", "m=12", "-p", "length=65536", "--out", str(tmp_path / "f.json"), "--json"
    )
    assert code == 0, err
    assert json.loads(out)["sequences"] == "about 10^124720"
    code, out, err = cli("certify", str(tmp_path / "f.json"), "--json")
    assert code == 0, err
    assert json.loads(out)["certified_rank"] == 80 and json.loads(out)["length"] == 65536
