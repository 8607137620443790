"""Several heads: H heads of rank r at a fixed total H·r on the witness family.

Its section is the ``heads`` item of ``loopholes`` (with ``signed``): per map and head
count, the smallest exact total.  The step certifies each training family.
"""

from __future__ import annotations

from ...report.criteria import exact, first_rank, sorted_by
from ...report.figures import band, error_axes, plt, points, save, tone
from ...report.html import table
from ...report.rows import RunRow
from ...report.text import exact_from, reached, yes_no
from ...validation import JsonInt, Section
from ..base import FAMILY_CERTIFICATES, Experiment, Figure


class HeadsCell(Section):
    """One map at one head count: the total H·r where it turned exact and the largest tried."""

    transition_total: JsonInt | None
    max_total: JsonInt


class HeadsTable(Section):
    """Every map's cells by head count (``"1"``, ``"2"``, …), and the runs."""

    per_map: dict[str, dict[str, HeadsCell]]
    runs: list[RunRow]


class TwoHeadsBuilt(Section):
    """The two-head construction on the witness family: head ranks, total, exact (in fractions)."""

    heads: list[JsonInt]
    total: JsonInt
    exact: bool
    max_error: str
    sequences: JsonInt


class HeadsSection(Section):
    """The heads experiment's part of ``summary.json``'s ``loopholes`` (shared with signed)."""

    certified_rank: JsonInt | None = None
    heads: HeadsTable | None = None
    two_heads: TwoHeadsBuilt | None = None


def section(results) -> dict | None:
    heads = results.rows("heads")
    if not heads:
        return None
    per_map = {
        fm: {
            str(h): HeadsCell(
                transition_total=first_rank(sub, exact, "features"), max_total=max(r["features"] for r in sub)
            )
            for h in sorted({r["heads"] for r in mine})
            for sub in [[r for r in mine if r["heads"] == h]]
        }
        for fm in sorted({r["feature_map"] for r in heads})
        for mine in [[r for r in heads if r["feature_map"] == fm]]
    }
    return HeadsSection(
        certified_rank=results.witness_certified_rank(),
        heads=HeadsTable(per_map=per_map, runs=sorted_by(heads, "feature_map", "heads", "rank", "seed")),
        two_heads=_constructed(results),
    ).dump()


def _constructed(results) -> dict | None:
    """The two-head construction on the witness family, as the step checked it (its entry of
    ``certificates.json``), where it applies."""
    certs = results.read("heads", "certificates.json")
    for entry in certs.values() if isinstance(certs, dict) else ():
        built = entry.get("two_heads") if isinstance(entry, dict) and entry.get("family") == "witness" else None
        if isinstance(built, dict) and built.get("applies"):
            return {k: built[k] for k in TwoHeadsBuilt.model_fields}
    return None


def exact_totals(per_map: dict) -> tuple[list[int], list[int]]:
    """The smallest exact totals H·r of one head and of several heads, over every map."""
    totals = [(h, v["transition_total"]) for ph in per_map.values() for h, v in ph.items()]
    return [t for h, t in totals if h == "1" and t is not None], [t for h, t in totals if h != "1" and t is not None]


def splitting_lowers(per_map: dict) -> bool | None:
    """Whether several heads are exact at a smaller total than one head (``None``: no run
    is exact at any head count, so nothing is decided)."""
    one, multi = exact_totals(per_map)
    if not one and not multi:
        return None
    return bool(multi) and (not one or min(multi) < min(one))


def conclusions(summary: dict) -> dict[str, str]:
    """Per map and head count the smallest exact total H·r; whether splitting lowers it."""
    lo = summary.get("loopholes") or {}
    if not lo.get("heads"):
        return {}
    per_map = lo["heads"]["per_map"]
    out = {
        f"{fm}, H = {h}: exact from (total H·r)": reached(v["transition_total"], v["max_total"])
        for fm, ph in per_map.items()
        for h, v in ph.items()
    }
    out["splitting the budget across heads lowers the total needed"] = yes_no(splitting_lowers(per_map))
    built = lo.get("two_heads")
    if built:
        out["two heads: constructed total (exact on every sequence)"] = f"{built['total']} ({yes_no(built['exact'])})"
    return out


