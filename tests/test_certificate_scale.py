"""The length-N certificate at scale (docs/theory.md, "The whole set by rule"): the least-gap rule
against the pair matrices and an independent brute force, the sub-word distance test, the
vectorised layer generator, the sub-family fallback and the JSON of a certificate by rule."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgap.errors import FamilyError
from kernelgap.task import ProductFamily, build_family
from kernelgap.task.codes import check_constant_weight, min_distance, shared_subword
from kernelgap.task.families.layer import class_sizes, layer_words, unpack_words
from kernelgap.task.family import unique_rows
from kernelgap.task.registry import check_params
from kernelgap.theory import certificate as cert_module
from kernelgap.theory import least_gap as rule_module
from kernelgap.theory.certificate import certify, first_entries
from kernelgap.theory.least_gap import complement_shape, least_gap
from kernelgap.theory.text import describe_certificate

HALF = Fraction(1, 2)


# -- held-out codes and families, built here -------------------------------------------------


def random_code(rng, m: int, w: int, n: int) -> np.ndarray:
    """Up to n distinct random words of weight w (no distance condition)."""
    seen, rows = set(), []
    for _ in range(20 * n):
        support = tuple(sorted(rng.choice(m, w, replace=False).tolist()))
        if support not in seen:
            seen.add(support)
            row = np.zeros(m, np.uint8)
            row[list(support)] = 1
            rows.append(row)
            if len(rows) == n:
                break
    return np.array(rows, dtype=np.uint8)


def class_code(m: int, w: int, residue: int, n: int | None = None) -> np.ndarray:
    """A Graham–Sloane class by brute force (itertools, in lexicographic order)."""
    rows = []
    for support in itertools.combinations(range(m), w):
        if sum(support) % m == residue:
            row = np.zeros(m, np.uint8)
            row[list(support)] = 1
            rows.append(row)
            if n is not None and len(rows) == n:
                break
    return np.array(rows, dtype=np.uint8)


def complement_family(code, length, position=1, seed=None) -> ProductFamily:
    """Queries ``code``, each good candidate its complement, the candidates exactly the goods; with
    ``seed`` the token ids are shuffled."""
    n = len(code)
    tokens, inverse = unique_rows(np.concatenate([code, 1 - code]))
    if seed is not None:
        perm = np.random.default_rng(seed).permutation(len(tokens))
        tokens = tokens[np.argsort(perm)]  # token t moves to id perm[t]
        inverse = perm[inverse]
    q, g = inverse[:n], inverse[n:]
    return ProductFamily(tokens, q, g, position, list(zip(q.tolist(), g.tolist())), "held-out", {}, length)


# -- an independent brute force: all pairs, ρ_N by Fraction, the Radon level by its definition ---


def brute_rho(gap: int, delta: Fraction, length: int) -> Fraction:
    return 2 * delta / ((length - 2) * (gap - 2 * delta))


def brute_eps(code: np.ndarray, delta: Fraction, length: int) -> dict:
    """``ε[i, j]`` (None: unbounded) for the complement family of ``code``: the best chain over the
    levels query i sees (its good at 0, query j's complement at w − <x_i, x_j>)."""
    n, w = len(code), int(code[0].sum())
    levels = w - code.astype(int) @ code.T.astype(int)
    least = math.floor(2 * delta) + 1
    eps = {}
    for i in range(n):
        best = {0: Fraction(1)}
        for level in sorted(set(levels[i].tolist()) - {0}):
            steps = [best[b] * brute_rho(level - b, delta, length) for b in best if level - b >= least]
            if steps:
                best[level] = min(steps)
        for j in range(n):
            if j != i:
                eps[i, j] = best.get(int(levels[i, j]))
    for i in range(n):  # bounded: a chain with R ≤ 1 in an anchored row
        row = [eps[i, j] for j in range(n) if j != i]
        anchored = any(e is not None and (e < 1 or (delta == HALF and e <= 1)) for e in row)
        for j in range(n):
            if j != i and (eps[i, j] is None or eps[i, j] > 1 or not anchored):
                eps[i, j] = None
    return eps


def qualifies(p: Fraction, r: int, strict: bool) -> bool:
    return p <= Fraction(1, r) if strict else p < Fraction(1, r)


def brute_radon(code: np.ndarray, delta: Fraction, length: int, clique_limit: int = 12):
    """``(rank or None, whole set, largest product)``: rank is the largest r + 1 with r + 1 queries
    whose pairs all qualify at r (exhaustive up to ``clique_limit`` queries, else None)."""
    n = len(code)
    eps = brute_eps(code, delta, length)
    strict = delta == HALF
    product = {}
    for i, j in itertools.combinations(range(n), 2):
        a, b = eps[i, j], eps[j, i]
        product[i, j] = None if a is None or b is None else a * b
    usable = [p for p in product.values() if p is not None]
    largest = max(usable) if len(usable) == len(product) else None
    whole = largest is not None and qualifies(largest, n - 1, strict)
    if n > clique_limit:
        return (n if whole else None), whole, largest
    for r in range(n - 1, 0, -1):
        for group in itertools.combinations(range(n), r + 1):
            pairs = [product[p] for p in itertools.combinations(group, 2)]
            if all(p is not None and qualifies(p, r, strict) for p in pairs):
                return r + 1, whole, largest
    return 1, whole, largest


# -- the sub-word distance test -----------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(st.integers(4, 14), st.data(), st.integers(0, 2**32 - 1))
def test_shared_subwords_and_min_distance_equal_brute_force(m, data, seed):
    w = data.draw(st.integers(1, m - 1))
    n = data.draw(st.integers(2, 30))
    code = random_code(np.random.default_rng(seed), m, w, n)
    if len(code) < 2:
        return
    overlap = code.astype(int) @ code.T.astype(int)
    np.fill_diagonal(overlap, -1)
    distance = 2 * (w - overlap.max())
    for removed in range(w + 1):
        found = shared_subword(code, w, removed)
        assert (found is not None) == (overlap.max() >= w - removed)
        if found is not None:
            i, j = found
            assert i != j and overlap[i, j] >= w - removed
    sample = data.draw(st.integers(1, len(code)))
    d, exact, pair = min_distance(code, w, sample=sample)
    assert exact and d == distance and 2 * (w - overlap[pair]) == distance
    d, exact, _ = min_distance(code, w, sample=1, max_keys=data.draw(st.integers(0, 4 * len(code))))
    assert d <= distance and (d == distance or not exact)


def test_the_large_code_check_catches_what_the_gram_check_does(monkeypatch):
    """Past GRAM_WORDS the check sorts sub-word keys: same verdicts as all overlaps."""
    from kernelgap.task import codes

    rng = np.random.default_rng(3)
    for _ in range(25):
        m = int(rng.integers(6, 16))
        w = int(rng.integers(2, m - 1))
        code = random_code(rng, m, w, int(rng.integers(3, 40)))
        overlap = code.astype(int) @ code.T.astype(int)
        np.fill_diagonal(overlap, -1)
        for cap in range(w):
            verdicts = []
            for limit in (10**6, 1):
                monkeypatch.setattr(codes, "GRAM_WORDS", limit)
                try:
                    check_constant_weight(code, w, cap)
                    verdicts.append(True)
                except AssertionError:
                    verdicts.append(False)
            assert verdicts == [overlap.max() <= cap] * 2
    monkeypatch.setattr(codes, "GRAM_WORDS", 1)
    with pytest.raises(AssertionError, match="weight"):
        check_constant_weight(np.array([[1, 1, 0], [1, 0, 0]], np.uint8), 2, 0)
    with pytest.raises(AssertionError, match="words 0 and 2"):
        check_constant_weight(np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 0, 0]], np.uint8), 2, 1)


