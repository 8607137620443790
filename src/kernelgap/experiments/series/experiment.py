"""The series: proved = constructed = trained, family after family, and the sandwich.

On witness families of n = 4 … queries the step certifies each family and checks the
one-hot construction at the certified rank on every sequence (``series.json``); the
sweep trains ``table`` and ``mlp_exp`` at ranks around n.  On ``cw`` and small ``ladder``
families the certificate falls below n, and each family's minimal rank is pinned between
the certificate and the smallest exact construction or trained model
(:func:`~kernelgap.report.criteria.sandwich`; docs/experiments.md, "The series").
"""

from __future__ import annotations

import html

from ...report.criteria import at_edge, exact, first_rank, sandwich, sorted_by
from ...report.figures import legend, map_color, plt, save
from ...report.html import Finding, of, paragraph, reached, table
from ...report.trained import same_family
from ...validation import JsonInt, JsonNumber, Section, json_at_least
from ..base import Experiment, Figure

#: The family type of the witness series proper (Hadamard codes, certificate = n); a
#: ``series.json`` written before family types were recorded holds only these.
HADAMARD = "hadamard"


#: How a run distilled from a trained table is named beside its map's runs trained from a
#: random start (``train.distill``; docs/experiments.md, "Distilled from the table").
DISTILLED = " (distilled)"


def trained_as(row: dict) -> str:
    """The name a run's map is reported under: its map, marked when the run was distilled."""
    return row["feature_map"] + (DISTILLED if row.get("distilled") else "")


def map_of(name: str) -> str:
    """The map of a name :func:`trained_as` gave (its colour is the map's)."""
    return name.removesuffix(DISTILLED)


class SeriesRun(Section):
    """One trained run on a family of the series."""

    rank: JsonInt
    seed: JsonInt
    max_error: JsonNumber | None
    exact: bool
    steps: JsonInt


class SeriesTrained(Section):
    """One map on one family of the series: where it turned exact, over how many seeds."""

    exact_from: JsonInt | None
    seeds: JsonInt
    ranks: list[JsonInt]
    runs: list[SeriesRun]


class ExactBelow(Section):
    """A trained run exact below its family's certificate (which the theorem forbids)."""

    feature_map: str
    rank: JsonInt
    seed: JsonInt


class SeriesRow(Section):
    """One family of the series: its certified, constructed and trained ranks, and the
    sandwich of its minimal rank (:func:`~kernelgap.report.criteria.sandwich`)."""

    family: str
    kind: str
    n: JsonInt
    m: JsonInt
    sequences: JsonInt
    certified_rank: JsonInt
    trace_rank: JsonInt
    constructed_rank: JsonInt | None
    constructed_exact: bool
    constructed_max_error: JsonNumber | None
    trained: dict[str, SeriesTrained]
    exact_below_certificate: list[ExactBelow]
    exact_not_on_every_sequence: json_at_least(0)
    certified: JsonInt
    constructed: JsonInt | None
    trained_any: JsonInt | None
    trained_most: JsonInt | None
    determined: bool


def section(results) -> list[dict] | None:
    """Per family of the series: certified, constructed and trained smallest exact rank, and
    the sandwich of the minimal rank (``certified`` … ``determined``)."""
    families = results.read("series", "series.json")
    if not families:
        return None
    rows = results.rows("series")
    scored = {rec["id"]: (rec.get("train") or {}).get("sequences") for rec in results.records("series")}
    return [_family(fam, [r for r in rows if same_family(r, fam)], scored).dump() for fam in families]


