"""Figures, drawn from ``summary.json`` only; each as PNG and SVG with labelled axes.

:data:`FIGURES` names every figure; a figure is drawn when its section is in the
summary and some series of it has at least two points.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from ..task.minip import EXACT_THRESHOLD  # noqa: E402
from .criteria import OOD_SOLVED_ACC  # noqa: E402

COLORS = {"table": "#1f77b4", "mlp_exp": "#d62728", "elu1": "#2ca02c", "relu": "#9467bd",
          "favor": "#8c564b", "hedgehog": "#e377c2", "taylor": "#7f7f7f", "signed": "#bcbd22",
          "signed_table": "#17becf", "module": "#ff7f0e"}


def save(fig, out_dir: Path, stem: str) -> list[str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for ext in ("png", "svg"):
        path = out_dir / f"{stem}.{ext}"
        fig.savefig(path, dpi=150, bbox_inches="tight")
        names.append(path.name)
    plt.close(fig)
    return names


def log2_axis(ax, values) -> None:
    """A log2 x axis labelled at the values used; past 12 of them, at the powers of two."""
    ticks = sorted({int(v) for v in values if v})
    if not ticks:
        return
    ax.set_xscale("log", base=2)
    if len(ticks) > 12:
        ticks = [2 ** k for k in range(ticks[0].bit_length() - 1, ticks[-1].bit_length())]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(t) for t in ticks])


def band(ax, rows: list[dict], xkey: str, ykey: str, label: str, color, ls: str = "-") -> list:
    """Median line over seeds with the seed range shaded and each seed dotted; returns the x values."""
    by = defaultdict(list)
    for r in rows:
        if r.get(ykey) is not None and r.get(xkey) is not None:
            by[r[xkey]].append(r[ykey])
    xs = sorted(by)
    if not xs:
        return []
    ax.fill_between(xs, [min(by[x]) for x in xs], [max(by[x]) for x in xs], color=color, alpha=0.15, lw=0)
    ax.plot(xs, [sorted(by[x])[len(by[x]) // 2] for x in xs], marker="o", ms=3, color=color, ls=ls, label=label)
    for x in xs:
        ax.scatter([x] * len(by[x]), by[x], s=6, color=color, alpha=0.5)
    return xs


def tone(cmap, k: int, n: int):
    """The k-th of n colours spread over a colour map (its light end left out)."""
    return cmap(k / max(1, n - 1) * 0.85)


def points(rows: list[dict], key: str) -> int:
    return len({r[key] for r in rows if r.get(key) is not None})


def exact_line(ax) -> None:
    ax.axhline(EXACT_THRESHOLD, color="black", ls="--", lw=1, label="exact threshold 1/2")


def certificate_line(ax, rank, label: str = "certificate") -> None:
    if rank:
        ax.axvline(rank, color="#ff7f0e", ls=":", lw=1.5, label=f"{label} r ≥ {rank}")


def legend(ax, **kw) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, **kw)


def error_axes(ax, xs, certified, xlabel: str, ylabel: str, title: str,
               certificate_label: str = "certificate", **legend_kw) -> None:
    """Finish a max-error-against-features panel: the 1/2 line, the certificate, log axes."""
    exact_line(ax)
    certificate_line(ax, certified, certificate_label)
    log2_axis(ax, xs)
    ax.set_yscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    legend(ax, **legend_kw)


# -- the paper's experiments ------------------------------------------------------------------

def witness_figure(summary: dict, out_dir: Path) -> list[str]:
    """Train max error against rank, the certificate, the 1/2 line, softmax."""
    w = summary["witness"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    xs = []
    for fm in sorted({r["feature_map"] for r in w["runs"]}):
        xs += band(ax, [r for r in w["runs"] if r["feature_map"] == fm], "rank", "max_error", fm,
                   COLORS.get(fm, "black"))
    if w.get("softmax"):
        worst = max(s["max_error"] for s in w["softmax"])
        ax.axhline(worst, color="#17becf", ls="-.", lw=1, label=f"dense softmax (worst seed {worst:.2f})")
    error_axes(ax, xs, w.get("certified_rank"), "feature rank r (log2)", "max |error| on the witness family",
               f"Witness family: m = {w['m']}, {w['sequences']} sequences", "certified bound", loc="lower left")
    return save(fig, out_dir, "witness_error_vs_rank")


def series_figure(summary: dict, out_dir: Path) -> list[str]:
    """Smallest exact rank against n: certified, constructed, trained per map, the trace bound."""
    series = summary["series"]
    ns = [f["n"] for f in series]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(ns, [f["certified_rank"] for f in series], "-", color="#ff7f0e", lw=2, label="certified (Radon)")
    ax.plot(ns, [f["trace_rank"] for f in series], ":", color="#ff7f0e", label="trace bound")
    ax.scatter([f["n"] for f in series if f["constructed_exact"]],
               [f["constructed_rank"] for f in series if f["constructed_exact"]], marker="s", s=60,
               facecolors="none", edgecolors="black", label="one-hot construction, exact")
    for k, fm in enumerate(sorted({fm for f in series for fm in f["trained"]})):
        hit = [(f["n"], f["trained"][fm]["exact_from"]) for f in series if f["trained"].get(fm, {}).get("exact_from")]
        miss = [(f["n"], max(f["trained"][fm]["ranks"])) for f in series
                if fm in f["trained"] and f["trained"][fm]["exact_from"] is None]
        offset = 0.25 * (k - 0.5)
        ax.scatter([n + offset for n, _ in hit], [r for _, r in hit], marker="o", color=COLORS.get(fm, "black"),
                   label=f"trained {fm} (most seeds exact)")
        if miss:
            ax.scatter([n + offset for n, _ in miss], [r for _, r in miss], marker="o", facecolors="none",
                       edgecolors=COLORS.get(fm, "black"), label=f"{fm}: not exact up to")
    ax.set(xlabel="queries n of the witness family", ylabel="smallest exact rank",
           title="Certified, constructed and trained rank, family after family")
    legend(ax, loc="upper left")
    return save(fig, out_dir, "series")


def ood_figure(summary: dict, out_dir: Path) -> list[str]:
    """Test exact-sequence accuracy against rank, one curve per problem size."""
    scales = summary["ood"]["scales"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    cmap = plt.get_cmap("viridis")
    xs = []
    for k, sc in enumerate(scales):
        color = tone(cmap, k, len(scales))
        xs += band(ax, sc["runs"], "rank", "test_exact_seq_acc", f"{sc['label']} (kernel)", color)
    top = max(xs, default=1) * 2
    for k, sc in enumerate(scales):
        accs = [s["test_exact_seq_acc"] for s in sc.get("softmax", []) if s["test_exact_seq_acc"] is not None]
        if accs:
            ax.scatter([top] * len(accs), accs, marker="*", s=70, color=tone(cmap, k, len(scales)),
                       label=f"{sc['label']} softmax")
    ax.axhline(OOD_SOLVED_ACC, color="black", ls="--", lw=1, label=f"solved: accuracy ≥ {OOD_SOLVED_ACC}")
    log2_axis(ax, xs + [top])
    labels = [t.get_text() for t in ax.get_xticklabels()]
    labels[-1] = "softmax"
    ax.set_xticklabels(labels)
    ax.set_ylim(-0.02, 1.02)
    ax.set(xlabel="feature rank r (log2)", ylabel="exact-sequence accuracy on unseen test tokens",
           title="OOD scaling: disjoint train/test token pools")
    legend(ax, loc="lower right")
    return save(fig, out_dir, "ood_accuracy_vs_rank")


def length_figure(summary: dict, out_dir: Path) -> list[str]:
    """Max error at rank 1 against sequence length, constructed and trained."""
    rows = summary["length"]
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for source, marker, color in (("constructed", "s", "#1f77b4"), ("trained", "o", "#d62728")):
        pts = sorted((r["N"], r["max_error"]) for r in rows if r.get("source") == source)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=f"rank 1, {source}")
    exact_line(ax)
    ax.set_xticks([1, 2, 3])
    ax.set(xlabel="sequence length N", ylabel="max |error|", title="Length transition at rank 1")
    legend(ax)
    return save(fig, out_dir, "length_transition")


def draw_bound_curve(payload: dict, out_dir: Path, stem: str = "bound_curve") -> list[str]:
    """Certified rank against m (log2 axis) beside the 2^m positive construction and the
    m-dimensional softmax scores; for the ladder series with the fitted growth line."""
    pts = payload["points"]
    ms = [p["m"] for p in pts]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if payload["code"] == "ladder":
        ax.plot(ms, [p["certified"] for p in pts], "o-", color="#d62728",
                label="certified rank (every query of the largest ladder family)")
        ax.plot(ms, [p["trace"] for p in pts], "x:", color="#ff7f0e", label="trace bound on the same family")
        growth = payload.get("growth")
        if growth:
            fit = [2.0 ** (growth["log2_per_m"] * m + growth["intercept"]) for m in ms]
            ax.plot(ms, fit, "-", color="grey", lw=0.8,
                    label=f"fit: 2^({growth['log2_per_m']:.3f}·m {growth['intercept']:+.2f})")
        capped = [p for p in pts if p.get("limit_reached")]
        if capped:
            ax.scatter([p["m"] for p in capped], [p["certified"] for p in capped], marker="^", s=60,
                       color="#d62728", label="search limit reached (certified ≥)")
    else:
        ax.plot(ms, [p["certified_direct"] for p in pts], "o-", label="certified rank (direct)")
        ax.plot(ms, [p["certified_chained"] for p in pts], "s-",
                label=f"certified rank (chains, step {payload.get('chain_step')})")
        ax.plot(ms, [p["trace_chained"] for p in pts], "x:", label="trace bound (chains)")
        ax.plot(ms, [p["queries"] for p in pts], ":", color="grey", label="queries n (the ceiling)")
    ax.plot(ms, [2.0 ** m for m in ms], "--", color="#1f77b4", label="positive construction 2^m")
    ax.plot(ms, ms, "-.", color="#17becf", label="dense softmax: score dimension m")
    ax.set_yscale("log", base=2)
    ax.set(xlabel="token dimension m", ylabel="features (log2)",
           title=f"Certified feature rank against m ({payload['code']} families)")
    legend(ax)
    return save(fig, out_dir, stem)


def bound_curve_figure(summary: dict, out_dir: Path) -> list[str]:
    return draw_bound_curve(summary["bound_curve"], out_dir)


# -- beyond the paper ---------------------------------------------------------------------------

def signed_figure(summary: dict, out_dir: Path) -> list[str]:
    sec = summary["loopholes"]
    if not sec.get("signed"):
        return []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    xs = []
    runs = sec["signed"]["witness"]["runs"] + sec["signed"]["witness"].get("nonnegative_runs", [])
    signed = {r["feature_map"] for r in sec["signed"]["witness"]["runs"]}
    for fm in sorted({r["feature_map"] for r in runs}):
        xs += band(ax1, [r for r in runs if r["feature_map"] == fm], "features", "max_error",
                   f"{fm} (signed)" if fm in signed else fm, COLORS.get(fm, "black"))
    error_axes(ax1, xs, sec.get("certified_rank"), "features (log2)", "train max |error|",
               "Witness family: signed vs nonnegative")
    xs = []
    ood_runs = {s["n"]: s["runs"] for s in ((summary.get("ood") or {}).get("scales") or [])}
    cmap = plt.get_cmap("viridis")
    sizes = sec["signed"]["ood"]
    for k, size in enumerate(sizes):
        color = tone(cmap, k, len(sizes))
        for fm in sorted({r["feature_map"] for r in size["runs"]}):
            xs += band(ax2, [r for r in size["runs"] if r["feature_map"] == fm], "rank", "test_exact_seq_acc",
                       f"{fm} n={size['n']}", color)
        xs += band(ax2, ood_runs.get(size["n"], []), "rank", "test_exact_seq_acc", f"mlp_exp n={size['n']}",
                   color, ls="--")
    log2_axis(ax2, xs)
    ax2.set_ylim(-0.02, 1.02)
    ax2.set(xlabel="feature rank r (log2)", ylabel="test exact-sequence accuracy",
            title="OOD: signed (solid) vs mlp_exp (dashed)")
    legend(ax2)
    return save(fig, out_dir, "beyond_signed")


def heads_figure(summary: dict, out_dir: Path) -> list[str]:
    sec = summary["loopholes"]
    heads = sec.get("heads")
    if not heads:
        return []
    maps = list(heads["per_map"])
    series = [[r for r in heads["runs"] if r["feature_map"] == fm and r["heads"] == h]
              for fm in maps for h in {r["heads"] for r in heads["runs"]}]
    if max(points(s, "features") for s in series) < 2:
        return []  # one total per head count: the table says it all
    fig, axes = plt.subplots(1, len(maps), figsize=(5.4 * len(maps), 4.2), squeeze=False)
    cmap = plt.get_cmap("plasma")
    for ax, fm in zip(axes[0], maps):
        runs = [r for r in heads["runs"] if r["feature_map"] == fm]
        hs = sorted({r["heads"] for r in runs})
        xs = []
        for k, h in enumerate(hs):
            xs += band(ax, [r for r in runs if r["heads"] == h], "features", "max_error", f"H = {h}",
                       tone(cmap, k, len(hs)))
        error_axes(ax, xs, sec.get("certified_rank"), "total features H·r (log2)", "train max |error|",
                   f"Several heads at fixed total ({fm}, witness)", "1-head certificate")
    return save(fig, out_dir, "beyond_heads")


def zoo_figure(summary: dict, out_dir: Path) -> list[str]:
    z = summary["zoo"]
    has_ood = bool(z["ood_runs"])
    fig, axes = plt.subplots(1, 1 + has_ood, figsize=(5 * (1 + has_ood), 4), squeeze=False)
    ax1 = axes[0][0]
    xs1, xs2 = [], []
    for fm in sorted({r["feature_map"] for r in z["witness_runs"] + z["ood_runs"]}):
        color = COLORS.get(fm, "black")
        xs1 += band(ax1, [r for r in z["witness_runs"] if r["feature_map"] == fm], "features", "max_error", fm, color)
        if has_ood:
            xs2 += band(axes[0][1], [r for r in z["ood_runs"] if r["feature_map"] == fm], "features",
                        "test_exact_seq_acc", fm, color)
    error_axes(ax1, xs1, z.get("certified_rank"), "features (log2)", "train max |error|",
               "The zoo on the witness family")
    if has_ood:
        ax2 = axes[0][1]
        log2_axis(ax2, xs2)
        ax2.set_ylim(-0.02, 1.02)
        ax2.set(xlabel="features (log2)", ylabel="test exact-sequence accuracy", title=f"The zoo on OOD {z['ood_label']}")
        legend(ax2)
    return save(fig, out_dir, "beyond_zoo")


def precision_figure(summary: dict, out_dir: Path) -> list[str]:
    p = summary["precision"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    cmap = plt.get_cmap("viridis")
    keys = sorted({(m["feature_map"], m["rank"]) for m in p["models"]})
    for k, (fm, r) in enumerate(keys):
        for mode, ls in (("uniform", "-"), ("float", "--")):
            rows = [q for m in p["models"] if (m["feature_map"], m["rank"]) == (fm, r)
                    for q in m["quantized"] if q["quantizer"] == mode]
            band(ax, rows, "bits", "max_error", f"{fm} r={r} ({mode})", tone(cmap, k, len(keys)), ls)
    exact_line(ax)
    ax.set_yscale("log")
    ax.set(xlabel="bits per sketch number b", ylabel="max |error| (median over seeds)",
           title="Finite-precision sketch on the witness family")
    legend(ax)
    return save(fig, out_dir, "beyond_precision")


def probe_figure(summary: dict, out_dir: Path) -> list[str]:
    """One figure per probed module (``probe-<name>``): its suites beside the built-in baseline."""
    files = []
    for p in summary["probes"]:
        suites = [s for s in p.get("suites", []) if points(s["runs"] + s["baseline"], "rank") >= 2]
        if not suites:
            continue
        fig, axes = plt.subplots(1, len(suites), figsize=(5 * len(suites), 3.8), squeeze=False)
        for ax, s in zip(axes[0], suites):
            key = "test_exact_seq_acc" if s["ood"] else "max_error"
            xs = band(ax, s["runs"], "rank", key, p.get("class") or "probe", COLORS["module"])
            xs += band(ax, s["baseline"], "rank", key, f"{p.get('baseline')} (built-in)",
                       COLORS.get(p.get("baseline"), "black"))
            title = f"{p['name']}: {s['name']}"
            if s["ood"]:
                log2_axis(ax, xs)
                ax.set_ylim(-0.02, 1.02)
                ax.set(xlabel="rank (log2)", ylabel="test exact-seq accuracy", title=title)
                legend(ax)
            else:
                error_axes(ax, xs, s.get("certified_rank"), "rank (log2)", "train max |error|", title)
        files += save(fig, out_dir, f"probe-{p['name']}")
    return files


#: Every figure: ``name → draw(summary, folder) → files`` (drawn when ``section`` is present).
FIGURES = {
    "series": ("series", series_figure), "witness": ("witness", witness_figure), "ood": ("ood", ood_figure),
    "length": ("length", length_figure),
    "bound_curve": ("bound_curve", bound_curve_figure), "signed": ("loopholes", signed_figure),
    "heads": ("loopholes", heads_figure), "zoo": ("zoo", zoo_figure),
    "precision": ("precision", precision_figure), "probe": ("probes", probe_figure),
}


def draw_all(summary: dict, out_dir: Path, names=None) -> dict[str, list[str]]:
    """Draw every figure whose section is in the summary; ``{name: [files]}`` (drawn only)."""
    drawn = {}
    for name, (section, draw) in FIGURES.items():
        if (names is None or name in names) and summary.get(section) not in (None, [], {}):
            files = draw(summary, out_dir)
            if files:
                drawn[name] = files
    return drawn
