"""Min-plus tables that order a family's candidates, their heads, and the exact wall
(docs/theory.md, "The tropical wall"): the solver against a plain integer re-check, a second
solver on its own encoding and enumeration; the heads scored on every sequence of the cube;
the least rank never below a certificate kernelgap computes."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgap.cli import main
from kernelgap.models.tropical_head import score_cube_head
from kernelgap.task.family import ProductFamily
from kernelgap.theory.ceiling import exhaustive_pair_maximum
from kernelgap.theory.certificate import certify
from kernelgap.theory.tropical import (
    MODES,
    OrderFamily,
    OrderProblem,
    brute_force_rank1,
    check_table,
    cube_family,
    expand_table,
    integer_table,
    margin,
    product_order_family,
    recheck,
    reduce_family,
)
from kernelgap.theory.tropical_solve import solve_cvc5, solve_z3
from kernelgap.theory.wall import wall_entry

#: Work budget of each solver call in these tests (z3 rlimit / cvc5 resource units).
BUDGET = 50_000_000
#: The least ranks of the cube, measured (z3 sat at the rank, unsat below, cvc5 agreeing).
CUBE_RANKS = {(2, "strict"): 2, (3, "strict"): 3, (2, "lower"): 1, (3, "lower"): 1, (2, "upper"): 1, (3, "upper"): 2}


def brute_force_small(problem: OrderProblem, rank: int, values: int) -> tuple | None:
    """A table of ``rank`` with every entry in ``0..values − 1`` that orders the problem, by
    enumeration (None: none in that box; a one-sided check for rank ≥ 2)."""
    n, c = len(problem.rows), problem.keys
    for flat in itertools.product(range(values), repeat=rank * (n + c)):
        p = [list(flat[i * rank : (i + 1) * rank]) for i in range(n)]
        rest = flat[n * rank :]
        q = [list(rest[k * c : (k + 1) * c]) for k in range(rank)]
        if not check_table(problem, p, q):
            return p, q
    return None


def least(problem, start: int = 1, most: int = 6):
    """The least rank z3 finds a table for, and the last answer (tables, or None)."""
    for rank in range(start, most + 1):
        found = solve_z3(problem, rank, BUDGET)
        assert found.status in ("sat", "unsat")
        if found.status == "sat":
            return rank, found
    return None, None


def test_margins_are_the_modes_orders():
    """Exhaustive over gaps 1..4: strict asks every gap to rise, lower and upper gaps ≥ 2, upper
    gap 1 weakly."""
    assert [margin(g, "strict") for g in (1, 2, 3, 4)] == [1, 1, 1, 1]
    assert [margin(g, "lower") for g in (1, 2, 3, 4)] == [None, 1, 1, 1]
    assert [margin(g, "upper") for g in (1, 2, 3, 4)] == [0, 1, 1, 1]


@pytest.mark.parametrize("m", [2, 3])
@pytest.mark.parametrize("mode", MODES)
def test_cube_least_rank_rechecked_and_refuted_below(m, mode):
    """The least rank of the cube: the table re-checked in integers on every query and pair of
    candidates, the rank below refuted by z3 and by cvc5 on its own encoding."""
    family = cube_family(m)
    problem = reduce_family(family, mode)
    rank, found = least(problem)
    assert rank == CUBE_RANKS[(m, mode)]
    p, q = integer_table(found.p, found.q)
    assert check_table(problem, p, q) == []
    assert recheck(family, mode, *expand_table(family, problem, p, q)) == []
    if rank > 1:
        assert solve_cvc5(family, mode, rank - 1, BUDGET).status == "unsat"
        assert solve_cvc5(family, mode, rank, BUDGET).status == "sat"


def test_the_pair_maximum_is_a_floor_of_the_tropical_rank():
    """docs/theory.md: a tropical table has rank ≥ any pair system's size; the solver agrees."""
    for m in (2, 3, 4):
        for mode, gap in (("strict", 1), ("lower", 2)):
            floor = exhaustive_pair_maximum(m, gap)
            if floor > 1:
                assert solve_z3(reduce_family(cube_family(m), mode), floor - 1, BUDGET * 4).status == "unsat"


