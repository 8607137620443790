"""The layer family: a weight-w layer of {0,1}^m against its complements, at context length N.

Queries are words of weight ``w`` (default ``m/2``):

* ``distance = 4``: a Graham–Sloane class, the words whose support sums to
  ``a (mod m)`` (positions ``0..m − 1``).  Two distinct words of one class are at
  Hamming distance ≥ 4, since a distance of 2 swaps one position i for another j
  and moves the sum by ``j − i ≢ 0 (mod m)``.  The residue is ``residue``, or the
  one whose class is largest (the least such a on a tie); the classes' sizes are
  counted exactly beforehand (:func:`class_sizes`);
* ``distance = 2``: the whole layer.

Supports are taken in lexicographic order (:func:`layer_words`); ``n`` keeps the first n
words.  The candidates are the complements of the queries: a query's good candidate is its
own complement (overlap 0) and another query y's complement is a bad candidate at overlap
``h = w − <x, y> = d(x, y)/2``, so ``h ≥ 2`` in a distance-4 class and ``h ≥ 1`` in the
layer.  The family is a :class:`~kernelgap.task.family.ProductFamily` of ``length`` N.

**What the certificate sees** (docs/theory.md, "Context length N").  At δ = 1/2 a
single step from the good level 0 to h ≥ 2 gives ``ρ_N(h) = 1/((N − 2)(h − 1))``,
at most ``1/(N − 2)`` (h = 2), so every pair of a distance-4 class has
``ε_ij ε_ji ≤ 1/(N − 2)²`` and the Radon bound certifies all n words once
``(N − 2)² ≥ n − 1``: no intermediate candidates are needed.  In the whole layer
at δ = 2/5 the step to h = 1 gives ``ρ_N(1) = 4/(N − 2)`` and all n words are
certified once ``16/(N − 2)² < 1/(n − 1)``.  Above a few thousand words the certificate
decides this by rule, from the code's least distance (docs/theory.md, "The whole set by
rule"), so a class of m = 28 (1,432,860 words) is certified in full at N = 1200 and one of
m = 32 (18,784,170 words) at N = 4337.

**At scale** every step is near-linear in the number of words: they stay packed one
``uint64`` each until the distinct tokens are unpacked, and no pair is ever compared.
"""

from __future__ import annotations

from itertools import product
from math import comb
from typing import Annotated

import numpy as np
from pydantic import Field

from ...errors import FamilyError
from ...limits import DENSE_QUERIES
from ...validation import Int
from ..family import MAX_PRODUCT_LENGTH, ProductFamily
from ..packed import popcount, subword_bytes, subword_key_count, unpack_words
from ..registry import FamilyParams, register_family

#: Most words one build generates when ``n`` is not given (the distance-2 layer at m = 28,
#: C(28, 14) ≈ 4·10⁷ words, is refused; a class there has ≈ 1.4·10⁶).
MAX_WORDS = 1 << 25
#: Bytes per generated word beyond its two token rows (the word and its complement, m bytes
#: each), an upper bound: the generator's frontier (uint64 words, int16 weight and sum for two
#: children each, the masks and the cumulative completions), the packed words and their checks,
#: the ``2W`` packed token keys and ``np.unique``'s sort, index and inverse, the matching as an
#: ``int64 [W, 2]`` array and the family's validation (sorted ids, packed tokens).  Measured
#: with tracemalloc: the m = 28 class (1,432,860 words, as many tokens) peaks at 134 bytes a word
#: with its tokens, the m = 30 class (5,170,604 words, twice as many tokens) at 174, the m = 22
#: class (32,066 words) at 220; the estimates are 256, 260 and 244 (and 1 MiB more in all).
WORD_BYTES = 200
#: Bytes per query pair of a dense certificate (the pair matrices, the level search and the
#: Radon test), an upper bound: 61 measured with tracemalloc on 2,048 and 4,096 layer words.
DENSE_PAIR_BYTES = 64


