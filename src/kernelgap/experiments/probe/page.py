"""The probes' figure and HTML, and the page of a probe folder (``kernelgap probe … --out DIR``,
``kernelgap report DIR``): a table of every probed module beside the built-in baseline, then each
module on its own (what it is, how it was read, its verdicts per rank, its figure, every run)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ...probe.verdicts import judges_collapse
from ...report.figures import MODULE_COLOR, band, error_axes, legend, log2_axis, map_color, plt, points, save
from ...report.html import Page, page, paragraph, reached, table
from ..base import Figure
from .meter import meter_rows
from .text import probe_sentence, rank_certified, schedules_of, transition_text, verdict_text


def fmt_error(value) -> str:
    return "–" if value is None else f"{value:.4g}"


def probes_html(summary: dict, pg: Page) -> list[str]:
    """Every probed module: a table beside the built-in baseline, then each on its own — what it
    is, how it was read, its ranks, its runs' steps and time."""
    probes = summary.get("probes") or []
    if not probes:
        return []
    zoo = [_overview_row(pr, s) for pr in probes for s in pr.get("suites", [])]
    meter = meter_rows(summary)
    parts = ["<h3>Wall meter</h3>", table(meter), pg.figures("wall-meter")] if meter else []
    parts += [table(zoo)] if zoo else []
    for pr in probes:
        parts += _probe_html(pr, pg)
    return ["<h2>Probes</h2>", *parts]


def _overview_row(pr: dict, s: dict) -> dict:
    """One suite of one module in the table of every probe."""
    return {
        "module": pr["name"],
        "suite": s["name"],
        "criterion": s["criterion"],
        "structure": (s.get("structure") or {}).get("kind", "–"),
        "certified rank": rank_certified(s),
        "from rank": transition_text(s),
        f"{pr.get('baseline')} (built-in) from": reached(s["baseline_transition"], s["baseline_max_rank"]),
        "runs fitting train": f"{s['fitted_runs']}/{len(s['runs'])}",
        "verdicts": ", ".join(verdict_text(v, schedules_of(s)) for v in s.get("verdicts") or []),
        "steps": s["steps"],
        "time s": s["wall_time_s"],
    }


def _probe_html(pr: dict, pg: Page) -> list[str]:
    """One probed module: its heading and sentence, then (unless skipped) its facts, its
    verdicts, its figure and every run."""
    parts = [
        f"<h3>{html.escape(pr['name'])}: <code>{html.escape(str(pr.get('target')))}</code></h3>",
        paragraph(probe_sentence(pr)),
    ]
    if pr.get("skipped"):
        return parts
    counts = pr.get("parameters") or {}
    facts = [
        {
            "kwargs": json.dumps(pr.get("kwargs") or {}),
            "argument map": json.dumps(pr.get("args") or {}) if pr.get("args") else "–",
            "interface": pr.get("interface"),
            "reading": pr.get("reading"),
            "source sha256": (pr.get("source_hash") or "")[:16],
            "parameters (module / kernelgap wrapper)": f"{counts.get('module', '?')} / {counts.get('wrapper', '?')}",
        }
    ]
    verdict_rows = [_verdict_row(pr, s, v) for s in pr["suites"] for v in s.get("verdicts") or []]
    runs = [_run_row(s, r) for s in pr["suites"] for r in s["runs"] + s["baseline"] + _twin_runs(s)]
    return parts + [
        table(facts),
        table(verdict_rows) if verdict_rows else "",
        pg.file("probe", f"probe-{pr['name']}.png"),
        "<details><summary>every run (steps and time)</summary>" + table(runs) + "</details>",
    ]


def _verdict_row(pr: dict, s: dict, v: dict) -> dict:
    """One rank of one suite: the module's verdict and seeds, the recipes tried, the baseline's
    and the twin's verdicts, the query-blind floor."""
    qb = s.get("query_blind")
    return {
        "suite": s["name"],
        "rank argument": v["rank_argument"],
        "features": v["features"] if v["features"] is not None else "?",
        "verdict": v["verdict"],
        "seeds fitting": f"{v['fitted']}/{v['seeds']}",
        "seeds collapsed": v["collapsed"],
        "best max err": v["max_error"],
        "recipes tried": ", ".join(
            f"{schedules_of(s).get(t['recipe'], t['recipe'])}: {'exact' if t['exact'] else fmt_error(t['max_error'])}"
            for t in v["tried"]
        )
        or "–",
        f"{pr.get('baseline')} (built-in, same rank)": v.get("baseline") or "–",
        "same kernel, same wrapper": v.get("twin") or "–",
        "query-blind floor / uniform / ignored": (
            f"{qb['floor']} / {qb['max_error']:.4g} / " + fmt_error((qb.get("query_only") or {}).get("max_error"))
            if judges_collapse(qb)
            else "–"
        ),
    }


def _twin_runs(s: dict) -> list[dict]:
    return (s.get("twin") or {}).get("runs") or []


def _run_row(s: dict, r: dict) -> dict:
    """One run (the module's, the baseline's or the twin's) in the table of every run."""
    return {
        "suite": s["name"],
        "model": r["feature_map"],
        "rank argument": r["rank"],
        "features": r.get("features"),
        "seed": r["seed"],
        "status": r["status"],
        "steps": r["steps"],
        "wall s": r["wall_time_s"],
        "train max err": r["max_error"],
        "final loss": r.get("final_loss"),
        "test acc": r.get("test_exact_seq_acc"),
    }


def draw(summary: dict, out_dir) -> list[str]:
    """One figure per probed module (``probe-<name>``): its suites beside the built-in baseline."""
    files = []
    for p in summary["probes"]:
        suites = [s for s in p.get("suites", []) if points(s["runs"] + s["baseline"], "rank") >= 2]
        if not suites:
            continue
        fig, axes = plt.subplots(1, len(suites), figsize=(5 * len(suites), 3.8), squeeze=False)
        for ax, s in zip(axes[0], suites):
            key = "test_exact_seq_acc" if s["ood"] else "max_error"
            x = "features" if s.get("axis") == "features" else "rank"  # the baseline's rank is its features
            xs = band(ax, s["runs"], x, key, p.get("class") or "probe", MODULE_COLOR)
            xs += band(
                ax, s["baseline"], x, key, f"{p.get('baseline')} (built-in)", map_color(summary, p.get("baseline"))
            )
            twin = s.get("twin")
            if twin and x == "features":
                xs += band(
                    ax, twin["runs"], "features", key, f"{twin['map']} (built-in, same wrapper)", "#7f7f7f", "--"
                )
            title = f"{p['name']}: {s['name']}"
            label = "features (log2)" if x == "features" else "rank argument (log2)"
            if s["ood"]:
                log2_axis(ax, xs)
                ax.set_ylim(-0.02, 1.02)
                ax.set(xlabel=label, ylabel="test exact-seq accuracy", title=title)
                legend(ax)
            else:
                qb = s.get("query_blind")
                if judges_collapse(qb):
                    ax.axhline(qb["max_error"], color="#d62728", ls=":", lw=1, label="uniform attention (loss optimum)")
                    if qb.get("query_only"):
                        ax.axhline(
                            qb["query_only"]["max_error"], color="#9467bd", ls=":", lw=1, label="attention ignored"
                        )
                error_axes(ax, xs, rank_certified(s), label, "train max |error|", title)
        files += save(fig, out_dir, f"probe-{p['name']}")
    return files


PROBE_FIGURE = Figure("probe", draw)


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
