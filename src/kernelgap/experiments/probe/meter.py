"""The wall meter: every probed module of a report on one table and one figure — its library,
what kind of map the structure check found (docs/theory.md, "The additivity certificate"), the
features (or keys) at which it is first exact on the suite, its verdict and the certificate where
the lower bound speaks of it.  The built-in baseline of each suite is a row too."""

from __future__ import annotations

from ...probe.verdicts import certified_verdict
from ...report.figures import MODULE_COLOR, log2_axis, plt, save
from ..base import Figure
from .text import cause_text, edge_note, named_verdict, rank_certified, recipe_rank, schedules_of

#: The colour of each structure kind on the figure (a probe of an older kernelgap: "unchecked").
KIND_COLOR = {
    "normalised kernel": "#1f77b4",
    "normalised": "#2ca02c",
    "output-normalised": "#9467bd",
    "additive": "#d62728",
    "scalar-gated": "#bcbd22",
    "gated/other": MODULE_COLOR,
    "unchecked": "#7f7f7f",
}


#: Libraries of kernelgap's own wrappers, by target or module: the library each wraps.
LIBRARIES = {
    "kernelgap.probe.zoo": "fla-core",
    "kernelgap.probe.lat": "linear_attention_transformer",
    "kernelgap.probe.examples:SoftmaxAttention": "torch",  # nn.MultiheadAttention
    "kernelgap.probe.layers": "reference (plain torch)",
}


def library_of(pr: dict) -> str:
    """The library a probed module comes from: its target's top-level package, the library a
    wrapper of kernelgap's wraps (:data:`LIBRARIES`), ``file`` for a module given by path."""
    target = str(pr.get("target", ""))
    module = target.split(":")[0]
    if module.endswith(".py") or "/" in module:
        return "file"
    return LIBRARIES.get(target) or LIBRARIES.get(module) or module.split(".")[0]


def _features_at(s: dict, rank) -> int | None:
    return next((v["features"] for v in s.get("verdicts") or [] if v["rank_argument"] == rank), rank)


def _headline(s: dict, rank) -> dict | None:
    """The verdict the row states: at the first exact rank, else at the most features tried."""
    verdicts = s.get("verdicts") or []
    if rank is not None:
        return next((v for v in verdicts if v["rank_argument"] == rank), None)
    return max(verdicts, key=lambda v: v["rank_argument"]) if verdicts else None


def verdict_cell(v: dict | None, s: dict, certificate: str | None) -> str:
    """The row's verdict, with the recipe that reached it (on its one seed), an edge note where
    the seeds do not make it firm, and what was tried (or that no recipe was) where it is not exact."""
    if certificate:  # no rank of its kind fits (its structure's floor)
        return certificate
    if v is None:
        return "not exact"
    text = named_verdict(v, schedules_of(s)) + edge_note(v)
    if v.get("recipe"):  # the recipe trains one seed; the seeds column counts the suite's schedule
        seed = next((r.get("seed") for r in s.get("recipes") or [] if r["name"] == v["recipe"]), None)
        text += f" (seed {seed} only; {v.get('fitted', 0)} of {v.get('seeds', 0)} at the suite's schedule)"
    if v["verdict"] != "exact" and not v.get("recipe"):
        tried = [schedules_of(s).get(t["recipe"], t["recipe"]) for t in v.get("tried") or []]
        text += f" (tried {', '.join(tried)})" if tried else " (no recipe search)"
    if "ablations" in v:  # a failure's cause, as the probe's sentence states it
        text += f"; {cause_text(v)}"
    return text


def module_row(pr: dict, s: dict) -> dict:
    """One probed module on one suite (:func:`meter_rows`)."""
    kind = (s.get("structure") or {}).get("kind", "unchecked")
    recipe = recipe_rank(s)
    rank = recipe["rank_argument"] if recipe else s["transition_rank"]
    v = recipe or _headline(s, rank)
    args = pr.get("args") or {}  # ModuleSpec.rank_free, read off the summary (the report imports no model)
    rank_free = bool(args) and "rank" not in [a for a in args.values() if isinstance(a, str)]
    return {
        "library": library_of(pr),
        "module": pr["name"],
        "suite": s["name"],
        "kind": kind,
        "exact at": None if rank is None else "rank-free" if rank_free else _features_at(s, rank),
        "tried up to": None
        if rank_free
        else max((x["features"] or x["rank_argument"] for x in s.get("verdicts") or []), default=None),
        "verdict": verdict_cell(v, s, certified_verdict(s.get("structure"))),
        "seeds exact": "–" if v is None else f"{v.get('fitted', 0)}/{v.get('seeds', 0)}",
        "certificate": rank_certified(s) or "does not bind",
    }


