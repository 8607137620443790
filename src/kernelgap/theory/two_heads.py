"""Two heads on a two-level family: a total of ``1 + k`` features where one head needs n
(docs/theory.md, "Several heads"), built and checked in exact rationals on every sequence.

On a family of length-3 sequences whose query ``x`` sees its candidates at two overlap
levels ``lo_x < hi_x`` (its *bottom* tokens at ``lo_x``),
``min(s, s') = s + s' − hi_x + (hi_x − lo_x)·[both candidates at the bottom]``:

* head 1, rank 1, uniform (``α ≡ 1``), values ``v(z) = z``: the readout ``3x`` gives
  ``|x| + s + s'``, and the bias ``−|x| − hi_x`` leaves ``s + s' − hi_x``;
* head 2, rank k, detects the valley.  Each query gets a ``⌈k/2⌉``-subset ``S_x`` of the k
  features (distinct subsets: an antichain, so ``C(k, ⌈k/2⌉) ≥ n`` queries fit), its query
  feature the indicator of ``S_x``.  A candidate token z at the bottom of query w has the key
  of the complement of ``S_w``, any other candidate the all-ones key, and the query position
  the key ``ε·1``.  So a bottom candidate of x weighs ``|S_x ∖ S_x| = 0``, any other
  candidate ``|S_x ∖ S_w| ≥ 1``, and the query itself ``A = ε·⌈k/2⌉``.  The value is 1 at the
  query position and 0 elsewhere, read with ``hi_x − lo_x``: the head outputs
  ``λ = A / (A + weights of the candidates)``, which is 1 exactly on the valley and at most
  ``A/(A + 1)`` elsewhere.

Its error is 0 on the valley and ``(hi_x − lo_x)·λ < 1/2`` elsewhere once
``ε = 1/(4·(hi_x − lo_x)·⌈k/2⌉)``.  The check below does not rely on that argument: it
evaluates the prediction of every scored sequence as a fraction.

A family qualifies when it is a sequence family of length 3 scored at one position, every
query sees exactly two overlap levels, and no candidate token is at the bottom of two queries
(each key may then vanish on one query's subset only); :func:`two_levels` says why not
otherwise.  :func:`two_head_model` sets the same construction into an ordinary two-head
``table`` model (torch, imported there only), a second code path the tests hold to the first.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..task.family import Family, ProductFamily
from ..task.minip import EXACT_THRESHOLD
from .chains import overlaps

#: Most sequences the check reads (a product family expanded to them, ``[S, 3]`` int64).
MAX_SEQUENCES = 1 << 20


class NotTwoLevel(ValueError):
    """A family the two-head construction does not apply to, with the reason."""


@dataclass(frozen=True)
class TwoLevels:
    """What the construction reads from a family: per query token its ``(lo, hi)`` levels,
    and per candidate token the query whose bottom it is (absent: none)."""

    levels: dict[int, tuple[int, int]]
    bottom_of: dict[int, int]


def antichain_width(n: int) -> int:
    """The least k ≥ 1 with ``C(k, ⌈k/2⌉) ≥ n``: the features of head 2 for n queries."""
    k = 1
    while math.comb(k, (k + 1) // 2) < n:
        k += 1
    return k


def sequences(family) -> Family:
    """``family`` as the sequences the check evaluates: a product family expanded, each
    refused with the reason when it is not of length 3 or has more than :data:`MAX_SEQUENCES`."""
    product = isinstance(family, ProductFamily)
    length = family.length if product else family.index.shape[1]
    if length != 3:
        raise NotTwoLevel(f"its sequences have length {length}, not 3 (min = s + s' − max needs two candidates)")
    count = family.sequence_count if product else len(family.index)
    if count > MAX_SEQUENCES:
        raise NotTwoLevel(f"it has {count:,} sequences; at most {MAX_SEQUENCES:,} are checked")
    return family.expand() if product else family


def _levels_of(family: Family) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The candidate slots ``(x, z)``, their overlaps, and the distinct ``(x, level)`` rows
    sorted by query token, of a family of :func:`sequences` scored at one position."""
    if len(family.scored_positions) != 1:
        raise NotTwoLevel("it scores every position; the construction keys the query position apart")
    (q,) = family.scored_positions
    pairs = np.concatenate([family.index[:, [q, j]] for j in range(3) if j != q])  # (x, z) per slot
    level = overlaps(family.tokens, pairs[:, 0], pairs[:, 1])
    width = int(level.max()) + 1
    seen = np.unique(pairs[:, 0] * width + level)  # (x, s) as one key, sorted
    return pairs, level, np.column_stack([seen // width, seen % width])


def most_levels(family) -> int | None:
    """The most overlap levels at which one query sees its candidates (2 on a two-level family);
    None where :func:`sequences` refuses the family."""
    try:
        _, _, seen = _levels_of(sequences(family))
    except NotTwoLevel:
        return None
    return int(np.unique(seen[:, 0], return_counts=True)[1].max())


def two_levels(family: Family) -> TwoLevels:
    """The two levels of every query of ``family`` (module docstring; a family of
    :func:`sequences`), or :class:`NotTwoLevel`."""
    pairs, level, seen = _levels_of(family)
    queries, first, count = np.unique(seen[:, 0], return_index=True, return_counts=True)
    if (count != 2).any():
        x = int(queries[np.argmax(count != 2)])
        shown = ", ".join(str(v) for v in seen[seen[:, 0] == x, 1])
        raise NotTwoLevel(
            f"query token {x} sees its candidates at {count[count != 2][0]} overlap levels ({shown}), not 2"
        )
    lo, hi = seen[first, 1], seen[first + 1, 1]
    levels = {int(x): (int(a), int(b)) for x, a, b in zip(queries, lo, hi)}
    at_bottom = level == lo[np.searchsorted(queries, pairs[:, 0])]
    tokens = len(family.tokens)
    bottoms = np.unique(pairs[at_bottom, 1] * tokens + pairs[at_bottom, 0])  # (z, x), sorted by z
    bottoms = np.column_stack([bottoms // tokens, bottoms % tokens])
    shared = np.flatnonzero(bottoms[1:, 0] == bottoms[:-1, 0])
    if len(shared):
        z, a, b = bottoms[shared[0], 0], bottoms[shared[0], 1], bottoms[shared[0] + 1, 1]
        raise NotTwoLevel(f"candidate token {z} is at the bottom of two queries ({a} and {b})")
    return TwoLevels(levels, {int(z): int(x) for z, x in bottoms})


def antichain(queries: list[int], k: int) -> dict[int, frozenset[int]]:
    """Query token → its ``⌈k/2⌉``-subset of the k features (the first ones in lexicographic order)."""
    return {x: frozenset(s) for x, s in zip(queries, itertools.combinations(range(k), (k + 1) // 2))}


def safe_epsilon(gap: int, k: int) -> Fraction:
    """The query position's key scale ``1/(4·gap·⌈k/2⌉)``: the self weight ``A = 1/(4·gap)``,
    so ``gap·A/(A + 1) < 1/4``."""
    return Fraction(1, 4 * gap * ((k + 1) // 2))


@dataclass(frozen=True)
class TwoHeadCheck:
    """The construction on one family: its heads' feature counts, ``ε``, and its exact max
    error over every scored sequence."""

    queries: int
    width: int  # k, the features of head 2
    epsilon: Fraction
    max_error: Fraction
    sequences: int

    @property
    def total(self) -> int:
        return 1 + self.width

    @property
    def exact(self) -> bool:
        return self.max_error < EXACT_THRESHOLD

    def to_json(self) -> dict:
        return {
            "heads": [1, self.width],
            "total": self.total,
            "epsilon": str(self.epsilon),
            "max_error": str(self.max_error),
            "exact": self.exact,
            "sequences": self.sequences,
        }


def check_two_heads(family, epsilon: Fraction | None = None) -> TwoHeadCheck:
    """Build the construction on ``family`` (module docstring; ``epsilon``: the query
    position's key scale, default :func:`safe_epsilon`) and evaluate it exactly on every scored
    sequence; :class:`NotTwoLevel` where it does not apply.  A prediction depends only on
    integers found in numpy, each distinct tuple evaluated once, as fractions."""
    family = sequences(family)
    found = two_levels(family)
    queries = sorted(found.levels)
    k = antichain_width(len(queries))
    half = (k + 1) // 2
    gap = max(hi - lo for lo, hi in found.levels.values())
    epsilon = safe_epsilon(gap, k) if epsilon is None else epsilon
    self_weight = epsilon * half  # <1_{S_x}, ε·1>
    (q,) = family.scored_positions
    x, c, d = (family.index[:, p] for p in (q, *(p for p in range(3) if p != q)))
    size, s, t = (overlaps(family.tokens, x, z) for z in (x, c, d))
    count = len(family.tokens)
    levels = np.zeros((count, 2), dtype=np.int64)
    levels[list(found.levels)] = list(found.levels.values())
    lo, hi = levels[x].T
    mask = np.zeros(count, dtype=np.uint64)  # S_x as a bit mask (k ≤ 23 for MAX_SEQUENCES)
    for v, subset in antichain(queries, k).items():
        mask[v] = sum(1 << i for i in subset)
    bottom_of = np.full(count, -1, dtype=np.int64)
    bottom_of[list(found.bottom_of)] = list(found.bottom_of.values())

    def weight(z):  # <1_{S_x}, key(z)>: key(z) = 1 − 1_{S_w} for the query w whose bottom z is
        w = bottom_of[z]
        return np.where(w >= 0, np.bitwise_count(mask[x] & ~mask[np.maximum(w, 0)]), half)

    tuples = np.unique(np.column_stack([lo, hi, size, s, t, weight(c) + weight(d)]), axis=0)
    worst = Fraction(0)
    for lo_x, hi_x, size_x, s_x, t_x, w in tuples.tolist():
        mean = Fraction(size_x + s_x + t_x, 3)  # head 1: uniform weights, v(z) = z, read with 3x
        share = self_weight / (self_weight + w)  # head 2: λ
        prediction = 3 * mean - size_x - hi_x + (hi_x - lo_x) * share
        worst = max(worst, abs(prediction - min(size_x, s_x, t_x)))
    return TwoHeadCheck(len(queries), k, epsilon, worst, len(family.index))


def two_head_model(family, dtype=None):
    """The two-head construction of :mod:`kernelgap.theory.two_heads` as an ordinary model:
    two ``table`` heads of rank k with position-dependent keys and values and a linear readout
    (docs/theory.md, "Two heads on a two-level family").  Head 1 uses one feature of its k
    (``α ≡ 1``; the others are zero: its kernel has rank 1), head 2 the antichain.  The readout
    is affine in the query, so every query must share one pair of levels ``(lo, hi)``; a
    family that is not two-level, or whose levels differ between queries, is refused in one line."""
    import torch

    from ..errors import KernelgapError
    from ..models.build import build_model, check_model
    from ..models.specs import KernelSpec

    try:
        family = sequences(family)
        found = two_levels(family)
    except NotTwoLevel as exc:
        raise KernelgapError(f"no two-head construction on {family.name}: {exc}") from None
    if len(set(found.levels.values())) != 1:
        raise KernelgapError(f"no two-head model on {family.name}: its queries' levels differ (the readout is affine)")
    ((lo, hi),) = set(found.levels.values())
    k = antichain_width(len(found.levels))
    spec = KernelSpec(feature_map="table", rank=k, heads=2, d_value=family.m, readout="linear", position_dependent=True)
    check_model(spec, "construction", m=family.m, tokens=len(family.tokens))
    model = build_model(spec, family.m, 3, seeds=[0], vocabulary=family.tokens, dtype=dtype or torch.float64)
    with torch.no_grad():
        _set_kernels(model, family, found, k, safe_epsilon(hi - lo, k))
        _set_readout(model, family, lo, hi)
    return model


def _set_kernels(model, family, found: TwoLevels, k: int, epsilon: Fraction) -> None:
    """The log-features of both heads (``table``: ``φ = exp θ``; a zero feature is ``LOG_ZERO``)."""
    import torch

    from ..models.constructions import LOG_ZERO

    (q,) = family.scored_positions
    t, dtype = len(family.tokens), model.scorer.q_table.theta.dtype
    subsets = antichain(sorted(found.levels), k)
    q_log = torch.full((2, t, k), LOG_ZERO, dtype=dtype)
    k_log = torch.full((2, 3, t, k), LOG_ZERO, dtype=dtype)
    q_log[0, :, 0] = k_log[0, :, :, 0] = 0.0  # head 1: one feature, weight 1 everywhere
    for x, s in subsets.items():
        q_log[1, x, sorted(s)] = 0.0
    for p in range(3):
        if p == q:
            k_log[1, p] = math.log(epsilon)  # the query position: ε·1
            continue
        k_log[1, p] = 0.0  # a candidate at no query's bottom: the all-ones key
        for z, w in found.bottom_of.items():
            k_log[1, p, z, sorted(subsets[w])] = LOG_ZERO  # the complement of S_w
    model.scorer.q_table.theta.copy_(q_log)
    model.scorer.k_table.theta.copy_(k_log.reshape(6, t, k))


def _set_readout(model, family, lo: int, hi: int) -> None:
    """Head 1: ``v(z) = z`` read with ``3x``; head 2: 1 at the query position, read with
    ``hi − lo``; bias ``−|x| − hi``.  Value slots run head-major, then position."""
    import torch

    (q,) = family.scored_positions
    ro, eye = model.readout, torch.eye(family.m, dtype=model.readout.value.weight.dtype)
    for p in range(3):
        ro.value.weight[p].copy_(eye)
        ro.value.bias[p].zero_()
        ro.value.weight[3 + p].zero_()
        ro.value.bias[3 + p].zero_()
        ro.value.bias[3 + p, 0, 0] = float(p == q)
    ro.read.weight[0].copy_(3 * eye)
    ro.read.bias[0].zero_()
    ro.read.weight[1].zero_()
    ro.read.bias[1].zero_()
    ro.read.bias[1, 0, 0] = float(hi - lo)
    ro.bias.weight.fill_(-1.0)
    ro.bias.bias.fill_(-float(hi))
