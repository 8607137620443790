"""The step limit of a pool worker: every call into a module written elsewhere — its
construction, each forward pass — held to a time limit, and its ``os._exit`` made a
``SystemExit`` (docs/experiments.md, "Time limits").  Armed only in the pool workers that
train modules (:func:`kernelgap.sweeps.executors.watch_driver`); elsewhere
:func:`leashed` does nothing."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

from ..errors import KernelgapError

#: Seconds one call into a module may take in this process (None: no limit).
_STEP_SECONDS: float | None = None
#: What the module is doing now, for the message of an overrun: ``(label, what)``.
_RUNNING: list[tuple[str, str]] = []


class StepOverrun(KernelgapError):
    """A call into a module that outlasted the step limit (one line naming it)."""


def arm_step_limit(seconds: float) -> None:
    """In a pool worker's main thread (the worker's own process: the executors'
    initializer): hold every call into a module to ``seconds`` (``SIGALRM``)."""
    global _STEP_SECONDS
    signal.signal(signal.SIGALRM, _overrun)
    _STEP_SECONDS = seconds


def _overrun(signum, frame) -> None:
    label, what = _RUNNING[-1] if _RUNNING else ("written elsewhere", "its work")
    raise StepOverrun(
        f"module {label} did not finish {what} within its time limit of {_STEP_SECONDS:g} s (--time-limit step=SECONDS)"
    )


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
    signal.setitimer(signal.ITIMER_REAL, _STEP_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        os._exit = hard_exit
        _RUNNING.pop()
