"""The one-hot constructions at any length: exact by brute force, by the worst case over the
built model, and by the torch-free level check; certify's constructed rank."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.models.constructions import one_hot_candidates, query_one_hot
from kernelgap.models.worst_case import family_worst_case
from kernelgap.task import build_family
from kernelgap.task.constructions import softmax_beta
from kernelgap.task.families.exhaustive import all_tokens
from kernelgap.task.family import Family, ProductFamily
from kernelgap.theory import construction
from kernelgap.theory.construction import check_construction, constructed

BUILDERS = {"query_one_hot": query_one_hot, "candidate_one_hot": one_hot_candidates}


def random_product(seed: int, m: int, n: int, qpos: int, queries: int, candidates: int) -> ProductFamily:
    """Random distinct tokens; queries and candidates drawn independently (they may share tokens)."""
    rng = np.random.default_rng(seed)
    tokens = np.unique(rng.integers(0, 2, (3 * (queries + candidates), m)), axis=0)
    tokens = tokens[rng.permutation(len(tokens))]
    q = rng.choice(len(tokens), min(queries, len(tokens)), replace=False)
    c = rng.choice(len(tokens), min(candidates, len(tokens)), replace=False)
    return ProductFamily(tokens, q, c, qpos, [], "random", {}, n)


def brute_max_error(model, family) -> float:
    seqs = family.expand() if isinstance(family, ProductFamily) else family
    pos = seqs.scored_positions
    with torch.no_grad():
        pred = model.predict(torch.as_tensor(seqs.tokens).double(), torch.as_tensor(seqs.index), pos)[0].numpy()
    return float(np.abs(pred - seqs.targets()[:, pos]).max())


@given(
    seed=st.integers(0, 2**31),
    m=st.integers(2, 6),
    n=st.integers(3, 6),
    name=st.sampled_from(sorted(BUILDERS)),
    data=st.data(),
)
@settings(max_examples=40)
def test_exact_on_small_product_families_of_every_length(seed, m, n, name, data):
    qpos = data.draw(st.integers(1, n))
    family = random_product(
        seed, m, n, qpos, data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4 if n < 5 else 3))
    )
    model = BUILDERS[name](family)
    truth = brute_max_error(model, family)
    assert truth < 0.5
    found = family_worst_case(model, family)
    assert found.exact.all() and abs(found.max_error[0] - truth) < 1e-9
    check = check_construction(family, name)
    assert check.levels == "family" and check.exact
    assert abs(check.max_error - truth) < 1e-9 and check.error_bound >= truth - 1e-12
    keys = family.queries if name == "query_one_hot" else family.candidates
    assert check.rank == model.scorer.features == len(keys)


@pytest.mark.parametrize("m, n", [(3, 3), (3, 8), (4, 13), (5, 40)])
def test_query_one_hot_exact_on_every_input_of_length_n(m, n):
    """Queries and candidates every token of {0,1}^m: every input of length N."""
    tokens = all_tokens(m)
    ids = np.arange(len(tokens))
    family = ProductFamily(tokens, ids, ids, 1, [], "all", {}, n)
    model = query_one_hot(family)
    found = family_worst_case(model, family)
    check = check_construction(family, "query_one_hot")
    assert found.exact[0] and check.exact
    assert abs(check.max_error - found.max_error[0]) < 1e-9
    assert check.max_error <= (n - 1) * np.exp(-softmax_beta(n)) + 1e-12  # construction 2's bound
    if len(tokens) ** (n - 1) <= 1 << 16:
        assert abs(brute_max_error(model, family) - check.max_error) < 1e-9


def test_the_queries_own_weight_is_part_of_the_check():
    """A query among the candidates weighs in the candidate one-hot; not otherwise."""
    tokens = np.array([[1, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=np.uint8)
    for candidates in ([1, 2], [0, 1, 2]):
        family = ProductFamily(tokens, [0], candidates, 2, [], "f", {}, 4)
        model = one_hot_candidates(family)
        assert abs(check_construction(family, "candidate_one_hot").max_error - brute_max_error(model, family)) < 1e-12


@pytest.mark.parametrize("position", [None, 1, 3])
@pytest.mark.parametrize("n", [3, 4, 6])
def test_sequence_families_are_checked_on_every_sequence(position, n):
    if position is not None and position > n:
        pytest.skip("no such position")
    rng = np.random.default_rng(n)
    tokens = np.unique(rng.integers(0, 2, (30, 5)), axis=0)
    family = Family(tokens, rng.integers(0, len(tokens), (200, n)), position)
    for name, build in BUILDERS.items():
        check = check_construction(family, name)
        truth = brute_max_error(build(family), family)
        assert check.levels == "every sequence" and check.exact and abs(check.max_error - truth) < 1e-9


def test_every_level_when_the_levels_cost_too_much(monkeypatch):
    family = build_family("layer", m=8, length=5)
    exact = check_construction(family, "query_one_hot")
    monkeypatch.setattr(construction, "LEVEL_PAIRS_LIMIT", 0)
    superset = check_construction(family, "query_one_hot")
    assert exact.levels == "family" and superset.levels == "all"
    assert exact.error_bound <= superset.error_bound + 1e-12 and superset.exact


def test_constructed_rank_is_the_smaller_exact_construction():
    tokens = all_tokens(4)
    few_queries = ProductFamily(tokens, [1, 2], np.arange(16), 1, [], "q", {}, 5)
    few_candidates = ProductFamily(tokens, np.arange(16), [3, 5, 9], 1, [], "c", {}, 5)
    assert constructed(few_queries)["construction"]["construction"] == "query_one_hot"
    assert constructed(few_queries)["constructed_rank"] == 2
    assert constructed(few_candidates)["construction"]["construction"] == "candidate_one_hot"
    assert constructed(few_candidates)["constructed_rank"] == 3


@pytest.mark.parametrize("m, length, rank", [(12, 11, 80), (16, 31, 810)])
def test_certify_reports_the_constructed_rank(cli, m, length, rank):
    code, out, _ = cli("certify", "--family", "layer", "-p", f"m={m}", "-p", f"length={length}", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["certified_rank"] == payload["constructed_rank"] == rank
    assert payload["proved_equals_constructed"] is True
    built = payload["construction"]
    assert built["rank"] == rank and built["levels"] == "family" and built["exact"]
    assert 0 < built["max_error"] <= built["error_bound"] < 0.5 and built["margin"] == pytest.approx(
        0.5 - built["error_bound"]
    )


def test_certify_text_has_the_construction_line(cli):
    code, out, _ = cli("certify", "--family", "layer", "-p", "m=12", "-p", "length=10")
    assert code == 0
    line = [x for x in out.splitlines() if x.startswith("constructed:")]
    assert len(line) == 1 and "rank 80" in line[0] and "above the certified" in line[0]


def test_certify_stays_torch_free():
    code = (
        "import sys\nfrom kernelgap.cli import main\ntry:\n    main(['certify', '--family', 'layer', '-p', 'm=8', "
        "'-p', 'length=5', '--json'])\nexcept SystemExit:\n    pass\nprint('torch' in sys.modules, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stderr.strip().splitlines()[-1] == "False"
