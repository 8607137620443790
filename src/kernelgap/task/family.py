"""A family of Min-IP sequences, stored as distinct tokens plus token ids.

A family holds few distinct tokens and many sequences over them, so it is kept
as ``tokens [T, m]`` (the distinct binary vectors) and ``index [S, N]``
(token ids per position).  Everything downstream (targets, the certificate,
the stacked trainer) works on the ``T × T`` Gram matrix and these ids.

``query_position`` is 1-based as in the family file format; ``None`` means
every position is a query (bidirectional reading).  ``matching`` lists
``(query_id, good_id)`` pairs for the certificate (docs/theory.md, "The lower bound as a certificate").

**Families validate themselves** (docs/formats.md, "Family files"): whatever
builds one (the file loader, a registered builder, the Python API), the
constructor checks everything the certificate takes for granted and raises a
one-line :class:`~kernelgap.errors.FamilyError` otherwise, and so does every
later assignment to a validated field (``tokens``, ``index``, ``queries``,
``candidates``, ``query_position``, ``matching``).  A list or array changed
in place is caught by :meth:`Family.validate`, which the certificate calls
before it uses a family.
"""

from __future__ import annotations

import operator
import sys
from dataclasses import dataclass, field

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


# -- validation (module docstring) ------------------------------------------------------


def _token_table(tokens) -> np.ndarray:
    """``tokens`` as a ``uint8 [T, m]`` array, m ≥ 1, every value 0 or 1 (checked before the
    cast, so a 2 or 256 or 0.5 is refused, not wrapped or truncated)."""
    raw = np.asarray(tokens)
    if raw.ndim != 2:
        raise FamilyError(f"tokens must be a [T, m] array of 0/1 values, got shape {raw.shape}")
    if raw.shape[1] < 1:
        raise FamilyError("tokens must have m ≥ 1 bits, got m = 0")
    if raw.dtype.kind not in "biuf":
        raise FamilyError(f"tokens must be 0/1 numbers, got dtype {raw.dtype}")
    if raw.size and raw.dtype.kind != "b" and not (raw.dtype == np.uint8 and raw.max() <= 1):
        bad = (raw != 0) & (raw != 1)  # NaN is neither
        if bad.any():
            t, k = np.argwhere(bad)[0].tolist()
            raise FamilyError(
                f"non-binary tokens: token {t} has the value {raw[t, k].item()!r} at bit {k} (values are 0/1 only)"
            )
    return np.ascontiguousarray(raw, dtype=np.uint8)


def _token_ids(values, what: str, count: int, ndim: int) -> np.ndarray:
    """``values`` as int64 token ids of the given rank, each in ``0..count − 1``."""
    raw = np.asarray(values)
    if raw.size == 0:
        shape = raw.shape if raw.ndim == ndim else (0,) * ndim
        return np.zeros(shape, dtype=np.int64)
    if raw.ndim != ndim:
        raise FamilyError(f"{what} must be a {ndim}-d array of token ids, got shape {raw.shape}")
    if raw.dtype.kind not in "iu":
        raise FamilyError(f"{what} must be integer token ids, got dtype {raw.dtype}")
    low, high = raw.min(), raw.max()
    if low < 0 or high >= count:
        bad = low if low < 0 else high
        raise FamilyError(f"{what} holds token id {int(bad)}, outside 0..{count - 1}")
    return np.ascontiguousarray(raw, dtype=np.int64)


def _position(value, length: int, allow_none: bool) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        allowed = f"an integer in 1..{length}" + (" or None" if allow_none else "")
        raise FamilyError(f"query_position must be {allowed}, got {value!r}")
    if not 1 <= value <= length:
        raise FamilyError(f"query_position {value} is outside 1..{length}")
    return int(value)


def _distinct(tokens: np.ndarray) -> None:
    """Token ids ↔ bit vectors one to one: the certificate keys everything by id."""
    if len(tokens) < 2:
        return
    uniq, inverse = unique_rows(tokens)
    if len(uniq) < len(tokens):
        order = np.argsort(inverse, kind="stable")
        same = np.flatnonzero(inverse[order][1:] == inverse[order][:-1])
        first, second = sorted(order[same[0] : same[0] + 2].tolist())
        raise FamilyError(f"tokens {first} and {second} are the same bit vector: a family's tokens must be distinct")


