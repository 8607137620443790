"""Ctrl-C in the command line's process: whenever the user pressed it, the command ends with
one line and status 130, never 0 and never a traceback.

:func:`watch_interrupts` records every ``SIGINT``, so an interrupt some code turned into
another error, or swallowed, still ends as one; :func:`exit_on_interrupt` answers one that
comes while the process exits, where Python would print a traceback and keep status 0."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

_INTERRUPTED = threading.Event()


def watch_interrupts(console: bool = True) -> None:
    """From now on, in the main thread, a ``SIGINT`` is recorded and raises
    ``KeyboardInterrupt``; another handler, or a process that is no ``console``, is left alone."""
    _INTERRUPTED.clear()
    if not console or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return

    def answer(signum, frame) -> None:
        _INTERRUPTED.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, answer)


def interrupted() -> bool:
    """Whether a ``SIGINT`` came since :func:`watch_interrupts`."""
    return _INTERRUPTED.is_set()


def settle_interrupt(code, console: bool):
    """The command's exit status once it is done: after a ``SIGINT`` (or with 130), one line
    and 130 (:func:`~kernelgap.sweeps.executors.end_interrupted`); else ``code``, a ``console``
    answering a later ``SIGINT`` (:func:`exit_on_interrupt`)."""
    from .executors import end_interrupted

    if code == 130 or interrupted():
        sys.stderr.write("error: interrupted\n")
        sys.stderr.flush()
        end_interrupted(130, bounded=console)
        return 130
    if console:
        exit_on_interrupt("error: interrupted")
    return code


def exit_on_interrupt(line: str, status: int = 130) -> None:
    """From now on (the command done), a ``SIGINT`` prints ``line`` and exits with ``status`` at once."""
    from .executors import exit_now

    def answer(signum, frame) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.write(2, f"{line}\n".encode())
        exit_now(status)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, answer)
