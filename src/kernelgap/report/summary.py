"""``summary.json``: every number of a reproduction, read from its result files.

A reproduction folder holds one folder per experiment (``runs/<id>.json`` records and
the files its after-sweep step wrote).  Each registered experiment's ``section`` reads
them into its key of the summary (:mod:`kernelgap.experiments.registry`); this module
only assembles.  Schema: :func:`kernelgap.report.schema.summary_schema`.
"""

from __future__ import annotations

from pathlib import Path

from .. import __version__
from ..errors import KernelgapError
from ..experiments.registry import experiments as registered
from ..io import read_json
from .context import Results

#: Schema version of summary.json (bump on incompatible changes).
SCHEMA_VERSION = 3


def invocations(meta: dict) -> list[dict]:
    """Every recorded invocation of a reproduction (folders of older versions list commands only)."""
    return meta.get("invocations") or [{"command": c} for c in meta.get("commands", [])]


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
    """What the paper reports, as each experiment keeps it."""
    return {k: v for exp in experiments for k, v in exp.paper.items()}


def reproduction_experiments(meta: dict) -> list:
    """The experiments of a reproduction: the built-in ones and its profile's own."""
    try:
        return registered(meta.get("user_experiments"))
    except KernelgapError as exc:
        raise KernelgapError(f"{exc} (recorded in reproduce.json: rerun `kernelgap reproduce` with the profile "
                             "where it is now)") from None


def build_summary(root: str | Path, profile: str | None = None) -> dict:
    """Assemble ``summary.json`` for a reproduction folder."""
    root = Path(root)
    if not root.is_dir():
        raise KernelgapError(f"results folder {root} does not exist")
    meta = read_json(root / "reproduce.json") or {}
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
        **sections,
        "paper": paper(exps),
        "feature_maps": feature_maps(root),
    }


def feature_maps(root: Path) -> dict:
    """The facts (colour, citation, learning rate) of every feature map a run under ``root``
    trained, as its record states them: figures colour each map by its own fact."""
    out = {}
    for path in sorted(root.rglob("runs/*.json")):
        facts = (read_json(path) or {}).get("map_facts")
        if isinstance(facts, dict) and isinstance(facts.get("name"), str):
            out.setdefault(facts["name"], facts)
    return dict(sorted(out.items()))
