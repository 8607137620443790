"""The witness family: certified rank = one-hot construction = trained exact rank.

The sweep trains ``table``, ``mlp_exp`` and dense softmax on the witness family; the
step writes ``certificate.json`` (the certificate and the construction, checked on every
sequence); the section pools every single-head kernel run on the witness family.
"""

from __future__ import annotations

from typing import Any

from ...report.criteria import edge, every, exact, first_rank, majority, sorted_by
from ...report.figures import error_axes, map_bands, plt, save
from ...report.html import Finding, fmt, of, reached, table, yes_no
from ...report.trained import RunRow, SoftmaxRow
from ...validation import JsonInt, JsonNumber, Section
from ..base import Experiment, Figure

#: What the paper reports (kept verbatim in summary.json).
PAPER = {"inputs": 1272, "m": 24, "certified_rank": 8, "error_below_bound": "> 0.80 for r < 8", "exact_rank": 32}


class WitnessSection(Section):
    """The witness experiment's part of ``summary.json``: the certificate as the step wrote
    it, every trained run, and each map's transition rank (pooled over the witness pool)."""

    m: JsonInt | None
    sequences: JsonInt | None
    certified_rank: JsonInt | None
    certificate: dict[str, Any]
    constructed: dict[str, Any] | None
    runs: list[RunRow]
    softmax: list[SoftmaxRow]
    transition_rank: dict[str, JsonInt | None]
    exact_all_seeds_rank: dict[str, JsonInt | None]
    below_certificate_min_error: JsonNumber | None


def section(results) -> dict | None:
    rows = results.rows("witness")
    if not rows:
        return None
    pooled = results.pooled("witness")
    cert = results.read("witness", "certificate.json") or {}
    maps = sorted({r["feature_map"] for r in rows if r["kind"] == "kernel"})
    certified = cert.get("certified_rank")
    below = [
        r["max_error"]
        for r in pooled
        if certified and (r["features"] or 0) < certified and not r["signed"] and r["max_error"] is not None
    ]

    def first(rule) -> dict[str, int | None]:
        return {fm: first_rank([r for r in pooled if r["feature_map"] == fm], exact, "features", rule) for fm in maps}

    return WitnessSection(
        m=cert.get("m"),
        sequences=cert.get("sequences"),
        certified_rank=certified,
        certificate=cert,
        constructed=cert.get("constructed"),
        runs=sorted_by([r for r in rows if r["kind"] == "kernel"], "feature_map", "rank", "seed"),
        softmax=[
            SoftmaxRow(seed=r["seed"], max_error=r["max_error"], exact=r["exact"])
            for r in sorted_by([r for r in rows if r["kind"] == "softmax"], "seed")
        ],
        transition_rank=first(majority),
        exact_all_seeds_rank=first(every),
        below_certificate_min_error=min(below, default=None),
    ).dump()


def agreement(cert, built: dict, trained: list[int]) -> str:
    """Whether proved, constructed and trained exact ranks coincide."""
    parts = [f"certified r ≥ {cert}"]
    if built:
        parts.append(
            f"the one-hot construction is {'exact' if built.get('exact') else 'NOT exact'} "
            f"at r = {built.get('rank')} on all {built.get('sequences')} sequences "
            f"(max error {fmt(built.get('max_error'), '.2g')})"
        )
    if trained:
        parts.append(f"training is first exact (most seeds) at r = {min(trained)}")
    return (
        "; ".join(parts)
        + ". "
        + (
            "Proved = constructed = trained."
            if coincide(cert, built, trained)
            else "They do not all coincide; see the witness runs."
        )
    )


def coincide(cert, built: dict, trained: list[int]) -> bool:
    """Proved = constructed = trained: the construction is exact at the certified rank and
    training first becomes exact (most seeds) there."""
    return bool(built.get("exact") and cert == built.get("rank") and trained and min(trained) == cert)


def paper_rows(s: dict) -> list[dict]:
    w = s["witness"]
    cert = w.get("certified_rank")
    certificate = w.get("certificate") or {}
    bounds = certificate.get("bounds") or {}
    radon, trace = bounds.get("radon") or {}, bounds.get("trace") or {}
    min_below = w.get("below_certificate_min_error")
    exact_rank = w.get("transition_rank") or {}
    rows = [
        {
            "quantity": "Witness family: certified rank bound",
            "paper": f"r ≥ {PAPER['certified_rank']} ({PAPER['inputs']} inputs)",
            "ours": f"r ≥ {cert} ({w['sequences']} sequences, m = {w['m']})",
            "note": "The paper's witness suite is not published; ours is 16 Hadamard-24 codewords with "
            "their complements as good candidates and every other query's good candidate as a bad "
            f"one. Radon bound {fmt(radon.get('rank'))} (every pair of queries has ε_ij·ε_ji ≤ "
            f"{radon.get('max_product', '?')}); trace bound {fmt(trace.get('rank'))} "
            f"(Σε² = {certificate.get('sum_eps2', '?')}); both in exact rationals.",
        },
        {
            "quantity": "Witness: smallest max error below the bound",
            "paper": PAPER["error_below_bound"],
            "ours": fmt(min_below),
            "note": (
                "Agrees: every run below the certified rank keeps max error ≥ 1/2, as the theorem demands."
                if min_below is None or min_below >= 0.5
                else "A run below the certified rank is exact: that contradicts the theorem and is a bug."
            ),
            "conclusion": f"a run below the certificate is exact: {yes_no(min_below is not None and min_below < 0.5)}",
        },
        {
            "quantity": "Witness: rank where training becomes exact",
            "paper": f"r = {PAPER['exact_rank']}",
            "ours": ", ".join(f"{k}: r = {fmt(v)}" for k, v in sorted(exact_rank.items())) or "–",
            "note": agreement(cert, w.get("constructed") or {}, [v for v in exact_rank.values() if v is not None]),
        },
    ]
    sm = w.get("softmax") or []
    if sm:
        ok = sum(1 for r in sm if r["exact"])
        rows.append(
            {
                "quantity": "Witness: dense softmax exact on all seeds",
                "paper": "yes",
                "ours": f"{ok}/{len(sm)} seeds",
                "note": "Agrees." if ok == len(sm) else "Some softmax seeds failed to fit: see the runs table.",
            }
        )
    return rows


