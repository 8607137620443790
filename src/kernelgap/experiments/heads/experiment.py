"""Several heads: H heads of rank r at fixed totals H·r on two-level families (witness,
Hadamard codes) and on families whose queries see more overlap levels (constant-weight
codes, ladders); docs/theory.md, "Several heads".

Its section is the ``heads`` item of ``loopholes`` (with ``signed``): per family, map and head
count, the smallest exact total, beside the family's one-head certificate and two-head
construction, which the step computes for each training family (``certificates.json``).
"""

from __future__ import annotations

import json
from typing import Any

from ...report.criteria import exact, first_rank, grouped, sorted_by
from ...report.figures import legend, log2_axis, plt, save, tone
from ...report.html import exact_from, reached, table, yes_no
from ...report.trained import RunRow
from ...validation import JsonInt, Section
from ..base import FAMILY_CERTIFICATES, Experiment, Figure


class HeadsCell(Section):
    """One map at one head count: the total H·r where it turned exact and the largest tried."""

    transition_total: JsonInt | None
    max_total: JsonInt


class HeadsFamily(Section):
    """One training family: the most overlap levels a query of it sees, its one-head
    certificate, the two-head construction's total (None: not a two-level family), and per map
    and head count the smallest exact total."""

    family: str
    params: dict[str, Any]
    name: str
    levels: JsonInt | None
    certified_rank: JsonInt | None
    constructed_total: JsonInt | None
    per_map: dict[str, dict[str, HeadsCell]]


class HeadsTable(Section):
    """Every training family's cells, and the runs."""

    families: list[HeadsFamily]
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
    certs = _certificates(results)
    families = []
    for (family, params, sha256), mine in grouped(heads, _family_of_row).items():
        cert = certs.get((family, params, sha256), {})
        built = cert.get("two_heads") or {}
        families.append(
            HeadsFamily(
                family=family,
                params=json.loads(params),
                name=cert.get("name", family),
                levels=cert.get("levels"),
                certified_rank=cert.get("certified_rank"),
                constructed_total=built["total"] if built.get("applies") and built.get("exact") else None,
                per_map=_cells(mine),
            )
        )
    # two-level families first; then by name, parameters and content
    families.sort(key=lambda f: (f.levels is None, f.levels or 0, f.name, json.dumps(f.params, sort_keys=True)))
    return HeadsSection(
        certified_rank=results.witness_certified_rank(),
        heads=HeadsTable(families=families, runs=sorted_by(heads, "family", "feature_map", "heads", "rank", "seed")),
        two_heads=_constructed(certs),
    ).dump()


def _family_of_row(row: dict) -> tuple[str, str, str | None]:
    """A run's training family: registered name, parameters (as sorted JSON) and, for a family
    file, its content's SHA-256 (two files of one stem and parameters are two families)."""
    return row["family"], json.dumps(row["params"], sort_keys=True), row["family_sha256"]


def _cells(rows: list[dict]) -> dict[str, dict[str, HeadsCell]]:
    """Per map and head count, the smallest total H·r at which most seeds are exact."""
    return {
        fm: {
            str(h): HeadsCell(
                transition_total=first_rank(sub, exact, "features"), max_total=max(r["features"] for r in sub)
            )
            for h, sub in sorted(grouped(mine, lambda r: r["heads"]).items())
        }
        for fm, mine in sorted(grouped(rows, lambda r: r["feature_map"]).items())
    }


def _certificates(results) -> dict[tuple[str, str, str | None], dict]:
    """The step's entry of each training family (``certificates.json``), keyed as
    :func:`_family_of_row` keys a run."""
    certs = results.read("heads", "certificates.json")
    entries = [e for e in (certs.values() if isinstance(certs, dict) else ()) if isinstance(e, dict)]
    return {(e.get("family"), json.dumps(e.get("params"), sort_keys=True), e.get("sha256")): e for e in entries}


def _constructed(certs: dict) -> dict | None:
    """The two-head construction on the witness family, as the step checked it, where it applies."""
    built = certs.get(("witness", "{}", None), {}).get("two_heads")
    if isinstance(built, dict) and built.get("applies"):
        return {k: built[k] for k in TwoHeadsBuilt.model_fields}
    return None


def tried_total(fam: dict, h: str) -> int:
    """The largest total tried at ``h`` heads over the family's maps."""
    return max(ph[h]["max_total"] for ph in fam["per_map"].values() if h in ph)


def best_total(fam: dict, h: str) -> int | None:
    """The smallest exact total at ``h`` heads over the family's maps (None: none exact)."""
    totals = [ph[h]["transition_total"] for ph in fam["per_map"].values() if h in ph]
    return min((t for t in totals if t is not None), default=None)


def lowers(fam: dict) -> bool | None:
    """Whether several heads are exact at a total below what one head needs: below the one-head
    certificate (proved) or below the smallest exact one-head total trained; ``False`` where one
    head is exact at or below every multi-head total, ``None`` where nothing decides it."""
    multi = [t for h in _head_counts(fam) if h != "1" for t in [best_total(fam, h)] if t is not None]
    one = best_total(fam, "1")
    if not multi:
        return None
    if min(multi) < (fam["certified_rank"] or 0) or (one is not None and min(multi) < one):
        return True
    return False if one is not None else None


