"""``report.html``: one self-contained page (figures embedded) from ``summary.json``."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from ..io import atomic_write_text
from .compare import comparison_rows
from .figures import draw_all

CSS = """
body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}
th{background:#f3f3f3}
code,pre{background:#f6f6f6;padding:2px 4px}
figure{margin:1.5em 0} figcaption{font-size:0.9em;color:#555}
img{max-width:100%}
"""

CAPTIONS = {
    "witness": "Max error on the witness family against feature rank (median and seed range). "
               "Below the certified bound no nonnegative kernel model can be exact; dashed: 1/2.",
    "ood": "Exact-sequence accuracy on test sequences whose every token is unseen in training.",
    "length": "Rank-1 kernel attention: exact for N ≤ 2, not for N = 3.",
    "bound_curve": "Certified lower bound on the rank against m, beside the exponential positive "
                   "construction and the m-dimensional softmax scores.",
}


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{path.stem}" src="data:image/png;base64,{data}">'


def _table(rows: list[dict], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>"
        for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(summary: dict, out_dir: Path) -> str:
    figures = draw_all(summary, out_dir / "figures")
    parts = [f"<h1>kernelgap reproduction ({html.escape(summary.get('profile', '?'))} profile)</h1>",
             f"<p>kernelgap {html.escape(summary.get('version', '?'))}. Every number below comes from "
             "the run files under this folder; <code>summary.json</code> holds them all.</p>",
             "<h2>The paper beside ours</h2>",
             _table(comparison_rows(summary), ["quantity", "paper", "ours", "note"])]
    for name, files in figures.items():
        png = out_dir / "figures" / files[0]
        parts.append(f"<figure>{_img(png)}<figcaption>{html.escape(CAPTIONS.get(name, name))}"
                     "</figcaption></figure>")
    for section in summary.get("extra_sections", []):
        parts.append(section)
    cmds = summary.get("commands") or []
    if cmds:
        parts.append("<h2>How this was produced</h2><pre>" +
                     html.escape("\n".join(cmds)) + "</pre>")
    parts.append("<h2>summary.json</h2><details><summary>show</summary><pre>" +
                 html.escape(json.dumps(summary, indent=1)[:200_000]) + "</pre></details>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>kernelgap report</title>"
            f"<style>{CSS}</style></head><body>" + "\n".join(parts) + "</body></html>")


def write_report(summary: dict, out_dir: Path) -> Path:
    return atomic_write_text(out_dir / "report.html", render_html(summary, out_dir))
