"""The chromatic certificate: colour the simplex points by their largest coordinate
(docs/theory.md, "The chromatic certificate").

As in the Radon bound, an exact head of rank r gives probability vectors ``a_i`` in the
simplex of ``R^r`` with ``<a_i, a_j> ≤ B_ij B_ji``.  Colour entry i by a coordinate k where
``a_i`` is largest (``a_ik ≥ 1/r``): two entries of one colour have
``<a_i, a_j> ≥ a_ik a_jk ≥ 1/r²``.  So the graph ``H_r`` of the pairs with ``ε_ij ε_ji ≤ 1/r²``
(``< 1/r²`` where neither bound is strict) is properly coloured by r colours, and a lower bound
``χ(H_r) ≥ r + 1`` certifies rank ``≥ r + 1``.  The graphs are nested (``H_{r+1} ⊆ H_r``), so
the levels are tried from the top down and the first one that certifies is kept.

At a level r only the r-core of ``H_r`` is searched (a vertex of degree < r takes a colour its
neighbours leave free), and three lower bounds on its χ are tried, each with a witness a
reader can re-check (:mod:`.chromatic_check` re-checks them on a second path):

* ``independence``: ``χ ≥ ⌈n/α⌉`` with α exact (a maximum clique of the complement, searched in
  counted nodes, :func:`.work.max_clique`); the witness is a maximum independent set;
* ``fractional``: the LP dual over every maximal independent set (enumerated in counted nodes)
  solved by HiGHS within an iteration limit, turned into exact rationals and rescaled until
  every independent set has weight ≤ 1: ``χ ≥ χ_f ≥ ⌈Σ w⌉``; the witness is the weights;
* ``sat``: r-colourability refuted by CaDiCaL within a conflict limit and the refutation
  confirmed by MiniSat (a second solver); the witness is the CNF (DIMACS clauses), with the
  colours of one clique fixed to break the symmetry of the colours.

A level whose CNF the solver satisfies is decided: ``χ(H_r) ≤ r`` (the colouring is kept).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .pair_bounds import PairBounds
from .radon import _core, _greedy_clique, exact_levels
from .work import OutOfWork, Work, bitsets, complement, max_clique

#: Largest number of matching entries the chromatic certificate is tried on (n² exact levels).
MAX_ENTRIES = 512
#: Largest core whose maximal independent sets are enumerated for the fractional bound.
LP_VERTICES = 64
#: Most maximal independent sets the LP is built from (beyond: no fractional bound).
LP_SETS = 20_000
#: HiGHS simplex iterations per LP.
LP_ITERATIONS = 100_000
#: Largest core a SAT refutation is tried on, and the solver conflicts per solve.
SAT_VERTICES = 256
SAT_CONFLICTS = 200_000
#: Denominators the LP weights are rounded to before the exact rescaling.
WEIGHT_DENOMINATOR = 10_000
#: The CNF is written into the witness up to this many clauses.
CNF_CLAUSES = 20_000


@dataclass
class ChromaticBound:
    """``rank``: certified rank (0: none above the floor); ``level``: r with ``χ(H_r) ≥ r + 1``;
    ``method``: the bound that proved it; ``vertices``: the entries of the graph it was proved
    on (matching indices); ``witness``: the method's witness (local vertex numbers index
    ``vertices``); ``exact_search``: every level above was decided (an r-colouring found);
    ``work``: nodes, conflicts and LP iterations spent; ``guard_hit``: the hang guard stopped a
    search."""

    rank: int = 0
    level: int = 0
    method: str | None = None
    vertices: list[int] = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)
    witness: dict = field(default_factory=dict)
    exact_search: bool = True
    steps: list[dict] = field(default_factory=list)
    work: dict = field(default_factory=dict)
    guard_hit: bool = False
    seconds: float = 0.0
    skipped: str | None = None


def colour_level(p: Fraction, strict: bool, cap: int) -> int:
    """Largest r with ``r²·p ≤ 1`` (strict bounds) or ``r²·p < 1`` (otherwise), at most ``cap``:
    integers only (``r² a ≤ b`` for ``p = a/b``)."""
    a, b = p.numerator, p.denominator
    if a == 0:
        return cap
    return min(math.isqrt(b // a if strict else (b - 1) // a), cap)


def chromatic_levels(bounds: PairBounds) -> np.ndarray:
    """``L[i, j]``: the largest r at which the pair is an edge of ``H_r`` (−1: unbounded), exact."""
    n = bounds.n
    out = np.full((n, n), -1, dtype=np.int32)
    ok = (bounds.reason == 0) & (bounds.reason.T == 0)
    np.fill_diagonal(ok, False)
    i, j = np.nonzero(ok)
    if len(i):
        out[i, j] = exact_levels(bounds, i, j, colour_level, n)
    return out


# -- the three lower bounds ------------------------------------------------------------------


def independence_bound(adj: list[int], work: Work) -> dict | None:
    """``⌈n/α⌉`` with α from a maximum clique of the complement; None when out of work."""
    found = max_clique(complement(adj), 1, work)
    if not found:
        return None
    return {"bound": -(-len(adj) // len(found)), "alpha": len(found), "independent_set": found}


def maximal_independent_sets(adj: list[int], work: Work, limit: int = LP_SETS) -> list[int] | None:
    """Every maximal independent set (as a bitset), by Bron–Kerbosch with a pivot on the
    complement; None when out of work or past ``limit`` sets."""
    co = complement(adj)
    found: list[int] = []

    def extend(chosen: int, open_: int, done: int) -> None:
        work.tick()
        if not open_ and not done:
            found.append(chosen)
            if len(found) > limit:
                raise OutOfWork
            return
        union = open_ | done
        pivot = max((v for v in range(len(co)) if union >> v & 1), key=lambda v: (open_ & co[v]).bit_count())
        branch = open_ & ~co[pivot]
        while branch:
            v = (branch & -branch).bit_length() - 1
            branch &= branch - 1
            extend(chosen | 1 << v, open_ & co[v], done & co[v])
            open_ &= ~(1 << v)
            done |= 1 << v

    try:
        extend(0, (1 << len(adj)) - 1, 0)
    except OutOfWork:
        return None
    return found


def exact_weights(values, sets: list[int]) -> list[Fraction]:
    """LP weights as rationals, clipped at 0 and rescaled so every set has weight ≤ 1, exactly."""
    w = [max(Fraction(float(x)).limit_denominator(WEIGHT_DENOMINATOR), Fraction(0)) for x in values]
    heaviest = max(sum((w[v] for v in range(len(w)) if s >> v & 1), Fraction(0)) for s in sets)
    return [x / heaviest for x in w] if heaviest > 1 else w


def fractional_bound(adj: list[int], work: Work, iterations: int = LP_ITERATIONS) -> dict | None:
    """``χ_f ≥ Σ w`` for the exact weights of the LP dual (module docstring); None when the sets
    or the LP are out of reach."""
    import highspy

    sets = maximal_independent_sets(adj, work)
    if sets is None:
        return None
    n = len(adj)
    starts, index = [0], []
    for s in sets:
        index += [v for v in range(n) if s >> v & 1]
        starts.append(len(index))
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("simplex_iteration_limit", iterations)
    h.setOptionValue("solver", "simplex")
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, len(sets)
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = np.ones(n), np.zeros(n), np.full(n, highspy.kHighsInf)
    lp.row_lower_, lp.row_upper_ = np.full(len(sets), -highspy.kHighsInf), np.ones(len(sets))
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = starts, index, np.ones(len(index))
    lp.a_matrix_.num_row_, lp.a_matrix_.num_col_ = len(sets), n
    h.passModel(lp)
    h.run()
    spent = int(h.getInfo().simplex_iteration_count)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return {"bound": 0, "iterations": spent, "weights": None}
    weights = exact_weights(h.getSolution().col_value, sets)
    total = sum(weights, Fraction(0))
    return {
        "bound": math.ceil(total),
        "sum": total,
        "weights": weights,
        "maximal_independent_sets": len(sets),
        "iterations": spent,
    }


def colouring_cnf(n: int, edges: list[tuple[int, int]], colours: int, fixed: list[int]) -> list[list[int]]:
    """CNF of a proper ``colours``-colouring: variable ``v·colours + c + 1`` says v has colour c;
    each vertex some colour, no edge one colour twice, vertex ``fixed[c]`` coloured c."""
    var = lambda v, c: v * colours + c + 1  # noqa: E731
    cnf = [[var(v, c) for c in range(colours)] for v in range(n)]
    cnf += [[-var(i, c), -var(j, c)] for i, j in edges for c in range(colours)]
    cnf += [[var(v, c)] for c, v in enumerate(fixed)]
    return cnf


def sat_bound(n: int, edges: list[tuple[int, int]], colours: int, fixed: list[int], conflicts: int) -> dict:
    """Refute a ``colours``-colouring: CaDiCaL, then MiniSat to confirm an UNSAT.  ``answer``:
    False (refuted by both), True (a colouring, kept), None (out of conflicts or disagreement)."""
    from pysat.solvers import Cadical195, Minisat22

    cnf = colouring_cnf(n, edges, colours, fixed)
    out: dict = {"colours": colours, "fixed": fixed, "variables": n * colours, "clauses": len(cnf)}
    with Cadical195(bootstrap_with=cnf) as first:
        first.conf_budget(conflicts)
        answer = first.solve_limited()
        out["conflicts"] = int(first.accum_stats().get("conflicts", 0))
        model = first.get_model() if answer else None
    if answer:
        colour = [next(c for c in range(colours) if model[v * colours + c] > 0) for v in range(n)]
        return out | {"answer": True, "colouring": colour}
    if answer is None:
        return out | {"answer": None}
    with Minisat22(bootstrap_with=cnf) as second:
        second.conf_budget(conflicts)
        confirmed = second.solve_limited()
        out["confirm_conflicts"] = int(second.accum_stats().get("conflicts", 0))
    out["confirmed_by"] = "minisat22" if confirmed is False else None
    if len(cnf) <= CNF_CLAUSES:
        out["cnf"] = cnf
    return out | {"answer": False if confirmed is False else None}


# -- the certificate -------------------------------------------------------------------------


def chromatic_bound(
    bounds: PairBounds, floor: int, work: Work | None = None, conflicts: int = SAT_CONFLICTS
) -> ChromaticBound:
    """The largest ``r + 1 > floor`` with a proven ``χ(H_r) ≥ r + 1`` (module docstring); rank 0
    when no level above ``floor − 1`` certifies.  ``work`` counts clique and enumeration nodes;
    SAT conflicts and LP iterations have their own fixed limits."""
    start = time.monotonic()
    work = Work() if work is None else work
    n = bounds.n
    if n > MAX_ENTRIES:
        return ChromaticBound(skipped=f"{n:,} entries: the chromatic certificate is tried up to {MAX_ENTRIES}")
    result = ChromaticBound()
    if n < 2:
        return result
    levels = chromatic_levels(bounds)
    spent = {"nodes": 0, "conflicts": 0, "lp_iterations": 0}
    for r in range(min(n - 1, int(levels.max())), max(floor, 1) - 1, -1):
        adj = levels >= r
        core = _core(adj, r)
        if len(core) < r + 1:
            continue
        local = adj[np.ix_(core, core)]
        edges = [(int(i), int(j)) for i, j in np.argwhere(np.triu(local, 1))]
        graph = bitsets(len(core), edges)
        step, proof = _level(graph, edges, r, local, work, conflicts, spent)
        result.steps.append({"level": r, "vertices": len(core), "edges": len(edges)} | step)
        if step["answer"] is None:
            result.exact_search = False
        if proof is not None:
            result.rank, result.level, result.method, result.witness = r + 1, r, step["how"], proof
            result.vertices, result.edges = [int(v) for v in core], edges
            break
    result.work = spent | {"nodes": work.used}
    result.guard_hit = work.guard_hit
    result.seconds = time.monotonic() - start
    return result


def _level(graph, edges, r, local, work, conflicts, spent) -> tuple[dict, dict | None]:
    """Decide ``χ ≥ r + 1`` on one core: ``(step, witness or None)``."""
    n = len(graph)
    if not work.guard_hit:
        ind = independence_bound(graph, work)
        if ind is not None and ind["bound"] >= r + 1:
            return {"answer": True, "how": "independence"}, ind
        if n <= LP_VERTICES and not work.guard_hit:
            frac = fractional_bound(graph, work)
            if frac is not None:
                spent["lp_iterations"] += frac["iterations"]
                if frac["bound"] >= r + 1:
                    return {"answer": True, "how": "fractional"}, frac
    if n > SAT_VERTICES:
        return {"answer": None, "how": "too large"}, None
    clique = sorted(_greedy_clique(local, np.arange(n)))[:r]
    sat = sat_bound(n, edges, r, clique, conflicts)
    spent["conflicts"] += sat["conflicts"] + sat.get("confirm_conflicts", 0)
    if sat["answer"] is False:
        return {"answer": True, "how": "sat"}, sat
    if sat["answer"]:
        return {"answer": False, "how": "colouring"}, None
    return {"answer": None, "how": "conflicts"}, None