def _family(fam: dict, runs: list[dict], scored: dict) -> SeriesRow:
    """One family of ``series.json`` with its runs (``scored``: the sequences each run's train
    metrics were scored on)."""
    trained = {}
    for fm in sorted({trained_as(r) for r in runs}):
        mine = [r for r in runs if trained_as(r) == fm]
        trained[fm] = SeriesTrained(
            exact_from=first_rank(mine, exact),
            seeds=len({r["seed"] for r in mine}),
            ranks=sorted({r["rank"] for r in mine}),
            runs=sorted_by([{k: r[k] for k in SeriesRun.model_fields} for r in mine], "rank", "seed"),
        )
    built = fam["constructed"]
    # A run is an exact model of the family only when its max error < 1/2 was measured
    # on every sequence of it (train metrics are scored on the whole training family).
    whole = [{**r, "exact": r["exact"] and scored.get(r["id"]) == fam["sequences"]} for r in runs]
    return SeriesRow(
        family=fam["family"],
        kind=fam.get("kind") or HADAMARD,
        n=fam["n"],
        m=fam["m"],
        sequences=fam["sequences"],
        certified_rank=fam["certified_rank"],
        trace_rank=fam["trace_rank"],
        constructed_rank=built["rank"],
        constructed_exact=built["exact"],
        constructed_max_error=built["max_error"],
        trained=trained,
        exact_below_certificate=[
            ExactBelow(feature_map=trained_as(r), rank=r["rank"], seed=r["seed"])
            for r in runs
            if r["exact"] and r["rank"] < fam["certified_rank"]
        ],
        exact_not_on_every_sequence=sum(1 for r, w in zip(runs, whole) if r["exact"] and not w["exact"]),
        **sandwich(fam["certified_rank"], built["rank"] if built["exact"] else None, whole),
    )


def upper(fam: dict) -> int | None:
    """The best upper bound by example: the smaller of ``constructed`` and ``trained_any``."""
    return min((u for u in (fam["constructed"], fam["trained_any"]) if u is not None), default=None)


def _top_rank(fam: dict) -> int | None:
    return max((r for t in fam["trained"].values() for r in t["ranks"]), default=None)


def _open(fam: dict) -> str:
    """``cw-m16-w8-l5-n16 (certified 7, constructed 16, trained 16)``."""
    built = f"constructed {fam['constructed']}" if fam["constructed"] is not None else "no exact construction"
    if fam["trained_any"] is not None:
        trained = f"trained {fam['trained_any']}"
    elif fam["trained"]:
        trained = f"no trained model exact up to {_top_rank(fam)}"
    else:
        trained = "not trained"
    return f"{fam['family']} (certified {fam['certified']}, {built}, {trained})"


def sandwich_sentence(series: list[dict]) -> str:
    """On how many families the minimal rank is determined, and the open ones."""
    done = [f for f in series if f["determined"]]
    text = (
        f"the minimal rank (features of an exact nonnegative single-head model) is determined on {len(done)} of "
        f"{len(series)} families (certified = the smallest exact construction or trained model)"
    )
    left = [f for f in series if not f["determined"]]
    if left:
        text += "; open on " + ", ".join(_open(f) for f in left)
    below = [f for f in series if f["constructed"] is not None and f["constructed"] < f["certified"]]
    if below:
        text += "; the one-hot construction is exact BELOW the certificate, which the theorem forbids, on " + ", ".join(
            f["family"] for f in below
        )
    unscored = sum(f.get("exact_not_on_every_sequence", 0) for f in series)
    if unscored:
        text += f"; {unscored} exact runs were not scored on every sequence of their family and bound nothing"
    return text


def built_at_certificate(families: list[dict]) -> int:
    """On how many families the one-hot construction is exact at exactly the certified rank."""
    return sum(1 for f in families if f["constructed_exact"] and f["constructed_rank"] == f["certified_rank"])


def trained_at_certificate(families: list[dict], fm: str) -> int:
    """On how many families map ``fm`` first trains to exact (most seeds) at the certified rank."""
    return sum(1 for f in families if f["trained"][fm]["exact_from"] == f["certified_rank"])


def _hadamard(series: list[dict]) -> list[dict]:
    return [f for f in series if f.get("kind", HADAMARD) == HADAMARD]


def _per_map(witness: list[dict]):
    """``(map, the Hadamard families it trained on)`` for each map."""
    for fm in sorted({fm for f in witness for fm in f["trained"]}):
        yield fm, [f for f in witness if fm in f["trained"]]