def labels(orders: tuple[int, ...], m: int) -> np.ndarray:
    """``digits[p, c]``: component c of position p's label, the p-th element in mixed radix."""
    return np.array(list(product(*[range(o) for o in orders]))[:m], dtype=np.int64).reshape(m, len(orders))


def element_index(digits: np.ndarray, orders: tuple[int, ...]) -> np.ndarray:
    """Each row of component digits as one integer ``0..|G| − 1``."""
    index = np.zeros(len(digits), dtype=np.int64)
    for c, o in enumerate(orders):
        index = index * o + digits[:, c] % o
    return index


def group_classes(m: int, w: int, orders: tuple[int, ...]) -> np.ndarray:
    """``sizes[a]``: the weight-w words whose labels sum to element a, exact (a subset-sum count
    over the group, ``O(m·w·|G|)``)."""
    elements = digits = labels(orders, m)  # |G| = m: the labels are the group's elements
    count = np.zeros((w + 1, m), dtype=object)
    count[0, 0] = 1
    for p in range(m):  # position p: a k-subset with sum s gains (k + 1, s + label p)
        shifted = element_index(elements + digits[p], orders)
        moved = np.zeros_like(count)
        moved[1:, shifted] = count[:-1]
        count = count + moved
    return count[w]


def class_sizes(m: int, w: int) -> list[int]:
    """``sizes[a]``: the weight-w words of length m whose support sums to a (mod m), exact (the
    classes of the cyclic group, positions ``0..m − 1`` its elements)."""
    return [int(v) for v in group_classes(m, w, (m,))]


def _resolved(m: int, w: int, distance: int, residue: int | None) -> tuple[int, int | None, int]:
    """``(weight, residue, words in the code)`` with the defaults filled in."""
    w = w or m // 2  # 0: m/2
    if distance == 2:
        return w, None, comb(m, w)
    sizes = class_sizes(m, w)
    a = int(np.argmax(sizes)) if residue is None else residue
    return w, a, sizes[a]


def checked_weight(p: FamilyParams) -> int:
    """The weight ``w`` of a layer or ``code4`` build (0: m/2), refused outside ``1..m − 1``, and
    its query position checked against its length."""
    weight = p.w or p.m // 2
    if not 1 <= weight < p.m:
        raise FamilyError(f"w must lie in 1..m − 1 = {p.m - 1}, got {weight}")
    if not 1 <= p.query_position <= p.length:
        raise FamilyError(f"query_position must lie in 1..length = {p.length}, got {p.query_position}")
    return weight


def _layer_check(p: FamilyParams) -> None:
    """Consistent parameters; the code has the n words asked for; not too many are built."""
    m, distance, residue, n = p.m, p.distance, p.residue, p.n
    if m % 2:
        raise FamilyError(f"m must be even, got {m}")
    weight = checked_weight(p)
    if distance not in (2, 4):
        raise FamilyError(f"distance must be 2 (the whole layer) or 4 (a Graham–Sloane class), got {distance}")
    if residue is not None and distance != 4:
        raise FamilyError("residue names a Graham–Sloane class: it needs distance = 4")
    if residue is not None and not 0 <= residue < m:
        raise FamilyError(f"residue must lie in 0..m − 1 = {m - 1}, got {residue}")
    _, a, words = _resolved(m, weight, distance, residue)
    what = "the layer" if distance == 2 else f"the class Σ ≡ {a} (mod {m})"
    if n is not None and n > words:
        raise FamilyError(f"{what} of weight {weight} in m = {m} has {words:,} words, asked for n = {n:,}")
    if n is None and words > MAX_WORDS:
        raise FamilyError(
            f"{what} of weight {weight} in m = {m} has {words:,} words; at most {MAX_WORDS:,} are built "
            f"(give n to keep the first n words)"
        )


