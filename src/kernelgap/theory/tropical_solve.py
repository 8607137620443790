"""Deciding whether a rank-r min-plus table orders a family (docs/theory.md, "The tropical
wall"), with no bound on the table's values.

**z3** (:func:`solve_z3`, on the reduced :class:`~.tropical.OrderProblem`): linear real
arithmetic with one lower threshold ``a`` and one upper threshold ``b`` per constrained level
of each row.  A candidate z at a level that must lie *above* another gets
``∧_k p_xk + q_kz ≥ a`` (its T is at least a), one at a level that must lie *below* another
``∨_k p_xk + q_kz ≤ b`` (its T is at most b), and each constrained pair of levels
``b_lo + margin ≤ a_hi``.  The margins 0 or 1 are scale-free.

**cvc5** (:func:`solve_cvc5`, on the unreduced :class:`~.tropical.OrderFamily`): a second
encoding built apart — one variable ``T_xz`` per query and candidate with
``T_xz ≤ p_xk + q_kz`` for every k and ``∨_k T_xz ≥ p_xk + q_kz`` (so ``T_xz`` is the
minimum), and every ordered pair of candidates ``T_xz' − T_xz ≥ margin``, overlaps computed
from the token bits, no level, threshold or merge.

**Symmetry breaking** (both, proved sound in docs/theory.md): the features of a table can be
permuted freely, so the i-th disjunction (0-based, in a fixed order) may be restricted to
features ``0..i``: in any solution, walk the disjunctions in order and swap a witness that is
not among the features already used into the first unused position.

Budgets are the solvers' own work counters (z3's ``rlimit``, cvc5's resource units), never
seconds; an answer the budget cut short is ``unknown``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

from ..limits import WALL_RLIMIT
from .tropical import OrderFamily, OrderProblem, margin

#: Default work budget of one solver call (z3 rlimit units; about a minute of one core).
DEFAULT_RLIMIT = WALL_RLIMIT


@dataclass
class Solved:
    """One solver call: ``status`` ("sat", "unsat", "unknown"), the ``rank`` asked, the work
    it spent (``work``, the solver's counter) and wall ``seconds`` (reported, never a limit);
    on sat the rational tables ``p`` (rows) and ``q`` (keys)."""

    solver: str
    rank: int
    status: str
    work: int
    seconds: float
    p: list = field(default_factory=list)
    q: list = field(default_factory=list)


def _frac(value) -> Fraction:
    if hasattr(value, "numerator_as_long"):
        return Fraction(value.numerator_as_long(), value.denominator_as_long())
    return Fraction(str(value.as_fraction() if hasattr(value, "as_fraction") else value))


def _read(model, table) -> list[list[Fraction]]:
    """A table of solver variables (or fixed Fractions) as its values in ``model``."""
    return [
        [v if isinstance(v, Fraction) else _frac(model.eval(v, model_completion=True)) for v in row] for row in table
    ]


def solve_z3(problem: OrderProblem, rank: int, rlimit: int = DEFAULT_RLIMIT) -> Solved:
    """Whether a rank-``rank`` table orders the reduced problem (module docstring)."""
    import z3

    start = time.perf_counter()
    ctx = z3.Context()
    solver = z3.Solver(ctx=ctx)
    solver.set("rlimit", int(rlimit))
    p = [[z3.Real(f"p{i}_{k}", ctx) for k in range(rank)] for i in range(len(problem.rows))]
    q = [[z3.Real(f"q{k}_{z}", ctx) for z in range(problem.keys)] for k in range(rank)]
    clauses = 0
    for i, row in enumerate(problem.rows):
        clauses = z3_row(z3, solver, i, p[i], q, row, list(problem.pairs(i)), clauses)
    return z3_answer(solver, "z3", rank, p, q, start)


def z3_row(z3, solver, x: int, row, q, cells, pairs, clauses: int | None = None) -> int | None:
    """Row x's conditions (module docstring): each constrained pair of levels ordered, and per
    ``(key, level)`` of ``cells`` its T bounded below by the level's ``a`` and above by its ``b``.
    ``clauses``: the disjunctions before this row, for symmetry breaking (None: none); returns
    the count after it."""
    ctx = solver.ctx
    a = {hi: z3.Real(f"a{x}_{hi}", ctx) for _, hi, _ in pairs}
    b = {lo: z3.Real(f"b{x}_{lo}", ctx) for lo, _, _ in pairs}
    for lo, hi, need in pairs:
        solver.add(b[lo] + need <= a[hi])
    for key, level in cells:
        if level in a:
            solver.add(*[row[k] + q[k][key] >= a[level] for k in range(len(row))])
        if level in b:
            witnesses = range(len(row) if clauses is None else min(len(row), clauses + 1))
            solver.add(z3.Or([row[k] + q[k][key] <= b[level] for k in witnesses], ctx))
            clauses = None if clauses is None else clauses + 1
    return clauses


def z3_answer(solver, name: str, rank: int, p, q, start: float) -> Solved:
    """Check ``solver`` once: its answer, the work it spent (z3's rlimit count) and, on sat,
    the rational tables ``p`` and ``q`` read from its model."""
    answer = str(solver.check())
    stats = solver.statistics()
    work = int(stats.get_key_value("rlimit count")) if "rlimit count" in stats.keys() else 0
    out = Solved(name, rank, answer, work, time.perf_counter() - start)
    if answer == "sat":
        out.p, out.q = _read(solver.model(), p), _read(solver.model(), q)
    return out


def solve_cvc5(family: OrderFamily, mode: str, rank: int, rlimit: int = DEFAULT_RLIMIT) -> Solved:
    """The same question on the unreduced family, by cvc5 on the second encoding (module
    docstring); used to confirm an unsat answer of :func:`solve_z3`."""
    from cvc5 import pythonic as cv

    start = time.perf_counter()
    solver = cv.Solver()
    solver.set("rlimit", int(rlimit))
    qcols = sorted({z for cands in family.candidates for z in cands})
    p = [[cv.Real(f"p{j}_{k}") for k in range(rank)] for j in range(len(family.queries))]
    q = {z: [cv.Real(f"q{k}_{z}") for k in range(rank)] for z in qcols}
    clauses = 0
    for j, x in enumerate(family.queries):
        level = {
            z: sum(u * v for u, v in zip(family.tokens[x], family.tokens[z], strict=True)) for z in family.candidates[j]
        }
        pairs = [
            (z, z2, margin(level[z2] - level[z], mode))
            for z in level
            for z2 in level
            if level[z2] > level[z] and margin(level[z2] - level[z], mode) is not None
        ]
        used = sorted({z for z, _, _ in pairs} | {z2 for _, z2, _ in pairs})
        t = {z: cv.Real(f"t{j}_{z}") for z in used}
        for z in used:
            solver.add(*[t[z] <= p[j][k] + q[z][k] for k in range(rank)])
            witnesses = range(min(rank, clauses + 1))  # symmetry breaking
            solver.add(cv.Or(*[t[z] >= p[j][k] + q[z][k] for k in witnesses]))
            clauses += 1
        for z, z2, need in pairs:
            solver.add(t[z2] - t[z] >= need)
    answer = str(solver.check())
    work = _cvc5_work(solver)
    out = Solved("cvc5", rank, answer, work, time.perf_counter() - start)
    if answer == "sat":
        # tokens that are no candidate: no condition, any entry
        q_table = [[q[z][k] if z in q else Fraction(0) for z in range(len(family.tokens))] for k in range(rank)]
        out.p, out.q = _read(solver.model(), p), _read(solver.model(), q_table)
    return out


def _cvc5_work(solver) -> int:
    for key, value in solver.solver.getStatistics():
        if key == "resource::resourceUnitsUsed":
            return int(value["value"])
    return 0