def _at_certificate(fam: dict, fm: str) -> tuple[int, int]:
    """``(exact seeds, seeds)`` of map ``fm`` at the family's certified rank."""
    at = [r for r in fam["trained"][fm].get("runs") or [] if r["rank"] == fam["certified_rank"]]
    return sum(bool(r["exact"]) for r in at), len(at)


def sentence(summary: dict) -> str:
    """Whether certified = constructed = trained holds on the Hadamard series, family by
    family; then the sandwich of the minimal rank on every family."""
    series = summary["series"]
    witness = _hadamard(series)
    parts = []
    if witness:
        k = len(witness)
        parts.append(
            f"On {built_at_certificate(witness)} of {k} Hadamard witness families the one-hot construction is "
            "exact at exactly the certified rank (checked on every sequence)"
        )
        for fm, hits in _per_map(witness):
            at = trained_at_certificate(hits, fm)
            above = [
                f"n = {f['n']}: "
                + (
                    str(f["trained"][fm]["exact_from"])
                    if f["trained"][fm]["exact_from"] is not None
                    else f"not within {max(f['trained'][fm]['ranks'])}"
                )
                for f in hits
                if f["trained"][fm]["exact_from"] != f["certified_rank"]
            ]
            edge = [
                f"n = {f['n']}: {of(k, s)} seeds"
                for f in hits
                for k, s in [_at_certificate(f, fm)]
                if s and at_edge(k, s)
            ]
            parts.append(
                f"{fm} trains to exact (most seeds) at exactly the certified rank on {at} of {len(hits)}"
                + (f" (elsewhere {', '.join(above)})" if above else "")
                + (f" (at the edge, seeds exact at the certificate disagree: {', '.join(edge)})" if edge else "")
            )
    parts.append(sandwich_sentence(series))
    below = [(f["family"], b) for f in series for b in f["exact_below_certificate"]]
    verdict = (
        "no trained model is exact below the certificate"
        if not below
        else "a trained model is exact BELOW the certificate, which the theorem forbids: "
        + ", ".join(f"{name}: {b['feature_map']} r = {b['rank']} seed {b['seed']}" for name, b in below)
    )
    text = "; ".join(parts) + "; " + verdict + "."
    return text[0].upper() + text[1:]


def headline(summary: dict) -> list[Finding]:
    """On the Hadamard series: the construction at the certificate (checked on every sequence),
    then per map on how many families training is exact there (at the edge where seeds disagree)."""
    witness = _hadamard(summary["series"])
    if not witness:
        return []
    built, sizes = f"{built_at_certificate(witness)} of {len(witness)}", [f["n"] for f in witness]
    maps = list(_per_map(witness))
    trained = ", ".join(f"{trained_at_certificate(hits, fm)} of {len(hits)} ({fm})" for fm, hits in maps)
    edge = [
        f"{fm}: seeds disagree at n = {', '.join(map(str, at))}"
        for fm, hits in maps
        if (at := [f["n"] for f in hits if (c := _at_certificate(f, fm))[1] and at_edge(*c)])
    ]
    return [
        Finding(
            f"The construction is exact at the certified rank on {built} Hadamard families (n = {sizes[0]}…{sizes[-1]})."
        ),
        Finding(f"Training is exact at the certified rank on {trained} of them.", "; ".join(edge) or None),
    ]


def conclusions(summary: dict) -> dict[str, str]:
    """Construction and training against the certificate on the Hadamard series; per family its
    sandwich (:func:`sandwich_rows`), each map's exact ranks and runs exact below the certificate."""
    series = summary["series"]
    witness = _hadamard(series)
    out = {}
    if witness:
        out["Hadamard families: construction exact at the certified rank"] = of(
            built_at_certificate(witness), len(witness)
        )
        for fm, hits in _per_map(witness):
            out[f"Hadamard families: {fm} exact (most seeds) at the certified rank"] = of(
                trained_at_certificate(hits, fm), len(hits)
            )
    out["families whose minimal rank is determined"] = of(sum(f["determined"] for f in series), len(series))
    for f, row in zip(series, sandwich_rows(series)):
        name = f["family"]
        for key in ("certified", "constructed", "trained (some seed)", "trained (most seeds)", "minimal rank"):
            out[f"{name}: {key}"] = str(row[key])
        for fm, t in sorted(f["trained"].items()):
            out[f"{name}: {fm} exact from (most seeds)"] = reached(t["exact_from"], max(t["ranks"], default=None))
            hits, seeds = _at_certificate(f, fm)
            if seeds:
                out[f"{name}: {fm} seeds exact at the certificate"] = of(hits, seeds)
        below = f["exact_below_certificate"]
        out[f"{name}: runs exact below the certificate"] = (
            ", ".join(f"{b['feature_map']} r = {b['rank']} seed {b['seed']}" for b in below) or "none"
        )
    return out


