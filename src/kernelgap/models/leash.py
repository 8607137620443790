"""The step limit of a pool worker: every call into a module written elsewhere — its
construction, each forward pass — held to a time limit, and its ``os._exit`` made a
``SystemExit`` (docs/experiments.md, "Time limits").  Armed only in the pool workers that
train modules (:func:`kernelgap.sweeps.executors.watch_driver`); elsewhere
:func:`leashed` does nothing.

Two holds, so that no module code can lift the limit: the worker's own ``SIGALRM`` (a
clean one-line failure of the task) and, should the module switch that off
(``signal.alarm(0)``, ``SIG_IGN``), the driver's :class:`StepWatch`, which reads the
deadline each worker posts (:func:`leashed`) and kills the worker from outside
:data:`WATCH_GRACE_S` after it."""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import signal
import struct
import tempfile
import threading
import time

from ..errors import KernelgapError

#: Seconds one call into a module may take in this process (None: no limit).
_STEP_SECONDS: float | None = None
#: What the module is doing now, for the message of an overrun: ``(label, what)``.
_RUNNING: list[tuple[str, str]] = []
#: This worker's post to the driver's :class:`StepWatch` (None: not watched).
_POST: list[mmap.mmap] = []
#: A post: the deadline (``time.monotonic``, 0: none), then ``label\0what`` (UTF-8, padded).
_POST_BYTES = 1024
#: Seconds past a deadline before the driver kills the worker (its own alarm comes first),
#: and between the driver's readings of the posts.
WATCH_GRACE_S = 1.0
WATCH_EVERY_S = 0.2


class StepOverrun(KernelgapError):
    """A call into a module that outlasted the step limit (one line naming it)."""


def arm_step_limit(seconds: float, board: str | None = None) -> None:
    """In a pool worker's main thread (the worker's own process: the executors'
    initializer): hold every call into a module to ``seconds`` (``SIGALRM``), and post
    each call's deadline in the folder ``board`` of the driver's :class:`StepWatch`."""
    global _STEP_SECONDS
    signal.signal(signal.SIGALRM, _overrun)
    _STEP_SECONDS = seconds
    if board is not None:
        with contextlib.suppress(OSError):  # a pool already shut down: nothing left to watch
            fd = os.open(os.path.join(board, str(os.getpid())), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                os.ftruncate(fd, _POST_BYTES)
                _POST[:] = [mmap.mmap(fd, _POST_BYTES)]
            finally:
                os.close(fd)


def overrun_message(label: str, what: str, seconds: float) -> str:
    """The one line of a call into a module that outlasted the step limit."""
    return f"module {label} did not finish {what} within its time limit of {seconds:g} s (--time-limit step=SECONDS)"


def _overrun(signum, frame) -> None:
    label, what = _RUNNING[-1] if _RUNNING else ("written elsewhere", "its work")
    raise StepOverrun(overrun_message(label, what, _STEP_SECONDS))


def _post(deadline: float) -> None:
    """Tell the driver's watch this worker's deadline (0: none) and what the module does."""
    if not _POST:
        return
    if deadline:  # what first, then when: the watch never reads a deadline with stale words
        label, what = _RUNNING[-1] if _RUNNING else ("written elsewhere", "its work")
        text = f"{label}\0{what}".encode()[: _POST_BYTES - 8]
        _POST[0][8:] = text.ljust(_POST_BYTES - 8, b"\0")
    struct.pack_into("d", _POST[0], 0, deadline)


class StepWatch:
    """In the driver: a folder where each pool worker posts the deadline of its current
    call into a module (:func:`arm_step_limit`), and a thread that kills a worker
    :data:`WATCH_GRACE_S` past it, from outside, whatever the module did to its own
    alarm.  :attr:`workers` (set by the pool) names its live worker processes by pid: only
    those are killed, a pid is never taken for another process.  :attr:`overrun` is the line
    of the first worker killed (None: none)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.overrun = seconds, None
        self.workers = dict
        self.folder = tempfile.mkdtemp(prefix="kernelgap-steps-")
        self._stop = threading.Event()
        threading.Thread(target=self._watch, name="kernelgap-step-watch", daemon=True).start()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_EVERY_S):
            for pid, process in list((self.workers() or {}).items()):
                late = self._late(pid)
                if late is not None:
                    self.overrun = self.overrun or overrun_message(*late, self.seconds)
                    with contextlib.suppress(OSError, ValueError, AttributeError):
                        process.kill()

    def _late(self, pid: int) -> tuple[str, str] | None:
        """``(label, what)`` of worker ``pid``'s call when it is past its deadline and grace."""
        try:
            with open(os.path.join(self.folder, str(pid)), "rb") as f:
                raw = f.read(_POST_BYTES)
        except OSError:
            return None
        if len(raw) < _POST_BYTES:
            return None
        (deadline,) = struct.unpack_from("d", raw, 0)
        if not deadline or time.monotonic() < deadline + WATCH_GRACE_S:
            return None
        label, _, what = raw[8:].rstrip(b"\0").decode(errors="replace").partition("\0")
        return label, what

    def close(self) -> None:
        """Stop watching and remove the folder."""
        self._stop.set()
        shutil.rmtree(self.folder, ignore_errors=True)


def _refuse_exit(code: int = 0) -> None:
    raise SystemExit(code)


@contextlib.contextmanager
def leashed(label: str | None, what: str):
    """Meanwhile, in a worker armed by :func:`arm_step_limit`: a call into the module
    ``label`` that outlasts the limit raises :class:`StepOverrun` naming it and ``what``,
    and its ``os._exit`` is a ``SystemExit`` (one line naming the module, not a dead
    worker).  Elsewhere (the driver, another thread) it does nothing."""
    if _STEP_SECONDS is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    hard_exit = os._exit
    _RUNNING.append((label or "written elsewhere", what))
    os._exit = _refuse_exit
    _post(time.monotonic() + _STEP_SECONDS)
    signal.setitimer(signal.ITIMER_REAL, _STEP_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _post(0.0)
        os._exit = hard_exit
        _RUNNING.pop()
