"""The family file format: JSON, bits as ``'0'/'1'`` strings (docs/formats.md).

Two layouts, told apart by their keys:

* **sequences** — ``{"m", "query_position", "sequences": [[bits, …], …],
  "matching": [[query, good], …]}``: every sequence listed;
* **product** — ``{"m", "query_position", "queries": [bits, …],
  "candidates": [bits, …], "matching": …, "length"}``: every sequence of length
  N (``"length"``, an integer ≥ 3, default 3) with a query at its position and any
  N − 1 candidates (:class:`~kernelgap.task.family.ProductFamily`).

Loading is linear in the file: each distinct word is validated and converted once, and token
ids follow the sorted words.  The loader checks what only the file knows (types, lengths,
characters, which key a matching word is missing from), the family itself everything else
(:mod:`~kernelgap.task.family`); every problem is a one-line :class:`~kernelgap.errors.FamilyError`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import FamilyError
from ..io import atomic_write_text, parse_json, read_input
from ..validation import Int, error_line, fits
from .family import MAX_PRODUCT_LENGTH, AnyFamily, Family, ProductFamily, bits_to_str
from .family_checks import check_consistent

PRODUCT_KEYS = ("queries", "candidates")

#: Bit strings of a file (their length and characters are checked once per distinct word).
Words = Annotated[list[str], Field(min_length=1)]
#: ``[query_bits, good_bits]``.
Pair = Annotated[list[str], Field(min_length=2, max_length=2)]


class FileModel(BaseModel):
    """A family file's structure: strict JSON types; keys it does not know are ignored."""

    model_config = ConfigDict(strict=True, extra="ignore")


class FileHeader(FileModel):
    m: Annotated[Int, Field(ge=1)]
    name: str = "family"
    meta: dict[str, Any] = Field(default_factory=dict)


class SequencesFile(FileModel):
    sequences: Annotated[list[Words], Field(min_length=1)]
    query_position: Any = None  # checked against the length (_query_position)
    matching: list[Pair] | None = None


class ProductFile(FileModel):
    queries: Words
    candidates: Words
    length: Annotated[Int, Field(ge=3, le=MAX_PRODUCT_LENGTH)] = 3
    query_position: Any = None  # checked against the length (_query_position)
    matching: list[Pair] | None = None


def _validated(model: type[FileModel], data: dict):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise FamilyError(error_line(exc)) from None


def _query_position(qp, length: int, allow_null: bool) -> int | None:
    """An integer within ``1..length`` (null only for the sequences layout)."""
    if not (qp is None and allow_null) and not (fits(Int, qp) and 1 <= qp <= length):
        allowed = f"an integer in 1..{length}" + (" or null" if allow_null else "")
        raise FamilyError(f"'query_position' must be {allowed}, got {qp!r}")
    return qp


class _Vocabulary:
    """Distinct words of a file, validated once, with their token ids (sorted order)."""

    def __init__(self, words: list[str], m: int, where) -> None:
        """``where(word)`` names the first place a bad word occurs (for the error message)."""
        self.words = sorted(set(words))
        for w in self.words:
            _check_word(w, m, where(w))
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.m = m

    def tokens(self) -> np.ndarray:
        if not self.words:
            return np.zeros((0, self.m), dtype=np.uint8)
        flat = np.frombuffer("".join(self.words).encode("ascii"), dtype=np.uint8)
        return (flat - ord("0")).reshape(len(self.words), self.m)

    def index(self, words: list[str]) -> np.ndarray:
        return np.fromiter(map(self.ids.__getitem__, words), dtype=np.int64, count=len(words))


def _check_word(text: str, m: int, where: str) -> str:
    """A word of m bits, or a :class:`FamilyError` at ``where`` (its length first)."""
    if len(text) != m:
        raise FamilyError(f"{where}: {text!r} has length {len(text)}, expected m = {m}")
    if text.strip("01"):
        raise FamilyError(f"{where}: {text!r} has characters other than '0' and '1'")
    return text


