"""Results folders: what kind of result a folder holds, and writing inside one without
following a link.

A results folder is written only through real folders and files of its own: a symbolic link
below it would let a write land outside it, so every command refuses one, in one line naming
it, before it writes anything (:func:`refuse_links`).  Files are replaced atomically
(:func:`kernelgap.io.atomic_write_bytes`); the one file written in place, a sweep's lock
file, is opened without following a link and must be a regular file with no other name
(:func:`open_in_place`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from .errors import KernelgapError

#: The file that marks each kind of results folder, first match wins (a reproduction's
#: experiment folders are sweep folders, a probe holds sweep folders too).
MARKERS = (("reproduction", "reproduce.json"), ("probe", "probe.json"), ("sweep", "sweep.json"))

#: Longest file name and path the system takes (Linux's NAME_MAX, PATH_MAX less the NUL).
NAME_MAX, PATH_MAX = 255, 4095

_LINK_HINT = "kernelgap writes no result through a link; replace it with a real one or choose another --out"


def check_out(path: str | os.PathLike, flag: str = "--out", error: type[Exception] = KernelgapError) -> Path:
    """``path`` given as ``flag``, refused in one line when the system could not even look it up."""
    p = Path(path)
    raw = os.fsencode(p)
    if b"\0" in raw:
        raise error(f"{flag} {p!s:.80} holds a NUL character")
    long = next((part for part in raw.split(b"/") if len(part) > NAME_MAX), None)
    if long is not None:
        raise error(f"{flag}: the name {long[:40].decode(errors='replace')}… is {len(long)} bytes (at most {NAME_MAX})")
    if len(raw) > PATH_MAX:
        raise error(f"{flag}: the path is {len(raw)} bytes long (at most {PATH_MAX})")
    return p


def result_kind(folder: str | os.PathLike) -> str | None:
    """What ``folder`` holds: ``"reproduction"``, ``"probe"`` or ``"sweep"`` (by the file each
    writes first, :data:`MARKERS`), ``"bound-curve"`` (a ``bound-curve-*.json``), else ``None``."""
    p = Path(folder)
    for kind, marker in MARKERS:
        if os.path.lexists(p / marker):
            return kind
    try:
        return "bound-curve" if p.is_dir() and any(p.glob("bound-curve-*.json")) else None
    except OSError:
        return None


def refuse_other_result(
    folder: str | os.PathLike, kind: str, inside: tuple[str, ...] = (), error: type[Exception] = KernelgapError
) -> None:
    """Refuse ``--out folder`` for a result of ``kind`` when it holds a result of another kind,
    or lies inside a folder of one of the kinds ``inside`` (a sweep's ``runs/``)."""
    p = check_out(folder, error=error)
    found = result_kind(p)
    if found not in (None, kind):
        raise error(f"--out {p} holds a {found} result, not a {kind}; it is left as it is: choose another --out")
    for above in p.absolute().parents:
        found = next((k for k, marker in MARKERS if os.path.lexists(above / marker)), None)
        if found in inside:
            raise error(f"--out {p} lies inside the {found} folder {above}; it is left as it is: choose another --out")


def refuse_links(root: str | os.PathLike, error: type[Exception] = KernelgapError) -> None:
    """The first problem :func:`link_problems` finds, as one line of ``error``."""
    for why in link_problems(root):
        raise error(why)


def link_problems(root: str | os.PathLike) -> Iterator[str]:
    """Each symbolic link below ``root`` (``root`` itself may be one: the user named it) and
    each lock file that is not a regular file of one name, as a line naming it.  A folder that
    cannot be listed is left to the write that needs it."""
    pending = [Path(root)]
    while pending:
        folder = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                yield f"{path} is a symbolic link; {_LINK_HINT}"
                continue
            why = in_place_problem(entry.stat(follow_symlinks=False)) if entry.name.endswith(".lock") else None
            if why:
                yield f"lock file {path} {why}; move it away and run again"
            elif entry.is_dir(follow_symlinks=False):
                pending.append(path)


def refuse_link_at(root: str | os.PathLike, path: str | os.PathLike, error: type[Exception] = KernelgapError) -> None:
    """``path`` (inside ``root``) refused when it, or a folder between ``root`` and it, is a
    symbolic link: checked again at each write, since a link may appear while a command runs."""
    root, p = Path(root), Path(path)
    for part in (p, *p.parents):
        if part == root or part in root.parents:
            return
        if part.is_symlink():
            raise error(f"{part} is a symbolic link; {_LINK_HINT}")


def in_place_problem(st: os.stat_result) -> str | None:
    """Why a file written in place (a lock file) must not be used (a hard link: writing it would
    change the other name's); ``None`` when it is fine."""
    if stat.S_ISDIR(st.st_mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_nlink > 1:
        return f"has {st.st_nlink - 1} other name(s) (a hard link)"
    return None


def open_in_place(path: str | os.PathLike, error: type[Exception] = KernelgapError) -> int:
    """A file descriptor of ``path`` opened for reading and writing, created when missing,
    never through a symbolic link; an unfit file is one line of ``error`` (:func:`in_place_problem`)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{p} is a symbolic link; {_LINK_HINT}") from None
        if exc.errno == errno.EISDIR:
            raise error(f"lock file {p} is a folder, not a file; move it away and run again") from None
        raise error(f"cannot open {p}: {exc.strerror or exc}") from None
    why = in_place_problem(os.fstat(fd))
    if why:
        os.close(fd)
        raise error(f"lock file {p} {why}; move it away and run again")
    return fd
