"""The experiments: profiles of sweeps plus the steps that follow them, and ``reproduce``.

A *profile* is a folder (two ship with the package, ``quick`` and ``paper``)
holding ``profile.toml`` — the experiments in order and the settings of their
after-sweep steps — and one sweep file ``<experiment>.toml`` per trained
experiment.  :func:`~kernelgap.experiments.pipeline.reproduce` runs each sweep
(resumable) and its after-sweep step (:mod:`.hooks`), then writes the report.
docs/experiments.md describes every experiment.
"""
