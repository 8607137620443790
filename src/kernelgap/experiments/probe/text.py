"""The probes in words: each module's sentence, its verdicts as clauses, and the
conclusions ``kernelgap compare`` lists (:attr:`~kernelgap.experiments.base.Experiment.conclusions`)."""

from __future__ import annotations

from ...probe.verdicts import CERTIFIED_VERDICTS, RANK_FREE, certified_verdict, judges_collapse, kind_floor
from ...report.criteria import OOD_SOLVED_ACC, at_edge, majority
from ...report.html import of, reached


def rank_certified(s: dict) -> int | None:
    """The suite's certified rank where the lower bound speaks of the module (a normalised
    kernel, or a probe of an older kernelgap that did not check), else None."""
    kind = (s.get("structure") or {}).get("kind")
    return s.get("certified_rank") if kind is None or kind == "normalised kernel" else None


def structure_text(st: dict | None) -> str:
    """``structure: additive (interaction 3.4e-15, …; additive floor 3/2: no rank is exact)``."""
    if not st:
        return ""
    numbers = ", ".join(
        f"{k.replace('_', ' ')} {st[k]:.2g}"
        for k in ("interaction", "gate", "duplication", "order", "context", "rms_spread")
        if st.get(k) is not None
    )
    text = f"structure: {st['kind']}{' (declared)' if st.get('declared') else ''} ({numbers}"
    key, floor = kind_floor(st)
    if certified_verdict(st):
        text += f"; {key.replace('_', ' ')} {floor}: no rank is exact, docs/theory.md"
    elif floor is not None:
        text += f"; {key.replace('_', ' ')} {floor}: no certificate"
    elif st["kind"] in RANK_FREE:
        text += "; rank-free: the lower bound does not cover it"
    return text + ")"


def schedules_of(s: dict) -> dict[str, str]:
    """The schedule of each recipe a suite tried, by the recipe's name."""
    return {r["name"]: r.get("schedule") or r["name"] for r in s.get("recipes") or []}


def edge_note(v: dict) -> str:
    """`` (at the edge: one seed)`` or `` (at the edge: 1 of 3 seeds exact)`` when a verdict
    read by majority rests on one seed or on seeds that disagree (:func:`at_edge`): another
    CPU's rounding may read it otherwise.  Nothing for a firm verdict or one a recipe decided."""
    seeds = v.get("seeds")
    if v.get("recipe") or seeds is None or v.get("verdict") in CERTIFIED_VERDICTS:  # a certificate, not a reading
        return ""
    if seeds < 2:
        return " (at the edge: one seed)"
    for key, what in (("fitted", "exact"), ("collapsed", "collapsed")):
        if at_edge(v.get(key, 0), seeds):
            return f" (at the edge: {of(v[key], seeds)} seeds {what})"
    return ""


def named_verdict(v: dict, schedules: dict[str, str]) -> str:
    """``exact`` or ``exact with lr × 3``: a verdict and the recipe's schedule that reached it."""
    recipe = v.get("recipe")
    return v["verdict"] + (f" with {schedules.get(recipe, recipe)}" if recipe else "")


def verdict_text(v: dict, schedules: dict[str, str]) -> str:
    """``32 (64 features) collapsed (max error 1.975; tried lr × 0.333, …)`` for one rank."""
    label = str(v["rank_argument"])
    if v["features"] is not None and v["features"] != v["rank_argument"]:
        label += f" ({v['features']} feature{'s' * (v['features'] != 1)})"
    text = f"{label} {named_verdict(v, schedules)}" + edge_note(v)  # no edge note where a recipe decided
    if not v.get("recipe") and v["verdict"] != "exact":
        if v["max_error"] is not None:
            text += f" (max error {v['max_error']:.4g})"
        tried = [schedules.get(t["recipe"], t["recipe"]) for t in v.get("tried") or []]
        if tried:
            text += f" (tried {', '.join(tried)})"
    if "ablations" in v:
        text += f" ({cause_text(v)})"
    return text


def cause_text(v: dict) -> str:
    """Why a verdict of :data:`~kernelgap.experiments.probe.section.EXPLAINED` holds, from its
    ablations' and its twin's runs (docs/experiments.md, "Why a library layer fails"): ``cause:
    initialisation (the same module with init_scale = 0.5 is exact on 3 of 3 seeds)`` for
    each ablation exact on most seeds; else, where the twin (kernelgap's own map of the same
    kernel in the same wrapper) fails too at that feature count, ``cause: the kernel, not the
    library (…)``; else ``cause not found: tried …`` (each ablation with its seeds exact, and
    a twin that fits, which puts the cause in the module's own layers, or that no twin was
    trained: what would make the verdict firm)."""
    found = [a for a in v["ablations"] if majority(a["fitted"], a["seeds"])]
    if found:
        return "; ".join(
            f"cause: {a['cause']} (the same module with {a['change']} is exact on {of(a['fitted'], a['seeds'])} seeds)"
            for a in found
        )
    twin = v.get("twin")
    if twin is not None and twin != "exact":
        return f"cause: the kernel, not the library (kernelgap's own {v['twin_map']} in the same wrapper: {twin} too)"
    tried = [f"{a['change']} ({a['cause']}: {of(a['fitted'], a['seeds'])} seeds exact)" for a in v["ablations"]]
    text = "cause not found: " + (f"tried {', '.join(tried)}" if tried else "no ablation in the profile varies it")
    if twin == "exact":
        text += f"; kernelgap's own {v['twin_map']} is exact in the same wrapper, so it lies in the module's own layers"
    else:
        text += "; no twin of its kernel trained at its feature count (a twin or an ablation would place it)"
    return text


