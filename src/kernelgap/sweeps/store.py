"""A sweep's results folder: never overwritten, resumable, shareable (its layout:
docs/formats.md, "Results folders").  Each finished run is written atomically, a damaged
result is renamed aside (``.corrupt-<ns>``) and redone, a run in progress is claimed by a
``flock`` the kernel frees when its holder dies.

A folder made for one sweep refuses any other (a different run set); a non-empty folder
that is not a sweep folder is refused too, and so is a folder holding a symbolic link or a
lock file that is not a plain file (:mod:`kernelgap.folders`).
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..folders import open_in_place, refuse_links
from ..io import atomic_write_bytes, atomic_write_json, atomic_write_text, read_json
from ..report.integrity import (
    DIGEST_KEY,
    TOML_KEY,
    SweepMeta,
    checkpoint_path,
    checkpoint_problem,
    digest,
    family_problems,
    read_sweep_meta,
    record_digest,
    record_fault,
    run_problem,
    toml_problem,
)
from ..training import FamilySpec, RunConfig, config_hash, run_identity
from .config import flatten


@dataclass
class Claim:
    """An exclusive ``flock`` on ``locks/<id>.lock`` held by this process."""

    run_id: str
    path: Path
    fd: int


class ResultsDir:
    """The folder of one sweep (module docstring)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.locks_dir = self.root / "locks"
        self.families_dir = self.root / "families"

    def open_for(
        self, name: str, config_text: str, run_ids: list[str], family_files: dict[str, FamilySpec] | None = None
    ) -> None:
        """Create the folder for this sweep, or check that it is its folder, and copy in the
        family files it names (:meth:`pin_families`).  Any folder problem is one line,
        raised here, before any training starts."""
        try:
            if self.root.exists() and not self.root.is_dir():
                raise ConfigError(f"results folder {self.root} is a file, not a folder; choose another --out")
            refuse_links(self.root, ConfigError)  # before anything is written: no write leaves the folder
            self._open_for(name, config_text, run_ids, family_files or {})
            probe = self.runs_dir / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise ConfigError(
                f"cannot write to results folder {self.root}: {exc.strerror or exc} ({exc.filename or self.root})"
            ) from None

    def _open_for(self, name: str, config_text: str, run_ids: list[str], family_files: dict[str, FamilySpec]) -> None:
        shas = {written: spec.sha256 for written, spec in family_files.items()}
        runs = sorted(run_ids)
        meta = {"name": name, "fingerprint": config_hash(runs), "runs": runs, "family_files": shas}
        meta[TOML_KEY] = hashlib.sha256(config_text.encode()).hexdigest()
        meta[DIGEST_KEY] = record_digest(meta)
        meta_path = self.root / "sweep.json"
        if (
            self.root.exists()
            and not meta_path.exists()
            and any(not _opening_file(p.name) for p in self.root.iterdir())
        ):
            raise ConfigError(f"{self.root} exists and is not a kernelgap sweep folder; choose another --out")
        if meta_path.exists():
            self._check_family_files(self.meta(), family_files)
        else:
            self.pin_families(family_files)  # before sweep.json: a folder's sweep.json names only copies it holds
            self.root.mkdir(parents=True, exist_ok=True)
            _create_exclusive_json(meta_path, meta)  # of sweeps opening one new folder, one wins
        stored = self.meta()
        if stored.fingerprint != meta["fingerprint"]:
            raise ConfigError(
                f"{self.root} holds a different sweep ({stored.name!r}, {len(stored.runs)} runs); use a new --out folder"
            )
        self._restore_toml(stored, config_text, meta[TOML_KEY])
        self.runs_dir.mkdir(exist_ok=True)
        self.locks_dir.mkdir(exist_ok=True)

    def _restore_toml(self, stored: SweepMeta, config_text: str, sha: str) -> None:
        """Write a missing or damaged ``sweep.toml`` (a damaged one set aside) from
        ``config_text`` (sha256 ``sha``), when that is the file the folder was made with
        (or the folder records none); else refused."""
        path = self.root / "sweep.toml"
        why = toml_problem(self.root, stored)
        if why is None:
            return
        if stored.toml_sha256 not in (None, sha):
            raise ConfigError(f"{path} {why}; restore it, or run the sweep file the folder was made with")
        if path.exists():
            set_aside_file(path)
        atomic_write_text(path, config_text)

    def _check_family_files(self, stored: SweepMeta, family_files: dict[str, FamilySpec]) -> None:
        """A family file changed since the sweep began is refused by name."""
        for written, spec in family_files.items():
            before = stored.family_files.get(written)
            if before is not None and before != spec.sha256:
                raise ConfigError(
                    f"family file {spec.file} changed since the sweep in {self.root} began: "
                    f"sha256 {before[:12]}… → {spec.sha256[:12]}…; use a new --out"
                )

    def pin_families(self, family_files: dict[str, FamilySpec]) -> None:
        """Copy each source file to ``families/<sha256>.json`` (refused if it changed since read)."""
        for spec in family_files.values():
            copy = self.families_dir / f"{spec.sha256}.json"
            if copy.is_file():
                continue
            raw = Path(spec.file).read_bytes()
            if hashlib.sha256(raw).hexdigest() != spec.sha256:
                raise ConfigError(f"family file {spec.file} changed while the sweep was being set up; run it again")
            atomic_write_bytes(copy, raw, self.root)

    def family_copies(self) -> dict[str, str]:
        """Name as written in the sweep file → the folder's copy (refused if missing or altered)."""
        meta = self.meta()
        if damaged := family_problems(self.root, meta):
            raise ConfigError(f"{self.root}/{damaged[0]}; restore it or use a new --out folder")
        return {written: str(self.families_dir / f"{sha}.json") for written, sha in meta.family_files.items()}

    def remove_if_unused(self) -> None:
        """Remove the folder when it holds no result and no claim (a refused sweep leaves nothing)."""
        if not self.root.is_dir():
            return
        if any(self.runs_dir.glob("*.json*")) or (self.locks_dir.is_dir() and any(self.locks_dir.iterdir())):
            return
        shutil.rmtree(self.root, ignore_errors=True)

    def meta(self) -> SweepMeta:
        """``sweep.json``, checked (:func:`~kernelgap.report.integrity.read_sweep_meta`)."""
        path = self.root / "sweep.json"
        if not path.exists():
            raise ConfigError(f"{self.root} is not a kernelgap sweep folder (no sweep.json)")
        meta, why = read_sweep_meta(self.root)
        if why:
            raise ConfigError(f"{path} {why}; restore it or use a new --out folder")
        return meta

    def result_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.json"

    def read(self, run_id: str) -> dict | None:
        """The valid record of a run, else ``None`` (its checkpoint is checked by :meth:`damaged`)."""
        record = read_json(self.result_path(run_id))  # None: gone, a folder, not JSON …
        return record if is_valid_record(record, run_id) else None

    def damaged(self, run_ids: list[str]) -> dict[str, str]:
        """``{run id: "runs/<id>.json <why>"}`` of every result present but damaged."""
        cache: dict = {}
        present = [i for i in run_ids if self.result_path(i).exists()]
        found = {i: run_problem(self.root, i, is_valid_record, cache) for i in present}
        return {i: f"runs/{i}.json {why}" for i, why in found.items() if why}

    def set_aside(self, run_id: str) -> Path:
        """Rename a damaged result aside so it is redone, with its checkpoint where that is altered."""
        record, stamp = self.read(run_id), time.time_ns()
        weights = checkpoint_path(self.root, record) if record is not None else None
        if weights is not None and weights.exists() and checkpoint_problem(self.root, record):
            set_aside_file(weights, stamp)
        return set_aside_file(self.result_path(run_id), stamp)

    def write(self, record: dict) -> None:
        record = {**record, DIGEST_KEY: record_digest(record)}
        try:
            atomic_write_json(self.result_path(record["id"]), record, self.root)
        except OSError as exc:  # disk full, folder removed …: a clear line, not a traceback
            raise ConfigError(f"cannot write result {self.result_path(record['id'])}: {exc.strerror or exc}") from None

    def write_checkpoint(self, relative: str, data: bytes) -> str:
        """A stack's weights, atomically; returns the file (relative) that holds them.  Records
        name a checkpoint by its sha256, so other bytes (``torch.save`` writes a per-save id)
        go beside it as ``<stack>-<sha256 prefix>.pt``, never over it."""
        path = self.root / relative
        sha = hashlib.sha256(data).hexdigest()
        held = digest(path)
        if held == (sha, len(data)):
            return relative
        if held is not None:
            path = path.with_name(f"{path.stem}-{sha[:16]}{path.suffix}")
            relative = path.relative_to(self.root).as_posix()
        try:
            atomic_write_bytes(path, data, self.root)
        except OSError as exc:
            raise ConfigError(f"cannot write checkpoint {path}: {exc.strerror or exc}") from None
        return relative

    def records(self, run_ids: list[str]) -> list[dict]:
        return [r for r in (self.read(i) for i in run_ids) if r is not None]

    def claim(self, run_id: str) -> Claim | None:
        """Take the run's lock without waiting; ``None`` if held or already finished."""
        path = self.locks_dir / f"{run_id}.lock"
        fd = open_in_place(path, ConfigError)  # never through a link, nor a file with another name
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if self.read(run_id) is not None:  # finished by someone while we looked: our lock file goes
            self.release(Claim(run_id, path, fd), finished=True)
            return None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode())
        return Claim(run_id, path, fd)

    def release(self, claim: Claim, finished: bool) -> None:
        """Drop a claim; the lock file goes once the result is written."""
        if finished:
            claim.path.unlink(missing_ok=True)
        fcntl.flock(claim.fd, fcntl.LOCK_UN)
        os.close(claim.fd)

    def write_csv(self, run_ids: list[str]) -> Path:
        """``results.csv``: one row per finished run, flattened config and metrics."""
        rows = [flatten(r) for r in self.records(run_ids)]  # {"config.model.rank": 16, "train.max_error": 0.07, …}
        columns = sorted({k for row in rows for k in row}, key=_column_order)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
        return atomic_write_text(self.root / "results.csv", buf.getvalue(), self.root)


