"""The wall meter: every probed module of a report on one table and one figure — its library,
what kind of map the structure check found (docs/theory.md, "The additivity certificate"), the
features (or keys) at which it is first exact on the suite, its verdict and the certificate where
the lower bound speaks of it.  The built-in baseline of each suite is a row too."""

from __future__ import annotations

from ...probe.verdicts import ADDITIVE, certified_additive
from ...report.figures import MODULE_COLOR, log2_axis, plt, save
from ..base import Figure
from .text import rank_certified, recipe_rank

#: The colour of each structure kind on the figure (a probe of an older kernelgap: "unchecked").
KIND_COLOR = {
    "normalised kernel": "#1f77b4",
    "normalised": "#2ca02c",
    "output-normalised": "#9467bd",
    "additive": "#d62728",
    "gated/other": MODULE_COLOR,
    "unchecked": "#7f7f7f",
}


def library_of(pr: dict) -> str:
    """The library a probed module comes from: its target's top-level package, ``fla-core`` for
    kernelgap's adapter of fla's maps, ``file`` for a module given by path."""
    module = str(pr.get("target", "")).split(":")[0]
    if module.endswith(".py") or "/" in module:
        return "file"
    if module == "kernelgap.probe.zoo":
        return "fla-core"
    return module.split(".")[0]


def _features_at(s: dict, rank) -> int | None:
    return next((v["features"] for v in s.get("verdicts") or [] if v["rank_argument"] == rank), rank)


def _last_verdict(s: dict) -> str:
    """The verdict at the most features tried (``not exact`` where no verdict was read)."""
    verdicts = s.get("verdicts") or []
    return max(verdicts, key=lambda v: v["rank_argument"])["verdict"] if verdicts else "not exact"


def meter_rows(summary: dict) -> list[dict]:
    """One row per probed module and non-OOD suite, then the built-in baseline of each suite:
    ``exact at`` the features of the first exact rank (a recipe's included), else None with
    ``tried up to`` the most features tried."""
    rows, baselines = [], {}
    for pr in summary.get("probes") or []:
        for s in [s for s in pr.get("suites") or [] if not s["ood"]]:
            kind = (s.get("structure") or {}).get("kind", "unchecked")
            recipe = recipe_rank(s)
            rank = recipe["rank_argument"] if recipe else s["transition_rank"]
            additive = certified_additive(kind, (s.get("structure") or {}).get("additive_floor"))
            rows.append(
                {
                    "library": library_of(pr),
                    "module": pr["name"],
                    "suite": s["name"],
                    "kind": kind,
                    "exact at": None if rank is None else _features_at(s, rank),
                    "tried up to": max(
                        (v["features"] or v["rank_argument"] for v in s.get("verdicts") or []), default=None
                    ),
                    "verdict": ADDITIVE if additive else "exact" if rank is not None else _last_verdict(s),
                    "certificate": rank_certified(s) if rank_certified(s) else "does not bind",
                }
            )
            baselines.setdefault((pr.get("baseline"), s["name"]), (s, s.get("certified_rank")))
    for (name, suite), (s, certified) in baselines.items():
        rows.append(
            {
                "library": "kernelgap",
                "module": f"{name} (built-in)",
                "suite": suite,
                "kind": "normalised kernel",
                "exact at": s["baseline_transition"],
                "tried up to": s["baseline_max_rank"],
                "verdict": "exact" if s["baseline_transition"] is not None else "not exact",
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
        if r["exact at"] is not None:
            ax.plot(r["exact at"], y, "o", color=color)
            xs.append(r["exact at"])
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
