"""The probe's verdict rules: what a probed module's runs at one rank amount to.

Each module gets a verdict per suite and rank (:func:`rank_verdicts`): ``exact``,
:data:`ADDITIVE` or :data:`GATED` (its structure check found a kind no model of which fits the
family at any rank: docs/theory.md, "The additivity certificate", "The gated certificate"), ``collapsed`` (no better than a query-blind model at its own
training loss: the optimiser, not the theorem; docs/theory.md, "The query-blind floor"),
``at the wall`` (fewer features than the family's certified rank: the theorem, for a
normalised kernel) or ``not fitted``, read after the recipe search
(:data:`kernelgap.probe.suites.RECIPES`), which tries the ranks :func:`needs_recipe` names.
The probe's runner applies these rules while it trains and the probe experiment's summary
section (:mod:`kernelgap.experiments.probe.section`) when it reports; both read run records
only, so this module imports no torch.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from ..io import read_run_records
from ..report.criteria import exact, majority, run_row
from ..task.minip import EXACT_THRESHOLD

#: A run *collapsed* when it is not exact and its final training loss is at least
#: ``1 − COLLAPSE_TOLERANCE`` times the smallest loss any query-blind model reaches on the
#: family (docs/theory.md, "The query-blind floor"): it did no better than uniform attention
#: at its own objective.  A record without a curve (an older kernelgap) is read by its max
#: error, within this relative tolerance of the query-blind loss optimum's.  Judged only on
#: families whose query-blind floor is at least 1/2 (no query-blind model is exact there).
COLLAPSE_TOLERANCE = 0.02
#: The training fields that tell the recipes' runs apart (``kernelgap.probe.suites.Recipe``).
RECIPE_KEYS = ("lr", "mse_steps", "max_steps")
#: The verdict of a module additive in its candidates, not exact, on a family whose additive
#: floor is at least 1/2 (docs/theory.md, "The additivity certificate"): at every rank.
ADDITIVE = "cannot fit at any rank (additive in its candidates)"
#: The same for a module whose candidates meet only through a scalar gate of the later one's
#: token, on a family whose gated floor is at least 1/2 (docs/theory.md, "The gated certificate").
GATED = "cannot fit at any rank (its candidates meet only through a gate of one token)"
#: The kinds certified at every rank: the structure's field holding the family's floor for the
#: kind (named by the function of :mod:`.floor` that computes it) and the verdict where that
#: floor is at least 1/2.
CERTIFIED_KINDS = {"additive": ("additive_floor", ADDITIVE), "scalar-gated": ("gated_floor", GATED)}
CERTIFIED_VERDICTS = tuple(verdict for _, verdict in CERTIFIED_KINDS.values())
#: The verdicts of a module at one rank; the first that holds is given, in this order.
VERDICTS = ("exact", *CERTIFIED_VERDICTS, "collapsed", "at the wall", "not fitted")
#: Kinds of module (:mod:`kernelgap.probe.structure`) the lower bound does not cover: judged
#: rank-free, ``exact`` or ``not fitted`` only (no certificate, no collapse, no wall).
RANK_FREE = ("scalar-gated", "normalised", "output-normalised", "gated/other")


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


def certified_verdict(structure: dict | None) -> str | None:
    """The verdict at every rank of a module whose ``structure`` (``{"kind", "additive_floor"}``
    or ``{"kind", "gated_floor"}``) is a kind of :data:`CERTIFIED_KINDS` on a family whose
    floor for it is at least 1/2: no model of the kind is exact there; else None."""
    verdict = CERTIFIED_KINDS.get((structure or {}).get("kind"), (None, None))[1]
    floor = kind_floor(structure)[1]
    return verdict if verdict and floor is not None and Fraction(floor) >= EXACT_THRESHOLD else None


def kind_floor(structure: dict | None) -> tuple[str, str | None]:
    """``(field, value)``: the floor a structure row holds for its kind (:data:`CERTIFIED_KINDS`;
    ``additive_floor`` for every other kind), the value None where none was computed."""
    key = CERTIFIED_KINDS.get((structure or {}).get("kind"), ("additive_floor", None))[0]
    return key, (structure or {}).get(key)


def forbidden(count: int | None, certified: int | None) -> bool:
    """Whether the certificate forbids an exact model with ``count`` features."""
    return certified is not None and count is not None and count < certified


def rank_verdicts(
    rows: list[dict],
    counts: dict[int, int | None],
    certified: int | None,
    query_blind: dict | None,
    recipes: list[tuple[dict, list[dict]]] | None = None,
    structure: dict | None = None,
) -> list[dict]:
    """One verdict per rank argument of ``rows`` (:data:`VERDICTS`, seeds read by majority).

    ``counts`` maps a rank argument to its true feature count (None: unknown, the rank
    argument is compared instead).  ``exact``: most seeds fit the training family (max
    error < 1/2), or a recipe of the search did (``recipe`` names it); :data:`ADDITIVE` or
    :data:`GATED`: the module's ``structure`` has a :func:`certified_verdict`;
    ``collapsed``: most seeds are no better than a query-blind model (:func:`collapsed`);
    ``at the wall``: the certificate forbids an exact model with that many features; else
    ``not fitted``.  A kind of :data:`RANK_FREE` is ``exact`` or ``not fitted`` only.
    ``tried`` lists the recipe runs at that rank."""
    kind = (structure or {}).get("kind")
    if kind in RANK_FREE:
        certified, query_blind = None, None
    certificate = certified_verdict(structure)
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
        holds = (majority(fitted, len(at)) or recipe is not None, *(certificate == c for c in CERTIFIED_VERDICTS))
        holds += (majority(down, len(at)), forbidden(compared, certified), True)
        verdict = next(v for v, h in zip(VERDICTS, holds) if h)
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


def needs_recipe(verdict: dict, certified: int | None, structure: dict | None = None) -> bool:
    """A rank the recipe search tries: not exact, where no certificate forbids a fit (the
    rank certificate for a normalised kernel, a kind's floor for a kind of :data:`CERTIFIED_KINDS`)."""
    count = verdict["features"] if verdict["features"] is not None else verdict["rank_argument"]
    if verdict["verdict"] in CERTIFIED_VERDICTS:
        return False
    if (structure or {}).get("kind") in RANK_FREE:
        certified = None
    return verdict["verdict"] != "exact" and not forbidden(count, certified)
