"""The ceiling of pair certificates (docs/theory.md): a stand-in with the final API.

* :func:`usable_gap`: the least integer gap above 2δ a single step can use — 1 for
  δ < 1/2, 2 at δ = 1/2;
* :func:`pair_ceiling`: a proven upper bound on the queries any pair certificate
  certifies at that gap (gap 1: ``C(m, ⌊m/2⌋)``, Bollobás's set-pair bound; gap 2: None,
  no bound stated here);
* :func:`certificate_ceiling`: the two together at (m, δ, N).
"""

from __future__ import annotations

import math
from fractions import Fraction


def usable_gap(delta: Fraction) -> int:
    """The least integer gap above 2δ: 1 when δ < 1/2, 2 at δ = 1/2."""
    return math.floor(2 * delta) + 1


def pair_ceiling(m: int, gap: int) -> int | None:
    """An upper bound on the queries a pair certificate certifies at ``gap`` (None: unknown)."""
    return math.comb(m, m // 2) if gap == 1 else None


def certificate_ceiling(m: int, delta: Fraction, length: int) -> int | None:
    """:func:`pair_ceiling` at the gap δ allows (the bound does not depend on N)."""
    return pair_ceiling(m, usable_gap(delta))
