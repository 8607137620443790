"""Probes: every ``[[probes]]`` module of ``profile.toml`` through ``kernelgap probe``.

Each module trains on the probe's suites beside the built-in ``elu1`` at the same ranks
and seeds (``probe/<name>/``; the baseline runs of equal suites are shared,
``probe/baseline/``).  The same section, figure and HTML make the report of a probe
folder (``kernelgap probe … --out DIR``).

Each module gets a verdict per suite and rank (:func:`rank_verdicts`): ``exact``,
``collapsed`` (no better than a query-blind model at its own training loss: the
optimiser, not the theorem; docs/theory.md, "The query-blind floor"), ``at the wall``
(fewer features than the family's certified rank: the theorem) or ``not fitted``, read
after the recipe search (:data:`kernelgap.probe.suites.RECIPES`).
"""

from __future__ import annotations

import copy
import html
import json
from fractions import Fraction
from pathlib import Path

from ...errors import ConfigError
from ...io import read_json, read_run_records
from ...report.criteria import (
    OOD_SOLVED_ACC,
    at_edge,
    exact,
    first_rank,
    majority,
    run_row,
    solves_test_pool,
    sorted_by,
)
from ...report.figures import (
    MODULE_COLOR,
    band,
    error_axes,
    legend,
    log2_axis,
    map_color,
    plt,
    points,
    save,
)
from ...report.html import Page, page, paragraph, table
from ...report.text import of, reached
from ...task.minip import EXACT_THRESHOLD
from ..base import Experiment, Figure

#: One entry of ``[[probes]]``: a module the probe experiment runs, with its defaults.
PROBE: dict = {
    "name": "",
    "target": "",
    "kwargs": {},
    "interface": None,
    "args": {},
    "output": None,
    "profile": "quick",
    "ranks": {},
    "seeds": [],
    "steps": None,
    "lr": None,
    "requires": None,
    "recipes": True,
}
DEFAULT_PROBES = [{**PROBE, "name": "decayed", "target": "kernelgap.probe.examples:DecayedLinearAttention"}]


def parse_probes(entries, path: Path) -> list[dict]:
    """``[[probes]]``: each a module to probe (``name`` and ``target`` required)."""
    if entries is None:
        return copy.deepcopy(DEFAULT_PROBES)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: 'probes' must be an array of tables ([[probes]])")
    out = []
    for k, entry in enumerate(entries):
        unknown = set(entry) - set(PROBE)
        if unknown:
            raise ConfigError(f"{path}: unknown key probes[{k}].{sorted(unknown)[0]}")
        if not entry.get("name") or not entry.get("target"):
            raise ConfigError(f"{path}: probes[{k}] needs a name and a target")
        searched = entry.get("recipes", True)
        if not isinstance(searched, bool) and not (
            isinstance(searched, list) and all(isinstance(x, str) for x in searched)
        ):
            raise ConfigError(f"{path}: probes[{k}].recipes must be true, false or a list of suite names")
        out.append({**copy.deepcopy(PROBE), **entry})
    if len({e["name"] for e in out}) != len(out):
        raise ConfigError(f"{path}: two probes share a name")
    return out


#: ``probe.json``'s fields a report reads, with their JSON types (``None``: may be null);
#: the first three are required.
PROBE_FIELDS: dict[str, tuple] = {
    "target": (str,),
    "runs": (str,),
    "suites": (list,),
    "class": (str, None),
    "kwargs": (dict, None),
    "interface": (str, None),
    "args": (dict, None),
    "output": (int, None),
    "d_model": (int, None),
    "profile": (str, None),
    "source_hash": (str, None),
    "reading": (str, None),
    "parameters": (dict, None),
    "baseline": (str, None),
    "baseline_dir": (str, None),
    "twin": (str, None),
    "recipes": (str, None),
}
#: The fields of one of its ``suites``; the first three are required.
SUITE_FIELDS: dict[str, tuple] = {
    "name": (str,),
    "family": (str,),
    "params": (dict,),
    "folder": (str, None),
    "baseline_folder": (str, None),
    "test_params": (dict, None),
    "certified_rank": (int, None),
    "features": (list, None),
    "query_blind": (dict, None),
    "twin_ranks": (list, None),
    "twin_features": (list, None),
    "twin_folder": (str, None),
    "recipes": (list, None),
    "recipe_folder": (str, None),
}


