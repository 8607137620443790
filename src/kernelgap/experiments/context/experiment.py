"""The wall in context length: how far the certificate climbs as the context length N grows.

The layer product family (docs/theory.md, "The layer family") holds the n words of the
largest Graham–Sloane class of the weight-m/2 layer, complements as candidates, and every
sequence of one query and N − 1 candidates.  Gap domination at length N gives
``ρ_N = 2δ/((N − 2)(gap − 2δ))`` (docs/theory.md, "Gap domination at length N"), so every
pair of the class has ``ε_ij ε_ji ≤ 1/(N − 2)²`` and the Radon bound certifies all n words
once ``(N − 2)² ≥ n − 1``.  The step (``curves.json``) certifies the family against N at
fixed m and, per m, finds the smallest N certifying the whole code (checked at that N and
one shorter); the sweep trains table kernels at one (m, N) where the certificate is n.
Every sentence here is computed from those files; the paper's claim is kept beside ours.
"""

from __future__ import annotations

from typing import Any, Literal

from ...report.figures import band, draw_length_curve, draw_wall_curve, error_axes, plt, save
from ...report.html import table, titled
from ...report.text import fmt, yes_no
from ...report.trained import trained_conclusions, trained_section
from ...validation import JsonInt, JsonNumber, Record, json_at_least
from ..base import Experiment, Figure

TITLE = "The wall in context length"

#: What the paper claims (kept verbatim in summary.json under ``paper.context``).
PAPER = {
    "claim": "as the fixed context length N grows, the lower bound approaches the 2^m features "
    "of the positive construction",
    "log2_rank_per_m": 1.0,
}

#: The columns of the per-m table of the report.
WALL_COLUMNS = [
    "m",
    "n",
    "predicted_length",
    "length",
    "certified",
    "below_length",
    "certified_below",
    "constructed_rank",
    "proved_equals_constructed",
    "log2_rank_per_m",
    "log2_layer_per_m",
    "layer_size",
    "positive_construction",
]


# -- the summary section ------------------------------------------------------------------


def section(results) -> dict | None:
    """The curves of ``curves.json`` and, per trained family, its runs and sandwich."""
    data = results.read("context", "curves.json") or {}
    rows = results.rows("context")
    if not data and not rows:
        return None
    return {
        "delta": data.get("delta"),
        "length_curves": data.get("length_curves") or [],
        "wall": data.get("wall") or [],
        "growth": data.get("growth"),
        "skipped": data.get("skipped") or [],
        "trained": trained_section(results, "context", data.get("trained_families")),
    }


class LastShort(Record):
    """The last length a curve's certificate fell short of the full set at."""

    length: JsonInt
    certified: JsonInt


class CurvePoint(Record):
    """One length of a curve: its certified rank and the method that gave it."""

    length: json_at_least(3)
    certified: json_at_least(0)
    trace: JsonInt
    radon: JsonInt
    method: Literal["radon", "trace"]
    whole_set: bool | None = None


class LengthCurve(Record):
    """One ``m``: the certified rank as the context grows."""

    m: json_at_least(2)
    n: json_at_least(1)
    layer_size: JsonInt
    positive_construction: JsonInt
    wall_guess: JsonInt | None = None
    full_from: JsonInt | None
    last_short: LastShort | None
    points: list[CurvePoint]


class WallRow(Record):
    """One ``m`` at its predicted wall length: whether the formula holds."""

    m: json_at_least(2)
    n: json_at_least(1)
    predicted_length: json_at_least(3)
    length: JsonInt | None
    certified: json_at_least(0)
    below_length: JsonInt | None
    certified_below: JsonInt | None
    formula_holds: bool
    log2_rank_per_m: JsonNumber
    log2_layer_per_m: JsonNumber
    layer_size: JsonInt
    positive_construction: JsonInt
    constructed_rank: JsonInt | None
    proved_equals_constructed: bool | None


class SkippedM(Record):
    """An ``m`` left out, and why."""

    m: JsonInt
    why: str


class TrainedRun(Record):
    """One trained run on a family of the context experiment."""

    feature_map: Any
    rank: json_at_least(1)
    seed: JsonInt
    max_error: JsonNumber | None
    exact: bool
    whole_family: bool


class TrainedRank(Record):
    """The runs at one rank: how many seeds, how many exact, the best max error."""

    rank: JsonInt
    seeds: json_at_least(1)
    exact: json_at_least(0)
    best_max_error: JsonNumber | None


