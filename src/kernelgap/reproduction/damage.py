"""Every problem of the files a report is built from: the one check ``report`` refuses by
and ``check`` lists, so the two never disagree (docs/formats.md, "Verifying a results
folder").  Each is one line ``<path>: <why>``, relative to the folder; nothing is changed.
``valid``: the sweep runner's check of a record, given by callers that may import it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import KernelgapError
from ..experiments.probe.record import SKIPPED, read_probe_meta
from ..folders import link_problems
from ..io import read_json
from ..report.integrity import folder_problems, sealed_problem
from .record import META, SEALED, invocations, read_meta
from .summary import reproduction_experiments


def folder_damage(
    root: str | Path, valid: Callable[[dict, str], bool] | None = None, meta: dict | None = None
) -> list[str]:
    """Every problem of ``root``'s sweep folders, step files and probe records, and every link
    below it; ``meta``: its ``reproduce.json``, where read already."""
    root = Path(root)
    links = [why.removeprefix(f"{root}/") for why in link_problems(root)]
    return links + folder_problems(root, valid) + step_problems(root, meta) + probe_problems(root)


def step_problems(root: Path, meta: dict | None = None) -> list[str]:
    """Each step file of a reproduction folder that is missing or damaged (without a checksum
    allowed where no :data:`SEALED` says otherwise), and a ``reproduce.json`` gone from under
    its summary.  An unreadable ``reproduce.json`` is left to the report's own refusal.  One
    without a checksum is trusted only where it agrees with the ``summary.json`` built from it
    (profile, number of invocations)."""
    summary = read_json(root / "summary.json")
    built = isinstance(summary, dict)
    said = (summary.get("invocations") or summary.get("commands") or []) if built else []
    if not (root / META).is_file():
        return [f"{META}: missing, while summary.json lists its invocations"] if said else []
    try:
        meta = read_meta(root) if meta is None else meta
        experiments = reproduction_experiments(meta)
    except KernelgapError:
        return []
    out = []
    agrees = built and summary.get("profile", meta.get("profile")) == meta.get("profile")
    if built and "record_sha256" not in meta and not (agrees and len(said) == len(invocations(meta))):
        out.append(f"{META}: carries no checksum and disagrees with summary.json (profile or invocations); restore it")
    files = [f"{exp.name}/{exp.writes}" for exp in experiments if exp.writes and (root / exp.name).is_dir()]
    files += [p.relative_to(root).as_posix() for p in sorted(root.glob(f"*/*/{SKIPPED}"))]  # a probe skipped
    required = meta.get(SEALED) is True
    return out + [f"{file}: {why}" for file in files if (why := sealed_problem(root / file, required))]


def probe_problems(root: Path) -> list[str]:
    """Each ``probe.json`` under ``root`` that a report would refuse."""
    out = []
    for path in sorted(root.rglob("probe.json")) if root.is_dir() else ():
        try:
            read_probe_meta(path.parent)
        except KernelgapError as exc:
            why = str(exc).removeprefix(str(path)).lstrip(": ")
            out.append(f"{path.relative_to(root).as_posix()}: {why}")
    return out