def _field_problem(table: dict, fields: dict[str, tuple], required: int, where: str) -> str | None:
    for k, (key, types) in enumerate(fields.items()):
        if key not in table:
            if k < required:
                return f"{where}has no {key!r}"
            continue
        value = table[key]
        ok = (value is None and None in types) or (
            not isinstance(value, bool) and isinstance(value, tuple(t for t in types if t is not None))
        )
        if not ok:
            kinds = " or ".join(
                "null" if t is None else {str: "a string", list: "a list", dict: "an object", int: "an integer"}[t]
                for t in types
            )
            return f"{where}{key!r} must be {kinds}, got {value!r}"
    return None


def read_probe_meta(folder: Path) -> dict | None:
    """``probe.json`` of a probe folder (``None`` when there is none), its shape checked
    against :data:`PROBE_FIELDS` and :data:`SUITE_FIELDS`: anything else is one
    :class:`~kernelgap.errors.ConfigError` naming the file."""
    path = folder / "probe.json"
    if not path.exists():
        return None
    meta = read_json(path)
    if meta is None:
        raise ConfigError(f"{path} is corrupted (not valid JSON); move it aside or rerun `kernelgap probe`")
    if not isinstance(meta, dict):
        why = f"expected a JSON object, got {type(meta).__name__}"
    elif isinstance(meta.get("runs"), list):
        why = "its runs are inside it (a probe of an older kernelgap); rerun `kernelgap probe`"
    else:
        why = _field_problem(meta, PROBE_FIELDS, 3, "")
        for k, suite in enumerate(meta.get("suites") if why is None else []):
            why = (
                f"suites[{k}] must be an object"
                if not isinstance(suite, dict)
                else _field_problem(suite, SUITE_FIELDS, 3, f"suites[{k}] ")
            )
            if why:
                break
    if why:
        raise ConfigError(f"{path} is not a kernelgap probe record: {why}")
    return meta


#: A run *collapsed* when it is not exact and its final training loss is at least
#: ``1 − COLLAPSE_TOLERANCE`` times the smallest loss any query-blind model reaches on the
#: family (docs/theory.md, "The query-blind floor"): it did no better than uniform attention
#: at its own objective.  A record without a curve (an older kernelgap) is read by its max
#: error, within this relative tolerance of the query-blind loss optimum's.  Judged only on
#: families whose query-blind floor is at least 1/2 (no query-blind model is exact there).
COLLAPSE_TOLERANCE = 0.02
#: The training fields that tell the recipes' runs apart (``kernelgap.probe.suites.Recipe``).
RECIPE_KEYS = ("lr", "mse_steps", "max_steps")
#: The verdicts of a module at one rank; the first that holds is given, in this order.
VERDICTS = ("exact", "collapsed", "at the wall", "not fitted")


def probe_rows(folder: Path) -> list[dict]:
    """The run rows of a sweep folder (:func:`~kernelgap.report.criteria.run_row`) with each
    run's final training loss and its power (``final_loss``, ``final_power``: the record's
    curve, None for a record without one) and its ``rank_argument``."""
    return [_row(rec) for rec in read_run_records(folder)]


def _row(rec: dict) -> dict:
    row = run_row(rec)
    final = (rec.get("curve") or {}).get("final") or {}
    row.update(final_loss=final.get("loss"), final_power=final.get("power"), rank_argument=row["rank"])
    return row


def recipe_rows(folder: Path, recipes: list | None) -> list[tuple[dict, list[dict]]]:
    """The recipe search's runs (one sweep, a variant per recipe): each recipe of ``recipes``
    (``probe.json``) with the rows of the runs trained with its fields (``RECIPE_KEYS``)."""
    records = read_run_records(folder)
    out = []
    for recipe in recipes or []:
        if isinstance(recipe, dict) and isinstance(recipe.get("train"), dict):
            mine = [
                rec
                for rec in records
                if all(rec["config"]["train"].get(k) == recipe["train"].get(k) for k in RECIPE_KEYS)
            ]
            out.append((recipe, [_row(rec) for rec in mine]))
    return out


def judges_collapse(query_blind: dict | None) -> bool:
    """Whether a family tells a collapse from a fit: no query-blind model is exact on it."""
    return bool(query_blind) and Fraction(query_blind["floor"]) >= EXACT_THRESHOLD


