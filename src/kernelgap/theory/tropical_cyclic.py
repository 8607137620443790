"""Tables of the cube invariant under the cyclic shift of coordinates: a smaller search that
can only *find* tables (docs/theory.md, "The tropical wall").

The shift σ (bit i to bit i + 1 mod m) maps the cube's order problem to itself.  A rank
``r = a·m + b`` table is searched in the form where σ permutes the features too: a orbits of m
features (``k = o·m + j``) and b fixed features, with

    p[x][o·m + j] = P_o[σ^{−j} x],   q[o·m + j][z] = Q_o[σ^{−j} z],
    p[x][k] = P_k[x], q[k][z] = Q_k[z] constant on σ-orbits (fixed features),

so that ``p[σx][σk] = p[x][k]`` and ``T(σx, σz) = T(x, z)``: the order holds at ``σx`` whenever
it holds at x, and only one query per σ-orbit is constrained.  A table found this way is an
ordinary table (re-checked in integers by :func:`~.tropical.recheck` on every query); an unsat
answer says nothing about unrestricted tables and is never used as a lower bound.
"""

from __future__ import annotations

import time

from .tropical import OrderFamily, cube_family, margin
from .tropical_solve import Solved, z3_answer, z3_row


def shift(x: int, m: int, times: int = 1) -> int:
    """σ^times of token id x (bits MSB first; σ moves bit i to bit i + 1 mod m)."""
    times %= m
    mask = (1 << m) - 1
    return ((x >> times) | (x << (m - times))) & mask


def solve_cyclic(m: int, mode: str, rank: int, rlimit: int) -> Solved:
    """z3 on the σ-invariant form (module docstring); on sat the tables over every token."""
    import z3

    start = time.perf_counter()
    family = cube_family(m)
    ctx = z3.Context()
    solver = z3.Solver(ctx=ctx)
    solver.set("rlimit", int(rlimit))
    p, q = _tables(z3, ctx, m, rank)
    reps = sorted({min(shift(x, m, i) for i in range(m)) for x in range(1 << m)})
    for x in reps:
        _order(z3, solver, family, mode, x, p[x], q)
    return z3_answer(solver, "z3-cyclic", rank, p, q, start)


def _tables(z3, ctx, m: int, rank: int):
    orbits, fixed = divmod(rank, m)
    tokens = range(1 << m)
    base_p = [[z3.Real(f"P{o}_{y}", ctx) for y in tokens] for o in range(orbits)]
    base_q = [[z3.Real(f"Q{o}_{y}", ctx) for y in tokens] for o in range(orbits)]
    rep = [min(shift(y, m, i) for i in range(m)) for y in tokens]
    fix_p = [[z3.Real(f"F{k}_{rep[y]}", ctx) for y in tokens] for k in range(fixed)]
    fix_q = [[z3.Real(f"G{k}_{rep[y]}", ctx) for y in tokens] for k in range(fixed)]
    p = [[base_p[o][shift(x, m, -j)] for o in range(orbits) for j in range(m)] + [f[x] for f in fix_p] for x in tokens]
    q = [[base_q[o][shift(z, m, -j)] for z in tokens] for o in range(orbits) for j in range(m)] + fix_q
    return p, q


def _order(z3, solver, family: OrderFamily, mode: str, x: int, row, q) -> None:
    """Query x's conditions (:func:`~.tropical_solve.z3_row`), its levels in the order met."""
    levels: dict[int, list[int]] = {}
    for z in family.candidates[x]:
        levels.setdefault(family.overlap(x, z), []).append(z)
    pairs = [(lo, hi, margin(hi - lo, mode)) for lo in levels for hi in levels if hi > lo]
    pairs = [(lo, hi, need) for lo, hi, need in pairs if need is not None]
    z3_row(z3, solver, x, row, q, [(z, level) for level, keys in levels.items() for z in keys], pairs)
