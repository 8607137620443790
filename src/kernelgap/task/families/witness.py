"""Witness families: the sequences a rank certificate needs (docs/theory.md, "The lower bound as a certificate").

Queries ``x_1..x_n`` come from a binary code; the good candidate of ``x`` is
its complement ``g_x = 1 − x`` (``<x, g_x> = 0``) and the good candidates of
the other queries are its bad candidates.  An optional *chain* of
intermediate candidates ``c`` with ``<x, c> = step, 2·step, …`` (the
complement with some of x's bits switched on) lets the certificate amplify
gap domination along paths.  For each query ``x`` the family holds

* ``(x; c, c)`` for every candidate ``c`` of x (good, chain, bad), and
* both mixed orders ``(x; a, b)``, ``(x; b, a)`` for every pair of chain
  candidates (the good one included) and every chain × bad pair,

so every comparison the certificate may use is present.  Without a chain
that is ``1 + 3(n − 1)`` sequences per query.  Two readings: ``first``
(query at position 1, ``(x, a, b)``) and ``final`` (causal final query at
position 3, ``(a, b, x)``).  Each family carries its matching ``(x, g_x)``.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from ...errors import FamilyError
from ...validation import Int
from ..codes import (
    CW_METHODS,
    _hadamard_recipe,
    check_code_exists,
    hadamard_code,
    hadamard_matrix_bytes,
    random_code_bytes,
)
from ..family import Family
from ..registry import FamilyParams, Seed, Size, register_family

#: Query readings: (query position, order of (query, a, b) columns in a row).
READINGS = {"first": (1, (0, 1, 2)), "final": (3, (1, 2, 0))}
#: A family parameter naming a reading.
Reading = Literal[tuple(READINGS)]
#: A chain step (0: no chain).
ChainStep = Annotated[Int, Field(ge=0)]


def chain_candidate(x: np.ndarray, overlap: int) -> np.ndarray:
    """``1 − x`` with the first ``overlap`` bits of x's support switched on: ``<x, c> = overlap``."""
    c = 1 - x
    c[np.flatnonzero(x)[:overlap]] = 1
    return c


def chain_levels(step: int, below: int) -> list[int]:
    """Intermediate overlaps ``step, 2·step, …`` strictly below ``below`` (none if step = 0)."""
    if step < 0:
        raise FamilyError(f"chain_step must be ≥ 0, got {step}")
    return list(range(step, below, step)) if step else []


def witness_from_code(
    code: np.ndarray, reading: str = "first", chain_step: int = 0, name: str = "witness", meta: dict | None = None
) -> Family:
    """The witness family of a code (module docstring): complements as good candidates."""
    if reading not in READINGS:
        raise FamilyError(f"reading must be one of {', '.join(READINGS)}, got {reading!r}")
    queries = np.asarray(code, dtype=np.uint8)
    n, m = queries.shape
    if n < 1:
        raise FamilyError("a witness family needs at least one query")
    goods = 1 - queries
    overlaps = queries.astype(np.int64) @ goods.T.astype(np.int64)  # s(x_i, g_j)
    top = int(overlaps.max()) if n > 1 else 0
    levels = chain_levels(chain_step, top)
    chains = np.array([[chain_candidate(x, s) for s in levels] for x in queries], dtype=np.uint8).reshape(-1, m)
    tokens = np.concatenate([queries, goods, chains])
    q_id = np.arange(n)
    chain_ids = np.concatenate(
        [(n + q_id)[:, None], 2 * n + q_id[:, None] * len(levels) + np.arange(len(levels))], axis=1
    )
    rows = _witness_rows(q_id, chain_ids, n + q_id)
    position, order = READINGS[reading]
    family = _assemble(tokens, rows[:, order], position, name, meta or {})
    family.meta.update(m=m, queries=n, good="complement", reading=reading, chain_levels=levels, sequences=len(family))
    family.matching = _matching(family, queries, goods)
    return family


def _witness_rows(q_id: np.ndarray, chain_ids: np.ndarray, good_ids: np.ndarray) -> np.ndarray:
    """Rows ``(query, a, b)`` of token ids for every query at once."""
    n, k = chain_ids.shape
    bad = np.array([np.delete(good_ids, i) for i in range(n)]).reshape(n, n - 1)
    parts = []

    def add(q, a, b):
        q, a, b = np.broadcast_arrays(q, a, b)
        parts.append(np.stack([q.ravel(), a.ravel(), b.ravel()], axis=1))

    cand = np.concatenate([chain_ids, bad], axis=1)
    add(q_id[:, None], cand, cand)  # duplicated
    first, second = np.nonzero(~np.eye(k, dtype=bool))
    add(q_id[:, None], chain_ids[:, first], chain_ids[:, second])  # chain pairs, both orders
    add(q_id[:, None, None], chain_ids[:, :, None], bad[:, None, :])  # chain, bad
    add(q_id[:, None, None], bad[:, None, :], chain_ids[:, :, None])  # bad, chain
    return np.concatenate(parts)


def _assemble(tokens: np.ndarray, rows: np.ndarray, position: int, name: str, meta: dict) -> Family:
    """A family from possibly repeated tokens and rows: both deduplicated."""
    uniq, inverse = np.unique(tokens, axis=0, return_inverse=True)
    index = np.unique(inverse.reshape(-1)[rows], axis=0)
    return Family(uniq, index, position, [], name, meta)