def collapsed(row: dict, query_blind: dict | None) -> bool:
    """A run that did no better than the best query-blind model (:data:`COLLAPSE_TOLERANCE`)."""
    if not judges_collapse(query_blind) or exact(row):
        return False
    loss, power = row.get("final_loss"), row.get("final_power")
    if loss is not None and power == query_blind["power"]:
        return loss >= (1 - COLLAPSE_TOLERANCE) * query_blind["loss"]
    if row.get("max_error") is None or row.get("final_power") is not None:
        return False  # diverged, or trained to another loss than the optimum's
    return abs(row["max_error"] - query_blind["max_error"]) <= COLLAPSE_TOLERANCE * query_blind["max_error"]


def forbidden(count: int | None, certified: int | None) -> bool:
    """Whether the certificate forbids an exact model with ``count`` features."""
    return certified is not None and count is not None and count < certified


def rank_verdicts(
    rows: list[dict],
    counts: dict[int, int | None],
    certified: int | None,
    query_blind: dict | None,
    recipes: list[tuple[dict, list[dict]]] | None = None,
) -> list[dict]:
    """One verdict per rank argument of ``rows`` (:data:`VERDICTS`, seeds read by majority).

    ``counts`` maps a rank argument to its true feature count (None: unknown, the rank
    argument is compared instead).  ``exact``: most seeds fit the training family (max
    error < 1/2), or a recipe of the search did (``recipe`` names it); ``collapsed``: most
    seeds are no better than a query-blind model (:func:`collapsed`); ``at the wall``: the
    certificate forbids an exact model with that many features; else ``not fitted``.
    ``tried`` lists the recipe runs at that rank."""
    out = []
    for rank in sorted({r["rank"] for r in rows}):
        at = [r for r in rows if r["rank"] == rank]
        count = counts.get(rank)
        compared = count if count is not None else rank
        tried = [
            {"recipe": meta["name"], "schedule": meta.get("schedule"), "max_error": r["max_error"], "exact": exact(r)}
            for meta, recipe_rows in recipes or []
            for r in recipe_rows
            if r["rank"] == rank
        ]
        fitted, down = sum(exact(r) for r in at), sum(collapsed(r, query_blind) for r in at)
        recipe = next((t["recipe"] for t in tried if t["exact"]), None)
        if majority(fitted, len(at)) or recipe is not None:
            verdict = "exact"
        elif majority(down, len(at)):
            verdict = "collapsed"
        elif forbidden(compared, certified):
            verdict = "at the wall"
        else:
            verdict = "not fitted"
        errors = [r["max_error"] for r in at if r["max_error"] is not None]
        out.append(
            {
                "rank_argument": rank,
                "features": count,
                "compared": "features" if count is not None else "rank argument",
                "verdict": verdict,
                "seeds": len(at),
                "fitted": fitted,
                "collapsed": down,
                "max_error": min(errors, default=None),
                "recipe": None if majority(fitted, len(at)) else recipe,
                "tried": tried,
            }
        )
    return out


def needs_recipe(verdict: dict, certified: int | None) -> bool:
    """A rank the recipe search tries: not exact, where the certificate does not forbid a fit."""
    count = verdict["features"] if verdict["features"] is not None else verdict["rank_argument"]
    return verdict["verdict"] != "exact" and not forbidden(count, certified)


def _counts(ranks: list[int], features: list | None) -> dict[int, int | None]:
    return dict(zip(ranks, features if features is not None else [None] * len(ranks)))


