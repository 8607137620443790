"""A family of Min-IP sequences, stored as distinct tokens plus token ids.

A family holds few distinct tokens and many sequences over them, so it is kept
as ``tokens [T, m]`` (the distinct binary vectors) and ``index [S, N]``
(token ids per position).  Everything downstream (targets, the certificate,
the stacked trainer) works on the ``T × T`` Gram matrix and these ids.

``query_position`` is 1-based as in the family file format; ``None`` means
every position is a query (bidirectional reading).  ``matching`` lists
``(query_id, good_id)`` pairs for the certificate (SPEC §4).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import FamilyError
from .minip import targets_from_index


@dataclass
class Family:
    """Sequences over a set of distinct tokens (SPEC §5)."""

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
        """Targets at every position, ``[S, N]`` (SPEC §1)."""
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
        tokens, inverse = np.unique(seq.reshape(s * n, m), axis=0, return_inverse=True)
        family = cls(tokens, inverse.reshape(s, n), query_position, [], name, meta or {})
        matching = []
        for q_bits, g_bits in matching_bits:
            q, g = family.token_id(q_bits), family.token_id(g_bits)
            if q is None or g is None:
                raise FamilyError("a matching entry names a token that is in no sequence")
            matching.append((q, g))
        family.matching = matching
        return family


def bits_to_str(bits: np.ndarray) -> str:
    return "".join("1" if b else "0" for b in bits)


def _str_to_bits(text, m: int | None, where: str) -> np.ndarray:
    if not isinstance(text, str):
        raise FamilyError(f"{where}: expected a string of '0'/'1', got {type(text).__name__}")
    if text.strip("01"):
        raise FamilyError(f"{where}: {text!r} has characters other than '0' and '1'")
    if m is not None and len(text) != m:
        raise FamilyError(f"{where}: {text!r} has length {len(text)}, expected m = {m}")
    return np.frombuffer(text.encode(), dtype=np.uint8) - ord("0")


def family_to_json(family: Family) -> dict:
    """The family file format (issue #2): bits as '0'/'1' strings."""
    words = [bits_to_str(t) for t in family.tokens]
    return {
        "m": family.m,
        "query_position": family.query_position,
        "name": family.name,
        "sequences": [[words[i] for i in row] for row in family.index.tolist()],
        "matching": [[words[q], words[g]] for q, g in family.matching],
        "meta": family.meta,
    }


def family_from_json(data) -> Family:
    """Parse and validate the family file format; raises :class:`FamilyError`."""
    if not isinstance(data, dict):
        raise FamilyError("family file must hold a JSON object")
    for key in ("m", "sequences"):
        if key not in data:
            raise FamilyError(f"family file is missing the key {key!r}")
    m = data["m"]
    if not isinstance(m, int) or isinstance(m, bool) or m <= 0:
        raise FamilyError(f"'m' must be a positive integer, got {m!r}")
    seqs = data["sequences"]
    if not isinstance(seqs, list) or not seqs:
        raise FamilyError("'sequences' must be a non-empty list of sequences")
    length = None
    rows = []
    for s, seq in enumerate(seqs):
        if not isinstance(seq, list) or not seq:
            raise FamilyError(f"sequence {s}: expected a non-empty list of bit strings")
        if length is None:
            length = len(seq)
        elif len(seq) != length:
            raise FamilyError(f"sequence {s} has length {len(seq)}, the first has {length}")
        rows.append([_str_to_bits(t, m, f"sequence {s}") for t in seq])
    qp = data.get("query_position")
    if qp is not None and (not isinstance(qp, int) or isinstance(qp, bool) or not 1 <= qp <= length):
        raise FamilyError(f"'query_position' must be an integer in 1..{length} or null, got {qp!r}")
    matching = data.get("matching") or []
    if not isinstance(matching, list):
        raise FamilyError("'matching' must be a list of [query_bits, good_bits] pairs")
    pairs = []
    for k, entry in enumerate(matching):
        if not isinstance(entry, list) or len(entry) != 2:
            raise FamilyError(f"matching entry {k}: expected [query_bits, good_bits]")
        pairs.append(tuple(_str_to_bits(t, m, f"matching entry {k}") for t in entry))
    name = data.get("name", "family")
    meta = data.get("meta", {})
    if not isinstance(name, str) or not isinstance(meta, dict):
        raise FamilyError("'name' must be a string and 'meta' an object")
    family = Family.from_sequences(np.array(rows, dtype=np.uint8), qp, [], name, meta)
    for k, (q_bits, g_bits) in enumerate(pairs):
        q, g = family.token_id(q_bits), family.token_id(g_bits)
        if q is None or g is None:
            which = "query" if q is None else "good candidate"
            raise FamilyError(f"matching entry {k}: its {which} appears in no sequence")
        family.matching.append((q, g))
    return family


def load_family(path: str | os.PathLike) -> Family:
    """Read a family file; every problem is a one-line :class:`FamilyError`."""
    p = Path(path)
    if p.is_dir():
        raise FamilyError(f"family file {p} is a folder, not a file")
    if not p.is_file():
        raise FamilyError(f"family file {p} does not exist")
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FamilyError(f"family file {p} is not valid JSON ({exc.__class__.__name__}: line {getattr(exc, 'lineno', '?')})") from None
    except RecursionError:
        raise FamilyError(f"family file {p} is nested too deeply to be a family file") from None
    except OSError as exc:
        raise FamilyError(f"cannot read family file {p}: {exc.strerror or exc}") from None
    try:
        return family_from_json(data)
    except FamilyError as exc:
        raise FamilyError(f"family file {p}: {exc}") from None


def save_family(family: Family, path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Write a family file atomically; refuses to replace an existing file unless told."""
    from ..io import atomic_write_text

    p = Path(path)
    if p.exists() and not overwrite:
        raise FamilyError(f"{p} already exists (pass --force to replace it)")
    try:
        atomic_write_text(p, json.dumps(family_to_json(family)))
    except OSError as exc:
        raise FamilyError(f"cannot write family file {p}: {exc.strerror or exc}") from None
    return p
