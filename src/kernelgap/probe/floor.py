"""The query-blind floor of a family (docs/theory.md, "The query-blind floor").

A *query-blind* model attends uniformly: ``α_ij`` is one constant, whatever the query
and the candidates, so with position-free values ``v`` and the query-dependent affine
readout its prediction at a scored position ``i`` is

    p_i = F(x_i) + Σ_{j ≠ i} H(x_i, x_j)

for functions ``F`` (the readout's bias and the query's own value) and ``H`` (the readout
applied to a candidate's value) that are free on a finite family.  Each query token has
its own ``F(x), H(x, ·)``, so the family splits into one problem per query token.

Two numbers per family, torch-free:

* :func:`minimax_floor` — the smallest max error any query-blind model reaches, an exact
  :class:`~fractions.Fraction`: per query token a linear program solved in exact
  rational arithmetic whose dual solution ``λ`` (``Aᵀλ = 0``, ``Σ|λ| ≤ 1``) proves that
  no query-blind model does better and whose primal solution proves that one reaches it;
  both are checked exactly before the number is returned.
* :func:`loss_optimum` — the query-blind model that minimises the trainer's loss, the
  power mean ``(mean |e|^p)^(1/p)`` (a strictly convex function of the predictions, so
  its errors are unique), found by Newton's method in float64: its loss, max error and
  mean absolute error.  A run that collapses onto uniform attention ends here, not at the
  minimax floor (on the witness family at ``p = 8``: max error 1.9753 against 3/2).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

#: Scored positions above which a family's floor is not computed (one Python row each).
MAX_FLOOR_ROWS = 200_000
#: Largest denominator tried when a float solution of an exact system is read as rationals
#: (then checked exactly; the exact elimination is the fallback).
RATIONAL_GUESS = 10_000
#: Newton's method stops after a full step smaller than this, relative to the parameters.
NEWTON_TOLERANCE = 1e-12
#: Newton steps at most, per query token.
NEWTON_STEPS = 200


@dataclass(frozen=True)
class Problem:
    """One query token's rows, each ``(candidates, target, weight)``: the candidates (ids
    ``0..C − 1`` in a canonical order, repeated as often as they fill the sequence's other
    positions), the target at the query, and how many scored positions share both."""

    candidates: int
    rows: tuple[tuple[tuple[int, ...], int, int], ...]  # (candidate ids with repeats, target, weight)

    def matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``A [R, 1 + C]`` (a column of ones for ``F``, then counts), targets, weights."""
        a = np.zeros((len(self.rows), 1 + self.candidates))
        a[:, 0] = 1.0
        for r, (cands, _, _) in enumerate(self.rows):
            for c in cands:
                a[r, 1 + c] += 1.0
        t = np.array([row[1] for row in self.rows], dtype=float)
        w = np.array([row[2] for row in self.rows], dtype=float)
        return a, t, w


def problems(family, positional: bool = False) -> list[Problem] | None:
    """The family's query-blind problems, one per query token (identical ones once each are
    kept apart: the list has one entry per token), or None past :data:`MAX_FLOOR_ROWS`.
    ``positional``: the additive problems instead (:func:`additive_floor`), one per scored
    position and query token, a candidate id per (position, token)."""
    positions = family.scored_positions
    if len(family) * len(positions) > MAX_FLOOR_ROWS:
        return None
    index = np.asarray(family.index)
    targets = family.targets()
    tokens = int(index.max()) + 1
    groups: dict[tuple[int, int], dict[tuple[tuple[int, ...], int], int]] = {}
    for p in positions:
        others = [o for o in range(index.shape[1]) if o != p]
        for seq in range(len(index)):
            if positional:
                cands = tuple(slot * tokens + int(index[seq, o]) for slot, o in enumerate(others))
            else:
                cands = tuple(sorted(int(c) for c in index[seq, others]))
            rows = groups.setdefault((p if positional else 0, int(index[seq, p])), {})
            key = (cands, int(targets[seq, p]))
            rows[key] = rows.get(key, 0) + 1
    return [_canonical(rows) for _, rows in sorted(groups.items())]


