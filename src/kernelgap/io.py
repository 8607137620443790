"""Atomic file writes: a reader never sees a half-written file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .errors import KernelgapError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file, fsync and rename.

    The file gets the mode a plain ``open`` would give it (``0o666`` less the
    umask), not the private mode of the temporary file.
    """
    return atomic_write_bytes(path, text.encode())


def write_page(path: str | os.PathLike, text: str) -> Path:
    """Write a Markdown page (``results``, ``compare --out``) atomically; refuse to replace a
    file that is not Markdown (a ``summary.json``, a record), so a mistyped ``--out`` loses no
    result.  A user error names the path."""
    p = Path(path)
    if p.exists() and (not p.is_file() or p.suffix.lower() != ".md"):
        raise KernelgapError(f"--out {p} exists and is not a Markdown (.md) file; it is left as it is")
    try:
        return atomic_write_text(p, text)
    except OSError as exc:
        raise KernelgapError(f"cannot write {p}: {exc.strerror or exc}") from None


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """:func:`atomic_write_text` for bytes."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return p


def atomic_write_json(path: str | os.PathLike, obj) -> Path:
    """Strict JSON (a NaN or an infinity is a bug: it raises instead of writing ``NaN``)."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")


def read_input(path: str | os.PathLike, what: str, error: type[Exception]) -> bytes:
    """The bytes of a file the user named (``what``: "family file", "module file", …); a
    missing file, a folder or an unreadable file is one line of ``error``."""
    p = Path(path)
    if p.is_dir():
        raise error(f"{what} {p} is a folder, not a file")
    if not p.is_file():
        raise error(f"{what} {p} does not exist")
    try:
        return p.read_bytes()
    except OSError as exc:
        raise error(f"{what} {p} cannot be read: {exc.strerror or exc}") from None


def read_json(path: str | os.PathLike):
    """The parsed JSON at ``path``, or ``None`` when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON, or a too-long integer
        return None


def read_run_records(sweep_dir: str | os.PathLike) -> list[dict]:
    """Every readable run record ``runs/<id>.json`` of a sweep folder, in file order.

    Damaged files are skipped here (the sweep runner sets them aside and redoes them).
    """
    records = (read_json(p) for p in sorted((Path(sweep_dir) / "runs").glob("*.json")))
    return [r for r in records if isinstance(r, dict) and "config" in r and "id" in r]
