"""Probe any attention module with the Min-IP suites (docs/experiments.md, "Probe").

``kernelgap probe TARGET`` trains a module written elsewhere — ``pkg.mod:Class``
or ``path/to/file.py:Class`` — on the witness family and an OOD pool, beside
the built-in ``elu1`` baseline, through the ordinary sweep machinery
(:func:`run_probe` of a :class:`ProbeConfig`).  The interfaces a module can follow
are described in :mod:`kernelgap.models.external`.

The parts: :mod:`.config` (what a probe is told), :mod:`.module` (the module checked),
:mod:`.suites` (what each profile trains), :mod:`.runner` (the sweeps and the recipe
search), :mod:`.verdicts` (the verdict rules, torch-free: the probe experiment's report
reads them), :mod:`.floor` (the query-blind and additive floors), :mod:`.structure` (what kind
of map a module is) and :mod:`.twin`.  ``ProbeConfig`` and ``run_probe`` are
imported when first asked for, so that importing :mod:`.verdicts` loads no torch.
"""

from __future__ import annotations

__all__ = ["ProbeConfig", "run_probe"]


def __getattr__(name: str):
    if name == "ProbeConfig":
        from .config import ProbeConfig

        return ProbeConfig
    if name == "run_probe":
        from .runner import run_probe

        return run_probe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
