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
otherwise.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..task.family import Family, ProductFamily
from ..task.minip import EXACT_THRESHOLD

#: Most sequences the check evaluates one by one, each as a fraction (about 10 s).
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
        raise NotTwoLevel(f"it has {count:,} sequences; at most {MAX_SEQUENCES:,} are checked one by one")
    return family.expand() if product else family


def two_levels(family: Family) -> TwoLevels:
    """The two levels of every query of ``family`` (module docstring; a family of
    :func:`sequences`), or :class:`NotTwoLevel`."""
    index = family.index
    if len(family.scored_positions) != 1:
        raise NotTwoLevel("it scores every position; the construction keys the query position apart")
    (q,) = family.scored_positions
    bits = family.tokens.astype(np.int64)
    pairs = np.concatenate([index[:, [q, j]] for j in range(3) if j != q])  # (x, z) per candidate slot
    overlaps = (bits[pairs[:, 0]] * bits[pairs[:, 1]]).sum(axis=1)
    seen = np.unique(np.column_stack([pairs[:, 0], overlaps]), axis=0)  # (x, s), sorted
    queries, first, count = np.unique(seen[:, 0], return_index=True, return_counts=True)
    if (count != 2).any():
        x = int(queries[np.argmax(count != 2)])
        shown = ", ".join(str(v) for v in seen[seen[:, 0] == x, 1])
        raise NotTwoLevel(
            f"query token {x} sees its candidates at {count[count != 2][0]} overlap levels ({shown}), not 2"
        )
    lo, hi = seen[first, 1], seen[first + 1, 1]
    levels = {int(x): (int(a), int(b)) for x, a, b in zip(queries, lo, hi)}
    at_bottom = overlaps == lo[np.searchsorted(queries, pairs[:, 0])]
    bottoms = np.unique(pairs[at_bottom][:, ::-1], axis=0)  # (z, x), sorted by z
    shared = np.flatnonzero(bottoms[1:, 0] == bottoms[:-1, 0])
    if len(shared):
        z, a, b = bottoms[shared[0], 0], bottoms[shared[0], 1], bottoms[shared[0] + 1, 1]
        raise NotTwoLevel(f"candidate token {z} is at the bottom of two queries ({a} and {b})")
    return TwoLevels(levels, {int(z): int(x) for z, x in bottoms})


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
            "max_error_float": float(self.max_error),
            "exact": self.exact,
            "sequences": self.sequences,
        }


def check_two_heads(family, epsilon: Fraction | None = None) -> TwoHeadCheck:
    """Build the construction on ``family`` (module docstring; ``epsilon``: the query
    position's key scale, default the one the argument says is safe) and evaluate it exactly
    on every scored sequence; :class:`NotTwoLevel` where it does not apply."""
    family = sequences(family)
    found = two_levels(family)
    queries = sorted(found.levels)
    k = antichain_width(len(queries))
    half = (k + 1) // 2
    subsets = {x: frozenset(s) for x, s in zip(queries, itertools.combinations(range(k), half))}
    gap = max(hi - lo for lo, hi in found.levels.values())
    epsilon = Fraction(1, 4 * gap * half) if epsilon is None else epsilon
    self_weight = epsilon * half  # <1_{S_x}, ε·1>

    def weight(x: int, z: int) -> int:  # <1_{S_x}, key(z)>: key(z) = 1 − 1_{S_w}, w its query
        w = found.bottom_of.get(z)
        return half if w is None else len(subsets[x] - subsets[w])

    (q,) = family.scored_positions
    others = [p for p in range(3) if p != q]
    bits = family.tokens.astype(np.int64)
    worst = Fraction(0)
    for row in family.index.tolist():
        x, c, d = row[q], row[others[0]], row[others[1]]
        size, s, t = (int(bits[x] @ bits[z]) for z in (x, c, d))
        lo, hi = found.levels[x]
        mean = Fraction(size + s + t, 3)  # head 1: <3x, (x + c + d)/3>/3, uniform weights
        share = self_weight / (self_weight + weight(x, c) + weight(x, d))  # head 2: λ
        prediction = 3 * mean - size - hi + (hi - lo) * share
        worst = max(worst, abs(prediction - min(size, s, t)))
    return TwoHeadCheck(len(queries), k, epsilon, worst, len(family.index))
