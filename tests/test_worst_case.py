"""The exact worst case over a product family, against enumerating every tuple."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.errors import KernelgapError
from kernelgap.models import KernelSpec, SoftmaxSpec, build_model
from kernelgap.models.constructions import build_construction
from kernelgap.models.worst_case import family_worst_case
from kernelgap.task import build_family
from kernelgap.task.family import Family, ProductFamily
from kernelgap.task.worst_case import HeadTables, worst_case

# -- the numpy core against a brute force over every tuple -----------------------------


def brute_force(scores, values, self_scores, self_values, bias, levels, n, qpos, causal, log_space, guard):
    """``max |p − t|`` per ``[E, Q]`` over every tuple, computing p as the model does
    (a total weight below ``guard`` is replaced by it); and the error of a given tuple."""
    e, p, q, c = scores.shape
    alpha = np.exp(scores) if log_space else scores
    alpha0 = np.exp(self_scores) if log_space else self_scores
    slots = [j for j in range(n) if j != qpos]
    worst = np.full((e, q), -np.inf)

    def error_of(cols):  # cols [E, Q, N] candidate columns (−1 at the query)
        num = alpha0 * (self_values - bias)
        den = alpha0.copy()
        tmin = np.full((e, q), np.inf)
        for j in slots:
            col = cols[:, :, j]
            tab = j if p > 1 else 0
            a = np.take_along_axis(alpha[:, tab], col[..., None], -1)[..., 0]
            u = np.take_along_axis(values[:, tab], col[..., None], -1)[..., 0] - bias
            tmin = np.minimum(tmin, np.take_along_axis(np.broadcast_to(levels, (e, q, c)), col[..., None], -1)[..., 0])
            if not causal or j < qpos:
                num, den = num + a * u, den + a
        pred = num / np.maximum(den, guard) + bias if guard > 0 else num / den + bias
        return np.abs(pred - tmin)

    for tup in itertools.product(range(c), repeat=n - 1):
        cols = np.full((e, q, n), -1)
        for j, col in zip(slots, tup):
            cols[:, :, j] = col
        worst = np.maximum(worst, error_of(cols))
    return worst, error_of


@st.composite
def core_problems(draw):
    e, q, c = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    n = draw(st.integers(2, 5))
    qpos = draw(st.integers(1, n))
    p = draw(st.sampled_from([1, n]))
    causal, log_space = draw(st.booleans()), draw(st.booleans())
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    if log_space:
        scores = rng.normal(0, draw(st.sampled_from([0.5, 3.0, 30.0])), (e, p, q, c))
        self_scores = rng.normal(0, 2.0, (e, q))
    else:  # exact zeros and weights near the guard
        scale = draw(st.sampled_from([1.0, 1e-6, 1e-7]))
        scores = rng.exponential(scale, (e, p, q, c)) * (rng.random((e, p, q, c)) < 0.7)
        self_scores = rng.exponential(scale, (e, q)) * (rng.random((e, q)) < 0.5)
    values = rng.normal(0, 2.0, (e, p, q, c))
    bias = rng.normal(0, 1.0, (e, q))
    self_values = rng.normal(0, 2.0, (e, q))
    levels = rng.integers(0, 4, (q, c))
    guard = 0.0 if log_space else draw(st.sampled_from([0.0, 1e-6]))
    if not log_space and guard == 0.0:  # without a guard every tuple needs a positive weight
        self_scores = self_scores + 0.1
    return (
        scores,
        values + bias[:, None, :, None],
        self_scores,
        self_values + bias,
        bias,
        levels,
        n,
        qpos,
        causal,
        log_space,
        guard,
    )


@given(core_problems())
@settings(max_examples=150)
def test_core_matches_every_tuple(problem):
    scores, values, self_scores, self_values, bias, levels, n, qpos, causal, log_space, guard = problem
    found = worst_case(
        HeadTables(scores, values, self_scores, self_values, levels, bias), n, qpos,
        causal=causal, log_space=log_space, guard=guard,
    )  # fmt: skip
    truth, error_of = brute_force(
        scores, values, self_scores, self_values, bias, levels, n, qpos - 1, causal, log_space, guard
    )
    tol = 1e-9 * (1 + np.abs(truth))
    assert (found.bound >= truth - tol).all()  # an upper bound on every tuple
    assert np.allclose(error_of(found.slots), found.error, rtol=1e-9, atol=1e-9)  # the tuple's own error
    assert (found.error <= truth + tol).all()
    if not found.guarded.any():  # the maximum itself
        assert np.allclose(found.error, truth, rtol=1e-9, atol=1e-9)
    # the bound exceeds it by the final gap's rounding over the least total weight: tight
    # where the weights span a moderate range
    logs = np.concatenate([scores.reshape(-1), self_scores.reshape(-1)])
    if log_space and logs.max() - logs.min() < 20:
        assert np.allclose(found.bound, truth, rtol=1e-7, atol=1e-9)
    assert (found.slots[:, :, qpos - 1] == -1).all() and (np.delete(found.slots, qpos - 1, axis=2) >= 0).all()


def test_core_refuses_negative_weights_and_nan():
    args = np.zeros((1, 1, 1, 2)), np.zeros((1, 1, 1, 2)), np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 2), int)
    with pytest.raises(KernelgapError, match="nonnegative"):
        worst_case(HeadTables(-np.ones((1, 1, 1, 2)), *args[1:]), 3, 1, log_space=False)
    with pytest.raises(KernelgapError, match="finite"):
        worst_case(HeadTables(args[0], np.full((1, 1, 1, 2), np.nan), *args[2:]), 3, 1)
    with pytest.raises(KernelgapError, match="key positions"):
        worst_case(HeadTables(np.zeros((1, 2, 1, 2)), np.zeros((1, 2, 1, 2)), *args[2:]), 3, 1)


def test_core_long_family_is_linear_in_length():
    """N = 2000 slots: the same arithmetic as N = 4 (the slots collapse into two groups)."""
    rng = np.random.default_rng(1)
    scores, values = rng.normal(size=(2, 1, 5, 6)), rng.normal(size=(2, 1, 5, 6))
    levels = rng.integers(0, 3, (5, 6))
    found = worst_case(HeadTables(scores, values, rng.normal(size=(2, 5)), rng.normal(size=(2, 5)), levels), 2000, 7)
    assert np.isfinite(found.bound).all() and np.allclose(found.bound, found.error, rtol=1e-9)


# -- the model wrapper against model.predict on the expanded family -------------------

MAPS = ["table", "mlp_exp", "elu1", "relu", "favor", "hedgehog", "taylor"]


def random_product(rng: np.random.Generator, m: int, n: int, qpos: int, queries: int, candidates: int) -> ProductFamily:
    """A product family over random distinct tokens (queries and candidates may overlap)."""
    tokens = np.unique(rng.integers(0, 2, (4 * (queries + candidates), m)), axis=0)
    tokens = tokens[rng.permutation(len(tokens))]
    q = rng.choice(len(tokens), min(queries, len(tokens)), replace=False)
    c = rng.choice(len(tokens), min(candidates, len(tokens)), replace=False)
    return ProductFamily(tokens, q, c, qpos, [], "random", {}, n)


def brute_model(model, family: ProductFamily) -> np.ndarray:
    seqs = family.expand()
    pos = [family.query_position - 1]
    tokens = torch.as_tensor(family.tokens, dtype=model.dtype)
    with torch.no_grad():
        pred = model.predict(tokens, torch.as_tensor(seqs.index), pos).double().numpy()
    return np.abs(pred - seqs.targets()[:, pos][None]).max(axis=(1, 2))


def errors_of_sequences(model, family, sequences: np.ndarray) -> np.ndarray:
    """``[E, Q]``: member e's error on its own worst sequence of query q."""
    e, q, n = sequences.shape
    qpos = family.query_position - 1
    tokens = torch.as_tensor(family.tokens, dtype=model.dtype)
    with torch.no_grad():
        pred = model.predict(tokens, torch.as_tensor(sequences.reshape(-1, n)), [qpos])[..., 0].double().numpy()
    gram = family.tokens.astype(np.int64) @ family.tokens.T.astype(np.int64)
    flat = sequences.reshape(-1, n)
    target = gram[flat[:, qpos][:, None], flat].min(1).reshape(e, q)
    return np.abs(pred.reshape(e, e, q)[np.arange(e), np.arange(e)] - target)


