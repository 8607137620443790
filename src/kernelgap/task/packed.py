"""Binary words of at most 64 bits packed one ``uint64`` a word, and the sub-word distance test
on them (docs/theory.md, "The whole set by rule").

A word's integer has position 0 as its most significant bit, so integers sort as the words do
lexicographically.  Packing and unpacking go in row chunks (:data:`PACK_ROWS`), so neither ever
holds more than the packed integers and the bit rows themselves.

**The sub-word test.**  Two words of weight w overlap in ``≥ w − r`` positions (Hamming distance
``≤ 2r``) exactly when they share a ``(w − r)``-subset of their supports.  Every word gives one
key per ``r``-subset of its support, the word with those bits cleared; one word's keys are
distinct, so a repeated key is two words sharing that subset.  The ``n·C(w, r)`` keys are sorted
in passes: pass p keeps the keys whose hash (an odd multiplier, the top bits) is ``≡ p`` modulo
the number of passes, so equal keys always meet in one pass and a pass holds about
:data:`~kernelgap.limits.SUBWORD_CHUNK_KEYS` keys.  The work is ``O(passes · C(m, r) · n)``
mask tests and ``O(n·C(w, r) log)`` sorting: near-linear in n for a fixed r.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np

from ..limits import SUBWORD_CHUNK_KEYS

#: Rows packed or unpacked at once (a chunk's 64-byte bit rows: 64 MiB).
PACK_ROWS = 1 << 20
#: The multiplier of the pass hash (odd: a bijection of the 64-bit integers).
_HASH = np.uint64(0x9E3779B97F4A7C15)


def pack_words(code: np.ndarray) -> np.ndarray:
    """0/1 rows of at most 64 bits as ``uint64`` integers, position 0 the most significant bit."""
    code = np.asarray(code)
    n, m = code.shape
    if m > 64:
        raise ValueError(f"words of {m} bits do not pack into 64")
    width = (m + 7) // 8
    shift = np.uint64(8 * width - m)
    out = np.empty(n, dtype=np.uint64)
    for lo in range(0, n, PACK_ROWS):
        packed = np.packbits(np.ascontiguousarray(code[lo : lo + PACK_ROWS], dtype=np.uint8), axis=1)
        padded = np.zeros((len(packed), 8), dtype=np.uint8)
        padded[:, 8 - width :] = packed
        out[lo : lo + len(packed)] = padded.view(">u8").ravel() >> shift
    return out


def unpack_words(words: np.ndarray, m: int) -> np.ndarray:
    """``uint8 [W, m]`` bit rows of words packed as integers, position 0 the most significant bit."""
    words = np.asarray(words)
    out = np.empty((len(words), m), dtype=np.uint8)
    for lo in range(0, len(words), PACK_ROWS):
        raw = np.ascontiguousarray(words[lo : lo + PACK_ROWS], dtype=">u8").view(np.uint8).reshape(-1, 8)
        out[lo : lo + len(raw)] = np.unpackbits(raw, axis=1)[:, 64 - m :]
    return out


def popcount(words: np.ndarray) -> np.ndarray:
    """The weight of each packed word."""
    return np.bitwise_count(np.asarray(words, dtype=np.uint64))


@dataclass(frozen=True)
class PackedCode:
    """A code of ``len(ints)`` words of ``m ≤ 64`` bits, one ``uint64`` a word (module docstring)."""

    ints: np.ndarray
    m: int

    def __len__(self) -> int:
        return len(self.ints)

    def rows(self, index=slice(None)) -> np.ndarray:
        """Some words as ``uint8`` bit rows."""
        return unpack_words(self.ints[index], self.m)


def as_packed(code) -> PackedCode:
    """A :class:`PackedCode` as it is, or ``uint8 [n, m]`` bit rows packed."""
    if isinstance(code, PackedCode):
        return code
    code = np.asarray(code)
    return PackedCode(pack_words(code), code.shape[1])


def subword_key_count(words: int, weight: int, removed: int) -> int:
    """Keys of :func:`shared_subword`: ``words · C(weight, removed)``."""
    return words * comb(weight, removed)


def subword_passes(keys: int) -> int:
    """Passes of the sub-word test over ``keys`` keys (module docstring)."""
    return max(1, -(-keys // SUBWORD_CHUNK_KEYS))


def subword_bytes(words: int, keys: int) -> int:
    """Memory of :func:`shared_subword`: one pass's keys twice (its parts and their concatenation,
    sorted in place, with the 1-byte repeat mask) and per word the packed integer and one drop
    set's mask, keys and hashes (about 40 bytes)."""
    per_pass = -(-keys // subword_passes(keys))
    return 17 * per_pass + 48 * words


def _pass_keys(ints: np.ndarray, masks: list[np.uint64], part: int, passes: int) -> np.ndarray:
    """The keys of pass ``part``: each word with one removed-set's bits cleared, for every
    removed set it holds, kept when its hash falls in this pass."""
    pieces = []
    for mask in masks:
        keys = ints[(ints & mask) == mask] ^ mask
        if passes > 1:
            keys = keys[((keys * _HASH) >> np.uint64(32)) % np.uint64(passes) == part]
        pieces.append(keys)
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint64)


def shared_subword(code, weight: int, removed: int) -> tuple[int, int] | None:
    """Two distinct words of a weight-w code (``uint8 [n, m]`` rows or a :class:`PackedCode`,
    m ≤ 64) that share a ``(w − removed)``-subset of their supports — overlap in ``≥ w − removed``
    positions, Hamming distance ``≤ 2·removed`` — or None when no two do (module docstring).
    Identical words share everything (``removed = 0`` tests distinctness)."""
    packed = as_packed(code)
    ints, m = packed.ints, packed.m
    if len(ints) < 2:
        return None
    if not (popcount(ints) == weight).all():
        raise ValueError(f"a word of the code does not have weight {weight}")
    keys_total = subword_key_count(len(ints), weight, removed)
    passes = subword_passes(keys_total)
    masks = [np.uint64(sum(1 << (m - 1 - p) for p in drop)) for drop in combinations(range(m), removed)]
    made = 0
    for part in range(passes):
        keys = _pass_keys(ints, masks, part, passes)
        made += len(keys)
        keys.sort()
        repeat = np.flatnonzero(keys[1:] == keys[:-1])
        if len(repeat):
            value = keys[repeat[0]]
            first, second = np.flatnonzero((ints & value) == value)[:2].tolist()
            return first, second
    if made != keys_total:
        raise AssertionError(f"made {made} sub-word keys, expected {keys_total}")
    return None