def _matching(family: Family, queries: np.ndarray, goods: np.ndarray) -> list[tuple[int, int]]:
    lookup = {row.tobytes(): i for i, row in enumerate(family.tokens)}
    return [(lookup[q.tobytes()], lookup[g.tobytes()]) for q, g in zip(queries, goods)]


def witness_bytes(n: int, m: int, levels: int) -> int:
    """Memory of :func:`witness_from_code` for ``n`` queries of length ``m`` and ``levels`` chain
    candidates each: the ``n × n`` overlaps, the chain rows (numpy rows of ``m`` bytes, about
    112 bytes of header each) and the ``R`` rows of three token ids (``k = 1 + levels``
    chain candidates, the good one included, and ``n − 1`` bad ones per query)::

        R = n·(k + n − 1) + n·k·(k − 1) + 2·n·k·(n − 1)

    each held as int64 about seven times over (parts, their concatenation, the reordering,
    the remapping and the row-wise deduplication)."""
    n, m, levels = max(n, 0), max(m, 0), max(levels, 0)
    k = 1 + levels
    rows = n * (k + n - 1) + n * k * (k - 1) + 2 * n * k * max(n - 1, 0)
    return 16 * n * m + 16 * n * n + n * levels * (2 * m + 112) + 2 * n * m + 7 * 24 * rows


def _levels(step: int, top: int) -> int:
    """``len(chain_levels(step, top))``, by arithmetic."""
    return max(0, (top - 1) // step) if step else 0


def _hadamard_memory(p: FamilyParams) -> int:
    """The Hadamard matrix (int64 and float64 copies, ``≈ 50·m²`` bytes) and the witness
    family of ``n`` (or ``m − 1``) codewords, whose chains climb to the overlap ``m/4``."""
    m, n = p.m, p.n or p.m - 1
    return hadamard_matrix_bytes(m) + witness_bytes(n, m, _levels(p.chain_step, m // 4 if n > 1 else 0))


def _hadamard_check(p: FamilyParams) -> None:
    m, n = p.m, p.n
    if m < 4 or m % 4 or (m <= 10**12 and _hadamard_recipe(m) is None):  # trial division to √m: instant
        hadamard_code(m)  # its refusal: the order, or the nearby orders it can build
    if n > m - 1:
        raise FamilyError(f"a Hadamard code of order {m} has {m - 1} codewords, asked for {n}")


@register_family("hadamard", memory=_hadamard_memory, check=_hadamard_check)
def hadamard(
    m: Size = 24, n: Annotated[Int, Field(ge=0)] = 0, reading: Reading = "first", chain_step: ChainStep = 0
) -> Family:
    """Witness family of the first ``n`` codewords (0 = all ``m − 1``) of a Hadamard code."""
    code = hadamard_code(m)
    n = n or len(code)
    meta = {"code": "hadamard", "weight": m // 2, "overlap": m // 4}
    return witness_from_code(code[:n], reading, chain_step, f"hadamard-m{m}-n{n}", meta)


def _cw_memory(p: FamilyParams) -> int:
    """The code search and the witness family, whose chains climb to the largest overlap
    ``w − min <x_i, x_j>`` of a query with another's good candidate: at most ``w``."""
    m, n = p.m, p.n
    search = 16 * n * m + 18 * n * n if p.method == "greedy" else random_code_bytes(m, n)
    return search + witness_bytes(n, m, _levels(p.chain_step, p.weight if n > 1 else 0))


def _cw_check(p: FamilyParams) -> None:
    """The code must exist: ``n`` at most the Johnson bound."""
    check_code_exists(p.m, p.weight, p.max_overlap, p.n)


@register_family("cw", memory=_cw_memory, check=_cw_check)
def cw(
    m: Size = 16,
    weight: Size = 8,
    max_overlap: Annotated[Int, Field(ge=0)] = 5,
    n: Size = 16,
    method: Literal[tuple(CW_METHODS)] = "random",
    seed: Seed = 0,
    reading: Reading = "first",
    chain_step: ChainStep = 0,
) -> Family:
    """Witness family of a constant-weight code (``method`` greedy or random).  The defaults
    build at once: the Johnson bound allows 226 words of length 16, weight 8 and overlaps
    ≤ 5, and both searches find the 16 asked for (a cap of 3 allows 16 in theory, but
    they find only 4; a cap of 4 allows 68, and the random search finds 12 to 14)."""
    code = CW_METHODS[method](m, weight, max_overlap, n, seed)
    meta = {"code": f"cw-{method}", "weight": weight, "max_overlap": max_overlap, "seed": seed}
    return witness_from_code(code, reading, chain_step, f"cw-m{m}-w{weight}-l{max_overlap}-n{n}", meta)


@register_family("witness")
def witness(reading: Reading = "first", chain_step: ChainStep = 0) -> Family:
    """The preset: m = 24, first 16 Hadamard codewords, 736 sequences (docs/experiments.md)."""
    family = hadamard(24, 16, reading, chain_step)
    family.name = "witness"
    family.meta["calibration"] = (
        f"the calibration family (first 16 rows of a normalized Hadamard matrix of order 24, "
        f"chain step {chain_step}, {len(family)} sequences); the paper's own witness suite had "
        "1,272 inputs and bound 8"
    )
    return family
