"""The layer series' figures (``kernelgap bound-curve --code layer`` and the context
experiment; docs/theory.md, "The layer family"): every tolerance δ of a payload beside
``C(m, m/2)``, ``2^m`` and the pair certificates' ceiling, every number from the payload.
"""

from __future__ import annotations

from pathlib import Path

from .figures import legend, plt, save

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
