"""Ctrl-C in the command line's process: whenever the user pressed it, the command ends with
one line and status 130, never 0 and never a traceback.

:func:`watch_interrupts` records every ``SIGINT`` while the command runs (raising
``KeyboardInterrupt`` as Python's own handler does), so that an interrupt that some code
turned into another error, or swallowed, still ends as an interrupt (:func:`interrupted`);
:func:`exit_on_interrupt` answers one that comes while the process is exiting (joining its
pools' threads, running exit handlers), where Python would print a traceback and keep
status 0.  The pools' helper processes ignore ``SIGINT`` from their start
(:func:`~kernelgap.sweeps.executors.forkserver_context`): only this process answers it."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading

_INTERRUPTED = threading.Event()


def watch_interrupts(console: bool = True) -> None:
    """From now on, in this process's main thread, a ``SIGINT`` is recorded and raises
    ``KeyboardInterrupt``; a handler someone else installed is left alone, and so is a
    process that only calls the command line (``console`` false: a test, a program)."""
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
    """The command's exit status ``code`` once it is done: an interrupted one (status 130, or
    any status after a ``SIGINT``) prints ``error: interrupted`` and ends as
    :func:`~kernelgap.sweeps.executors.end_interrupted` says (bounded in time for a
    ``console``), with 130; any other, in a ``console``, keeps status 130 for a ``SIGINT``
    that comes while it exits (:func:`exit_on_interrupt`)."""
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
    """From now on (the command done, this process about to exit), a ``SIGINT`` prints
    ``line`` on stderr, kills this process's children and ends it with ``status`` at once:
    what the command wrote is already written, atomically."""

    def answer(signum, frame) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.write(2, f"{line}\n".encode())
        for child in multiprocessing.active_children():
            with contextlib.suppress(OSError, ValueError, AttributeError):
                child.kill()
        os._exit(status)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, answer)
