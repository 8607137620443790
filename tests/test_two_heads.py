"""The two-head construction (kernelgap.theory.two_heads): exact, in fractions, on every
sequence of the witness and Hadamard families and of two-level families built otherwise, with
``1 + k`` features where one head needs n; refused with its reason on families of more levels."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelgap.task import build_family
from kernelgap.task.family import Family, ProductFamily
from kernelgap.theory.certificate import certify
from kernelgap.theory.construction import two_heads
from kernelgap.theory.two_heads import NotTwoLevel, antichain_width, check_two_heads, most_levels


@pytest.mark.parametrize(
    "name, params, n", [("witness", {}, 16), ("hadamard", {"m": 24, "n": 23}, 23), ("hadamard", {"m": 48, "n": 47}, 47)]
)
def test_exact_on_every_sequence_within_log2_n_plus_3(name, params, n):
    check = check_two_heads(build_family(name, **params))
    assert check.exact and check.max_error < Fraction(1, 2)
    assert check.queries == n and check.total == 1 + check.width <= math.ceil(math.log2(n)) + 3
    assert check.sequences == len(build_family(name, **params))


def test_the_antichain_is_the_least_width_that_fits():
    for n in range(1, 300):
        k = antichain_width(n)
        assert math.comb(k, (k + 1) // 2) >= n
        assert k == 1 or math.comb(k - 1, k // 2) < n


def complement_family(n: int, seed: int, keep: float) -> Family:
    """Queries ``1 − e_i`` and candidates ``e_j`` (overlap 0 for j = i, else 1; one more bit,
    set on the queries only, keeps the tokens distinct), the bits and
    token ids shuffled, a random share ``keep`` of the ``(x; c, c')`` sequences kept (always
    the valley ``(x; e_i, e_i)`` and one sequence above it): a two-level family not built from a code."""
    rng = np.random.default_rng(seed)
    eye = np.eye(n, dtype=np.uint8)
    marks = np.repeat([[1], [0]], n, axis=0).astype(np.uint8)
    tokens = np.concatenate([np.concatenate([1 - eye, eye]), marks], axis=1)[:, rng.permutation(n + 1)]
    order = rng.permutation(2 * n)
    tokens = tokens[np.argsort(order)]
    query, cand = order[:n], order[n:]
    rows = [
        (query[i], cand[a], cand[b])
        for i in range(n)
        for a, b in itertools.product(range(n), repeat=2)
        if (a == b == i) or (a, b) == (i, (i + 1) % n) or rng.random() < keep
    ]
    return Family(tokens=tokens, index=np.array(rows, dtype=np.int64), query_position=1)


@given(n=st.integers(2, 12), seed=st.integers(0, 2**32 - 1), keep=st.floats(0.05, 1.0))
def test_exact_on_two_level_families_built_otherwise(n, seed, keep):
    check = check_two_heads(complement_family(n, seed, keep))
    assert check.exact and check.width == antichain_width(n)


def test_a_shuffled_hadamard_product_family_is_expanded_and_exact():
    base = build_family("hadamard", m=24, n=23)
    rng = np.random.default_rng(7)
    tokens = base.tokens[:, rng.permutation(24)]
    queries = np.unique(base.index[:, 0])
    goods = np.array([g for _, g in base.matching])
    product = ProductFamily(tokens=tokens, queries=queries, candidates=goods, length=3)
    found = two_heads(product)
    assert found["applies"] and found["exact"] and found["sequences"] == 23 * 23 * 23


def test_three_levels_or_a_shared_bottom_are_refused_with_the_reason():
    with pytest.raises(NotTwoLevel, match="overlap levels"):
        check_two_heads(build_family("cw"))
    family = complement_family(4, 0, 1.0)
    family.tokens = np.concatenate([family.tokens, np.zeros((1, 5), dtype=np.uint8)])  # a bottom of every query
    zero = len(family.tokens) - 1
    family.index = np.concatenate([family.index, [[family.index[0, 0], zero, zero], [family.index[-1, 0], zero, zero]]])
    with pytest.raises(NotTwoLevel, match="bottom of two queries"):
        check_two_heads(family)
    assert not two_heads(build_family("cw"))["applies"]


def test_a_heavier_self_key_is_caught_by_the_check():
    """The check evaluates, it does not restate the argument: with the query position's key
    scaled up the detector's share leaks into every non-valley sequence and the family is missed."""
    family = build_family("witness")
    assert check_two_heads(family, epsilon=Fraction(1, 72)).exact
    worse = check_two_heads(family, epsilon=Fraction(1, 6))
    a = Fraction(1, 6) * 3  # the self weight ε·⌈k/2⌉, against a least candidate weight of 1
    assert not worse.exact and worse.max_error == 6 * a / (a + 1)


