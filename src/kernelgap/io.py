"""Atomic file writes (a reader never sees a half-written file) and the one reader of input
files: every JSON or TOML file kernelgap reads goes through :func:`read_input` and
:func:`load_json` / :func:`load_toml` / :func:`read_json` (docs/formats.md, "Reading files")."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import tomllib
from pathlib import Path

from .errors import KernelgapError
from .folders import refuse_link_at


def atomic_write_text(path: str | os.PathLike, text: str, within: str | os.PathLike | None = None) -> Path:
    """:func:`atomic_write_bytes` of ``text``."""
    return atomic_write_bytes(path, text.encode(), within)


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


def atomic_write_bytes(path: str | os.PathLike, data: bytes, within: str | os.PathLike | None = None) -> Path:
    """Write ``data`` to ``path`` via a temporary file, fsync and rename: the file gets the mode a
    plain ``open`` would give it (``0o666`` less the umask), and the rename replaces the name
    alone (a hard link elsewhere keeps its content).  With ``within`` (the results folder
    ``path`` lies in), a symbolic link on the way is refused
    (:func:`~kernelgap.folders.refuse_link_at`), so no write leaves the folder."""
    p = Path(path)
    if within is not None:
        refuse_link_at(within, p)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
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


def atomic_write_json(path: str | os.PathLike, obj, within: str | os.PathLike | None = None) -> Path:
    """Strict JSON (a NaN or an infinity is a bug: it raises instead of writing ``NaN``)."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n", within)


#: Largest input file read (family, sweep, profile, record, summary, module file): 1 GiB.
#: Checked from the file's size before a byte is read, so a sparse 1 TB file is refused at
#: once; the largest family file a registered family writes is a few MiB.
MAX_INPUT_BYTES = 1 << 30


