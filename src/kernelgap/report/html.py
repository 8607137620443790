"""What every experiment's report part shares: the words of its sentences (each computed from
``summary.json``, never typed in) and its HTML (one self-contained page, tables, figures)."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from .glance import CELL_LIMIT, PARAGRAPH_LIMIT, Item, clause, outline, short


def fmt(x, spec: str = ".2f") -> str:
    """``–`` for a missing value, floats with ``spec``, anything else as ``str``."""
    if x is None:
        return "–"
    return format(x, spec) if isinstance(x, float) else str(x)


def reached(value, top, unit: str = "") -> str:
    """A transition, or how far the grid went without reaching it."""
    if value is not None:
        return f"{unit}{value}"
    return f"not reached up to {unit}{top}" if top is not None else "not run"


def exact_from(value, top, unit: str = "r") -> str:
    return f"exact from {unit} = {value}" if value is not None else f"not exact up to {unit} = {top}"


def share(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{100 * lo:.0f} %" if round(100 * lo) == round(100 * hi) else f"{100 * lo:.0f}–{100 * hi:.0f} %"


def of(hits: int, total: int) -> str:
    """``3 of 5``: a count among a total (a conclusion of :mod:`kernelgap.reproduction.compare`)."""
    return f"{hits} of {total}"


def yes_no(value) -> str:
    """``yes``, ``no``, or ``–`` for a verdict not reached (``None``)."""
    return "–" if value is None else ("yes" if value else "no")


CSS = """
body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}
th{background:#f3f3f3}
code,pre{background:#f6f6f6;padding:2px 4px}
figure{margin:1.5em 0} figcaption{font-size:0.9em;color:#555}
img{max-width:100%}
ul.glance{font-size:1.1em;line-height:1.5}
"""


def table(rows: list[dict], cols: list[str] | None = None, spec: str = ".3g") -> str:
    """An HTML table of ``rows`` (dicts) over ``cols`` (default: the first row's keys); a cell
    over :data:`~kernelgap.report.glance.CELL_LIMIT` characters is shortened and given in full
    as a note under the table (:func:`fitted`)."""
    cols = cols or (list(rows[0]) if rows else [])
    rows, notes = fitted([{c: fmt(r.get(c), spec) for c in cols} for r in rows], cols)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(r[c])}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>" + "".join(
        paragraph(f"Note {i}. {text}") for i, text in enumerate(notes, 1)
    )


def figure(path: Path, text: str = "") -> str:
    """A PNG embedded as a data URI (the report stays one self-contained file)."""
    data = base64.b64encode(path.read_bytes()).decode()
    said = html.escape(text) if len(text) <= PARAGRAPH_LIMIT else paragraph(text, "span")  # a long one: lead, details
    cap = f"<figcaption>{said}</figcaption>" if text else ""
    return f'<figure><img alt="{path.stem}" src="data:image/png;base64,{data}">{cap}</figure>'


def paragraph(text: str, tag: str = "p") -> str:
    """``text`` as one paragraph where it fits :data:`~kernelgap.report.glance.PARAGRAPH_LIMIT`,
    else its first short sentences (:func:`lead`) and the rest as a list under a collapsed
    ``<details>`` (:func:`~kernelgap.report.glance.outline`): no paragraph over the limit."""
    if len(text) <= PARAGRAPH_LIMIT:
        return f"<{tag}>{html.escape(text)}</{tag}>"
    shown, rest = lead(outline(text))
    more = f"<details><summary>{len(rest)} more</summary>{_list(rest)}</details>" if rest else ""
    return f"<{tag}>{html.escape(' '.join(shown))}</{tag}>{more}"


#: The most characters of the sentences a long paragraph shows before its details.
LEAD_LIMIT = 300


def lead(items: list[Item]) -> tuple[list[str], list[Item]]:
    """The first sentences of an outline that fit :data:`LEAD_LIMIT` together (at least one;
    a sentence split into an enumeration ends the lead, as does a first sentence over the limit,
    split at its enumeration, after its head and first item), and the items left for the details."""
    first = items[0]
    if len(first.text) > LEAD_LIMIT:
        split = clause(first.text, LEAD_LIMIT)
        first = Item(split.text, split.items + first.items)
    shown, total, rest = [first.text], len(first.text), list(first.items)
    if first.text.endswith(":") and rest and not rest[0].items and total + len(rest[0].text) < LEAD_LIMIT:
        shown.append(rest.pop(0).text)  # a head says little without its first item
        total += len(shown[-1]) + 1
    for i, item in enumerate(items[1:], 1):
        if rest or item.items or total + len(item.text) > LEAD_LIMIT:
            return shown, rest + list(items[i:])
        shown.append(item.text)
        total += len(item.text) + 1
    return shown, rest


def _list(items) -> str:
    return (
        "<ul>" + "".join(f"<li>{html.escape(i.text)}{_list(i.items) if i.items else ''}</li>" for i in items) + "</ul>"
    )


def fitted(rows: list[dict], cols: list[str], limit: int = CELL_LIMIT) -> tuple[list[dict], list[str]]:
    """``rows`` with every cell over ``limit`` characters shortened (:func:`~kernelgap.report.glance.short`)
    and pointing to a note, and the notes in order: the full text, to be shown under the table."""
    notes: list[str] = []
    out = []
    for row in rows:
        row = dict(row)
        for c in cols:
            text = row.get(c)
            if isinstance(text, str) and len(text) > limit:
                notes.append(text)
                mark = f" (note {len(notes)})"
                row[c] = short(text, limit - len(mark)) + mark
        out.append(row)
    return out, notes


class Finding(NamedTuple):
    """A headline finding: one short sentence with its number, computed from ``summary.json``,
    and ``edge`` where it is *at the edge* (:func:`~kernelgap.report.criteria.at_edge`: why,
    e.g. ``2 of 3 seeds exact``), ``None`` where it is firm (a proof, a check on every input,
    or seeds that all agree)."""

    text: str
    edge: str | None = None


def findings(found: list[Finding]) -> list[str]:
    """The headline screen: each finding on one line, firm or at the edge."""
    if not found:
        return []
    items = "".join(
        f"<li>{html.escape(f.text)} <em>({'firm' if f.edge is None else 'at the edge: ' + html.escape(f.edge)})</em></li>"
        for f in found
    )
    return [
        "<h2>At a glance</h2><ul class='glance'>" + items + "</ul>",
        "<p><em>firm</em>: a proof, a check on every input, or every seed agreeing; <em>at the edge</em>: "
        "the seeds disagree or there is one, so another CPU's rounding may read it otherwise.</p>",
    ]


def titled(title: str, text: str | None, *parts: str) -> list[str]:
    """An experiment's block: its title, its sentence (when it has one), then ``parts``."""
    return [f"<h3>{html.escape(title)}</h3>", paragraph(text) if text else "", *parts]


def page(title: str, parts: list[str]) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body>" + "\n".join(p for p in parts if p) + "</body></html>"
    )


class Page:
    """What an experiment's ``html(summary, page)`` is given: the figures drawn and their captions."""

    def __init__(
        self, summary: dict, drawn: Mapping[str, list[str]], fig_dir: Path, figures: Mapping[str, object] | None = None
    ):
        self.summary, self.drawn, self.fig_dir = summary, drawn, fig_dir
        self._figures = figures or {}

    def figures(self, *names: str) -> str:
        """The named figures that were drawn, embedded with their captions."""
        return "".join(figure(self.fig_dir / self.drawn[n][0], self._caption(n)) for n in names if n in self.drawn)

    def file(self, name: str, file: str) -> str:
        """One file of a figure that draws several (``""`` when it was not drawn)."""
        return figure(self.fig_dir / file) if file in self.drawn.get(name, []) else ""

    def _caption(self, name: str) -> str:
        fig = self._figures.get(name)
        return fig.caption_for(self.summary) if fig is not None else ""


def provenance(summary: dict) -> list[str]:
    runs = summary.get("invocations") or [{"command": c} for c in summary.get("commands") or []]
    if not runs:
        return []
    lines = [
        f"{i['command']}" + (f"    # {i['wall_time_s']:.0f} s" if i.get("wall_time_s") is not None else "")
        for i in runs
    ]
    total = f"<p>Total wall time: {summary['wall_time_s']:.0f} s.</p>" if summary.get("wall_time_s") else ""
    return ["<h2>How this was produced</h2><pre>" + html.escape("\n".join(lines)) + "</pre>" + total]