def probe_section(folder: Path) -> dict | None:
    """A probe folder (``kernelgap probe``, or ``probe/<name>/`` of a reproduction); ``None``
    without a ``probe.json``, an error for one that is not a probe's (:func:`read_probe_meta`)."""
    meta = read_probe_meta(folder)
    if meta is None:
        return None
    suites = []
    baseline = folder / (meta.get("baseline_dir") or "baseline")
    for suite in meta["suites"]:
        sub = suite.get("folder") or suite["name"]
        ranks = suite.get("ranks") or []
        features = suite.get("features")
        counts = _counts(ranks, features)
        runs = sorted_by(probe_rows(folder / meta["runs"] / sub), "rank", "seed")
        for r in runs:
            r["features"] = counts.get(r["rank"])  # the true count or None, never the rank argument
        base = sorted_by(probe_rows(baseline / (suite.get("baseline_folder") or sub)), "rank", "seed")
        is_ood = suite.get("test_params") is not None
        ok = solves_test_pool if is_ood else exact
        qb, certified = suite.get("query_blind"), suite.get("certified_rank")
        recipes = (
            recipe_rows(folder / suite["recipe_folder"], suite.get("recipes")) if suite.get("recipe_folder") else []
        )
        twin = twin_runs = None
        if suite.get("twin_folder") and meta.get("twin"):
            twin_runs = sorted_by(probe_rows(baseline / suite["twin_folder"]), "rank", "seed")
            twin_counts = _counts(suite.get("twin_ranks") or [], suite.get("twin_features"))
            for r in twin_runs:
                r.update(features=twin_counts.get(r["rank"]), feature_map=f"{meta['twin']} (same wrapper)")
            twin = {
                "map": meta["twin"],
                "runs": twin_runs,
                "verdicts": rank_verdicts(twin_runs, twin_counts, certified, qb),
                "transition_features": first_rank(twin_runs, ok, "features"),
            }
        verdicts = rank_verdicts(runs, counts, certified, qb, recipes)
        base_verdicts = rank_verdicts(base, {r["rank"]: r["features"] for r in base}, certified, qb)
        for v in verdicts:  # the built-in baseline at the same rank, the twin at the same feature count
            count = v["features"] if v["features"] is not None else v["rank_argument"]
            v["baseline"] = next(
                (b["verdict"] for b in base_verdicts if b["rank_argument"] == v["rank_argument"]), None
            )
            v["twin"] = next((t["verdict"] for t in (twin or {}).get("verdicts", []) if t["features"] == count), None)
        suites.append(
            {
                "name": suite["name"],
                "family": suite["family"],
                "params": suite["params"],
                "ood": is_ood,
                "certified_rank": certified,
                "criterion": f"test exact-sequence accuracy ≥ {OOD_SOLVED_ACC}" if is_ood else "train max error < 1/2",
                "transition_rank": first_rank(runs, ok),
                "max_rank": max((r["rank"] for r in runs), default=None),
                "baseline_transition": first_rank(base, ok),
                "baseline_max_rank": max((r["rank"] for r in base), default=None),
                "fitted_runs": sum(1 for r in runs if r["exact"]),
                "diverged": [
                    {"rank": r["rank"], "seed": r["seed"], "step": r["steps"]}
                    for r in runs
                    if r["status"] == "diverged"
                ],
                "steps": sum(r["steps"] for r in runs),
                "wall_time_s": round(sum(r["wall_time_s"] for r in runs), 1),
                "axis": "features" if runs and all(r["features"] is not None for r in runs) else "rank argument",
                "query_blind": qb,
                "verdicts": verdicts,
                "recipes": [r for r, _ in recipes],
                "twin": twin,
                "runs": runs,
                "baseline": base,
            }
        )
    return {
        "name": folder.name,
        **{
            k: meta.get(k)
            for k in (
                "target",
                "class",
                "kwargs",
                "interface",
                "args",
                "output",
                "d_model",
                "profile",
                "source_hash",
                "reading",
                "parameters",
                "baseline",
                "twin",
            )
        },
        "suites": suites,
    }


def probes_section(folder: Path) -> list[dict] | None:
    """Every probe of a reproduction's ``probe/`` folder (one folder each), skipped ones too."""
    if not folder.is_dir():
        return None
    out = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        skipped = read_json(sub / "skipped.json")
        if isinstance(skipped, dict):
            out.append({"name": sub.name, "target": skipped.get("target"), "skipped": skipped.get("why")})
        elif (section := probe_section(sub)) is not None:
            out.append(section)
    return out or None


def section(results) -> list[dict] | None:
    return probes_section(results.folder("probe"))


SCHEMA = {"type": ["array", "null"], "items": {"type": "object", "required": ["name", "target"]}}


def _schedules(s: dict) -> dict[str, str]:
    return {r["name"]: r.get("schedule") or r["name"] for r in s.get("recipes") or []}


def edge_note(v: dict) -> str:
    """`` (at the edge: one seed)`` or `` (at the edge: 1 of 3 seeds exact)`` when a verdict
    read by majority rests on one seed or on seeds that disagree (:func:`at_edge`): another
    CPU's rounding may read it otherwise.  Nothing for a firm verdict or one a recipe decided."""
    seeds = v.get("seeds")
    if v.get("recipe") or seeds is None:
        return ""
    if seeds < 2:
        return " (at the edge: one seed)"
    for key, what in (("fitted", "exact"), ("collapsed", "collapsed")):
        if at_edge(v.get(key, 0), seeds):
            return f" (at the edge: {of(v[key], seeds)} seeds {what})"
    return ""