class TrainedFamily(Record):
    """One family trained: its certified and constructed ranks beside the trained ones."""

    family: str
    params: dict[str, Any]
    m: JsonInt | None = None
    length: JsonInt | None = None
    n: JsonInt | None = None
    certified_rank: JsonInt | None
    constructed_rank: JsonInt | None
    runs: list[TrainedRun]
    ranks: list[TrainedRank]
    exact_from: JsonInt | None
    exact_not_on_whole_family: json_at_least(0)
    exact_below_certificate: list[Any]
    trained_any: JsonInt | None
    trained_most: JsonInt | None
    determined: bool


class ContextSection(Record):
    """The context experiment's part of ``summary.json``: length curves, the wall, the
    trained families."""

    delta: str | None = None
    length_curves: list[LengthCurve]
    wall: list[WallRow]
    growth: dict[str, Any] | None = None
    skipped: list[SkippedM]
    trained: list[TrainedFamily]


# -- sentences ------------------------------------------------------------------------------


def wall_text(p: dict) -> str:
    """``at m = 16 the certificate reaches all 810 code words from N = 31 (785 at N = 30)``."""
    if p["length"] is None:
        return f"at m = {p['m']} the certificate reaches {p['certified']:,} of {p['n']:,} code words, never all"
    below = f" ({p['certified_below']:,} at N = {p['below_length']})" if p["below_length"] is not None else ""
    return f"at m = {p['m']} the certificate reaches all {p['n']:,} code words from N = {p['length']}{below}"


def _guess_text(wall: list[dict]) -> str:
    off = [p for p in wall if not p["formula_holds"]]
    if not off:
        return "each time N = 2 + ⌈√(n − 1)⌉, the least N with (N − 2)² ≥ n − 1, as the pair bound 1/(N − 2)² predicts"
    return "N = 2 + ⌈√(n − 1)⌉ is NOT the least such N at " + ", ".join(
        f"m = {p['m']} (predicted {p['predicted_length']}, found {p['length']})" for p in off
    )


def _ratio_text(wall: list[dict]) -> str:
    ours = ", ".join(f"{p['log2_rank_per_m']:.2f} (m = {p['m']})" for p in wall)
    lo, hi = wall[0]["log2_layer_per_m"], wall[-1]["log2_layer_per_m"]
    layer = f"{lo:.2f}" if len(wall) == 1 else f"{lo:.2f} to {hi:.2f}"
    return (
        f"there log2 r / m is {ours}, against log2 C(m, m/2) / m = {layer} for the whole middle layer "
        f"and {PAPER['log2_rank_per_m']:g} for the 2^m features the paper says the bound approaches as N grows"
    )


def stays_at_n(curve: dict) -> bool:
    """Whether the certified rank of an N-curve, once it reaches n, stays at n to the last N listed."""
    full = curve["full_from"]
    return full is not None and all(p["certified"] == curve["n"] for p in curve["points"] if p["length"] >= full)


def _length_text(curves: list[dict]) -> str:
    parts = []
    for c in curves:
        last = c["points"][-1]
        share = f"{100 * last['certified'] / c['positive_construction']:.2g} % of 2^m"
        if stays_at_n(c):
            parts.append(
                f"m = {c['m']} stays at n = {c['n']:,} from N = {c['full_from']} to N = {last['length']} ({share})"
            )
        else:
            parts.append(
                f"m = {c['m']} reaches {last['certified']:,} of n = {c['n']:,} by N = {last['length']} ({share})"
            )
    flat = all(stays_at_n(c) for c in curves)
    head = "at fixed m the certified rank stops at the code size" if flat else "at fixed m"
    return f"{head}: " + ", ".join(parts)


def _constructed_text(wall: list[dict]) -> str | None:
    known = [p for p in wall if p["proved_equals_constructed"] is not None]
    if not known:
        return "no constructed rank was recorded, so proved = constructed is not checked"
    same = [p["m"] for p in known if p["proved_equals_constructed"]]
    differ = [p for p in known if not p["proved_equals_constructed"]]
    text = f"proved = constructed at {len(same)} of {len(wall)} m" + (
        f" (m = {', '.join(map(str, same))})" if same else ""
    )
    if differ:
        text += "; they differ at " + ", ".join(
            f"m = {p['m']} (certified {p['certified']:,}, constructed {p['constructed_rank']})" for p in differ
        )
    return text


