"""The exact wall: the least rank of one nonnegative head at long context on the whole cube
``{0,1}^m``, per m and δ (docs/theory.md, "The tropical wall").

For δ < 1/2 the least exact rank at every length ``N ≥ N₀`` is the least rank r* of a
``strict`` min-plus table of the cube; at δ = 1/2 it lies between the least ``lower`` rank
(from ``N ≥ r_lo + 1``) and the least ``upper`` rank (at every N).  Each entry carries

* **lower evidence**: the exhaustive pair maximum (a theorem: a tropical table has rank at
  least any pair system's size), and the solver's unsat at ``r − 1`` (z3), confirmed by cvc5
  on its own encoding within the budget (``confirmed``: "unsat", or what cvc5 said);
* **upper evidence**: a table the solver found, re-checked in plain integers on every query
  and pair of candidates, and its head scored on every sequence of the lengths in
  ``score_lengths`` whose ``2^{mN}`` is at most :data:`MAX_SCORED`;

beside the pair ceiling, ``C(m, ⌊m/2⌋)`` and ``2^m``, with the wall time and solver work.
"""

from __future__ import annotations

import time
from fractions import Fraction
from math import comb

from ..errors import KernelgapError
from ..limits import MAX_WALL_M
from ..rationals import parse_delta
from .ceiling import EXHAUSTIVE_GAP1_M, exhaustive_pair_maximum, pair_ceiling
from .tropical import cube_family, expand_table, integer_table, mode_for, recheck, reduce_family
from .tropical_cyclic import solve_cyclic
from .tropical_solve import DEFAULT_RLIMIT, solve_cvc5, solve_z3

#: Most sequences ``2^{mN}`` a head is scored on per length (m = 4 at N = 4, m = 5 at N = 3).
MAX_SCORED = 1 << 16
#: cvc5 gets ``rlimit // CVC5_SHARE`` of its resource units per call: a unit of cvc5 is far more
#: work than one of z3's (m = 4, unsat at rank 5: 316,272 cvc5 units, 16,591,983 z3 units).
CVC5_SHARE = 100
#: Consecutive ranks left undecided (z3 out of budget, no cyclic table) after which the search
#: stops without a table: the entry's upper end is then unknown (None).
MAX_UNDECIDED = 3


def least_rank(m: int, mode: str, start: int, rlimit: int) -> dict:
    """The least rank from ``start`` up whose table is found: z3 on the whole problem, and where
    its budget runs out the σ-invariant search (:mod:`.tropical_cyclic`, which can only find).
    ``z3_lower`` is one above the largest rank z3 proved impossible (at least ``start``); that
    unsat (``refuted``) and the rank below the answer (``below``) go to cvc5, a sat from cvc5 being
    an error, and ``lower`` counts only the unsats cvc5 confirmed; the table is re-checked in
    integers."""
    family = cube_family(m)
    problem = reduce_family(family, mode)
    calls, rank, refuted, found, undecided = [], max(1, start), None, None, 0
    while rank < (1 << m) and undecided < MAX_UNDECIDED:
        found = solve_z3(problem, rank, rlimit)
        calls.append(_call(found))
        if found.status == "unknown":
            found = solve_cyclic(m, mode, rank, rlimit)
            calls.append(_call(found))
            found.status = "sat" if found.status == "sat" else "unknown"
        if found.status == "sat":
            break
        refuted = rank if calls[-1]["status"] == "unsat" and calls[-1]["solver"] == "z3" else refuted
        undecided = undecided + 1 if found.status == "unknown" else 0
        rank += 1
    out = {"mode": mode, "rank": rank if found and found.status == "sat" else None, "calls": calls}
    out["lower"], out["z3_lower"] = start, max(start, (refuted or 0) + 1)
    if out["rank"] is None:
        return out
    p, q = integer_table(found.p, found.q)
    p_tokens, q_tokens = (p, q) if found.solver == "z3-cyclic" else expand_table(family, problem, p, q)
    bad = recheck(family, mode, p_tokens, q_tokens)
    if bad:  # a disagreement between the solver and the integer check is an error, never a result
        raise KernelgapError(f"m = {m}, {mode}: {found.solver}'s table fails the integer re-check: {bad[0]}")
    out.update(p=p_tokens, q=q_tokens, solver=found.solver, rechecked=True)
    if rank > 1:
        out["below"] = _below(family, problem, mode, rank - 1, rlimit, calls)
        refuted = rank - 1 if out["below"]["z3"] == "unsat" else refuted
    if refuted is not None and refuted != rank - 1:  # every unsat that counts is cvc5's too
        out["refuted"] = _below(family, problem, mode, refuted, rlimit, calls)
    out["z3_lower"] = max(start, (refuted or 0) + 1)
    confirmed = [b["rank"] + 1 for b in (out.get("below"), out.get("refuted")) if b and b["cvc5"] == "unsat"]
    out["lower"] = max([start, *confirmed])
    return out