def _canonical(rows: dict[tuple[tuple[int, ...], int], int]) -> Problem:
    """Candidates renumbered by what their rows look like, so the problems of queries built
    alike compare equal (solved once); the renumbering changes nothing else."""
    sig: dict[int, list] = {}
    for (cands, t), w in rows.items():
        for c in set(cands):
            sig.setdefault(c, []).append((t, cands.count(c), len(cands), w))
    order = sorted(sig, key=lambda c: (sorted(sig[c]), c))
    new = {c: k for k, c in enumerate(order)}
    out = sorted((tuple(sorted(new[c] for c in cands)), t, w) for (cands, t), w in rows.items())
    return Problem(len(order), tuple(out))


# -- the minimax floor, exact ----------------------------------------------------------


def _independent_columns(a: np.ndarray) -> list[int]:
    """Indices of a maximal set of linearly independent columns of an integer matrix, taken
    greedily by numerical rank (exact enough for small integer matrices, and never trusted:
    every certificate built on the choice is checked exactly against all the columns)."""
    keep: list[int] = []
    for c in range(a.shape[1]):
        if np.linalg.matrix_rank(a[:, keep + [c]]) > len(keep):
            keep.append(c)
    return keep


def _solve(a: list[list[Fraction]], t: list[Fraction]) -> list[Fraction]:
    """The ``z`` with ``A z = t`` for ``A`` of independent columns and ``t`` in its span."""
    rows = [list(r) + [ti] for r, ti in zip(a, t)]
    n = len(a[0])
    for c in range(n):
        pivot = next(r for r in range(c, len(rows)) if rows[r][c] != 0)
        rows[c], rows[pivot] = rows[pivot], rows[c]
        rows[c] = [x / rows[c][c] for x in rows[c]]
        for r in range(len(rows)):
            if r != c and rows[r][c] != 0:
                f = rows[r][c]
                rows[r] = [x - f * y for x, y in zip(rows[r], rows[c])]
    return [rows[c][-1] for c in range(n)]


def minimax_problem(problem: Problem) -> tuple[Fraction, list[Fraction], list[Fraction]]:
    """``(E, z, λ)``: the smallest max error ``E`` of ``p = A z`` on the problem's rows, a
    model ``z`` reaching it and the dual certificate ``λ`` (one entry per row), all exact.

    The dual ``max tᵀλ s.t. Aᵀλ = 0, Σ|λ| ≤ 1`` is solved by the simplex method (Bland's
    rule) over ``λ = λ⁺ − λ⁻``; ``z`` and ``E`` are its multipliers.  Both are checked:
    ``|A_r z − t_r| ≤ E`` for every row (E is reached) and ``|tᵀλ| = E`` with ``Aᵀλ = 0``,
    ``Σ|λ| ≤ 1`` (nothing does better: ``tᵀλ = −λᵀ(A z − t) ≤ Σ|λ| · max|e|``)."""
    dense, target, _ = problem.matrix()
    keep = _independent_columns(dense)
    full = [[Fraction(int(x)) for x in row] for row in dense]
    a = [[row[c] for c in keep] for row in full]
    t = [Fraction(row[1]) for row in problem.rows]
    if np.linalg.matrix_rank(np.column_stack([dense[:, keep], target])) == len(keep):  # t = A z, no error
        z_kept = _exact_fit(dense[:, keep], target, a, t)
        return Fraction(0), _spread(z_kept, keep, problem.candidates), [Fraction(0)] * len(t)
    dual, z_kept, value = _dual_simplex(a, t)
    n_rows, n_par = len(a), len(keep)
    # the two certificates, checked exactly
    best = sum(ti * li for ti, li in zip(t, dual))
    worst = max(abs(sum(ar[k] * z_kept[k] for k in range(n_par)) - tr) for ar, tr in zip(a, t))
    balanced = all(sum(full[r][k] * dual[r] for r in range(n_rows)) == 0 for k in range(1 + problem.candidates))
    if not (balanced and sum(abs(x) for x in dual) <= 1 and best == value and worst == value):
        raise ArithmeticError("the query-blind floor failed its exact check")  # pragma: no cover
    return value, _spread(z_kept, keep, problem.candidates), dual


def _spread(z_kept: list[Fraction], keep: list[int], candidates: int) -> list[Fraction]:
    """A model over the independent columns ``keep`` as one over every column (0 elsewhere)."""
    z = [Fraction(0)] * (1 + candidates)
    for c, v in zip(keep, z_kept):
        z[c] = v
    return z


