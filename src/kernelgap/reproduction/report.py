"""``kernelgap report DIR``: ``summary.json``, its schema, figures and ``report.html`` of a
reproduction folder or of a probe folder, from the result files alone (no training)."""

from __future__ import annotations

import json
from pathlib import Path

from .. import __version__
from ..errors import KernelgapError
from ..experiments.probe.page import render_probe_report
from ..experiments.probe.section import probe_section
from ..io import atomic_write_json, atomic_write_text, read_json
from ..validation import JsonNumber, fits
from .record import read_meta
from .render import render_report
from .schema import summary_schema
from .summary import build_summary, feature_maps, reproduction_experiments


def build_report(out: str | Path, profile: str | None = None, log=print) -> Path:
    """``summary.json`` (with its schema beside it, ``summary.schema.json``) and
    ``report.html`` for a reproduction folder."""
    out = Path(out)
    summary = build_summary(out, profile)
    if summary["wall_time_s"] is None:  # a folder whose runs recorded no time: keep the last report's
        last = read_json(out / "summary.json")
        wall = last.get("wall_time_s") if isinstance(last, dict) else None
        if fits(JsonNumber, wall):
            summary["wall_time_s"] = wall
    experiments = reproduction_experiments(read_meta(out))
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.schema.json", json.dumps(summary_schema(experiments), indent=1) + "\n")
    report = atomic_write_text(out / "report.html", render_report(summary, out, experiments))
    log(f"summary: {out / 'summary.json'}\nreport:  {report}")
    return report


def build_probe_report(out: str | Path, log=print) -> Path:
    """``summary.json`` (``{"probes": [one]}``), figures and ``report.html`` for a probe folder."""
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
