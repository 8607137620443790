"""The report: ``summary.json``, figures and ``report.html``, from result files alone.

Imports flow one way — :mod:`.criteria` ← :mod:`.summary` ← :mod:`.text` ←
:mod:`.figures` ← :mod:`.html` — and nothing here trains or imports torch, so a
report can be rebuilt anywhere (``kernelgap report DIR``).
"""

from __future__ import annotations

from pathlib import Path

from .. import __version__
from ..io import atomic_write_json, atomic_write_text, read_json
from .html import render_probe_report, render_report
from .summary import build_summary, probe_section


def build_report(out: str | Path, profile: str | None = None, log=print) -> Path:
    """``summary.json`` and ``report.html`` for a reproduction folder."""
    out = Path(out)
    summary = build_summary(out, profile)
    if summary["wall_time_s"] is None:  # a folder whose runs recorded no time: keep the last report's
        summary["wall_time_s"] = (read_json(out / "summary.json") or {}).get("wall_time_s")
    atomic_write_json(out / "summary.json", summary)
    report = atomic_write_text(out / "report.html", render_report(summary, out))
    log(f"summary: {out / 'summary.json'}\nreport:  {report}")
    return report


def build_probe_report(out: str | Path, log=print) -> Path:
    """``summary.json`` (``{"probes": [one]}``), figures and ``report.html`` for a probe folder."""
    out = Path(out)
    probe = probe_section(out)
    summary = {"version": __version__, "profile": (probe or {}).get("profile"), "probes": [probe] if probe else None}
    atomic_write_json(out / "summary.json", summary)
    report = atomic_write_text(out / "report.html", render_probe_report(summary, out))
    log(f"summary: {out / 'summary.json'}\nreport:  {report}")
    return report


__all__ = ["build_probe_report", "build_report", "build_summary"]
