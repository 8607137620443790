"""The figure style every experiment's figures share (colours, axes, bands, saving), and the
bound curve and the layer series' figures, which ``kernelgap bound-curve`` draws outside a
reproduction too.  Figures are
drawn from ``summary.json`` only, as PNG and SVG.
"""

from __future__ import annotations

from collections import defaultdict
from io import BytesIO
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from ..io import atomic_write_bytes  # noqa: E402
from ..task.minip import EXACT_THRESHOLD  # noqa: E402

#: Colour of a module written elsewhere (every feature map carries its own: :func:`map_color`).
MODULE_COLOR = "#ff7f0e"


def map_color(summary: dict, name: str | None) -> str:
    """The colour a feature map declares in ``summary["feature_maps"]`` (else black)."""
    return ((summary.get("feature_maps") or {}).get(name) or {}).get("color", "black")


def save(fig, out_dir: Path, stem: str) -> list[str]:
    """``fig`` as ``out_dir/<stem>.png`` and ``.svg``, written atomically (never through a link)."""
    names = []
    for ext in ("png", "svg"):
        path = out_dir / f"{stem}.{ext}"
        drawn = BytesIO()
        fig.savefig(drawn, format=ext, dpi=150, bbox_inches="tight")
        atomic_write_bytes(path, drawn.getvalue(), out_dir)
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
        ticks = [2**k for k in range(ticks[0].bit_length() - 1, ticks[-1].bit_length())]
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


def map_bands(ax, summary: dict, rows: list[dict], xkey: str, ykey: str, label=str) -> list:
    """:func:`band` of each feature map's rows in its colour, labelled ``label(map)``."""
    xs = []
    for fm in sorted({r["feature_map"] for r in rows}):
        mine = [r for r in rows if r["feature_map"] == fm]
        xs += band(ax, mine, xkey, ykey, label(fm), map_color(summary, fm))
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


def error_axes(
    ax, xs, certified, xlabel: str, ylabel: str, title: str, certificate_label: str = "certificate", **legend_kw
) -> None:
    """Finish a max-error-against-features panel: the 1/2 line, the certificate, log axes."""
    exact_line(ax)
    certificate_line(ax, certified, certificate_label)
    log2_axis(ax, xs)
    ax.set_yscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    legend(ax, **legend_kw)


def accuracy_axes(ax, xs, xlabel: str, title: str, ylabel: str = "test exact-sequence accuracy", **legend_kw) -> None:
    """Finish an accuracy-against-features panel: a log2 x axis, accuracy from 0 to 1."""
    log2_axis(ax, xs)
    ax.set_ylim(-0.02, 1.02)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    legend(ax, **legend_kw)


def certified_in_full(curve: dict) -> bool:
    """Whether a bound curve's points hold a family certified in full rather than with chains."""
    return any("certified" in p for p in curve.get("points") or ())


def draw_bound_curve(payload: dict, out_dir: Path, stem: str = "bound_curve") -> list[str]:
    """Certified rank against m beside ``2^m``, ``m`` and the smallest exact trained ranks."""
    pts = payload["points"]
    ms = [p["m"] for p in pts]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if certified_in_full(payload):
        _in_full_bounds(ax, payload, ms)
    else:
        chains = f"certified rank (chains, step {payload.get('chain_step')})"
        ax.plot(ms, [p["certified_direct"] for p in pts], "o-", label="certified rank (direct)")
        ax.plot(ms, [p["certified_chained"] for p in pts], "s-", label=chains)
        ax.plot(ms, [p["trace_chained"] for p in pts], "x:", label="trace bound (chains)")
        ax.plot(ms, [p["queries"] for p in pts], ":", color="grey", label="queries n (the ceiling)")
    ax.plot(ms, [2.0**m for m in ms], "--", color="#1f77b4", label="positive construction 2^m")
    ax.plot(ms, ms, "-.", color="#17becf", label="dense softmax: score dimension m")
    for key, marker, label in (
        ("trained_any", "*", "trained table kernel: some seed exact from"),
        ("trained_most", "P", "trained table kernel: most seeds exact from"),
    ):
        done = [t for t in payload.get("trained", ()) if t.get(key) is not None]
        if done:
            xs, ys = [t["m"] for t in done], [t[key] for t in done]
            ax.scatter(xs, ys, marker=marker, s=70, color="#2ca02c", label=label, zorder=3)
    ax.set_yscale("log", base=2)
    title = f"Certified feature rank against m ({payload['code']} families)"
    ax.set(xlabel="token dimension m", ylabel="features (log2)", title=title)
    legend(ax)
    return save(fig, out_dir, stem)


