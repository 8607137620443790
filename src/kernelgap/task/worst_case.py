"""The exact worst case of one attention head over a product family, without enumerating tuples.

docs/theory.md, "A construction of rank n at any length" (the worst case over N − 1
independent slots).  A product family of length N holds, for each query x, every sequence
with x at the query position q and any candidates ``c_j`` in the other N − 1 slots.  At x
one head predicts

    p = (A·u_0 + Σ_j α_j(c_j)·u_j(c_j)) / (A + Σ_j α_j(c_j))

over the slots j it sees (every slot, or with a causal mask the slots before q), with
``A`` the self weight, ``α_j(c) = α(x, c in slot j) ≥ 0`` and ``u = U + b`` the values after
the readout (the bias folds in since the weights sum to 1).  The target is
``t = min_j <x, c_j>`` over *every* slot (the query's own overlap ``|x|`` is at least every
other).  Fix t and a direction σ = ±1: ``σ(p − t)`` is a ratio ``N(τ)/D(τ)`` of sums of
independent slot terms ``α_j(c)·σ(u_j(c) − t)`` and ``α_j(c)``, constrained to "one slot holds
a candidate at level exactly t (the *witness*), every other slot a level ≥ t".  Dinkelbach's
method finds its maximum exactly: at λ,

    F(λ) = max_τ N(τ) − λ·D(τ) = A·(σ(u_0 − t) − λ) + Σ_j max_c α_j(c)·(σ(u_j(c) − t) − λ)

splits over the slots (each takes its own argmax), and the argmax tuple's ratio is the next
λ; the ratios strictly increase until none does, which happens after finitely many steps
(finitely many tuples).  The witness is in one visible slot (one case per slot, or a single
case when the key and value maps do not depend on the position: the slots are then
interchangeable) or, with a causal mask, in a slot the query does not see (every visible slot
is then free).  Taking the maximum over t (the levels the query's candidates have), σ and the
cases gives ``max |p − t|`` over all ``Q·C^(N−1)`` sequences.

**Rigour.**  The reported error is the ratio of an actual tuple.  The upper bound comes from
the final gap: ``F(λ') ≤ F(λ) − (λ' − λ)·D_min`` for ``λ' ≥ λ`` (``D_min`` the least
denominator of any feasible tuple), so the largest ratio is at most
``λ + max(F(λ), 0)/D_min``: a bound in exact arithmetic on the (float64) tables.  Weights are
taken relative to the query's largest one (in log space: shifted by it), which changes no
ratio.  Where a linear-space kernel's total weight D can fall below the model's denominator
guard g, the model divides by g instead: those tuples (``guarded``) are bounded apart, where
``p`` is linear in the slots, and the ratio bound is taken over the tuples with ``D ≥ g``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import KernelgapError
from .minip import EXACT_THRESHOLD

#: Most float64 elements of one ``[E, P, Q, C]`` block of tables worked on at once (32 MiB
#: each; about ten such arrays are alive at a time, so a chunk stays well under 1 GiB).
CHUNK_ELEMENTS = 1 << 22
#: Most Dinkelbach steps per problem; the ratios stop rising long before (a handful of
#: steps), and the bound stays rigorous if the cap is ever met.
MAX_ITERATIONS = 200


@dataclass
class WorstCase:
    """The worst case per member and query, ``[E, Q]``.

    ``error``: the largest ``|p − t|`` found, the error of the tuple ``slots``;
    ``bound``: an upper bound on ``max |p − t|`` over every tuple (module docstring);
    ``guarded``: some tuple's total weight may fall below the model's guard; ``slots [E, Q, N]``: the candidate column of each position
    of the worst tuple, −1 at the query position; ``target``: its target level;
    ``iterations``: the most Dinkelbach steps any problem took.
    """

    error: np.ndarray
    bound: np.ndarray
    slots: np.ndarray
    target: np.ndarray
    guarded: np.ndarray
    iterations: int = 0

    @property
    def member_error(self) -> np.ndarray:
        """``[E]``: the largest error found over every query."""
        return self.error.max(axis=1)

    @property
    def member_bound(self) -> np.ndarray:
        """``[E]``: the upper bound over every query."""
        return self.bound.max(axis=1)

    @property
    def exact(self) -> np.ndarray:
        """``[E]``: the bound is below 1/2 (rounding recovers every target)."""
        return self.member_bound < EXACT_THRESHOLD

    @property
    def margin(self) -> np.ndarray:
        """``[E]``: ``1/2 − bound`` (positive exactly when exact)."""
        return EXACT_THRESHOLD - self.member_bound


#: The ``[E, Q, …]`` arrays of a :class:`WorstCase`.
WORST_CASE_ARRAYS = ("error", "bound", "slots", "target", "guarded")


@dataclass
class _Case:
    """One placement of the witness: ``groups`` of interchangeable slots, each
    ``(table, witness?, multiplicity, positions)``; ``hidden`` positions hold the witness's
    candidate (a level-t candidate, so the target stays t; the query does not see them)."""

    groups: list[tuple[int, bool, int, list[int]]]
    hidden: list[int]


def _cases(length: int, qpos: int, causal: bool, tables: int) -> list[_Case]:
    """The witness placements at query position ``qpos`` (0-based), for ``tables`` = 1 (slots
    share their maps) or N (a map per position)."""
    slots = [j for j in range(length) if j != qpos]
    visible = [j for j in slots if not causal or j < qpos]
    hidden = [j for j in slots if causal and j > qpos]
    cases = []
    if tables == 1:
        if visible:
            groups = [(0, True, 1, visible[:1])]
            if len(visible) > 1:
                groups.append((0, False, len(visible) - 1, visible[1:]))
            cases.append(_Case(groups, hidden))
        if hidden:
            cases.append(_Case([(0, False, len(visible), visible)] if visible else [], hidden))
        return cases
    for w in visible:
        cases.append(_Case([(j, j == w, 1, [j]) for j in visible], hidden))
    if hidden:
        cases.append(_Case([(j, False, 1, [j]) for j in visible], hidden))
    return cases


@dataclass(frozen=True)
class HeadTables:
    """E heads' tables on the queries of a product family (:func:`worst_case`).

    ``scores [E, P, Q, C]``: ``log α`` (log space) or ``α ≥ 0`` of each query against each
    candidate, per key position (``P = 1``: one map for every slot; ``P = N``: the map of
    position p at index p); ``values [E, P, Q, C]``: ``U + b``; ``self_scores``,
    ``self_values [E, Q]``: the query's own term at its position; ``levels [Q, C]``: the
    overlaps ``<x, c>``; ``bias [E, Q]``: the readout's bias ``b`` (None: zero), needed apart
    where a guard replaces the total weight.
    """

    scores: np.ndarray
    values: np.ndarray
    self_scores: np.ndarray
    self_values: np.ndarray
    levels: np.ndarray
    bias: np.ndarray | None = None

    def queries(self, rows: slice) -> HeadTables:
        """The tables of the queries ``rows`` (axis Q of every table)."""
        bias = None if self.bias is None else self.bias[:, rows]
        own = self.self_scores[:, rows], self.self_values[:, rows]
        return HeadTables(self.scores[:, :, rows], self.values[:, :, rows], *own, self.levels[rows], bias)


def worst_case(
    tables: HeadTables,
    length: int,
    query_position: int,
    *,
    causal: bool = False,
    log_space: bool = True,
    guard: float = 0.0,
) -> WorstCase:
    """``max |p − t|`` of E heads on every query of a product family (module docstring).

    ``tables``: the heads' scores, values and self terms and the queries' levels
    (:class:`HeadTables`; ``scores`` in log space when ``log_space``); ``query_position``
    1-based; ``causal``: the query sees positions ``1..query_position`` only; ``guard``: a
    total weight D below it is replaced by it, so there ``p = Σ α·U/guard + b``
    (linear-space kernels; 0: no guard), which needs the bias ``tables.bias`` apart.
    """
    tables = _checked(tables, length, query_position, log_space)
    e, p, q, c = tables.scores.shape
    cases = _cases(length, query_position - 1, causal, p)
    chunk = max(1, CHUNK_ELEMENTS // max(1, e * p * c))
    parts = [
        _solve_chunk(tables.queries(slice(lo, lo + chunk)), length, cases, log_space, guard)
        for lo in range(0, q, chunk)
    ]
    joined = {k: np.concatenate([getattr(x, k) for x in parts], axis=1) for k in WORST_CASE_ARRAYS}
    return WorstCase(**joined, iterations=max(x.iterations for x in parts))


def _checked(tables: HeadTables, length: int, query_position: int, log_space: bool) -> HeadTables:
    """The tables as float64 arrays (levels as given, the bias broadcast to ``[E, Q]``, zero
    when None), their shapes and values checked; a :class:`KernelgapError` otherwise."""
    scores = np.asarray(tables.scores, dtype=np.float64)
    values = np.asarray(tables.values, dtype=np.float64)
    self_scores = np.asarray(tables.self_scores, dtype=np.float64)
    self_values = np.asarray(tables.self_values, dtype=np.float64)
    levels = np.asarray(tables.levels)
    if scores.ndim != 4 or values.shape != scores.shape:
        raise KernelgapError(f"scores and values must be [E, P, Q, C] arrays of one shape, got {scores.shape}")
    e, p, q, c = scores.shape
    if self_scores.shape != (e, q) or self_values.shape != (e, q) or levels.shape != (q, c):
        raise KernelgapError("self terms must be [E, Q] and levels [Q, C] for scores [E, P, Q, C]")
    if p not in (1, length):
        raise KernelgapError(f"tables for {p} key positions do not fit sequences of length {length}")
    if not 1 <= query_position <= length or length < 2 or c < 1:
        raise KernelgapError(f"query position {query_position} of length {length} with {c} candidates")
    for name, arr in (("values", values), ("self values", self_values)):
        if not np.isfinite(arr).all():
            raise KernelgapError(f"the model's {name} are not all finite")
    for arr in (scores, self_scores):
        if np.isnan(arr).any() or (not log_space and (arr < 0).any()) or (log_space and (arr == np.inf).any()):
            raise KernelgapError("the worst case needs finite nonnegative attention weights")
    raw = tables.bias
    bias = np.zeros((e, q)) if raw is None else np.broadcast_to(np.asarray(raw, dtype=np.float64), (e, q))
    return HeadTables(scores, values, self_scores, self_values, levels, bias)


def _relative_weights(scores, self_scores, log_space):
    """Weights divided by each query's largest (self and every candidate at every position),
    and that largest weight (``[E, Q]``, as a weight: ``exp`` of the shift in log space)."""
    top = np.maximum(self_scores, scores.max(axis=(1, 3)))  # [E, Q]
    if log_space:
        shift = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(over="ignore"):
            scale = np.exp(shift)
        return np.exp(scores - shift[:, None, :, None]), np.exp(self_scores - shift), scale
    scale = np.where(top > 0, top, 1.0)
    return scores / scale[:, None, :, None], self_scores / scale, np.where(top > 0, top, 0.0)


@dataclass(frozen=True)
class _Level:
    """One target level t and direction σ of a chunk, over its queries Q' with a candidate at
    t: relative weights ``w [E, P, Q', C]`` and ``w0 [E, Q']``, the terms ``h = σ(u − t)`` and
    ``h0``, which candidates are at t (``eq``, the witness's) and at or above it (``ge``),
    both ``[Q', C]``, and the guard's relative weight ``floor [E, Q']``."""

    w: np.ndarray
    h: np.ndarray
    w0: np.ndarray
    h0: np.ndarray
    eq: np.ndarray
    ge: np.ndarray
    floor: np.ndarray


def _solve_chunk(tables: HeadTables, length: int, cases: list[_Case], log_space: bool, guard: float) -> WorstCase:
    e, _, q, _ = tables.scores.shape
    levels, values, self_values, bias = tables.levels, tables.values, tables.self_values, tables.bias
    w, w0, scale = _relative_weights(tables.scores, tables.self_scores, log_space)
    with np.errstate(divide="ignore"):
        floor = guard / scale if guard > 0 else np.zeros_like(scale)  # relative weight of the guard
    error = np.full((e, q), -np.inf)
    bound = np.full((e, q), -np.inf)
    slots = np.full((e, q, length), -1, dtype=np.int64)
    target = np.zeros((e, q), dtype=np.int64)
    guarded = np.zeros((e, q), dtype=bool)
    steps = 0
    for t in np.unique(levels):
        rows = np.flatnonzero((levels == t).any(axis=1))  # the queries with a candidate at level t
        sub = slice(None) if len(rows) == q else rows  # (all of them: no copies)
        lv = levels[sub]
        eq, ge = lv == t, lv >= t
        wt, w0t, vt, sv = w[:, :, sub], w0[:, sub], values[:, :, sub], self_values[:, sub]
        ft, st, bt = floor[:, sub], scale[:, sub], bias[:, sub]
        witness_col = np.argmax(eq, axis=1)  # [Q']: a level-t candidate (hidden slots hold it)
        for sign in (1.0, -1.0):
            level = _Level(wt, sign * (vt - t), w0t, sign * (sv - t), eq, ge, ft)  # h: [E, P, Q', C], h0: [E, Q']
            for case in cases:
                ratio, upper, cols, den, n = _dinkelbach(level, case)
                steps = max(steps, n)
                if guard > 0:
                    sb = sign * (bt - t)  # σ(b − t)
                    small = den < ft  # the found tuple is normalized by the guard, not its weight
                    with np.errstate(invalid="ignore"):
                        linear_error = np.where(den > 0, st * den * (ratio - sb) / guard, 0.0) + sb
                    ratio = np.where(small, linear_error, ratio)
                    linear = _guarded_bound(level, case, st, guard, sb)
                    guarded[:, sub] |= np.isfinite(linear)
                    upper = np.maximum(upper, linear)
                bound[:, sub] = np.maximum(bound[:, sub], upper)
                better = ratio > error[:, sub]
                if not better.any():
                    continue
                error[:, sub] = np.where(better, ratio, error[:, sub])
                target[:, sub] = np.where(better, t, target[:, sub])
                chosen = slots[:, sub]
                for col, (_, _, _, positions) in zip(cols, case.groups):
                    for j in positions:
                        chosen[:, :, j] = np.where(better, col, chosen[:, :, j])
                for j in case.hidden:
                    chosen[:, :, j] = np.where(better, witness_col[None], chosen[:, :, j])
                slots[:, sub] = chosen
    bound = np.maximum(bound, error)  # rounding aside they agree at the maximum
    return WorstCase(error, bound, slots, target, guarded, steps)


def _dinkelbach(level: _Level, case: _Case):
    """Maximise ``N(τ)/D(τ)`` over the case's tuples for every ``[E, Q]`` (module docstring).

    Returns the best ratio found, the upper bound ``λ + max(F(λ), 0)/D_min`` on the ratio of
    every tuple whose weight is at least ``floor`` (``D_min`` raised to it), each group's
    chosen candidate column ``[E, Q]``, the best tuple's weight ``D`` and the steps taken."""
    w, h, w0, h0, eq, ge, floor = level.w, level.h, level.w0, level.h0, level.eq, level.ge, level.floor
    e, q = w0.shape
    groups = case.groups
    masks = [eq if witness else ge for _, witness, _, _ in groups]
    d_min = w0.copy()
    for (table, _, k, _), mask in zip(groups, masks):
        d_min += k * np.where(mask[None], w[:, table], np.inf).min(axis=-1)
    best = np.full((e, q), -np.inf)
    best_den = np.zeros((e, q))
    best_cols = [np.zeros((e, q), dtype=np.int64) for _ in groups]
    lam = h0.copy()  # any start: after one step λ is the ratio of a feasible tuple
    rows = np.arange(e)[:, None], np.arange(q)[None, :]

    def step(lam):
        num, den, gap = w0 * h0, w0.copy(), w0 * (h0 - lam)
        cols = []
        for (table, _, k, _), mask in zip(groups, masks):
            wt, ht = w[:, table], h[:, table]  # [E, Q, C]
            term = np.where(mask[None], wt * (ht - lam[..., None]), -np.inf)
            col = term.argmax(axis=-1)
            cols.append(col)
            gap = gap + k * term[(*rows, col)]
            num = num + k * wt[(*rows, col)] * ht[(*rows, col)]
            den = den + k * wt[(*rows, col)]
        return num, den, gap, cols

    steps = 0
    for steps in range(1, MAX_ITERATIONS + 1):
        num, den, gap, cols = step(lam)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(den > 0, num / np.where(den > 0, den, 1.0), -np.inf)
        better = (ratio > best) | (steps == 1)  # the first tuple is kept even when it weighs 0
        if not better.any():
            break  # every λ is its best ratio, and F(λ) = gap was computed there
        best = np.where(better, ratio, best)
        best_den = np.where(better, den, best_den)
        best_cols = [np.where(better, new, old) for new, old in zip(cols, best_cols)]
        lam = np.where(np.isfinite(best), best, lam)
    else:  # the cap: the gap at λ = best (the bound holds for any λ)
        gap = step(lam)[2]
    with np.errstate(invalid="ignore", divide="ignore"):
        slack = np.where(gap > 0, gap / np.maximum(d_min, floor), 0.0)
    # no tuple with positive weight: none is a ratio (guarded: the linear bound covers them)
    none = np.inf if not np.any(floor) else -np.inf
    upper = np.where(np.isfinite(best), best + slack, none)
    return best, upper, best_cols, best_den, steps


def _guarded_bound(level: _Level, case: _Case, scale, guard, sb):
    """An upper bound on ``σ(p − t)`` over the tuples whose total weight is below the guard
    (``-inf`` where there are none): there ``p = Σ α·U/guard + b`` is linear in the slots, and
    each term's weight is below the guard, so slot by slot
    ``σ(p − t) ≤ σ(b − t) + (A·σU_0 + Σ_j max_{α_j(c) < guard} α_j(c)·σU_j(c))/guard``."""
    w, h, w0, h0, eq, ge, floor = level.w, level.h, level.w0, level.h0, level.eq, level.ge, level.floor
    total = np.where(w0 < floor, w0 * (h0 - sb), -np.inf)  # σU = σ(u − t) − σ(b − t)
    for table, witness, k, _ in case.groups:
        mask = (eq if witness else ge)[None] & (w[:, table] < floor[..., None])
        term = np.where(mask, w[:, table] * (h[:, table] - sb[..., None]), -np.inf)
        total = total + k * term.max(axis=-1)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(total), sb + scale * total / guard, -np.inf)
