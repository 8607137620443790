"""``summary.json``: every number of a reproduction, read from its result files.  Each
registered experiment's ``section`` reads its folder into its key; this module assembles.
"""

from __future__ import annotations

from pathlib import Path

from .. import __version__
from ..errors import KernelgapError
from ..experiments.registry import experiments as registered
from ..io import read_json
from ..report.criteria import Results
from ..validation import JsonNumber, fits
from .record import META, invocations

#: Schema version of summary.json (bump on incompatible changes).
SCHEMA_VERSION = 3


def merge(sections: dict, key: str, value) -> None:
    """Put an experiment's section under ``key``; experiments sharing a key merge their dicts."""
    if key not in sections or sections[key] is None:
        sections[key] = value
    elif value is not None:
        sections[key] = {**sections[key], **value}


def build_sections(root: str | Path, experiments=None) -> dict:
    """``{key: value}`` of every registered experiment's section, in registry order."""
    exps = registered() if experiments is None else list(experiments)
    results = Results(root, exps)
    sections: dict = {}
    for exp in exps:
        if exp.section is not None:
            merge(sections, exp.summary_key, exp.section(results))
    return sections


def paper(experiments) -> dict:
    return {k: v for exp in experiments for k, v in exp.paper.items()}


def reproduction_experiments(meta: dict) -> list:
    """The experiments of a reproduction: the built-in ones and its profile's own."""
    try:
        return registered(meta.get("user_experiments"))
    except KernelgapError as exc:
        raise KernelgapError(
            f"{exc} (recorded in {META}: rerun `kernelgap reproduce` with the profile where it is now)"
        ) from None


def build_summary(root: str | Path, meta: dict, profile: str | None = None) -> dict:
    """Assemble ``summary.json`` for a reproduction folder whose ``reproduce.json`` is ``meta``."""
    root = Path(root)
    if not root.is_dir():
        raise KernelgapError(f"results folder {root} does not exist")
    exps = reproduction_experiments(meta)
    sections = build_sections(root, exps)
    if not any(sections.values()):
        raise KernelgapError(f"{root} holds no reproduction results (no experiment folder with runs)")
    runs = invocations(meta)
    times = [i["wall_time_s"] for i in runs if i.get("wall_time_s") is not None]
    return {
        "schema_version": SCHEMA_VERSION,
        "version": __version__,
        "profile": profile or meta.get("profile", "unknown"),
        "commands": [i["command"] for i in runs],
        "invocations": runs,
        "wall_time_s": round(sum(times), 1) if times else None,
        "timing": timing(root, runs, exps),
        **sections,
        "paper": paper(exps),
        "feature_maps": feature_maps(root),
    }


def timing(root: Path, runs: list[dict], experiments) -> dict:
    """Where a reproduction's time went, summed over its invocations: the sweeps phase and,
    per experiment, its runs, their training (``train_s``: worker seconds, each stack once,
    at its slowest member's time) and its step's wall time."""
    per: dict[str, dict] = {}
    for exp in experiments:
        records = list(_records(root / exp.name))
        stacks: dict = {}
        for path, record in records:
            if fits(JsonNumber, record.get("wall_time_s")):
                where = record.get("checkpoint")
                file = where.get("file") if isinstance(where, dict) else None
                key = path.parents[1] / file if isinstance(file, str) else path
                stacks[key] = max(stacks.get(key, 0.0), record["wall_time_s"])
        step = [i["steps_s"][exp.name] for i in runs if exp.name in (i.get("steps_s") or {})]
        if records or step:
            per[exp.name] = {
                "runs": len(records),
                "train_s": round(sum(stacks.values()), 1),
                "step_s": round(sum(step), 1),
            }
    sweeps = [i["sweeps_s"] for i in runs if i.get("sweeps_s") is not None]
    return {"sweeps_s": round(sum(sweeps), 1), "experiments": per}


def _records(folder: Path):
    """``(path, record)`` of every readable run record under ``folder``."""
    for path in sorted(folder.rglob("runs/*.json")) if folder.is_dir() else ():
        record = read_json(path)
        if isinstance(record, dict):
            yield path, record


def feature_maps(root: Path) -> dict:
    """The facts (colour, citation, learning rate) of every feature map trained under ``root``."""
    out = {}
    for _, record in _records(root):
        facts = record.get("map_facts")
        if isinstance(facts, dict) and isinstance(facts.get("name"), str):
            out.setdefault(facts["name"], facts)
    return dict(sorted(out.items()))
