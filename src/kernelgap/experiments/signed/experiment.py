"""Signed kernels: ``signed`` and ``signed_table`` beside the nonnegative maps.

Its section is the ``signed`` item of ``loopholes`` (with ``heads``): every signed-kernel
run of the witness pool and of the OOD pool (the ``signed_ood`` sweep among them),
against the nonnegative maps trained there.  The step certifies each training family.
"""

from __future__ import annotations

from ...report.criteria import (
    OOD_SOLVED_ACC,
    exact,
    family_size,
    first_rank,
    solves_test_pool,
    sorted_by,
)
from ...report.figures import accuracy_axes, band, error_axes, map_bands, plt, save, tone
from ...report.html import exact_from, reached, share, table
from ...report.trained import RunRow, Transition
from ...validation import JsonInt, JsonNumber, Section
from ..base import FAMILY_CERTIFICATES, Experiment, Figure

#: The sweeps whose runs make this item: the loopholes section exists once any of them ran.
LOOPHOLE_SWEEPS = ("signed", "signed_ood", "heads")


def per_map(rows: list[dict], ok, key: str = "features") -> dict[str, Transition]:
    """Per feature map: the smallest ``key`` at which most seeds satisfy ``ok``, and the largest tried."""
    return {
        fm: Transition(transition=first_rank(mine, ok, key), max_tried=max((r[key] or 0) for r in mine))
        for fm in sorted({r["feature_map"] for r in rows})
        for mine in [[r for r in rows if r["feature_map"] == fm]]
    }


class NonnegativeRun(Section):
    """A nonnegative map's run on the witness family, drawn beside the signed ones."""

    feature_map: str
    rank: JsonInt
    features: JsonInt | None
    seed: JsonInt
    max_error: JsonNumber | None


class SignedWitness(Section):
    """Every map on the witness family (its transition), the signed runs, the nonnegative ones."""

    transition: dict[str, Transition]
    runs: list[RunRow]
    nonnegative_runs: list[NonnegativeRun]


class SignedOod(Section):
    """One OOD pool size: every map's transition to solving it, and the signed runs."""

    n: JsonInt
    transition_solved: dict[str, Transition]
    runs: list[RunRow]


class SignedPart(Section):
    """Signed maps on the witness family and out of distribution."""

    witness: SignedWitness
    ood: list[SignedOod]


class SignedSection(Section):
    """The signed experiment's part of ``summary.json``'s ``loopholes`` (shared with heads)."""

    certified_rank: JsonInt | None = None
    signed: SignedPart | None = None


def section(results) -> dict | None:
    if not any(results.rows(name) for name in LOOPHOLE_SWEEPS):
        return None
    pooled, pooled_ood = results.pooled("witness"), results.pooled("ood")
    signed = [r for r in pooled if r["signed"]]
    signed_ood = [r for r in pooled_ood if r["signed"]]
    if not (signed or signed_ood):
        return SignedSection(certified_rank=results.witness_certified_rank()).dump()
    nonneg_ood = [r for r in pooled_ood if not r["signed"]]
    witness = SignedWitness(
        transition=per_map(pooled, exact),
        runs=sorted_by(signed, "feature_map", "rank", "seed"),
        nonnegative_runs=[{k: r[k] for k in NonnegativeRun.model_fields} for r in pooled if not r["signed"]],
    )
    ood = [
        SignedOod(
            n=n,
            transition_solved=per_map([r for r in signed_ood + nonneg_ood if family_size(r) == n], solves_test_pool),
            runs=sorted_by([r for r in signed_ood if family_size(r) == n], "feature_map", "rank", "seed"),
        )
        for n in sorted({family_size(r) for r in signed_ood})
    ]
    return SignedSection(
        certified_rank=results.witness_certified_rank(), signed=SignedPart(witness=witness, ood=ood)
    ).dump()


def _sign_use(runs: list[dict]) -> str:
    """What the trained signed kernels did with their signs (runs that recorded it)."""
    parts = []
    for fm in sorted({r["feature_map"] for r in runs}):
        rows = [r for r in runs if r["feature_map"] == fm and "negative_weight_share" in r]
        if not rows:
            continue
        exact_rows = [r for r in rows if r["exact"]]
        use = (
            f"its exact models give {share([r['negative_weight_share'] for r in exact_rows])} of the weights a "
            f"negative sign"
            if exact_rows
            else f"{share([r['negative_weight_share'] for r in rows])} of its weights are negative"
        )
        parts.append(
            f"{fm}: {use}, {share([r['negative_denominator_share'] for r in rows])} of its "
            f"denominators, smallest |Σα| {min(r['min_abs_denominator'] for r in rows):.2g}, "
            f"guarded {share([r['guarded_share'] for r in rows])}"
        )
    return f" At the end of training — {'; '.join(parts)}." if parts else ""


