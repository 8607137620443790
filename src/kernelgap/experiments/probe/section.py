"""The probe experiment's part of ``summary.json``: each probe folder (``kernelgap probe``,
or ``probe/<name>/`` of a reproduction) read into its module's suites, runs and verdicts
(:func:`~kernelgap.probe.verdicts.rank_verdicts`), beside the built-in baseline and the twin.
Its ``probe.json`` is checked against :class:`ProbeRecord`, anything else one
:class:`~kernelgap.errors.ConfigError` naming the file and the key (docs/formats.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from ...errors import ConfigError
from ...io import confined, digest_problem, read_json
from ...probe.verdicts import probe_rows, rank_verdicts, recipe_rows
from ...report.criteria import OOD_SOLVED_ACC, exact, first_rank, solves_test_pool, sorted_by
from ...report.integrity import sealed_problem, unsealed
from ...validation import Int, Record, problem

#: What a probe of a profile leaves in its folder when its library is not installed (sealed).
SKIPPED = "skipped.json"
#: What an ablation of a profile leaves in its folder (sealed): the probe it varies, the
#: cause it names and what it changes (:class:`~kernelgap.probe.config.ProbeEntry`).
ABLATION = "ablation.json"
#: The verdicts an ablation may explain: a failure the theorem does not account for.
EXPLAINED = ("not fitted", "collapsed")


class ProbeSuite(Record):
    """One suite of a probe: its family and parameters, where its runs, the baseline's, the
    twin's and the recipes' are, its certified rank, true feature counts and the module's
    structure (:mod:`kernelgap.probe.structure`; absent from a probe of an older kernelgap)."""

    name: str
    family: str
    params: dict[str, Any]
    folder: str | None = None
    baseline_folder: str | None = None
    test_params: dict[str, Any] | None = None
    certified_rank: Int | None = None
    features: list[Any] | None = None
    query_blind: dict[str, Any] | None = None
    twin_ranks: list[Any] | None = None
    twin_features: list[Any] | None = None
    twin_folder: str | None = None
    recipes: list[Any] | None = None
    recipe_folder: str | None = None
    structure: dict[str, Any] | None = None


class ProbeRecord(Record):
    """``probe.json``: the module probed (``target``, its class, arguments and source hash),
    where its runs are and its suites (the fields a report reads)."""

    target: str
    runs: str
    suites: list[ProbeSuite]
    class_: str | None = Field(None, alias="class")
    kwargs: dict[str, Any] | None = None
    interface: str | None = None
    args: dict[str, Any] | None = None
    output: Int | None = None
    d_model: Int | None = None
    profile: str | None = None
    source_hash: str | None = None
    reading: str | None = None
    parameters: dict[str, Any] | None = None
    baseline: str | None = None
    baseline_dir: str | None = None
    twin: str | None = None
    recipes: str | None = None


def read_probe_meta(folder: Path) -> dict | None:
    """``probe.json`` of a probe folder (``None`` when there is none), checked against its
    own checksum (``record_sha256``, where it has one) and :class:`ProbeRecord`: anything
    else is one :class:`~kernelgap.errors.ConfigError` naming the file."""
    path = folder / "probe.json"
    if not path.exists():
        return None
    meta = read_json(path)
    if meta is None:
        raise ConfigError(f"{path} is corrupted (not valid JSON); move it aside or rerun `kernelgap probe`")
    if isinstance(meta, dict) and (altered := digest_problem(meta)):
        raise ConfigError(f"{path} {altered}; move it aside or rerun `kernelgap probe`")
    if isinstance(meta, dict) and isinstance(meta.get("runs"), list):
        why = "its runs are inside it (a probe of an older kernelgap); rerun `kernelgap probe`"
    else:
        why = problem(ProbeRecord, meta)
    if why:
        raise ConfigError(f"{path} is not a kernelgap probe record: {why}")
    for base, key, name in _folders(folder, meta):  # read from the file: none leads out of its folder
        confined(base, name, f"{path}: {key}", ConfigError)
    return meta


def _folders(folder: Path, meta: dict) -> list[tuple[Path, str, str]]:
    """The sub-folder names ``probe.json`` holds, each with the folder it is relative to
    and its key: the runs and recipes in the probe folder, the baseline's and the twin's in
    the baseline folder (``baseline_dir``, which may be a folder shared by several probes)."""
    runs = folder / meta["runs"]
    baseline = folder / (meta.get("baseline_dir") or "baseline")
    out = [(folder, "runs", meta["runs"])]
    for k, suite in enumerate(meta["suites"]):
        where = f"suites[{k}]."
        out += [(runs, where + "folder", suite.get("folder") or suite["name"])]
        out += [(folder, where + "recipe_folder", suite["recipe_folder"])] if suite.get("recipe_folder") else []
        out += [(baseline, where + key, suite[key]) for key in ("baseline_folder", "twin_folder") if suite.get(key)]
    return out


#: The fields of ``probe.json`` a probe's section repeats, in this order.
FACTS = tuple(
    "target class kwargs interface args output d_model profile source_hash reading parameters baseline twin".split()
)


class Ablation(Record):
    """``ablation.json``: the probe this one varies, the cause it names, what it changes."""

    ablates: str
    cause: str
    change: str


def read_ablation(folder: Path) -> dict | None:
    """``ablation.json`` of a probe folder (None where there is none), checked against its
    checksum and :class:`Ablation`: anything else is one ConfigError naming the file."""
    path = folder / ABLATION
    if not path.exists():
        return None
    data = read_json(path)
    why = sealed_problem(path) or problem(Ablation, unsealed(data))
    if why:
        raise ConfigError(f"{path} is not a kernelgap ablation record ({why}); move it aside or rerun the reproduction")
    return unsealed(data)


class ProbeRow(Record):
    """One probe of ``summary.json``'s ``probes``: its name and target (skipped ones too)."""

    name: Any
    target: Any