def verdicts_text(s: dict) -> str:
    """The verdicts of one suite, the twin's and the query-blind floor, as clauses."""
    schedules = schedules_of(s)
    parts = [structure_text(s.get("structure"))] if s.get("structure") else []
    if s.get("verdicts"):
        parts.append(
            "on its training family by rank argument: " + ", ".join(verdict_text(v, schedules) for v in s["verdicts"])
        )
    twin = s.get("twin")
    if twin and twin.get("verdicts"):
        parts.append(
            f"built-in {twin['map']} in the same wrapper: "
            + ", ".join(f"{t['features']} features {t['verdict']}{edge_note(t)}" for t in twin["verdicts"])
        )
    qb = s.get("query_blind")
    if judges_collapse(qb):
        ignored = (qb.get("query_only") or {}).get("max_error")
        parts.append(
            f"query-blind floor {qb['floor']} (max error at the loss optimum of uniform attention "
            f"{qb['max_error']:.4g}" + (f", of the attention's output ignored {ignored:.4g})" if ignored else ")")
        )
    return "; ".join(parts)


def recipe_rank(s: dict) -> dict | None:
    """Where the suite's schedule reached no rank, the first verdict a recipe made exact: the
    headline then says that rank with its schedule, as the verdicts do."""
    if s["transition_rank"] is not None:
        return None
    return next((v for v in s.get("verdicts") or [] if v.get("recipe") and v["verdict"] == "exact"), None)


def transition_text(s: dict) -> str:
    """From which rank the module meets its criterion, a recipe's rank included (:func:`recipe_rank`)."""
    v = recipe_rank(s)
    if v is None:
        return reached(s["transition_rank"], s["max_rank"])
    schedule = schedules_of(s).get(v["recipe"], v["recipe"])
    return f"{v['rank_argument']} with {schedule} (none at the suite's schedule up to {s['max_rank']})"


def probe_sentence(pr: dict) -> str:
    if pr.get("skipped"):
        return f"{pr['name']} ({pr['target']}) was not probed: {pr['skipped']}."
    parts = []
    for s in pr["suites"]:
        unit = f"test accuracy ≥ {OOD_SOLVED_ACC}" if s["ood"] else "exact"
        ours = (
            f"from rank {transition_text(s)}"
            if s["transition_rank"] is not None or recipe_rank(s)
            else f"at no rank up to {s['max_rank']} ({s['fitted_runs']} of {len(s['runs'])} runs fit "
            "the training family)"
        )
        base = reached(s["baseline_transition"], s["baseline_max_rank"])
        cert = f"; certified r ≥ {rank_certified(s)}" if rank_certified(s) else ""
        div = "".join(f"; diverged at step {d['step']} (rank {d['rank']}, seed {d['seed']})" for d in s["diverged"])
        extra = verdicts_text(s)
        parts.append(
            f"{s['name']}: {unit} {ours} (built-in {pr.get('baseline')}: {base}{cert}){div}"
            + (f"; {extra}" if extra else "")
        )
    reading = (
        "the causal final-query reading (position 1 sees only itself)"
        if pr.get("reading") == "final"
        else "the first-query reading"
    )
    label = pr.get("class") if pr.get("name") in (None, "", pr.get("class")) else f"{pr['name']} ({pr.get('class')})"
    if pr.get("ablation"):
        a = pr["ablation"]
        label += f", an ablation of {a['ablates']} ({a['cause']}: {a['change']})"
    return f"Probe of {label} ({pr.get('interface')} interface, {reading}): {'; '.join(parts)}."


def sentence(summary: dict) -> str | None:
    return " ".join(probe_sentence(pr) for pr in summary["probes"]) or None


def conclusions(summary: dict) -> dict[str, str]:
    """Per probed module (or that it was skipped) and suite: from which rank it is exact (its
    criterion), the built-in baseline's, its runs fitting the training family, diverged runs,
    and per rank its verdict (:func:`~kernelgap.probe.verdicts.rank_verdicts`), the
    baseline's and the twin's."""
    out = {}
    for pr in summary["probes"]:
        name = pr["name"]
        if pr.get("skipped"):
            out[name] = "skipped"
            continue
        for s in pr.get("suites") or []:
            at = f"{name}, {s['name']}"
            schedules = schedules_of(s)
            out[f"{at}: {s['criterion']} from rank"] = transition_text(s)
            out[f"{at}: built-in {pr.get('baseline')} from rank"] = reached(
                s["baseline_transition"], s["baseline_max_rank"]
            )
            out[f"{at}: runs fitting the training family"] = of(s["fitted_runs"], len(s["runs"]))
            out[f"{at}: diverged runs"] = str(len(s.get("diverged") or []))
            if s.get("structure"):
                out[f"{at}: structure"] = s["structure"]["kind"]
            for v in s.get("verdicts") or []:
                rank = f"{at}, rank {v['rank_argument']}"
                out[f"{rank}: verdict"] = named_verdict(v, schedules)
                if v.get("baseline") is not None:
                    out[f"{rank}: built-in {pr.get('baseline')}"] = v["baseline"]
                if v.get("twin") is not None:
                    out[f"{rank}: same kernel, same wrapper"] = v["twin"]
                if "ablations" in v:
                    out[f"{rank}: cause"] = cause_text(v)
    return out
