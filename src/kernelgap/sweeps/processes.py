"""Processes by pid, as the pools' workers see their driver: whether it is gone (even as
a zombie, or with its pid reused) and how to die with a parent (Linux)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def set_parent_death_signal(sig: int | None = None) -> bool:
    """Have Linux send ``sig`` (default ``SIGKILL``) to this process when the thread that
    forked it exits.

    ``prctl(PR_SET_PDEATHSIG)`` through libc; the kernel delivers the signal while the
    parent exits, when it reparents the parent's children, so it does not wait for
    the parent to be reaped.  Returns ``False`` (and does nothing) off Linux or when
    libc or ``prctl`` is unavailable.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        sig = signal.SIGKILL if sig is None else sig
        ok = (
            libc.prctl(
                ctypes.c_int(_PR_SET_PDEATHSIG),
                ctypes.c_ulong(int(sig)),
                ctypes.c_ulong(0),
                ctypes.c_ulong(0),
                ctypes.c_ulong(0),
            )
            == 0
        )
    except (OSError, AttributeError):
        return False
    return ok


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
    """Whether process ``driver`` (which started at ``started``, if known) has exited.

    A zombie counts as gone: a process that has exited but that its parent has not
    reaped still answers ``os.kill(pid, 0)``, so where ``/proc`` exists its state is
    read instead (``Z`` or ``X``: exited), and its start time tells a reused pid.
    Without ``/proc``, ``os.kill(pid, 0)`` is the check, which cannot see zombies.
    """
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