#: The probe experiment's part of ``summary.json``.
SECTION = list[ProbeRow] | None


def _counts(ranks: list[int], features: list | None) -> dict[int, int | None]:
    return dict(zip(ranks, features if features is not None else [None] * len(ranks)))


def probe_section(folder: Path) -> dict | None:
    """A probe folder (``kernelgap probe``, or ``probe/<name>/`` of a reproduction); ``None``
    without a ``probe.json``, an error for one that is not a probe's (:func:`read_probe_meta`)."""
    meta = read_probe_meta(folder)
    if meta is None:
        return None
    baseline = folder / (meta.get("baseline_dir") or "baseline")
    suites = [_suite(folder, baseline, meta, suite) for suite in meta["suites"]]
    out = {"name": folder.name, **{k: meta.get(k) for k in FACTS}, "suites": suites}
    ablation = read_ablation(folder)
    return {**out, "ablation": ablation} if ablation else out


def _suite(folder: Path, baseline: Path, meta: dict, suite: dict) -> dict:
    """One suite of a probe: the module's runs beside the baseline's and the twin's, read by
    the suite's criterion, with a verdict per rank."""
    sub = suite.get("folder") or suite["name"]
    counts = _counts(suite.get("ranks") or [], suite.get("features"))
    runs = sorted_by(probe_rows(folder / meta["runs"] / sub), "rank", "seed")
    for r in runs:
        r["features"] = counts.get(r["rank"])  # the true count or None, never the rank argument
    base = sorted_by(probe_rows(baseline / (suite.get("baseline_folder") or sub)), "rank", "seed")
    is_ood = suite.get("test_params") is not None
    ok = solves_test_pool if is_ood else exact
    qb, certified = suite.get("query_blind"), suite.get("certified_rank")
    recipes = recipe_rows(folder / suite["recipe_folder"], suite.get("recipes")) if suite.get("recipe_folder") else []
    twin = _twin(baseline, meta, suite, ok)
    return {
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
            {"rank": r["rank"], "seed": r["seed"], "step": r["steps"]} for r in runs if r["status"] == "diverged"
        ],
        "steps": sum(r["steps"] for r in runs),
        "wall_time_s": round(sum(r["wall_time_s"] for r in runs), 1),
        "axis": "features" if runs and all(r["features"] is not None for r in runs) else "rank argument",
        "query_blind": qb,
        "structure": suite.get("structure"),
        "verdicts": _verdicts(runs, counts, suite, recipes, base, twin),
        "recipes": [r for r, _ in recipes],
        "twin": twin,
        "runs": runs,
        "baseline": base,
    }


