"""The probe's figure: per probed module, each suite beside the built-in baseline (and the
twin: the same kernel in the same wrapper), against features where every count is known."""

from __future__ import annotations

from ...probe.verdicts import judges_collapse
from ...report.figures import MODULE_COLOR, band, error_axes, legend, log2_axis, map_color, plt, points, save
from ..base import Figure


def draw(summary: dict, out_dir) -> list[str]:
    """One figure per probed module (``probe-<name>``): its suites beside the built-in baseline."""
    files = []
    for p in summary["probes"]:
        suites = [s for s in p.get("suites", []) if points(s["runs"] + s["baseline"], "rank") >= 2]
        if not suites:
            continue
        fig, axes = plt.subplots(1, len(suites), figsize=(5 * len(suites), 3.8), squeeze=False)
        for ax, s in zip(axes[0], suites):
            key = "test_exact_seq_acc" if s["ood"] else "max_error"
            x = "features" if s.get("axis") == "features" else "rank"  # the baseline's rank is its features
            xs = band(ax, s["runs"], x, key, p.get("class") or "probe", MODULE_COLOR)
            xs += band(
                ax, s["baseline"], x, key, f"{p.get('baseline')} (built-in)", map_color(summary, p.get("baseline"))
            )
            twin = s.get("twin")
            if twin and x == "features":
                xs += band(
                    ax, twin["runs"], "features", key, f"{twin['map']} (built-in, same wrapper)", "#7f7f7f", "--"
                )
            title = f"{p['name']}: {s['name']}"
            label = "features (log2)" if x == "features" else "rank argument (log2)"
            if s["ood"]:
                log2_axis(ax, xs)
                ax.set_ylim(-0.02, 1.02)
                ax.set(xlabel=label, ylabel="test exact-seq accuracy", title=title)
                legend(ax)
            else:
                qb = s.get("query_blind")
                if judges_collapse(qb):
                    ax.axhline(qb["max_error"], color="#d62728", ls=":", lw=1, label="uniform attention (loss optimum)")
                    if qb.get("query_only"):
                        ax.axhline(
                            qb["query_only"]["max_error"], color="#9467bd", ls=":", lw=1, label="attention ignored"
                        )
                error_axes(ax, xs, s.get("certified_rank"), label, "train max |error|", title)
        files += save(fig, out_dir, f"probe-{p['name']}")
    return files


PROBE_FIGURE = Figure("probe", draw)
