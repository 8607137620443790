"""The family file format: JSON, bits as ``'0'/'1'`` strings (docs/formats.md).

Two layouts, told apart by their keys:

* **sequences** — ``{"m", "query_position", "sequences": [[bits, …], …],
  "matching": [[query, good], …]}``: every sequence listed;
* **product** — ``{"m", "query_position", "queries": [bits, …],
  "candidates": [bits, …], "matching": …, "length"}``: every sequence of length
  N (``"length"``, an integer ≥ 3, default 3) with a query at its position and any
  N − 1 candidates (:class:`~kernelgap.task.family.ProductFamily`).

Loading is linear in the file: each distinct word is validated and converted
once (a family has few distinct tokens and many sequences), and token ids
follow the sorted words, so tokens come out in lexicographic order.  Every
problem is a one-line :class:`~kernelgap.errors.FamilyError`.  The loader checks
what only the file knows (types, lengths, characters, which key a matching word
is missing from); everything else is checked by the family itself on
construction (:mod:`~kernelgap.task.family`, "Families validate themselves").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import FamilyError
from .family import MAX_PRODUCT_LENGTH, AnyFamily, Family, ProductFamily, bits_to_str

PRODUCT_KEYS = ("queries", "candidates")


class _Vocabulary:
    """Distinct words of a file, validated once, with their token ids (sorted order)."""

    def __init__(self, words: list, m: int, where) -> None:
        """``where(word)`` names the first place a bad word occurs (for the error message)."""
        for w in words:
            if type(w) is not str:  # noqa: E721 - exact str: unhashable values must not reach the set
                raise FamilyError(f"{where(w)}: expected a string of '0'/'1', got {type(w).__name__}")
        self.words = sorted(set(words))
        for w in self.words:
            if len(w) != m:
                raise FamilyError(f"{where(w)}: {w!r} has length {len(w)}, expected m = {m}")
            if w.strip("01"):
                raise FamilyError(f"{where(w)}: {w!r} has characters other than '0' and '1'")
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.m = m

    def tokens(self) -> np.ndarray:
        if not self.words:
            return np.zeros((0, self.m), dtype=np.uint8)
        flat = np.frombuffer("".join(self.words).encode("ascii"), dtype=np.uint8)
        return (flat - ord("0")).reshape(len(self.words), self.m)

    def index(self, words: list[str]) -> np.ndarray:
        return np.fromiter(map(self.ids.__getitem__, words), dtype=np.int64, count=len(words))


def _check_word(text, m: int, where: str) -> str:
    if not isinstance(text, str):
        raise FamilyError(f"{where}: expected a string of '0'/'1', got {type(text).__name__}")
    if text.strip("01"):
        raise FamilyError(f"{where}: {text!r} has characters other than '0' and '1'")
    if len(text) != m:
        raise FamilyError(f"{where}: {text!r} has length {len(text)}, expected m = {m}")
    return text


def _header(data) -> tuple[int, str, dict]:
    if not isinstance(data, dict):
        raise FamilyError("family file must hold a JSON object")
    if "m" not in data:
        raise FamilyError("family file is missing the key 'm'")
    m = data["m"]
    if not isinstance(m, int) or isinstance(m, bool) or m <= 0:
        raise FamilyError(f"'m' must be a positive integer, got {m!r}")
    name, meta = data.get("name", "family"), data.get("meta", {})
    if not isinstance(name, str) or not isinstance(meta, dict):
        raise FamilyError("'name' must be a string and 'meta' an object")
    return m, name, meta


def _query_position(data: dict, length: int, allow_null: bool):
    qp = data.get("query_position")
    if qp is None and allow_null:
        return None
    if not isinstance(qp, int) or isinstance(qp, bool) or not 1 <= qp <= length:
        allowed = f"an integer in 1..{length}" + (" or null" if allow_null else "")
        raise FamilyError(f"'query_position' must be {allowed}, got {qp!r}")
    return qp


def _matching_words(data: dict, m: int) -> list[tuple[str, str]]:
    matching = data.get("matching") or []
    if not isinstance(matching, list):
        raise FamilyError("'matching' must be a list of [query_bits, good_bits] pairs")
    pairs = []
    for k, entry in enumerate(matching):
        if not isinstance(entry, list) or len(entry) != 2:
            raise FamilyError(f"matching entry {k}: expected [query_bits, good_bits]")
        pairs.append(tuple(_check_word(t, m, f"matching entry {k}") for t in entry))
    return pairs


def _sequences_from_json(data: dict, m: int, name: str, meta: dict) -> Family:
    seqs = data["sequences"]
    if not isinstance(seqs, list) or not seqs:
        raise FamilyError("'sequences' must be a non-empty list of sequences")
    length = None
    for s, seq in enumerate(seqs):
        if not isinstance(seq, list) or not seq:
            raise FamilyError(f"sequence {s}: expected a non-empty list of bit strings")
        if length is None:
            length = len(seq)
        elif len(seq) != length:
            raise FamilyError(f"sequence {s} has length {len(seq)}, the first has {length}")
    flat = [w for seq in seqs for w in seq]

    def where(word) -> str:
        return f"sequence {next(s for s, seq in enumerate(seqs) if any(w is word or w == word for w in seq))}"

    vocab = _Vocabulary(flat, m, where)
    qp = _query_position(data, length, allow_null=True)
    matching = []
    for k, (q, g) in enumerate(_matching_words(data, m)):
        for role, word in (("query", q), ("good candidate", g)):
            if word not in vocab.ids:
                raise FamilyError(f"matching entry {k}: its {role} appears in no sequence")
        matching.append((vocab.ids[q], vocab.ids[g]))
    # the family validates the rest itself (one good candidate per query, the pair meeting
    # in a sequence with the query at a scored position)
    return Family(vocab.tokens(), vocab.index(flat).reshape(len(seqs), length), qp, matching, name, meta)


def _product_from_json(data: dict, m: int, name: str, meta: dict) -> ProductFamily:
    lists = {}
    for key in PRODUCT_KEYS:
        value = data.get(key)
        if not isinstance(value, list) or not value:
            raise FamilyError(f"a product family needs '{key}': a non-empty list of bit strings")
        lists[key] = value
    qs, cs = lists["queries"], lists["candidates"]

    def where(word) -> str:
        for key, words in lists.items():
            for k, w in enumerate(words):
                if w is word or w == word:
                    return f"{key} entry {k}"
        return "an entry"

    vocab = _Vocabulary(qs + cs, m, where)
    length = data.get("length", 3)
    if not isinstance(length, int) or isinstance(length, bool) or not 3 <= length <= MAX_PRODUCT_LENGTH:
        raise FamilyError(
            f"'length' must be an integer N in 3..{MAX_PRODUCT_LENGTH:,} (the query and "
            f"N − 1 candidates), got {length!r:.60}"
        )
    qp = _query_position(data, length, allow_null=False)
    query_set, cand_set = set(qs), set(cs)
    matching = []
    for k, (q, g) in enumerate(_matching_words(data, m)):  # by word: the messages name the keys
        if q not in query_set:
            raise FamilyError(f"matching entry {k}: its query is not in 'queries'")
        if g not in cand_set:
            raise FamilyError(f"matching entry {k}: its good candidate is not in 'candidates'")
        matching.append((vocab.ids[q], vocab.ids[g]))
    # the family validates the rest itself (one good candidate per query; a word listed twice
    # in 'queries' or 'candidates' is one token, merged)
    return ProductFamily(vocab.tokens(), vocab.index(qs), vocab.index(cs), qp, matching, name, meta, length)


def family_from_json(data) -> AnyFamily:
    """Parse and validate either layout; raises a one-line :class:`FamilyError`."""
    m, name, meta = _header(data)
    product = any(k in data for k in PRODUCT_KEYS)
    if product and "sequences" in data:
        raise FamilyError("a family file holds either 'sequences' or 'queries' and 'candidates', not both")
    if product:
        return _product_from_json(data, m, name, meta)
    if "sequences" not in data:
        raise FamilyError("family file is missing the key 'sequences' (or 'queries' and 'candidates')")
    return _sequences_from_json(data, m, name, meta)


def family_to_json(family: AnyFamily) -> dict:
    """The family file of ``family`` (the product layout for a :class:`ProductFamily`)."""
    words = [bits_to_str(t) for t in family.tokens]
    out = {"m": family.m, "query_position": family.query_position, "name": family.name}
    if isinstance(family, ProductFamily):
        out["queries"] = [words[i] for i in family.queries.tolist()]
        out["candidates"] = [words[i] for i in family.candidates.tolist()]
        if family.length != 3:
            out["length"] = family.length
    else:
        out["sequences"] = [[words[i] for i in row] for row in family.index.tolist()]
    out["matching"] = [[words[q], words[g]] for q, g in family.matching]
    out["meta"] = family.meta
    return out


def load_family(path: str | os.PathLike) -> AnyFamily:
    """Read a family file; every problem is a one-line :class:`FamilyError` naming the file."""
    from ..io import read_input

    return parse_family_bytes(read_input(path, "family file", FamilyError), Path(path))


def parse_family_bytes(raw: bytes, path: str | os.PathLike) -> AnyFamily:
    """A family file's content, already read (so a caller can hash exactly what is parsed);
    ``path`` names the file in every error."""
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FamilyError(
            f"family file {path} is not valid JSON ({exc.__class__.__name__}: line {getattr(exc, 'lineno', '?')})"
        ) from None
    except RecursionError:
        raise FamilyError(f"family file {path} is nested too deeply to be a family file") from None
    try:
        return family_from_json(data)
    except FamilyError as exc:
        raise FamilyError(f"family file {path}: {exc}") from None


def save_family(family: AnyFamily, path: str | os.PathLike, overwrite: bool = False) -> Path:
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
