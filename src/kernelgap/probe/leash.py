"""A probed module on a leash: the probe never runs the module's code in its own process.
A child process imports and checks it, each phase under a time limit that this process
keeps from outside (docs/experiments.md, "Time limits"), and sends back what the probe
needs to know of it (:func:`rehearse`); training runs it in pool workers, held to the
``step`` limit (:func:`kernelgap.models.leash.arm_step_limit`).

The phases are ``import`` (loading the module), ``check`` (the interface check, the
causality reading, the feature counts and the structure check, :mod:`.structure`) and ``step`` (one forward and backward pass
over each suite's family, as a training step does).  A module that overruns a phase is
killed (whatever it did to signals or alarms in its process) and the probe ends with one
line naming the module, the phase and the limit; one that ends the child process
(``os._exit``, a crash) is one line naming the module, the phase and the exit status; one
that raises ``KeyboardInterrupt`` interrupts the probe; any other failure is the checks'
own line.  The child is killed once it has answered: exit handlers and threads the module
left behind end with it."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from functools import partial

from ..errors import KernelgapError
from ..models.external import ModuleFailure, target_label
from ..models.module_spec import describe, source_file, vouch
from .config import TIME_LIMITS

#: How each phase is named in messages.
PHASE_WORDS = {"import": "importing", "check": "being checked", "step": "checking a training step"}
#: Seconds the child may take to start (a fresh process, before the module's first phase).
START_S = 300.0
#: Seconds between two looks for an interrupt while the child works.
POLL_S = 0.2


def rehearse(config, limits: dict[str, float]) -> dict:
    """Import and check ``config``'s module in a child process, each phase within its limit
    (module docstring), and return what the child found (:func:`_phases`); its failure is
    raised here.  The module's target is vouched for (:func:`~kernelgap.models.module_spec.vouch`):
    this process makes its specs without importing it."""
    from ..sweeps.executors import forkserver_context

    ctx = forkserver_context()
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_rehearsal, args=(send, config, os.getcwd(), list(sys.path)), daemon=True)
    child.start()
    send.close()
    try:
        found = _answer(receive, child, target_label(config.target), limits)
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()
    vouch(found["spec"]["target"], found["source_file"], found["spec"]["source_hash"])
    return found


def _answer(receive, child, label: str, limits: dict[str, float]) -> dict:
    """The child's findings, each phase it announces within its limit (module docstring)."""
    phase = None
    while True:
        limit = START_S if phase is None else limits[phase]
        if not _poll(receive, limit):
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
        if isinstance(message, tuple) and message[0] == "failed":
            raise message[1]
        if isinstance(message, tuple) and message[0] == "done":
            return message[1]
        if message in TIME_LIMITS:
            phase = message


def _poll(receive, seconds: float) -> bool:
    """Whether the child answered within ``seconds``; a ``KeyboardInterrupt`` as soon as the
    command was interrupted (this runs in a thread of the probe experiment, which the main
    thread's interrupt does not reach)."""
    from ..sweeps.interrupts import interrupted

    deadline = time.monotonic() + seconds
    while not receive.poll(max(0.0, min(POLL_S, deadline - time.monotonic()))):
        if interrupted():
            raise KeyboardInterrupt
        if time.monotonic() >= deadline:
            return False
    return True


def _rehearsal(conn, config, cwd: str, path: list[str]) -> None:
    """The child: the probe's module checks, each phase announced on ``conn``, then
    ``("done", findings)``, ``("failed", error)`` or ``interrupt``, from the parent's folder
    and import path.  What the module prints goes nowhere."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to answer
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    phase = ["import"]

    def enter(name: str) -> None:
        phase[0] = name
        conn.send(name)

    try:
        os.chdir(cwd)
        sys.path[:] = path
        conn.send(("done", _phases(config, enter)))
    except KeyboardInterrupt:
        conn.send("interrupt")
    except KernelgapError as exc:
        conn.send(("failed", _portable(exc)))
    except BaseException as exc:  # noqa: BLE001 - whatever else, the module's, one line
        line = f"module {target_label(config.target)} failed while {PHASE_WORDS[phase[0]]}: {describe(exc)}"
        conn.send(("failed", ModuleFailure(line)))
    finally:
        conn.close()


def _portable(exc: KernelgapError) -> KernelgapError:
    """``exc`` where it survives pickling as it is (its class tells the caller what it is: a
    library that is not installed, say), else a plain one with its line."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - an error class that does not pickle
        return (ModuleFailure if isinstance(exc, ModuleFailure) else KernelgapError)(str(exc))
    return exc


def _phases(config, enter) -> dict:
    """What :func:`kernelgap.probe.runner.run_probe` needs of the module, found in the order
    import, check, step (``enter(phase)`` before each)."""
    from ..models.external import build_module, constructor_args, declares_features, module_failures
    from ..task import build_family
    from .module import check_module, feature_counts, module_spec, reading_of
    from .structure import structure
    from .twin import checked_twin, twin_map

    enter("import")
    first = config.suites()
    cls, spec = module_spec(config.target, config.kwargs, config.interface, config.d_model, config.args, config.output)
    enter("check")
    families = [(suite, build_family(suite.family, **suite.params)) for suite in first]
    for suite, family in families:
        check_module(cls, spec, family.m, min(suite.ranks))
    enter("step")
    models = [check_module(cls, spec, family.m, min(suite.ranks), family) for suite, family in families]
    enter("check")  # the reading of the module as the step check left it, as training starts
    reading = reading_of(models[0], families[0][1].m)
    features = {
        suite.name: feature_counts(cls, spec, build_family(suite.family, **suite.params).m, suite.ranks)
        for suite in config.suites(reading, spec.rank_free)
    }
    if config.features is not None:  # the user's count where the module declares none
        features = {name: [config.features if f is None else f for f in fs] for name, fs in features.items()}
    twin = checked_twin(config.kernel) if config.kernel else twin_map(cls, constructor_args(spec, 0, 0)[1])
    kernel = declares_features(cls) or config.features is not None or twin is not None
    shapes = {}
    for suite, family in families:  # what kind of map it is (kernelgap.probe.structure)
        with module_failures(spec.target, "checking its structure", f" at rank {min(suite.ranks)}"):
            shapes[suite.name] = structure(
                partial(build_module, cls, spec, family.m, min(suite.ranks)),
                family.m,
                length=family.length,
                kernel=kernel,
            ).model_dump()
    return {
        "class": cls.__name__,
        "spec": spec.model_dump(),
        "source_file": source_file(cls, spec.target),
        "reading": reading,
        "parameters": models[0].parameter_counts(),
        "twin": twin,
        "features": features,
        "structure": shapes,
    }