@pytest.mark.parametrize(
    "name, params", [("witness", {}), ("hadamard", {"m": 24, "n": 23}), ("hadamard", {"m": 48, "n": 47})]
)
def test_the_model_classes_realise_it_with_the_same_error(name, params):
    """A second code path: the construction set into an ordinary two-head ``table`` model and
    evaluated by its forward pass in float64 meets the fractions' max error; head 1's kernel
    over the family's tokens has rank 1, head 2's is zero exactly on each query's bottom."""
    import torch

    from kernelgap.task.minip import error_metrics
    from kernelgap.theory.two_heads import two_head_model, two_levels

    family = build_family(name, **params)
    model = two_head_model(family)
    q = family.query_position - 1
    tokens = torch.from_numpy(family.tokens).double()
    with torch.no_grad():
        pred = model.predict(tokens, torch.from_numpy(family.index), [q])[0]
        qf = model.scorer.q_table.theta.exp()  # [heads, T, k]
        kf = model.scorer.k_table.theta.exp().reshape(2, 3, *qf.shape[1:])  # [heads, positions, T, k]
    metrics = error_metrics(pred, family.targets()[:, [q]])
    assert metrics.exact and abs(metrics.max_error - float(check_two_heads(family).max_error)) < 1e-9
    assert torch.linalg.matrix_rank(qf[0] @ kf[0, 1].T).item() == 1
    found = two_levels(family)
    weights = qf[1] @ kf[1, 1].T  # query token × candidate token, at a candidate position
    for z, x in found.bottom_of.items():
        assert weights[x, z] == 0
    assert all(weights[x, z] > 0 for x in found.levels for z in found.bottom_of if found.bottom_of[z] != x)


def test_the_model_is_refused_in_one_line_where_the_construction_does_not_apply():
    from kernelgap.errors import KernelgapError
    from kernelgap.theory.two_heads import two_head_model

    with pytest.raises(KernelgapError, match="no two-head construction on .*overlap levels"):
        two_head_model(build_family("cw"))


def brute_levels(family) -> int:
    """The most distinct overlaps one query token has with its candidates, sequence by sequence."""
    seqs = family.expand() if isinstance(family, ProductFamily) else family
    (q,) = seqs.scored_positions
    seen: dict[int, set[int]] = {}
    for row in seqs.index:
        x = seqs.tokens[row[q]]
        for j in (j for j in range(3) if j != q):
            seen.setdefault(int(row[q]), set()).add(int((x & seqs.tokens[row[j]]).sum()))
    return max(len(v) for v in seen.values())


def test_the_levels_a_query_sees_are_counted():
    """Two on the two-level families, more on a code with spread overlaps and on a ladder, as a
    brute-force count says; none beyond length 3."""
    for name, params in [("witness", {}), ("hadamard", {"m": 24, "n": 23}), ("cw", {}), ("ladder", {"m": 16, "n": 8})]:
        family = build_family(name, **params)
        assert most_levels(family) == brute_levels(family), name
    assert most_levels(build_family("witness")) == 2 and most_levels(build_family("cw")) > 2
    assert most_levels(build_family("layer", m=6, length=4)) is None


@given(m=st.integers(3, 8), n=st.integers(3, 12), rows=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_levels_of_random_shuffled_families_match_a_brute_force_count(m, n, rows, seed):
    """Families from another generator: random distinct tokens, random sequences, the query at
    a random position, the bits and rows shuffled."""
    rng = np.random.default_rng(seed)
    tokens = np.unique(rng.integers(0, 2, size=(n, m), dtype=np.uint8), axis=0)[:, rng.permutation(m)]
    index = rng.integers(0, len(tokens), size=(rows, 3))[rng.permutation(rows)]
    family = Family(tokens=tokens, index=index.astype(np.int64), query_position=int(rng.integers(1, 4)))
    assert most_levels(family) == brute_levels(family)


def test_two_heads_train_exact_at_the_constructed_total():
    """Training two heads of rank 3 (total 6, under the construction's 7 and the one-head
    certificate) with position-dependent keys and a linear readout, the construction's
    shape, is exact on most of three seeds of the witness family."""
    from kernelgap.training.config import RunConfig
    from kernelgap.training.trainer import train_runs

    family = build_family("witness")
    built, certified = check_two_heads(family), certify(family).certified_rank
    rank = built.total // 2
    runs = [
        RunConfig.parse(
            {
                "family": {"name": "witness"},
                "model": {
                    "feature_map": "table",
                    "rank": rank,
                    "heads": 2,
                    "readout": "linear",
                    "position_dependent": True,
                },
                "seed": seed,
            }
        ).validate()
        for seed in range(3)
    ]
    results = train_runs(runs)
    assert 2 * rank <= built.total < certified
    assert sum(r.train["max_error"] < 0.5 for r in results) >= 2, [r.train["max_error"] for r in results]
