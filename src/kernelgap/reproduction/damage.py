"""Every problem of the files a report is built from: the one check ``report`` refuses by
and ``check`` lists, so the two never disagree (docs/formats.md, "Verifying a results
folder").

:func:`folder_damage` joins each sweep folder's problems
(:func:`~kernelgap.report.integrity.folder_problems`; ``valid``: the sweep runner's own check
of a record, its config hashed to its id, :func:`kernelgap.sweeps.store.is_valid_record`,
given by the callers that may import it: this layer reads files only), each file an experiment's after-sweep step wrote
(:func:`step_problems`) and each ``probe.json`` (:func:`probe_problems`).  Nothing is
changed; every problem is one line ``<path>: <why>``, the path relative to the folder.
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
    """Every problem of ``root``'s sweep folders, step files and probe records, and every
    link below it (:func:`~kernelgap.folders.link_problems`: no command writes through one);
    ``meta``: its ``reproduce.json`` where the caller has read it already."""
    root = Path(root)
    links = [why.removeprefix(f"{root}/") for why in link_problems(root)]
    return links + folder_problems(root, valid) + step_problems(root, meta) + probe_problems(root)


def step_problems(root: Path, meta: dict | None = None) -> list[str]:
    """The file each experiment's step writes (``Experiment.writes``) in a reproduction
    folder, wherever the experiment's folder is: missing, a folder, not JSON or altered
    (:func:`~kernelgap.report.integrity.sealed_problem`).  A folder an older kernelgap made
    (no :data:`SEALED` in ``reproduce.json``) may hold files without a checksum (the
    ``skipped.json`` of a profile's probe whose library is missing is checked alike); a
    ``reproduce.json`` deleted from under a summary built from it is missing.  A
    ``reproduce.json`` that cannot be read is left to the report's own refusal; ``meta``: it,
    read already."""
    if not (root / META).is_file():
        return [f"{META}: missing, while summary.json lists its invocations"] if _lost_meta(root) else []
    try:
        meta = read_meta(root) if meta is None else meta
        experiments = reproduction_experiments(meta)
    except KernelgapError:
        return []
    required = meta.get(SEALED) is True
    out = [] if "record_sha256" in meta else _unsealed_meta(root, meta)
    for exp in experiments:
        if exp.writes and (root / exp.name).is_dir():
            why = sealed_problem(root / exp.name / exp.writes, required)
            out += [f"{exp.name}/{exp.writes}: {why}"] if why else []
    for path in sorted(root.glob(f"*/*/{SKIPPED}")):  # a profile's probe whose library is missing
        why = sealed_problem(path, required)
        out += [f"{path.relative_to(root).as_posix()}: {why}"] if why else []
    return out


def probe_problems(root: Path) -> list[str]:
    """Each ``probe.json`` under ``root`` that a report would refuse
    (:func:`~kernelgap.experiments.probe.record.read_probe_meta`: not JSON, not a probe
    record, altered, naming a folder outside its own)."""
    out = []
    for path in sorted(root.rglob("probe.json")) if root.is_dir() else ():
        try:
            read_probe_meta(path.parent)
        except KernelgapError as exc:
            why = str(exc).removeprefix(str(path)).lstrip(": ")
            out.append(f"{path.relative_to(root).as_posix()}: {why}")
    return out


def _unsealed_meta(root: Path, meta: dict) -> list[str]:
    """A ``reproduce.json`` without a checksum (an older kernelgap's, or one edited by hand)
    is trusted only where it agrees with the ``summary.json`` built from it: the same profile
    and as many invocations.  Otherwise a report rebuilt now would rewrite them."""
    summary = read_json(root / "summary.json")
    if not isinstance(summary, dict):
        return []
    said = summary.get("invocations") or summary.get("commands") or []
    if summary.get("profile", meta.get("profile")) == meta.get("profile") and len(said) == len(invocations(meta)):
        return []
    return [f"{META}: carries no checksum and disagrees with summary.json (profile or invocations); restore it"]


def _lost_meta(root: Path) -> bool:
    """Whether ``reproduce.json`` is gone from a folder whose ``summary.json`` was built from
    one (it lists invocations): a report rebuilt now would drop them."""
    summary = read_json(root / "summary.json")
    return isinstance(summary, dict) and bool(summary.get("invocations") or summary.get("commands"))
