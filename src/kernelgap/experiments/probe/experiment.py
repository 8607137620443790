"""Probes: every ``[[probes]]`` module of ``profile.toml`` through ``kernelgap probe``.

Each module trains on the probe's suites beside the built-in ``elu1`` at the same ranks
and seeds (``probe/<name>/``; the baseline runs of equal suites are shared,
``probe/baseline/``).  The same section, figure and HTML make the report of a probe
folder (``kernelgap probe … --out DIR``).

The experiment's torch-free parts, one job each: :mod:`.section` (``probe.json``, checked,
and the summary's ``probes``), :mod:`.text` (sentences and conclusions),
:mod:`.page` (its figure and HTML), :mod:`.meter` (the wall meter: every module on one table
and figure); the verdict rules are the
probe's own (:mod:`kernelgap.probe.verdicts`), and so are the ``[[probes]]`` entries
(:class:`kernelgap.probe.config.ProbeEntry`, named: a profile loads them).  :mod:`.step`
runs the probes (torch; the pipeline loads it).
"""

from __future__ import annotations

from ..base import Experiment
from .meter import METER_FIGURE
from .page import PROBE_FIGURE, probes_html
from .section import SECTION, section
from .text import conclusions, sentence

EXPERIMENT = Experiment(
    name="probe",
    order=130,
    title="Probes",
    key="probes",
    section=section,
    schema=SECTION,
    sentence=sentence,
    conclusions=conclusions,
    html=lambda summary, pg: {"probes": probes_html(summary, pg)},
    region="probes",
    figures=(METER_FIGURE, PROBE_FIGURE),
    profile_keys={"probes": "kernelgap.probe.config:parse_probes"},
    step=".step:probe_modules",
)
