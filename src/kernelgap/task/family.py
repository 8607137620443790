"""A family of Min-IP sequences, stored as distinct tokens plus token ids.

A family holds few distinct tokens and many sequences over them, so it is kept
as ``tokens [T, m]`` (the distinct binary vectors) and ``index [S, N]``
(token ids per position); everything downstream works on the ``T × T`` Gram matrix
and these ids.  ``matching`` lists ``(query_id, good_id)`` pairs for the certificate
(docs/theory.md, "The lower bound as a certificate").

**Families validate themselves** (docs/formats.md, "Family files"): whoever builds one,
the constructor and every later assignment to a validated field check everything the
certificate takes for granted (:mod:`.family_checks`), each problem a one-line
:class:`~kernelgap.errors.FamilyError`.  A list or array changed in place is caught by
:meth:`Family.validate`, which the certificate calls before it uses a family.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from ..errors import FamilyError
from .family_checks import (
    SelfValidating,
    distinct_tokens,
    is_integer,
    matching_pairs,
    member,
    query_position_in,
    sorted_unique,
    token_ids,
    token_table,
    unique_rows,
)
from .minip import targets_from_index


@dataclass
class Family(SelfValidating):
    """Sequences over a set of distinct tokens (docs/experiments.md), validated (module docstring):

    * ``tokens``: a ``[T, m]`` array of 0/1 values, m ≥ 1, no two rows equal;
    * ``index``: ``[S, N]`` integer token ids in ``0..T − 1``, N ≥ 1;
    * ``query_position``: an integer in ``1..N`` (1-based, as in a family file), or None
      (every position scored: the bidirectional reading);
    * ``matching``: ``(query, good)`` pairs of token ids, no query twice, and each
      good candidate a *candidate of its query*: some sequence holds the query at a
      scored position and the good candidate at another position of the same
      sequence.  That is the certificate's reading of the row ``K(x, g)`` of B
      (docs/theory.md, "From masses to kernel values"); a pair that never meets
      bounds nothing.
    """

    _VALIDATED = frozenset({"tokens", "index", "query_position", "matching"})

    tokens: np.ndarray  # uint8 [T, m]
    index: np.ndarray  # int64 [S, N]
    query_position: int | None = None  # 1-based; None = all positions
    matching: list[tuple[int, int]] = field(default_factory=list)
    name: str = "family"
    meta: dict = field(default_factory=dict)

    def validate(self) -> None:
        """Check (and normalise) every field; raises a one-line :class:`FamilyError`."""
        tokens = token_table(self.tokens)
        index = token_ids(self.index, "index", len(tokens), 2)
        if index.shape[1] < 1:
            raise FamilyError("index must be [S, N] with sequences of length N ≥ 1")
        position = query_position_in(self.query_position, index.shape[1], allow_none=True)
        distinct_tokens(tokens)
        matching = matching_pairs(self.matching, len(tokens))
        self.__dict__.update(tokens=tokens, index=index, query_position=position, matching=matching)  # not re-validated
        self._check_matching_meets()

    def _check_matching_meets(self) -> None:
        """Each matching pair meets in some sequence (class docstring)."""
        if not self.matching:
            return
        t = len(self.tokens)
        pairs = np.array(self.matching, dtype=np.int64)
        keys = pairs[:, 0] * t + pairs[:, 1]
        missing = np.ones(len(keys), dtype=bool)
        for p in self.scored_positions:
            for o in range(self.length):
                if o != p and missing.any():
                    missing &= ~np.isin(keys, self.index[:, p] * t + self.index[:, o])
        if missing.any():
            k = int(np.flatnonzero(missing)[0])
            where = "any position" if self.query_position is None else f"position {self.query_position}"
            raise FamilyError(
                f"matching entry {k}: no sequence holds its query (token {pairs[k, 0]}) at {where} "
                f"and its good candidate (token {pairs[k, 1]}) at another position"
            )

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

    def subset(self, rows: np.ndarray, name: str | None = None) -> Family:
        """The family restricted to some sequences (tokens and matching kept: refused when a
        matching pair no longer meets in any of them)."""
        return Family(
            self.tokens,
            self.index[rows],
            self.query_position,
            list(self.matching),
            name or self.name,
            dict(self.meta),
        )

    @classmethod
    def from_sequences(
        cls,
        sequences: np.ndarray,
        query_position: int | None = None,
        matching_bits: list[tuple[np.ndarray, np.ndarray]] = (),
        name: str = "family",
        meta: dict | None = None,
    ) -> Family:
        """Build from dense ``[S, N, m]`` bits; matching given as bit vectors."""
        raw = np.asarray(sequences)
        if raw.ndim != 3:
            raise FamilyError("sequences must be a [S, N, m] array")
        s, n, m = raw.shape
        seq = token_table(raw.reshape(s * n, m)).reshape(s, n, m)  # 0/1 checked before the cast
        tokens, inverse = unique_rows(seq.reshape(s * n, m))
        ids = {row.tobytes(): i for i, row in enumerate(tokens)}
        matching = []
        for k, (q_bits, g_bits) in enumerate(matching_bits):
            pair = [ids.get(np.asarray(b, dtype=np.uint8).tobytes()) for b in (q_bits, g_bits)]
            if None in pair:
                raise FamilyError(f"matching entry {k} names a token that is in no sequence")
            matching.append(tuple(pair))
        return cls(tokens, inverse.reshape(s, n), query_position, matching, name, meta or {})


#: Most sequences a product family is expanded to (training and other per-sequence work).
MAX_EXPANDED = 1 << 22
#: Longest product family: N − 1 candidate slots (its sequence count ``Q·C^(N−1)`` is an exact
#: integer of about ``N·log2 C`` bits, instant at this size).
MAX_PRODUCT_LENGTH = 1 << 16


@dataclass
class ProductFamily(SelfValidating):
    """Every sequence of length N with a query ``x`` at its position and any N − 1 candidates.

    ``x`` sits at ``query_position`` (1-based) and the other ``N − 1`` positions
    hold every tuple of candidates, repeats included: ``Q·C^(N−1)`` sequences
    (``length`` = N in ``3..MAX_PRODUCT_LENGTH``, default 3: every ``(x; c, c')``), never
    materialised unless asked (:meth:`expand`): the certificate works on the product
    directly (docs/theory.md, "Product families" and "Context length N").

    Validated as :class:`Family` is, with ``queries`` and ``candidates`` non-empty 1-d token
    ids and each matching pair's query among ``queries`` and good candidate among
    ``candidates`` (for a product, exactly "the pair meets in a sequence").  ``queries`` and
    ``candidates`` are *sets*: a repeated id is merged and both are kept sorted; repeated
    tokens (two ids, one bit vector) are refused instead, since merging them would renumber
    the matching.
    """

    _VALIDATED = frozenset({"tokens", "queries", "candidates", "query_position", "matching", "length"})

    tokens: np.ndarray  # uint8 [T, m], distinct
    queries: np.ndarray  # int64 [Q] token ids
    candidates: np.ndarray  # int64 [C] token ids
    query_position: int = 1
    matching: list[tuple[int, int]] = field(default_factory=list)
    name: str = "family"
    meta: dict = field(default_factory=dict)
    length: int = 3  # N: the query and N − 1 candidates

    def validate(self) -> None:
        """Check (and normalise) every field; raises a one-line :class:`FamilyError`."""
        tokens = token_table(self.tokens)
        queries = sorted_unique(token_ids(self.queries, "queries", len(tokens), 1))
        candidates = sorted_unique(token_ids(self.candidates, "candidates", len(tokens), 1))
        if not len(queries) or not len(candidates):
            raise FamilyError("a product family needs at least one query and one candidate")
        length = self.length
        if not (is_integer(length) and 3 <= length <= MAX_PRODUCT_LENGTH):
            raise FamilyError(
                f"a product family's length must be an integer N in 3..{MAX_PRODUCT_LENGTH:,}, got {length!r:.60}"
            )
        length = int(length)
        position = query_position_in(self.query_position, length, allow_none=False)
        distinct_tokens(tokens)
        matching = matching_pairs(self.matching, len(tokens))
        if matching:
            pairs = np.array(matching, dtype=np.int64)
            bad_q, bad_g = ~member(pairs[:, 0], queries), ~member(pairs[:, 1], candidates)
            if (bad_q | bad_g).any():
                k = int(np.flatnonzero(bad_q | bad_g)[0])
                q, g = matching[k]
                if bad_q[k]:
                    raise FamilyError(f"matching entry {k}: its query (token {q}) is not one of the queries")
                raise FamilyError(f"matching entry {k}: its good candidate (token {g}) is not one of the candidates")
        normalised = dict(tokens=tokens, queries=queries, candidates=candidates, length=length, matching=matching)
        self.__dict__.update(normalised, query_position=position)  # not re-validated

    @property
    def m(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def sequence_count(self) -> int:
        """``Q·C^(N−1)``, an exact Python integer of any size."""
        return len(self.queries) * len(self.candidates) ** (self.length - 1)

    def __len__(self) -> int:
        count = self.sequence_count
        if count > sys.maxsize:
            raise FamilyError(
                f"product family {self.name!r} has {_count_str(count)} sequences, more than "
                f"len() can hold (read sequence_count)"
            )
        return count

    def expand(self, limit: int = MAX_EXPANDED) -> Family:
        """The same sequences as a :class:`Family` (refused above ``limit`` sequences), the
        query's position first and the candidate slots in order, the first slowest."""
        count = self.sequence_count
        if count > limit:
            c = f"{len(self.candidates):,}"
            tuples = f"{c}² candidate pairs" if self.length == 3 else f"{c}^{self.length - 1} candidate tuples"
            raise FamilyError(
                f"product family {self.name!r} has {_count_str(count)} sequences ({len(self.queries):,} "
                f"queries × {tuples}); at most {limit:,} are expanded"
            )
        n = self.length
        grids = np.meshgrid(self.queries, *([self.candidates] * (n - 1)), indexing="ij")
        others = [p for p in range(n) if p != self.query_position - 1]
        index = np.empty((count, n), dtype=np.int64)
        index[:, self.query_position - 1] = grids[0].ravel()
        for p, grid in zip(others, grids[1:]):
            index[:, p] = grid.ravel()
        return Family(self.tokens, index, self.query_position, list(self.matching), self.name, dict(self.meta))


AnyFamily = Family | ProductFamily


def _count_str(count: int) -> str:
    """A sequence count for a message: digits with separators, or its size past 10^30."""
    if count < 10**30:
        return f"{count:,}"
    return f"about 10^{int(count.bit_length() * 0.30103)}"


def count_json(count: int) -> int | str:
    """A sequence count for JSON: the exact integer up to 10,000 bits (about 3,000 digits),
    past that ``"about 10^k"`` (a product family's exact count is ``Q·C^(N−1)`` from its
    own numbers)."""
    if count.bit_length() <= 10_000:
        return count
    return f"about 10^{int((count.bit_length() - 1) * 0.30102999566398)}"


def count_text(count: int | str) -> str:
    """A sequence count (or :func:`count_json`'s string) for a human line."""
    if isinstance(count, str):
        return count
    if count < 10**60:
        return f"{count:,}"
    return f"about 10^{len(str(count)) - 1}"


def sequence_count(family: AnyFamily) -> int:
    """How many sequences ``family`` holds (a product family's count may exceed ``len()``)."""
    return family.sequence_count if isinstance(family, ProductFamily) else len(family)


def as_sequences(family: AnyFamily) -> Family:
    """``family`` as materialised sequences (a product family is expanded)."""
    return family.expand() if isinstance(family, ProductFamily) else family


def bits_to_str(bits: np.ndarray) -> str:
    return "".join("1" if b else "0" for b in bits)
