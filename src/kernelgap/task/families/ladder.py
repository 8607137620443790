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

from typing import Annotated

import numpy as np
from pydantic import Field

from ...errors import FamilyError
from ...validation import Int
from ..codes import check_code_exists, random_code_bytes, random_constant_weight
from ..family import ProductFamily, unique_rows
from ..registry import FamilyParams, Seed, Size, register_family
from .witness import chain_candidate


def ladder_levels(step: int, floor: int, rungs: int) -> list[int]:
    """Rung overlaps ``step, 2·step, …``: ``rungs`` of them, or (``rungs < 0``) every one
    that leaves a gap of at least 3 to the lowest bad overlap ``floor``."""
    if step < 1:
        raise FamilyError(f"step must be ≥ 1, got {step}")
    count = max(0, (floor - 3) // step) if rungs < 0 else rungs
    return [step * k for k in range(1, count + 1)]


def _resolved(m: int, weight: int, max_overlap: int, step: int, rungs: int) -> tuple[int, int, int]:
    """``(weight, cap, rungs)`` with the defaults filled in: ``w = m/2``, ``λ = 3m/8`` and every
    rung below the floor ``w − λ`` (:func:`ladder_levels`)."""
    weight = weight or m // 2
    cap = (3 * m) // 8 if max_overlap < 0 else max_overlap
    count = max(0, (weight - cap - 3) // step) if rungs < 0 else rungs
    return weight, cap, count


def _ladder_memory(p: FamilyParams) -> int:
    """Bytes of a build: the code search, the ``n·rungs`` rung rows (numpy rows of ``m`` bytes,
    about 112 bytes of header each) and the deduplication of all ``n·(2 + rungs)`` rows."""
    m, n = p.m, p.n
    _, _, count = _resolved(m, p.weight, p.max_overlap, p.step, p.rungs)
    rows = n * (2 + count)
    return random_code_bytes(m, n) + n * count * (m + 112) + rows * (2 * m + 48)


def _ladder_check(p: FamilyParams) -> None:
    """The code must exist: ``n`` at most the Johnson bound, and every rung below the weight."""
    weight, cap, count = _resolved(p.m, p.weight, p.max_overlap, p.step, p.rungs)
    check_code_exists(p.m, weight, cap, p.n)
    if count and p.step * count >= weight:
        raise FamilyError(f"a rung at overlap {p.step * count} needs weight > {p.step * count}, got {weight}")


@register_family("ladder", memory=_ladder_memory, check=_ladder_check)
def ladder(
    m: Size = 128,
    n: Annotated[Int, Field(ge=2)] = 4096,
    seed: Seed = 0,
    weight: Annotated[Int, Field(ge=0)] = 0,
    max_overlap: Annotated[Int, Field(ge=-1)] = -1,
    step: Size = 4,
    rungs: Annotated[Int, Field(ge=-1)] = -1,
    query_position: Annotated[Int, Field(ge=1, le=3)] = 1,
) -> ProductFamily:
    """The ladder product family (module docstring); ``weight = 0`` means m/2 and
    ``max_overlap = −1`` means 3m/8.  Parameters are checked by the registry
    (:func:`~kernelgap.task.registry.check_params`)."""
    weight, cap, _ = _resolved(m, weight, max_overlap, step, rungs)
    code = random_constant_weight(m, weight, cap, n, seed=seed, max_tries=max(200_000, 64 * n))
    levels = ladder_levels(step, weight - cap, rungs)
    goods = 1 - code
    rung_rows = np.array([[chain_candidate(x, s) for s in levels] for x in code], dtype=np.uint8).reshape(-1, m)
    tokens, inverse = unique_rows(np.concatenate([code, goods, rung_rows]))
    queries, good_ids = inverse[:n], inverse[n : 2 * n]
    meta = dict(code="random constant weight", m=m, queries=n, seed=seed, weight=weight, max_overlap=cap, step=step)
    meta.update(ladder=levels, candidates=len(np.unique(inverse[n:])))
    matching = list(zip(queries.tolist(), good_ids.tolist()))
    return ProductFamily(tokens, queries, inverse[n:], query_position, matching, f"ladder-m{m}-n{n}-s{seed}", meta)
