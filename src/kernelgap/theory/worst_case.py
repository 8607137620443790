"""The exact worst case of one attention head over a product family (docs/theory.md,
"A construction of rank n at any length").

The numpy core lives in :mod:`kernelgap.task.worst_case`, below the models (which call it
through :func:`kernelgap.models.worst_case.family_worst_case`) and the theory (which checks
the one-hot constructions with it, :mod:`.construction`); this is its name on the theory side.
"""

from __future__ import annotations

from ..task.worst_case import CHUNK_ELEMENTS, MAX_ITERATIONS, WorstCase, worst_case

__all__ = ["CHUNK_ELEMENTS", "MAX_ITERATIONS", "WorstCase", "worst_case"]
