"""Probes in a table: one row per probed module, suite and rank, with its verdict
(:func:`~kernelgap.probe.verdicts.rank_verdicts`, as the report reads it: :func:`.section.probe_section`),
the module's true feature count and the baseline's and the twin's verdicts — what ``kernelgap
probe`` prints at its end and ``kernelgap results`` tabulates for several probe folders."""

from __future__ import annotations

from pathlib import Path

from ...errors import KernelgapError
from .section import probe_section
from .text import named_verdict, schedules_of, verdict_text

#: The columns of :func:`probe_rows_of`, in order.
COLUMNS = ("folder", "module", "suite", "rank", "features", "verdict", "max_error", "baseline", "twin")


def probe_rows_of(folder: str | Path) -> list[dict]:
    """One row per suite and rank argument of the probe in ``folder`` (:data:`COLUMNS`, and
    ``text``: the verdict in words, as the report says it)."""
    folder = Path(folder)
    probe = probe_section(folder)
    if probe is None:
        raise KernelgapError(f"{folder} holds no probe (no probe.json); run `kernelgap probe … --out {folder}`")
    rows = []
    for s in probe["suites"]:
        schedules = schedules_of(s)
        for v in s["verdicts"]:
            rows.append(
                {
                    "folder": str(folder),
                    "module": probe.get("class"),
                    "suite": s["name"],
                    "rank": v["rank_argument"],
                    "features": v["features"],
                    "verdict": named_verdict(v, schedules),
                    "max_error": v["max_error"],
                    "baseline": v.get("baseline"),
                    "twin": v.get("twin"),
                    "text": f"{probe.get('class')} {s['name']}: rank {verdict_text(v, schedules)}",
                }
            )
    return rows


def probes_markdown(folders: list[str | Path]) -> str:
    """A Markdown table of the probes in ``folders`` (:func:`probe_rows_of`), in the order given."""
    rows = [row for folder in folders for row in probe_rows_of(folder)]
    head = ["folder", "module", "suite", "rank", "features", "verdict", "max error", "built-in baseline", "twin"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r[c] for c in COLUMNS]
        cells[6] = f"{r['max_error']:.4g}" if r["max_error"] is not None else None
        lines.append("| " + " | ".join("–" if c is None else str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