def set_aside_file(path: Path, stamp: int | None = None) -> Path:
    """Rename one damaged file out of the way (``<name>.corrupt-<ns>``): nothing is deleted."""
    aside = path.with_name(f"{path.name}.corrupt-{stamp or time.time_ns()}")
    try:
        os.replace(path, aside)
    except OSError as exc:
        raise ConfigError(
            f"cannot set aside the damaged file {path}: {exc.strerror or exc}; move it away by hand"
        ) from None
    return aside


def is_valid_record(record, run_id: str) -> bool:
    """Whether a parsed result file is a complete, unaltered record whose config hashes to its id
    (a config too damaged to hash: not)."""
    if record_fault(record, run_id) is not None:
        return False
    try:
        return config_hash(run_identity(record["config"])) == run_id
    except (TypeError, ValueError, AttributeError, RecursionError):
        return False


def _column_order(column: str) -> tuple:
    first = ("id", "status", "seed", "steps", "wall_time_s")
    return (first.index(column) if column in first else len(first), column)


def _opening_file(name: str) -> bool:
    """A file a sweep writes while it opens a new folder (another sweep may be opening it)."""
    # ``..sweep.json.<pid>.tmp.…``: the atomic write's own temp file of sweep.json's temp file
    return name in ("sweep.toml", "families") or name.startswith((".sweep.json.", ".sweep.toml.", "..sweep.json."))


def _create_exclusive_json(path: Path, obj) -> None:
    """Write ``path`` only if absent (write a temp file, then ``link`` it in place)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    atomic_write_json(tmp, obj, path.parent)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def run_ids(runs: list[RunConfig]) -> list[str]:
    return [r.run_id() for r in runs]
