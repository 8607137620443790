"""The wall in context length: how far the certificate climbs as the context length N grows.

The layer product family (docs/theory.md, "The layer family") holds n words of the
weight-m/2 layer, complements as candidates, and every sequence of one query and N − 1
candidates.  Gap domination at length N gives ``ρ_N = 2δ/((N − 2)(gap − 2δ))``
(docs/theory.md, "Gap domination at length N").  At δ = 1/2 the code is the largest
Graham–Sloane class (gap 2): every pair has ``ε_ij ε_ji ≤ 1/(N − 2)²`` and the Radon bound
certifies all n words once ``(N − 2)² ≥ n − 1``.  Below 1/2 (``whole_layer_delta``, gap 1)
it is the whole middle layer, ``n = C(m, m/2)``, the ceiling of every pair certificate
(docs/theory.md), certified once ``(N − 2)² > (2δ/(1 − 2δ))²(n − 1)``.  The step
(``curves.json``) certifies the family against N at fixed m and, per (δ, m), finds the
smallest N certifying the whole code (checked at that N and one shorter); the sweep trains
table kernels at one (m, N) where the certificate is n.  Every sentence (:mod:`.text`) is
computed from those files; the paper's claim is kept beside ours.
"""

from __future__ import annotations

from typing import Literal

from ...report.criteria import grouped
from ...report.figures import (
    band,
    delta_of,
    draw_length_curve,
    draw_ratio_curve,
    draw_wall_curve,
    error_axes,
    plt,
    save,
)
from ...report.html import Finding, table
from ...report.trained import Growth, TrainedFamily, trained_section
from ...validation import JsonInt, JsonNumber, Section, json_at_least
from ..base import Experiment, Figure
from .text import PAPER, closest, conclusions, paper_rows, sentence

TITLE = "The wall in context length"

#: The columns of the per-m table of the report.
WALL_COLUMNS = """delta m n predicted_length length certified below_length certified_below constructed_rank
proved_equals_constructed log2_rank_per_m log2_layer_per_m ratio_to_positive ceiling at_ceiling layer_size
positive_construction""".split()


# -- the summary section ------------------------------------------------------------------


class AtLength(Section):
    """The rank certified at one context length."""

    length: JsonInt
    certified: JsonInt


class CurvePoint(Section):
    """One length of a curve: its certified rank and the method that gave it."""

    length: json_at_least(3)
    certified: json_at_least(0)
    trace: JsonInt
    radon: JsonInt
    method: Literal["radon", "trace"]
    whole_set: bool | None = None
    seconds: JsonNumber | None = None


class _Code(Section):
    delta: str = "1/2"
    distance: JsonInt = 4
    length_rule: str | None = None
    m: json_at_least(2)
    n: json_at_least(1)


class LengthCurve(_Code):
    """One ``(δ, m)``: the certified rank as the context grows, and the last length short of
    the whole code (``last_short``)."""

    layer_size: JsonInt
    positive_construction: JsonInt
    wall_guess: JsonInt | None = None
    full_from: JsonInt | None
    last_short: AtLength | None
    points: list[CurvePoint]


class WallRow(_Code):
    """One ``(δ, m)`` at its wall length: whether the formula holds, how close to ``2^m`` the
    rank gets, and the ceiling of every pair certificate (absent in rows written before)."""

    predicted_length: json_at_least(3)
    length: JsonInt | None
    certified: json_at_least(0)
    method: str | None = None
    tried: list[AtLength] | None = None
    below_length: JsonInt | None
    certified_below: JsonInt | None
    formula_holds: bool
    log2_rank_per_m: JsonNumber
    log2_layer_per_m: JsonNumber
    layer_size: JsonInt
    positive_construction: JsonInt
    constructed_rank: JsonInt | None
    proved_equals_constructed: bool | None
    construction_error: JsonNumber | None = None
    ratio_to_positive: JsonNumber | None = None
    layer_ratio: JsonNumber | None = None
    layer_asymptote: JsonNumber | None = None
    ceiling: JsonInt | None = None
    ceiling_gap: JsonInt | None = None
    ceiling_ratio: JsonNumber | None = None
    log2_ceiling_per_m: JsonNumber | None = None
    at_ceiling: bool | None = None