def verdict_text(v: dict, schedules: dict[str, str]) -> str:
    """``32 (64 features) collapsed (max error 1.975; tried lr × 0.333, …)`` for one rank."""
    label = str(v["rank_argument"])
    if v["features"] is not None and v["features"] != v["rank_argument"]:
        label += f" ({v['features']} feature{'s' * (v['features'] != 1)})"
    text = f"{label} {v['verdict']}"
    text += edge_note(v)
    if v.get("recipe"):
        text += f" with {schedules.get(v['recipe'], v['recipe'])}"
    elif v["verdict"] != "exact":
        if v["max_error"] is not None:
            text += f" (max error {v['max_error']:.4g})"
        tried = [schedules.get(t["recipe"], t["recipe"]) for t in v.get("tried") or []]
        if tried:
            text += f" (tried {', '.join(tried)})"
    return text


def verdicts_text(s: dict) -> str:
    """The verdicts of one suite, the twin's and the query-blind floor, as clauses."""
    schedules = _schedules(s)
    parts = []
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


def probe_sentence(pr: dict) -> str:
    if pr.get("skipped"):
        return f"{pr['name']} ({pr['target']}) was not probed: {pr['skipped']}."
    parts = []
    for s in pr["suites"]:
        unit = f"test accuracy ≥ {OOD_SOLVED_ACC}" if s["ood"] else "exact"
        ours = (
            f"from rank {s['transition_rank']}"
            if s["transition_rank"] is not None
            else f"at no rank up to {s['max_rank']} ({s['fitted_runs']} of {len(s['runs'])} runs fit "
            "the training family)"
        )
        base = reached(s["baseline_transition"], s["baseline_max_rank"])
        cert = f"; certified r ≥ {s['certified_rank']}" if s.get("certified_rank") else ""
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
    return f"Probe of {label} ({pr.get('interface')} interface, {reading}): {'; '.join(parts)}."


def sentence(summary: dict) -> str | None:
    probes = summary.get("probes") or []
    return " ".join(probe_sentence(pr) for pr in probes) or None


def conclusions(summary: dict) -> dict[str, str]:
    """Per probed module (or that it was skipped) and suite: from which rank it is exact (its
    criterion), the built-in baseline's, its runs fitting the training family, diverged runs,
    and per rank its verdict (:func:`rank_verdicts`), the baseline's and the twin's."""
    out = {}
    for pr in summary.get("probes") or []:
        name = pr["name"]
        if pr.get("skipped"):
            out[name] = "skipped"
            continue
        for s in pr.get("suites") or []:
            at = f"{name}, {s['name']}"
            schedules = _schedules(s)
            out[f"{at}: {s['criterion']} from rank"] = reached(s["transition_rank"], s["max_rank"])
            out[f"{at}: built-in {pr.get('baseline')} from rank"] = reached(
                s["baseline_transition"], s["baseline_max_rank"]
            )
            out[f"{at}: runs fitting the training family"] = of(s["fitted_runs"], len(s["runs"]))
            out[f"{at}: diverged runs"] = str(len(s.get("diverged") or []))
            for v in s.get("verdicts") or []:
                rank = f"{at}, rank {v['rank_argument']}"
                recipe = v.get("recipe")
                out[f"{rank}: verdict"] = v["verdict"] + (f" with {schedules.get(recipe, recipe)}" if recipe else "")
                if v.get("baseline") is not None:
                    out[f"{rank}: built-in {pr.get('baseline')}"] = v["baseline"]
                if v.get("twin") is not None:
                    out[f"{rank}: same kernel, same wrapper"] = v["twin"]
    return out


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


def fmt_error(value) -> str:
    return "–" if value is None else f"{value:.4g}"