def _in_full_bounds(ax, payload: dict, ms: list[int]) -> None:
    """Ranks certified in full, their trace bounds, the growth fit and the capped points."""
    pts = payload["points"]
    label = f"certified rank (every query of the largest {payload['code']} family)"
    ax.plot(ms, [p["certified"] for p in pts], "o-", color="#d62728", label=label)
    if all("trace" in p for p in pts):
        ax.plot(ms, [p["trace"] for p in pts], "x:", color="#ff7f0e", label="trace bound on the same family")
    growth = payload.get("growth")
    if growth:
        fit = [2.0 ** (growth["log2_per_m"] * m + growth["intercept"]) for m in ms]
        label = f"fit: 2^({growth['log2_per_m']:.3f}·m {growth['intercept']:+.2f})"
        ax.plot(ms, fit, "-", color="grey", lw=0.8, label=label)
    capped = [p for p in pts if p.get("limit_reached")]
    if capped:
        xs, ys = [p["m"] for p in capped], [p["certified"] for p in capped]
        ax.scatter(xs, ys, marker="^", s=60, color="#d62728", label="search limit reached (certified ≥)")


def draw_training_curves(curves: list[dict], out_dir: Path, stem: str, title: str) -> list[str]:
    """Max error on the training family against step (log y), one line per run of ``curves``
    (``{"label", "step", "max_error", "mse_steps"}``), the end of a mean-squared phase
    dotted; ``[]`` when no run has a point to draw."""
    lines = []
    for c in curves:
        pts = [(s, e) for s, e in zip(c["step"], c["max_error"]) if e is not None and e > 0]
        if pts:
            lines.append((c, pts))
    if not lines:
        return []
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for k, (c, pts) in enumerate(lines):
        color = tone(plt.cm.viridis, k, len(lines))
        ax.plot([s for s, _ in pts], [e for _, e in pts], lw=1, color=color, label=c["label"])
    for end in sorted({c.get("mse_steps") or 0 for c, _ in lines} - {0}):
        ax.axvline(end, color="grey", ls=":", lw=1)
    exact_line(ax)
    ax.set_yscale("log")
    ax.set(xlabel="training step", ylabel="train max error (log)", title=title)
    legend(ax)
    return save(fig, out_dir, stem)


# -- the layer series' figures (``kernelgap bound-curve --code layer`` and the context experiment;
# docs/theory.md, "The layer family"): every tolerance δ of a payload beside ``C(m, m/2)``,
# ``2^m`` and the pair certificates' ceiling, every number from the payload.

#: Colours of the layer curves, one per m (cycled).
LAYER_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")
#: Colours and markers of the tolerances, in the order a payload lists them (cycled).
DELTA_STYLES = (("#d62728", "o", "-"), ("#2ca02c", "s", "--"), ("#9467bd", "^", "-."))


def delta_of(row: dict) -> str:
    """The tolerance a point or curve was certified at (1/2 where a payload predates δ)."""
    return row.get("delta") or "1/2"


def code_name(row: dict) -> str:
    """The code a row certifies: a Graham–Sloane class, or the whole weight-m/2 layer."""
    return "whole layer" if row.get("distance") == 2 else "Graham–Sloane class"


