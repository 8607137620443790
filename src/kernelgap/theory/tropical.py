"""Min-plus (tropical) tables that order every query's candidates (docs/theory.md, "The
tropical wall").

A rank-r table is ``p [n × r]`` (one row per query) and ``q [r × C]`` (one column per
candidate token); its min-plus product is

    T(x, z) = min_k (p_xk + q_kz).

The head ``φ_Q(x)_k = t^{p_xk}``, ``φ_K(z)_k = t^{q_kz}`` has ``α(x, z) = Σ_k t^{p_xk + q_kz}``,
between ``t^{T}`` and ``r·t^{T}``: as t → 0 its weight goes to the candidates of least T.
Whether the head can be exact rests on how T orders each query's candidates by overlap
``s = <x, z>``.  The *order* a **mode** asks for, for two candidates of one query with
``s' − s = gap > 0``:

* ``strict`` (δ < 1/2): ``T(x, z') ≥ T(x, z) + 1`` for every gap ≥ 1;
* ``lower`` (δ = 1/2, necessary): ``T(x, z') ≥ T(x, z) + 1`` for every gap ≥ 2;
* ``upper`` (δ = 1/2, sufficient): as ``lower``, and ``T(x, z') ≥ T(x, z)`` at gap 1.

Integer tables with margin 1 lose nothing: a real table with the strict inequalities
scales to one with margin 1, and the order's rational solutions scale to integers (the
system is homogeneous once the minimising features are fixed; docs/theory.md).  The solvers
are :mod:`.tropical_solve`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ..errors import KernelgapError
from ..task.families.exhaustive import all_tokens
from ..task.family import ProductFamily

MODES = ("strict", "lower", "upper")


def margin(gap: int, mode: str) -> int | None:
    """The least ``T(x, z') − T(x, z)`` the mode asks of candidates ``gap = s' − s > 0`` apart
    (None: no condition)."""
    if mode not in MODES:
        raise KernelgapError(f"unknown order mode {mode!r}; choose from {', '.join(MODES)}")
    if gap >= 2 or (gap == 1 and mode == "strict"):
        return 1
    if gap == 1 and mode == "upper":
        return 0
    return None


def mode_for(delta) -> tuple[str, ...]:
    """The modes of a tolerance: ``("strict",)`` below 1/2, ``("lower", "upper")`` at 1/2."""
    from ..rationals import parse_delta

    return ("strict",) if parse_delta(delta) < 1 / 2 else ("lower", "upper")


@dataclass(frozen=True)
class OrderFamily:
    """Queries with their candidate lists, as plain token rows: ``tokens`` (0/1 tuples),
    ``queries`` (token ids) and ``candidates`` (per query, token ids); every tuple of a
    query's candidates is a sequence of the family (a product family, or the whole cube)."""

    tokens: tuple[tuple[int, ...], ...]
    queries: tuple[int, ...]
    candidates: tuple[tuple[int, ...], ...]
    name: str = "family"

    @property
    def m(self) -> int:
        return len(self.tokens[0])

    def overlap(self, x: int, z: int) -> int:
        return sum(a & b for a, b in zip(self.tokens[x], self.tokens[z], strict=True))


def cube_family(m: int) -> OrderFamily:
    """Every query of ``{0,1}^m`` with every token as a candidate (token ids as
    :func:`~kernelgap.task.families.exhaustive.all_tokens`, so the query's own token is one of
    its candidates, at level ``|x|``)."""
    if not 1 <= m <= 8:
        raise KernelgapError(f"the cube's order problem is built for 1 ≤ m ≤ 8, got m = {m}")
    tokens = tuple(tuple(int(b) for b in row) for row in all_tokens(m))
    ids = tuple(range(len(tokens)))
    return OrderFamily(tokens, ids, tuple(ids for _ in ids), f"cube m={m}")


def product_order_family(family: ProductFamily) -> OrderFamily:
    """A product family's queries, each with the family's candidate list."""
    tokens = tuple(tuple(int(b) for b in row) for row in family.tokens)
    cands = tuple(int(c) for c in family.candidates)
    queries = tuple(int(x) for x in family.queries)
    return OrderFamily(tokens, queries, tuple(cands for _ in queries), family.name)


@dataclass(frozen=True)
class OrderProblem:
    """The reduced problem: ``rows[i]`` lists ``(key, overlap)`` for query row i over keys
    ``0..keys − 1``; ``row_of[j]`` is the row of the family's j-th query (None: no condition)
    and ``key_of[t]`` the key of candidate token t."""

    rows: tuple[tuple[tuple[int, int], ...], ...]
    keys: int
    mode: str
    row_of: tuple[int | None, ...]
    key_of: dict

    def pairs(self, row: int):
        return level_pairs({s for _, s in self.rows[row]}, self.mode)


def level_pairs(levels, mode: str):
    """``(lower level, upper level, margin)`` of every pair of ``levels`` the mode constrains."""
    for lo, hi in itertools.combinations(sorted(levels), 2):
        need = margin(hi - lo, mode)
        if need is not None:
            yield lo, hi, need


def reduce_family(family: OrderFamily, mode: str) -> OrderProblem:
    """The family's order problem, reduced without changing its answer:

    * a query with no constrained pair of levels (one level; in ``lower`` mode no two levels
      2 apart) is dropped: any row serves it;
    * candidate tokens whose overlap with every query that has them is the same (and that
      every query either has or lacks together) share one key: copying one's column to the
      other keeps every condition, since the conditions on each are the same;
    * queries with the same ``(key, overlap)`` list share one row, for the same reason.
    """
    margin(1, mode)
    profiles: dict[int, list] = {}
    for j, x in enumerate(family.queries):
        for z in family.candidates[j]:
            profiles.setdefault(z, []).append((j, family.overlap(x, z)))
    key_of: dict = {}
    seen: dict = {}
    for z in sorted(profiles):
        key_of[z] = seen.setdefault(tuple(profiles[z]), len(seen))
    rows: list = []
    row_index: dict = {}
    row_of: list = []
    for j, x in enumerate(family.queries):
        row = tuple(sorted({(key_of[z], family.overlap(x, z)) for z in family.candidates[j]}))
        if next(level_pairs({s for _, s in row}, mode), None) is None:
            row_of.append(None)
            continue
        if row not in row_index:
            row_index[row] = len(rows)
            rows.append(row)
        row_of.append(row_index[row])
    return OrderProblem(tuple(rows), len(seen), mode, tuple(row_of), key_of)


def check_table(problem: OrderProblem, p: list[list[int]], q: list[list[int]]) -> list[str]:
    """Every violated condition of the reduced problem by integer tables ``p`` (rows) and
    ``q`` (keys), as text; empty when the table orders every row (plain integers)."""
    bad = []
    for i, row in enumerate(problem.rows):
        by_level: dict[int, list[int]] = {}
        for key, s in row:
            by_level.setdefault(s, []).append(min(p[i][k] + q[k][key] for k in range(len(q))))
        for lo, hi, need in problem.pairs(i):
            if min(by_level[hi]) - max(by_level[lo]) < need:
                bad.append(f"row {i}: levels {lo} → {hi} need T to rise by {need}")
    return bad


def recheck(family: OrderFamily, mode: str, p_tokens: list[list[int]], q_tokens: list[list[int]]) -> list[str]:
    """The same check on the *unreduced* family: ``p_tokens[j]`` is the j-th query's row,
    ``q_tokens[k][t]`` the entry of candidate token t; every query, every pair of its
    candidates (a second path: no levels, no reduction)."""
    bad = []
    for j, x in enumerate(family.queries):
        t_of = {z: min(p_tokens[j][k] + q_tokens[k][z] for k in range(len(q_tokens))) for z in family.candidates[j]}
        for z, z2 in itertools.permutations(family.candidates[j], 2):
            gap = family.overlap(x, z2) - family.overlap(x, z)
            need = margin(gap, mode) if gap > 0 else None
            if need is not None and t_of[z2] - t_of[z] < need:
                bad.append(f"query {x}: candidates {z} → {z2} (gap {gap}) need T to rise by {need}")
                break
    return bad


def expand_table(family: OrderFamily, problem: OrderProblem, p: list[list[int]], q: list[list[int]]):
    """The reduced table on the family's own queries and tokens: dropped queries get a zero
    row, merged rows and keys copies (tokens that are no candidate get a zero column)."""
    r = len(q)
    p_tokens = [list(p[i]) if i is not None else [0] * r for i in problem.row_of]
    q_tokens = [
        [q[k][problem.key_of[t]] if t in problem.key_of else 0 for t in range(len(family.tokens))] for k in range(r)
    ]
    return p_tokens, q_tokens


def integer_table(p_frac, q_frac) -> tuple[list[list[int]], list[list[int]]]:
    """Rational tables scaled by the common denominator of their entries to integers.  A
    positive scale keeps every weak condition and multiplies every margin by it (≥ 1)."""
    den = math.lcm(*(v.denominator for v in itertools.chain(*p_frac, *q_frac)))
    return [[int(v * den) for v in row] for row in p_frac], [[int(v * den) for v in row] for row in q_frac]


def brute_force_rank1(problem: OrderProblem) -> bool:
    """Whether rank 1 orders the reduced problem, by enumeration: at rank 1 ``T = p_x + q_z``,
    so only the order of q matters, and a realisable order is realised by ``q`` in
    ``{0, …, keys − 1}`` (replace each value by the number of values below it, a longest-path
    height in the difference constraints)."""
    zeros = [[0] for _ in problem.rows]
    return any(
        not check_table(problem, zeros, [list(q)]) for q in itertools.product(range(problem.keys), repeat=problem.keys)
    )
