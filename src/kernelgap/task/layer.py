"""The layer family: a weight-w layer of {0,1}^m against its complements, at context length N.

Queries are words of weight ``w`` (default ``m/2``):

* ``distance = 4``: a Graham–Sloane class, the words whose support sums to
  ``a (mod m)`` (positions ``0..m − 1``).  Two distinct words of one class are at
  Hamming distance ≥ 4, since a distance of 2 swaps one position i for another j
  and moves the sum by ``j − i ≢ 0 (mod m)``.  The residue is ``residue``, or the
  one whose class is largest (the least such a on a tie); the classes' sizes are
  counted exactly beforehand (:func:`class_sizes`);
* ``distance = 2``: the whole layer.

Supports are taken in lexicographic order; ``n`` keeps the first n words.  The
candidates are the complements of the queries: a query's good candidate is its
own complement (overlap 0) and another query y's complement is a bad candidate
at overlap ``h = w − <x, y> = d(x, y)/2``, so ``h ≥ 2`` in a distance-4 class and
``h ≥ 1`` in the layer.  The family is a
:class:`~kernelgap.task.family.ProductFamily` of ``length`` N: every sequence with
a query and any ``N − 1`` candidates, never materialised.

**What the certificate sees** (docs/theory.md, "Context length N").  At δ = 1/2 a
single step from the good level 0 to h ≥ 2 gives ``ρ_N(h) = 1/((N − 2)(h − 1))``,
at most ``1/(N − 2)`` (h = 2), so every pair of a distance-4 class has
``ε_ij ε_ji ≤ 1/(N − 2)²`` and the Radon bound certifies all n words once
``(N − 2)² ≥ n − 1``: no intermediate candidates are needed.  In the whole layer
at δ = 2/5 the step to h = 1 gives ``ρ_N(1) = 4/(N − 2)`` and all n words are
certified once ``16/(N − 2)² < 1/(n − 1)``.
"""

from __future__ import annotations

from itertools import combinations
from math import comb
from typing import Annotated

import numpy as np

from ..errors import FamilyError
from .codes import check_constant_weight
from .family import MAX_PRODUCT_LENGTH, ProductFamily, unique_rows
from .registry import Range, register_family

#: Most weight-w supports one build scans (a class of the layer is about 1/m of them).
MAX_SCAN = 1 << 25


def class_sizes(m: int, w: int) -> list[int]:
    """``sizes[a]``: the weight-w words of length m whose support sums to a (mod m), exact
    (a subset-sum count over positions ``0..m − 1``, ``O(m²w)`` integer additions)."""
    big = comb(m, w) >= 1 << 62
    count = np.zeros((w + 1, m), dtype=object if big else np.int64)
    count[0, 0] = 1
    for i in range(m):  # add position i: a subset of size k and sum s gains (k + 1, s + i)
        count[1:] = count[1:] + np.roll(count[:-1], i, axis=1)
    return [int(v) for v in count[w]]


def _resolved(m: int, w: int, distance: int, residue: int | None) -> tuple[int, int | None, int]:
    """``(weight, residue, words in the code)`` with the defaults filled in."""
    w = w or m // 2
    if distance == 2:
        return w, None, comb(m, w)
    sizes = class_sizes(m, w)
    a = int(np.argmax(sizes)) if residue is None else residue
    return w, a, sizes[a]