def meter_rows(summary: dict) -> list[dict]:
    """One row per probed module and non-OOD suite, then the built-in baseline of each suite
    (of the probe that tried it at the most ranks):
    ``exact at`` the features of the first exact rank (a recipe's included; ``rank-free`` for a
    module that takes no rank), else None with ``tried up to`` the most features tried; the
    verdict there and how many of its seeds were exact."""
    rows, baselines = [], {}
    for pr in summary.get("probes") or []:
        for s in [s for s in pr.get("suites") or [] if not s["ood"]]:
            rows.append(module_row(pr, s))
            known = baselines.get((pr.get("baseline"), s["name"]))
            if known is None or (s["baseline_max_rank"] or 0) > (known[0]["baseline_max_rank"] or 0):
                baselines[(pr.get("baseline"), s["name"])] = (s, s.get("certified_rank"))  # the most ranks tried
    for (name, suite), (s, certified) in baselines.items():
        exact = [r for r in s.get("baseline") or [] if r.get("rank_argument") == s["baseline_transition"]]
        rows.append(
            {
                "library": "kernelgap",
                "module": f"{name} (built-in)",
                "suite": suite,
                "kind": "normalised kernel",
                "exact at": s["baseline_transition"],
                "tried up to": s["baseline_max_rank"],
                "verdict": "exact" if s["baseline_transition"] is not None else "not exact",
                "seeds exact": f"{sum(bool(r.get('exact')) for r in exact)}/{len(exact)}" if exact else "–",
                "certificate": certified,
            }
        )
    return rows


def draw_meter(summary: dict, out_dir) -> list[str]:
    """``wall-meter``: per module, the features at which it is first exact (a filled dot) or the
    most tried without (an open one, an arrow to the right), coloured by kind; the certificate
    dashed where it binds."""
    rows = meter_rows(summary)
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.4))
    xs = []
    for y, r in enumerate(rows):
        color = KIND_COLOR.get(r["kind"], "black")
        if isinstance(r["exact at"], int):
            ax.plot(r["exact at"], y, "o", color=color)
            xs.append(r["exact at"])
        elif r["exact at"] is not None:  # rank-free: exact, with no feature count to place it
            ax.annotate("exact, rank-free", (0.02, y), xycoords=("axes fraction", "data"), va="center", fontsize=7)
        elif r["tried up to"] is not None:
            ax.plot(r["tried up to"], y, "o", mfc="white", color=color)
            ax.annotate("", (r["tried up to"] * 1.5, y), (r["tried up to"], y), arrowprops={"arrowstyle": "->"})
            xs.append(r["tried up to"])
        if isinstance(r["certificate"], int):
            ax.plot([r["certificate"]] * 2, [y - 0.4, y + 0.4], "--", color="black", lw=1)
            xs.append(r["certificate"])
    ax.set_yticks(range(len(rows)), [f"{r['module']} ({r['suite']})" for r in rows], fontsize=7)
    ax.invert_yaxis()
    log2_axis(ax, xs)
    ax.set_xlim(min(xs) / 1.3, max(xs) * 1.8)  # room for the arrows of the rows never exact
    ax.set(xlabel="features (keys) at exactness, log2; dashed: the certificate", title="wall meter")
    for kind, color in KIND_COLOR.items():
        if any(r["kind"] == kind for r in rows):
            ax.plot([], [], "o", color=color, label=kind)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, out_dir, "wall-meter")


METER_FIGURE = Figure(
    "wall-meter",
    draw_meter,
    caption="Each probed module at the features where it is first exact (filled), or the most tried "
    "without (open, arrow); colour: the structure check's kind; dashed: the certificate where it binds.",
)
