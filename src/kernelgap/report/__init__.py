"""The report: ``summary.json``, figures and ``report.html``, from result files alone.

Shared parts — :mod:`.criteria` (thresholds, run rows, pools), :mod:`.text` (sentence
helpers), :mod:`.figures` (figure style), :mod:`.html` (page skeleton), :mod:`.context`
(the result files as sections read them) — are used by every experiment's report part
(``kernelgap/experiments/<name>/experiment.py``); :mod:`.summary`, :mod:`.schema` and
:mod:`.render` iterate the registry of experiments.  Nothing here trains or imports
torch, so a report can be rebuilt anywhere (``kernelgap report DIR``).  This module
imports its parts only when called: experiments import the shared parts, and the
parts that iterate the registry import the experiments.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import __version__
from ..errors import KernelgapError
from ..io import atomic_write_json, atomic_write_text, read_json


def build_report(out: str | Path, profile: str | None = None, log=print) -> Path:
    """``summary.json`` (with its schema beside it, ``summary.schema.json``) and
    ``report.html`` for a reproduction folder."""
    from .render import render_report
    from .schema import summary_schema
    from .summary import build_summary, read_meta, reproduction_experiments

    out = Path(out)
    summary = build_summary(out, profile)
    if summary["wall_time_s"] is None:  # a folder whose runs recorded no time: keep the last report's
        last = read_json(out / "summary.json")
        wall = last.get("wall_time_s") if isinstance(last, dict) else None
        if isinstance(wall, (int, float)) and not isinstance(wall, bool):
            summary["wall_time_s"] = wall
    experiments = reproduction_experiments(read_meta(out))
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.schema.json", json.dumps(summary_schema(experiments), indent=1) + "\n")
    report = atomic_write_text(out / "report.html", render_report(summary, out, experiments))
    log(f"summary: {out / 'summary.json'}\nreport:  {report}")
    return report


def build_probe_report(out: str | Path, log=print) -> Path:
    """``summary.json`` (``{"probes": [one]}``), figures and ``report.html`` for a probe folder."""
    from ..experiments.probe.experiment import probe_section, render_probe_report
    from .summary import feature_maps

    out = Path(out)
    probe = probe_section(out)
    if probe is None:
        raise KernelgapError(f"{out} holds no probe (no probe.json); run `kernelgap probe … --out {out}`")
    if not any(s["runs"] or s["baseline"] for s in probe["suites"]):
        raise KernelgapError(f"{out} holds no probe results (probe.json names no suite with runs)")
    summary = {
        "version": __version__,
        "profile": probe.get("profile"),
        "probes": [probe],
        "feature_maps": feature_maps(out),
    }
    atomic_write_json(out / "summary.json", summary)
    report = atomic_write_text(out / "report.html", render_probe_report(summary, out))
    log(f"summary: {out / 'summary.json'}\nreport:  {report}")
    return report


__all__ = ["build_probe_report", "build_report"]