def _shifted(points: list[tuple[int, int]], offset: float) -> tuple[list[float], list[int]]:
    return [n + offset for n, _ in points], [r for _, r in points]


def draw(summary: dict, out_dir) -> list[str]:
    """Smallest exact rank against n on the Hadamard series: certified, constructed, trained
    per map, the trace bound."""
    series = _hadamard(summary["series"])
    if not series:
        return []
    ns = [f["n"] for f in series]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(ns, [f["certified_rank"] for f in series], "-", color="#ff7f0e", lw=2, label="certified (Radon)")
    ax.plot(ns, [f["trace_rank"] for f in series], ":", color="#ff7f0e", label="trace bound")
    ax.scatter(
        [f["n"] for f in series if f["constructed_exact"]],
        [f["constructed_rank"] for f in series if f["constructed_exact"]],
        marker="s",
        s=60,
        facecolors="none",
        edgecolors="black",
        label="one-hot construction, exact",
    )
    for k, fm in enumerate(sorted({fm for f in series for fm in f["trained"]})):
        hit = [(f["n"], f["trained"][fm]["exact_from"]) for f in series if f["trained"].get(fm, {}).get("exact_from")]
        miss = [
            (f["n"], max(f["trained"][fm]["ranks"]))
            for f in series
            if fm in f["trained"] and f["trained"][fm]["exact_from"] is None
        ]
        offset = 0.25 * (k - 0.5)
        marker = "D" if fm != map_of(fm) else "o"  # a distilled run: the map's colour, another mark
        color = map_color(summary, map_of(fm))
        ax.scatter(*_shifted(hit, offset), marker=marker, color=color, label=f"trained {fm} (most seeds exact)")
        if miss:
            ax.scatter(
                *_shifted(miss, offset),
                marker=marker,
                facecolors="none",
                edgecolors=color,
                label=f"{fm}: not exact up to",
            )
    ax.set(
        xlabel="queries n of the witness family",
        ylabel="smallest exact rank",
        title="Certified, constructed and trained rank, family after family",
    )
    legend(ax, loc="upper left")
    return save(fig, out_dir, "series")


#: Colours of the sandwich figure: a determined family's bar, an open one's (and its band).
DETERMINED_COLOR, OPEN_COLOR = "#2ca02c", "#d62728"


def draw_sandwich(summary: dict, out_dir) -> list[str]:
    """Per family a bar from the certificate to the best upper bound, a marker per bound."""
    series = summary["series"]
    xs = range(len(series))
    fig, ax = plt.subplots(figsize=(max(6.4, 0.7 * len(series) + 2), 4.6))
    for x, f in zip(xs, series):
        top = upper(f)
        color = DETERMINED_COLOR if f["determined"] else OPEN_COLOR
        if not f["determined"]:
            ax.axvspan(x - 0.45, x + 0.45, color=OPEN_COLOR, alpha=0.08, lw=0)
        if top is not None:
            ax.plot([x, x], [f["certified"], top], "-", color=color, lw=6, alpha=0.45, solid_capstyle="butt")
    marks = (  # (key, marker, colour, filled, x offset, label)
        ("n", "_", "grey", True, 0.0, "queries n"),
        ("certified", "^", "#ff7f0e", True, 0.0, "certified (lower bound)"),
        ("constructed", "s", "black", False, -0.2, "one-hot construction, exact"),
        ("trained_any", "o", "#1f77b4", False, 0.2, "trained: some seed exact"),
        ("trained_most", ".", "#1f77b4", True, 0.2, "trained: most seeds exact"),
    )
    for key, marker, color, filled, dx, label in marks:
        pts = [(x + dx, f[key]) for x, f in zip(xs, series) if f.get(key) is not None]
        if pts:
            style = {"color": color} if filled else {"facecolors": "none", "edgecolors": color}
            ax.scatter(
                [x for x, _ in pts],
                [y for _, y in pts],
                marker=marker,
                s=500 if key == "n" else 55,
                label=label,
                zorder=2 if key == "n" else 3,
                **style,
            )
    ax.plot([], [], "-", color=DETERMINED_COLOR, lw=6, alpha=0.45, label="determined")
    ax.plot([], [], "-", color=OPEN_COLOR, lw=6, alpha=0.45, label="open (shaded)")
    ax.set_xticks(list(xs), [f["family"] for f in series], rotation=45, ha="right", fontsize=8)
    ax.set(
        xlabel="family",
        ylabel="rank (features)",
        title="The minimal rank per family: certified below, exact models above",
    )
    legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, out_dir, "series_sandwich")