def _layer_check(m, w, length, distance, residue, n, query_position) -> None:
    """Consistent parameters; the code has the n words asked for; its scan is not too long."""
    if m % 2:
        raise FamilyError(f"m must be even, got {m}")
    weight = w or m // 2
    if not 1 <= weight < m:
        raise FamilyError(f"w must lie in 1..m − 1 = {m - 1}, got {weight}")
    if distance not in (2, 4):
        raise FamilyError(f"distance must be 2 (the whole layer) or 4 (a Graham–Sloane class), got {distance}")
    if residue is not None and distance != 4:
        raise FamilyError("residue names a Graham–Sloane class: it needs distance = 4")
    if residue is not None and not 0 <= residue < m:
        raise FamilyError(f"residue must lie in 0..m − 1 = {m - 1}, got {residue}")
    if not 1 <= query_position <= length:
        raise FamilyError(f"query_position must lie in 1..length = {length}, got {query_position}")
    if comb(m, weight) > MAX_SCAN and n is None:
        raise FamilyError(
            f"the layer of weight {weight} in m = {m} has {comb(m, weight):,} words; "
            f"at most {MAX_SCAN:,} are scanned (give n to keep the first n words)"
        )
    _, a, words = _resolved(m, weight, distance, residue)
    if n is not None and n > words:
        what = "the layer" if distance == 2 else f"the class Σ ≡ {a} (mod {m})"
        raise FamilyError(f"{what} of weight {weight} in m = {m} has {words:,} words, asked for n = {n:,}")


def _layer_memory(m, w, length, distance, residue, n, query_position) -> int:
    """Bytes of a build: the ``W`` kept words as int64 rows and their uint8 copies, the
    complements, the deduplication of the ``2W`` rows (``2m + 48`` bytes each) and the check
    of the code (its float64 Gram matrix, a mask and the off-diagonal copy, ``18·W²``)."""
    weight = w or m // 2
    words = comb(m, weight) if distance == 2 else -(-comb(m, weight) // m) * 2  # ≥ any class (bound)
    words = min(words, n) if n is not None else words
    return words * (8 * m + 2 * m) + 2 * words * (2 * m + 48) + 18 * words * words + (1 << 16)


def layer_code(m: int, w: int, distance: int, residue: int | None, n: int | None) -> tuple[np.ndarray, int | None]:
    """The query words, ``uint8 [W, m]`` (module docstring), and the residue used."""
    w, a, words = _resolved(m, w, distance, residue)
    count = words if n is None else min(n, words)
    kept = np.zeros((count, m), dtype=np.uint8)
    k = 0
    for support in combinations(range(m), w):
        if a is None or sum(support) % m == a:
            kept[k, list(support)] = 1
            k += 1
            if k == count:
                break
    if k != count:
        raise AssertionError(f"the layer code found {k} of its {count} words")
    check_constant_weight(kept, w, w - distance // 2)
    return kept, a


@register_family("layer", memory=_layer_memory, check=_layer_check)
def layer(
    m: Annotated[int, Range(2, 64)] = 12,
    w: Annotated[int, Range(0)] = 0,
    length: Annotated[int, Range(3, MAX_PRODUCT_LENGTH)] = 3,
    distance: Annotated[int, Range(2, 4)] = 4,
    residue: Annotated[int | None, Range(0)] = None,
    n: Annotated[int | None, Range(1)] = None,
    query_position: Annotated[int, Range(1, MAX_PRODUCT_LENGTH)] = 1,
) -> ProductFamily:
    """The layer product family (module docstring); ``w = 0`` means m/2, ``residue`` None the
    largest class, ``n`` None every word.  Parameters are checked by the registry."""
    weight = w or m // 2
    code, a = layer_code(m, weight, distance, residue, n)
    count = len(code)
    tokens, inverse = unique_rows(np.concatenate([code, 1 - code]))
    queries, goods = inverse[:count], inverse[count:]
    label = "layer" if distance == 2 else f"class{a}"
    name = f"layer-m{m}-w{weight}-{label}-N{length}" + (f"-n{n}" if n is not None else "")
    meta = {
        "code": "weight-w layer" if distance == 2 else "Graham–Sloane class",
        "m": m,
        "weight": weight,
        "distance": distance,
        "residue": a,
        "words": count,
        "length": length,
    }
    return ProductFamily(
        tokens, queries, goods, query_position, list(zip(queries.tolist(), goods.tolist())), name, meta, length
    )
