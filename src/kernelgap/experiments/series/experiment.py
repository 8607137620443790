"""The series: proved = constructed = trained, family after family.

On witness families of n = 4 … queries the step certifies each family and checks the
one-hot construction at the certified rank on every sequence (``series.json``); the
sweep trains ``table`` and ``mlp_exp`` at ranks around n.
"""

from __future__ import annotations

import html

from ...report.criteria import exact, first_rank, sorted_by
from ...report.figures import legend, map_color, plt, save
from ...report.html import paragraph, table
from ...report.text import reached
from ..base import Experiment, Figure


def section(results) -> list[dict] | None:
    """Per family of the series: certified, constructed and trained smallest exact rank."""
    families = results.read("series", "series.json")
    if not families:
        return None
    rows = results.rows("series")
    out = []
    for fam in families:
        runs = [r for r in rows if r["params"] == fam["params"]]
        trained = {}
        for fm in sorted({r["feature_map"] for r in runs}):
            mine = [r for r in runs if r["feature_map"] == fm]
            trained[fm] = {
                "exact_from": first_rank(mine, exact),
                "seeds": len({r["seed"] for r in mine}),
                "ranks": sorted({r["rank"] for r in mine}),
                "runs": sorted_by(
                    [{k: r[k] for k in ("rank", "seed", "max_error", "exact", "steps")} for r in mine], "rank", "seed"
                ),
            }
        built = fam["constructed"]
        out.append(
            {
                "family": fam["family"],
                "n": fam["n"],
                "m": fam["m"],
                "sequences": fam["sequences"],
                "certified_rank": fam["certified_rank"],
                "trace_rank": fam["trace_rank"],
                "constructed_rank": built["rank"],
                "constructed_exact": built["exact"],
                "constructed_max_error": built["max_error"],
                "trained": trained,
                "exact_below_certificate": [
                    {"feature_map": r["feature_map"], "rank": r["rank"], "seed": r["seed"]}
                    for r in runs
                    if r["exact"] and r["rank"] < fam["certified_rank"]
                ],
            }
        )
    return out


SCHEMA = {
    "type": ["array", "null"],
    "items": {
        "type": "object",
        "required": ["family", "n", "certified_rank", "trace_rank", "constructed_rank", "constructed_exact", "trained"],
        "properties": {
            "n": {"type": "integer"},
            "certified_rank": {"type": "integer"},
            "trace_rank": {"type": "integer"},
            "constructed_rank": {"type": "integer"},
            "constructed_exact": {"type": "boolean"},
            "trained": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["exact_from", "seeds"],
                    "properties": {"exact_from": {"type": ["integer", "null"]}, "seeds": {"type": "integer"}},
                },
            },
        },
    },
}


def sentence(summary: dict) -> str:
    """Whether certified = constructed = trained holds, family by family."""
    series = summary["series"]
    k = len(series)
    built = sum(1 for f in series if f["constructed_exact"] and f["constructed_rank"] == f["certified_rank"])
    below = [(f["n"], b) for f in series for b in f["exact_below_certificate"]]
    parts = [
        f"On {built} of {k} families the one-hot construction is exact at exactly the certified rank "
        "(checked on every sequence)"
    ]
    maps = sorted({fm for f in series for fm in f["trained"]})
    for fm in maps:
        hits = [f for f in series if fm in f["trained"]]
        at = sum(1 for f in hits if f["trained"][fm]["exact_from"] == f["certified_rank"])
        above = [
            f"n = {f['n']}: {f['trained'][fm]['exact_from'] if f['trained'][fm]['exact_from'] is not None else 'not within ' + str(max(f['trained'][fm]['ranks']))}"
            for f in hits
            if f["trained"][fm]["exact_from"] != f["certified_rank"]
        ]
        parts.append(
            f"{fm} trains to exact (most seeds) at exactly the certified rank on {at} of {len(hits)}"
            + (f" (elsewhere {', '.join(above)})" if above else "")
        )
    verdict = (
        "no trained model is exact below the certificate"
        if not below
        else "a trained model is exact BELOW the certificate, which the theorem forbids: "
        + ", ".join(f"n = {n}: {b['feature_map']} r = {b['rank']} seed {b['seed']}" for n, b in below)
    )
    return "; ".join(parts) + "; " + verdict + "."


def draw(summary: dict, out_dir) -> list[str]:
    """Smallest exact rank against n: certified, constructed, trained per map, the trace bound."""
    series = summary["series"]
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
        ax.scatter(
            [n + offset for n, _ in hit],
            [r for _, r in hit],
            marker="o",
            color=map_color(summary, fm),
            label=f"trained {fm} (most seeds exact)",
        )
        if miss:
            ax.scatter(
                [n + offset for n, _ in miss],
                [r for _, r in miss],
                marker="o",
                facecolors="none",
                edgecolors=map_color(summary, fm),
                label=f"{fm}: not exact up to",
            )
    ax.set(
        xlabel="queries n of the witness family",
        ylabel="smallest exact rank",
        title="Certified, constructed and trained rank, family after family",
    )
    legend(ax, loc="upper left")
    return save(fig, out_dir, "series")


def section_html(summary: dict, page) -> dict[str, list[str]]:
    """The certificate against construction and training on every family of the series."""
    series = summary["series"]
    maps = sorted({fm for f in series for fm in f["trained"]})
    rows = [
        {
            "n": f["n"],
            "sequences": f["sequences"],
            "trace bound": f["trace_rank"],
            "certified (Radon)": f["certified_rank"],
            "constructed": f"{f['constructed_rank']} ({'exact' if f['constructed_exact'] else 'NOT exact'})",
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
            page.figures("series"),
            table(rows),
        ]
    }


EXPERIMENT = Experiment(
    name="series",
    title="The series: proved, constructed and trained rank",
    section=section,
    schema=SCHEMA,
    sentence=sentence,
    html=section_html,
    region="lead",
    figures=(
        Figure(
            "series",
            draw,
            "Smallest exact rank against the number of queries n of witness families: the "
            "certified lower bound (Radon), the one-hot construction (exact on every sequence), training "
            "(most seeds; open markers: not exact at any rank tried), and the trace bound below them.",
        ),
    ),
    step=".step:certificates",
    writes="series.json",
)
