"""The bound curve: the largest family certified in full per m, against the 2^m positive
construction and the m-dimensional softmax scores (``[bound_curve]`` of ``profile.toml``:
the code, the m range and the query budget)."""

from __future__ import annotations

from ...report.figures import draw_bound_curve
from ..base import Experiment, Figure


def section(results) -> dict | None:
    return results.read("bound_curve", "curve.json")


def caption(summary: dict) -> str:
    curve = summary["bound_curve"]
    pts = curve["points"]
    text = (
        f"Certified lower bound on the rank of one nonnegative kernel head against m "
        f"({curve['code']} families, m = {pts[0]['m']}…{pts[-1]['m']}), beside the positive "
        "construction (rank 2^m) and dense softmax (m-dimensional scores)."
    )
    if curve["code"] == "ladder":
        last = pts[-1]
        text += (
            f" At m = {last['m']} every one of {last['queries']:,} queries is certified "
            f"({'the search limit' if last.get('limit_reached') else 'the largest family found'})"
        )
        growth = curve.get("growth")
        if growth:
            text += f"; log2 of the certified rank grows by {growth['log2_per_m']:.3f} per unit of m (least squares)"
        checks = [p["softmax"] for p in pts]
        worst = max(c["max_error"] for c in checks)
        text += (
            f". Dense softmax's construction was checked on {checks[0]['sampled']:,} random sequences of "
            f"each family: {'exact on all' if all(c['exact'] for c in checks) else 'NOT exact on all'} "
            f"(worst max error {worst:.3f})."
        )
    return text


EXPERIMENT = Experiment(
    name="bound_curve",
    title="The bound curve",
    section=section,
    schema={"type": ["object", "null"]},
    region="figures",
    settings={"code": "ladder", "m": "32..96..16", "queries": 2048},
    html=lambda summary, page: {"figures": [page.figures("bound_curve")]},
    figures=(
        Figure("bound_curve", lambda summary, out_dir: draw_bound_curve(summary["bound_curve"], out_dir), caption),
    ),
    step=".step:curve",
    writes="curve.json",
)
