"""Processes by pid, as the pools' workers see their driver: whether it is gone (even as
a zombie, or with its pid reused) and how to die with a parent (Linux)."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> None:
    """Have Linux send ``SIGKILL`` to this process when the thread that forked it exits
    (``prctl(PR_SET_PDEATHSIG)``, delivered whether or not the parent is reaped); exit now
    if the parent died before that was armed.  Off Linux, or without ``prctl``: nothing."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        args = [ctypes.c_ulong(v) for v in (signal.SIGKILL, 0, 0, 0)]
        armed = ctypes.CDLL(None, use_errno=True).prctl(ctypes.c_int(_PR_SET_PDEATHSIG), *args) == 0
    except (OSError, AttributeError):
        return
    if armed and os.getppid() != parent:
        os._exit(1)


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or ``None``
    when ``/proc`` cannot say; raises :class:`FileNotFoundError` for a pid that does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            raise
        return None
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields if len(fields) > 19 else None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``None`` without ``/proc``):
    with the pid, it names one process even after the pid is reused."""
    try:
        fields = _proc_stat(pid)
    except FileNotFoundError:
        return None
    return int(fields[19]) if fields else None


def driver_gone(driver: int, started: int | None = None) -> bool:
    """Whether process ``driver`` (started at ``started``, if known) has exited.  A zombie
    counts as gone, so ``/proc`` state ``Z``/``X`` or another start time (a reused pid) is
    read where it exists; else ``os.kill(pid, 0)``, which cannot see zombies."""
    try:
        fields = _proc_stat(driver)
    except FileNotFoundError:
        return True
    if fields is not None:
        return fields[0] in ("Z", "X") or (started is not None and int(fields[19]) != started)
    try:
        os.kill(driver, 0)
    except (ProcessLookupError, PermissionError):  # gone, or the pid reused by another user
        return True
    return False


def kill(process) -> None:
    """Kill a process, whatever state it is in (already gone, never started)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        process.kill()


def exit_now(status: int) -> None:
    """Kill this process's children and end it with ``status`` at once."""
    for child in multiprocessing.active_children():
        kill(child)
    os._exit(status)