def _bound(f: dict, key: str) -> str:
    """A bound of the sandwich table: the rank, or how far training went without one."""
    if f[key] is not None:
        return str(f[key])
    return f"none up to {_top_rank(f)}" if key.startswith("trained") and f["trained"] else "–"


def sandwich_rows(series: list[dict]) -> list[dict]:
    """The sandwich table: one row per family."""
    return [
        {
            "family": f["family"],
            "n": f["n"],
            "certified": f["certified"],
            "constructed": _bound(f, "constructed"),
            "trained (some seed)": _bound(f, "trained_any"),
            "trained (most seeds)": _bound(f, "trained_most"),
            "minimal rank": f"= {f['certified']}"
            if f["determined"]
            else f"{f['certified']} … {upper(f) if upper(f) is not None else '?'} (open)",
        }
        for f in series
    ]


def section_html(summary: dict, page) -> dict[str, list[str]]:
    """The certificate against construction and training on every family of the series."""
    series = summary["series"]
    maps = sorted({fm for f in series for fm in f["trained"]})
    rows = [
        {
            "family": f["family"],
            "n": f["n"],
            "sequences": f["sequences"],
            "trace bound": f["trace_rank"],
            "certified (Radon)": f["certified_rank"],
            "constructed": f"{f['constructed_rank']} ({'exact' if f['constructed_exact'] else 'NOT exact'})"
            if f["constructed_rank"] is not None
            else "not built",
            **{
                f"{fm} exact from": reached(f["trained"][fm]["exact_from"], max(f["trained"][fm]["ranks"]))
                for fm in maps
                if fm in f["trained"]
            },
        }
        for f in series
    ]
    return {
        "lead": [
            f"<h2>{html.escape(EXPERIMENT.title)}</h2>",
            paragraph(sentence(summary)),
            page.figures("series", "series_sandwich"),
            table(sandwich_rows(series)),
            table(rows),
        ]
    }


EXPERIMENT = Experiment(
    name="series",
    order=20,
    title="The series: proved, constructed and trained rank",
    section=section,
    schema=list[SeriesRow] | None,
    sentence=sentence,
    conclusions=conclusions,
    headline=headline,
    html=section_html,
    region="lead",
    figures=(
        Figure(
            "series",
            draw,
            "Smallest exact rank against the number of queries n of the Hadamard witness families: the "
            "certified lower bound (Radon), the one-hot construction (exact on every sequence), training "
            "(most seeds; open markers: not exact at any rank tried), and the trace bound below them.",
        ),
        Figure(
            "series_sandwich",
            draw_sandwich,
            "The minimal rank of an exact nonnegative single-head model, per family: a bar from the certified "
            "lower bound to the best upper bound by example (the one-hot construction, or a trained model "
            "exact on every sequence of the family), green where the two meet (determined), red and shaded "
            "where the minimal rank is still open; grey dashes mark the number of queries n.",
        ),
    ),
    step=".step:certificates",
    step_reads_sweep=True,
    writes="series.json",
)
