"""The experiments: one folder each, and the profiles that list them.

An experiment is a folder ``<name>/`` of this package (or of a profile folder given
by path): its sweep files (``quick.toml``, ``paper.toml``, or ``sweep.toml``), its
torch-free ``experiment.py`` (``EXPERIMENT``: settings defaults, the pools its runs
join, its summary section, schema, sentence, figures and HTML; :mod:`.base`), with the
torch-free modules beside it that it imports where its report part is large (``probe/``),
and its after-sweep step (``step.py``; it may use torch).  :mod:`.registry` lists them; a
*profile* (``profiles/quick``, ``profiles/paper``, or a folder) is ``profile.toml``:
the experiments in order and their settings.  The layer above,
:mod:`kernelgap.reproduction`, runs each sweep (resumable) and step
(:func:`~kernelgap.reproduction.pipeline.reproduce`), then writes the report.
docs/experiments.md describes every experiment, docs/adding-an-experiment.md how to add one.
"""

from .base import Experiment, Figure

__all__ = ["Experiment", "Figure"]
