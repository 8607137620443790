"""Probe any attention module with the Min-IP suites (docs/experiments.md, "Probe").

``kernelgap probe TARGET`` trains a module written elsewhere — ``pkg.mod:Class``
or ``path/to/file.py:Class`` — on the witness family and an OOD pool, beside
the built-in ``elu1`` baseline, through the ordinary sweep machinery, and
writes a report that stands alone.  The interfaces a module can follow are
described in :mod:`kernelgap.models.external`.
"""

from .runner import check_module, module_spec, reading_of, run_probe
from .suites import PROFILES, Suite, suites

__all__ = ["PROFILES", "Suite", "check_module", "module_spec", "reading_of", "run_probe", "suites"]
