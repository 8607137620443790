"""Figures of the reproduction, drawn from ``summary.json`` only (issue #5).

Every figure is written as PNG and SVG, with labelled axes and a log2 rank axis.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from .summary import OOD_SOLVED_ACC  # noqa: E402

EXACT_LINE = 0.5
COLORS = {"table": "#1f77b4", "mlp_exp": "#d62728", "elu1": "#2ca02c", "relu": "#9467bd",
          "favor": "#8c564b", "hedgehog": "#e377c2", "taylor": "#7f7f7f", "signed": "#bcbd22",
          "signed_table": "#17becf"}


def _save(fig, out_dir: Path, stem: str) -> list[str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for ext in ("png", "svg"):
        path = out_dir / f"{stem}.{ext}"
        fig.savefig(path, dpi=150, bbox_inches="tight")
        names.append(path.name)
    plt.close(fig)
    return names


def _log2_rank_axis(ax, ranks) -> None:
    """A log2 axis labelled at the ranks used; past 12 of them, at the powers of two."""
    ax.set_xscale("log", base=2)
    ticks = sorted({int(r) for r in ranks})
    if len(ticks) > 12:
        ticks = [2 ** k for k in range(ticks[0].bit_length() - 1, ticks[-1].bit_length())]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(t) for t in ticks])


def _by_rank(runs, key):
    """``{rank: [values over seeds]}``."""
    out = defaultdict(list)
    for r in runs:
        if r.get(key) is not None:
            out[r["rank"]].append(r[key])
    return dict(sorted(out.items()))


def _band(ax, by_rank, label, color, marker="o"):
    ranks = list(by_rank)
    if not ranks:
        return
    lo = [min(v) for v in by_rank.values()]
    hi = [max(v) for v in by_rank.values()]
    med = [sorted(v)[len(v) // 2] for v in by_rank.values()]
    ax.fill_between(ranks, lo, hi, color=color, alpha=0.18, linewidth=0)
    ax.plot(ranks, med, marker=marker, color=color, label=label)
    for r, vals in by_rank.items():
        ax.scatter([r] * len(vals), vals, s=8, color=color, alpha=0.6)


def witness_figure(summary: dict, out_dir: Path) -> list[str]:
    """Train max error against rank, certified bound, the 1/2 line, softmax."""
    w = summary["witness"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    maps = sorted({r["feature_map"] for r in w["runs"]})
    ranks = [r["rank"] for r in w["runs"]] or [1]
    for name in maps:
        runs = [r for r in w["runs"] if r["feature_map"] == name]
        _band(ax, _by_rank(runs, "max_error"), name, COLORS.get(name, "black"))
    ax.axhline(EXACT_LINE, color="black", ls="--", lw=1, label="exact threshold 1/2")
    if w.get("certified_rank"):
        ax.axvline(w["certified_rank"], color="#ff7f0e", ls=":", lw=1.5,
                   label=f"certified bound r ≥ {w['certified_rank']}")
    if w.get("softmax"):
        best = max(s["max_error"] for s in w["softmax"])
        ax.axhline(best, color="#17becf", ls="-.", lw=1, label=f"dense softmax (worst seed {best:.2f})")
    _log2_rank_axis(ax, ranks)
    ax.set_yscale("log")
    ax.set_xlabel("feature rank r (log2)")
    ax.set_ylabel("max |error| on the witness family")
    ax.set_title(f"Witness family: m = {w['m']}, {w['sequences']} sequences")
    ax.legend(fontsize=7, loc="lower left")
    return _save(fig, out_dir, "witness_error_vs_rank")


def ood_figure(summary: dict, out_dir: Path) -> list[str]:
    """Test exact-sequence accuracy against rank, one curve per problem size."""
    scales = summary["ood"]["scales"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    cmap = plt.get_cmap("viridis")
    ranks = [1]
    for k, sc in enumerate(scales):
        color = cmap(k / max(1, len(scales) - 1) * 0.85)
        ranks += [r["rank"] for r in sc["runs"]]
        _band(ax, _by_rank(sc["runs"], "test_exact_seq_acc"), f"{sc['label']} (kernel)", color)
        if sc.get("softmax"):
            accs = [s["test_exact_seq_acc"] for s in sc["softmax"]]
            ax.scatter([max(ranks) * 2] * len(accs), accs, marker="*", s=70, color=color,
                       label=f"{sc['label']} softmax")
    ax.axhline(OOD_SOLVED_ACC, color="black", ls="--", lw=1, label=f"solved: accuracy ≥ {OOD_SOLVED_ACC}")
    _log2_rank_axis(ax, ranks + [max(ranks) * 2])
    labels = [t.get_text() for t in ax.get_xticklabels()]
    labels[-1] = "softmax"
    ax.set_xticklabels(labels)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("feature rank r (log2)")
    ax.set_ylabel("exact-sequence accuracy on unseen test tokens")
    ax.set_title("OOD scaling: disjoint train/test token pools")
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, out_dir, "ood_accuracy_vs_rank")


def length_figure(summary: dict, out_dir: Path) -> list[str]:
    """Max error at rank 1 against sequence length, constructed and trained."""
    rows = summary["length"]
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for source, marker, color in (("constructed", "s", "#1f77b4"), ("trained", "o", "#d62728")):
        pts = sorted((r["N"], r["max_error"]) for r in rows if r.get("source") == source)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color,
                    label=f"rank 1, {source}")
    ax.axhline(EXACT_LINE, color="black", ls="--", lw=1, label="exact threshold 1/2")
    ax.set_xticks([1, 2, 3])
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("max |error|")
    ax.set_title("Length transition at rank 1")
    ax.legend(fontsize=8)
    return _save(fig, out_dir, "length_transition")


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
    ax.set_xlabel("token dimension m")
    ax.set_ylabel("features (log2)")
    ax.set_title(f"Certified feature rank against m ({payload['code']} families)")
    ax.legend(fontsize=7)
    return _save(fig, out_dir, stem)


def bound_curve_figure(summary: dict, out_dir: Path) -> list[str]:
    return draw_bound_curve(summary["bound_curve"], out_dir)


FIGURES = {
    "witness": witness_figure,
    "ood": ood_figure,
    "length": length_figure,
    "bound_curve": bound_curve_figure,
}
from .beyond import BEYOND_FIGURES  # noqa: E402  (issue #6; beyond imports figures lazily)

FIGURES.update(BEYOND_FIGURES)


def draw_all(summary: dict, out_dir: Path) -> dict[str, list[str]]:
    """Draw every figure whose section is in the summary; ``{name: [files]}``."""
    return {name: fn(summary, out_dir) for name, fn in FIGURES.items()
            if summary.get(name) not in (None, [], {})}