def read_input(path: str | os.PathLike, what: str, error: type[Exception]) -> bytes:
    """The bytes of a file the user named (``what``: "family file", "module file", …); a
    missing file, a folder or other non-regular file, one larger than
    :data:`MAX_INPUT_BYTES` or an unreadable file is one line of ``error``."""
    p = Path(path)
    try:
        st = p.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise error(f"{what} {p} does not exist") from None
    except (OSError, ValueError) as exc:  # permission, a loop of links, a NUL in the name
        raise error(f"{what} {p} cannot be read: {_why(exc)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{what} {p} is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {p} is not a regular file")
    if st.st_size > MAX_INPUT_BYTES:
        raise error(f"{what} {p} is too large ({st.st_size:,} bytes; the most an input may be is {MAX_INPUT_BYTES:,})")
    try:
        with open(p, "rb") as fh:
            data = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise error(f"{what} {p} cannot be read: {_why(exc)}") from None
    except MemoryError:
        raise error(f"{what} {p} cannot be read: not enough memory") from None
    if len(data) > MAX_INPUT_BYTES:  # it grew while we looked
        raise error(f"{what} {p} is too large (more than {MAX_INPUT_BYTES:,} bytes)")
    return data


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def parse_json(raw: bytes | str, name: str, error: type[Exception], toml: bool = False):
    """``raw`` (a file's bytes, or a flag's text: ``name`` is "--kwargs") parsed as JSON (or
    TOML); every failure is one line of ``error`` starting with ``name``: not UTF-8, a syntax
    error (with its line), nesting too deep for the parser, an integer past Python's
    int-string digit limit, or not enough memory."""
    kind = "TOML" if toml else "JSON"
    bad = f"{name}: not valid {kind}" if toml else f"{name} is not valid {kind}"
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return tomllib.loads(text) if toml else json.loads(text)
    except UnicodeDecodeError as exc:
        raise error(f"{bad} (not UTF-8 text: byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise error(f"{bad} ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{bad} ({exc})") from None
    except RecursionError:
        raise error(f"{bad} (nested too deeply)") from None
    except ValueError as exc:  # an integer past Python's int-string digit limit
        detail = str(exc).split(";")[0]
        raise error(f"{bad} ({detail})" if toml else f"{name} is not usable {kind} ({detail})") from None
    except MemoryError:
        raise error(f"{name} is too large to parse in this machine's memory") from None


def load_json(path: str | os.PathLike, what: str, error: type[Exception]):
    """The parsed JSON file ``path`` (``what``: "family file", "run record", …); every problem
    (:func:`read_input`, :func:`parse_json`) is one line of ``error``."""
    return parse_json(read_input(path, what, error), f"{what} {path}", error)


def load_toml(path: str | os.PathLike, what: str, error: type[Exception]) -> dict:
    """:func:`load_json` for a TOML file (a sweep file, ``profile.toml``)."""
    return parse_json(read_input(path, what, error), f"{what} {path}", error, toml=True)


def read_json(path: str | os.PathLike):
    """The parsed JSON at ``path``, or ``None`` when :func:`load_json` would refuse it."""
    try:
        return load_json(path, "file", KernelgapError)
    except KernelgapError:
        return None


def plain_name(name: str, what: str, error: type[Exception]) -> str:
    """``name`` read from a file and used as one folder or file name under an output folder
    (an experiment of ``profile.toml``, a probe): a single path component, so that it cannot
    lead out of that folder.  Empty, ``.``, ``..``, a slash or backslash, a NUL or more than
    255 bytes is one line of ``error``."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or any(c in name for c in "/\\\0")
        or len(name.encode("utf-8", "surrogatepass")) > 255
    ):
        raise error(f"{what} {name!r} is not a plain name (one folder name: no '/', '..' or '.')")
    return name


def confined(folder: str | os.PathLike, name: str, what: str, error: type[Exception]) -> Path:
    """``folder / name`` for a relative ``name`` read from a file of ``folder`` (a sub-folder
    named in ``probe.json``), refused with one line of ``error`` when it is absolute or
    leads out of ``folder`` (through ``..`` or a symbolic link)."""
    base = Path(folder)
    if not isinstance(name, str) or "\0" in name or Path(name).is_absolute():
        raise error(f"{what} {name!r} must be a path relative to {base}")
    path = base / name
    root = base.resolve()
    if not path.resolve().is_relative_to(root):
        raise error(f"{what} {name!r} leads out of {base}")
    return path


#: The key of a run record's own checksum (:func:`record_digest`).
DIGEST_KEY = "record_sha256"


def config_hash(obj) -> str:
    """A run id (of a run's identity) or a sweep's fingerprint (of its sorted run ids): the
    first 16 hex digits of the sha256 of ``obj``'s canonical JSON."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def record_digest(record: dict) -> str:
    """A record's own checksum (``record["record_sha256"]``, also in ``sweep.json``): the
    sha256 of its canonical JSON without that key, so any edit of a written record shows."""
    rest = {k: v for k, v in record.items() if k != DIGEST_KEY}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def digest_problem(record: dict) -> str | None:
    """Why a record's content is not what it was written with (``None``: it is): its
    ``record_sha256`` does not match, or it lost it.  Records and their checkpoints' sha256
    were first written together, so a record that names its checkpoint's sha256 without a
    checksum of its own lost it (a renamed key); one with neither was written before both."""
    if DIGEST_KEY not in record:
        where = record.get("checkpoint")
        if isinstance(where, dict) and "sha256" in where:
            return f"was altered (it names its checkpoint's sha256 but has no {DIGEST_KEY})"
        return None
    if record[DIGEST_KEY] != record_digest(record):
        return f"was altered (its content does not match its {DIGEST_KEY})"
    return None


def read_run_records(sweep_dir: str | os.PathLike) -> list[dict]:
    """Every readable run record ``runs/<id>.json`` of a sweep folder, in file order; damaged
    ones (not JSON, not a record, altered) are skipped: the sweep runner redoes them."""
    records = (read_json(p) for p in sorted((Path(sweep_dir) / "runs").glob("*.json")))
    return [r for r in records if isinstance(r, dict) and "config" in r and "id" in r and digest_problem(r) is None]
