"""A family of Min-IP sequences, stored as distinct tokens plus token ids.

A family holds few distinct tokens and many sequences over them, so it is kept
as ``tokens [T, m]`` (the distinct binary vectors) and ``index [S, N]``
(token ids per position).  Everything downstream (targets, the certificate,
the stacked trainer) works on the ``T × T`` Gram matrix and these ids.

``query_position`` is 1-based as in the family file format; ``None`` means
every position is a query (bidirectional reading).  ``matching`` lists
``(query_id, good_id)`` pairs for the certificate (docs/theory.md, "The lower bound as a certificate").
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import FamilyError
from .minip import targets_from_index


def unique_rows(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(bits, axis=0, return_inverse=True)`` for rows of 0/1 values, fast.

    Each row is packed into bytes, most significant bit first, so the packed
    rows sort (as big-endian integers, or as bytes past 64 bits) in the same
    order as the rows themselves: the same distinct rows in the same order,
    and the same inverse, as the row-wise ``np.unique``, which sorts rows as
    structured values (tens of times slower on 10⁵ rows).
    """
    bits = np.ascontiguousarray(bits, dtype=np.uint8)
    if bits.ndim != 2 or bits.size == 0 or bits.max() > 1:
        tokens, inverse = np.unique(bits, axis=0, return_inverse=True)
        return tokens, inverse.reshape(-1)
    packed = np.packbits(bits, axis=1)
    width = packed.shape[1]
    if width <= 8:  # one big-endian integer per row
        padded = np.zeros((len(bits), 8), dtype=np.uint8)
        padded[:, :width] = packed
        keys = padded.view(">u8").ravel()
    else:
        keys = packed.view(np.dtype((np.void, width))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return bits[first], inverse.reshape(-1)


@dataclass
class Family:
    """Sequences over a set of distinct tokens (docs/experiments.md)."""

    tokens: np.ndarray  # uint8 [T, m]
    index: np.ndarray  # int64 [S, N]
    query_position: int | None = None  # 1-based; None = all positions
    matching: list[tuple[int, int]] = field(default_factory=list)
    name: str = "family"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tokens = np.ascontiguousarray(self.tokens, dtype=np.uint8)
        self.index = np.ascontiguousarray(self.index, dtype=np.int64)
        if self.tokens.ndim != 2 or self.index.ndim != 2:
            raise FamilyError("tokens must be [T, m] and index [S, N]")
        if self.index.size and (self.index.min() < 0 or self.index.max() >= len(self.tokens)):
            raise FamilyError("token ids out of range")
        if self.query_position is not None and not 1 <= self.query_position <= self.length:
            raise FamilyError(
                f"query_position {self.query_position} is outside 1..{self.length}"
            )
        self.matching = [(int(q), int(g)) for q, g in self.matching]

    # -- shape ---------------------------------------------------------------
    @property
    def m(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def length(self) -> int:
        return int(self.index.shape[1])

    def __len__(self) -> int:
        return int(self.index.shape[0])

    @property
    def scored_positions(self) -> list[int]:
        """0-based positions whose predictions are scored."""
        if self.query_position is None:
            return list(range(self.length))
        return [self.query_position - 1]

    # -- values ----------------------------------------------------------------
    def gram(self) -> np.ndarray:
        """``G[a, b] = <token_a, token_b>`` over the distinct tokens."""
        t = self.tokens.astype(np.int64)
        return t @ t.T

    def targets(self) -> np.ndarray:
        """Targets at every position, ``[S, N]`` (docs/theory.md, "The task")."""
        return targets_from_index(self.gram(), self.index)

    def sequences_bits(self) -> np.ndarray:
        """The sequences as a dense ``[S, N, m]`` uint8 array."""
        return self.tokens[self.index]

    def token_id(self, bits: np.ndarray) -> int | None:
        """Id of a token given as a bit vector, or None when absent."""
        hits = np.nonzero((self.tokens == np.asarray(bits, dtype=np.uint8)).all(axis=1))[0]
        return int(hits[0]) if len(hits) else None

    def subset(self, rows: np.ndarray, name: str | None = None) -> "Family":
        """The family restricted to some sequences (tokens kept)."""
        return Family(
            self.tokens, self.index[rows], self.query_position, list(self.matching),
            name or self.name, dict(self.meta),
        )

    # -- construction ----------------------------------------------------------
    @classmethod
    def from_sequences(
        cls,
        sequences: np.ndarray,
        query_position: int | None = None,
        matching_bits: list[tuple[np.ndarray, np.ndarray]] = (),
        name: str = "family",
        meta: dict | None = None,
    ) -> "Family":
        """Build from dense ``[S, N, m]`` bits; matching given as bit vectors."""
        seq = np.asarray(sequences, dtype=np.uint8)
        if seq.ndim != 3:
            raise FamilyError("sequences must be a [S, N, m] array")
        s, n, m = seq.shape
        tokens, inverse = unique_rows(seq.reshape(s * n, m))
        family = cls(tokens, inverse.reshape(s, n), query_position, [], name, meta or {})
        matching = []
        for q_bits, g_bits in matching_bits:
            q, g = family.token_id(q_bits), family.token_id(g_bits)
            if q is None or g is None:
                raise FamilyError("a matching entry names a token that is in no sequence")
            matching.append((q, g))
        family.matching = matching
        return family



#: Most sequences a product family is expanded to (training and other per-sequence work).
MAX_EXPANDED = 1 << 22


@dataclass
class ProductFamily:
    """Every sequence ``(x; c, c')`` with ``x`` a query and ``c, c'`` candidates.

    ``x`` sits at ``query_position`` (1-based) and the two candidates fill the
    other positions in both orders, ``c = c'`` included: ``Q·C²`` sequences that
    are never materialised unless asked (:meth:`expand`).  The certificate works
    on the product directly (docs/theory.md, "Product families").
    """

    tokens: np.ndarray  # uint8 [T, m], distinct
    queries: np.ndarray  # int64 [Q] token ids
    candidates: np.ndarray  # int64 [C] token ids
    query_position: int = 1
    matching: list[tuple[int, int]] = field(default_factory=list)
    name: str = "family"
    meta: dict = field(default_factory=dict)

    length = 3

    def __post_init__(self) -> None:
        self.tokens = np.ascontiguousarray(self.tokens, dtype=np.uint8)
        self.queries = np.unique(np.asarray(self.queries, dtype=np.int64))
        self.candidates = np.unique(np.asarray(self.candidates, dtype=np.int64))
        if self.tokens.ndim != 2:
            raise FamilyError("tokens must be [T, m]")
        if not len(self.queries) or not len(self.candidates):
            raise FamilyError("a product family needs at least one query and one candidate")
        if self.query_position not in (1, 2, 3):
            raise FamilyError(f"query_position {self.query_position} is outside 1..3")
        self.matching = [(int(q), int(g)) for q, g in self.matching]

    @property
    def m(self) -> int:
        return int(self.tokens.shape[1])

    def __len__(self) -> int:
        return len(self.queries) * len(self.candidates) ** 2

    def expand(self, limit: int = MAX_EXPANDED) -> Family:
        """The same sequences as a :class:`Family` (refused above ``limit`` sequences)."""
        if len(self) > limit:
            raise FamilyError(
                f"product family {self.name!r} has {len(self):,} sequences ({len(self.queries):,} "
                f"queries × {len(self.candidates):,}² candidate pairs); at most {limit:,} are expanded")
        q, a, b = np.meshgrid(self.queries, self.candidates, self.candidates, indexing="ij")
        others = [p for p in range(3) if p != self.query_position - 1]
        index = np.empty((len(self), 3), dtype=np.int64)
        index[:, self.query_position - 1] = q.ravel()
        index[:, others[0]], index[:, others[1]] = a.ravel(), b.ravel()
        return Family(self.tokens, index, self.query_position, list(self.matching), self.name,
                      dict(self.meta))


AnyFamily = Family | ProductFamily


def as_sequences(family: AnyFamily) -> Family:
    """``family`` as materialised sequences (a product family is expanded)."""
    return family.expand() if isinstance(family, ProductFamily) else family


def bits_to_str(bits: np.ndarray) -> str:
    return "".join("1" if b else "0" for b in bits)