def _exact_fit(dense: np.ndarray, target: np.ndarray, a: list[list[Fraction]], t: list[Fraction]) -> list[Fraction]:
    """The ``z`` with ``A z = t`` exactly, for ``t`` in the span of ``A``'s independent columns:
    the least-squares solution made rational, else solved exactly (:func:`_solve`)."""
    guess = np.linalg.lstsq(dense, target, rcond=None)[0]
    z_kept = [Fraction(float(v)).limit_denominator(RATIONAL_GUESS) for v in guess]

    def fits(zk):
        return all(sum(ar[k] * zk[k] for k in range(len(zk))) == tr for ar, tr in zip(a, t))

    if not fits(z_kept):
        z_kept = _solve(a, t)
        if not fits(z_kept):
            raise ArithmeticError("the query-blind floor failed its exact check")  # pragma: no cover
    return z_kept


def _dual_simplex(a: list[list[Fraction]], t: list[Fraction]) -> tuple[list[Fraction], list[Fraction], Fraction]:
    """``(λ, z, E)`` of the dual ``max tᵀλ s.t. Aᵀλ = 0, Σ|λ| ≤ 1`` by the simplex method
    (Bland's rule) over ``λ = λ⁺ − λ⁻``: ``z`` and ``E`` are its multipliers (unchecked)."""
    n_rows, n_par = len(a), len(a[0])
    # columns: λ⁺ (n_rows), λ⁻ (n_rows), slack of Σλ ≤ 1; constraint rows: Aᵀλ = 0 (n_par), Σλ ≤ 1
    n_var = 2 * n_rows + 1
    m = n_par + 1
    tab = [[Fraction(0)] * (n_var + m + 1) for _ in range(m)]  # + identity block (B⁻¹) + right side
    for k in range(n_par):
        for r in range(n_rows):
            tab[k][r], tab[k][n_rows + r] = a[r][k], -a[r][k]
    for j in range(2 * n_rows):
        tab[n_par][j] = Fraction(1)
    tab[n_par][2 * n_rows] = Fraction(1)
    tab[n_par][-1] = Fraction(1)
    for i in range(m):
        tab[i][n_var + i] = Fraction(1)
    cost = t + [-x for x in t] + [Fraction(0)] + [Fraction(0)] * m
    basis = [-1] * n_par + [2 * n_rows]

    def pivot(row: int, col: int) -> None:
        p = tab[row][col]
        tab[row] = [x / p for x in tab[row]]
        for i in range(m):
            if i != row and tab[i][col] != 0:
                f = tab[i][col]
                tab[i] = [x - f * y for x, y in zip(tab[i], tab[row])]
        basis[row] = col

    for k in range(n_par):  # the equality rows: a basic λ each, at value 0 (Aᵀ has full row rank)
        col = next(j for j in range(2 * n_rows) if tab[k][j] != 0 and j not in basis)
        pivot(k, col)
    while True:
        y = [sum(cost[basis[i]] * tab[i][j] for i in range(m)) for j in range(n_var)]
        enter = next((j for j in range(n_var) if j not in basis and cost[j] - y[j] > 0), None)
        if enter is None:
            break
        ratios = [(tab[i][-1] / tab[i][enter], basis[i], i) for i in range(m) if tab[i][enter] > 0]
        if not ratios:  # pragma: no cover - Σλ ≤ 1 bounds the program
            raise ArithmeticError("the query-blind dual program is unbounded")
        pivot(min(ratios)[2], enter)
    lam = [Fraction(0)] * n_var
    for i, j in enumerate(basis):
        lam[j] = tab[i][-1]
    multipliers = [sum(cost[basis[i]] * tab[i][n_var + k] for i in range(m)) for k in range(m)]
    return [lam[r] - lam[n_rows + r] for r in range(n_rows)], multipliers[:n_par], multipliers[n_par]