def by_delta(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows grouped by tolerance, in the order they first appear."""
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(delta_of(row), []).append(row)
    return out


def _style(k: int) -> tuple[str, str, str]:
    return DELTA_STYLES[k % len(DELTA_STYLES)]


def draw_length_curve(payload: dict, out_dir: Path, stem: str = "context_length") -> list[str]:
    """The certified rank against context length N (log y), one curve per (m, δ) — colour by
    m, style by δ — with n, ``C(m, m/2)`` and ``2^m``, and the least N certifying all n."""
    curves = payload["curves"]
    if not curves:
        return []
    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    ms = list(dict.fromkeys(c["m"] for c in curves))
    deltas = list(dict.fromkeys(delta_of(c) for c in curves))
    for c in curves:
        color = LAYER_COLORS[ms.index(c["m"]) % len(LAYER_COLORS)]
        _, marker, ls = _style(deltas.index(delta_of(c)))
        pts = c["points"]
        xs, ys = [p["length"] for p in pts], [p["certified"] for p in pts]
        label = f"m = {c['m']}, δ = {delta_of(c)} ({code_name(c)})"
        ax.plot(xs, ys, marker=marker, ls=ls, ms=3, color=color, label=f"{label}: certified rank")
        if c["n"] != c["layer_size"]:
            ax.axhline(c["n"], color=color, ls=":", lw=1, label=f"m = {c['m']}: class size n = {c['n']:,}")
        if c["full_from"] is not None:
            full = f"{label}: all n from N = {c['full_from']:,}"
            ax.scatter([c["full_from"]], [c["n"]], marker="*", s=120, color=color, zorder=4, label=full)
    _size_lines(ax, curves, ms)
    title = f"Certified rank against context length N (layer codes, δ = {', '.join(deltas)})"
    ax.set(xlabel="context length N", ylabel="features (log)", title=title)
    legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, out_dir, stem)


def _size_lines(ax, curves: list[dict], ms: list[int]) -> None:
    """Once per m, ``C(m, m/2)`` and ``2^m``; a log N axis where lengths span over a factor 40."""
    for k, m in enumerate(ms):
        c = next(c for c in curves if c["m"] == m)
        color = LAYER_COLORS[k % len(LAYER_COLORS)]
        for key, ls, name in (("layer_size", "--", "C(m, m/2)"), ("positive_construction", "-.", "2^m")):
            ax.axhline(c[key], color=color, ls=ls, lw=0.8, alpha=0.7, label=f"m = {m}: {name} = {c[key]:,}")
    ax.set_yscale("log")
    lengths = [p["length"] for c in curves for p in c["points"]]
    if max(lengths) > 40 * min(lengths):
        ax.set_xscale("log")


def draw_wall_curve(payload: dict, out_dir: Path, stem: str = "context_wall") -> list[str]:
    """Per (m, δ), the certified rank at the smallest N certifying the whole code, labelled
    with ``log2 r / m`` and that N, beside n, ``C(m, m/2)`` and ``2^m``."""
    pts = payload["points"]
    if not pts:
        return []
    ms = sorted({p["m"] for p in pts})
    fig, ax = plt.subplots(figsize=(6.6, 4.6))
    for k, (delta, rows) in enumerate(by_delta(pts).items()):
        color, marker, ls = _style(k)
        x = [p["m"] for p in rows]
        label = f"δ = {delta} ({code_name(rows[0])}): certified at the smallest N certifying all n"
        ax.plot(x, [p["certified"] for p in rows], marker=marker, ls=ls, color=color, label=label)
        if any(p["n"] != p["layer_size"] for p in rows):
            ax.plot(x, [p["n"] for p in rows], ":", color=color, label=f"δ = {delta}: code size n")
        for p in rows:
            where = f"N = {p['length']:,}" if p["length"] is not None else "N > search"
            ax.annotate(
                f"{p['log2_rank_per_m']:.2f}\n{where}",
                (p["m"], p["certified"]),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                va="bottom",
                fontsize=6,
                color=color,
            )
    first = {p["m"]: p for p in pts}
    ax.plot(ms, [first[m]["layer_size"] for m in ms], "--", color="black", lw=0.8, label="middle layer C(m, m/2)")
    ax.plot(
        ms, [first[m]["positive_construction"] for m in ms], "-.", color="#1f77b4", label="positive construction 2^m"
    )
    ax.plot([], [], " ", label="labels: log2 r / m, and that N")
    ax.set_yscale("log", base=2)
    ax.set_xticks(ms)
    title = "The whole code certified: rank and log2 r / m against m"
    ax.set(xlabel="token dimension m", ylabel="features (log2)", title=title)
    legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, out_dir, stem)


def draw_ratio_curve(payload: dict, out_dir: Path, stem: str = "context_ratio") -> list[str]:
    """Against m, each δ's certified rank r at its smallest full N: ``r/2^m`` (log y) beside
    the ceiling and ``√(2/(πm))``, and ``log2 r / m`` beside the paper's 1."""
    pts = payload["points"]
    if not pts or not all("ratio_to_positive" in p for p in pts):
        return []
    ms = sorted({p["m"] for p in pts})
    fig, (share, exponent) = plt.subplots(1, 2, figsize=(10.4, 4.2))
    for k, (delta, rows) in enumerate(by_delta(pts).items()):
        color, marker, ls = _style(k)
        x = [p["m"] for p in rows]
        label = f"δ = {delta}: certified r ({code_name(rows[0])})"
        share.plot(x, [p["ratio_to_positive"] for p in rows], marker=marker, ls=ls, color=color, label=label)
        exponent.plot(x, [p["log2_rank_per_m"] for p in rows], marker=marker, ls=ls, color=color, label=label)
    by_gap: dict[int, dict[int, dict]] = {}
    for p in pts:
        if p.get("ceiling") is not None:
            by_gap.setdefault(p["ceiling_gap"], {})[p["m"]] = p
    for k, (gap, rows) in enumerate(sorted(by_gap.items())):
        x = sorted(rows)
        label = f"ceiling of every pair certificate (gap {gap})"
        ls = ("--", ":", "-.")[k % 3]
        share.plot(x, [rows[m]["ceiling_ratio"] for m in x], ls=ls, color="black", lw=1, label=label)
        exponent.plot(x, [rows[m]["log2_ceiling_per_m"] for m in x], ls=ls, color="black", lw=1, label=label)
    first = {p["m"]: p for p in pts}
    share.plot(ms, [first[m]["layer_asymptote"] for m in ms], ":", color="grey", label="√(2/(πm)): C(m, m/2)/2^m → 0")
    share.axhline(1.0, color="#1f77b4", ls="-.", lw=1, label="2^m (ratio 1)")
    exponent.axhline(1.0, color="#1f77b4", ls="-.", lw=1, label="2^m: log2 r / m = 1 (the paper's limit)")
    share.set_yscale("log")
    share.set(xlabel="token dimension m", ylabel="r / 2^m (log)", title="Share of the 2^m features certified")
    exponent.set(xlabel="token dimension m", ylabel="log2 r / m", title="The exponent log2 r / m")
    for ax in (share, exponent):
        ax.set_xticks(ms)
        legend(ax)
    return save(fig, out_dir, stem)


def draw_wall_and_ratio(payload: dict, out_dir: Path, stem: str) -> list[str]:
    """``bound-curve --code layer`` against m: the wall figure and the ratio figure (``<stem>-ratio``)."""
    return draw_wall_curve(payload, out_dir, stem) + draw_ratio_curve(payload, out_dir, f"{stem}-ratio")