class SkippedM(Section):
    """An ``(m, δ)`` left out of a curve (against the length, or against m), and why."""

    m: JsonInt
    delta: str | None = None
    curve: Literal["length", "m"] | None = None
    why: str


class ContextSection(Section):
    """The context experiment's part of ``summary.json``: the tolerances, length curves, the
    wall (one row per δ and m) and its growth per δ, the trained families."""

    deltas: list[str]
    length_curves: list[LengthCurve]
    wall: list[WallRow]
    growth: dict[str, Growth | None] | None
    skipped: list[SkippedM]
    trained: list[TrainedFamily]


def section(results) -> dict | None:
    """The curves of ``curves.json`` and, per trained family, its runs and sandwich."""
    data = results.read("context", "curves.json") or {}
    rows = results.rows("context")
    if not data and not rows:
        return None
    return ContextSection(
        deltas=data.get("deltas") or ([data["delta"]] if data.get("delta") else []),
        length_curves=data.get("length_curves") or [],
        wall=data.get("wall") or [],
        growth=data.get("growth"),
        skipped=data.get("skipped") or [],
        trained=trained_section(results, "context", data.get("trained_families")),
    ).dump()


# -- figures and HTML -------------------------------------------------------------------------


def draw_length(summary: dict, out_dir) -> list[str]:
    return draw_length_curve({"curves": summary["context"]["length_curves"]}, out_dir, "context_length")


def draw_wall(summary: dict, out_dir) -> list[str]:
    return draw_wall_curve({"points": summary["context"]["wall"]}, out_dir, "context_wall")


def draw_trained(summary: dict, out_dir) -> list[str]:
    """Each trained family against N: its certified, constructed and trained ranks (most
    seeds exact on the whole family; a hollow mark at the largest rank tried where no rank
    is), one colour per m; beside it the runs' max error against rank, one line per (m, N)."""
    families = [t for t in summary["context"]["trained"] if t["runs"]]
    if not families:
        return []
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    colors = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd")
    ms = sorted({t.get("m") for t in families}, key=lambda m: (m is None, m))
    xs = []
    for k, m in enumerate(ms):
        color = colors[k % len(colors)]
        mine = sorted((t for t in families if t.get("m") == m), key=lambda t: t.get("length") or 0)
        ns = [t.get("length") for t in mine]
        for key, marker, label in (("certified_rank", "o", "certified"), ("constructed_rank", "s", "constructed")):
            pts = [(n, t[key]) for n, t in zip(ns, mine) if t[key] is not None]
            if pts:
                ax.plot(
                    *zip(*pts), marker=marker, color=color, ls="-" if marker == "o" else ":", label=f"m = {m}: {label}"
                )
        done = [(n, t["trained_most"]) for n, t in zip(ns, mine) if t["trained_most"] is not None]
        open_ = [(n, max(r["rank"] for r in t["runs"])) for n, t in zip(ns, mine) if t["trained_most"] is None]
        for pts, style, label in (
            (done, {"color": color}, "trained (most seeds)"),
            (open_, {"facecolors": "none", "edgecolors": color}, "not exact up to"),
        ):
            if pts:
                ax.scatter(*zip(*pts), marker="^", s=70, zorder=3, label=f"m = {m}: {label}", **style)
        for t in mine:
            xs += band(
                ax2,
                t["runs"],
                "rank",
                "max_error",
                f"m = {m}, N = {t.get('length')}",
                color,
                ls="-" if t is mine[-1] else "--",
            )
    ax.set(xlabel="context length N", ylabel="rank r (features)", title="Certified, constructed, trained against N")
    ax.set_yscale("log", base=2)
    ns = sorted({t.get("length") for t in families if t.get("length") is not None})
    ranks = sorted(
        {v for line in ax.get_lines() for v in line.get_ydata()} | {max(r["rank"] for r in t["runs"]) for t in families}
    )
    ax.set_xticks(ns)
    ax.set_yticks(ranks, [str(int(r)) for r in ranks])
    ax.minorticks_off()
    ax.legend(fontsize=7)
    fig.subplots_adjust(wspace=0.3)
    error_axes(ax2, xs, None, "rank r (features)", "max |error| on the whole family", "The runs on each (m, N)")
    return save(fig, out_dir, "context_trained")


