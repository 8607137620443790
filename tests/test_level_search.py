"""The product family's level search: it looks only at the levels a query sees, each
looking back a bounded number of levels (src/kernelgap/theory/levels.py, "Short
look-back"), and must equal the plain search over every pair of overlap levels
0..m that it replaced (kept here as the reference)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgap.task import ProductFamily
from kernelgap.theory.certificate import certify
from kernelgap.theory.levels import level_pair_bounds, split_length
from kernelgap.theory.pair_bounds import ExactValues, finish_pair_bounds, rho, tight

HALF = Fraction(1, 2)


def reference_level_pair_bounds(family: ProductFamily, delta: Fraction):
    """The former algorithm: a histogram of every level 0..m per query and, for each level b,
    every lower level as a possible predecessor (quadratic in m)."""
    levels = family.m + 1
    entry_query = np.array([q for q, _ in family.matching], dtype=np.int64)
    goods = np.array([g for _, g in family.matching], dtype=np.int64)
    tok = family.tokens.astype(np.int64)
    uq, q_of = np.unique(entry_query, return_inverse=True)
    s = tok[uq] @ tok[family.candidates].T
    counts = np.stack([np.bincount(row, minlength=levels) for row in s]) if len(uq) else np.zeros((0, levels), int)
    at_goods = tok[uq] @ tok[goods].T
    present = counts[q_of] > 0
    target = at_goods[q_of]
    n = len(goods)
    rows = np.arange(n)
    source = target[rows, rows]
    min_gap = math.floor(2 * delta) + 1
    weight = np.array([math.log(rho(g, delta)) if g > 2 * delta else math.inf for g in range(levels)])
    dist = np.full((n, levels), np.inf)
    dist[rows, source] = 0.0
    for b in range(min_gap, levels):
        tails = b - min_gap + 1
        best = (dist[:, :tails] + weight[b - np.arange(tails)]).min(axis=1)
        head = present[:, b] & (source != b)
        dist[head, b] = best[head]
    exact = ExactValues(n * levels, rows * levels + source, delta)
    for b in range(min_gap, levels):
        tails = b - min_gap + 1
        gaps = b - np.arange(tails)
        ok = tight(dist[:, :tails], weight[gaps], dist[:, b : b + 1])
        ok &= (present[:, b] & (source != b))[:, None]
        i, a = np.nonzero(ok)
        exact.relax(i * levels + a, i * levels + b, gaps[a])
    vid = exact.vid[rows[:, None] * levels + target]
    vid[target == source[:, None]] = -1
    comparisons = sum(int((counts[:, :-g] * counts[:, g:]).sum()) for g in range(min_gap, levels))
    return finish_pair_bounds(vid, goods[:, None] == goods[None, :], exact.values, delta, comparisons)


def same_bounds(a, b) -> None:
    assert a.comparisons == b.comparisons
    assert (a.reason == b.reason).all() and (a.strict == b.strict).all()
    ok = a.reason == 0
    va = np.array([a.values[k] for k in a.eps_id[ok]], dtype=object)
    vb = np.array([b.values[k] for k in b.eps_id[ok]], dtype=object)
    assert (va == vb).all()
    reached = a.eps_id >= 0  # values of unbounded-but-reached pairs (R > 1, unanchored) too
    assert (reached == (b.eps_id >= 0)).all()
    assert all(a.values[x] == b.values[y] for x, y in zip(a.eps_id[reached], b.eps_id[reached]))


@st.composite
def product_families(draw):
    """Random product families, dense and sparse in levels: tokens of random density,
    goods often complements, candidates with repeated and far-apart overlaps."""
    m = draw(st.integers(2, 40))
    density = draw(st.sampled_from([0.1, 0.3, 0.5, 0.8]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    nq = draw(st.integers(1, 4))
    queries = (rng.random((nq, m)) < 0.5).astype(np.uint8)
    goods = np.where(rng.random((nq, 1)) < 0.7, 1 - queries, (rng.random((nq, m)) < density))
    extra = (rng.random((draw(st.integers(0, 8)), m)) < density).astype(np.uint8)
    tokens, inverse = np.unique(np.concatenate([queries, goods.astype(np.uint8), extra]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    q_ids, g_ids = inverse[:nq], inverse[nq : 2 * nq]
    first = {}
    for q, g in zip(q_ids.tolist(), g_ids.tolist()):
        first.setdefault(q, g)  # one good candidate per query
    family = ProductFamily(tokens, q_ids, inverse[nq:], draw(st.integers(1, 3)), list(first.items()))
    delta = draw(
        st.sampled_from(
            [
                HALF,
                Fraction(2, 5),
                Fraction(1, 3),
                Fraction(1, 4),
                Fraction(1, 7),
                Fraction(1, 10**6),
                HALF - Fraction(1, 10**6),
                Fraction(49, 100),
            ]
        )
    )
    return family, delta


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(product_families())
def test_level_search_equals_the_search_over_every_level(case):
    family, delta = case
    same_bounds(level_pair_bounds(family, delta), reference_level_pair_bounds(family, delta))


def test_split_length():
    # the least integer t ≥ (4 + 2√2)δ
    for delta in (
        HALF,
        Fraction(2, 5),
        Fraction(1, 3),
        Fraction(1, 4),
        Fraction(1, 7),
        Fraction(1, 10**9),
        HALF - Fraction(1, 10**30),
    ):
        t = split_length(delta)
        assert t >= (4 + 2 * math.sqrt(2)) * float(delta) - 1e-12 and (
            t == 1 or t - 1 < (4 + 2 * math.sqrt(2)) * float(delta)
        )
        assert t >= math.floor(2 * delta) + 1  # every step the lemma keeps is a comparison
    assert split_length(HALF) == 4 and split_length(Fraction(1, 4)) == 2


def test_every_level_present_takes_the_optimal_steps():
    """All levels 0..m present: the best chain 0 → h climbs in equal steps of the best size."""
    m, h = 48, 24
    q = np.zeros(m, np.uint8)
    q[:h] = 1
    cands = [np.concatenate([np.ones(s, np.uint8), np.zeros(m - s, np.uint8)]) for s in range(h + 1)]
    other = np.zeros(m, np.uint8)
    other[h:] = 1  # a second query, to make a pair
    tokens, inv = np.unique(np.stack([q, other] + cands), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    family = ProductFamily(tokens, inv[:2], inv[2:], 1, [(inv[0], inv[2]), (inv[1], inv[2 + h])])
    bounds = level_pair_bounds(family, HALF)
    # from overlap 0 to 24 with every level available, ρ(g, 1/2) = 1/(g − 1): the best chain
    # maximises Π(g_t − 1) under Σ g_t = 24, gaps 5, 5, 5, 5, 4: 1/(4·4·4·4·3), against 1/729
    # in six steps of 4, 1/625 in four of 6, 1/23 in one
    best = {0: Fraction(1)}
    for b in range(2, h + 1):
        best[b] = min(best[a] * rho(b - a, HALF) for a in best if b - a >= 2)
    assert best[h] == Fraction(1, 768) == bounds.values[bounds.eps_id[0, 1]]
    same_bounds(bounds, reference_level_pair_bounds(family, HALF))


def wide_family(m: int) -> ProductFamily:
    """Two queries of weight m/2, their complements as good candidates and six random
    candidates: m = 100,000 in the level search."""
    rng = np.random.default_rng(0)
    q1 = np.zeros(m, np.uint8)
    q1[: m // 2] = 1
    q2 = np.zeros(m, np.uint8)
    q2[m // 4 : 3 * m // 4] = 1
    extra = rng.integers(0, 2, (6, m), dtype=np.uint8)
    tokens = np.concatenate([[q1, q2, 1 - q1, 1 - q2], extra])
    return ProductFamily(tokens, [0, 1], np.arange(2, 10), 1, [(0, 2), (1, 3)])


@pytest.mark.timeout(120)
def test_m_100000_with_two_queries_certifies():
    family = wide_family(100_000)
    cert = certify(family)
    tok = family.tokens.astype(np.int64)
    s = tok[family.queries] @ tok[family.candidates].T
    pairs = sum(int((row[:, None] - row[None, :] >= 2).sum()) for row in s)  # gaps above 2δ = 1
    assert cert.certified_rank == 2 and cert.comparisons == pairs
    small = wide_family(2_000)
    same_bounds(level_pair_bounds(small, HALF), reference_level_pair_bounds(small, HALF))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(product_families())
def test_chunked_and_searched_paths_give_the_same_bounds(case):
    """One query per overlap chunk, one entry per search chunk, no dense level map: the
    paths large families take."""
    from kernelgap.theory import levels

    family, delta = case
    expected = reference_level_pair_bounds(family, delta)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(levels, "CHUNK_CELLS", 1)
        mp.setattr(levels, "SEARCH_CELLS", 1)
        mp.setattr(levels, "DENSE_CELLS", 0)
        same_bounds(level_pair_bounds(family, delta), expected)
