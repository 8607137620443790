"""Resumable sweeps of stacked training runs."""

from .config import SweepConfig, load_sweep, parse_sweep
from .executors import EXECUTORS, make_executor
from .runner import SweepSummary, plan_tasks, run_sweep, run_sweeps, sweep_status
from .store import ResultsDir

__all__ = [
    "EXECUTORS",
    "ResultsDir",
    "SweepConfig",
    "SweepSummary",
    "load_sweep",
    "make_executor",
    "parse_sweep",
    "plan_tasks",
    "run_sweep",
    "run_sweeps",
    "sweep_status",
]
