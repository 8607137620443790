"""``report.html``: one self-contained page (figures embedded), from ``summary.json`` alone."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from .criteria import OOD_SOLVED_ACC
from .figures import draw_all
from .text import caption, comparison_rows, fmt, probe_sentence, reached, sentences, series_sentence

CSS = """
body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}
th{background:#f3f3f3}
code,pre{background:#f6f6f6;padding:2px 4px}
figure{margin:1.5em 0} figcaption{font-size:0.9em;color:#555}
img{max-width:100%}
"""
PAPER_FIGURES = ("witness", "ood", "length", "bound_curve")


def series_section(summary: dict, drawn: dict, fig_dir: Path) -> list[str]:
    """The certificate against construction and training on every family of the series."""
    series = summary.get("series")
    if not series:
        return []
    maps = sorted({fm for f in series for fm in f["trained"]})
    rows = [{"n": f["n"], "sequences": f["sequences"], "trace bound": f["trace_rank"],
             "certified (Radon)": f["certified_rank"],
             "constructed": f"{f['constructed_rank']} ({'exact' if f['constructed_exact'] else 'NOT exact'})",
             **{f"{fm} exact from": reached(f["trained"][fm]["exact_from"], max(f["trained"][fm]["ranks"]))
                for fm in maps if fm in f["trained"]}} for f in series]
    return ["<h2>The series: proved, constructed and trained rank</h2>", f"<p>{html.escape(series_sentence(series))}</p>",
            _figures(drawn, ("series",), fig_dir, summary), table(rows)]


def table(rows: list[dict], cols: list[str] | None = None, spec: str = ".3g") -> str:
    """An HTML table of ``rows`` (dicts) over ``cols`` (default: the first row's keys)."""
    cols = cols or (list(rows[0]) if rows else [])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(r.get(c), spec))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def figure(path: Path, text: str = "") -> str:
    """A PNG embedded as a data URI (the report stays one self-contained file)."""
    data = base64.b64encode(path.read_bytes()).decode()
    cap = f"<figcaption>{html.escape(text)}</figcaption>" if text else ""
    return f'<figure><img alt="{path.stem}" src="data:image/png;base64,{data}">{cap}</figure>'


def page(title: str, parts: list[str]) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>" + "\n".join(p for p in parts if p) + "</body></html>")


def _figures(drawn: dict, names, fig_dir: Path, summary: dict) -> str:
    return "".join(figure(fig_dir / files[0], caption(name, summary))
                   for name, files in drawn.items() if name in names)


def detail_tables(summary: dict) -> list[str]:
    """The OOD problem sizes and the witness runs, as tables."""
    parts = []
    scales = (summary.get("ood") or {}).get("scales") or []
    if scales:
        rows = [{"size": sc["label"], "train seqs": sc["train_sequences"], "test seqs": sc["test_sequences"],
                 "gap ≥ 2 share": sc.get("test_gap_share"),
                 f"transition (acc ≥ {OOD_SOLVED_ACC})": sc.get("transition_rank"),
                 "transition over fitted runs": sc.get("transition_rank_fitted"),
                 "transition (max err < 1/2)": sc.get("transition_rank_max_error"),
                 "runs not fitting train": len(sc.get("unfitted_runs", [])),
                 "softmax test acc": ", ".join(fmt(s.get("test_exact_seq_acc"), ".3f") for s in sc["softmax"]),
                 "softmax test max err": ", ".join(fmt(s.get("test_max_error"), ".2f") for s in sc["softmax"])}
                for sc in scales]
        parts.append("<h2>OOD problem sizes</h2><p>Every test token (query and candidate) is unseen in "
                     "training; 'gap ≥ 2 share' is the share of test sequences whose answer needs a choice "
                     "between overlaps at least 2 apart.</p>" + table(rows))
    w = summary.get("witness")
    if w and w.get("runs"):
        rows = [{"map": r["feature_map"], "rank": r["rank"], "seed": r["seed"], "max error": r["max_error"],
                 "exact": "yes" if r["exact"] else "no", "exact-seq acc": r["exact_seq_acc"],
                 "steps": r["steps"], "status": r["status"]} for r in w["runs"]]
        parts.append("<h2>Witness runs</h2><details><summary>show all runs</summary>" + table(rows) + "</details>")
    return parts


def beyond_section(summary: dict, drawn: dict, fig_dir: Path) -> list[str]:
    """Signed kernels, several heads, the zoo and finite precision."""
    text = sentences(summary)
    lo = summary.get("loopholes") or {}
    parts = []
    if lo.get("signed"):
        t = lo["signed"]["witness"]["transition"]
        rows = [{"map": fm, "exact from (features)": reached(v["transition"], v["max_tried"])} for fm, v in t.items()]
        rows.append({"map": "certificate (nonnegative)", "exact from (features)": lo.get("certified_rank")})
        ood = [{"n": s["n"], "map": fm, f"test acc ≥ {OOD_SOLVED_ACC} from": reached(v["transition"], v["max_tried"])}
               for s in lo["signed"]["ood"] for fm, v in s["transition_solved"].items()]
        parts += ["<h3>Signed kernels</h3>", f"<p>{html.escape(text['signed'])}</p>", table(rows),
                  table(ood) if ood else "", _figures(drawn, ("signed",), fig_dir, summary)]
    if lo.get("heads"):
        per_map = lo["heads"]["per_map"]
        hs = sorted({int(h) for ph in per_map.values() for h in ph})
        rows = [{"heads H": h, **{f"{fm}: exact from total H·r": reached(ph[str(h)]["transition_total"],
                                                                          ph[str(h)]["max_total"])
                                  for fm, ph in per_map.items() if str(h) in ph}} for h in hs]
        parts += ["<h3>Several heads at a fixed total</h3>", f"<p>{html.escape(text['heads'])}</p>", table(rows),
                  _figures(drawn, ("heads",), fig_dir, summary)]
    z = summary.get("zoo")
    if z:
        rows = []
        for r in z["table"]:
            row = {"map": r["feature_map"],
                   "witness: exact from (features)": reached(r["witness_transition"], r["witness_max_features"])}
            if "ood_transition_solved" in r:
                row[f"OOD {z['ood_label']}: acc ≥ {OOD_SOLVED_ACC} from"] = reached(r["ood_transition_solved"],
                                                                                  r["ood_max_features"])
                row["OOD best test acc"] = r["ood_best_test_acc"]
            rows.append(row)
        parts += ["<h3>The feature-map zoo at the wall</h3>", f"<p>{html.escape(text['zoo'])}</p>", table(rows),
                  _figures(drawn, ("zoo",), fig_dir, summary)]
    p = summary.get("precision")
    if p:
        parts += ["<h3>Finite precision</h3>", f"<p>{html.escape(text['precision'])}</p>",
                  "<p>Quantizer: symmetric uniform with one scale per sketch tensor (b bits incl. sign), "
                  "or a float with a b-bit significand.</p>",
                  table(p["collapse"], ["feature_map", "rank", "quantizer", "collapse_bits", "sketch_numbers",
                                        "sketch_bits_at_collapse"]),
                  _figures(drawn, ("precision",), fig_dir, summary)]
    if not parts:
        return []
    return ["<h2>Beyond the paper</h2>",
            "<p>What the paper leaves open, measured: signed kernels, several heads, the practical feature "
            "maps at the wall, finite precision.</p>", *parts]


def probe_section(summary: dict, drawn: dict, fig_dir: Path, level: int = 3) -> list[str]:
    """Every probed module: a table beside the built-in baseline, then each on its own — what it
    is, how it was read, its ranks, its runs' steps and time."""
    probes = summary.get("probes") or []
    if not probes:
        return []
    h = f"h{level}"
    zoo = []
    for pr in probes:
        for s in pr.get("suites", []):
            zoo.append({"module": pr["name"], "suite": s["name"], "criterion": s["criterion"],
                        "certified rank": s.get("certified_rank"),
                        "from rank": reached(s["transition_rank"], s["max_rank"]),
                        f"{pr.get('baseline')} (built-in) from": reached(s["baseline_transition"], s["baseline_max_rank"]),
                        "runs fitting train": f"{s['fitted_runs']}/{len(s['runs'])}",
                        "steps": s["steps"], "time s": s["wall_time_s"]})
    parts = [table(zoo)] if zoo else []
    for pr in probes:
        parts += [f"<{h}>{html.escape(pr['name'])}: <code>{html.escape(str(pr.get('target')))}</code></{h}>",
                  f"<p>{html.escape(probe_sentence(pr))}</p>"]
        if pr.get("skipped"):
            continue
        counts = pr.get("parameters") or {}
        facts = [{"kwargs": json.dumps(pr.get("kwargs") or {}),
                  "argument map": json.dumps(pr.get("args") or {}) if pr.get("args") else "–",
                  "interface": pr.get("interface"), "reading": pr.get("reading"),
                  "source sha256": (pr.get("source_hash") or "")[:16],
                  "parameters (module / kernelgap wrapper)": f"{counts.get('module', '?')} / {counts.get('wrapper', '?')}"}]
        runs = [{"suite": s["name"], "model": r["feature_map"], "rank": r["rank"], "seed": r["seed"],
                 "status": r["status"], "steps": r["steps"], "wall s": r["wall_time_s"], "train max err": r["max_error"],
                 "test acc": r.get("test_exact_seq_acc")} for s in pr["suites"] for r in s["runs"] + s["baseline"]]
        stem = f"probe-{pr['name']}.png"
        parts += [table(facts), figure(fig_dir / stem) if stem in drawn.get("probe", []) else "",
                  "<details><summary>every run (steps and time)</summary>" + table(runs) + "</details>"]
    return [f"<h{level - 1}>Probes</h{level - 1}>", *parts]


def provenance(summary: dict) -> list[str]:
    runs = summary.get("invocations") or [{"command": c} for c in summary.get("commands") or []]
    if not runs:
        return []
    lines = [f"{i['command']}" + (f"    # {i['wall_time_s']:.0f} s" if i.get("wall_time_s") is not None else "")
             for i in runs]
    total = f"<p>Total wall time: {summary['wall_time_s']:.0f} s.</p>" if summary.get("wall_time_s") else ""
    return ["<h2>How this was produced</h2><pre>" + html.escape("\n".join(lines)) + "</pre>" + total]


def _comparison(summary: dict) -> list[str]:
    rows = comparison_rows(summary)
    return ["<h2>The paper beside ours</h2>", table(rows, ["quantity", "paper", "ours", "note"])] if rows else []


def render_report(summary: dict, out_dir: Path) -> str:
    fig_dir = out_dir / "figures"
    drawn = draw_all(summary, fig_dir)
    parts = [f"<h1>kernelgap reproduction ({html.escape(summary.get('profile', '?'))} profile)</h1>",
             f"<p>kernelgap {html.escape(summary.get('version', '?'))}. Every number below comes from the run "
             "files under this folder; <code>summary.json</code> holds them all.</p>",
             *_comparison(summary), *series_section(summary, drawn, fig_dir),
             _figures(drawn, PAPER_FIGURES, fig_dir, summary),
             *detail_tables(summary), *beyond_section(summary, drawn, fig_dir),
             *probe_section(summary, drawn, fig_dir), *provenance(summary),
             "<h2>summary.json</h2><details><summary>show</summary><pre>"
             + html.escape(json.dumps(summary, indent=1)[:200_000]) + "</pre></details>"]
    return page("kernelgap report", parts)


def render_probe_report(summary: dict, out_dir: Path) -> str:
    fig_dir = out_dir / "figures"
    drawn = draw_all(summary, fig_dir, names=("probe",))
    return page("kernelgap probe", [f"<h1>kernelgap probe ({html.escape(str(summary.get('profile')))} suites)</h1>",
                                    *probe_section(summary, drawn, fig_dir)])
