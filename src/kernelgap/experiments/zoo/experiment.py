"""The zoo: every registered feature map on the witness family and one OOD size.

"Exact from" is pooled over every sweep that trained the map (the witness pool, and the
OOD pool at the size of the ``zoo_ood`` sweep), so the zoo's sweeps need not repeat the
maps other experiments train.  The step certifies each training family.
"""

from __future__ import annotations

from ...report.criteria import OOD_SOLVED_ACC, exact, family_size, first_rank, solves_test_pool
from ...report.figures import accuracy_axes, error_axes, map_bands, plt, save
from ...report.html import of, reached, table
from ...report.trained import RunRow
from ...validation import JsonInt, JsonNumber, Section
from ..base import FAMILY_CERTIFICATES, Experiment, Figure

#: The zoo's sweep on an OOD pool (its own experiment: the quick profile leaves it out).
OOD_SWEEP = "zoo_ood"


def wall_verdict(transition: int | None, certified: int | None, tried: list[int], signed: bool) -> str:
    """Where a map stands on the witness family against its certified rank (docs/experiments.md,
    "The zoo at its wall"): at it, above it (the gap; only where a count from the certificate
    up to the transition was tried and not exact), or not exact within the feature counts
    ``tried``; a signed kernel has no certificate."""
    if signed:
        return "no certificate (a signed kernel)"
    if not tried:
        return "not trained"
    if transition is None:
        return f"not exact within {max(tried)} features"
    if certified is None:
        return f"exact from {transition} features"
    if transition < certified:
        return f"below the certificate ({transition} features): contradicts the theorem"
    if transition == certified:
        return "at the certificate"
    if not any(certified <= f < transition for f in tried):
        return f"exact from {transition} features (none tried from the certificate {certified} up to it)"
    return (
        f"above the certificate: {transition} features, {transition - certified} more ({transition / certified:.3g}×)"
    )


class ZooRow(Section):
    """One map of the zoo table: where it turns exact on the witness family, against the
    certificate, and (with an OOD sweep) from which features it solves the OOD pool."""

    feature_map: str
    witness_transition: JsonInt | None
    witness_max_features: JsonInt | None
    witness_verdict: str
    ood_transition_solved: JsonInt | None = None
    ood_max_features: JsonInt | None = None
    ood_best_test_acc: JsonNumber | None = None


class ZooSection(Section):
    """The zoo experiment's part of ``summary.json``: its table and runs."""

    certified_rank: JsonInt | None
    ood_label: str | None
    table: list[ZooRow]
    witness_runs: list[RunRow]
    ood_runs: list[RunRow]


def section(results) -> dict | None:
    zoo_w, zoo_o = results.rows("zoo"), results.rows(OOD_SWEEP)
    if not (zoo_w or zoo_o):
        return None
    pooled = results.pooled("witness")
    maps = sorted({r["feature_map"] for r in zoo_w + zoo_o + pooled})
    size = family_size(zoo_o[0]) if zoo_o else None
    ood = [r for r in results.pooled("ood") if family_size(r) == size] if size else []
    certified = results.witness_certified_rank()
    return ZooSection(
        certified_rank=certified,
        ood_label=f"n={size}" if size else None,
        table=[_row(fm, [r for r in pooled if r["feature_map"] == fm], ood, certified) for fm in maps],
        witness_runs=[r for r in pooled if r["feature_map"] in maps],
        ood_runs=[r for r in ood if r["feature_map"] in maps],
    ).dump()


def _row(fm: str, witness: list[dict], ood: list[dict], certified: int | None) -> ZooRow:
    """One map's row: its witness runs ``witness``; the OOD columns where the zoo has an OOD pool."""
    transition = first_rank(witness, exact, "features")
    tried = sorted({r["features"] for r in witness if r.get("features") is not None})
    mine = [r for r in ood if r["feature_map"] == fm]
    ood_columns = {
        "ood_transition_solved": first_rank(mine, solves_test_pool, "features"),
        "ood_max_features": max((r["features"] for r in mine), default=None),
        "ood_best_test_acc": max((r.get("test_exact_seq_acc") or 0.0 for r in mine), default=None),
    }
    return ZooRow(
        feature_map=fm,
        witness_transition=transition,
        witness_max_features=max((r["features"] for r in witness), default=None),
        witness_verdict=wall_verdict(transition, certified, tried, any(r.get("signed") for r in witness)),
        **(ood_columns if ood else {}),
    )