def sentence(summary: dict) -> str | None:
    lo = summary.get("loopholes") or {}
    if not lo.get("heads"):
        return None
    per_map, cert = lo["heads"]["per_map"], lo.get("certified_rank")
    parts = "; ".join(
        f"{fm} — "
        + ", ".join(f"H = {h}: {exact_from(v['transition_total'], v['max_total'], 'H·r')}" for h, v in ph.items())
        for fm, ph in per_map.items()
    )
    one, multi = exact_totals(per_map)
    verdict = ""
    if splitting_lowers(per_map):
        verdict = (
            f" Splitting the budget across heads lowers the total needed (to {min(multi)}"
            + (f", below the one-head certificate {cert}" if cert and min(multi) < cert else "")
            + ")."
        )
    elif one:
        verdict = " Splitting the budget across heads does not lower the total needed."
    built = lo.get("two_heads")
    if built and built["exact"] and cert:
        verdict += (
            f" One head: certified r ≥ {cert}; two heads: constructed total {built['total']} (ranks "
            f"{built['heads'][0]} + {built['heads'][1]}, exact on all {built['sequences']:,} sequences, "
            f"max error {built['max_error']} in exact arithmetic)."
        )
    return f"Several heads at a fixed total on the witness family: {parts}.{verdict}"


def draw(summary: dict, out_dir) -> list[str]:
    sec = summary["loopholes"]
    heads = sec.get("heads")
    if not heads:
        return []
    maps = list(heads["per_map"])
    series = [
        [r for r in heads["runs"] if r["feature_map"] == fm and r["heads"] == h]
        for fm in maps
        for h in {r["heads"] for r in heads["runs"]}
    ]
    if max(points(s, "features") for s in series) < 2:
        return []  # one total per head count: the table says it all
    fig, axes = plt.subplots(1, len(maps), figsize=(5.4 * len(maps), 4.2), squeeze=False)
    cmap = plt.get_cmap("plasma")
    for ax, fm in zip(axes[0], maps):
        runs = [r for r in heads["runs"] if r["feature_map"] == fm]
        hs = sorted({r["heads"] for r in runs})
        xs = []
        for k, h in enumerate(hs):
            xs += band(
                ax, [r for r in runs if r["heads"] == h], "features", "max_error", f"H = {h}", tone(cmap, k, len(hs))
            )
        error_axes(
            ax,
            xs,
            sec.get("certified_rank"),
            "total features H·r (log2)",
            "train max |error|",
            f"Several heads at fixed total ({fm}, witness)",
            "1-head certificate",
        )
    return save(fig, out_dir, "beyond_heads")


def section_html(summary: dict, page) -> dict[str, list[str]]:
    lo = summary["loopholes"]
    if not lo.get("heads"):
        return {}
    per_map = lo["heads"]["per_map"]
    hs = sorted({int(h) for ph in per_map.values() for h in ph})
    rows = [
        {
            "heads H": h,
            **{
                f"{fm}: exact from total H·r": reached(ph[str(h)]["transition_total"], ph[str(h)]["max_total"])
                for fm, ph in per_map.items()
                if str(h) in ph
            },
        }
        for h in hs
    ]
    return EXPERIMENT.block(
        summary,
        table(rows),
        page.figures("heads"),
    )


EXPERIMENT = Experiment(
    name="heads",
    order=90,
    title="Several heads at a fixed total",
    key="loopholes",
    section=section,
    schema=HeadsSection | None,
    sentence=sentence,
    conclusions=conclusions,
    html=section_html,
    figures=(Figure("heads", draw),),
    pools=("witness",),
    **FAMILY_CERTIFICATES,
)
