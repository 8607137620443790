"""A reproduction, assembled: the layer above the experiments.

:mod:`.pipeline` runs every experiment of a profile (``kernelgap reproduce``: sweeps, then
steps, then the report); :mod:`.report` writes ``summary.json`` (:mod:`.summary`, checked
against :mod:`.schema`) and ``report.html`` (:mod:`.render`) of a reproduction folder or a
probe folder by iterating the registry of experiments (:mod:`kernelgap.experiments.registry`);
:mod:`.record` reads a folder's ``reproduce.json``; :mod:`.results_page` and :mod:`.compare`
read finished summaries (``kernelgap results``, ``kernelgap compare``).  Only the pipeline
trains (through the sweeps and the steps): the rest is file work and imports no torch.
The parts every experiment draws and writes with are the report kit, :mod:`kernelgap.report`.
"""

from .report import build_probe_report, build_report

__all__ = ["build_probe_report", "build_report"]
