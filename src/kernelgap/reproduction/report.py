"""``kernelgap report DIR``: ``summary.json``, its schema, figures and ``report.html`` of a
reproduction folder or of a probe folder, from the result files alone (no training).

A report is refused while any file it is built from is damaged (:func:`folder_damage`), the
one check ``check`` lists too, so the two never disagree (docs/formats.md, "Verifying a
results folder"): each problem one line ``<path>: <why>``, relative to the folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from .. import __version__
from ..errors import KernelgapError
from ..experiments.probe.page import render_probe_report
from ..experiments.probe.section import SKIPPED, probe_section, read_probe_meta
from ..folders import check_out, link_problems, refuse_links
from ..io import atomic_write_json, atomic_write_text, read_json
from ..report.integrity import folder_problems, one_line, sealed_problem
from ..validation import JsonNumber, fits
from .record import META, SEALED, invocations, read_meta
from .render import render_report
from .schema import summary_schema
from .summary import build_summary, feature_maps, reproduction_experiments

#: A further check of a run record (``(record, run id) → sound``).
Valid = Callable[[dict, str], bool]
#: What ``report`` writes into a folder (besides ``figures/``).
WRITES = ("summary.json", "summary.schema.json", "report.html")


def build_report(out: str | Path, profile: str | None = None, log=print, valid: Valid | None = None) -> Path:
    """``summary.json``, its schema and ``report.html`` of a reproduction folder, refused while a
    result file is damaged (a summary never counts fewer runs than planned)."""
    out = Path(out)
    refuse_links(out)
    meta = read_meta(out)
    refuse_damage(out, valid, meta)
    summary = build_summary(out, meta, profile)
    if summary["wall_time_s"] is None:  # a folder whose runs recorded no time: keep the last report's
        last = read_json(out / "summary.json")
        wall = last.get("wall_time_s") if isinstance(last, dict) else None
        if fits(JsonNumber, wall):
            summary["wall_time_s"] = wall
    experiments = reproduction_experiments(meta)
    schema = json.dumps(summary_schema(experiments), indent=1) + "\n"
    return write_report(out, summary, lambda: render_report(summary, out, experiments), log, schema)


def is_probe_folder(out: Path) -> bool:
    """Whether ``out`` is a probe folder: a ``probe.json`` and no ``reproduce.json``."""
    return (out / "probe.json").is_file() and not (out / META).is_file()


def report_folder(out: str | Path, log=print, valid: Valid | None = None) -> Path:
    """``kernelgap report DIR``: the report of a probe folder or of a reproduction folder."""
    out = check_out(out, "report")
    return build_probe_report(out, log, valid) if is_probe_folder(out) else build_report(out, log=log, valid=valid)


def refuse_damage(out: Path, valid: Valid | None = None, meta: dict | None = None) -> None:
    """One line naming the damaged or missing files a report would be built from
    (:func:`folder_damage`, what ``check`` lists), if any; first, any symbolic link
    in the folder (the report writes through none)."""
    refuse_links(out)
    problems = folder_damage(out, valid, meta)
    if problems:
        raise KernelgapError(
            f"{out} has {len(problems)} missing or damaged result file(s), so summary.json is left as it "
            f"was: {one_line(problems)}; `kernelgap sweep` on the sweep folder (or `kernelgap reproduce`) "
            f"redoes them, `kernelgap check {out}` lists them all"
        )


def in_the_way(out: Path) -> list[str]:
    """The report's own outputs that something else occupies (a folder where a file goes, or the reverse)."""
    return [
        name for name in (*WRITES, "figures") if (out / name).exists() and (out / name).is_dir() != (name == "figures")
    ]


