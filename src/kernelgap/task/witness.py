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

import numpy as np

from ..errors import FamilyError
from .codes import CW_METHODS, hadamard_code
from .registry import register_family
from .family import Family

#: Query readings: (query position, order of (query, a, b) columns in a row).
READINGS = {"first": (1, (0, 1, 2)), "final": (3, (1, 2, 0))}



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


def witness_from_code(code: np.ndarray, reading: str = "first", chain_step: int = 0,
                      name: str = "witness", meta: dict | None = None) -> Family:
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
    chains = np.array([[chain_candidate(x, s) for s in levels] for x in queries],
                      dtype=np.uint8).reshape(n, len(levels), m)
    tokens = np.concatenate([queries, goods, chains.reshape(-1, m)])
    q_id = np.arange(n)
    chain_ids = np.concatenate([(n + q_id)[:, None],
                                2 * n + q_id[:, None] * len(levels) + np.arange(len(levels))], axis=1)
    rows = _witness_rows(q_id, chain_ids, n + q_id)
    position, order = READINGS[reading]
    family = _assemble(tokens, rows[:, order], position, name, meta or {})
    family.meta.update({"m": m, "queries": n, "good": "complement", "reading": reading,
                        "chain_levels": levels, "sequences": len(family)})
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


@register_family("hadamard")
def hadamard(m: int = 24, n: int = 0, reading: str = "first", chain_step: int = 0) -> Family:
    """Witness family of the first ``n`` codewords (0 = all ``m − 1``) of a Hadamard code."""
    code = hadamard_code(m)
    n = n or len(code)
    if not 1 <= n <= len(code):
        raise FamilyError(f"a Hadamard code of order {m} has {len(code)} codewords, asked for {n}")
    meta = {"code": "hadamard", "weight": m // 2, "overlap": m // 4}
    return witness_from_code(code[:n], reading, chain_step, f"hadamard-m{m}-n{n}", meta)


@register_family("cw")
def cw(m: int = 16, weight: int = 8, max_overlap: int = 3, n: int = 16, method: str = "random",
       seed: int = 0, reading: str = "first", chain_step: int = 0) -> Family:
    """Witness family of a constant-weight code (``method`` greedy or random)."""
    if method not in CW_METHODS:
        raise FamilyError(f"method must be one of {', '.join(CW_METHODS)}, got {method!r}")
    code = CW_METHODS[method](m, weight, max_overlap, n, seed)
    meta = {"code": f"cw-{method}", "weight": weight, "max_overlap": max_overlap, "seed": seed}
    return witness_from_code(code, reading, chain_step, f"cw-m{m}-w{weight}-l{max_overlap}-n{n}", meta)


@register_family("witness")
def witness(reading: str = "first", chain_step: int = 0) -> Family:
    """The preset: m = 24, first 16 Hadamard codewords, 736 sequences (docs/experiments.md)."""
    family = hadamard(24, 16, reading, chain_step)
    family.name = "witness"
    family.meta["calibration"] = (
        f"the calibration family (first 16 rows of a normalized Hadamard matrix of order 24, "
        f"chain step {chain_step}, {len(family)} sequences); the paper's own witness suite had "
        "1,272 inputs and bound 8")
    return family