def draw_ratio(summary: dict, out_dir) -> list[str]:
    return draw_ratio_curve({"points": summary["context"]["wall"]}, out_dir, "context_ratio")


def _deltas_text(rows: list[dict]) -> str:
    """``δ = 1/2 (Graham–Sloane classes) and δ = 2/5 (the whole layer)``: the tolerances drawn."""
    seen = dict.fromkeys((r.get("delta") or "1/2", r.get("distance") == 2) for r in rows)
    return " and ".join(f"δ = {d} ({'the whole layer' if whole else 'Graham–Sloane classes'})" for d, whole in seen)


def _caption_length(summary: dict) -> str:
    curves = summary["context"]["length_curves"]
    ms = ", ".join(dict.fromkeys(str(c["m"]) for c in curves))
    return (
        f"Certified rank of the layer family against context length N at m = {ms}, {_deltas_text(curves)} "
        "(log scale; line style by δ), with the class size n (dotted), the middle layer C(m, m/2) (dashed) and "
        "2^m (dash-dot); a star where all n are certified."
    )


def _caption_wall(summary: dict) -> str:
    return (
        f"Per m, at {_deltas_text(summary['context']['wall'])}, the certified rank at the smallest N certifying "
        "the whole code, labelled with log2 r / m and that N, beside C(m, m/2) and the 2^m features of the "
        "positive construction (log2 scale)."
    )


def _caption_ratio(summary: dict) -> str:
    return (
        f"Against m, at {_deltas_text(summary['context']['wall'])}: left the share r/2^m of the positive "
        "construction's features certified (log scale), beside the ceiling of every pair certificate over 2^m "
        "(dashed) and √(2/(πm)) (dotted); right log2 r / m beside the ceiling's and the paper's limit 1."
    )


def headline(summary: dict) -> list[Finding]:
    """Per tolerance the largest m whose whole code the certificate covers, and from which N."""
    out = []
    for p in (closest(rows) for rows in grouped(summary["context"]["wall"], delta_of).values()):
        if p is not None:
            out.append(
                Finding(
                    f"At δ = {delta_of(p)}, m = {p['m']} the certificate reaches r = {p['certified']:,} from context "
                    f"N = {p['length']:,} (log2 r / m = {p['log2_rank_per_m']:.2f}; the paper's limit: {PAPER['log2_rank_per_m']:g})."
                )
            )
    return out


def section_html(summary: dict, page) -> dict[str, list[str]]:
    s = summary["context"]
    ranks = [{"family": t["family"], **r} for t in s["trained"] for r in t["ranks"]]
    return EXPERIMENT.block(
        summary,
        page.figures("context_length", "context_wall", "context_ratio"),
        table(s["wall"], WALL_COLUMNS) if s["wall"] else "",
        page.figures("context_trained"),
        table(ranks, ["family", "rank", "seeds", "exact", "best_max_error"]) if ranks else "",
    )


EXPERIMENT = Experiment(
    name="context",
    order=60,
    title=TITLE,
    section=section,
    schema=ContextSection | None,
    sentence=sentence,
    html=section_html,
    paper={"context": PAPER},
    paper_rows=paper_rows,
    conclusions=conclusions,
    headline=headline,
    figures=(
        Figure("context_length", draw_length, _caption_length),
        Figure("context_wall", draw_wall, _caption_wall),
        Figure("context_ratio", draw_ratio, _caption_ratio),
        Figure(
            "context_trained",
            draw_trained,
            "Max error on the whole layer family against rank (median and seed range); dotted: the certificate.",
        ),
    ),
    settings={
        "curves": [{"m": 12, "length": "3..15"}, {"m": 16, "length": "3..39..4"}],
        "m": "8..16..2",
        "whole_layer_delta": "2/5",
        "whole_layer_curves": [{"m": 12, "length": "3..131..32"}],
        "whole_layer_m": "4..12..2",
    },
    step=".step:curves",
    writes="curves.json",
)