def write_report(out: Path, summary: dict, render: Callable[[], str], log, schema: str | None = None) -> Path:
    """``summary.json``, ``summary.schema.json`` (given a ``schema``) and ``report.html``
    (``render()``), once every one can be written; any write failure is one line."""
    try:
        for name in in_the_way(out):
            raise KernelgapError(f"{out / name} is in the way of the report; move it away and run again")
        probe = out / f".report-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        atomic_write_json(out / "summary.json", summary)
        if schema is not None:
            atomic_write_text(out / "summary.schema.json", schema)
        report = atomic_write_text(out / "report.html", render())
    except OSError as exc:
        raise KernelgapError(f"cannot write the report into {out}: {exc.strerror or exc}") from None
    log(f"summary: {out / 'summary.json'}\nreport:  {report}")
    return report


def build_probe_report(out: str | Path, log=print, valid: Valid | None = None) -> Path:
    """``summary.json`` (``{"probes": [one]}``), figures and ``report.html`` for a probe folder."""
    out = Path(out)
    read_probe_meta(out)  # a damaged probe.json refused first, by its own line (the key, as read)
    refuse_damage(out, valid)
    summary = probe_summary(out)
    return write_report(out, summary, lambda: render_probe_report(summary, out), log)


def probe_summary(out: Path) -> dict:
    """What a probe folder's ``summary.json`` holds, from its result files alone."""
    probe = probe_section(out)
    if probe is None:
        raise KernelgapError(f"{out} holds no probe (no probe.json); run `kernelgap probe … --out {out}`")
    if not any(s["runs"] or s["baseline"] for s in probe["suites"]):
        raise KernelgapError(f"{out} holds no probe results (probe.json names no suite with runs)")
    return {
        "version": __version__,
        "profile": probe.get("profile"),
        "probes": [probe],
        "feature_maps": feature_maps(out),
    }


def summary_drift(out: str | Path) -> list[str]:
    """``summary.json`` against the summary ``report`` would write now: each top-level key
    that differs (the version aside), or the one line saying why none can be built; an output
    something else occupies (:func:`in_the_way`) first.  Read-only."""
    out = Path(out)
    probe = is_probe_folder(out)
    stored = read_json(out / "summary.json")
    if not (probe or (out / META).is_file() or (out / "summary.json").exists()):
        return []
    blocked = [f"{name}: in the way of the report; move it away" for name in in_the_way(out)]
    if blocked:
        return blocked
    profile = stored.get("profile") if isinstance(stored, dict) else None
    try:
        rebuilt = json.loads(json.dumps(probe_summary(out) if probe else build_summary(out, read_meta(out), profile)))
    except (KernelgapError, ValueError) as exc:
        return [f"summary.json: cannot be rebuilt from the result files ({' '.join(str(exc).split())})"]
    if not isinstance(stored, dict):
        return []  # missing or unreadable: named elsewhere
    if "wall_time_s" in rebuilt and rebuilt["wall_time_s"] is None:  # as `report` keeps it
        rebuilt["wall_time_s"] = stored.get("wall_time_s")
    gone = object()  # a key renamed: absent on one side, even where the other's value is null
    keys = sorted(
        k for k in set(stored) | set(rebuilt) if k != "version" and stored.get(k, gone) != rebuilt.get(k, gone)
    )
    return [
        f"summary.json: {k[:40]!r} is not what the result files give (edited, or results changed since `report`)"
        for k in keys
    ]


def folder_damage(root: str | Path, valid: Valid | None = None, meta: dict | None = None) -> list[str]:
    """Every problem of ``root``'s sweep folders, step files and probe records, and every link
    below it; ``meta``: its ``reproduce.json``, where read already."""
    root = Path(root)
    links = [why.removeprefix(f"{root}/") for why in link_problems(root)]
    return links + folder_problems(root, valid) + step_problems(root, meta) + probe_problems(root)


def step_problems(root: Path, meta: dict | None = None) -> list[str]:
    """Each damaged step file (without a checksum allowed unless :data:`SEALED`), and a
    ``reproduce.json`` gone from under its summary, or without a checksum and disagreeing with
    it (profile, invocations); an unreadable one is left to the report's own refusal."""
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
