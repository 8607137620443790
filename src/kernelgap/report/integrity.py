"""What a sweep folder's files must be, checked from the files alone (no torch): every
planned run has a record, every record's checkpoint has the recorded size and sha256, every
family copy hashes to its name (docs/formats.md, "Verifying a results folder").

Each check returns problems as lines ``<path>: <what is wrong>`` (relative to the folder),
never raises on a damaged file, and changes nothing: the sweep runner sets aside and redoes
what they name, ``report`` refuses, ``kernelgap check`` prints them all.  Step files carry
their own checksum (:func:`sealed`); the shapes of ``sweep.json``, a run record and its
checkpoint are models (:class:`SweepMeta`, :class:`RunRecord`, :class:`CheckpointRef`).
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field

from ..io import DIGEST_KEY, config_hash, digest_problem, read_json, record_digest
from ..validation import JsonInt, JsonNumber, Record, Says, invalid, problem

#: The files that make a folder a sweep folder.
MARKS = ("sweep.json", "sweep.toml")
#: The key of ``sweep.json`` that holds the sha256 of the ``sweep.toml`` beside it.
TOML_KEY = "toml_sha256"
#: The key a sealed list payload is kept under (:func:`sealed`).
ROWS_KEY = "rows"

#: A sha256 as ``sweep.json`` and records write it.
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$"), Says("{value} is not a sha256")]
#: A run id of ``sweep.json``: a file name in ``runs/`` (no path, no dot first).
RunName = Annotated[str, Field(pattern=r"^[0-9A-Za-z_-]{1,64}$"), Says("{value} is not a run id")]


class SweepMeta(Record):
    """``sweep.json``, a sweep folder's plan: label, fingerprint, run ids, family files (as
    written → sha256), the sha256 of ``sweep.toml`` and its own checksum (the last two absent
    in older folders, never null); no other key."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    fingerprint: str
    runs: list[RunName]
    family_files: dict[str, Sha256] = {}
    toml_sha256: Sha256 = None
    record_sha256: str = None


class _Trained(Record):
    max_error: JsonNumber | None


class RunRecord(Record):
    """The keys every run record ``runs/<id>.json`` has; others are let through."""

    id: str
    config: dict[str, Any]
    status: str
    steps: JsonInt
    train: _Trained


def _inside(file: str) -> str:
    if not file or os.path.isabs(file) or ".." in Path(file).parts:
        raise invalid(f"{file!r} is not a path inside the folder")
    return file


class CheckpointRef(Record):
    """A record's ``checkpoint``: its file (inside the folder), the run's member index, and the
    file's sha256 and size (absent in older records: the file need only exist)."""

    file: Annotated[str, AfterValidator(_inside)]
    member: JsonInt | None = None
    sha256: Sha256 | None = None
    bytes: JsonInt | None = None


class _Checkpointed(Record):
    checkpoint: CheckpointRef


def digest(path: Path) -> tuple[str, int] | None:
    """``(sha256, size)`` of a regular file, read in chunks; ``None`` when it cannot be read."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest(), os.fstat(fh.fileno()).st_size
    except OSError:
        return None


def missing_what(path: Path) -> str:
    """Why ``path`` cannot be read as a file: a folder, or missing."""
    return "is a folder, not a file" if path.is_dir() else "is missing"


def _fault(data, model: type[Record]) -> str | None:
    """Why parsed JSON (``None``: not JSON) is not a ``model``, naming the key that breaks it."""
    if data is None:
        return "is corrupted (not valid JSON)"
    why = problem(model, data)
    return f"is corrupted ({why})" if why else None


def record_fault(record, run_id: str) -> str | None:
    """Why a parsed file is not a complete, unaltered run record of ``run_id`` (``None``: it is)."""
    why = _fault(record, RunRecord)
    if why is None and record["id"] != run_id:
        why = f"is corrupted (its id is {record['id'][:20]!r})"
    return why or digest_problem(record)


def checkpoint_path(folder: Path, record: dict) -> Path | None:
    """The checkpoint file a record names, when it is a valid :class:`CheckpointRef`."""
    where = record.get("checkpoint")
    return None if where is None or problem(_Checkpointed, record) else folder / where["file"]


def checkpoint_problem(folder: Path, record: dict, cache: dict | None = None) -> str | None:
    """Why the checkpoint a valid record names is not the one it was written with (``cache``:
    digests by path, so a stack's members hash their file once)."""
    where = record.get("checkpoint")
    if where is None:
        return None
    if why := problem(_Checkpointed, record):
        return f"names no valid checkpoint file ({why})"
    file, sha, size = where["file"], where.get("sha256"), where.get("bytes")
    path = folder / file
    cache = {} if cache is None else cache
    if path not in cache:
        cache[path] = digest(path)
    got = cache[path]
    if got is None:
        return f"names checkpoint {file}, which {missing_what(path)}"
    if sha is None and size is None:
        return None
    if size != got[1]:
        return f"names checkpoint {file} of {size} bytes; it has {got[1]} (truncated or altered)"
    if sha != got[0]:
        return f"names checkpoint {file} with sha256 {str(sha)[:12]}…; it has {got[0][:12]}… (altered)"
    return None


def read_sweep_meta(folder: Path) -> tuple[SweepMeta | None, str | None]:
    """``(sweep.json, None)``, or ``(None, why it is not a sound sweep description)``."""
    path = folder / "sweep.json"
    if not path.is_file():
        return None, missing_what(path)
    data = read_json(path)
    why = _fault(data, SweepMeta)
    if why is None and data["fingerprint"] != config_hash(sorted(data["runs"])):
        why = "was altered (its fingerprint is not the hash of its run ids)"
    why = why or digest_problem(data)
    return (None, why) if why else (SweepMeta.model_validate(data), None)


def family_problems(folder: Path, meta: SweepMeta) -> list[str]:
    """Every family copy ``families/<sha256>.json`` that is missing or does not hash to its name."""
    out = []
    for written, sha in sorted(meta.family_files.items()):
        copy = f"families/{sha}.json"
        got = digest(folder / copy)
        why = missing_what(folder / copy) if got is None else f"was altered (sha256 {got[0][:12]}…)"
        out += [f"{copy}: the copy of family file {written!r} {why}"] if got is None or got[0] != sha else []
    return out


def toml_problem(folder: Path, meta: SweepMeta) -> str | None:
    """Why ``sweep.toml`` is not the sweep file the folder was made with (or, unrecorded, not TOML)."""
    path = folder / "sweep.toml"
    got = digest(path)
    if got is None:
        return missing_what(path)
    if meta.toml_sha256 is not None:
        return None if got[0] == meta.toml_sha256 else f"was altered (its sha256 is not the {TOML_KEY} of sweep.json)"
    try:
        tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, ValueError):
        return "is corrupted (not valid TOML)"
    return None


