"""What a family's fields must be: the checks every family runs when it is made and
whenever a validated field is assigned (docs/formats.md, "Family files"), each raising a
one-line :class:`~kernelgap.errors.FamilyError`, and the fast row and id uniqueness they
rest on (:func:`unique_rows`, :func:`sorted_unique`).  The families themselves are
:mod:`.family`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from ..errors import FamilyError
from .packed import pack_words


def unique_rows(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(bits, axis=0, return_inverse=True)`` for rows of 0/1 values, fast: each row
    packed most significant bit first sorts (as a big-endian integer, or as bytes past 64 bits)
    as the row does, and one key per row compares at once where ``np.unique`` compares fields."""
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


def token_table(tokens) -> np.ndarray:
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


def token_ids(values, what: str, count: int, ndim: int) -> np.ndarray:
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


def is_integer(value) -> bool:
    """Whether ``value`` is a Python or numpy integer (a bool is not)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def query_position_in(value, length: int, allow_none: bool) -> int | None:
    if value is None and allow_none:
        return None
    if not is_integer(value):
        allowed = f"an integer in 1..{length}" + (" or None" if allow_none else "")
        raise FamilyError(f"query_position must be {allowed}, got {value!r}")
    if not 1 <= value <= length:
        raise FamilyError(f"query_position {value} is outside 1..{length}")
    return int(value)


def distinct_tokens(tokens: np.ndarray) -> None:
    """Token ids ↔ bit vectors one to one: the certificate keys everything by id."""
    if len(tokens) < 2:
        return
    if tokens.shape[1] <= 64:
        keys = np.sort(pack_words(tokens))
        if (keys[1:] != keys[:-1]).all():
            return
    uniq, inverse = unique_rows(tokens)
    if len(uniq) < len(tokens):
        order = np.argsort(inverse, kind="stable")
        same = np.flatnonzero(inverse[order][1:] == inverse[order][:-1])
        first, second = sorted(order[same[0] : same[0] + 2].tolist())
        raise FamilyError(f"tokens {first} and {second} are the same bit vector: a family's tokens must be distinct")


def sorted_unique(ids: np.ndarray) -> np.ndarray:
    """``np.unique`` of a 1-d array by one sort and a comparison of neighbours."""
    ordered = np.sort(np.asarray(ids), kind="stable")
    if len(ordered) < 2:
        return ordered
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return ordered[first]


class PairList(Sequence):
    """``(query, good)`` pairs of token ids held as one read-only ``int64 [n, 2]`` array: to a
    reader a list of pairs of ints (indexing and iteration give tuples, a slice another
    :class:`PairList`, ``np.asarray`` the array itself), at 16 bytes an entry instead of a
    Python tuple's 120.  A family's matching is one when it was given as an array."""

    def __init__(self, array: np.ndarray):
        array = np.array(array, dtype=np.int64).reshape(-1, 2)
        array.flags.writeable = False
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return PairList(self.array[k])
        q, g = self.array[k].tolist()
        return q, g

    def __iter__(self):
        for lo in range(0, len(self.array), 1 << 16):
            yield from map(tuple, self.array[lo : lo + (1 << 16)].tolist())

    def __eq__(self, other) -> bool:
        if isinstance(other, PairList):
            return np.array_equal(self.array, other.array)
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and list(self) == list(other)
        return NotImplemented

    __hash__ = None

    def __array__(self, dtype=None, copy=None):
        same = dtype is None or np.dtype(dtype) == self.array.dtype
        return self.array.copy() if copy else self.array if same else self.array.astype(dtype)

    def __repr__(self) -> str:
        return f"PairList({len(self)} pairs)"


def _matching_fast(matching, count: int) -> list[tuple[int, int]] | PairList | None:
    """:func:`matching_pairs` at numpy speed for an ``[n, 2]`` integer array-like whose every entry
    is valid (an array or a :class:`PairList` gives a :class:`PairList`); None whenever anything is
    off (the loop then words the first problem)."""
    if isinstance(matching, (np.ndarray, PairList)):
        raw = np.asarray(matching)
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
    if isinstance(matching, PairList):
        return matching
    if isinstance(matching, np.ndarray):
        return PairList(raw)
    return list(zip(queries.tolist(), raw[:, 1].astype(np.int64).tolist()))


def matching_pairs(matching, count: int) -> list[tuple[int, int]] | PairList:
    """Pairs of token ids in range, no query twice (one good candidate per query)."""
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


def member(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``np.isin(ids, table)`` for a sorted, duplicate-free ``table``, by binary search."""
    at = np.minimum(np.searchsorted(table, ids), len(table) - 1)
    return table[at] == ids


class SelfValidating:
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


#: Overlaps formed at once by :func:`first_inconsistent` (entries × candidates).
CONSISTENCY_CELLS = 1 << 22


def first_inconsistent(tokens: np.ndarray, pairs: np.ndarray, candidates: np.ndarray) -> tuple[int, int, int] | None:
    """The first matching entry of a product family whose good candidate is not a
    least-overlap candidate of its query, as ``(entry, a candidate with less overlap, that
    overlap)``; None when the matching is *consistent*.

    Consistent: for every entry ``(x, g)``, ``<x, g> = min_c <x, c>`` over the family's
    candidates — ``g`` is an answer of the Min-IP task at ``x`` (docs/theory.md, "The task").
    The certificate bounds the row of ``x`` by the chains ``R(x; g → c)`` that climb from
    ``g``'s overlap (docs/theory.md, "From masses to kernel values", "Product families"): a
    good candidate above the least overlap leaves the candidates below it unbounded, so such
    a matching still gives a sound certificate, only a weaker one, and names a good
    candidate the task does not.  Ties at the least overlap are consistent."""
    if not len(pairs) or not len(candidates):
        return None
    dtype = np.float32 if tokens.shape[1] < 1 << 24 else np.float64  # sums of 0/1 products: exact
    cand = tokens[candidates].astype(dtype)
    step = max(1, CONSISTENCY_CELLS // len(candidates))
    for start in range(0, len(pairs), step):
        chunk = pairs[start : start + step]
        query = tokens[chunk[:, 0]].astype(dtype)
        overlaps = query @ cand.T  # [k, C]
        good = np.einsum("ij,ij->i", query, tokens[chunk[:, 1]].astype(dtype))
        least = overlaps.min(axis=1)
        bad = np.flatnonzero(least < good)
        if len(bad):
            k = int(bad[0])
            lower = int(candidates[int(np.argmin(overlaps[k]))])
            return start + k, lower, int(least[k])
    return None


def check_consistent(family):
    """``family`` itself when it is a list of sequences or a product family whose matching is
    consistent (:func:`first_inconsistent`); otherwise a one-line :class:`FamilyError` naming
    the first entry whose good candidate is not of its query's least overlap."""
    if not hasattr(family, "candidates") or not family.matching:
        return family
    pairs = np.array(family.matching, dtype=np.int64)
    found = first_inconsistent(family.tokens, pairs, np.asarray(family.candidates))
    if found is not None:
        k, lower, least = found
        q, g = family.matching[k]
        overlap = int(family.tokens[q].astype(np.int64) @ family.tokens[g].astype(np.int64))
        word = "".join(map(str, family.tokens[lower].tolist()))
        raise FamilyError(
            f"matching entry {k}: its good candidate overlaps its query in {overlap} bits, candidate "
            f"{word:.40} in {least}: a good candidate has its query's least overlap (the Min-IP answer)"
        )
    return family