def sorted_unique(ids: np.ndarray) -> np.ndarray:
    """``np.unique`` of a 1-d array by one sort (numpy's default hash path is many times slower
    on 10⁶ ids)."""
    ordered = np.sort(np.asarray(ids), kind="stable")
    if len(ordered) < 2:
        return ordered
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return ordered[first]


def _matching_fast(matching, count: int) -> list[tuple[int, int]] | None:
    """:func:`_matching` for an ``[n, 2]`` integer array-like whose every entry is valid, at numpy
    speed; None whenever anything is off (the loop then finds and words the first problem)."""
    if isinstance(matching, np.ndarray):
        raw = matching
    elif isinstance(matching, (list, tuple)) and matching and isinstance(matching[0], tuple):
        try:
            raw = np.array(matching)
        except (ValueError, TypeError, OverflowError):
            return None
    else:
        return None
    if raw.ndim != 2 or raw.shape[1] != 2 or raw.dtype.kind not in "iu" or not len(raw):
        return None
    if raw.min() < 0 or raw.max() >= count:
        return None
    queries = raw[:, 0].astype(np.int64)
    if len(sorted_unique(queries)) < len(queries):
        return None
    return list(zip(queries.tolist(), raw[:, 1].astype(np.int64).tolist()))


def _matching(matching, count: int) -> list[tuple[int, int]]:
    """Pairs of token ids in range, no query twice (one good candidate per query); a valid
    integer array (or list of int pairs) is checked vectorised (:func:`_matching_fast`)."""
    fast = _matching_fast(matching, count)
    if fast is not None:
        return fast
    try:
        entries = list(matching)
    except TypeError:
        raise FamilyError("matching must be a list of (query id, good id) pairs") from None
    out, first_of = [], {}
    for k, entry in enumerate(entries):
        try:
            q, g = entry
            q, g = operator.index(q), operator.index(g)
        except (TypeError, ValueError):
            raise FamilyError(
                f"matching entry {k}: expected a (query id, good id) pair of integers, got {entry!r:.60}"
            ) from None
        for role, token in (("query", q), ("good candidate", g)):
            if not 0 <= token < count:
                raise FamilyError(f"matching entry {k}: its {role} id {token} is outside 0..{count - 1}")
        if q in first_of:
            raise FamilyError(
                f"matching entries {first_of[q]} and {k} have the same query (token {q}): "
                f"each query has one good candidate"
            )
        first_of[q] = k
        out.append((q, g))
    return out