def minimax_floor(family, positional: bool = False) -> Fraction | None:
    """The family's query-blind floor (module docstring): the largest per-query minimax
    error, exact; None for a family past :data:`MAX_FLOOR_ROWS`.  ``positional``: the
    additive floor (:func:`additive_floor`)."""
    probs = problems(family, positional)
    if probs is None:
        return None
    solved: dict[Problem, Fraction] = {}
    for prob in probs:
        if prob not in solved:
            solved[prob] = minimax_problem(prob)[0]
    return max(solved.values(), default=Fraction(0))


def additive_floor(family) -> Fraction | None:
    """The smallest max error of any model *additive in its candidates* (docs/theory.md, "The
    additivity certificate"): ``p_i = F_i(x_i) + Σ_{j≠i} H_ij(x_i, x_j)`` with ``F_i, H_ij``
    free per scored position ``i`` and candidate position ``j``; exact, primal and dual
    checked as :func:`minimax_problem` checks them; None past :data:`MAX_FLOOR_ROWS`.  No
    larger than the query-blind floor (a query-blind model is additive); on the witness
    family both are 3/2 (the rectangle)."""
    return minimax_floor(family, positional=True)


# -- the gated bound, exact --------------------------------------------------------------


def gated_floor(family) -> Fraction | None:
    """A lower bound on the max error of every model whose candidates meet only through a
    *gate of one token* (docs/theory.md, "The gated certificate"): at a scored position ``i``
    with candidate positions ``a < b``, ``p_i = F_i(x_i) + H_ib(x_i, x_b) + γ_i(x_b)·H_ia(x_i, x_a)``,
    all free, the gate ``γ_i`` a scalar of the later candidate's token alone.  Exact; 0 where
    no pair of constraints meets; None past :data:`MAX_FLOOR_ROWS` or for a family whose
    sequences are not a query and two candidates.

    For a query ``x`` and tokens ``c, c'`` at ``a``, the two gates ``γ(u), γ(w)`` at ``b`` scale
    one difference ``H(x, c) − H(x, c')``, so a max error ``ε`` (``e = 2ε``) bounds
    ``|γ(u)|/|γ(w)| ≤ (δ_u + e)/(δ_w − e)``, ``δ`` the targets' difference over ``c, c'``.  Two
    such constraints with ``u, w`` swapped multiply to 1, so
    ``e ≥ (AB − CD)/(A + B + C + D)`` (``A, C`` the first's ``δ_w, δ_u``; ``B, D`` the second's):
    the bound is the largest over every pair (the Pareto-best constraints of each pair of gates).
    On the witness family ``A = B = 6``, ``C = D = 0``: 3/2."""
    index = np.asarray(family.index)
    if index.ndim != 2 or index.shape[1] != 3 or len(family) * len(family.scored_positions) > MAX_FLOOR_ROWS:
        return None
    targets = family.targets()
    tables: dict[tuple[int, int], dict[int, dict[int, Fraction]]] = {}
    for p in family.scored_positions:
        a, b = [o for o in range(3) if o != p]
        for seq in range(len(index)):
            by_gate = tables.setdefault((p, int(index[seq, p])), {}).setdefault(int(index[seq, b]), {})
            by_gate[int(index[seq, a])] = Fraction(int(targets[seq, p]))
    constraints: dict[tuple[int, int, int], set[tuple[Fraction, Fraction]]] = {}
    for (p, _), gates in tables.items():
        for u, w in itertools.permutations(sorted(gates), 2):
            shared = sorted(gates[u].keys() & gates[w].keys())
            for c, c2 in itertools.combinations(shared, 2):
                small, big = abs(gates[u][c] - gates[u][c2]), abs(gates[w][c] - gates[w][c2])
                if big > small:
                    constraints.setdefault((p, u, w), set()).add((small, big))
    best = Fraction(0)
    for (p, u, w), there in constraints.items():
        back = constraints.get((p, w, u))
        if back and u < w:
            for (c, a_), (d, b_) in itertools.product(_pareto(there), _pareto(back)):
                best = max(best, (a_ * b_ - c * d) / (2 * (a_ + b_ + c + d)))
    return best


def _pareto(pairs: set[tuple[Fraction, Fraction]]) -> list[tuple[Fraction, Fraction]]:
    """The ``(small, big)`` pairs no other beats on both (a smaller ``small``, a larger ``big``)."""
    out: list[tuple[Fraction, Fraction]] = []
    for small, big in sorted(pairs, key=lambda sb: (sb[0], -sb[1])):
        if not out or big > out[-1][1]:
            out.append((small, big))
    return out


