"""The ladder family: a product family on which the certificate grows exponentially in m.

Queries are a seeded random constant-weight code (weight ``w``, pairwise
overlaps ≤ λ); a query's good candidate is its complement (overlap 0), and
every other query's complement is a bad candidate for it, at overlap
``w − <x, y> ≥ w − λ``.  Each query also gets a *ladder*: candidates at
overlaps ``step, 2·step, …`` below that floor (its complement with some of
its own bits switched on).  Chains up the ladder make ε fall geometrically in
the overlap climb (docs/theory.md, "Product families"), so with the defaults
(``w = m/2``, ``λ = 3m/8``, step 4) every pair has ``ε ≤ 3^{−m/32}`` and the
Radon bound certifies every query up to about ``3^{m/16}`` of them —
while dense softmax with m-dimensional scores is exact on every input.

The family is a :class:`~kernelgap.task.family.ProductFamily`: every
``(x; c, c')`` over the candidates of all queries, never materialised.
"""

from __future__ import annotations

import numpy as np

from ..errors import FamilyError
from .codes import random_constant_weight
from .registry import register_family
from .family import ProductFamily
from .witness import chain_candidate


def ladder_levels(step: int, floor: int, rungs: int) -> list[int]:
    """Rung overlaps ``step, 2·step, …``: ``rungs`` of them, or (``rungs < 0``) every one
    that leaves a gap of at least 3 to the lowest bad overlap ``floor``."""
    if step < 1:
        raise FamilyError(f"step must be ≥ 1, got {step}")
    count = max(0, (floor - 3) // step) if rungs < 0 else rungs
    return [step * k for k in range(1, count + 1)]


@register_family("ladder")
def ladder(m: int = 128, n: int = 4096, seed: int = 0, weight: int = 0, max_overlap: int = -1,
           step: int = 4, rungs: int = -1, query_position: int = 1) -> ProductFamily:
    """The ladder product family (module docstring); ``weight = 0`` means m/2 and
    ``max_overlap = −1`` means 3m/8."""
    weight = weight or m // 2
    cap = (3 * m) // 8 if max_overlap < 0 else max_overlap
    if n < 2:
        raise FamilyError(f"a ladder family needs n ≥ 2 queries, got {n}")
    code = random_constant_weight(m, weight, cap, n, seed=seed, max_tries=max(200_000, 64 * n))
    levels = ladder_levels(step, weight - cap, rungs)
    if levels and levels[-1] >= weight:
        raise FamilyError(f"a rung at overlap {levels[-1]} needs weight > {levels[-1]}, got {weight}")
    goods = 1 - code
    rung_rows = np.array([[chain_candidate(x, s) for s in levels] for x in code],
                         dtype=np.uint8).reshape(-1, m)
    tokens, inverse = np.unique(np.concatenate([code, goods, rung_rows]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    queries, good_ids = inverse[:n], inverse[n:2 * n]
    family = ProductFamily(tokens, queries, inverse[n:], query_position,
                           list(zip(queries.tolist(), good_ids.tolist())),
                           f"ladder-m{m}-n{n}-s{seed}",
                           {"code": "random constant weight", "m": m, "queries": n, "seed": seed,
                            "weight": weight, "max_overlap": cap, "step": step, "ladder": levels,
                            "candidates": len(np.unique(inverse[n:]))})
    return family