def trained_text(t: dict) -> str:
    """One trained family: where its runs become exact models, against the certificate."""
    where = f"the layer family at m = {t.get('m')}, N = {t.get('length')}"
    cert = f"certified {t['certified_rank']:,}" if t["certified_rank"] is not None else "not certified yet"
    built = f", constructed {t['constructed_rank']:,}" if t["constructed_rank"] is not None else ""
    if not t["runs"]:
        return f"nothing is trained yet on {where} ({cert}{built})"
    maps = ", ".join(sorted({r["feature_map"] for r in t["runs"]}))
    top = max(r["rank"] for r in t["runs"])
    most = (
        f"exact on the whole family (most seeds) from rank {t['trained_most']}"
        if t["trained_most"] is not None
        else f"exact on the whole family for most seeds at no rank up to {top}"
    )
    text = f"{maps} kernels trained on {where} ({cert}{built}; {len(t['runs'])} runs): {most}"
    if t["trained_any"] is not None and t["trained_any"] != t["trained_most"]:
        text += f", some seed from rank {t['trained_any']}"
    if t["determined"]:
        by = "constructed" if t["constructed"] == t["certified"] else "trained"
        text += f"; the minimal rank is exactly {t['certified']:,} (certified = {by})"
    if t["exact_not_on_whole_family"]:
        text += f"; {t['exact_not_on_whole_family']} exact runs were not scored on the whole family and bound nothing"
    below = t["exact_below_certificate"]
    if below:
        text += "; a run is exact BELOW the certificate, which the theorem forbids: " + ", ".join(
            f"{b['feature_map']} r = {b['rank']} seed {b['seed']}" for b in below
        )
    elif t["certified_rank"] is not None:
        text += "; no run is exact below the certificate"
    return text


def sentence(summary: dict) -> str | None:
    """The wall per m, log2 r / m beside the paper's claim, the N-curves, proved =
    constructed and the trained point; every number read from the summary."""
    s = summary["context"]
    parts = []
    wall = s["wall"]
    if wall:
        parts.append("; ".join(wall_text(p) for p in wall) + f" ({_guess_text(wall)})")
        parts.append(_ratio_text(wall))
    if s["length_curves"]:
        parts.append(_length_text(s["length_curves"]))
    if wall:
        parts.append(_constructed_text(wall))
    if s["skipped"]:
        parts.append("skipped: " + "; ".join(f"m = {k['m']} ({k['why']})" for k in s["skipped"]))
    parts += [trained_text(t) for t in s["trained"]]
    if not parts:
        return None
    text = ". ".join(p[0].upper() + p[1:] for p in parts if p)
    return f"Layer codes at δ = {s.get('delta') or '1/2'}: {text[0].lower() + text[1:]}."


def paper_rows(summary: dict) -> list[dict]:
    s = summary.get("context")
    if not s or not s["wall"]:
        return []
    wall = s["wall"]
    curves = s["length_curves"]
    flat = bool(curves) and all(stays_at_n(c) for c in curves)
    note = (
        "At fixed m the certificate stops at the code size n (the largest Graham–Sloane class, about "
        "C(m, m/2)/m words), reached from N = 2 + ⌈√(n − 1)⌉; longer contexts add nothing. "
        if flat
        else ""
    )
    note += (
        f"log2 r / m grows with m ({wall[0]['log2_rank_per_m']:.2f} at m = {wall[0]['m']}, "
        f"{wall[-1]['log2_rank_per_m']:.2f} at m = {wall[-1]['m']}), below the middle layer's "
        f"{wall[-1]['log2_layer_per_m']:.2f} at m = {wall[-1]['m']}."
    )
    return [
        {
            "quantity": "The wall in context length: certified rank as N grows",
            "paper": f"{PAPER['claim']} (log2 r / m → {PAPER['log2_rank_per_m']:g})",
            "ours": ", ".join(f"m = {p['m']}: r = {p['certified']:,} from N = {p['length']}" for p in wall),
            "note": note,
        }
    ]