def _twin(baseline: Path, meta: dict, suite: dict, ok) -> dict | None:
    """The twin's runs (the built-in map of the module's kernel in the same wrapper) and its
    verdicts by feature count; ``None`` where the suite has none."""
    if not (suite.get("twin_folder") and meta.get("twin")):
        return None
    runs = sorted_by(probe_rows(baseline / suite["twin_folder"]), "rank", "seed")
    counts = _counts(suite.get("twin_ranks") or [], suite.get("twin_features"))
    for r in runs:
        r.update(features=counts.get(r["rank"]), feature_map=f"{meta['twin']} (same wrapper)")
    return {
        "map": meta["twin"],
        "runs": runs,
        "verdicts": rank_verdicts(runs, counts, suite.get("certified_rank"), suite.get("query_blind")),
        "transition_features": first_rank(runs, ok, "features"),
    }


def _verdicts(
    runs: list[dict], counts: dict, suite: dict, recipes: list, base: list[dict], twin: dict | None
) -> list[dict]:
    """The module's verdict per rank, each with the built-in baseline's at the same rank and
    the twin's at the same feature count."""
    certified, qb = suite.get("certified_rank"), suite.get("query_blind")
    verdicts = rank_verdicts(runs, counts, certified, qb, recipes, suite.get("structure"))
    base_verdicts = rank_verdicts(base, {r["rank"]: r["features"] for r in base}, certified, qb)
    for v in verdicts:
        count = v["features"] if v["features"] is not None else v["rank_argument"]
        v["baseline"] = next((b["verdict"] for b in base_verdicts if b["rank_argument"] == v["rank_argument"]), None)
        v["twin"] = next((t["verdict"] for t in (twin or {}).get("verdicts", []) if t["features"] == count), None)
        if v["twin"] is not None:
            v["twin_map"] = twin["map"]
    return verdicts


def probes_section(folder: Path) -> list[dict] | None:
    """Every probe of a reproduction's ``probe/`` folder (one folder each), skipped ones too."""
    if not folder.is_dir():
        return None
    out = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        skipped = unsealed(read_json(sub / SKIPPED))
        if isinstance(skipped, dict):
            out.append({"name": sub.name, "target": skipped.get("target"), "skipped": skipped.get("why")})
        elif (section := probe_section(sub)) is not None:
            out.append(section)
    for pr in out:
        if not pr.get("skipped") and not pr.get("ablation"):
            _explain(pr, [q for q in out if (q.get("ablation") or {}).get("ablates") == pr["name"]])
    return out or None


def _explain(pr: dict, ablations: list[dict]) -> None:
    """Each verdict of ``pr`` in :data:`EXPLAINED` gets ``ablations``: per ablation of it (a
    probe whose ``ablation.json`` names it) that trained at the same suite and rank argument,
    its name, cause, change and verdict there (``fitted`` of ``seeds`` exact, ``max_error``)."""
    for s in pr["suites"]:
        for v in s.get("verdicts") or []:
            if v["verdict"] in EXPLAINED:
                found = [(q, _verdict_at(q, s["name"], v["rank_argument"])) for q in ablations]
                v["ablations"] = [
                    {
                        "name": q["name"],
                        **q["ablation"],
                        **{k: u[k] for k in ("verdict", "fitted", "seeds", "max_error")},
                    }
                    for q, u in found
                    if u is not None
                ]


def _verdict_at(pr: dict, suite: str, rank: int) -> dict | None:
    """``pr``'s verdict on the suite named ``suite`` at rank argument ``rank``, or None."""
    verdicts = [v for s in pr["suites"] if s["name"] == suite for v in s.get("verdicts") or []]
    return next((v for v in verdicts if v["rank_argument"] == rank), None)


def section(results) -> list[dict] | None:
    return probes_section(results.folder("probe"))