def _layer_memory(p: FamilyParams) -> int:
    """Bytes of a build and of its certificate by rule: ``W`` kept words (the exact size of the
    code, or n), each with up to two token rows of m bytes (the word and its complement) and
    :data:`WORD_BYTES` more; the rule's largest sub-word test, ``removed = distance/2 − 1``
    (:func:`~kernelgap.task.packed.subword_bytes`: one pass of keys and 48 bytes a word); and,
    where the rule falls short of the whole set, the dense certificate of the first
    :data:`~kernelgap.limits.DENSE_QUERIES` entries at :data:`DENSE_PAIR_BYTES` a pair
    (docs/theory.md, "The whole set by rule")."""
    weight, _, words = _resolved(p.m, p.w, p.distance, p.residue)
    words = min(words, p.n) if p.n is not None else words
    rule = subword_bytes(words, subword_key_count(words, weight, p.distance // 2 - 1))
    dense = DENSE_PAIR_BYTES * min(words, DENSE_QUERIES) ** 2
    return words * (2 * p.m + WORD_BYTES) + rule + dense + (1 << 20)


def _suffix_counts(m: int, w: int, modulus: int, cap: int) -> np.ndarray:
    """``counts[i, k, s]``: subsets of the positions ``i..m − 1`` with k elements whose sum is
    ``≡ s (mod modulus)``, each count capped at ``cap`` (only "how many, up to cap" is read)."""
    counts = np.zeros((m + 1, w + 1, modulus), dtype=np.int64)
    counts[m, 0, 0] = 1
    for i in range(m - 1, -1, -1):  # position i: left out, or taken (k − 1 elements, sum − i before)
        counts[i] = counts[i + 1]
        counts[i, 1:] += np.roll(counts[i + 1, :-1], i % modulus, axis=1)
        np.minimum(counts[i], cap, out=counts[i])
    return counts


def layer_words(m: int, w: int, residue: int | None, count: int) -> np.ndarray:
    """The first ``count`` weight-w supports of ``{0..m − 1}`` in lexicographic order whose sum is
    ``≡ residue (mod m)`` (every support when ``residue`` is None), as integers with position 0
    the most significant bit (``uint64``, descending: lexicographic order of the supports).

    Position by position, a frontier of prefixes (the choices at positions ``0..i − 1``) in
    order: each prefix is followed by its child that takes position i (the larger integer), then
    by the one that leaves it, and only children with a completion are kept
    (:func:`_suffix_counts`); the frontier is cut after the first prefixes whose completions
    reach ``count``.  Every kept prefix has a completion, so the frontier never exceeds
    ``count`` and the work is ``O(m·count)``, whatever the size of the layer (m ≤ 64).
    """
    if not 1 <= m <= 64:
        raise ValueError(f"layer words are packed in 64 bits, got m = {m}")
    modulus, a = (1, 0) if residue is None else (m, residue % m)
    counts = _suffix_counts(m, w, modulus, count + 1)
    words = np.zeros(1, dtype=np.uint64)
    size = np.zeros(1, dtype=np.int16)
    total = np.zeros(1, dtype=np.int16)  # the sum mod modulus
    for i in range(m):
        bit = np.uint64(1) << np.uint64(m - 1 - i)
        kids_words = np.stack([words | bit, words], 1).ravel()
        kids_size = np.stack([size + 1, size], 1).ravel()
        kids_total = np.stack([(total + i) % modulus, total], 1).ravel().astype(np.int16)
        need = w - kids_size.astype(np.int64)
        ok = need >= 0
        left = np.zeros(len(need), dtype=np.int64)
        left[ok] = counts[i + 1, need[ok], (a - kids_total[ok].astype(np.int64)) % modulus]
        keep = left > 0
        words, size, total, left = kids_words[keep], kids_size[keep], kids_total[keep], left[keep]
        reach = np.cumsum(left)
        cut = int(np.searchsorted(reach, count)) + 1  # the first prefixes whose completions reach count
        words, size, total = words[:cut], size[:cut], total[:cut]
    return words[:count]


def check_layer_words(words: np.ndarray, m: int, w: int, residue: int | None) -> None:
    """Raise ``AssertionError`` unless the packed words are a code of the layer family: strictly
    descending (distinct, in lexicographic order), each of weight w and, in a class, each
    support summing to ``residue`` (mod m).  Distinct words of one weight are at an even
    distance ≥ 2, and in a class ≥ 4 (module docstring: a distance of 2 moves the sum by
    ``j − i ≢ 0``), so this proves the minimum distance in ``O(n·m)`` bit operations."""
    if len(words) > 1 and not (words[1:] < words[:-1]).all():
        raise AssertionError("the layer code's words are not distinct and in order")
    if (popcount(words) != w).any():
        raise AssertionError(f"a word of the layer code does not have weight {w}")
    if residue is None:
        return
    sums = np.zeros(len(words), dtype=np.uint16)  # a sum of positions is at most 63·64/2 < 2^16
    for i in range(m):
        sums += ((words >> np.uint64(m - 1 - i)) & np.uint64(1)).astype(np.uint16) * np.uint16(i)
    if (sums % m != residue).any():
        raise AssertionError(f"a word of the class Σ ≡ {residue} (mod {m}) has another sum")


def layer_packed(m: int, w: int, distance: int, residue: int | None, n: int | None) -> tuple[np.ndarray, int | None]:
    """The query words packed as integers (:func:`layer_words`) and the residue used, checked
    (:func:`check_layer_words`)."""
    w, a, words = _resolved(m, w, distance, residue)
    count = words if n is None else min(n, words)
    packed = layer_words(m, w, a, count)
    if len(packed) != count:
        raise AssertionError(f"the layer code found {len(packed)} of its {count} words")
    check_layer_words(packed, m, w, a)
    return packed, a


def layer_code(m: int, w: int, distance: int, residue: int | None, n: int | None) -> tuple[np.ndarray, int | None]:
    """The query words, ``uint8 [W, m]`` (module docstring), and the residue used."""
    packed, a = layer_packed(m, w, distance, residue, n)
    return unpack_words(packed, m), a


@register_family("layer", memory=_layer_memory, check=_layer_check)
def layer(
    m: Annotated[Int, Field(ge=2, le=64)] = 12,
    w: Annotated[Int, Field(ge=0)] = 0,
    length: Annotated[Int, Field(ge=3, le=MAX_PRODUCT_LENGTH)] = 3,
    distance: Annotated[Int, Field(ge=2, le=4)] = 4,
    residue: Annotated[Int, Field(ge=0)] | None = None,
    n: Annotated[Int, Field(ge=1)] | None = None,
    query_position: Annotated[Int, Field(ge=1, le=MAX_PRODUCT_LENGTH)] = 1,
) -> ProductFamily:
    """The layer product family (module docstring); ``w = 0`` means m/2, ``residue`` None the
    largest class, ``n`` None every word.  Parameters are checked by the registry."""
    weight = w or m // 2
    packed, a = layer_packed(m, weight, distance, residue, n)
    label = "layer" if distance == 2 else f"class{a}"
    name = f"layer-m{m}-w{weight}-{label}-N{length}" + (f"-n{n}" if n is not None else "")
    code = "weight-w layer" if distance == 2 else "Graham–Sloane class"
    meta = {"code": code, "m": m, "weight": weight, "distance": distance, "residue": a, "words": len(packed)}
    return complement_family(packed, m, query_position, name, {**meta, "length": length}, length)


def complement_family(words: np.ndarray, m: int, query_position: int, name: str, meta: dict, length: int):
    """The product family of packed words against their complements, each word's good candidate
    its own: the tokens are the distinct words and complements, ascending as integers, and the
    matching an ``int64 [W, 2]`` array (a PairList, 16 bytes an entry)."""
    keys, inverse = np.unique(np.concatenate([words, words ^ np.uint64((1 << m) - 1)]), return_inverse=True)
    queries, goods = inverse[: len(words)], inverse[len(words) :]
    matching = np.stack([queries, goods], axis=1)
    return ProductFamily(unpack_words(keys, m), queries, goods, query_position, matching, name, meta, length)
