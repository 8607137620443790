"""``report.html`` and its figures, from ``summary.json`` alone, filled by each registered experiment."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..experiments.base import REGIONS
from ..experiments.registry import experiments as registered
from ..report.glance import PARAGRAPH_LIMIT, outline
from ..report.html import Finding, Page, findings, fitted, lead, page, provenance, table, titled


def _exps(experiments) -> list:
    return registered() if experiments is None else list(experiments)


def present(summary: dict, exp) -> bool:
    """Whether the summary holds the experiment's section (not null, not empty)."""
    return summary.get(exp.summary_key) not in (None, [], {})


def markdown_table(rows: list[dict], columns: list[str], fit: bool = False) -> list[str]:
    """The lines of a Markdown table of ``rows`` (cells on one line, ``|`` escaped, ``–`` for none);
    with ``fit`` a cell over :data:`~kernelgap.report.glance.CELL_LIMIT` is shortened and given
    in full as a note under the table (:func:`~kernelgap.report.html.fitted`)."""

    def cell(text) -> str:
        return " ".join(str(text if text is not None else "–").split())

    rows = [{c: cell(r.get(c)) for c in columns} for r in rows]
    rows, notes = fitted(rows, columns) if fit else (rows, [])
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(row[c].replace("|", "\\|") for c in columns) + " |" for row in rows]
    return out + [line for i, text in enumerate(notes, 1) for line in ["", *markdown_prose(f"Note {i}. {text}")]]


def markdown_prose(text: str, title: str = "") -> list[str]:
    """``text`` as Markdown lines after ``title``: one paragraph where it fits, else its lead and
    the rest as a list under a collapsed ``<details>`` (as :func:`~kernelgap.report.html.paragraph`)."""
    if len(title) + len(text) <= PARAGRAPH_LIMIT:
        return [title + text]
    shown, rest = lead(outline(text))
    return [
        title + " ".join(shown),
        "",
        f"<details><summary>{len(rest)} more</summary>",
        "",
        *_bullets(rest),
        "",
        "</details>",
    ]


def _bullets(items, depth: int = 0) -> list[str]:
    return [line for i in items for line in ["  " * depth + f"- {i.text}", *_bullets(i.items, depth + 1)]]


def draw_all(summary: dict, out_dir: Path, experiments=None) -> dict[str, list[str]]:
    """Draw every figure whose experiment's section is in the summary; ``{name: [files]}``."""
    drawn = {}
    for exp in _exps(experiments):
        if present(summary, exp):
            for fig in exp.figures:
                files = fig.draw(summary, out_dir)
                if files:
                    drawn[fig.name] = files
    return drawn


def comparison_rows(summary: dict, experiments=None) -> list[dict]:
    """The rows of "The paper beside ours", experiment after experiment."""
    return [
        row for exp in _exps(experiments) if exp.paper_rows and present(summary, exp) for row in exp.paper_rows(summary)
    ]


def main_findings(summary: dict, experiments=None) -> list[Finding]:
    """The main findings, experiment after experiment (each experiment's ``headline``)."""
    return [f for exp in _exps(experiments) if exp.headline and present(summary, exp) for f in exp.headline(summary)]


def sentences(summary: dict, experiments=None) -> dict[str, str]:
    """Each experiment's sentence, where its numbers are present."""
    out = {}
    for exp in _exps(experiments):
        text = exp.sentence(summary) if exp.sentence and present(summary, exp) else None
        if text:
            out[exp.name] = text
    return out


def _default_html(exp, summary: dict, pg: Page) -> dict[str, list[str]]:
    """An experiment without HTML of its own: its title, its sentence, its figures."""
    text = exp.sentence(summary) if exp.sentence else None
    return {exp.region: titled(exp.title, text, pg.figures(*(f.name for f in exp.figures)))}


def blocks(summary: dict, drawn: dict, fig_dir: Path, experiments) -> dict[str, list[str]]:
    """Every present experiment's HTML per region, in registry order: ``region → [(title, [html, …])]``."""
    pg = Page(summary, drawn, fig_dir, {f.name: f for e in experiments for f in e.figures})
    out: dict[str, list] = {r: [] for r in REGIONS}
    for exp in experiments:
        if not present(summary, exp):
            continue
        made = exp.html(summary, pg) if exp.html else _default_html(exp, summary, pg)
        for region, parts in made.items():
            parts = [p for p in parts if p]
            if parts:
                out[region].append((exp.title, parts))
    return out


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def region(summary: dict, drawn: dict, fig_dir: Path, name: str, experiments=None) -> list[str]:
    """One region of the page: its heading (for ``beyond``) and its experiments' blocks."""
    return _region(name, blocks(summary, drawn, fig_dir, _exps(experiments))[name])


def _region(name: str, entries: list) -> list[str]:
    parts = [p for _, ps in entries for p in ps]
    if not parts or name != "beyond":
        return parts
    titles = ", ".join(_lower_first(title) for title, _ in entries)
    return ["<h2>Beyond the paper</h2>", f"<p>What the paper leaves open, measured: {html.escape(titles)}.</p>", *parts]


def render_report(summary: dict, out_dir: Path, experiments=None) -> str:
    exps, fig_dir = _exps(experiments), out_dir / "figures"
    regions = blocks(summary, draw_all(summary, fig_dir, exps), fig_dir, exps)
    rows = comparison_rows(summary, exps)
    comparison = ["<h2>The paper beside ours</h2>", table(rows, ["quantity", "paper", "ours", "note"])] if rows else []
    parts = [
        f"<h1>kernelgap reproduction ({html.escape(summary.get('profile', '?'))} profile)</h1>",
        f"<p>kernelgap {html.escape(summary.get('version', '?'))}. Every number below comes from the run "
        "files under this folder; <code>summary.json</code> holds them all.</p>",
        *findings(main_findings(summary, exps)),
        *comparison,
        *(p for name in REGIONS for p in _region(name, regions[name])),
        *provenance(summary),
        "<h2>summary.json</h2><details><summary>show</summary><pre>"
        + html.escape(json.dumps(summary, indent=1)[:200_000])
        + "</pre></details>",
    ]
    return page("kernelgap report", parts)
