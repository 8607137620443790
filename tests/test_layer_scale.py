"""The layer family and the least-gap rule on packed words (docs/theory.md, "The whole set by
rule"): every fast path against the slow one it replaced (the sub-word test in passes, packing,
the layer code's check, its tokens and matching, the complement shape, the distinct-token test),
the matching held as an array, the members field of a certificate, and the refusals."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.errors import FamilyError
from kernelgap.task import ProductFamily, build_family, codes, packed
from kernelgap.task.codes import check_constant_weight, min_distance
from kernelgap.task.families.layer import check_layer_words, class_sizes, layer_packed, layer_words
from kernelgap.task.family import Family, unique_rows
from kernelgap.task.family_checks import PairList, distinct_tokens
from kernelgap.task.packed import PackedCode, pack_words, shared_subword, unpack_words
from kernelgap.theory.certificate import certify, certify_at
from kernelgap.theory.least_gap import complement_shape, least_gap
from kernelgap.theory.text import describe_certificate


def random_words(rng, m: int, w: int, n: int) -> np.ndarray:
    """n random words of weight w (repeats allowed), ``uint8 [n, m]``."""
    rows = np.zeros((n, m), np.uint8)
    for row in rows:
        row[rng.choice(m, w, replace=False)] = 1
    return rows


def brute_shared(code: np.ndarray, w: int, removed: int) -> bool:
    overlap = code.astype(int) @ code.T.astype(int)
    np.fill_diagonal(overlap, -1)
    return overlap.max() >= w - removed


# -- packing and the sub-word test in passes ---------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 64), st.integers(0, 40), st.integers(1, 7), st.integers(0, 2**32 - 1))
def test_pack_and_unpack_are_inverse_across_chunks(m, n, rows, seed):
    bits = np.random.default_rng(seed).integers(0, 2, (n, m), dtype=np.uint8)
    ref = np.array([int("".join(map(str, r)), 2) if m else 0 for r in bits.tolist()], dtype=np.uint64)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(packed, "PACK_ROWS", rows)
        ints = pack_words(bits)
        assert np.array_equal(ints, ref.reshape(-1)) and np.array_equal(unpack_words(ints, m), bits)


@settings(max_examples=80, deadline=None)
@given(st.integers(4, 14), st.data(), st.integers(0, 2**32 - 1), st.integers(1, 64))
def test_the_sub_word_test_in_passes_equals_brute_force(m, data, seed, chunk):
    """Any number of passes: the same verdict as all overlaps, and a true pair when one is found."""
    w = data.draw(st.integers(1, m - 1))
    code = random_words(np.random.default_rng(seed), m, w, data.draw(st.integers(2, 30)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(packed, "SUBWORD_CHUNK_KEYS", chunk)
        for removed in range(w + 1):
            found = shared_subword(PackedCode(pack_words(code), m), w, removed)
            assert (found is not None) == brute_shared(code, w, removed)
            if found is not None:
                i, j = found
                assert i != j and int(code[i].astype(int) @ code[j]) >= w - removed
        d, exact, pair = min_distance(PackedCode(pack_words(code), m), w, sample=1)
    overlap = code.astype(int) @ code.T.astype(int)
    np.fill_diagonal(overlap, -1)
    assert exact and d == 2 * (w - overlap.max()) == 2 * (w - overlap[pair])


def test_a_distance_check_past_both_limits_is_refused_in_one_line(monkeypatch):
    code = np.unique(random_words(np.random.default_rng(0), 12, 6, 40), axis=0)
    monkeypatch.setattr(codes, "GRAM_WORDS", 4)
    monkeypatch.setattr(codes, "MAX_SUBWORD_KEYS", 10)
    monkeypatch.setattr(codes, "MAX_GRAM_CHECK_WORDS", len(code) - 1)
    with pytest.raises(FamilyError) as caught:
        check_constant_weight(code, 6, 5)
    assert "\n" not in str(caught.value) and f"at most {len(code) - 1} words are compared" in str(caught.value)
    monkeypatch.setattr(codes, "MAX_GRAM_CHECK_WORDS", len(code))
    check_constant_weight(code, 6, 5)  # the pairwise scan, within its limit
    monkeypatch.setattr(codes, "MAX_SUBWORD_KEYS", len(code))
    check_constant_weight(code, 6, 5)  # the sub-word test (distinct words)


# -- the layer code and family against the construction they replaced --------------------------


def old_layer_family(m: int, w: int, distance: int, residue, length: int) -> tuple:
    """The layer family as it was built before: bit rows, ``unique_rows``, a list of tuples."""
    a = None if distance == 2 else residue
    rows = [s for s in itertools.combinations(range(m), w) if a is None or sum(s) % m == a]
    code = np.zeros((len(rows), m), np.uint8)
    for k, support in enumerate(rows):
        code[k, list(support)] = 1
    tokens, inverse = unique_rows(np.concatenate([code, 1 - code]))
    n = len(code)
    return tokens, inverse[:n], inverse[n:], list(zip(inverse[:n].tolist(), inverse[n:].tolist()))


@pytest.mark.parametrize("m, w", [(4, 2), (6, 3), (8, 4), (8, 3), (10, 5), (12, 6), (12, 4)])
def test_the_layer_family_equals_the_old_construction(m, w):
    for distance, residue in [(2, None), *((4, a) for a in range(m))]:
        if distance == 4 and class_sizes(m, w)[residue] == 0:
            continue
        family = build_family("layer", m=m, w=w, distance=distance, residue=residue, length=5)
        tokens, queries, goods, matching = old_layer_family(m, w, distance, residue, 5)
        assert np.array_equal(family.tokens, tokens) and family.matching == matching
        assert np.array_equal(family.queries, np.unique(queries)) and np.array_equal(
            family.candidates, np.unique(goods)
        )
        assert isinstance(family.matching, PairList)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12), st.data())
def test_the_layer_check_agrees_with_the_pairwise_check(m, data):
    """Weight, order and residue prove the distance: the packed check passes on every built code,
    catches a changed word, and the pairwise check finds the same code at its distance."""
    w = data.draw(st.integers(1, m - 1))
    residue = data.draw(st.none() | st.integers(0, m - 1))
    ints = layer_words(m, w, residue, math.comb(m, w))
    if not len(ints):
        return
    check_layer_words(ints, m, w, residue)
    check_constant_weight(unpack_words(ints, m), w, w - (1 if residue is None else 2))
    broken = ints.copy()
    k = data.draw(st.integers(0, len(ints) - 1))
    broken[k] ^= np.uint64(1) << np.uint64(data.draw(st.integers(0, m - 1)))  # another weight
    with pytest.raises(AssertionError):
        check_layer_words(broken, m, w, residue)
    if len(ints) > 1:
        with pytest.raises(AssertionError, match="distinct and in order"):
            check_layer_words(ints[::-1], m, w, residue)
    if residue is not None:
        with pytest.raises(AssertionError, match="another sum"):
            check_layer_words(ints, m, w, (residue + 1) % m)


def test_layer_packed_is_the_checked_code():
    ints, a = layer_packed(16, 8, 4, None, None)
    assert len(ints) == max(class_sizes(16, 8)) == 810 and a == int(np.argmax(class_sizes(16, 8)))
    rows = unpack_words(ints, 16)
    assert min_distance(rows, 8) == (4, True, min_distance(rows, 8)[2])


# -- the complement shape and the distinct-token test ---------------------------------------------


def old_complement_code(family: ProductFamily) -> np.ndarray | None:
    """The complement shape as it was read before, on bit rows."""
    pairs = np.array(family.matching, dtype=np.int64)
    if len(pairs) < 2 or family.m > 64:
        return None
    if not np.array_equal(np.unique(pairs[:, 1]), family.candidates):
        return None
    code = family.tokens[pairs[:, 0]]
    weights = code.sum(1)
    if (weights != weights[0]).any() or not np.array_equal(family.tokens[pairs[:, 1]], 1 - code):
        return None
    return code


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 12), st.integers(2, 10), st.integers(0, 2**32 - 1), st.sampled_from(["ok", "weight", "good"]))
def test_the_packed_complement_shape_equals_the_old_reading(m, n, seed, spoil):
    rng = np.random.default_rng(seed)
    code = np.unique(random_words(rng, m, m // 2, n), axis=0)
    if spoil == "weight":
        code = np.unique(np.concatenate([code, random_words(rng, m, 1, 1)]), axis=0)
    goods = 1 - code
    if spoil == "good" and len(code) > 1:
        goods = np.roll(goods, 1, axis=0)
    tokens, inverse = unique_rows(np.concatenate([code, goods]))
    k = len(code)
    if len(tokens) < 2 * k and spoil != "ok":
        return
    q, g = inverse[:k], inverse[k:]
    if len(np.unique(q)) < k:
        return
    family = ProductFamily(tokens, q, g, 1, np.stack([q, g], 1), "f", {}, 5)
    want, got = old_complement_code(family), complement_shape(family)
    assert (want is None) == (got is None)
    if got is not None:
        assert np.array_equal(got.code.rows(), want) and got.weight == int(want[0].sum())


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 70), st.integers(2, 12), st.integers(0, 2**32 - 1))
def test_the_fast_distinct_token_test_keeps_the_old_message(m, n, seed):
    tokens = np.random.default_rng(seed).integers(0, 2, (n, m), dtype=np.uint8)

    def verdict(check):
        try:
            check(tokens)
            return None
        except FamilyError as exc:
            return str(exc)

    def old(t):  # the row-wise unique, as before
        uniq, inverse = unique_rows(t)
        if len(uniq) < len(t):
            order = np.argsort(inverse, kind="stable")
            same = np.flatnonzero(inverse[order][1:] == inverse[order][:-1])
            first, second = sorted(order[same[0] : same[0] + 2].tolist())
            raise FamilyError(
                f"tokens {first} and {second} are the same bit vector: a family's tokens must be distinct"
            )

    assert verdict(distinct_tokens) == verdict(old)


# -- the matching as an array --------------------------------------------------------------------


def test_a_pair_list_reads_as_a_list_of_pairs():
    pairs = PairList(np.array([[0, 3], [1, 4], [2, 5]]))
    assert len(pairs) == 3 and pairs[1] == (1, 4) and pairs[-1] == (2, 5) and list(pairs) == [(0, 3), (1, 4), (2, 5)]
    assert isinstance(pairs[0][0], int) and pairs[1:] == [(1, 4), (2, 5)] and pairs == PairList(pairs.array)
    assert pairs != [(0, 3)] and bool(pairs) and not PairList(np.zeros((0, 2)))
    assert np.asarray(pairs) is pairs.array and np.array(pairs, dtype=np.int32).dtype == np.int32
    with pytest.raises(ValueError):
        pairs.array[0, 0] = 7  # read-only: a change goes through assignment, which validates
    tokens = np.eye(6, dtype=np.uint8)
    family = ProductFamily(tokens, [0, 1, 2], [3, 4, 5], 1, np.array([[0, 3], [1, 4], [2, 5]]), "f", {}, 3)
    assert family.matching == pairs
    with pytest.raises(FamilyError, match="matching entries 0 and 1 have the same query"):
        family.matching = np.array([[0, 3], [0, 4]])
    assert family.matching == pairs  # the refused value is not kept
    sequences = Family(tokens, np.array([[0, 3, 4]]), 1)
    sequences.matching = np.array([[0, 3]])
    assert sequences.matching == [(0, 3)] and isinstance(sequences.matching, PairList)


# -- the members field -----------------------------------------------------------------------------


def complement_family(code: np.ndarray, length: int, extra: np.ndarray | None = None) -> ProductFamily:
    """Queries ``code`` (and ``extra`` queries without a matching entry), each good candidate its
    complement, the candidates exactly the goods."""
    extra = np.zeros((0, code.shape[1]), np.uint8) if extra is None else extra
    tokens, inverse = unique_rows(np.concatenate([code, 1 - code, extra]))
    n = len(code)
    q, g = inverse[:n], inverse[n : 2 * n]
    return ProductFamily(tokens, np.concatenate([q, inverse[2 * n :]]), g, 1, np.stack([q, g], 1), "f", {}, length)


@pytest.mark.parametrize("rule", [True, False])
def test_members_are_all_only_when_every_query_is_certified(rule):
    code = layer_code_rows(12, 6)
    whole = certify(complement_family(code, 11), rule=rule).to_json()
    assert whole["bounds"]["radon"]["members"] == "all" and whole["bounds"]["radon"]["of"] == 80
    extra = np.zeros((1, 12), np.uint8)  # a query with no good candidate: never a member
    more = certify(complement_family(code, 11, extra), rule=rule).to_json()
    radon = more["bounds"]["radon"]
    assert more["certified_rank"] == 80 and radon["whole_set"] and radon["count"] == 80 and radon["of"] == 81
    assert radon["members"] == ("first" if rule else "listed")
    text = "\n".join(describe_certificate(more))
    assert "all 80 queries" not in text and ("the first 80" in text if rule else "matching entries" in text)
    short = certify(complement_family(code, 3), rule=rule).to_json()["bounds"]["radon"]
    assert short["count"] < 80 and short["members"] == ("first" if short["by_rule"] else "listed")
    assert short["queries"] is not None and len(short["queries"]) == short["count"]


def test_members_of_a_sequence_family_count_the_queries_at_its_position():
    family = build_family("witness")
    data = certify(family).to_json()
    radon = data["bounds"]["radon"]
    queries = len(np.unique(family.index[:, data["query_position"] - 1]))
    assert radon["of"] == queries and (radon["members"] == "all") == (radon["count"] == queries)
    at = certify_at(family, data["query_position"] - 1, Fraction(1, 2)).to_json()["bounds"]["radon"]
    assert at["of"] == queries  # a certificate made at one position counts the same queries


def layer_code_rows(m: int, w: int) -> np.ndarray:
    return unpack_words(layer_packed(m, w, 4, None, None)[0], m)


# -- the whole layer at δ = 2/5: the least length by rule, and the refusals ------------------------


@pytest.mark.parametrize("m", [6, 8, 10])
def test_the_whole_layer_at_two_fifths_from_its_least_length(m):
    """All C(m, m/2) words from the least N with 16/(N − 2)² < 1/(n − 1) (ρ_N(1, 2/5) = 4/(N − 2)),
    fewer one shorter, and the query one-hot construction exact at that rank."""
    from kernelgap.theory.construction import certify_and_construct

    n = math.comb(m, m // 2)
    least = 3 + math.isqrt(16 * (n - 1))
    assert 16 * (n - 1) < (least - 2) ** 2 and (least - 3) ** 2 <= 16 * (n - 1)
    two_fifths = Fraction(2, 5)
    at = certify_and_construct(build_family("layer", m=m, distance=2, length=least), two_fifths, 0.0)
    assert at["certified_rank"] == n == at["constructed_rank"] and at["bounds"]["radon"]["members"] == "all"
    below = build_family("layer", m=m, distance=2, length=least - 1)
    rule = least_gap(complement_shape(below), two_fifths, least - 1)
    assert not rule.whole_set and certify(below, two_fifths, rule=True).certified_rank < n
    assert certify(below, two_fifths, rule=False).certified_rank < n


def test_a_layer_too_large_is_refused_in_one_line(cli):
    code, out, err = cli("certify", "--family", "layer", "-p", "m=28", "-p", "distance=2")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1 and "at most 33,554,432" in err
    code, out, err = cli("certify", "--family", "layer", "-p", "m=64", "-p", "n=1000000000000", "--json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "needs about" in err
    code, out, err = cli("certify", "--family", "layer", "-p", "m=12", "-p", "length=11", "--json")
    assert code == 0 and json.loads(out)["bounds"]["radon"]["members"] == "all"


@pytest.mark.parametrize("params", [{"m": 20}, {"m": 22}, {"m": 16, "distance": 2}, {"m": 22, "n": 5000}, {"m": 24}])
def test_the_layer_memory_estimate_covers_the_build(params):
    """The estimate is not below what the build allocates (numpy reports to tracemalloc)."""
    import tracemalloc

    from kernelgap.task.registry import check_params, memory_estimate

    estimate = memory_estimate("layer", check_params("layer", params))
    tracemalloc.start()
    try:
        build_family("layer", **params)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= estimate, (peak, estimate)