def _matching_ids(matching: list[list[str]] | None, vocab: _Vocabulary, places) -> list[tuple[int, int]]:
    """The matching's words as token ids; ``places``: for its query and its good candidate, the
    words it must be one of and what is said of it otherwise."""
    pairs = [[_check_word(w, vocab.m, f"matching entry {k}") for w in entry] for k, entry in enumerate(matching or [])]
    for k, pair in enumerate(pairs):
        for word, role, (words, otherwise) in zip(pair, ("query", "good candidate"), places):
            if word not in words:
                raise FamilyError(f"matching entry {k}: its {role} {otherwise}")
    return [(vocab.ids[q], vocab.ids[g]) for q, g in pairs]


def _sequences_from_json(data: dict, header: FileHeader) -> Family:
    m = header.m
    body = _validated(SequencesFile, data)
    seqs = body.sequences
    length = len(seqs[0])
    for s, seq in enumerate(seqs):
        if len(seq) != length:
            raise FamilyError(f"sequence {s} has length {len(seq)}, the first has {length}")
    flat = [w for seq in seqs for w in seq]

    def where(word) -> str:
        return f"sequence {next(s for s, seq in enumerate(seqs) if word in seq)}"

    vocab = _Vocabulary(flat, m, where)
    qp = _query_position(body.query_position, length, allow_null=True)
    matching = _matching_ids(body.matching, vocab, [(vocab.ids, "appears in no sequence")] * 2)
    # the family validates the rest itself (one good candidate per query, the pair meeting
    # in a sequence with the query at a scored position)
    index = vocab.index(flat).reshape(len(seqs), length)
    return Family(vocab.tokens(), index, qp, matching, header.name, header.meta)


def _product_from_json(data: dict, header: FileHeader) -> ProductFamily:
    m = header.m
    body = _validated(ProductFile, data)
    qs, cs = body.queries, body.candidates

    def where(word) -> str:
        for key, words in (("queries", qs), ("candidates", cs)):
            if word in words:
                return f"{key} entry {words.index(word)}"
        return "an entry"

    vocab = _Vocabulary(qs + cs, m, where)
    qp = _query_position(body.query_position, body.length, allow_null=False)
    places = [(set(qs), "is not in 'queries'"), (set(cs), "is not in 'candidates'")]  # by word: the keys named
    matching = _matching_ids(body.matching, vocab, places)
    # the family validates the rest itself (one good candidate per query; a word listed twice
    # in 'queries' or 'candidates' is one token, merged)
    return ProductFamily(
        vocab.tokens(), vocab.index(qs), vocab.index(cs), qp, matching, header.name, header.meta, body.length
    )


def family_from_json(data) -> AnyFamily:
    """Parse and validate either layout; raises a one-line :class:`FamilyError`."""
    if not isinstance(data, dict):
        raise FamilyError("family file must hold a JSON object")
    header = _validated(FileHeader, data)
    product = any(k in data for k in PRODUCT_KEYS)
    if product and "sequences" in data:
        raise FamilyError("a family file holds either 'sequences' or 'queries' and 'candidates', not both")
    if product:
        return check_consistent(_product_from_json(data, header))
    if "sequences" not in data:
        raise FamilyError("family file is missing the key 'sequences' (or 'queries' and 'candidates')")
    return _sequences_from_json(data, header)


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
    return parse_family_bytes(read_input(path, "family file", FamilyError), Path(path))


def parse_family_bytes(raw: bytes, path: str | os.PathLike) -> AnyFamily:
    """A family file's content, already read (so a caller can hash exactly what is parsed);
    ``path`` names the file in every error."""
    data = parse_json(raw, f"family file {path}", FamilyError)
    try:
        return family_from_json(data)
    except FamilyError as exc:
        raise FamilyError(f"family file {path}: {exc}") from None


def save_family(family: AnyFamily, path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Write a family file atomically; refuses to replace an existing file unless told."""
    p = Path(path)
    if p.exists() and not overwrite:
        raise FamilyError(f"{p} already exists (pass --force to replace it)")
    try:
        atomic_write_text(p, json.dumps(family_to_json(family)))
    except OSError as exc:
        raise FamilyError(f"cannot write family file {p}: {exc.strerror or exc}") from None
    return p
