"""Out-of-distribution Min-IP families: disjoint train/test token pools (docs/experiments.md, "OOD").

Uniform random triples rarely need a sharp choice, so these pools are built
like the witness family, with nuisance bits that make every test token new:

* ``n`` **classes**: codewords ``c_i`` of a normalized Hadamard code of order
  ``h`` (weight ``h/2``, pairwise overlap ``h/4``);
* **queries** ``x = [c_i ; ν ; 0]`` with ``ν`` a weight-``w_q`` pattern on the
  query-nuisance bits;
* **candidates** ``g = [1 − c_j ; 0 ; μ]`` with ``μ`` a weight-``w_c`` pattern on
  separate candidate-nuisance bits, so ``<x, g> = <c_i, 1 − c_j>`` is ``0`` for
  the query's own class and ``h/4`` otherwise — the nuisance never changes an
  overlap, only the token's identity.

The nuisance patterns are split into disjoint train/test sets, so **no test
token (query or candidate) appears in training**.  Each query carries its
witness set: ``(x; g_i, g_i)`` and, for each partner class ``y``,
``(x; g_y, g_y)``, ``(x; g_i, g_y)``, ``(x; g_y, g_i)``, scored at position 1.
"""

from __future__ import annotations

from itertools import combinations
from math import comb
from typing import Annotated

import numpy as np
from pydantic import Field

from ...errors import FamilyError
from ...validation import Int
from ..codes import _hadamard_recipe, hadamard_code, hadamard_matrix_bytes
from ..family import Family
from ..registry import FamilyParams, Fraction, Seed, Size, Split, register_family
from .witness import READINGS, Reading


def weight_patterns(bits: int, weight: int) -> np.ndarray:
    """All ``C(bits, weight)`` binary patterns of the given weight, ``uint8``."""
    rows = np.zeros((comb(bits, weight), bits), dtype=np.uint8)
    for k, ones in enumerate(combinations(range(bits), weight)):
        rows[k, list(ones)] = 1
    return rows


def class_code(n: int) -> np.ndarray:
    """The first ``n`` codewords of the smallest Hadamard code with at least ``n``."""
    order = next((h for h in range(max(4, n + 1), 4 * n + 9) if h % 4 == 0 and _hadamard_recipe(h) is not None), None)
    if order is None:
        raise FamilyError(f"no Hadamard code with {n} codewords")
    return hadamard_code(order)[:n]


def _split_patterns(patterns: np.ndarray, test_fraction: float, rng) -> dict[str, np.ndarray]:
    order = rng.permutation(len(patterns))
    n_test = int(round(len(patterns) * test_fraction))
    if not 0 < n_test < len(patterns):
        raise FamilyError("test_fraction leaves no train or no test nuisance pattern")
    return {"test": patterns[order[:n_test]], "train": patterns[order[n_test:]]}


#: The nuisance bits of a token: ``(bits, weight)`` of a query's and of a candidate's.
QUERY_PATTERN, CANDIDATE_PATTERN = (8, 4), (6, 2)


def ood_split(
    n: int = 8,
    queries_per_class: int = 16,
    test_queries_per_class: int = 4,
    partners: int = 0,
    test_fraction: float = 0.4,
    seed: int = 0,
) -> tuple[Family, Family]:
    """Train and test families with disjoint tokens (see the module docstring).

    ``partners = 0`` pairs each query with every other class (its full witness
    set; the pools have no matching pairs, so no certificate binds them);
    ``partners = k`` samples ``k``.
    """
    if n < 2:
        raise FamilyError(f"an OOD family needs n ≥ 2 classes, got {n}")
    (query_bits, query_weight), (cand_bits, cand_weight) = QUERY_PATTERN, CANDIDATE_PATTERN
    rng = np.random.default_rng(seed)
    code = class_code(n)
    h = code.shape[1]
    q_pat = _split_patterns(weight_patterns(query_bits, query_weight), test_fraction, rng)
    c_pat = _split_patterns(weight_patterns(cand_bits, cand_weight), test_fraction, rng)
    per_class = {"train": queries_per_class, "test": test_queries_per_class}
    out = []
    for split in ("train", "test"):
        if per_class[split] > len(q_pat[split]):
            raise FamilyError(
                f"{per_class[split]} {split} queries per class but only {len(q_pat[split])} {split} nuisance patterns"
            )
        seqs = []
        for i in range(n):
            for nu in q_pat[split][rng.choice(len(q_pat[split]), per_class[split], replace=False)]:
                x = np.concatenate([code[i], nu, np.zeros(cand_bits, np.uint8)])
                seqs.extend(_witness_sequences(x, i, code, c_pat[split], partners, query_bits, rng))
        meta = {
            "n": n,
            "code_order": h,
            "split": split,
            "seed": seed,
            "queries_per_class": per_class[split],
            "partners": partners or n - 1,
        }
        out.append(Family.from_sequences(np.array(seqs), query_position=1, name=f"ood-n{n}-{split}", meta=meta))
    return out[0], out[1]


def _witness_sequences(x, i, code, cand_patterns, partners, query_bits, rng):
    """``(x; g_i, g_i)`` and, per partner y, the duplicated and both mixed orders."""
    n = len(code)

    def cand(j):
        mu = cand_patterns[rng.integers(len(cand_patterns))]
        return np.concatenate([1 - code[j], np.zeros(query_bits, np.uint8), mu])

    others = [j for j in range(n) if j != i]
    if partners:
        others = list(rng.choice(others, size=min(partners, len(others)), replace=False))
    seqs = [[x, cand(i), cand(i)]]
    for y in others:
        seqs += [[x, cand(y), cand(y)], [x, cand(i), cand(y)], [x, cand(y), cand(i)]]
    return seqs


def _ood_memory(p: FamilyParams) -> int:
    """Both sides are built.  With the class code's order ``h ≥ n + 1`` (its Hadamard matrix
    ``≈ 50·h²`` bytes) and tokens of ``W = h + 14`` bits, a side of ``q`` queries per class
    holds ``S = n·q·(1 + 3p)`` sequences (``p`` partners), each first a list of three numpy
    rows (about 112 bytes of header each), then dense bits, packed keys and int64 ids."""
    h = p.n + 1
    width = h + 14
    partners = min(p.partners, p.n - 1) if p.partners else p.n - 1
    per_sequence = 3 * (2 * width + 112) + 80 + 3 * (width // 8 + 56)
    sequences = p.n * (p.queries_per_class + p.test_queries_per_class) * (1 + 3 * max(partners, 0))
    return hadamard_matrix_bytes(h) + sequences * per_sequence


@register_family("ood", memory=_ood_memory)
def ood(
    n: Annotated[Int, Field(ge=2)] = 8,
    queries_per_class: Size = 16,
    test_queries_per_class: Size = 4,
    partners: Annotated[Int, Field(ge=0)] = 0,
    test_fraction: Fraction = 0.4,
    seed: Seed = 0,
    split: Split = "train",
    reading: Reading = "first",
) -> Family:
    """One side (``split='train'|'test'``) of :func:`ood_split`; ``reading='final'`` puts the
    query last (the causal final-query reading, scored at position 3)."""
    train, test = ood_split(n, queries_per_class, test_queries_per_class, partners, test_fraction, seed)
    family = train if split == "train" else test
    position, order = READINGS[reading]
    meta = {**family.meta, "reading": reading}
    return Family(family.tokens, family.index[:, list(order)], position, family.matching, family.name, meta)
