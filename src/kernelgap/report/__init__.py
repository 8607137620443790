"""The report kit: what every experiment's report part (``kernelgap/experiments/<name>/``)
writes and draws with, from result files alone.

:mod:`.criteria` (thresholds, run rows, pools), :mod:`.text` (sentence helpers),
:mod:`.figures` (figure style), :mod:`.html` (page skeleton), :mod:`.context` (the result
files as a section reads them) and :mod:`.trained` (trained families beside their
certificates).  The kit sits below the experiments and knows none of them; the assembler
that iterates them (``summary.json``, ``report.html``) is :mod:`kernelgap.reproduction`.
Nothing here trains or imports torch, so a report can be rebuilt anywhere.
"""