def conclusions(summary: dict) -> dict[str, str]:
    """Per m of the wall: from which N the whole code is certified (and the rank one N
    shorter), whether N = 2 + ⌈√(n − 1)⌉ is that N, whether proved = constructed; per
    N-curve: from which N all n are certified and whether it stays there; the m skipped;
    per trained family its sandwich."""
    s = summary["context"]
    out = {}
    for p in s["wall"]:
        at = f"wall m = {p['m']}"
        out[f"{at}: all {p['n']:,} code words certified from N"] = fmt(p["length"]) if p["length"] else "never"
        out[f"{at}: certified rank"] = f"{p['certified']:,}"
        out[f"{at}: certified one N shorter"] = (
            f"{p['certified_below']:,} at N = {p['below_length']}" if p["below_length"] is not None else "–"
        )
        out[f"{at}: N = 2 + ⌈√(n − 1)⌉ is the least such N"] = yes_no(p["formula_holds"])
        out[f"{at}: proved = constructed"] = yes_no(p["proved_equals_constructed"])
    for c in s["length_curves"]:
        at = f"N-curve m = {c['m']}"
        out[f"{at}: all {c['n']:,} certified from N"] = fmt(c["full_from"]) if c["full_from"] else "never"
        out[f"{at}: stays at n to the last N"] = yes_no(stays_at_n(c))
    if s["skipped"]:
        out["m skipped"] = ", ".join(str(k["m"]) for k in s["skipped"])
    for t in s["trained"]:
        out.update(trained_conclusions(t, f"layer m = {t.get('m')}, N = {t.get('length')}"))
    return out


# -- figures and HTML -------------------------------------------------------------------------


def draw_length(summary: dict, out_dir) -> list[str]:
    return draw_length_curve({"curves": summary["context"]["length_curves"]}, out_dir, "context_length")


def draw_wall(summary: dict, out_dir) -> list[str]:
    return draw_wall_curve({"points": summary["context"]["wall"]}, out_dir, "context_wall")


def draw_trained(summary: dict, out_dir) -> list[str]:
    """Max error against rank of the runs on each trained family, with its certificate."""
    families = [t for t in summary["context"]["trained"] if t["runs"]]
    if not families:
        return []
    fig, ax = plt.subplots(figsize=(5.6, 3.9))
    colors = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd")
    xs = []
    for k, t in enumerate(families):
        for j, fm in enumerate(sorted({r["feature_map"] for r in t["runs"]})):
            label = f"{fm}, layer m = {t.get('m')}, N = {t.get('length')}"
            runs = [r for r in t["runs"] if r["feature_map"] == fm]
            xs += band(ax, runs, "rank", "max_error", label, colors[(k + j) % len(colors)])
    error_axes(
        ax,
        xs,
        families[0]["certified_rank"],
        "rank r (features)",
        "max |error| on the whole family",
        "Trained where the certificate reaches n: the layer family",
    )
    return save(fig, out_dir, "context_trained")


def _caption_length(summary: dict) -> str:
    ms = ", ".join(str(c["m"]) for c in summary["context"]["length_curves"])
    return (
        f"Certified rank of the layer family against context length N at m = {ms} (log scale), with the code "
        "size n (dotted), the middle layer C(m, m/2) (dashed) and 2^m (dash-dot); a star where all n are certified."
    )


def _caption_wall(summary: dict) -> str:
    return (
        "Per m, the certified rank at the smallest N certifying the whole code, labelled with log2 r / m and "
        "that N, beside C(m, m/2) and the 2^m features of the positive construction (log2 scale)."
    )


def section_html(summary: dict, page) -> dict[str, list[str]]:
    s = summary["context"]
    ranks = [{"family": t["family"], **r} for t in s["trained"] for r in t["ranks"]]
    return {
        "beyond": titled(
            TITLE,
            sentence(summary),
            page.figures("context_length", "context_wall"),
            table(s["wall"], WALL_COLUMNS) if s["wall"] else "",
            page.figures("context_trained"),
            table(ranks, ["family", "rank", "seeds", "exact", "best_max_error"]) if ranks else "",
        )
    }


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
    figures=(
        Figure("context_length", draw_length, _caption_length),
        Figure("context_wall", draw_wall, _caption_wall),
        Figure(
            "context_trained",
            draw_trained,
            "Max error on the whole layer family against rank (median and seed range); dotted: the certificate.",
        ),
    ),
    settings={"curves": [{"m": 12, "length": "3..15"}, {"m": 16, "length": "3..39..4"}], "m": "8..16..2"},
    step=".step:curves",
    writes="curves.json",
)
