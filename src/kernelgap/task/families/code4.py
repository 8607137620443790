"""The ``code4`` family: a distance-4 constant-weight code of ``{0,1}^m`` against its complements
(docs/experiments.md, "Beyond Graham–Sloane").

At δ = 1/2 a pair certificate needs ``|B_j \\ B_i| ≥ 2`` between the good candidates, and on a
weight-w layer with complements as candidates that is a code of minimum distance 4
(docs/theory.md, "The ceiling of pair certificates").  The layer family takes a Graham–Sloane
class of the cyclic group; this one takes larger codes:

* ``construction = "group"``: label the positions with the distinct elements of an abelian
  group of order m and keep the words whose labels sum to one element a.  A distance of 2
  swaps one label for another and moves the sum, so every class has distance ≥ 4, for any
  group; the classes partition the layer.  Over every group ``Z_{o_1} × … × Z_{o_r}`` of order
  m and every a the largest class is taken (counted exactly beforehand, :func:`group_classes`;
  at m = 16 the group ``Z_2^4`` gives 870 words, the cyclic one 810; at m = 8 ``Z_2^3`` gives
  the 14 weight-4 words of the extended Hamming code, ``A(8, 4, 4) = 14``);
* ``construction = "steiner"`` (m = 12, w = 6): the 132 hexads of the Steiner system
  S(5, 6, 12), the supports of the weight-6 words of the extended ternary Golay code
  ``[I | S]`` (S the symmetric conference matrix of order 6): any two share at most four
  points, so the code has distance 4 and meets the Johnson bound ``A(12, 4, 6) ≤ 132``;
* ``construction = "search"``: the cyclic Graham–Sloane class (the layer family's code) grown
  by a seeded iterated local search over independent sets of the Johnson graph, ``steps``
  perturbations (:mod:`~kernelgap.task.families.johnson_search`; at m = 16, 810 words become
  966 in 40,000 steps, past the 870 of the best group; the group classes themselves are local
  optima the search does not leave).

Every code is checked before it is returned (:func:`check_code4`).  The family is complement
shaped, as the layer family is, and certified in full once ``(N − 2)² ≥ n − 1``.
"""

from __future__ import annotations

from itertools import product
from math import comb
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from ...errors import FamilyError
from ...validation import Int
from ..codes import min_distance
from ..family import MAX_PRODUCT_LENGTH, ProductFamily
from ..packed import PackedCode, popcount
from ..registry import FamilyParams, register_family
from .johnson_search import grow_code
from .layer import checked_weight, complement_family, element_index, group_classes, labels, layer_packed, layer_words

#: Largest m of a group code (its whole layer is generated and labelled: C(26, 13) ≈ 10⁷ words).
MAX_GROUP_M = 26
#: Bytes per word of the layer a code is drawn from (the generator's frontier, the packed word, its
#: group sum and the temporaries of labelling it), an upper bound: measured with tracemalloc at
#: 567 (m = 16), 739 (m = 20) and 200 (m = 22) bytes a layer word, the kept words included.
LAYER_WORD_BYTES = 800
#: Bytes per kept word beyond its two token rows (as the layer family's ``WORD_BYTES``).
WORD_BYTES = 200
#: Largest m of a searched code (the search holds the Johnson graph, ``w(m − w)`` neighbours a
#: word: 8·100·184,756 bytes at m = 20).
MAX_SEARCH_M = 20
#: Bytes per neighbour of a layer word the search holds (the ``int64`` table, the swapped words
#: and their look-up while it is built), an upper bound: 35.4, 35.1 and 34.9 measured with
#: tracemalloc at m = 14, 16, 18 beyond :data:`LAYER_WORD_BYTES`.
SEARCH_NEIGHBOUR_BYTES = 40

#: The symmetric conference matrix of order 6 (``S Sᵀ = 5I``); ``[I | S]`` generates the extended
#: ternary Golay code (``I + S Sᵀ = 6I ≡ 0 (mod 3)``: self-dual).
CONFERENCE_6 = np.array(
    [
        [0, 1, 1, 1, 1, 1],
        [1, 0, 1, -1, -1, 1],
        [1, 1, 0, 1, -1, -1],
        [1, -1, 1, 0, 1, -1],
        [1, -1, -1, 1, 0, 1],
        [1, 1, -1, -1, 1, 0],
    ]
)