def conclusions(s: dict) -> dict[str, str]:
    """Certificate, construction, per map the rank where training becomes exact (most seeds
    and every seed, pooled over the witness pool) and the seeds exact at the certificate,
    whether proved = constructed = trained, softmax's exact seeds."""
    w = s["witness"]
    cert = w.get("certified_rank")
    built = w.get("constructed") or {}
    runs = w.get("runs") or []
    most, every_seed = w.get("transition_rank") or {}, w.get("exact_all_seeds_rank") or {}
    out = {
        "certified rank": fmt(cert),
        "certificate method": fmt((w.get("certificate") or {}).get("method")),
        "one-hot construction": f"{'exact' if built.get('exact') else 'not exact'} at r = {built.get('rank')}"
        if built
        else "not built",
    }
    for fm in sorted(set(most) | set(every_seed) | {r["feature_map"] for r in runs}):
        mine = [r for r in runs if r["feature_map"] == fm]
        top = max((r.get("features") or r["rank"] for r in mine), default=None)
        out[f"{fm}: exact from (most seeds, features)"] = reached(most.get(fm), top, "r = ")
        out[f"{fm}: exact from (every seed, features)"] = reached(every_seed.get(fm), top, "r = ")
        at = [r for r in mine if cert is not None and r["rank"] == cert]
        if at:
            out[f"{fm}: seeds exact at the certificate"] = of(sum(r["exact"] for r in at), len(at))
    out["proved = constructed = trained"] = yes_no(coincide(cert, built, [v for v in most.values() if v is not None]))
    sm = w.get("softmax") or []
    if sm:
        out["dense softmax: seeds exact"] = of(sum(r["exact"] for r in sm), len(sm))
    return out


def headline(s: dict) -> list[Finding]:
    """The certified rank; the least rank where training is exact (most seeds), against the paper's."""
    w = s["witness"]
    out = []
    if w.get("certified_rank"):
        out.append(
            Finding(f"One kernel head needs r ≥ {w['certified_rank']} on the witness family (certified, m = {w['m']}).")
        )
    most = {k: v for k, v in (w.get("transition_rank") or {}).items() if v is not None}
    if most:
        r = min(most.values())
        maps = sorted(k for k, v in most.items() if v == r)
        at = [x for x in w["runs"] if (x.get("features") or x["rank"]) == r]
        edges = [f"{fm}: {e}" for fm in maps if (e := edge([x for x in at if x["feature_map"] == fm], exact))]
        said = f"Training is exact from r = {r} ({', '.join(maps)}; the paper: r = {PAPER['exact_rank']})."
        out.append(Finding(said, "; ".join(edges) or None))
    return out


def draw(summary: dict, out_dir) -> list[str]:
    """Train max error against rank, the certificate, the 1/2 line, softmax."""
    w = summary["witness"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    xs = map_bands(ax, summary, w["runs"], "rank", "max_error")
    if w.get("softmax"):
        worst = max(s["max_error"] for s in w["softmax"])
        ax.axhline(worst, color="#17becf", ls="-.", lw=1, label=f"dense softmax (worst seed {worst:.2f})")
    error_axes(
        ax,
        xs,
        w.get("certified_rank"),
        "feature rank r (log2)",
        "max |error| on the witness family",
        f"Witness family: m = {w['m']}, {w['sequences']} sequences",
        "certified bound",
        loc="lower left",
    )
    return save(fig, out_dir, "witness_error_vs_rank")


def sections_html(summary: dict, page) -> dict[str, list[str]]:
    w = summary["witness"]
    rows = [
        {
            "map": r["feature_map"],
            "rank": r["rank"],
            "seed": r["seed"],
            "max error": r["max_error"],
            "exact": "yes" if r["exact"] else "no",
            "exact-seq acc": r["exact_seq_acc"],
            "steps": r["steps"],
            "status": r["status"],
        }
        for r in w.get("runs") or []
    ]
    details = (
        ["<h2>Witness runs</h2><details><summary>show all runs</summary>" + table(rows) + "</details>"] if rows else []
    )
    return {"figures": [page.figures("witness")], "details": details}


EXPERIMENT = Experiment(
    name="witness",
    order=10,
    title="The witness family",
    section=section,
    schema=WitnessSection | None,
    region="figures",
    paper={"witness": PAPER},
    paper_rows=paper_rows,
    conclusions=conclusions,
    headline=headline,
    html=sections_html,
    pools=("witness",),
    figures=(
        Figure(
            "witness",
            draw,
            "Max error on the witness family against feature rank (median and seed "
            "range). Below the certified bound no nonnegative kernel model can be exact; dashed: 1/2.",
        ),
    ),
    step=".step:certificate",
    step_reads_sweep=True,
    writes="certificate.json",
)