def _member(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``np.isin(ids, table)`` for a sorted, duplicate-free ``table``, by binary search."""
    at = np.minimum(np.searchsorted(table, ids), len(table) - 1)
    return table[at] == ids


class _SelfValidating:
    """Assigning a validated field re-runs :meth:`validate`; a refused value is not kept."""

    _VALIDATED: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value) -> None:
        if name not in self._VALIDATED or not self.__dict__.get("_valid"):
            object.__setattr__(self, name, value)
            return
        old = self.__dict__.get(name)
        object.__setattr__(self, name, value)
        try:
            self.validate()
        except FamilyError:
            object.__setattr__(self, name, old)
            raise

    def __post_init__(self) -> None:
        self.validate()
        object.__setattr__(self, "_valid", True)

    def validate(self) -> None:  # pragma: no cover - each family class defines it
        raise NotImplementedError


@dataclass
class Family(_SelfValidating):
    """Sequences over a set of distinct tokens (docs/experiments.md).

    Validated on construction and on every assignment to a field (module docstring):

    * ``tokens``: a ``[T, m]`` array of 0/1 values, m ≥ 1, no two rows equal;
    * ``index``: ``[S, N]`` integer token ids in ``0..T − 1``, N ≥ 1;
    * ``query_position``: an integer in ``1..N``, or None (every position scored);
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
        tokens = _token_table(self.tokens)
        index = _token_ids(self.index, "index", len(tokens), 2)
        if index.shape[1] < 1:
            raise FamilyError("index must be [S, N] with sequences of length N ≥ 1")
        position = _position(self.query_position, index.shape[1], allow_none=True)
        _distinct(tokens)
        matching = _matching(self.matching, len(tokens))
        for name, value in (("tokens", tokens), ("index", index), ("query_position", position), ("matching", matching)):
            object.__setattr__(self, name, value)
        self._check_matching_meets()

    def _check_matching_meets(self) -> None:
        """Each matching pair occurs in some sequence, query at a scored position and good
        candidate at another one (class docstring)."""
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

    # -- construction ----------------------------------------------------------
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
        seq = _token_table(raw.reshape(s * n, m)).reshape(s, n, m)  # 0/1 checked before the cast
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
class ProductFamily(_SelfValidating):
    """Every sequence of length N with a query ``x`` at its position and any N − 1 candidates.

    ``x`` sits at ``query_position`` (1-based) and the other ``N − 1`` positions
    hold every tuple of candidates, repeats included: ``Q·C^(N−1)`` sequences
    (``length`` = N ≥ 3, default 3: every ``(x; c, c')``) that are never
    materialised unless asked (:meth:`expand`).  The certificate works on the
    product directly (docs/theory.md, "Product families" and "Context length N").

    Validated on construction and on every assignment to a field (module docstring):
    ``tokens`` as for :class:`Family` (0/1, m ≥ 1, distinct rows); ``queries`` and
    ``candidates`` non-empty 1-d integer token ids in range; ``length`` an integer
    in ``3..MAX_PRODUCT_LENGTH``; ``query_position`` in 1..N; ``matching`` pairs
    with no query twice, each query among ``queries`` and
    each good candidate among ``candidates`` (for a product that is exactly "the
    pair meets in a sequence").  ``queries`` and ``candidates`` are *sets*: the
    family is the same sequences however often an id is listed, so a repeated id
    is merged and both are kept sorted (``np.unique``); repeated tokens (two ids,
    one bit vector) are refused instead, since merging them would renumber the
    matching.
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
        tokens = _token_table(self.tokens)
        queries = sorted_unique(_token_ids(self.queries, "queries", len(tokens), 1))
        candidates = sorted_unique(_token_ids(self.candidates, "candidates", len(tokens), 1))
        if not len(queries) or not len(candidates):
            raise FamilyError("a product family needs at least one query and one candidate")
        length = self.length
        if (
            isinstance(length, (bool, np.bool_))
            or not isinstance(length, (int, np.integer))
            or not 3 <= length <= MAX_PRODUCT_LENGTH
        ):
            raise FamilyError(
                f"a product family's length must be an integer N in 3..{MAX_PRODUCT_LENGTH:,}, got {length!r:.60}"
            )
        length = int(length)
        position = _position(self.query_position, length, allow_none=False)
        _distinct(tokens)
        matching = _matching(self.matching, len(tokens))
        if matching:
            pairs = np.array(matching, dtype=np.int64)
            bad_q, bad_g = ~_member(pairs[:, 0], queries), ~_member(pairs[:, 1], candidates)
            if (bad_q | bad_g).any():
                k = int(np.flatnonzero(bad_q | bad_g)[0])
                q, g = matching[k]
                if bad_q[k]:
                    raise FamilyError(f"matching entry {k}: its query (token {q}) is not one of the queries")
                raise FamilyError(f"matching entry {k}: its good candidate (token {g}) is not one of the candidates")
        for name, value in (
            ("tokens", tokens),
            ("queries", queries),
            ("candidates", candidates),
            ("length", length),
            ("query_position", position),
            ("matching", matching),
        ):
            object.__setattr__(self, name, value)

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

    def _tuples(self) -> str:
        c = f"{len(self.candidates):,}"
        return f"{c}² candidate pairs" if self.length == 3 else f"{c}^{self.length - 1} candidate tuples"

    def expand(self, limit: int = MAX_EXPANDED) -> Family:
        """The same sequences as a :class:`Family` (refused above ``limit`` sequences), the
        query's position first and the candidate slots in order, the first slowest."""
        count = self.sequence_count
        if count > limit:
            raise FamilyError(
                f"product family {self.name!r} has {_count_str(count)} sequences ({len(self.queries):,} "
                f"queries × {self._tuples()}); at most {limit:,} are expanded"
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