@given(
    seed=st.integers(0, 2**31),
    kind=st.sampled_from(["kernel", "softmax"]),
    fmap=st.sampled_from(MAPS),
    n=st.integers(3, 6),
    causal=st.booleans(),
    position_dependent=st.booleans(),
    readout=st.sampled_from(["mlp", "linear"]),
    scale=st.sampled_from([0.5, 1.5, 3.0]),
)
@settings(max_examples=80)
def test_models_match_the_expanded_family(seed, kind, fmap, n, causal, position_dependent, readout, scale):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 7))
    qpos = int(rng.integers(1, n + 1))
    size = 3 if n <= 4 else 2
    family = random_product(rng, m, n, qpos, int(rng.integers(1, 4)), int(rng.integers(1, size + 1)))
    shared = dict(d_value=4, readout=readout, causal=causal, position_dependent=position_dependent, init_scale=scale)
    spec = KernelSpec(feature_map=fmap, rank=3, **shared) if kind == "kernel" else SoftmaxSpec(**shared)
    model = build_model(spec, m, n, seeds=[seed % 1000, seed % 1000 + 1], vocabulary=family.tokens, dtype=torch.float64)
    found = family_worst_case(model, family)
    truth = brute_model(model, family)
    assert (found.error_bound >= truth - 1e-9).all()
    assert np.allclose(found.max_error, truth, atol=1e-9) or found.guarded
    assert np.allclose(errors_of_sequences(model, family, found.worst_sequences), found.query_errors, atol=1e-9)
    assert (found.worst_sequences[:, :, qpos - 1] == family.queries[None]).all()
    assert np.isin(np.delete(found.worst_sequences, qpos - 1, axis=2), family.candidates).all()
    assert (found.exact == (found.error_bound < 0.5)).all()
    assert np.allclose(found.margin, 0.5 - found.error_bound)