def sentence(summary: dict) -> str | None:
    z = summary["zoo"]
    crossed = [r["feature_map"] for r in z["table"] if r["witness_transition"] is not None]
    at = [r["feature_map"] for r in z["table"] if r.get("witness_verdict") == "at the certificate"]
    return (
        f"On the witness family {len(crossed)} of {len(z['table'])} maps become exact within the ranks "
        f"tried ({', '.join(crossed) or 'none'}), pooled over every sweep that trained them; "
        f"{len(at)} at the certified rank {z.get('certified_rank')} ({', '.join(at) or 'none'}). The table "
        "gives the state size (features) each needs and where it stands against the certificate"
        + (", and the OOD column whether it carries over to unseen tokens." if z.get("ood_label") else ".")
    )


def conclusions(summary: dict) -> dict[str, str]:
    """How many maps become exact on the witness family; per map the features from which
    most seeds are exact there, and from which they solve the OOD pool."""
    z = summary["zoo"]
    crossed = [r for r in z["table"] if r["witness_transition"] is not None]
    out = {"maps exact on the witness family": of(len(crossed), len(z["table"]))}
    for r in z["table"]:
        fm = r["feature_map"]
        out[f"{fm}: witness exact from (features)"] = reached(r["witness_transition"], r["witness_max_features"])
        if r.get("witness_verdict"):
            out[f"{fm}: against the certificate"] = r["witness_verdict"]
        if "ood_transition_solved" in r:
            out[f"{fm}: OOD {z['ood_label']} test accuracy ≥ {OOD_SOLVED_ACC} from (features)"] = reached(
                r["ood_transition_solved"], r["ood_max_features"]
            )
    return out


def draw(summary: dict, out_dir) -> list[str]:
    z = summary["zoo"]
    has_ood = bool(z["ood_runs"])
    fig, axes = plt.subplots(1, 1 + has_ood, figsize=(5 * (1 + has_ood), 4), squeeze=False)
    xs = map_bands(axes[0][0], summary, z["witness_runs"], "features", "max_error")
    error_axes(
        axes[0][0], xs, z.get("certified_rank"), "features (log2)", "train max |error|", "The zoo on the witness family"
    )
    if has_ood:
        xs = map_bands(axes[0][1], summary, z["ood_runs"], "features", "test_exact_seq_acc")
        accuracy_axes(axes[0][1], xs, "features (log2)", f"The zoo on OOD {z['ood_label']}")
    return save(fig, out_dir, "beyond_zoo")


def section_html(summary: dict, page) -> dict[str, list[str]]:
    z = summary["zoo"]
    rows = []
    for r in z["table"]:
        row = {
            "map": r["feature_map"],
            "witness: exact from (features)": reached(r["witness_transition"], r["witness_max_features"]),
            "against the certificate": r.get("witness_verdict") or "",
        }
        if "ood_transition_solved" in r:
            row[f"OOD {z['ood_label']}: acc ≥ {OOD_SOLVED_ACC} from"] = reached(
                r["ood_transition_solved"], r["ood_max_features"]
            )
            row["OOD best test acc"] = r["ood_best_test_acc"]
        rows.append(row)
    return EXPERIMENT.block(
        summary,
        table(rows),
        page.figures("zoo"),
    )


EXPERIMENT = Experiment(
    name="zoo",
    order=100,
    title="The feature-map zoo at the wall",
    section=section,
    schema=ZooSection | None,
    sentence=sentence,
    conclusions=conclusions,
    html=section_html,
    figures=(Figure("zoo", draw),),
    pools=("witness",),
    **FAMILY_CERTIFICATES,
)
