"""A reproduction, assembled: the layer above the experiments.  :mod:`.pipeline` runs a
profile; :mod:`.report` writes ``summary.json`` and ``report.html`` by iterating the
registry of experiments; :mod:`.results_page` and :mod:`.compare` read finished summaries.
Only the pipeline trains: the rest is file work and imports no torch.
"""

from .report import build_probe_report, build_report

__all__ = ["build_probe_report", "build_report"]