# -- the optimum of the training loss --------------------------------------------------


def lp_errors(problem: Problem, power: float) -> np.ndarray:
    """Errors ``A z − t`` (one per row) of the model minimising ``Σ_r w_r |e_r|^p``: Newton's
    method with backtracking from the weighted least-squares fit (the ``p = 2`` answer)."""
    a, t, w = problem.matrix()
    a = a[:, _independent_columns(a)]
    sw = np.sqrt(w)
    z = np.linalg.lstsq(a * sw[:, None], t * sw, rcond=None)[0]
    if power == 2:
        return a @ z - t

    def objective(zz):
        return float((w * np.abs(a @ zz - t) ** power).sum())

    f = objective(z)
    for _ in range(NEWTON_STEPS):
        if f == 0.0:
            break  # an exact fit
        e = a @ z - t
        ae = np.abs(e)
        grad = a.T @ (w * power * ae ** (power - 1) * np.sign(e))
        hess = (a * (w * power * (power - 1) * ae ** (power - 2))[:, None]).T @ a
        hess += np.eye(len(z)) * 1e-12 * max(np.trace(hess), 1e-300)
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:  # a singular Hessian (rows fitted exactly): the least-norm step
            step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        size, new = 1.0, None
        while size > 1e-12:
            cand = z - size * step
            fc = objective(cand)
            if fc <= f:
                new = (cand, fc)
                break
            size /= 2
        if new is None:
            break
        z, f = new
        if size == 1.0 and np.abs(step).max() <= NEWTON_TOLERANCE * (1.0 + np.abs(z).max()):
            break
    return a @ z - t


def _without_candidates(problem: Problem) -> Problem:
    rows: dict[int, int] = {}
    for _, t, w in problem.rows:
        rows[t] = rows.get(t, 0) + w
    return Problem(0, tuple(((), t, w) for t, w in sorted(rows.items())))


@dataclass(frozen=True)
class LossOptimum:
    """The query-blind model the training loss prefers: its loss (the power mean at
    ``power``), max error and mean absolute error over the family's scored positions."""

    power: float
    loss: float
    max_error: float
    mean_abs_error: float


def loss_optimum(family, power: float, query_only: bool = False) -> LossOptimum | None:
    """:class:`LossOptimum` of the family at the trainer's ``power`` (None past
    :data:`MAX_FLOOR_ROWS`); ``query_only``: of the predictions ``p_i = F(x_i)`` alone
    (``H ≡ 0``: the attention's output ignored), where a run whose weights vanish ends."""
    probs = problems(family)
    if probs is None:
        return None
    if query_only:
        probs = [_without_candidates(p) for p in probs]
    solved: dict[Problem, np.ndarray] = {}
    total = top = abs_sum = pow_sum = 0.0
    for prob in probs:
        if prob not in solved:
            solved[prob] = np.abs(lp_errors(prob, power))
        e = solved[prob]
        w = np.array([row[2] for row in prob.rows], dtype=float)
        total += w.sum()
        top = max(top, float(e.max()))
        abs_sum += float((w * e).sum())
        pow_sum += float((w * e**power).sum())
    if total == 0:
        return LossOptimum(power, 0.0, 0.0, 0.0)
    return LossOptimum(power, float((pow_sum / total) ** (1.0 / power)), top, float(abs_sum / total))


def query_blind(family, power: float) -> dict | None:
    """What a probe stores of a family (``probe.json``, each suite's ``query_blind``): the
    exact floor (``"3/2"`` and its float), the loss optimum at ``power``, and the loss
    optimum of the predictions that ignore the attention's output (``query_only``)."""
    floor = minimax_floor(family)
    best = loss_optimum(family, power)
    blind = loss_optimum(family, power, query_only=True)
    if floor is None or best is None or blind is None:
        return None
    return {
        "floor": str(floor),
        "floor_value": float(floor),
        "power": power,
        "loss": best.loss,
        "max_error": best.max_error,
        "mean_abs_error": best.mean_abs_error,
        "query_only": {"loss": blind.loss, "max_error": blind.max_error, "mean_abs_error": blind.mean_abs_error},
    }