def _below(family, problem, mode: str, rank: int, rlimit: int, calls: list) -> dict:
    """z3's answer at ``rank`` (reused when the search asked it) and cvc5's on its own encoding."""
    known = [c for c in calls if c["rank"] == rank and c["solver"] == "z3"]
    z3_status = known[0]["status"] if known else None
    if z3_status is None:
        below = solve_z3(problem, rank, rlimit)
        calls.append(_call(below))
        z3_status = below.status
    if z3_status != "unsat":
        return {"rank": rank, "z3": z3_status, "cvc5": None}
    second = solve_cvc5(family, mode, rank, max(1, rlimit // CVC5_SHARE))
    calls.append(_call(second))
    if second.status == "sat":
        raise KernelgapError(f"m = {family.m}, {mode}: z3 says no table of rank {rank}, cvc5 finds one")
    return {"rank": rank, "z3": "unsat", "cvc5": second.status}


def _call(found) -> dict:
    return {key: getattr(found, key) for key in ("solver", "rank", "status", "work", "seconds")}


def _scores(m: int, mode: str, entry: dict, lengths, delta: Fraction) -> list[dict]:
    from ..models.tropical_head import score_cube_head

    if entry.get("rank") is None:
        return []
    return [score_cube_head(entry["p"], entry["q"], m, mode, n, delta) for n in lengths if (1 << (m * n)) <= MAX_SCORED]


def wall_entry(m: int, delta, rlimit: int = DEFAULT_RLIMIT, score_lengths=(3, 4), known: dict | None = None) -> dict:
    """One entry of the table (module docstring).  ``known`` holds :func:`least_rank`'s answers
    by ``(m, order)``, shared between the entries of one m (the strict search serves both
    tolerances); each answer found here is added to it.  At δ = 1/2, where the upper search
    finds no table, the strict table stands in: the strict order implies the upper one (a
    strict rise where the upper order asks a weak one), so its head is an upper head."""
    known = {} if known is None else known
    delta = parse_delta(delta)
    if not 2 <= m <= MAX_WALL_M:
        raise KernelgapError(f"the wall is computed for 2 ≤ m ≤ {MAX_WALL_M}, got m = {m}")
    start = time.perf_counter()
    gap = 1 if delta < Fraction(1, 2) else 2
    pair_max = _pair_maximum(m, gap)
    entry = {
        "m": m,
        "delta": str(delta),
        "pair_maximum": pair_max,
        "pair_ceiling": pair_ceiling(m, gap),
        "middle_binomial": comb(m, m // 2),
        "two_to_m": 1 << m,
    }
    ranks = {}
    floor = pair_max or 1
    for mode in mode_for(delta):
        found = _least(known, m, mode, floor, rlimit)
        head_mode = "strict" if mode == "strict" else "upper"
        found["scores"] = _scores(m, head_mode, found, score_lengths, delta) if mode == head_mode else []
        ranks[mode] = found
        floor = found["lower"]
    if "upper" in ranks and ranks["upper"]["rank"] is None:
        strict = _least(known, m, "strict", _pair_maximum(m, 1) or 1, rlimit)
        if strict["rank"] is not None:
            ranks["upper"]["via_strict"] = {
                "rank": strict["rank"],
                "solver": strict["solver"],
                "scores": _scores(m, "upper", strict, score_lengths, delta),
                "calls": strict["calls"],
            }
    entry["tables"] = ranks
    entry.update(_summary(ranks, delta))
    entry["seconds"] = time.perf_counter() - start
    entry["work"] = sum(
        c["work"] for f in ranks.values() for c in f["calls"] + f.get("via_strict", {}).get("calls", [])
    )
    return entry


def _least(known: dict, m: int, mode: str, start: int, rlimit: int) -> dict:
    """:func:`least_rank`, asked once per ``(m, mode, start)``; a copy, so each entry keeps its own scores."""
    key = (m, mode, start, rlimit)
    if key not in known:
        known[key] = least_rank(m, mode, start, rlimit)
    return dict(known[key])


def _pair_maximum(m: int, gap: int) -> int | None:
    """The exhaustive pair maximum at ``gap``, every table's floor (None where gap 1 is out of the
    search's reach)."""
    return exhaustive_pair_maximum(m, gap) if gap == 2 or m <= EXHAUSTIVE_GAP1_M else None


def upper_table(found: dict) -> dict:
    """The upper order's table: its own, else the strict table standing in (``via_strict``)."""
    return found if found.get("rank") is not None else found.get("via_strict") or found


def _summary(ranks: dict, delta: Fraction) -> dict:
    """What the entry proves about the least exact rank at length N (docs/theory.md): at least
    ``lower`` from ``from_length`` on, at most ``upper`` at every N.  δ < 1/2: ``lower`` the strict
    rank's lower evidence L, from the least N with ``(N − 2)(1 − 2δ) > 2δ(L − 1)``; δ = 1/2: the
    lower rank's evidence, from ``N = L + 1``; ``upper`` the rank of the table whose head is
    exact (strict, or upper at δ = 1/2)."""
    if "strict" in ranks:
        low, high = ranks["strict"]["lower"], ranks["strict"]["rank"]
        n = 3
        while (n - 2) * (1 - 2 * delta) <= 2 * delta * (low - 1):
            n += 1
        return {"lower": low, "upper": high, "from_length": n}
    low = ranks["lower"]["lower"]
    return {"lower": low, "upper": upper_table(ranks["upper"]).get("rank"), "from_length": max(3, low + 1)}


def wall(ms, deltas, rlimit: int = DEFAULT_RLIMIT, progress=None) -> dict:
    """Every entry of ``ms × deltas``; ``progress`` (a callable) gets a line per entry."""
    entries = []
    for m in ms:
        known: dict = {}
        for delta in deltas:
            entries.append(wall_entry(m, delta, rlimit, known=known))
            if progress is not None:
                progress(wall_line(entries[-1]))
    for e in entries:
        for f in e["tables"].values():
            f.pop("p", None), f.pop("q", None)
    return {"rlimit": rlimit, "entries": entries}


def _span(low, high) -> str:
    return str(low) if low == high else f"[{low}, {'?' if high is None else high}]"


def wall_line(e: dict) -> str:
    """One entry as a text line: the least exact rank (or the interval it lies in), each
    order's least rank, the evidence, the head's errors, time and work."""
    orders = ", ".join(f"{mode} {_span(f['lower'], f['rank'])}" for mode, f in e["tables"].items())
    scores = [s for f in e["tables"].values() for s in upper_table(f).get("scores") or f["scores"]]
    scored = ", ".join(f"N={s['length']} err {s['max_error']:.3g}" for s in scores) or "not scored"
    below = [f[key] for f in e["tables"].values() for key in ("refuted", "below") if f.get(key)]
    unsat = "; ".join(f"r={b['rank']}: z3 {b['z3']}, cvc5 {b['cvc5']}" for b in below) or "none"
    return (
        f"m={e['m']} δ={e['delta']}: least exact rank {_span(e['lower'], e['upper'])} from N={e['from_length']} "
        f"({orders}); pair maximum {e['pair_maximum']}, ceiling {e['pair_ceiling']}, "
        f"C(m,m/2)={e['middle_binomial']}, 2^m={e['two_to_m']}; solver below: {unsat}; head: {scored}; "
        f"{e['seconds']:.1f}s, work {e['work']:,}"
    )
