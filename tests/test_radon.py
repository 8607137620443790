"""The Radon (simplex) bound: the theorem, its sharp constant, the clique search, and
certified = constructed on the witness-style families."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.models.constructions import one_hot_candidates
from kernelgap.task import build_family, error_metrics
from kernelgap.theory.certificate import certify
from kernelgap.theory.pair_bounds import NO_PATH, PairBounds
from kernelgap.theory.radon import exact_level, radon_bound

# -- the theorem ---------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.integers(1, 3), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.3, 0.6]))
def test_some_pair_has_product_at_least_one_over_r(r, extra, seed, sparsity):
    """n = r + extra nonnegative rank-r rows: max_{i≠j} B_ij B_ji ≥ 1/r once B_ii = 1."""
    rng = np.random.default_rng(seed)
    n = r + extra
    p, q = rng.random((n, r)), rng.random((n, r))
    p[rng.random((n, r)) < sparsity] = 0.0
    q[rng.random((n, r)) < sparsity] = 0.0
    own = rng.integers(0, r, n)  # keep B_ii > 0
    p[np.arange(n), own] += 0.1
    q[np.arange(n), own] += 0.1
    b = p @ q.T
    b /= np.diag(b)[:, None]
    products = (b * b.T)[~np.eye(n, dtype=bool)]
    assert products.max() >= 1 / r * (1 - 1e-9)


@pytest.mark.parametrize("r", range(1, 8))
def test_the_constant_is_sharp(r):
    """The r basis vectors and the centre (1/√r, …): r + 1 unit vectors with max B_ij B_ji = 1/r."""
    s = np.vstack([np.eye(r), np.full((1, r), 1 / np.sqrt(r))])
    b = s @ s.T
    products = (b * b.T)[~np.eye(r + 1, dtype=bool)]
    assert products.max() == pytest.approx(1 / r, rel=1e-12)


def test_exact_level_strictness():
    assert exact_level(Fraction(1, 25), True, 99) == 25 and exact_level(Fraction(1, 25), False, 99) == 24
    assert exact_level(Fraction(2, 51), False, 99) == 25 and exact_level(Fraction(0), True, 7) == 7
    assert exact_level(Fraction(1, 25), True, 10) == 10


# -- the clique search against brute force ----------------------------------------------------

VALUES = [
    Fraction(1),
    Fraction(1, 2),
    Fraction(1, 3),
    Fraction(2, 5),
    Fraction(1, 4),
    Fraction(1, 5),
    Fraction(1, 6),
    Fraction(2, 9),
    Fraction(1, 8),
    Fraction(0),
]


@st.composite
def random_bounds(draw):
    n = draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    eps_id = rng.integers(0, len(VALUES), (n, n))
    np.fill_diagonal(eps_id, 0)
    reason = np.where(rng.random((n, n)) < draw(st.sampled_from([0.0, 0.1, 0.3])), NO_PATH, 0)
    np.fill_diagonal(reason, 0)
    strict = rng.random((n, n)) < draw(st.sampled_from([0.0, 0.5, 1.0]))
    return PairBounds(eps_id, reason.astype(np.int8), strict, list(VALUES), 0)


def brute_radon(bounds: PairBounds) -> int:
    """The best Radon certificate by trying every subset of queries."""
    n, best = bounds.n, 1
    for k in range(2, n + 1):
        for subset in itertools.combinations(range(n), k):
            level = k - 1
            for i, j in itertools.combinations(subset, 2):
                if bounds.reason[i, j] or bounds.reason[j, i]:
                    level = 0
                    break
                p = bounds.values[bounds.eps_id[i, j]] * bounds.values[bounds.eps_id[j, i]]
                level = min(level, exact_level(p, bool(bounds.strict[i, j] or bounds.strict[j, i]), n))
            if level >= 1:
                best = max(best, level + 1)
    return best


@settings(max_examples=300, deadline=None)
@given(random_bounds())
def test_clique_search_matches_brute_force(bounds):
    found = radon_bound(bounds)
    assert found.exact_search and found.rank == brute_radon(bounds)
    members = found.members
    assert len(members) >= found.rank
    for i, j in itertools.combinations(members, 2):  # the listed clique re-checks by hand
        assert not bounds.reason[i, j] and not bounds.reason[j, i]
        p = bounds.values[bounds.eps_id[i, j]] * bounds.values[bounds.eps_id[j, i]]
        assert exact_level(p, bool(bounds.strict[i, j] or bounds.strict[j, i]), bounds.n) >= found.rank - 1
        assert p <= found.max_product


# -- certified = constructed ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, params, n",
    [
        ("witness", {}, 16),
        ("hadamard", {"m": 24}, 23),
        ("hadamard", {"m": 48}, 47),
        ("hadamard", {"m": 32, "n": 20}, 20),
    ],
)
def test_certified_equals_constructed(name, params, n):
    family = build_family(name, **params)
    cert = certify(family)
    assert cert.certified_rank == cert.radon.rank == n and cert.radon.exact_search
    model = one_hot_candidates(family)
    assert model.scorer.features == n  # one feature per good candidate
    qpos = family.query_position - 1
    with torch.no_grad():
        pred = model.predict(torch.from_numpy(family.tokens).double(), torch.from_numpy(family.index), [qpos])[0]
    metrics = error_metrics(pred, family.targets()[:, [qpos]])
    assert metrics.exact and metrics.sequences == len(family)  # exact on every sequence


def test_constant_weight_reference_values():
    """Mixed ε: Radon and trace side by side on seeded constant-weight families."""
    for params, radon, trace in [
        ({"m": 40, "weight": 12, "max_overlap": 5, "n": 60}, 37, 29),
        ({"m": 64, "weight": 20, "max_overlap": 9, "n": 200}, 101, 88),
    ]:
        cert = certify(build_family("cw", **params))
        assert (cert.radon.rank, cert.trace.rank, cert.certified_rank) == (radon, trace, radon), params
        assert cert.radon.exact_search
