"""``report.html``: one self-contained page (figures embedded) from ``summary.json``."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..io import atomic_write_text
from .beyond import render_beyond
from .common import fmt, html_table, img_tag
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
}


def bound_curve_caption(curve: dict) -> str:
    """What the bound-curve figure shows, from its numbers."""
    pts = curve["points"]
    text = (f"Certified lower bound on the rank of one nonnegative kernel head against m "
            f"({curve['code']} families, m = {pts[0]['m']}…{pts[-1]['m']}), beside the positive "
            "construction (rank 2^m) and dense softmax (m-dimensional scores).")
    if curve["code"] == "ladder":
        last = pts[-1]
        text += (f" At m = {last['m']} every one of {last['queries']:,} queries is certified "
                 f"({'the search limit' if last.get('limit_reached') else 'the largest family found'})")
        growth = curve.get("growth")
        if growth:
            text += f"; log2 of the certified rank grows by {growth['log2_per_m']:.3f} per unit of m (least squares)"
        checks = [p["softmax"] for p in pts]
        worst = max(c["max_error"] for c in checks)
        text += (f". Dense softmax's construction was checked on {checks[0]['sampled']:,} random sequences of "
                 f"each family: {'exact on all' if all(c['exact'] for c in checks) else 'NOT exact on all'} "
                 f"(worst max error {worst:.3f}).")
    return text


def detail_tables(summary: dict) -> list[str]:
    """The OOD problem sizes and the witness runs, as tables."""
    parts = []
    scales = (summary.get("ood") or {}).get("scales") or []
    if scales:
        rows = [{"size": sc["label"], "train seqs": sc["train_sequences"],
                 "test seqs": sc["test_sequences"], "gap ≥ 2 share": fmt(sc.get("test_gap_share"), ".2f"),
                 "transition (acc ≥ 0.95)": fmt(sc.get("transition_rank")),
                 "transition (max err < 1/2)": fmt(sc.get("transition_rank_max_error")),
                 "softmax test acc": ", ".join(fmt(s.get("test_exact_seq_acc"), ".3f") for s in sc["softmax"]),
                 "softmax test max err": ", ".join(fmt(s.get("test_max_error"), ".2f") for s in sc["softmax"])}
                for sc in scales]
        parts.append("<h2>OOD problem sizes</h2><p>Every test token (query and candidate) is unseen "
                     "in training; 'gap ≥ 2 share' is the share of test sequences whose answer needs a "
                     "choice between overlaps at least 2 apart.</p>" + html_table(rows, list(rows[0])))
    w = summary.get("witness")
    if w and w.get("runs"):
        rows = [{"map": r["feature_map"], "rank": r["rank"], "seed": r["seed"],
                 "max error": fmt(r["max_error"], ".3f"), "exact": "yes" if r["exact"] else "no",
                 "exact-seq acc": fmt(r["exact_seq_acc"], ".3f"), "steps": r["steps"], "status": r["status"]}
                for r in w["runs"]]
        parts.append("<h2>Witness runs</h2><details><summary>show all runs</summary>" +
                     html_table(rows, list(rows[0])) + "</details>")
    return parts


def render_html(summary: dict, out_dir: Path) -> str:
    figures = draw_all(summary, out_dir / "figures")
    parts = [f"<h1>kernelgap reproduction ({html.escape(summary.get('profile', '?'))} profile)</h1>",
             f"<p>kernelgap {html.escape(summary.get('version', '?'))}. Every number below comes from "
             "the run files under this folder; <code>summary.json</code> holds them all.</p>",
             "<h2>The paper beside ours</h2>",
             html_table(comparison_rows(summary), ["quantity", "paper", "ours", "note"])]
    beyond = render_beyond(summary, out_dir, figures)  # issue #6: takes its own figures out
    for name, files in figures.items():
        png = out_dir / "figures" / files[0]
        caption = bound_curve_caption(summary["bound_curve"]) if name == "bound_curve" else CAPTIONS.get(name, name)
        parts.append(f"<figure>{img_tag(png)}<figcaption>{html.escape(caption)}"
                     "</figcaption></figure>")
    parts += detail_tables(summary)
    parts.append(beyond)
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
