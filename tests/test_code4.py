"""The ``code4`` family (docs/experiments.md, "Beyond Graham–Sloane"): group classes of every
abelian group, the Steiner system S(5, 6, 12), the local search, each code checked pair by pair
here, and certified in full at δ = 1/2 from ``(N − 2)² ≥ n − 1``."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations
from math import comb

import numpy as np
import pytest

from kernelgap.errors import FamilyError
from kernelgap.task import build_family
from kernelgap.task.families.code4 import abelian_groups, best_group, group_classes, group_code, steiner_code
from kernelgap.task.families.johnson_search import grow_code, johnson_neighbours
from kernelgap.task.families.layer import layer_packed, layer_words
from kernelgap.task.packed import unpack_words
from kernelgap.theory.ceiling import certificate_ceiling, pair_ceiling
from kernelgap.theory.certificate import certify


def distances(words: np.ndarray, m: int) -> np.ndarray:
    rows = unpack_words(words, m).astype(np.int64)
    gram = rows @ rows.T
    return rows.sum(1)[:, None] + rows.sum(1)[None, :] - 2 * gram


def assert_distance4(words: np.ndarray, m: int, w: int) -> None:
    d = distances(words, m)
    np.fill_diagonal(d, 99)
    assert d.min() >= 4
    assert (unpack_words(words, m).sum(1) == w).all()


def test_groups_and_their_classes():
    assert (2, 2, 2, 2) in abelian_groups(16) and (16,) in abelian_groups(16)
    assert abelian_groups(7) == [(7,)]
    for orders in abelian_groups(8):
        sizes = group_classes(8, 4, orders)
        assert sum(sizes) == comb(8, 4)
    assert best_group(8, 4)[2] == 14  # the extended Hamming code's weight-4 words: A(8, 4, 4)
    assert best_group(16, 8)[:3] == ((2, 2, 2, 2), 0, 870)
    assert best_group(12, 6)[2] == 80


@pytest.mark.parametrize("m", [8, 10, 12, 14])
def test_the_group_code_is_its_class(m):
    words, meta = group_code(m, m // 2)
    assert len(words) == best_group(m, m // 2)[2]
    assert_distance4(words, m, m // 2)
    assert (words[1:] < words[:-1]).all()


def test_steiner_hexads():
    """132 hexads, every 5 of the 12 points in exactly one of them: S(5, 6, 12)."""
    words, _ = steiner_code()
    assert len(words) == 132 == pair_ceiling(12, 2)
    assert_distance4(words, 12, 6)
    rows = unpack_words(words, 12).astype(bool)
    cover = np.zeros(1 << 12, dtype=np.int64)
    for row in rows:
        for five in combinations(np.flatnonzero(row).tolist(), 5):
            cover[sum(1 << p for p in five)] += 1
    assert (cover[[sum(1 << p for p in c) for c in combinations(range(12), 5)]] == 1).all()


def test_the_steiner_family_meets_the_ceiling():
    """Certified in full from N = 14 (12² ≥ 131), not at 13: the ceiling 132 attained."""
    family = build_family("code4", m=12, construction="steiner", length=14)
    assert certify(family, Fraction(1, 2)).certified_rank == 132 == certificate_ceiling(12, Fraction(1, 2), 14)
    assert certify(build_family("code4", m=12, construction="steiner", length=13), "1/2").certified_rank < 132


def test_the_neighbours_of_the_johnson_graph():
    words = layer_words(8, 4, None, comb(8, 4))
    nb = johnson_neighbours(words, 8)
    assert nb.shape == (70, 16)
    d = distances(words, 8)
    for i in range(70):
        assert sorted(nb[i].tolist()) == np.flatnonzero(d[i] == 2).tolist()


def test_the_search_grows_the_class():
    """Seeded: the same code twice; past the cyclic class at m = 14; distance 4 pair by pair."""
    start, _ = layer_packed(14, 7, 4, None, None)
    grown = grow_code(14, 7, start, 1500, 0)
    assert len(grown) > len(start) == 246
    assert np.array_equal(grown, grow_code(14, 7, start, 1500, 0))
    assert_distance4(grown, 14, 7)
    family = build_family("code4", m=14, construction="search", steps=1500, length=3)
    assert family.meta["words"] == len(grown)


def test_refusals():
    with pytest.raises(FamilyError, match="S\\(5, 6, 12\\)"):
        build_family("code4", m=14, construction="steiner")
    with pytest.raises(FamilyError, match="m ≤ 20"):
        build_family("code4", m=22, construction="search")
    with pytest.raises(FamilyError, match="query_position"):
        build_family("code4", m=12, length=3, query_position=4)
