"""Resumable sweeps of stacked training runs (names imported when first used, so a bad
sweep file is refused before torch is imported)."""

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
