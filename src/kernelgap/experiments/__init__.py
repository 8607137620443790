"""The experiments: one folder each, profiles that list them, and ``reproduce``.

An experiment is a folder ``<name>/`` of this package (or of a profile folder given
by path): its sweep files (``quick.toml``, ``paper.toml``, or ``sweep.toml``), its
torch-free ``experiment.py`` (``EXPERIMENT``: settings defaults, the pools its runs
join, its summary section, schema, sentence, figures and HTML; :mod:`.base`) and its
after-sweep step (``step.py``; it may use torch).  :mod:`.registry` lists them; a
*profile* (``profiles/quick``, ``profiles/paper``, or a folder) is ``profile.toml``:
the experiments in order and their settings.
:func:`~kernelgap.experiments.pipeline.reproduce` runs each sweep (resumable) and
step, then writes the report.  docs/experiments.md describes every experiment,
docs/adding-an-experiment.md how to add one.
"""

from .base import Experiment, Figure

__all__ = ["Experiment", "Figure"]