def probes_html(summary: dict, pg: Page, level: int = 3) -> list[str]:
    """Every probed module: a table beside the built-in baseline, then each on its own — what it
    is, how it was read, its ranks, its runs' steps and time."""
    probes = summary.get("probes") or []
    if not probes:
        return []
    h = f"h{level}"
    zoo = []
    for pr in probes:
        for s in pr.get("suites", []):
            zoo.append(
                {
                    "module": pr["name"],
                    "suite": s["name"],
                    "criterion": s["criterion"],
                    "certified rank": s.get("certified_rank"),
                    "from rank": reached(s["transition_rank"], s["max_rank"]),
                    f"{pr.get('baseline')} (built-in) from": reached(s["baseline_transition"], s["baseline_max_rank"]),
                    "runs fitting train": f"{s['fitted_runs']}/{len(s['runs'])}",
                    "verdicts": ", ".join(verdict_text(v, _schedules(s)) for v in s.get("verdicts") or []),
                    "steps": s["steps"],
                    "time s": s["wall_time_s"],
                }
            )
    parts = [table(zoo)] if zoo else []
    for pr in probes:
        parts += [
            f"<{h}>{html.escape(pr['name'])}: <code>{html.escape(str(pr.get('target')))}</code></{h}>",
            paragraph(probe_sentence(pr)),
        ]
        if pr.get("skipped"):
            continue
        counts = pr.get("parameters") or {}
        facts = [
            {
                "kwargs": json.dumps(pr.get("kwargs") or {}),
                "argument map": json.dumps(pr.get("args") or {}) if pr.get("args") else "–",
                "interface": pr.get("interface"),
                "reading": pr.get("reading"),
                "source sha256": (pr.get("source_hash") or "")[:16],
                "parameters (module / kernelgap wrapper)": f"{counts.get('module', '?')} / {counts.get('wrapper', '?')}",
            }
        ]
        verdict_rows = [
            {
                "suite": s["name"],
                "rank argument": v["rank_argument"],
                "features": v["features"] if v["features"] is not None else "?",
                "verdict": v["verdict"],
                "seeds fitting": f"{v['fitted']}/{v['seeds']}",
                "seeds collapsed": v["collapsed"],
                "best max err": v["max_error"],
                "recipes tried": ", ".join(
                    f"{_schedules(s).get(t['recipe'], t['recipe'])}: {'exact' if t['exact'] else fmt_error(t['max_error'])}"
                    for t in v["tried"]
                )
                or "–",
                f"{pr.get('baseline')} (built-in, same rank)": v.get("baseline") or "–",
                "same kernel, same wrapper": v.get("twin") or "–",
                "query-blind floor / uniform / ignored": (
                    f"{s['query_blind']['floor']} / {s['query_blind']['max_error']:.4g} / "
                    + fmt_error((s["query_blind"].get("query_only") or {}).get("max_error"))
                    if judges_collapse(s.get("query_blind"))
                    else "–"
                ),
            }
            for s in pr["suites"]
            for v in s.get("verdicts") or []
        ]
        runs = [
            {
                "suite": s["name"],
                "model": r["feature_map"],
                "rank argument": r["rank"],
                "features": r.get("features"),
                "seed": r["seed"],
                "status": r["status"],
                "steps": r["steps"],
                "wall s": r["wall_time_s"],
                "train max err": r["max_error"],
                "final loss": r.get("final_loss"),
                "test acc": r.get("test_exact_seq_acc"),
            }
            for s in pr["suites"]
            for r in s["runs"] + s["baseline"] + ((s.get("twin") or {}).get("runs") or [])
        ]
        parts += [
            table(facts),
            table(verdict_rows) if verdict_rows else "",
            pg.file("probe", f"probe-{pr['name']}.png"),
            "<details><summary>every run (steps and time)</summary>" + table(runs) + "</details>",
        ]
    return [f"<h{level - 1}>Probes</h{level - 1}>", *parts]


PROBE_FIGURE = Figure("probe", draw)


def render_probe_report(summary: dict, out_dir: Path) -> str:
    """``report.html`` of a probe folder (``{"probes": [one]}``)."""
    fig_dir = out_dir / "figures"
    drawn = {}
    if summary.get("probes"):
        files = PROBE_FIGURE.draw(summary, fig_dir)
        if files:
            drawn["probe"] = files
    return page(
        "kernelgap probe",
        [
            f"<h1>kernelgap probe ({html.escape(str(summary.get('profile')))} suites)</h1>",
            *probes_html(summary, Page(summary, drawn, fig_dir)),
        ],
    )


EXPERIMENT = Experiment(
    name="probe",
    title="Probes",
    key="probes",
    section=section,
    schema=SCHEMA,
    sentence=sentence,
    conclusions=conclusions,
    html=lambda summary, pg: {"probes": probes_html(summary, pg)},
    region="probes",
    figures=(PROBE_FIGURE,),
    profile_keys={"probes": parse_probes},
    step=".step:probe_modules",
)
