"""The bound curve: the largest family certified in full per m, against the 2^m positive
construction and the m-dimensional softmax scores (``[bound_curve]`` of ``profile.toml``:
the code, the m range and the query budget); and where the profile's sweep trains table
kernels on ladder families, the smallest exact trained rank beside the certified one
(:mod:`kernelgap.report.trained`: exact on every sequence of the product family), and the
training curves of those runs (max error against step, from each record's ``curve``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ...report.figures import certified_in_full, draw_bound_curve, draw_training_curves
from ...report.html import Finding, fmt, yes_no
from ...report.trained import trained_conclusions, trained_section
from ...task import EXACT_THRESHOLD
from ..base import Experiment, Figure


def section(results) -> dict | None:
    """``curve.json`` and, per trained family, its runs and sandwich (``trained``); the
    training curve of every run whose record keeps one (``training_curves``)."""
    data = results.read("bound_curve", "curve.json")
    rows = results.rows("bound_curve")
    if data is None and not rows:
        return None
    data = dict(data or {"code": None, "points": []})
    data["trained"] = trained_section(results, "bound_curve", data.pop("trained_families", None))
    data["training_curves"] = training_curves(results.records("bound_curve"))
    return data


def training_curves(records: list[dict]) -> list[dict]:
    """Per run with a training curve in its record (older records have none): its family,
    rank and seed, and its max error every ``curve.every`` steps with its last step's
    (``curve.final``) appended, in the order of family, rank and seed."""
    out = []
    for rec in records:
        curve = rec.get("curve")
        if not isinstance(curve, dict) or not curve.get("step"):
            continue
        steps, errors = list(curve["step"]), list(curve["max_error"])
        final = curve.get("final") or {}
        if final.get("step") is not None and final["step"] > steps[-1]:
            steps.append(final["step"])
            errors.append(final.get("max_error"))
        model, family = rec["config"]["model"], rec["config"]["family"]
        out.append(
            {
                "id": rec["id"],
                "family": family["name"],
                "params": family["params"],
                "rank": model.get("rank"),
                "seed": rec["seed"],
                "every": curve.get("every"),
                "mse_steps": curve.get("mse_steps"),
                "step": steps,
                "max_error": errors,
            }
        )
    return sorted(out, key=lambda c: (c["family"], sorted(c["params"].items()), c["rank"] or 0, c["seed"], c["id"]))


def draw_training(summary: dict, out_dir) -> list[str]:
    """The training curves of the trained runs (:func:`training_curves`), one line each."""
    curves = [
        {**c, "label": f"{c['family']} {_params(c['params'])}, r = {c['rank']}, seed {c['seed']}"}
        for c in summary["bound_curve"].get("training_curves") or []
    ]
    return draw_training_curves(curves, out_dir, "bound_curve_training", "Training curves of the trained ladder runs")


def _params(params: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in params.items())


def training_caption(summary: dict) -> str:
    curves = summary["bound_curve"].get("training_curves") or []
    every = " or ".join(str(e) for e in sorted({c["every"] for c in curves if c.get("every")}))
    text = (
        f"Max error against the training step (log scale) of {len(curves)} trained runs, from the curve "
        f"each run's record keeps (every {every or '?'} steps, and its last step), on what each step trains "
        "on: the whole family, or that step's batch of a family trained in batches (whether a run is exact "
        f"is judged on the whole family). Dashed: the exact threshold {Fraction(EXACT_THRESHOLD)}."
    )
    if any(c.get("mse_steps") for c in curves):
        text += " Dotted: the end of the mean-squared phase."
    return text


def trained_text(summary: dict) -> str:
    """One clause per trained family: its certificate and where its runs became exact."""
    parts = []
    for t in summary["bound_curve"]["trained"]:
        if not t["runs"]:
            continue
        name = f"m = {t['m']}, n = {t['n']}" if t.get("n") is not None else f"m = {t['m']}"
        cert = t["certified_rank"]
        at = [r for r in t["ranks"] if r["rank"] == cert]
        exact_at = f"{at[0]['exact']} of {at[0]['seeds']} seeds exact at the certificate" if at else "not trained at it"
        most = t.get("trained_most")
        anyr = t.get("trained_any")
        parts.append(
            f"ladder {name} (certified {cert}): {exact_at}; "
            + (f"some seed exact from rank {anyr}" if anyr is not None else "no run exact")
            + (f", most seeds from {most}" if most is not None else "")
            + (
                f"; exact below the certificate: {len(t['exact_below_certificate'])} runs"
                if t["exact_below_certificate"]
                else ""
            )
        )
    return ("Trained table kernels on the whole family: " + "; ".join(parts) + ".") if parts else ""


def caption(summary: dict) -> str:
    curve = summary["bound_curve"]
    pts = curve["points"]
    if not pts:
        return trained_text(summary)
    text = (
        f"Certified lower bound on the rank of one nonnegative kernel head against m "
        f"({curve['code']} families, m = {pts[0]['m']}…{pts[-1]['m']}), beside the positive "
        "construction (rank 2^m) and dense softmax (m-dimensional scores)."
    )
    if certified_in_full(curve):
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
    trained = trained_text(summary)
    return f"{text} {trained}" if trained else text


def headline(summary: dict) -> list[Finding]:
    """The growth of the certified rank with m (least squares over families certified in full)."""
    curve = summary["bound_curve"]
    pts, growth = curve["points"], curve.get("growth")
    if not (pts and growth and certified_in_full(curve)):
        return []
    return [
        Finding(
            f"The certified rank grows as 2^({growth['log2_per_m']:.3f}·m) on {curve['code']} families "
            f"(m = {pts[0]['m']}…{pts[-1]['m']}; at m = {pts[-1]['m']}: r ≥ {pts[-1]['certified']:,})."
        )
    ]


def conclusions(summary: dict) -> dict[str, str]:
    """Per m: the certified rank (a series certified in full, the ladder's: the queries
    certified in full, whether the search hit its limit, whether softmax's construction was
    exact on its sample; a code's: direct and chained); the m without a family; per trained
    family its sandwich."""
    curve = summary["bound_curve"]
    out = {}
    if curve.get("points"):
        out["code"] = fmt(curve.get("code"))
    for p in curve.get("points") or []:
        at = f"m = {p['m']}"
        if certified_in_full(curve):
            out[f"{at}: certified rank"] = fmt(p.get("certified"))
            out[f"{at}: queries certified in full"] = fmt(p.get("queries"))
            out[f"{at}: search limit reached"] = yes_no(p.get("limit_reached"))
            if p.get("softmax"):
                out[f"{at}: dense softmax exact on every sampled sequence"] = yes_no(p["softmax"].get("exact"))
        else:
            out[f"{at}: certified rank (direct / chained)"] = (
                f"{fmt(p.get('certified_direct'))} / {fmt(p.get('certified_chained'))}"
            )
    if curve.get("skipped_m"):
        out["m without a family"] = ", ".join(map(str, curve["skipped_m"]))
    for t in curve.get("trained") or []:
        n = t.get("n") if t.get("n") is not None else (t.get("params") or {}).get("n")
        name = f"ladder m = {t.get('m')}" + (f", n = {n}" if n is not None else "")
        out.update(trained_conclusions(t, name))
    return out


EXPERIMENT = Experiment(
    name="bound_curve",
    order=50,
    title="The bound curve",
    section=section,
    schema=dict[str, Any] | None,
    sentence=caption,
    conclusions=conclusions,
    headline=headline,
    region="figures",
    settings={"code": "ladder", "m": "32..96..16", "queries": 2048},
    html=lambda summary, page: {"figures": [page.figures("bound_curve", "bound_curve_training")]},
    figures=(
        Figure("bound_curve", lambda summary, out_dir: draw_bound_curve(summary["bound_curve"], out_dir), caption),
        Figure("bound_curve_training", draw_training, training_caption),
    ),
    step=".step:curve",
    writes="curve.json",
)
