"""The gap-2 pair maximum by integer programming and a SAT refutation agrees with the clique
search wherever that one runs (m ≤ 8), each answer from both sides; the integer check of the
pair condition agrees with the overlap definition on random families."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.errors import KernelgapError
from kernelgap.theory.ceiling import exhaustive_pair_maximum, pair_ceiling, pair_graph
from kernelgap.theory.pair_maximum import meets_pair_condition, pair_maximum, sat_refutes


@pytest.mark.parametrize("m", range(1, 9))
def test_both_sides_meet_the_clique_search(m):
    found = pair_maximum(m)
    assert found.optimal and found.refuted == "unsat" and found.to_json()["exact"]
    assert found.size == exhaustive_pair_maximum(m, 2) <= pair_ceiling(m, 2)
    assert meets_pair_condition(found.family) and len(set(found.family)) == found.size
    assert sat_refutes(m, found.size) == "sat"  # the size itself is reachable: the refutation is not vacuous


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 7).flatmap(lambda m: st.tuples(st.just(m), st.sets(st.integers(0, (1 << m) - 1), max_size=12))))
def test_the_integer_check_is_the_pair_condition(case):
    m, supports = case
    family = sorted(supports)
    words = np.array([[(b >> k) & 1 for k in range(m)] for b in family], dtype=np.int8).reshape(len(family), m)
    adj = pair_graph(1 - words, words, 2)
    complete = bool(adj[~np.eye(len(family), dtype=bool)].all()) if len(family) > 1 else True
    assert meets_pair_condition(family) == complete


def test_out_of_range_m_is_refused():
    with pytest.raises(KernelgapError, match="1 ≤ m ≤ 10"):
        pair_maximum(11)