def sentence(summary: dict) -> str | None:
    lo = summary.get("loopholes") or {}
    if not lo.get("signed"):
        return None
    t = lo["signed"]["witness"]["transition"]
    signed = {r["feature_map"] for r in lo["signed"]["witness"]["runs"]}

    def part(keep: bool) -> str:
        return ", ".join(
            f"{fm}: {exact_from(v['transition'], v['max_tried'])}" for fm, v in t.items() if (fm in signed) == keep
        )

    return (
        f"Signed kernels on the witness family — {part(True) or 'not run'} (features); nonnegative maps "
        f"— {part(False) or 'not run'}; the certificate (r ≥ {lo.get('certified_rank')}) binds "
        "nonnegative kernels only." + _sign_use(lo["signed"]["witness"]["runs"])
    )


def conclusions(summary: dict) -> dict[str, str]:
    """Per map on the witness family (signed and nonnegative, pooled) and per OOD size and
    map: the features from which most seeds are exact (solve the test pool)."""
    lo = summary.get("loopholes") or {}
    if not lo.get("signed"):
        return {}
    out = {
        f"witness, {fm}: exact from (features)": reached(v["transition"], v["max_tried"])
        for fm, v in lo["signed"]["witness"]["transition"].items()
    }
    for size in lo["signed"]["ood"]:
        for fm, v in size["transition_solved"].items():
            out[f"OOD n = {size['n']}, {fm}: test accuracy ≥ {OOD_SOLVED_ACC} from (features)"] = reached(
                v["transition"], v["max_tried"]
            )
    return out


def draw(summary: dict, out_dir) -> list[str]:
    sec = summary["loopholes"]
    if not sec.get("signed"):
        return []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    runs = sec["signed"]["witness"]["runs"] + sec["signed"]["witness"].get("nonnegative_runs", [])
    signed = {r["feature_map"] for r in sec["signed"]["witness"]["runs"]}
    xs = map_bands(ax1, summary, runs, "features", "max_error", lambda fm: f"{fm} (signed)" if fm in signed else fm)
    error_axes(
        ax1,
        xs,
        sec.get("certified_rank"),
        "features (log2)",
        "train max |error|",
        "Witness family: signed vs nonnegative",
    )
    xs = []
    ood_runs = {s["n"]: s["runs"] for s in ((summary.get("ood") or {}).get("scales") or [])}
    cmap = plt.get_cmap("viridis")
    sizes = sec["signed"]["ood"]
    for k, size in enumerate(sizes):
        color = tone(cmap, k, len(sizes))
        for fm in sorted({r["feature_map"] for r in size["runs"]}):
            xs += band(
                ax2,
                [r for r in size["runs"] if r["feature_map"] == fm],
                "rank",
                "test_exact_seq_acc",
                f"{fm} n={size['n']}",
                color,
            )
        xs += band(
            ax2, ood_runs.get(size["n"], []), "rank", "test_exact_seq_acc", f"mlp_exp n={size['n']}", color, ls="--"
        )
    accuracy_axes(ax2, xs, "feature rank r (log2)", "OOD: signed (solid) vs mlp_exp (dashed)")
    return save(fig, out_dir, "beyond_signed")


def section_html(summary: dict, page) -> dict[str, list[str]]:
    lo = summary["loopholes"]
    if not lo.get("signed"):
        return {}
    t = lo["signed"]["witness"]["transition"]
    rows = [{"map": fm, "exact from (features)": reached(v["transition"], v["max_tried"])} for fm, v in t.items()]
    rows.append({"map": "certificate (nonnegative)", "exact from (features)": lo.get("certified_rank")})
    ood = [
        {"n": s["n"], "map": fm, f"test acc ≥ {OOD_SOLVED_ACC} from": reached(v["transition"], v["max_tried"])}
        for s in lo["signed"]["ood"]
        for fm, v in s["transition_solved"].items()
    ]
    return EXPERIMENT.block(
        summary,
        table(rows),
        table(ood) if ood else "",
        page.figures("signed"),
    )


EXPERIMENT = Experiment(
    name="signed",
    order=70,
    title="Signed kernels",
    key="loopholes",
    section=section,
    schema=SignedSection | None,
    sentence=sentence,
    conclusions=conclusions,
    html=section_html,
    figures=(Figure("signed", draw),),
    pools=("witness",),
    **FAMILY_CERTIFICATES,
)
