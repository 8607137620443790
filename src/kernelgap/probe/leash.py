"""A probed module on a leash: before the probe imports and checks a module in its own
process, a child process does the same under a time limit per phase (docs/experiments.md,
"Time limits").

The phases are ``import`` (loading the module), ``check`` (the interface check, the
causality reading and the feature counts) and ``step`` (one forward and backward pass
over each suite's family, as a training step does); the pool workers that train the
module hold each of its forward passes to the ``step`` limit as well
(:func:`kernelgap.models.leash.arm_step_limit`).  A module that overruns a phase is
stopped and the probe ends with one line naming the module, the phase and the limit; one
that ends the child process (``os._exit``, a crash) is one line naming the module, the
phase and the exit status; one that raises ``KeyboardInterrupt`` interrupts the probe.
Anything else the child meets is left to the probe's own checks, which follow in this
process and say it in their own words: the rehearsal changes no result."""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from ..errors import KernelgapError
from ..models.external import ModuleFailure, target_label
from .config import TIME_LIMITS

#: How each phase is named in messages.
PHASE_WORDS = {"import": "importing", "check": "being checked", "step": "checking a training step"}
#: Seconds the child may take to start (a fresh process, before the module's first phase).
START_S = 300.0


def rehearse(config, limits: dict[str, float]) -> None:
    """Import and check ``config``'s module in a child process, each phase within its limit
    (module docstring); return once the child is done, whatever it found."""
    from ..sweeps.executors import forkserver_context

    ctx = forkserver_context()
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_rehearsal, args=(send, config, os.getcwd(), list(sys.path)), daemon=True)
    child.start()
    send.close()
    phase, label = None, target_label(config.target)
    try:
        while True:
            limit = START_S if phase is None else limits[phase]
            if not receive.poll(limit):
                if phase is None:
                    raise KernelgapError(f"the check of module {label} did not start within {START_S:g} s")
                raise ModuleFailure(
                    f"module {label} did not finish {PHASE_WORDS[phase]} within its time limit of {limit:g} s "
                    f"(--time-limit {phase}=SECONDS)"
                )
            try:
                message = receive.recv()
            except EOFError:
                child.join(10)
                raise ModuleFailure(
                    f"module {label} ended its process while {PHASE_WORDS.get(phase, 'starting')} "
                    f"(exit status {child.exitcode})"
                ) from None
            if message == "interrupt":
                raise KeyboardInterrupt
            if message not in TIME_LIMITS:
                return
            phase = message
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()


def _rehearsal(conn, config, cwd: str, path: list[str]) -> None:
    """The child: the probe's module checks, each phase announced on ``conn``, then
    ``done`` (or ``failed``, or ``interrupt``), from the parent's folder and import path.
    Its output goes nowhere: the probe's own checks, in the parent, say what there is to say."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to answer
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    try:
        os.chdir(cwd)
        sys.path[:] = path
        _phases(config, conn.send)
        conn.send("done")
    except KeyboardInterrupt:
        conn.send("interrupt")
    except BaseException:  # noqa: BLE001 - the parent's own checks report it
        with contextlib.suppress(OSError):
            conn.send("failed")
    finally:
        conn.close()


def _phases(config, enter) -> None:
    """What :func:`kernelgap.probe.runner.run_probe` runs of the module before training, in
    the order import, check, step (``enter(phase)`` before each)."""
    from ..task import build_family
    from .module import check_module, feature_counts, module_spec, reading_of
    from .suites import suites

    enter("import")
    first = suites(config.profile, config.ranks, config.seeds, config.steps, config.lr)
    cls, spec = module_spec(config.target, config.kwargs, config.interface, config.d_model, config.args, config.output)
    enter("check")
    families = [(suite, build_family(suite.family, **suite.params)) for suite in first]
    models = [check_module(cls, spec, family.m, min(suite.ranks)) for suite, family in families]
    reading_of(models[0], families[0][1].m)
    for suite, family in families:
        feature_counts(cls, spec, family.m, suite.ranks)
    enter("step")
    for suite, family in families:
        check_module(cls, spec, family.m, min(suite.ranks), family)