def abelian_groups(m: int) -> list[tuple[int, ...]]:
    """Every factorisation ``m = o_1·…·o_r`` into factors ≥ 2, ascending (each an abelian group
    ``Z_{o_1} × … × Z_{o_r}``; every abelian group of order m is among them)."""
    out: list[tuple[int, ...]] = []

    def grow(rest: int, least: int, factors: tuple[int, ...]) -> None:
        if rest == 1:
            out.append(factors)
            return
        for d in range(least, rest + 1):
            if rest % d == 0:
                grow(rest // d, d, (*factors, d))

    grow(m, 2, ())
    return out or [(1,)]


def best_group(m: int, w: int) -> tuple[tuple[int, ...], int, int]:
    """``(orders, a, size)``: the group and element with the largest class (the first on a tie)."""
    best = None
    for orders in abelian_groups(m):
        sizes = group_classes(m, w, orders)
        a = int(np.argmax(sizes))
        if best is None or sizes[a] > best[2]:
            best = (orders, a, int(sizes[a]))
    return best


def group_code(m: int, w: int) -> tuple[np.ndarray, dict]:
    """The largest group class (module docstring) as packed words, descending, and its group."""
    orders, a, size = best_group(m, w)
    words = layer_words(m, w, None, comb(m, w))
    digits = labels(orders, m)
    sums = np.zeros((len(words), len(orders)), dtype=np.int64)
    for p in range(m):
        bit = ((words >> np.uint64(m - 1 - p)) & np.uint64(1)).astype(np.int64)
        sums += bit[:, None] * digits[p]
    keep = words[element_index(sums, orders) == a]
    if len(keep) != size:
        raise AssertionError(f"the group class has {len(keep)} words, counted {size}")
    return keep, {"group": "×".join(f"Z{o}" for o in orders), "element": a}


def steiner_code() -> tuple[np.ndarray, dict]:
    """The 132 hexads of S(5, 6, 12) (module docstring) as packed words, descending."""
    generator = np.concatenate([np.eye(6, dtype=np.int64), CONFERENCE_6], axis=1) % 3
    messages = np.array(list(product(range(3), repeat=6)), dtype=np.int64)
    codewords = messages @ generator % 3
    supports = (codewords != 0)[(codewords != 0).sum(1) == 6].astype(np.uint64)
    packed = (supports << np.arange(11, -1, -1, dtype=np.uint64)).sum(1).astype(np.uint64)
    words = np.unique(packed)[::-1]
    if len(words) != 132:
        raise AssertionError(f"the ternary Golay code gave {len(words)} hexads, not 132")
    return words, {"design": "S(5,6,12)"}


def check_code4(words: np.ndarray, m: int, w: int) -> None:
    """Raise ``AssertionError`` unless the packed words are distinct, of weight w, at distance ≥ 4
    (sorted sub-word keys: no pair compared)."""
    if len(np.unique(words)) != len(words):
        raise AssertionError("the code has a repeated word")
    if (popcount(words) != w).any():
        raise AssertionError(f"a word of the code does not have weight {w}")
    if len(words) > 1:
        distance, exact, _ = min_distance(PackedCode(words, m), w)
        if distance < 4:
            raise AssertionError(f"the code has distance {distance}{'' if exact else ' (a lower bound)'} < 4")


def _code4_check(p: FamilyParams) -> None:
    m, weight = p.m, checked_weight(p)
    if p.construction == "steiner" and (m, weight) != (12, 6):
        raise FamilyError(
            f"the Steiner construction is S(5, 6, 12): it needs m = 12 and w = 6, got m = {m}, w = {weight}"
        )
    if p.construction == "group" and m > MAX_GROUP_M:
        raise FamilyError(f"a group code labels its whole layer: m ≤ {MAX_GROUP_M}, got {m}")
    if p.construction == "search" and m > MAX_SEARCH_M:
        raise FamilyError(f"a searched code holds its whole Johnson graph: m ≤ {MAX_SEARCH_M}, got {m}")


def _code4_memory(p: FamilyParams) -> int:
    """Bytes: the layer a group code is drawn from (:data:`LAYER_WORD_BYTES` a word) and, for
    each kept word (at most the layer's ``C(m, w)/m``-ish class, counted as ``C(m, w)``), its two
    token rows and :data:`WORD_BYTES`; a search adds its Johnson graph (:data:`SEARCH_NEIGHBOUR_BYTES`
    a neighbour)."""
    m, weight = p.m, p.w or p.m // 2
    layer = comb(m, weight) if p.construction != "steiner" else 924
    kept = min(layer, p.n) if p.n is not None else layer
    graph = layer * SEARCH_NEIGHBOUR_BYTES * weight * (m - weight) if p.construction == "search" else 0
    return layer * LAYER_WORD_BYTES + kept * (2 * m + WORD_BYTES) + graph + (1 << 20)


@register_family("code4", memory=_code4_memory, check=_code4_check)
def code4(
    m: Annotated[Int, Field(ge=2, le=64)] = 12,
    w: Annotated[Int, Field(ge=0)] = 0,
    construction: Literal["group", "steiner", "search"] = "group",
    length: Annotated[Int, Field(ge=3, le=MAX_PRODUCT_LENGTH)] = 3,
    n: Annotated[Int, Field(ge=1)] | None = None,
    query_position: Annotated[Int, Field(ge=1, le=MAX_PRODUCT_LENGTH)] = 1,
    steps: Annotated[Int, Field(ge=0, le=200_000)] = 1000,
    seed: Annotated[Int, Field(ge=0)] = 0,
) -> ProductFamily:
    """A distance-4 code of weight w (0: m/2) against its complements (module docstring);
    ``n`` keeps the first n words (descending as integers); ``steps`` and ``seed`` drive the
    search."""
    weight = w or m // 2
    if construction == "steiner":
        words, meta = steiner_code()
    elif construction == "group":
        words, meta = group_code(m, weight)
    else:
        start, residue = layer_packed(m, weight, 4, None, None)
        words = grow_code(m, weight, start, steps, seed)
        meta = {"group": f"Z{m}", "element": residue, "steps": steps, "seed": seed}
    words = words[:n] if n is not None else words
    check_code4(words, m, weight)
    name = f"code4-m{m}-w{weight}-{construction}-N{length}" + (f"-n{n}" if n is not None else "")
    meta = {"code": construction, "m": m, "weight": weight, "words": len(words), "length": length, **meta}
    return complement_family(words, m, query_position, name, meta, length)
