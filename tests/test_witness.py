"""Witness families (docs/experiments.md): the preset, Hadamard and constant-weight builders, chains, readings."""

import numpy as np
import pytest

from kernelgap.errors import FamilyError
from kernelgap.task import build_family, family_names, load_family, save_family
from kernelgap.task.families.witness import chain_candidate, witness_from_code


def _needed(queries, goods):
    """The certificate's sequences per query, as bit-string triples (query, a, b)."""
    words = lambda v: "".join(map(str, v))  # noqa: E731
    out = set()
    for i, x in enumerate(queries):
        gx = goods[i]
        out.add((words(x), words(gx), words(gx)))
        for j, gy in enumerate(goods):
            if j != i:
                out |= {
                    (words(x), words(gy), words(gy)),
                    (words(x), words(gx), words(gy)),
                    (words(x), words(gy), words(gx)),
                }
    return out


def _triples(family, order=(0, 1, 2)):
    seqs = family.sequences_bits()[:, list(order)]
    return {tuple("".join(map(str, t)) for t in row) for row in seqs}


def test_registered():
    assert {"witness", "hadamard", "cw"} <= set(family_names())


def test_witness_preset_is_the_calibration_family():
    f = build_family("witness")
    assert (len(f), f.m, f.query_position, len(f.matching)) == (736, 24, 1, 16)
    assert "chain step 0, 736 sequences" in f.meta["calibration"]
    chained = build_family("witness", chain_step=2)
    assert f"chain step 2, {len(chained)} sequences" in chained.meta["calibration"] and len(chained) != 736
    queries = np.array([f.tokens[q] for q, _ in f.matching])
    goods = np.array([f.tokens[g] for _, g in f.matching])
    assert np.array_equal(goods, 1 - queries)
    gram = queries.astype(int) @ queries.T.astype(int)
    assert (np.diag(gram) == 12).all() and (gram[~np.eye(16, dtype=bool)] == 6).all()
    assert _triples(f) == _needed(queries, goods)
    assert set(np.unique(f.targets()[:, 0]).tolist()) == {0, 6}


def test_final_reading_puts_the_query_last():
    first, final = build_family("witness"), build_family("witness", reading="final")
    assert final.query_position == 3 and len(final) == 736
    assert _triples(final, (2, 0, 1)) == _triples(first)
    with pytest.raises(FamilyError, match="reading"):
        build_family("witness", reading="middle")


def test_chain_candidates_and_sequence_count():
    x = np.array([1, 0, 1, 1, 0, 1], dtype=np.uint8)
    for s in range(5):
        assert int(x.astype(int) @ chain_candidate(x, s).astype(int)) == s
    f = build_family("hadamard", m=16, n=5, chain_step=2)  # bad overlap 4: one level (2)
    assert f.meta["chain_levels"] == [2]
    n, k = 5, 2  # k = chain incl. the good candidate
    per_query = k + (n - 1) + k * (k - 1) + 2 * k * (n - 1)
    assert len(f) == n * per_query


def test_hadamard_and_cw_builders():
    f = build_family("hadamard", m=12)
    assert len(f.matching) == 11 and len(f) == 11 * (1 + 3 * 10)
    with pytest.raises(FamilyError, match="codewords"):
        build_family("hadamard", m=12, n=12)
    g = build_family("cw", m=12, weight=3, max_overlap=1, n=5, method="greedy")
    assert len(g.matching) == 5 and g.meta["code"] == "cw-greedy"
    with pytest.raises(FamilyError, match="method"):
        build_family("cw", method="best")


def test_witness_family_round_trips_through_json(tmp_path):
    f = build_family("witness")
    path = save_family(f, tmp_path / "w.json")
    g = load_family(path)
    assert len(g) == len(f) and g.query_position == 1
    word = lambda fam, i: fam.tokens[i].tobytes()  # noqa: E731
    assert [(word(g, q), word(g, b)) for q, b in g.matching] == [(word(f, q), word(f, b)) for q, b in f.matching]


def test_duplicate_tokens_are_merged():
    code = np.array([[1, 1, 0, 0], [0, 0, 1, 1]], dtype=np.uint8)  # each is the other's complement
    f = witness_from_code(code)
    assert len(f.tokens) == 2 and len(f.matching) == 2
    assert len(np.unique(f.index, axis=0)) == len(f)