def test_the_recheck_refuses_a_broken_table():
    """Lifting the column of 0…0 (every query's lowest level) above the rest, or flattening
    the table, is caught by both checks."""
    family = cube_family(3)
    problem = reduce_family(family, "strict")
    _, found = least(problem, 3)
    p, q = integer_table(found.p, found.q)
    pt, qt = expand_table(family, problem, p, q)
    top = max(abs(v) for row in qt + pt for v in row) * 3 + 1
    lifted = [[top if z == 0 else v for z, v in enumerate(row)] for row in qt]  # 0…0 now last for all
    assert recheck(family, "strict", pt, qt) == [] and recheck(family, "strict", pt, lifted) != []
    flat = [[0] * len(qt[0]) for _ in qt]  # every T equal: no strict order anywhere
    assert recheck(family, "strict", pt, flat) != []
    assert check_table(problem, [[0] * 3 for _ in p], [[0] * problem.keys for _ in range(3)]) != []


def random_family(data, m_max: int = 3, queries: int = 3, candidates: int = 4) -> OrderFamily:
    m = data.draw(st.integers(2, m_max))
    ids = data.draw(st.lists(st.integers(0, (1 << m) - 1), min_size=2, max_size=candidates + queries, unique=True))
    tokens = tuple(tuple((t >> (m - 1 - i)) & 1 for i in range(m)) for t in ids)
    n = len(tokens)
    qs = tuple(sorted(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=queries, unique=True))))
    cs = tuple(sorted(data.draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=candidates, unique=True))))
    family = ProductFamily(tokens=np.array(tokens, dtype=np.uint8), queries=np.array(qs), candidates=np.array(cs))
    order = product_order_family(family)
    assert order == OrderFamily(tokens, qs, tuple(cs for _ in qs), family.name)
    return order


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(MODES))
def test_solvers_agree_with_each_other_and_with_enumeration(data, mode):
    """Random small product families: z3's rank-1 answer is enumeration's; every sat table passes
    the integer re-check; every unsat is cvc5's too, and cvc5 finds a table at the least rank."""
    family = random_family(data)
    problem = reduce_family(family, mode)
    if not problem.rows:
        return
    rank, found = least(problem)
    assert rank is not None
    assert brute_force_rank1(problem) == (rank == 1)
    p, q = integer_table(found.p, found.q)
    assert recheck(family, mode, *expand_table(family, problem, p, q)) == []
    if rank > 1:
        assert solve_cvc5(family, mode, rank - 1, BUDGET).status == "unsat"
    second = solve_cvc5(family, mode, rank, BUDGET)
    assert second.status == "sat"
    p2, q2 = integer_table(second.p, second.q)
    assert recheck(family, mode, p2, q2) == []


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_a_table_found_by_enumeration_is_one_the_solver_finds(data):
    """Rank 2 with entries 0..2 on tiny problems: a table enumeration finds means z3 says sat."""
    family = random_family(data, m_max=2, queries=2, candidates=3)
    problem = reduce_family(family, "strict")
    if not problem.rows or len(problem.rows) * 2 + problem.keys * 2 > 10:
        return
    boxed = brute_force_small(problem, 2, 3)
    if boxed is not None:
        assert check_table(problem, *boxed) == []
        assert solve_z3(problem, 2, BUDGET).status == "sat"


def test_product_family_reduction_merges_and_drops():
    """Two candidates with one overlap profile share a key; a one-level query is dropped."""
    tokens = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=np.uint8)
    family = ProductFamily(tokens=tokens, queries=np.array([0, 1]), candidates=np.array([2, 3, 4]))
    problem = reduce_family(product_order_family(family), "strict")
    assert problem.row_of == (None, 0)  # the all-zero query sees one level
    assert problem.keys == 2 and problem.key_of[2] == problem.key_of[4] != problem.key_of[3]


