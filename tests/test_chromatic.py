"""The chromatic certificate (docs/theory.md, "The chromatic certificate"), re-checked on a
second path: ε recomputed from the family's tokens alone by a plain exact chain search, the
graph rebuilt from those Fractions, and each witness re-verified by other code (igraph's
independence number, every independent set summed exactly, z3 on the refuted CNF)."""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction

import igraph
import numpy as np
import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.task import build_family
from kernelgap.task.family import ProductFamily
from kernelgap.theory import work as work_mod
from kernelgap.theory.ceiling import exhaustive_pair_maximum, pair_ceiling
from kernelgap.theory.certificate import certify
from kernelgap.theory.chromatic import colour_level, colouring_cnf, maximal_independent_sets
from kernelgap.theory.construction import certify_and_construct
from kernelgap.theory.work import Work, bitsets, max_clique

HALF = Fraction(1, 2)


# -- the second path: ε from the tokens, the graph from the Fractions ------------------------


def rho(gap: int, delta: Fraction, length: int) -> Fraction:
    return 2 * delta / ((length - 2) * (gap - 2 * delta))


def chain_eps(levels: list[int], start: int, end: int, delta: Fraction, length: int) -> Fraction | None:
    """The least product of ρ_N over chains of present levels from ``start`` up to ``end``."""
    best: dict[int, Fraction] = {start: Fraction(1)}
    for level in sorted(v for v in set(levels) if v > start):
        steps = [best[a] * rho(level - a, delta, length) for a in best if level - a > 2 * delta]
        if steps:
            best[level] = min(steps)
        if level == end:
            break
    return best.get(end) if end > start else None


def second_path_eps(family: ProductFamily, delta: Fraction) -> dict[tuple[int, int], Fraction]:
    """Bounded pairs ``(i, j) → ε_ij`` of the matching entries (anchored rows only)."""
    tok = family.tokens.astype(int).tolist()
    overlap = lambda a, b: sum(p * q for p, q in zip(tok[a], tok[b]))  # noqa: E731
    out = {}
    for i, (x, g) in enumerate(family.matching):
        levels = [overlap(x, c) for c in family.candidates.tolist()]
        s0 = overlap(x, g)
        row = {}
        anchored = False
        for c_level in set(levels):
            e = chain_eps(levels, s0, c_level, delta, family.length)
            if e is not None and (e < 1 or (delta == HALF and e <= 1)):
                anchored = True
        for j, (_, gj) in enumerate(family.matching):
            e = chain_eps(levels, s0, overlap(x, gj), delta, family.length) if j != i else None
            if e is not None and e <= 1:
                row[j] = e
        if anchored:
            out.update({(i, j): e for j, e in row.items()})
    return out


def edge_at(eps: dict, i: int, j: int, r: int, delta: Fraction) -> bool:
    if (i, j) not in eps or (j, i) not in eps:
        return False
    p = eps[i, j] * eps[j, i] * r * r
    return p <= 1 if delta == HALF else p < 1