def foreign_records(folder: Path, meta: SweepMeta) -> list[str]:
    """The ``runs/*.json`` of no run ``sweep.json`` plans (never counted)."""
    planned = set(meta.runs)
    runs = folder / "runs"
    return sorted(p.name for p in runs.glob("*.json") if p.stem not in planned) if runs.is_dir() else []


def sweep_file_problems(folder: Path, meta: SweepMeta) -> list[str]:
    """The problems of ``sweep.toml`` and of records of no planned run."""
    why = toml_problem(folder, meta)
    lines = [f"sweep.toml: {why}"] if why else []
    foreign = foreign_records(folder, meta)
    return lines + [f"runs/{name}: is not a run of this sweep (sweep.json plans no such run)" for name in foreign]


def sealed(payload) -> dict:
    """A step's payload with its own checksum, as a run record carries it (a list under :data:`ROWS_KEY`)."""
    body = payload if isinstance(payload, dict) else {ROWS_KEY: payload}
    return {**body, DIGEST_KEY: record_digest(body)}


def unsealed(data):
    """The payload of a file written by :func:`sealed` (one written before checksums: as it is)."""
    if not (isinstance(data, dict) and DIGEST_KEY in data):
        return data
    body = {k: v for k, v in data.items() if k != DIGEST_KEY}
    return body[ROWS_KEY] if set(body) == {ROWS_KEY} and isinstance(body[ROWS_KEY], list) else body


def sealed_problem(path: Path, required: bool = True) -> str | None:
    """Why ``path`` is not a file :func:`sealed` wrote (``required=False``: JSON without one passes)."""
    if not path.is_file():
        return missing_what(path)
    data = read_json(path)
    if data is None:
        return "is corrupted (not valid JSON)"
    if not (isinstance(data, dict) and DIGEST_KEY in data):
        return f"was altered (it has no {DIGEST_KEY})" if required else None
    return digest_problem(data)


def run_problem(
    folder: Path, run_id: str, valid: Callable[[dict, str], bool] | None = None, cache: dict | None = None
) -> str | None:
    """Why a planned run's record or checkpoint is missing or damaged (``valid``: a further check)."""
    path = folder / "runs" / f"{run_id}.json"
    if not path.is_file():
        return missing_what(path)
    record = read_json(path)
    why = record_fault(record, run_id)
    if why is None and valid is not None and not valid(record, run_id):
        why = "is corrupted (its config does not hash to its id)"
    return why or checkpoint_problem(folder, record, cache)


def sweep_folders(root: Path) -> list[Path]:
    """The sweep folders of a results folder: itself, or every folder below it, holding one of :data:`MARKS`."""
    if any((root / name).exists() for name in MARKS):
        return [root]
    return sorted({p.parent for name in MARKS for p in root.rglob(name)}) if root.is_dir() else []


def folder_problems(root: Path, valid: Callable[[dict, str], bool] | None = None) -> list[str]:
    """Every problem of every sweep folder under ``root``, paths relative to ``root``."""
    out = []
    for folder in sweep_folders(root):
        prefix = "" if folder == root else f"{folder.relative_to(root)}/"
        meta, why = read_sweep_meta(folder)
        if meta is None:
            out.append(f"{prefix}sweep.json: {why}")
            continue
        cache: dict = {}
        runs = [(i, run_problem(folder, i, valid, cache)) for i in meta.runs]
        lines = sweep_file_problems(folder, meta) + family_problems(folder, meta)
        out += [prefix + line for line in lines + [f"runs/{i}.json: {why}" for i, why in runs if why]]
    return out


def one_line(problems: list[str], shown: int = 3) -> str:
    """The first ``shown`` problems on one line, and how many more there are."""
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return " ".join("; ".join(problems[:shown]).split()) + more