def with_matching(family: OrderFamily, length: int) -> ProductFamily:
    """The family as a kernelgap product family, each query matched with its least candidate."""
    cands = family.candidates[0]
    matching = [(x, min(cands, key=lambda z: family.overlap(x, z))) for x in family.queries]
    return ProductFamily(
        tokens=np.array(family.tokens, dtype=np.uint8),
        queries=np.array(family.queries),
        candidates=np.array(cands),
        matching=matching,
        length=length,
    )


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_least_rank_is_never_below_a_certificate(data):
    """A table of rank r gives an exact head of rank r at every length (its key at the query's own
    position zero), so no certificate at any length exceeds the least rank: strict against
    δ = 2/5, lower (a floor of every exact head from N = r + 1) against δ = 1/2."""
    family = random_family(data, m_max=4, queries=4, candidates=5)
    for mode, delta in (("strict", "2/5"), ("lower", "1/2")):
        problem = reduce_family(family, mode)
        rank = least(problem, 1, 8)[0] if problem.rows else 1
        for length in (3, 6, 40):
            try:
                cert = certify(with_matching(family, length), delta).certified_rank
            except Exception as exc:  # a family the certificate has nothing to compare in
                assert "compare" in str(exc) or "matching" in str(exc), exc
                continue
            assert cert <= rank, (mode, length, cert, rank)


def test_a_gap_one_reversal_alone_is_not_fatal():
    """The weak order at gap 1 is sufficient, not necessary: one query, candidates at levels 0
    and 1, the lower one 1000 times lighter, bias −1/2 + (1 − f)/2 with f the heaviest share of
    the level-1 slots in a sequence that holds the level-0 one: every sequence errs by < 1/2
    (exact rationals, N = 3..8)."""
    light = Fraction(1, 1000)
    for n in range(3, 9):
        share = Fraction(n - 2) / (light + n - 2)
        bias = Fraction(-1, 2) + (1 - share) / 2
        for k in range(n):  # k slots of the level-0 candidate, the rest level 1
            p = Fraction(n - 1 - k) / (k * light + n - 1 - k) + bias
            assert abs(p - (0 if k else 1)) < Fraction(1, 2)


@pytest.mark.parametrize("m", [2, 3])
def test_cube_heads_are_exact_on_every_sequence(m):
    """The wall's entries for m = 2, 3: least ranks as measured, heads scored on every length-3 and
    length-4 sequence of the cube, every position: within δ/2 at δ = 2/5 (strict tables), below
    1/2 and within the stated bound at δ = 1/2 (upper tables)."""
    for delta in ("2/5", "1/2"):
        entry = wall_entry(m, delta, BUDGET)
        scores = [s for f in entry["tables"].values() for s in f["scores"]]
        assert [s["length"] for s in scores] == [3, 4]
        assert all(s["exact"] and s["within_bound"] for s in scores)
        if delta == "2/5":
            assert entry["lower"] == entry["upper"] == CUBE_RANKS[(m, "strict")]
            assert all(s["max_error"] <= 0.2 for s in scores)
        else:
            assert (entry["lower"], entry["upper"]) == (CUBE_RANKS[(m, "lower")], CUBE_RANKS[(m, "upper")])


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, rank, delta", [("strict", 6, Fraction(2, 5)), ("upper", 4, Fraction(1, 2)), ("lower", 2, None)]
)
def test_cube_m4_heads_and_ranks(mode, rank, delta):
    """m = 4: strict 6 = C(4, 2), upper 4, lower 2, each table re-checked in integers with z3
    refuting the rank below, and the strict and upper heads exact (within their stated bounds)
    on every length-3 and -4 sequence.  cvc5's confirmation of those refutations (about 90 s) is
    left to the paper profile's exact wall, which records it; it is tested here for m ≤ 3."""
    family = cube_family(4)
    problem = reduce_family(family, mode)
    found = solve_z3(problem, rank, BUDGET * 4)
    assert found.status == "sat" and solve_z3(problem, rank - 1, BUDGET * 4).status == "unsat"
    p_tokens, q_tokens = expand_table(family, problem, *integer_table(found.p, found.q))
    assert recheck(family, mode, p_tokens, q_tokens) == []
    if delta is not None:
        scores = [score_cube_head(p_tokens, q_tokens, 4, mode, n, delta) for n in (3, 4)]
        assert [s["sequences"] for s in scores] == [1 << 12, 1 << 16]
        assert all(s["exact"] and s["within_bound"] for s in scores)