def recheck(family: ProductFamily, delta: Fraction, payload: dict) -> int:
    """Re-verify the chromatic block of ``payload`` from the family alone; the rank it proves."""
    chrom = payload["bounds"]["chromatic"]
    r, words = chrom["level"], chrom["queries"]
    index = {"".join(map(str, family.tokens[x].astype(int).tolist())): k for k, (x, _) in enumerate(family.matching)}
    ids = [index[w] for w in words]
    eps = second_path_eps(family, delta)
    n = len(ids)
    edges = {(a, b) for a, b in itertools.combinations(range(n), 2) if edge_at(eps, ids[a], ids[b], r, delta)}
    assert edges == {tuple(e) for e in chrom["edges"]}  # the graph, rebuilt from the Fractions
    graph = igraph.Graph(n=n, edges=sorted(edges))
    w = chrom["witness"]
    if chrom["method"] == "independence":
        assert not any((a, b) in edges for a, b in itertools.combinations(w["independent_set"], 2))
        alpha = graph.independence_number()  # a second solver for α
        assert alpha == w["alpha"]
        bound = -(-n // alpha)
    elif chrom["method"] == "fractional":
        weights = [Fraction(v) for v in w["weights"]]
        assert min(weights) >= 0
        for s in graph.maximal_independent_vertex_sets():  # every independent set lies in one
            assert sum(weights[v] for v in s) <= 1
        bound = math.ceil(sum(weights))
    else:
        fixed = w["fixed"]
        assert all((a, b) in edges for a, b in itertools.combinations(sorted(fixed), 2))  # a clique
        assert w["cnf"] == colouring_cnf(n, sorted(edges), r, fixed)
        solver = z3.Solver()
        xs = {v: z3.Bool(f"x{v}") for v in range(1, n * r + 1)}
        for clause in w["cnf"]:
            solver.add(z3.Or([xs[abs(v)] if v > 0 else z3.Not(xs[abs(v)]) for v in clause]))
        assert solver.check() == z3.unsat  # a third solver, not of the MiniSat line
        bound = r + 1
    assert bound >= r + 1 == chrom["rank"]
    return bound


# -- the m = 6 middle layer at δ = 1/2 ---------------------------------------------------------


@pytest.mark.parametrize(("length", "rank", "method"), [(5, 4, "radon"), (6, 5, "chromatic"), (7, 6, "chromatic")])
def test_middle_layer_m6_beats_every_pair_certificate(length, rank, method):
    family = build_family("layer", m=6, distance=2, length=length)
    payload = certify(family, HALF).to_json(limit=0)
    assert (payload["certified_rank"], payload["method"]) == (rank, method)
    assert payload["bounds"]["radon"]["rank"] == 4 and payload["bounds"]["trace"]["rank"] <= 4
    assert exhaustive_pair_maximum(6, 2) == 4 < pair_ceiling(6, 2) == 5
    if method == "chromatic":
        assert payload["bounds"]["chromatic"]["method"] == ("independence" if rank == 5 else "sat")
        assert recheck(family, HALF, payload) >= rank


def test_middle_layer_m6_least_lengths():
    """5 from N = 6 (products 1/(N − 2)² ≤ 1/16), 6 from N = 7 (≤ 1/25): and not one shorter."""
    got = {n: certify(build_family("layer", m=6, distance=2, length=n), HALF).certified_rank for n in range(3, 9)}
    assert got == {3: 2, 4: 4, 5: 4, 6: 5, 7: 6, 8: 6}


def test_level_five_is_colourable_with_six():
    """χ of the graph of triples meeting in ≤ 1 point is exactly 6: the certificate at N = 8
    finds a 6-colouring at level 6 (decided) before refuting 5 colours at level 5."""
    payload = certify(build_family("layer", m=6, distance=2, length=8), HALF).to_json(limit=0)
    steps = payload["bounds"]["chromatic"]["steps"]
    assert steps[0] == {"level": 6, "vertices": 20, "edges": 100, "answer": False, "how": "colouring"}
    assert payload["bounds"]["chromatic"]["exact_search"]


# -- the pieces ----------------------------------------------------------------------------------


def test_colour_level_exhaustive():
    for a, b, strict in itertools.product(range(1, 30), range(1, 300), (True, False)):
        p, want = Fraction(a, b), 0
        while ((want + 1) ** 2 * a <= b) if strict else ((want + 1) ** 2 * a < b):
            want += 1
        assert colour_level(p, strict, 10**6) == want
        assert colour_level(p, strict, 3) == min(want, 3)


graphs = st.integers(1, 14).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60))
)


@settings(max_examples=150, deadline=None)
@given(graphs)
def test_max_clique_and_independent_sets_match_igraph(graph):
    n, pairs = graph
    edges = sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b})
    adj, g = bitsets(n, edges), igraph.Graph(n=n, edges=edges)
    found = max_clique(adj, 1, Work())
    assert len(found) == g.clique_number()
    assert all(b in g.neighbors(a) for a, b in itertools.combinations(found, 2))
    sets = maximal_independent_sets(adj, Work())
    mine = sorted(sorted(v for v in range(n) if s >> v & 1) for s in sets)
    assert mine == sorted(sorted(s) for s in g.maximal_independent_vertex_sets())


def test_work_budget_runs_out_not_the_clock():
    adj = bitsets(30, [(a, b) for a, b in itertools.combinations(range(30), 2) if (a * b) % 7 != 3])
    assert max_clique(adj, 1, Work(nodes=3)) is None
    assert max_clique(adj, 1, Work(nodes=10**6)) is not None


