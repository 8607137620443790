"""Resumable sweeps of stacked training runs.

The names below are imported when first used (PEP 562), so that :mod:`.config` — reading
and checking a sweep file — loads without the runner (and torch): a bad sweep file is
refused before torch is imported.
"""

from .. import lazy_names

#: Each public name and the module of this package that defines it.
_WHERE = {
    "SweepConfig": "config",
    "check_sweep": "config",
    "load_sweep": "config",
    "parse_sweep": "config",
    "EXECUTORS": "executors",
    "make_executor": "executors",
    "SweepSummary": "runner",
    "plan_tasks": "runner",
    "run_sweep": "runner",
    "run_sweeps": "runner",
    "sweep_status": "runner",
    "ResultsDir": "store",
}

__all__ = sorted(_WHERE)

__getattr__ = lazy_names(__name__, _WHERE, globals())