def test_wall_command(capsys):
    """``kernelgap wall --json`` prints the table; a bad flag is one line, exit 2."""
    main(["wall", "--m", "2", "--delta", "2/5,1/2", "--json"])
    payload = json.loads(capsys.readouterr().out)
    (strict, half) = payload["entries"]
    assert (strict["lower"], strict["upper"], strict["from_length"]) == (2, 2, 7)
    assert (half["lower"], half["upper"], half["pair_maximum"]) == (1, 1, 1)
    main(["wall", "--m", "2", "--delta", "2/5"])
    assert "least exact rank 2 from N=7 (strict 2)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["wall", "--m", "9"])
    assert exc.value.code == 2 and capsys.readouterr().err.startswith("error: ")


def test_the_shift_is_a_symmetry_and_the_cyclic_search_finds_real_tables():
    """σ has order m, preserves overlaps; the σ-invariant search's table (m = 3, rank 3 = one
    orbit) passes the integer re-check on every query, not only the orbit representatives."""
    from kernelgap.theory.tropical_cyclic import shift, solve_cyclic

    for m in (2, 3, 4):
        family = cube_family(m)
        for x in range(1 << m):
            assert shift(x, m, m) == x and shift(shift(x, m), m, -1) == x
            for z in range(1 << m):
                assert family.overlap(shift(x, m), shift(z, m)) == family.overlap(x, z)
    for mode, rank in (("strict", 3), ("upper", 3)):
        found = solve_cyclic(3, mode, rank, BUDGET)
        assert found.status == "sat"
        assert recheck(cube_family(3), mode, *integer_table(found.p, found.q)) == []


def test_an_undecided_search_stops_and_says_so(monkeypatch):
    """Solvers that never decide (stubbed): the search stops after MAX_UNDECIDED ranks with no
    table, the entry's upper end unknown and its lower end only what is proved (the pair floor)."""
    from kernelgap.theory import wall
    from kernelgap.theory.tropical_solve import Solved

    asked = []

    def unknown(*args):
        asked.append(args)
        return Solved("stub", args[-2], "unknown", 0, 0.0)

    monkeypatch.setattr(wall, "solve_z3", unknown)
    monkeypatch.setattr(wall, "solve_cyclic", unknown)
    entry = wall.wall_entry(3, "2/5", 1000)
    assert entry["upper"] is None and entry["lower"] == 3 and entry["tables"]["strict"]["scores"] == []
    assert len(asked) == 2 * wall.MAX_UNDECIDED
    assert "least exact rank [3, ?]" in wall.wall_line(entry)


def test_a_strict_table_stands_in_where_no_upper_table_is_found():
    """The strict order implies the upper one: where the upper search finds nothing (here made
    to), the strict table's head, built as an upper head, is exact at δ = 1/2 on every sequence
    of length 3 and 4, and gives the entry its upper end; the strict search is asked once per m."""
    from kernelgap.theory.wall import least_rank

    known = {}
    first = wall_entry(2, "2/5", BUDGET, known=known)
    (key,) = known
    assert key[:2] == (2, "strict")
    known[(2, "upper", 1, BUDGET)] = {"mode": "upper", "rank": None, "lower": 1, "z3_lower": 1, "calls": []}
    known[(2, "lower", 1, BUDGET)] = least_rank(2, "lower", 1, BUDGET)
    entry = wall_entry(2, "1/2", BUDGET, known=known)
    stand_in = entry["tables"]["upper"]["via_strict"]
    assert stand_in["rank"] == first["upper"] == entry["upper"] == 2 and entry["lower"] == 1
    assert [s["length"] for s in stand_in["scores"]] == [3, 4]
    assert all(s["exact"] and s["within_bound"] for s in stand_in["scores"])
    assert len(known) == 3  # the strict answer of the first entry was reused
