"""What a probe is told: :class:`ProbeConfig`, one object for ``kernelgap probe``'s flags
or one ``[[probes]]`` entry of a profile (docs/experiments.md, "Probe")."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from ..errors import KernelgapError
from ..limits import MAX_SECONDS, check_workers
from ..run_values import seed_problem

#: Default seconds per phase of a probed module: importing it, checking it, one training
#: step (docs/experiments.md, "Time limits"; :mod:`~kernelgap.probe.leash`).
TIME_LIMITS = {"import": 60.0, "check": 300.0, "step": 600.0}


class TimeLimitError(KernelgapError):
    """A time limit that is not a phase's positive number of seconds."""


def time_limits(given: dict | None) -> dict[str, float]:
    """The limits, :data:`TIME_LIMITS` overridden by ``given`` (phase → seconds, each a
    positive finite number up to :data:`~kernelgap.limits.MAX_SECONDS`; one-line errors)."""
    limits = dict(TIME_LIMITS)
    if given is not None and not isinstance(given, dict):
        raise TimeLimitError(f"time_limits must be a table of phase = seconds, got {given!r}")
    for phase, value in (given or {}).items():
        if phase not in TIME_LIMITS:
            raise TimeLimitError(f"time limit: unknown phase {phase!r}; choose from {', '.join(TIME_LIMITS)}")
        try:
            seconds = float(value)
        except (TypeError, ValueError, OverflowError):
            seconds = math.nan
        if isinstance(value, bool) or not (math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
            raise TimeLimitError(
                f"time limit {phase} must be a positive number of seconds, got {value!r} (at most {MAX_SECONDS:,})"
            )
        limits[phase] = seconds
    return limits


@dataclass(frozen=True)
class ProbeConfig:
    """One probe, as given (checked by :func:`~kernelgap.probe.runner.run_probe`, the flags
    first, before anything is written).

    The module: ``target`` (``pkg.mod:Class`` or ``path/to/file.py:Class``), its constructor
    ``kwargs``, its ``interface`` (None: the class's own ``kernelgap_interface``), its argument
    map ``args``, the ``output`` index of a tuple it returns and ``d_model`` (the width given
    to a ``layer`` module).  What trains: the ``profile``'s suites, with ``ranks`` (for every
    suite, or per suite name), ``seeds``, ``steps`` and ``lr`` overriding them
    (:func:`~kernelgap.probe.suites.suites`).  Where: ``out`` (default
    ``results/probe-<Class>``) and ``baseline``, the folder of the ``elu1`` and twin runs
    (default ``out/baseline``; the probes of one reproduction share theirs).  How: the sweep
    runner's ``executor``, ``workers`` and ``address``.  ``recipes``: whether the recipe search
    runs (:data:`~kernelgap.probe.suites.RECIPES`), or the names of the suites it runs on.
    ``time_limits``: seconds per phase of the module (``import``, ``check``, ``step``;
    :data:`TIME_LIMITS` for those not given; :mod:`~kernelgap.probe.leash`)."""

    target: str
    kwargs: dict | None = None
    _: KW_ONLY
    out: str | Path | None = None
    profile: str = "quick"
    ranks: dict[str, list[int]] | list[int] | None = None
    seeds: list[int] | None = None
    steps: int | None = None
    lr: float | None = None
    d_model: int = 32
    interface: str | None = None
    args: dict | None = None
    output: int | None = None
    executor: str = "local"
    workers: int | None = None
    address: str | None = None
    baseline: str | Path | None = None
    recipes: bool | list[str] = True
    time_limits: dict[str, float] | None = None

    def folder(self, class_name: str) -> Path:
        """The probe's results folder: ``out``, else ``results/probe-<class_name>``."""
        return Path(self.out) if self.out is not None else Path("results") / f"probe-{class_name}"

    def baseline_folder(self, class_name: str) -> Path:
        """The folder of the baseline's and the twin's runs: ``baseline``, else ``<folder>/baseline``."""
        return Path(self.baseline) if self.baseline is not None else self.folder(class_name) / "baseline"

    def checked(self) -> ProbeConfig:
        """This config, once the flags that need no module pass (torch-free, so a bad one is
        refused before torch is imported): the seeds, ``--d-model``, ``--executor``,
        ``--workers``, the time limits and the suites' schedules (ranks, steps, lr)."""
        from ..sweeps.executors import check_executor
        from .suites import suites

        for value in self.seeds or ():
            if value >= 0 and seed_problem(value) is not None:  # a negative one: the suites' own line
                raise KernelgapError(f"--seeds{seed_problem(value)}")
        if self.d_model < 1:
            raise KernelgapError(f"--d-model must be ≥ 1, got {self.d_model}")
        check_executor(self.executor)
        check_workers(self.workers)
        self.limits  # noqa: B018 - checked here, before the module is touched
        suites(self.profile, self.ranks, self.seeds, self.steps, self.lr)
        return self

    @property
    def limits(self) -> dict[str, float]:
        """Seconds per phase (:func:`time_limits`)."""
        return time_limits(self.time_limits)

    @property
    def sweep_options(self) -> dict:
        """The sweep runner's options (:func:`~kernelgap.sweeps.run_sweeps`)."""
        return {"executor": self.executor, "workers": self.workers, "address": self.address}
