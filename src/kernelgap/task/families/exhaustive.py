"""Exhaustive families and random token pools.

* ``exhaustive``: all ``2^{Nm}`` sequences of length N over ``{0,1}^m`` (small m);
* ``pool``: disjoint train/test token pools, sequences drawn from each.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import numpy as np
from pydantic import Field

from ...errors import FamilyError
from ...validation import Int
from ..family import Family
from ..registry import FamilyParams, Fraction, Position, Seed, Size, Split, register_family

#: Largest family that is ever materialised in memory as one index array.
MAX_MATERIALISED = 1 << 24


# -- exhaustive ------------------------------------------------------------------


def all_tokens(m: int) -> np.ndarray:
    """Every token of ``{0,1}^m``; token id ``k`` has the bits of ``k`` (MSB first)."""
    ids = np.arange(1 << m, dtype=np.int64)
    return ((ids[:, None] >> np.arange(m - 1, -1, -1)) & 1).astype(np.uint8)


def exhaustive_count(m: int, length: int) -> int:
    return 1 << (m * length)


def iter_exhaustive_index(m: int, length: int, chunk: int = 1 << 20) -> Iterator[np.ndarray]:
    """All ``2^{Nm}`` sequences as token-id rows ``[≤chunk, N]``, in order, lazily."""
    total = exhaustive_count(m, length)
    base = 1 << m
    for start in range(0, total, chunk):
        code = np.arange(start, min(start + chunk, total), dtype=np.int64)
        cols = [(code // base ** (length - 1 - j)) % base for j in range(length)]
        yield np.stack(cols, axis=1)


def _check_position(p: FamilyParams) -> None:
    if p.query_position is not None and p.query_position > p.length:
        raise FamilyError(f"query_position {p.query_position} is outside 1..{p.length}")


def _exhaustive_check(p: FamilyParams) -> None:
    """At most ``MAX_MATERIALISED`` sequences: ``m·N ≤ 24`` (checked on the exponent, so
    ``2^{m·N}`` is never formed)."""
    if p.m * p.length > MAX_MATERIALISED.bit_length() - 1:
        raise FamilyError(
            f"exhaustive family with m={p.m}, length={p.length} has 2^{p.m * p.length} sequences; "
            f"at most 2^24 are materialised (use chunked checking)"
        )
    _check_position(p)


def _exhaustive_memory(p: FamilyParams) -> int:
    """The ``2^{m·N} × N`` ids, built column by column and stacked (three int64 copies), and
    the ``2^m`` tokens; 0 past ``m·N = 24``, which the check refuses."""
    if p.m * p.length > MAX_MATERIALISED.bit_length() - 1:
        return 0
    return 3 * 8 * p.length * exhaustive_count(p.m, p.length) + 9 * p.m * (1 << p.m)


@register_family("exhaustive", memory=_exhaustive_memory, check=_exhaustive_check)
def exhaustive(m: Size = 3, length: Size = 3, query_position: Position | None = None) -> Family:
    """All ``length``-sequences over ``{0,1}^m`` (small m; use chunks beyond).  Parameters are
    checked by the registry (:func:`~kernelgap.task.registry.check_params`)."""
    index = next(iter_exhaustive_index(m, length, exhaustive_count(m, length)))
    return Family(all_tokens(m), index, query_position, [], f"exhaustive-m{m}-N{length}", {"m": m, "length": length})


# -- random pools (OOD) ----------------------------------------------------------


def sample_distinct_tokens(m: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct random tokens of ``{0,1}^m``."""
    space = count if m >= count.bit_length() else 1 << m  # 2^m ≥ count: never form a huge 2^m
    if count > space:
        raise FamilyError(f"cannot draw {count} distinct tokens from a space of {space}")
    seen: dict[bytes, np.ndarray] = {}
    while len(seen) < count:
        cand = rng.integers(0, 2, size=m, dtype=np.uint8)
        seen.setdefault(cand.tobytes(), cand)
    return np.stack(list(seen.values()))


def pool_split(
    m: int = 12,
    pool_size: int = 64,
    test_fraction: float = 0.5,
    sequences: int = 2048,
    length: int = 3,
    seed: int = 0,
    query_position: int | None = None,
) -> tuple[Family, Family]:
    """Disjoint train/test token pools and sequences drawn from each.

    No test sequence shares a token with any training sequence.
    """
    if not 0 < test_fraction < 1:
        raise FamilyError("test_fraction must lie strictly between 0 and 1")
    rng = np.random.default_rng(seed)
    pool = sample_distinct_tokens(m, pool_size, rng)
    n_test = max(1, int(round(pool_size * test_fraction)))
    if n_test >= pool_size:
        raise FamilyError("pool too small to leave any training token")
    parts = {"train": pool[n_test:], "test": pool[:n_test]}
    out = []
    for split, tokens in parts.items():
        index = rng.integers(0, len(tokens), size=(sequences, length))
        meta = {"m": m, "pool_size": pool_size, "seed": seed, "split": split}
        out.append(Family(tokens, index, query_position, [], f"pool-{split}-m{m}", meta))
    return out[0], out[1]


def _pool_memory(p: FamilyParams) -> int:
    """The pool (each token drawn as its own numpy row, about 112 bytes of header, kept in a
    dict and stacked) and both sides' ``sequences × length`` int64 ids, copied once by
    :class:`Family`."""
    return p.pool_size * (3 * p.m + 300) + 2 * 2 * 8 * p.sequences * p.length


def _pool_check(p: FamilyParams) -> None:
    if p.m < p.pool_size.bit_length() and p.pool_size > 1 << p.m:
        raise FamilyError(f"cannot draw {p.pool_size} distinct tokens from a space of {1 << p.m}")
    _check_position(p)


@register_family("pool", memory=_pool_memory, check=_pool_check)
def pool(
    m: Size = 12,
    pool_size: Annotated[Int, Field(ge=2)] = 64,
    test_fraction: Fraction = 0.5,
    sequences: Size = 2048,
    length: Size = 3,
    seed: Seed = 0,
    split: Split = "train",
    query_position: Position | None = None,
) -> Family:
    """One side (``split='train'|'test'``) of :func:`pool_split`."""
    train, test = pool_split(m, pool_size, test_fraction, sequences, length, seed, query_position)
    return train if split == "train" else test