# -- the vectorised layer generator -------------------------------------------------------------


def test_layer_words_equal_the_itertools_enumeration():
    """Every (m ≤ 12, w, residue — all of them up to m = 10 — or the whole layer, prefix length): the
    same words, in order."""
    for m in range(2, 13):
        for w in range(1, m):
            layer = list(itertools.combinations(range(m), w))  # the slow reference, in lexicographic order
            sums = [sum(s) % m for s in layer]
            for residue in [None, *(range(m) if m <= 10 else (0, 1, m // 2, m - 1))]:
                want = [s for s, a in zip(layer, sums) if residue is None or a == residue]
                for count in sorted({1, len(want) // 3 + 1, len(want) + 5}):
                    got = unpack_words(layer_words(m, w, residue, count), m)
                    ref = np.zeros((min(count, len(want)), m), np.uint8)
                    for k, support in enumerate(want[:count]):
                        ref[k, list(support)] = 1
                    assert np.array_equal(got, ref), (m, w, residue, count)
    assert len(layer_words(28, 14, 0, 1000)) == 1000  # a prefix of a large class, no scan


def test_layer_classes_of_every_residue_and_the_limits():
    for m, w in [(10, 5), (12, 4), (14, 7)]:
        for a, size in enumerate(class_sizes(m, w)):
            fam = build_family("layer", m=m, w=w, residue=a) if m < 14 or a < 3 else None
            if fam is not None:
                assert np.array_equal(fam.tokens[[q for q, _ in fam.matching]], class_code(m, w, a))
                assert len(fam.matching) == size
    full = check_params("layer", {"m": 28, "length": 1200})  # 1,432,860 words: accepted
    assert full["m"] == 28
    with pytest.raises(FamilyError, match="at most 33,554,432 are built"):
        check_params("layer", {"m": 28, "distance": 2})
    assert check_params("layer", {"m": 28, "distance": 2, "n": 5})["n"] == 5


# -- the rule against the pair matrices and the brute force ---------------------------------------


def _agree(family, delta):
    fast, slow = certify(family, delta, rule=True), certify(family, delta, rule=False)
    assert (fast.certified_rank, fast.method, fast.radon.whole_set) == (
        slow.certified_rank,
        slow.method,
        slow.radon.whole_set,
    )
    if slow.radon.whole_set:
        assert fast.radon.by_rule and fast.radon.max_product == slow.radon.max_product
        assert fast.trace.skipped and fast.radon.rank == len(family.matching)
    return fast, slow


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(6, 12),
    st.data(),
    st.integers(0, 2**32 - 1),
    st.sampled_from([HALF, Fraction(2, 5), Fraction(1, 3)]),
    st.booleans(),
)
def test_rule_and_pair_matrices_agree_on_random_codes(m, data, seed, delta, shuffle):
    w = data.draw(st.integers(2, m - 2))
    n = data.draw(st.integers(2, 12))
    length = data.draw(st.integers(3, 14))
    position = data.draw(st.integers(1, length))
    code = random_code(np.random.default_rng(seed), m, w, n)
    if len(code) < 2:
        return
    family = complement_family(code, length, position, seed if shuffle else None)
    fast, slow = _agree(family, delta)
    rank, whole, largest = brute_radon(code, delta, length)
    assert slow.radon.rank == rank and slow.radon.whole_set == whole
    if whole:
        assert fast.radon.max_product == largest and fast.certified_rank == len(code)


@pytest.mark.parametrize("m, w", [(8, 4), (10, 5), (12, 6), (10, 3)])
def test_rule_equals_brute_force_around_the_threshold(m, w):
    """Graham–Sloane classes of several residues (brute-force codes) at lengths around √(n − 1) + 2."""
    for residue in (0, 1, m // 2):
        code = class_code(m, w, residue)
        n = len(code)
        if n < 2:
            continue
        edge = math.isqrt(n - 1) + 2
        for length in sorted({max(3, edge - 2), max(3, edge - 1), edge, edge + 1}):
            for delta in (HALF, Fraction(2, 5)):
                family = complement_family(code, length, seed=residue)
                rank, whole, largest = brute_radon(code, delta, length, clique_limit=10)
                gap = least_gap(complement_shape(family), delta, length)
                assert gap.whole_set == whole and (gap.product == largest if whole else True)
                if n <= 60:
                    fast, slow = _agree(family, delta)
                    assert (slow.certified_rank == n) == whole or slow.method == "trace"
                    if rank is not None:
                        assert slow.radon.rank == rank
                else:
                    fast = certify(family, delta, rule=True)
                assert fast.radon.whole_set == whole
                if whole:
                    assert fast.certified_rank == n and fast.radon.max_product == largest


def test_the_layer_family_thresholds_by_rule():
    """The documented thresholds (docs/theory.md, "The layer family"), now by rule."""
    for m, length, expect, below in [(12, 11, 80, 65), (16, 31, 810, 785)]:
        family = build_family("layer", m=m, length=length)
        got = certify(family, rule=True)
        assert got.certified_rank == expect and got.radon.by_rule and got.radon.whole_set
        assert certify(build_family("layer", m=m, length=length - 1), rule=True).certified_rank == below
    whole = certify(build_family("layer", m=12, distance=2, length=124), "2/5", rule=True)
    assert whole.certified_rank == 924 and whole.radon.max_product == Fraction(4, 3721)


def test_a_capped_distance_search_is_a_sound_lower_bound(monkeypatch):
    from kernelgap.task import codes

    code = class_code(12, 6, 0)
    family = complement_family(code, 11)
    shape = complement_shape(family)
    exact = least_gap(shape, HALF, 11)
    assert exact.exact and exact.distance == 4
    assert rule_module.min_distance(shape.code, shape.weight, max_keys=0, sample=1)[:2] == (0, False)
    assert rule_module.min_distance(shape.code, shape.weight, max_keys=len(code), sample=1)[:2] == (2, False)
    monkeypatch.setattr(codes, "GRAM_WORDS", 8)  # the first 8 words give the upper bound
    capped = least_gap(shape, HALF, 11, max_keys=len(code))  # removed = 0 only: d ≥ 2
    assert not capped.exact and capped.distance == 2 and capped.level == 0 and capped.rank == 1
    assert least_gap(shape, HALF, 11).exact  # uncapped, the sub-word test finds d = 4
    monkeypatch.setattr(rule_module, "min_distance", lambda c, w, max_keys=None: (4, False, None))
    data = certify(family, rule=True).to_json()  # a proven bound, not the exact least distance
    radon = data["bounds"]["radon"]
    assert data["certified_rank"] == 76 and radon["max_product"] is None and radon["max_product_bound"] == "1/81"
    assert data["weakest_pair"] is None and not data["rule"]["min_distance_exact"]
    assert "least distance is at least 4" in "\n".join(describe_certificate(data))


def test_complement_shape_is_read_from_the_tokens():
    code = class_code(10, 5, 0)
    family = complement_family(code, 5)
    assert complement_shape(family) is not None
    extra = ProductFamily(
        np.concatenate([family.tokens, np.zeros((1, 10), np.uint8)]),
        family.queries,
        np.append(family.candidates, len(family.tokens)),
        1,
        family.matching,
        "extra",
        {},
        5,
    )
    assert complement_shape(extra) is None
    with pytest.raises(FamilyError, match="not of complement shape"):
        certify(extra, rule=True)
    mixed = complement_family(np.concatenate([code[:3], random_code(np.random.default_rng(0), 10, 4, 2)]), 5)
    assert complement_shape(mixed) is None
    swapped = ProductFamily(family.tokens, family.queries, family.candidates, 1, family.matching[::-1], "s", {}, 5)
    assert complement_shape(swapped) is not None  # entry order is free
    q0, g0 = family.matching[0]
    q1, g1 = family.matching[1]
    crossed = [(q0, g1), (q1, g0), *family.matching[2:]]
    assert complement_shape(ProductFamily(family.tokens, family.queries, family.candidates, 1, crossed)) is None


# -- the sub-family fallback and the JSON ----------------------------------------------------------


def test_below_the_whole_set_a_sub_family_is_certified(monkeypatch):
    monkeypatch.setattr(cert_module, "DENSE_QUERIES", 30)
    family = build_family("layer", m=12, length=7)  # 80 queries; (N − 2)² = 25 < 79
    got = certify(family)
    assert got.rule is not None and got.subfamily == {**got.subfamily, "queries": 30, "of": 80}
    sub = certify(first_entries(family, 30), rule=False)
    rule_rank = got.rule.rank
    assert rule_rank == 26  # ρ_7(2)² = 1/25: any 26 queries
    assert got.certified_rank == max(rule_rank, sub.certified_rank)
    assert got.certified_rank <= certify(family, rule=False).certified_rank  # never above the pair matrices
    data = got.to_json()
    assert data["subfamily"]["queries"] == 30 and data["comparisons"] is None and data["comparisons_at_least"] > 0
    lines = describe_certificate(data)
    assert any(line.startswith("sub-family: the first 30 of the 80") for line in lines)
    assert any("trace bound (sub-family)" in line for line in lines)


def test_json_of_a_whole_set_by_rule(monkeypatch, cli):
    monkeypatch.setattr(cert_module, "DENSE_QUERIES", 50)
    monkeypatch.setattr(cert_module, "LISTED_MEMBERS", 50)
    code, out, err = cli("certify", "--family", "layer", "-p", "m=12", "-p", "length=11", "--json")
    assert code == 0, err
    data = json.loads(out)
    radon, trace = data["bounds"]["radon"], data["bounds"]["trace"]
    assert data["certified_rank"] == 80 and data["method"] == "radon"
    assert radon["members"] == "all" and radon["count"] == 80 and radon["queries"] is None
    assert radon["by_rule"] and radon["whole_set"] and radon["max_product"] == "1/81"
    assert trace["skipped"] and trace["rank"] is None and data["bound"] is None and data["queries"] is None
    assert data["rule"]["min_distance"] == 4 and data["rule"]["min_distance_exact"] and data["rule"]["eps"] == "1/9"
    assert data["weakest_pair"]["eps"] == "1/9" and data["weakest_pair"]["s_bad"] == 2
    code, out, err = cli("certify", "--family", "layer", "-p", "m=12", "-p", "length=11")
    assert code == 0, err
    assert "Radon bound by rule" in out and "all 80 queries, r ≥ 80" in out and "trace bound: skipped" in out
    assert "r ≥ 80" in out.splitlines()[3]
    monkeypatch.setattr(cert_module, "LISTED_MEMBERS", 4096)
    small = certify(build_family("layer", m=12, length=11), rule=True).to_json()
    assert len(small["bounds"]["radon"]["queries"]) == 80


def test_m20_at_length_99_by_rule(cli):
    """The first size the pair matrices found slow (31 s, 5 GB): now by rule."""
    code, out, err = cli("certify", "--family", "layer", "-p", "m=20", "-p", "length=99", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["certified_rank"] == 9252 and data["bounds"]["radon"]["by_rule"]
    assert data["bounds"]["radon"]["max_product"] == "1/9409" and data["rule"]["level"] == 9251


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-2, 9), st.integers(-2, 9)), max_size=8))
def test_vectorised_matching_check_equals_the_loop(pairs):
    """The fast path of the matching check keeps the loop's result and its first error message."""
    from kernelgap.task.family_checks import matching_pairs

    def run(value):
        try:
            return matching_pairs(value, 8)
        except FamilyError as exc:
            return str(exc)

    loop = run(iter(pairs))  # an iterator always takes the loop
    assert run(pairs) == loop and run(np.array(pairs, dtype=np.int64).reshape(-1, 2)) == loop