@pytest.mark.parametrize("m, n", [(3, 3), (4, 4), (5, 5), (6, 3)])
def test_softmax_construction_is_exact_and_rank1_is_not(m, n):
    rng = np.random.default_rng(m * 10 + n)
    family = random_product(rng, m, n, int(rng.integers(1, n + 1)), 6, 3 if n < 5 else 2)
    exact = family_worst_case(build_construction("softmax", m, n), family)
    assert exact.exact.all() and (exact.margin > 0).all()
    assert np.allclose(exact.max_error, brute_model(build_construction("softmax", m, n), family), atol=1e-12)
    rank1 = build_construction("rank1", m, n)
    assert np.allclose(family_worst_case(rank1, family).max_error, brute_model(rank1, family), atol=1e-12)


def test_builder_family_and_float32():
    """A registered product family (layer, m = 6, N = 4) and a float32 model."""
    family = build_family("layer", m=6, length=4)
    spec = KernelSpec(feature_map="table", rank=4, d_value=6)
    model = build_model(spec, 6, 4, seeds=[0, 1, 2], vocabulary=family.tokens)
    found = family_worst_case(model, family)
    assert np.allclose(found.max_error, brute_model(model, family), atol=1e-5)
    assert found.worst_sequences.shape == (3, len(family.queries), 4)


def test_sequence_family_evaluates_every_sequence():
    rng = np.random.default_rng(3)
    tokens = np.unique(rng.integers(0, 2, (12, 4)), axis=0)
    index = rng.integers(0, len(tokens), (50, 4))
    for position in (None, 2):
        family = Family(tokens, index, position)
        spec = KernelSpec(feature_map="mlp_exp", rank=2, d_value=4)
        model = build_model(spec, 4, 4, seeds=[0, 1], dtype=torch.float64)
        found = family_worst_case(model, family)
        with torch.no_grad():
            pred = model.predict(torch.as_tensor(tokens).double(), torch.as_tensor(index), family.scored_positions)
        err = np.abs(pred.numpy() - family.targets()[:, family.scored_positions][None])
        assert np.allclose(found.max_error, err.max(axis=(1, 2)))
        assert (found.error_bound == found.max_error).all() and found.evaluated == "every sequence"
        assert np.allclose(found.query_errors.max(axis=1), found.max_error)
        queried = np.unique(index[:, family.scored_positions])
        assert list(found.queries) == list(queried) and found.worst_sequences.shape == (2, len(queried), 4)


def test_refusals_are_one_line_errors():
    family = build_family("layer", m=6, length=4)
    two_heads = build_model(SoftmaxSpec(heads=2, d_value=4), 6, 4, seeds=[0])
    with pytest.raises(KernelgapError, match="one head"):
        family_worst_case(two_heads, family)
    signed = build_model(KernelSpec(feature_map="signed", rank=2, d_value=4), 6, 4, seeds=[0])
    with pytest.raises(KernelgapError, match="nonnegative kernel"):
        family_worst_case(signed, family)
    longer = build_model(SoftmaxSpec(position_dependent=True, d_value=4), 6, 5, seeds=[0])
    with pytest.raises(KernelgapError, match="key positions"):
        family_worst_case(longer, family)