# -- certificates do not depend on the clock ---------------------------------------------------


def _families():
    yield build_family("layer", m=6, distance=2, length=7), HALF
    yield build_family("layer", m=8, length=5), HALF
    yield build_family("layer", m=6, distance=2, length=9), Fraction(2, 5)
    yield build_family("witness"), HALF


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


@pytest.mark.parametrize("speed", [100.0, 0.01])
def test_certificates_ignore_the_clock(monkeypatch, speed):
    full = [_strip(certify(f, d).to_json(limit=0)) for f, d in _families()]
    real = time.monotonic
    origin = real()
    monkeypatch.setattr(time, "monotonic", lambda: origin + (real() - origin) * speed)
    monkeypatch.setattr(work_mod, "CLOCK_EVERY", 1)
    again = [_strip(certify(f, d).to_json(limit=0)) for f, d in _families()]
    assert again == full
    assert not any(c["bounds"]["chromatic"] and c["bounds"]["chromatic"]["guard_hit"] for c in again)


# -- no certificate exceeds a rank that is built and checked exact -----------------------------


@st.composite
def small_families(draw):
    m = draw(st.integers(3, 6))
    w = draw(st.integers(1, m - 1))
    words = [c for c in itertools.combinations(range(m), w)]
    chosen = draw(st.lists(st.sampled_from(words), min_size=2, max_size=min(10, len(words)), unique=True))
    rows = []
    for support in chosen:
        x = np.zeros(m, dtype=np.int8)
        x[list(support)] = 1
        rows += [x, 1 - x]
    tokens = np.unique(np.array(rows), axis=0)
    key = {t.tobytes(): k for k, t in enumerate(tokens)}
    pairs = []
    for support in chosen:
        x = np.zeros(m, dtype=np.int8)
        x[list(support)] = 1
        pairs.append((key[x.tobytes()], key[(1 - x).astype(np.int8).tobytes()]))
    length = draw(st.integers(3, 9))
    queries = np.array(sorted({q for q, _ in pairs}))
    cands = np.array(sorted({g for _, g in pairs}))
    family = ProductFamily(tokens, queries, cands, 1, pairs, "small", {}, length)
    return family, draw(st.sampled_from([HALF, Fraction(2, 5), Fraction(1, 4)]))


@settings(max_examples=40, deadline=None)
@given(small_families())
def test_no_certificate_exceeds_an_exact_construction(drawn):
    family, delta = drawn
    payload = certify_and_construct(family, delta, 600)
    assert payload["certified_rank"] <= payload["constructed_rank"]
    if payload["method"] == "chromatic":
        recheck(family, delta, payload)


def test_fractional_bound_on_odd_cycles_and_the_triples():
    from kernelgap.theory.chromatic import fractional_bound

    for k in (5, 7, 9):
        frac = fractional_bound(bitsets(k, [(v, (v + 1) % k) for v in range(k)]), Work())
        assert frac["sum"] == Fraction(k, k // 2) and frac["bound"] == 3
    triples = list(itertools.combinations(range(6), 3))
    edges = [(a, b) for a, b in itertools.combinations(range(20), 2) if len(set(triples[a]) & set(triples[b])) <= 1]
    frac = fractional_bound(bitsets(20, edges), Work())
    assert frac["sum"] == 5 and frac["bound"] == 5  # χ_f = 20/α = 5 (vertex-transitive)
    graph = igraph.Graph(n=20, edges=edges)
    assert all(sum(frac["weights"][v] for v in s) <= 1 for s in graph.maximal_independent_vertex_sets())


def test_recheck_catches_a_forged_witness():
    family = build_family("layer", m=6, distance=2, length=7)
    payload = certify(family, HALF).to_json(limit=0)
    payload["bounds"]["chromatic"]["edges"].append([0, 1])  # a pair the Fractions do not join
    with pytest.raises(AssertionError):
        recheck(family, HALF, payload)
    payload = certify(build_family("layer", m=6, distance=2, length=6), HALF).to_json(limit=0)
    payload["bounds"]["chromatic"]["witness"]["alpha"] = 3  # claims ⌈20/3⌉ = 7
    with pytest.raises(AssertionError):
        recheck(build_family("layer", m=6, distance=2, length=6), HALF, payload)