def _head_counts(fam: dict) -> list[str]:
    return sorted({h for ph in fam["per_map"].values() for h in ph}, key=int)


def _families(summary: dict) -> list[dict]:
    lo = summary.get("loopholes") or {}
    return (lo.get("heads") or {}).get("families") or []


def conclusions(summary: dict) -> dict[str, str]:
    """Per family, map and head count the smallest exact total H·r; per family whether
    splitting lowers it below one head; the two-head construction."""
    out = {}
    for fam in _families(summary):
        for fm, ph in fam["per_map"].items():
            for h, v in ph.items():
                out[f"{fam['name']}, {fm}, H = {h}: exact from (total H·r)"] = reached(
                    v["transition_total"], v["max_total"]
                )
        out[f"{fam['name']}: several heads exact below what one head needs"] = yes_no(lowers(fam))
    built = (summary.get("loopholes") or {}).get("two_heads")
    if built:
        out["two heads: constructed total (exact on every sequence)"] = f"{built['total']} ({yes_no(built['exact'])})"
    return out


def _family_sentence(fam: dict) -> str:
    levels = f"{fam['levels']} levels per query" if fam["levels"] else "levels not counted"
    cert = f"one head certified r ≥ {fam['certified_rank']}" if fam["certified_rank"] else "no certificate"
    built = f"; two heads constructed at total {fam['constructed_total']}" if fam["constructed_total"] else ""
    cells = ", ".join(
        f"H = {h}: {exact_from(best_total(fam, h), tried_total(fam, h), 'H·r')}" for h in _head_counts(fam)
    )
    return f"{fam['name']} ({levels}; {cert}{built}): {cells}"


def sentence(summary: dict) -> str | None:
    families = _families(summary)
    if not families:
        return None
    below = [f["name"] for f in families if lowers(f)]
    multi = [f["name"] for f in families if f["levels"] and f["levels"] > 2 and lowers(f)]
    verdict = (
        f" Several heads are exact below what one head needs on {len(below)} of {len(families)} families"
        + (f" ({', '.join(below)})" if below else "")
        + (f", {len(multi)} of them with more than two levels per query" if below else "")
        + "."
    )
    built = (summary.get("loopholes") or {}).get("two_heads")
    if built and built["exact"]:
        verdict += (
            f" The two-head construction on the witness family: ranks {built['heads'][0]} + {built['heads'][1]}, "
            f"exact on all {built['sequences']:,} sequences, max error {built['max_error']} in exact arithmetic."
        )
    parts = "; ".join(_family_sentence(f) for f in families)
    return f"Several heads at a fixed total, smallest exact total H·r per head count: {parts}.{verdict}"


def draw(summary: dict, out_dir) -> list[str]:
    """The smallest exact total against H per family (hollow: none exact up to the largest
    tried), each family's one-head certificate dashed and its two-head construction a star."""
    families = _families(summary)
    if not families:
        return []
    fig, ax = plt.subplots(figsize=(8.6, 4.4))
    cmap = plt.get_cmap("viridis")
    hs = sorted({int(h) for f in families for h in _head_counts(f)})
    for k, fam in enumerate(families):
        color, shift = tone(cmap, k, len(families)), 2 ** (0.05 * (k - (len(families) - 1) / 2))  # side by side
        counts = _head_counts(fam)
        found = [(int(h) * shift, best_total(fam, h)) for h in counts if best_total(fam, h) is not None]
        missed = [(int(h) * shift, tried_total(fam, h)) for h in counts if best_total(fam, h) is None]
        if found:
            ax.plot(*zip(*found), "o-", color=color, label=fam["name"])
        if missed:
            ax.plot(*zip(*missed), "o", mfc="none", color=color, label=None if found else fam["name"])
        if fam["certified_rank"]:
            ax.axhline(fam["certified_rank"], color=color, ls="--", lw=1)
        if fam["constructed_total"]:
            ax.plot([2 * shift], [fam["constructed_total"]], "*", ms=12, color=color)
    ax.plot([], [], "k--", lw=1, label="one-head certificate")
    ax.plot([], [], "k*", ms=10, ls="none", label="two-head construction")
    ax.plot([], [], "ko", mfc="none", ls="none", label="none exact up to this total")
    ax.plot(hs, hs, ":", color="grey", lw=1, label="H heads of rank 1: the least total")
    log2_axis(ax, hs)
    ax.set_yscale("log", base=2)
    ax.set(xlabel="heads H", ylabel="smallest exact total H·r", title="Several heads: the total each needs")
    legend(ax, loc="upper left", bbox_to_anchor=(1.02, 1))
    return save(fig, out_dir, "beyond_heads")


def section_html(summary: dict, page) -> dict[str, list[str]]:
    families = _families(summary)
    if not families:
        return {}
    hs = sorted({h for f in families for h in _head_counts(f)}, key=int)
    rows = [
        {
            "family": fam["name"],
            "levels per query": fam["levels"],
            "1 head: certified r ≥": fam["certified_rank"],
            "2 heads: constructed total": fam["constructed_total"],
            **{
                f"H = {h}: exact from H·r": reached(best_total(fam, h), tried_total(fam, h))
                for h in hs
                if h in _head_counts(fam)
            },
        }
        for fam in families
    ]
    return EXPERIMENT.block(summary, table(rows), page.figures("heads"))


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
