"""The exact gap-2 pair maximum past the clique search's reach, by integer programming,
re-checked by a SAT refutation (docs/theory.md, "Exact small cases").

At gap 2 (δ = 1/2) a pair system on ``{0,1}^m`` may be taken as entries ``(1 − g, g)``
(:func:`.ceiling.maximum_pair_family`: every other x is dominated), and then it is a family
of supports ``B`` with ``|B_j \\ B_i| ≥ 2`` for every ordered pair.  Two supports conflict
when one of the differences is at most 1.  Every support T together with its ``m``
neighbours ``T ± one element`` is a set of pairwise conflicting supports (their differences
are at most 1), so

    maximise Σ_B y_B   subject to   y_T + Σ_k y_{T ⊕ e_k} ≤ 1  (every T),
                                    y_A + y_B ≤ 1  (every other conflicting pair),  y binary

is exact, and its linear relaxation already sits near the pair ceiling (the rows summed give
the LYM bound).  HiGHS solves it; the answer never rests on its floating-point bound alone:
the family it returns is re-checked in integers (the lower side), and CaDiCaL, on clauses
built apart (one "not both" per conflicting pair, a sequential counter for "at least
size + 1"), refutes a family one larger (the upper side).  Budgets are work: HiGHS's node
count, CaDiCaL's conflicts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import KernelgapError

#: Largest m searched (2^m binary variables; m = 9 takes minutes, m = 10 is out of reach).
MAX_M = 10
#: The HiGHS node budget and the CaDiCaL conflict budget of one search.
DEFAULT_NODES = 1_000_000
DEFAULT_CONFLICTS = 200_000_000


@dataclass
class PairMaximum:
    """The search's answer: a family of ``size`` supports meeting the pair condition (checked
    in integers); ``optimal`` when HiGHS proved it and ``refuted`` when CaDiCaL found no family
    of ``size + 1`` ("unsat"; "unknown" when out of budget)."""

    m: int
    size: int
    family: list[int]
    optimal: bool
    refuted: str
    seconds: float

    def to_json(self) -> dict:
        return {
            "m": self.m,
            "gap": 2,
            "size": self.size,
            "family": self.family,
            "optimal": self.optimal,
            "refuted": self.refuted,
            "exact": self.optimal and self.refuted == "unsat",
            "seconds": round(self.seconds, 2),
        }


def _conflict(a: int, b: int) -> bool:
    return (a & ~b).bit_count() < 2 or (b & ~a).bit_count() < 2


def meets_pair_condition(family: list[int]) -> bool:
    """Whether every ordered pair of supports has ``|B_j \\ B_i| ≥ 2`` (plain integers)."""
    return all(not _conflict(a, b) for i, a in enumerate(family) for b in family[i + 1 :])


def highs_maximum(m: int, nodes: int = DEFAULT_NODES) -> tuple[list[int], bool]:
    """The largest family HiGHS finds within ``nodes`` branch-and-bound nodes, and whether it
    proved that family optimal."""
    import highspy
    import numpy as np

    n = 1 << m
    h = highspy.Highs()
    for option, value in (("output_flag", False), ("threads", 1), ("mip_max_nodes", nodes), ("random_seed", 0)):
        h.setOptionValue(option, value)
    h.addVars(n, np.zeros(n), np.ones(n))
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger))
    h.changeColsCost(n, np.arange(n, dtype=np.int32), -np.ones(n))
    covered = set()
    for group in ([t] + [t ^ (1 << k) for k in range(m)] for t in range(n)):  # T and its m neighbours
        h.addRow(-highspy.kHighsInf, 1, len(group), np.array(group, dtype=np.int32), np.ones(len(group)))
        covered.update((min(a, b), max(a, b)) for a in group for b in group if a != b)
    for a in range(n):
        for b in range(a + 1, n):
            if (a, b) not in covered and _conflict(a, b):
                h.addRow(-highspy.kHighsInf, 1, 2, np.array([a, b], dtype=np.int32), np.ones(2))
    h.run()
    values = h.getSolution().col_value
    family = [b for b in range(n) if values[b] > 0.5]
    return family, h.getModelStatus() == highspy.HighsModelStatus.kOptimal


def sat_refutes(m: int, size: int, conflicts: int = DEFAULT_CONFLICTS) -> str:
    """CaDiCaL on "a family of ``size`` supports with no conflicting pair": ``"unsat"``,
    ``"sat"`` or ``"unknown"`` (out of its conflict budget)."""
    from pysat.card import CardEnc, EncType
    from pysat.solvers import Solver

    n = 1 << m
    clauses = [[-(a + 1), -(b + 1)] for a in range(n) for b in range(a + 1, n) if _conflict(a, b)]
    count = CardEnc.atleast(lits=list(range(1, n + 1)), bound=size, top_id=n, encoding=EncType.seqcounter)
    with Solver(name="cadical195", bootstrap_with=clauses + count.clauses) as solver:
        solver.conf_budget(conflicts)
        answer = solver.solve_limited()
    return {True: "sat", False: "unsat", None: "unknown"}[answer]


def _check_m(m: int) -> None:
    if not 1 <= m <= MAX_M:
        raise KernelgapError(f"the gap-2 pair maximum is searched for 1 ≤ m ≤ {MAX_M}, got m = {m}")


def pair_maximum(m: int, nodes: int = DEFAULT_NODES, conflicts: int = DEFAULT_CONFLICTS) -> PairMaximum:
    """The exact gap-2 pair maximum on ``{0,1}^m`` (module docstring)."""
    _check_m(m)
    start = time.perf_counter()
    family, optimal = highs_maximum(m, nodes)
    if not meets_pair_condition(family):  # a solver answer that fails the integer check is an error
        raise KernelgapError(f"m = {m}: HiGHS's family fails the pair condition")
    refuted = sat_refutes(m, len(family) + 1, conflicts)
    if refuted == "sat":
        raise KernelgapError(f"m = {m}: HiGHS says {len(family)} is the maximum, CaDiCaL finds {len(family) + 1}")
    return PairMaximum(m, len(family), family, optimal, refuted, time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    """``python -m kernelgap.theory.pair_maximum M [M …]``: one JSON line per m."""
    import json
    import sys

    from ..args import parse_range

    try:
        ms = parse_range(argv if argv is not None else sys.argv[1:], "m", "m", least=1)
        for m in ms:
            _check_m(m)
        for m in ms:
            print(json.dumps(pair_maximum(m).to_json()), flush=True)
    except KernelgapError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
