"""``report.html`` of a probe folder (``kernelgap probe … --out DIR``, ``kernelgap report DIR``):
the probe's figure and HTML on a page of their own."""

from __future__ import annotations

import html
from pathlib import Path

from ...report.html import Page, page
from .blocks import probes_html
from .figure import PROBE_FIGURE


def render_probe_report(summary: dict, out_dir: Path) -> str:
    """``report.html`` of a probe folder (``{"probes": [one]}``)."""
    fig_dir = out_dir / "figures"
    drawn = {}
    if summary.get("probes"):
        files = PROBE_FIGURE.draw(summary, fig_dir)
        if files:
            drawn["probe"] = files
    return page(
        "kernelgap probe",
        [
            f"<h1>kernelgap probe ({html.escape(str(summary.get('profile')))} suites)</h1>",
            *probes_html(summary, Page(summary, drawn, fig_dir)),
        ],
    )
